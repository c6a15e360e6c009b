"""``qsimdist amplitude FILE B1..B4 --dtype complex128`` against Aer, side by side.

    python -m benchmarks.revlib [--rounds 3] [--seed 43] [FILE.qasm ...] [--data DIR]

Without files: every ``circuits/revlib/*.qasm`` of the reference data folder
(``--data``, default ``$QSIMDIST_SHARED_DATA`` or ``../shared/data``).

For each file, four random bitstrings (seeded). Each round runs, each in a fresh
process and alternating which goes first, the CLI (``python -m qsimdist amplitude
FILE B1 B2 B3 B4 --dtype complex128``) and Aer: ``qasm2.load``, ``qiskit.transpile``
to AerSimulator's basis (optimization level ``--aer-opt``, default 0),
``AerSimulator(method="statevector", max_parallel_threads=--aer-threads)`` with
``save_statevector``, the four amplitudes read from the state. Reported: the whole
process's wall time (parent's clock around the subprocess, imports included) for
both, Aer's time inside around the work (load to amplitudes), the medians, the
ratio qsimdist / Aer, and the largest difference of the amplitudes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

_AER = """
import json, sys, time
t0 = time.perf_counter()
import qiskit, qiskit.qasm2 as qasm2
from qiskit_aer import AerSimulator
t1 = time.perf_counter()
path, OPT, THREADS, bits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
sim = AerSimulator(method="statevector", max_parallel_threads=THREADS)
qc = qasm2.load(path, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
qc.remove_final_measurements()
qc = qiskit.transpile(qc, sim, optimization_level=OPT)
qc.save_statevector()
state = sim.run(qc).result().get_statevector().data
amps = [[state[int(b, 2)].real, state[int(b, 2)].imag] for b in bits]
print(json.dumps({"work": time.perf_counter() - t1, "amps": amps}))
"""


def _qsimdist(path: str, bits: list[str]) -> tuple[float, list[complex]]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "qsimdist", "amplitude", path, *bits,
                          "--dtype", "complex128"], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    amps = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in bits:
            amps.append(complex(parts[1] + parts[2].replace(" ", "")))
    return wall, amps


def _aer(path: str, bits: list[str], opt: int,
         threads: int) -> tuple[float, float, list[complex]]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _AER, path, str(opt), str(threads), *bits],
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, res["work"], [complex(*a) for a in res["amps"]]


def _width(path: str) -> int:
    """The circuit's qubit count, from its ``qreg`` declarations."""
    import qiskit.qasm2 as qasm2

    return qasm2.load(path, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS).num_qubits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--data", default=os.environ.get("QSIMDIST_SHARED_DATA", "../shared/data"),
                    help="reference data folder, read when no FILE is given")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--aer-opt", type=int, default=0,
                    help="optimization_level of qiskit.transpile for Aer (default 0: only the "
                         "basis translation; Qiskit's default 2 took 3-45 s on these files)")
    ap.add_argument("--aer-threads", type=int, default=0,
                    help="AerSimulator's max_parallel_threads (default 0: Aer's own choice)")
    args = ap.parse_args()
    if not args.files:
        args.files = sorted(str(p) for p in (Path(args.data) / "circuits" / "revlib").glob(
            "*.qasm"))
        if not args.files:
            ap.error(f"no FILE given and no circuits/revlib/*.qasm under {args.data}")
    print("| file | qsimdist CLI wall s (median; runs) | Aer wall s (median; runs) | "
          "Aer work s (median) | qsimdist/Aer wall | max abs diff |")
    print("|---|---|---|---|---|---|")
    for path in args.files:
        rng = random.Random(args.seed)
        width = _width(path)
        bits = ["".join(rng.choice("01") for _ in range(width)) for _ in range(4)]
        q, a, aw, diff = [], [], [], 0.0
        for r in range(args.rounds):
            order = ("q", "a") if r % 2 == 0 else ("a", "q")
            for who in order:
                if who == "q":
                    wall, qa = _qsimdist(path, bits)
                    q.append(wall)
                else:
                    wall, work, aa = _aer(path, bits, args.aer_opt, args.aer_threads)
                    a.append(wall)
                    aw.append(work)
            diff = max(diff, max(abs(x - y) for x, y in zip(qa, aa)))
        name = path.rsplit("/", 1)[-1]
        print(f"| {name} | {statistics.median(q):.2f} ({', '.join(f'{x:.2f}' for x in q)}) | "
              f"{statistics.median(a):.2f} ({', '.join(f'{x:.2f}' for x in a)}) | "
              f"{statistics.median(aw):.2f} | {statistics.median(q) / statistics.median(a):.2f} "
              f"| {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
