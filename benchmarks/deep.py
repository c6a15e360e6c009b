"""Deep, narrow circuits: qsimdist end to end against Aer's statevector, side by side.

    python -m benchmarks.deep [--data ../shared/data] [--repeats 3] [--files a,b]
    python -m benchmarks.deep --planning-plot docs/planning_time.png

For each RevLib circuit in ``DATA/circuits/revlib/``:

1. the reference: Qiskit's ``Statevector`` of the file (complex128, untimed);
   four bitstrings are picked from it, the two largest amplitudes and two
   seeded random ones;
2. ``repeats`` rounds, each running, in fresh processes one after the other
   (the order alternates between rounds), ``qsimdist.amplitudes(FILE, four
   bitstrings, dtype="complex128")`` and Aer's ``AerSimulator(method=
   "statevector")`` with ``save_statevector`` on the same file. Each process
   times from before reading the file until the four amplitudes are in hand
   (imports excluded for both); the median of each is reported with the ratio;
3. the largest deviation of qsimdist's four amplitudes (and Aer's) from the
   reference.

``--planning-plot`` times the planning of the route ``amplitudes`` takes for
random 16-qubit circuits of 10^3 to 2x10^5 gates (route choice and gate
fusion; the statevector route has no path search) and plots it against the
gate count with a least-squares slope in log-log.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FILES = ("square_root_7", "hwb7_59", "urf2_152")

_QSIMDIST_RUN = """
import json, sys, time
import numpy as np
import qsimdist
path, bits = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
res = qsimdist.amplitudes(path, bits, dtype="complex128")
t1 = time.perf_counter()
amps = [[complex(a).real, complex(a).imag] for a in res.amplitudes]
print(json.dumps({"seconds": t1 - t0, "amplitudes": amps, "method": res.stats["method"],
                  "plan_seconds": res.stats["plan_seconds"],
                  "execute_seconds": res.stats["execute_seconds"],
                  "fusion": res.stats.get("fusion")}))
"""

_AER_RUN = """
import json, sys, time
import qiskit.qasm2 as qasm2
from qiskit_aer import AerSimulator
path, bits = sys.argv[1], json.loads(sys.argv[2])
sim = AerSimulator(method="statevector")
t0 = time.perf_counter()
qc = qasm2.load(path, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
qc.remove_final_measurements()
qc.save_statevector()
state = sim.run(qc).result().get_statevector().data
amps = [[state[int(b, 2)].real, state[int(b, 2)].imag] for b in bits]
t1 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "amplitudes": amps}))
"""


def _run(code: str, path: Path, bits: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", code, str(path), json.dumps(bits)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def reference(path: Path, seed: int = 0) -> tuple[list[str], np.ndarray, int]:
    """Four bitstrings (two largest amplitudes, two seeded random) and their reference values."""
    import qiskit.qasm2 as qasm2
    from qiskit.quantum_info import Statevector

    qc = qasm2.load(str(path), custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    qc.remove_final_measurements()
    state = Statevector(qc).data
    n = qc.num_qubits
    top = np.argsort(-np.abs(state), kind="stable")[:2]
    rng = np.random.default_rng(seed)
    rest = rng.choice(np.setdiff1d(np.arange(state.size), top), 2, replace=False)
    idx = [int(i) for i in (*top, *rest)]
    return [format(i, f"0{n}b") for i in idx], state[idx], len(qc.data)


def deep(data: Path, files: list[str], repeats: int) -> list[dict]:
    rows = []
    for name in files:
        path = data / "circuits" / "revlib" / f"{name}.qasm"
        t = time.perf_counter()
        bits, ref, n_gates = reference(path)
        ref_seconds = time.perf_counter() - t
        ours, aer = [], []
        for r in range(repeats):
            pair = [("q", _QSIMDIST_RUN), ("a", _AER_RUN)]
            for who, code in (pair if r % 2 == 0 else pair[::-1]):
                res = _run(code, path, bits)
                (ours if who == "q" else aer).append(res)
        dev_q = max(float(np.abs(np.array([complex(*a) for a in res["amplitudes"]]) - ref).max())
                    for res in ours)
        dev_a = max(float(np.abs(np.array([complex(*a) for a in res["amplitudes"]]) - ref).max())
                    for res in aer)
        tq = [x["seconds"] for x in ours]
        ta = [x["seconds"] for x in aer]
        row = {"file": name, "gates": n_gates, "bitstrings": bits,
               "reference_seconds": ref_seconds,
               "qsimdist_seconds": tq, "aer_seconds": ta,
               "qsimdist_median": statistics.median(tq), "aer_median": statistics.median(ta),
               "ratio_aer_over_qsimdist": statistics.median(ta) / statistics.median(tq),
               "max_deviation_qsimdist": dev_q, "max_deviation_aer": dev_a,
               "method": ours[0]["method"], "fusion": ours[0]["fusion"],
               "qsimdist_plan_seconds": [x["plan_seconds"] for x in ours],
               "qsimdist_execute_seconds": [x["execute_seconds"] for x in ours]}
        rows.append(row)
        print(f"{name}: {n_gates} gates, qsimdist {row['qsimdist_median']:.2f} s "
              f"({', '.join(f'{x:.2f}' for x in tq)}), Aer {row['aer_median']:.2f} s "
              f"({', '.join(f'{x:.2f}' for x in ta)}), Aer/qsimdist "
              f"{row['ratio_aer_over_qsimdist']:.2f}, max |dev| qsimdist {dev_q:.1e} Aer "
              f"{dev_a:.1e}, method {row['method']}, fusion {row['fusion']}", flush=True)
    return rows


def random_circuit(n_qubits: int, n_gates: int, seed: int = 0):
    """A seeded random circuit of H, T, S, RZ, SX one-qubit gates and CX, CZ two-qubit gates."""
    from qsimdist.frontends import GateCircuit

    rng = np.random.default_rng(seed)
    s2 = 1 / math.sqrt(2)
    one = [np.array([[s2, s2], [s2, -s2]]), np.diag([1, np.exp(1j * math.pi / 4)]),
           np.diag([1, 1j]), np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2]
    cx = np.eye(4)[[0, 1, 3, 2]]
    cz = np.diag([1, 1, 1, -1])
    gc = GateCircuit(n_qubits, name=f"random_{n_qubits}_{n_gates}")
    for _ in range(n_gates):
        if rng.random() < 0.5:
            a, b = rng.choice(n_qubits, 2, replace=False)
            gc.append(cx if rng.random() < 0.7 else cz, (int(a), int(b)), "cx")
        elif rng.random() < 0.2:
            gc.append(np.diag(np.exp(1j * rng.uniform(-1, 1, 2))), (int(rng.integers(n_qubits)),),
                      "rz")
        else:
            gc.append(one[rng.integers(len(one))], (int(rng.integers(n_qubits)),), "g")
    return gc


def planning(sizes: list[int], repeats: int) -> list[dict]:
    """Planning seconds (route choice + fusion) of random 16-qubit circuits, median of repeats."""
    from qsimdist.api import choose_route
    from qsimdist.frontends.fusion import fuse

    rows = []
    for size in sizes:
        gc = random_circuit(16, size, seed=size)
        bits = [format(i * 4099 % (1 << 16), "016b") for i in range(4)]
        times, route = [], None
        for _ in range(repeats):
            t = time.perf_counter()
            route = choose_route(gc, bits, dtype="complex128")
            if route.method == "statevector":
                fuse(gc, route.fusion_width, keep_diagonal=False)
            times.append(time.perf_counter() - t)
        rows.append({"gates": size, "seconds": times, "median": statistics.median(times),
                     "method": route.method, "fusion_width": route.fusion_width})
        print(f"{size} gates: planning {statistics.median(times):.3f} s ({route.method}, "
              f"width {route.fusion_width})", flush=True)
    return rows


def plot(rows: list[dict], out: Path) -> float:
    """Plot planning time against gates (log-log) and return the fitted exponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.array([r["gates"] for r in rows], dtype=float)
    y = np.array([r["median"] for r in rows], dtype=float)
    slope, icpt = np.polyfit(np.log10(x), np.log10(y), 1)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(x, y, "o-", label="measured (median)")
    ax.loglog(x, 10**icpt * x**slope, "--", label=f"fit: time ~ gates^{slope:.2f}")
    ax.loglog(x, y[0] * x / x[0], ":", color="gray", label="linear from the first point")
    ax.set_xlabel("gates (random 16-qubit circuits)")
    ax.set_ylabel("planning seconds (route choice + fusion)")
    ax.set_title("qsimdist.amplitudes planning time against gate count")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return float(slope)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--planning-plot", default=None, help="write the planning-time plot here "
                    "(and skip the RevLib comparison)")
    ap.add_argument("--sizes", default="1000,3000,10000,30000,100000,200000")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    out: dict = {}
    if args.planning_plot:
        rows = planning([int(s) for s in args.sizes.split(",")], args.repeats)
        out["planning"] = rows
        out["planning_exponent"] = plot(rows, Path(args.planning_plot))
        print(f"fitted exponent {out['planning_exponent']:.2f}; plot {args.planning_plot}")
    else:
        out["deep"] = deep(Path(args.data), [f for f in args.files.split(",") if f],
                           args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
