"""This checkout beside another commit's, side by side: the primitives, the statevector
route and one contraction on the same path, each timed warm in its own fresh process.

    git worktree add /tmp/old a896c5d
    python -m benchmarks.before_after --old /tmp/old [--rounds 3] [--json FILE]

Each case runs in a fresh process per checkout (``PYTHONPATH`` set to that
checkout's root, so ``import qsimdist`` loads its code), alternating old and new,
``--rounds`` times; a process makes the call once to warm (compilation, path
search, caches) and times the next ``REPEATS`` calls, keeping the best. The
reported ratio is new / old of the best over the rounds. Only the public API is
used (``qsimdist.amplitudes``, ``qsimdist.qiskit``), which both commits have.

Cases:

- ``sampler-brick20``: ``SamplerV2``, 4,000 shots of a 20-qubit depth-8 random
  brickwork circuit (the statevector route).
- ``estimator-brick20``: ``EstimatorV2``, every Z_i and Z_i Z_{i+1} on it.
- ``sampler-ghz40`` / ``estimator-brick50``: wide circuits (tensor networks): a
  40-qubit GHZ sampled 1,000 times; a 50-qubit depth-4 brickwork's Z_i Z_{i+1}.
- ``statevector-q24``: one amplitude of a 24-qubit depth-12 brickwork, ``method=
  "statevector"``.
- ``contract-n30``: one amplitude of Google's n30m14 circuit (``../shared/data``)
  by tensor network, a seeded path search with 8 trials, so that both checkouts
  contract the same path (the plan's FLOPs are printed to show it).
- ``sampler-dynamic12``: ``SamplerV2``, 2,000 shots of a 12-qubit circuit with
  mid-circuit measurements, a reset and ``if_test`` blocks (the dynamic-circuit route).
- ``estimator-dynamic12``: ``EstimatorV2``, every Z_i of that circuit without its final
  measurements.
- ``estimator-w17``: ``EstimatorV2``, IBM's 127-qubit kicked-Ising ⟨W17⟩ after 5 steps at
  θ_h = 0.8 (``../shared/data``'s Eagle coupling map), warm: the doubled route on its plan.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3

_PRELUDE = r"""
import json, sys, time
import numpy as np
from qiskit import QuantumCircuit

def brick(n, depth, seed):
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for layer in range(depth):
        for q in range(n):
            qc.u(*rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, n - 1, 2):
            qc.cx(q, q + 1)
    return qc

def dynamic(n, seed):
    # a brickwork with mid-circuit measurements, a reset and classically conditioned gates
    qc = brick(n, 4, seed)
    from qiskit import ClassicalRegister
    creg = ClassicalRegister(n, "c"); qc.add_register(creg)
    qc.measure(0, creg[0]); qc.measure(n // 2, creg[1])
    with qc.if_test((creg[0], 1)):
        qc.x(1)
    qc.reset(n // 2)
    with qc.if_test((creg[1], 0)):
        qc.h(n - 1)
    for q in range(0, n - 1, 2):
        qc.cx(q, q + 1)
    return qc

def best(call, repeats):
    call()  # warm: compilation, path search, caches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
    return min(times), out
"""

CASES = {
    "sampler-brick20": r"""
from qsimdist.qiskit import SamplerV2
qc = brick(20, 8, 1); qc.measure_all()
s = SamplerV2(seed=7)
t, _ = best(lambda: s.run([qc], shots=4000).result(), REPEATS)
print(json.dumps({"seconds": t}))
""",
    "estimator-brick20": r"""
from qiskit.quantum_info import SparsePauliOp
from qsimdist.qiskit import EstimatorV2
n = 20; qc = brick(n, 8, 2)
labels = ["I" * (n - 1 - i) + "Z" + "I" * i for i in range(n)]
labels += ["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)]
obs = SparsePauliOp(labels)
e = EstimatorV2()
t, r = best(lambda: e.run([(qc, obs)]).result(), REPEATS)
print(json.dumps({"seconds": t, "value": float(r[0].data.evs)}))
""",
    "sampler-ghz40": r"""
from qsimdist.qiskit import SamplerV2
n = 40; qc = QuantumCircuit(n); qc.h(0)
for q in range(n - 1):
    qc.cx(q, q + 1)
qc.measure_all()
s = SamplerV2(seed=7)
t, _ = best(lambda: s.run([qc], shots=1000).result(), REPEATS)
print(json.dumps({"seconds": t}))
""",
    "estimator-brick50": r"""
from qiskit.quantum_info import SparsePauliOp
from qsimdist.qiskit import EstimatorV2
n = 50; qc = brick(n, 4, 3)
obs = SparsePauliOp(["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)])
e = EstimatorV2()
t, r = best(lambda: e.run([(qc, obs)]).result(), REPEATS)
print(json.dumps({"seconds": t, "value": float(r[0].data.evs)}))
""",
    "statevector-q24": r"""
import qsimdist
qc = brick(24, 12, 4)
t, r = best(lambda: qsimdist.amplitudes(qc, ["0" * 24], method="statevector"), REPEATS)
print(json.dumps({"seconds": t, "value": abs(complex(r.amplitudes[0]))}))
""",
    "sampler-dynamic12": r"""
from qsimdist.qiskit import SamplerV2
qc = dynamic(12, 5); qc.measure_all(add_bits=False)
s = SamplerV2(seed=7)
t, _ = best(lambda: s.run([qc], shots=2000).result(), REPEATS)
print(json.dumps({"seconds": t}))
""",
    "estimator-dynamic12": r"""
from qiskit.quantum_info import SparsePauliOp
from qsimdist.qiskit import EstimatorV2
n = 12; qc = dynamic(n, 6)
obs = SparsePauliOp(["I" * (n - 1 - i) + "Z" + "I" * i for i in range(n)])
e = EstimatorV2()
t, r = best(lambda: e.run([(qc, obs)]).result(), REPEATS)
print(json.dumps({"seconds": t, "value": float(r[0].data.evs)}))
""",
    "estimator-w17": r"""
import os
from qsimdist.qiskit import EstimatorV2
edges = json.load(open(os.path.join(os.environ["QSIMDIST_SHARED_DATA"], "circuits",
                                    "kicked_ising", "eagle127_edges.json")))
n = 127; qc = QuantumCircuit(n)
for _ in range(5):
    qc.rx(0.8, range(n))
    for a, b in edges:
        qc.rzz(-np.pi / 2, a, b)
w17 = {**{q: "X" for q in (37, 41, 52, 56, 57, 58, 62, 79)}, 75: "Y",
       **{q: "Z" for q in (38, 40, 42, 63, 72, 80, 90, 91)}}
label = "".join(w17.get(q, "I") for q in reversed(range(n)))
e = EstimatorV2()
t, r = best(lambda: e.run([(qc, [label])]).result(), REPEATS)
print(json.dumps({"seconds": t, "value": float(r[0].data.evs[0])}))
""",
    "contract-n30": r"""
import os, qsimdist
path = os.path.join(os.environ["QSIMDIST_SHARED_DATA"], "circuits",
                    "circuit_n30_m14_s0_e0_pEFGH.qsim")
bits = "0" * 30
call = lambda: qsimdist.amplitudes(path, [bits], order="natural", method="tensor-network",
                                   max_repeats=8)
t, r = best(call, REPEATS)
print(json.dumps({"seconds": t, "flops": r.stats.get("flops"),
                  "value": abs(complex(r.amplitudes[0]))}))
""",
}


def shared_data() -> Path | None:
    env = os.environ.get("QSIMDIST_SHARED_DATA")
    path = Path(env) if env else ROOT.parent / "shared" / "data"
    return path if path.is_dir() else None


def run_case(root: Path, name: str, cache: Path, timeout: float = 900) -> dict:
    code = _PRELUDE + f"REPEATS = {REPEATS}\n" + CASES[name]
    env = dict(os.environ, PYTHONPATH=str(root), QSIMDIST_CACHE_DIR=str(cache))
    data = shared_data()
    if data is not None:
        env["QSIMDIST_SHARED_DATA"] = str(data)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd="/")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout)[-800:], "process_seconds":
                time.perf_counter() - t0}
    return {**json.loads(lines[-1]), "process_seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.before_after",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="root of the other commit's checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    old = Path(args.old).resolve()
    if not (old / "qsimdist" / "__init__.py").is_file():
        print(f"--old {old}: not a qsimdist checkout (no qsimdist/__init__.py)", file=sys.stderr)
        return 2
    if "contract-n30" in args.cases and shared_data() is None:
        print("contract-n30 skipped: ../shared/data is absent", file=sys.stderr)
        args.cases.remove("contract-n30")
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            got: dict[str, list[dict]] = {"old": [], "new": []}
            for _ in range(args.rounds):
                for side, root in (("old", old), ("new", ROOT)):
                    got[side].append(run_case(root, name, Path(tmp) / side))
            best = {side: min((r["seconds"] for r in runs if "seconds" in r), default=None)
                    for side, runs in got.items()}
            row = {"case": name, "old_s": best["old"], "new_s": best["new"],
                   "ratio": (best["new"] / best["old"] if best["old"] and best["new"]
                             else None), "runs": got}
            rows.append(row)
            ratio = f"{row['ratio']:.3f}" if row["ratio"] else "-"
            print(f"{name:20s} old {best['old']}  new {best['new']}  new/old {ratio}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
