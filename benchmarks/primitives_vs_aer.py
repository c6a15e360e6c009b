"""SamplerV2 and EstimatorV2 beside Qiskit Aer's on issue 24's circuits at 20-26 qubits.

Circuits (all seeded):

* ``rcN``: ``random_circuit(N, 12, max_operands=2, seed=5)``, N = 20, 22, 24, 26
  (any N >= 4 runs: the tests take rc6);
* ``su2_24``: ``efficient_su2(24, reps=3)``, parameters drawn uniformly in [0, 2 pi);
* ``qft20``: a random RY on each of 20 qubits, then ``QFTGate(20)``;
* ``brick26``: 26 qubits, 10 layers of RX and RZ on every qubit and CZ on alternate
  neighbour pairs;
* ``ghz40`` (sampler) and ``brick50`` (estimator, 50 qubits, 4 layers): the wide,
  shallow cases that keep the tensor-network methods (qsimdist only; Aer's
  statevector cannot hold them).

The sampler draws 2,000 shots of every qubit; the estimator reads 40 Pauli
strings: 20 local (``Z_i Z_i+1`` and ``X_i``) and 20 random-sparse (weight 3-4,
random positions and letters; below 11 qubits the ``Z_i Z_i+1`` pairs wrap around,
``i mod (N - 1)``). Each contender runs in its own process, one after
the other; ``seconds`` is the ``run(...).result()`` call alone (circuit built,
imports done). Aer gets the circuit transpiled for ``AerSimulator`` at
optimisation level 1 (it refuses some of ``random_circuit``'s gates), timed apart
as ``transpile_seconds``; the ratio uses Aer's call alone. Aer's estimator is
exact (precision 0). Agreement: the estimator's largest absolute difference; the
sampler's largest two-sample z-score of a qubit's marginal (``|p1 - p2| /
sqrt(p (1 - p) 2 / shots)``).

Run::

    python -m benchmarks.primitives_vs_aer [--cases rc20 ...] [--json FILE]
            [--only-qsimdist]   # e.g. from an older checkout's directory, to compare versions
        [--repeats K]       # K calls per contender, alternating; medians compared

:func:`compare_case` is one row of that table; ``python -m benchmarks run`` runs it as its
``primitives`` section (``SuiteSpec.primitives``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import positive_int

_BUILD = r"""
import json, time, numpy as np
from qiskit import QuantumCircuit
from qiskit.quantum_info import SparsePauliOp
case = {case!r}
def build(case):
    rng = np.random.default_rng(11)
    if case.startswith("rc"):
        from qiskit.circuit.random import random_circuit
        return random_circuit(int(case[2:]), 12, max_operands=2, seed=5)
    if case == "su2_24":
        from qiskit.circuit.library import efficient_su2
        qc = efficient_su2(24, reps=3)
        return qc.assign_parameters(rng.uniform(0, 2 * np.pi, qc.num_parameters))
    if case == "qft20":
        from qiskit.circuit.library import QFTGate
        qc = QuantumCircuit(20)
        for q in range(20):
            qc.ry(float(rng.uniform(0, np.pi)), q)
        qc.append(QFTGate(20), range(20))
        return qc
    if case.startswith("brick"):
        n, depth = (26, 10) if case == "brick26" else (50, 4)
        qc = QuantumCircuit(n)
        for layer in range(depth):
            for q in range(n):
                qc.rx(float(rng.uniform(0, np.pi)), q)
                qc.rz(float(rng.uniform(0, np.pi)), q)
            for q in range(layer % 2, n - 1, 2):
                qc.cz(q, q + 1)
        return qc
    if case == "ghz40":
        qc = QuantumCircuit(40)
        qc.h(0)
        for q in range(39):
            qc.cx(q, q + 1)
        return qc
    raise SystemExit("unknown case " + case)
bare = build(case)
n = bare.num_qubits
qc = bare.measure_all(inplace=False)
rng = np.random.default_rng(3)
labels = []
for i in range(10):
    j = i % (n - 1)  # i itself from 11 qubits on; below, the pairs wrap around
    zz = ["I"] * n; zz[j] = zz[j + 1] = "Z"; labels.append("".join(reversed(zz)))
    x = ["I"] * n; x[(3 * i) % n] = "X"; labels.append("".join(reversed(x)))
for _ in range(20):
    s = ["I"] * n
    for q in rng.choice(n, int(rng.integers(3, 5)), replace=False):
        s[q] = "XYZ"[int(rng.integers(3))]
    labels.append("".join(reversed(s)))
obs = SparsePauliOp(labels)
shots = {shots}
"""

_CODE = {
    ("qsimdist", "sampler"): """
from qsimdist.qiskit import SamplerV2
t = time.perf_counter(); res = SamplerV2(seed=1).run([qc], shots=shots).result()[0]
sec = time.perf_counter() - t
info = res.metadata["sampling"]
route = info.get("route") or {}
out = {"seconds": sec, "marginal": res.data.meas.to_bool_array(order="little").mean(0).tolist(),
       "method": info["method"], "engine": route.get("engine")}
""",
    ("aer", "sampler"): """
from qiskit import transpile
from qiskit_aer import AerSimulator
from qiskit_aer.primitives import SamplerV2
t = time.perf_counter(); tqc = transpile(qc, AerSimulator(), optimization_level=1)
tr = time.perf_counter() - t
t = time.perf_counter(); res = SamplerV2(seed=1).run([tqc], shots=shots).result()[0]
sec = time.perf_counter() - t
out = {"seconds": sec, "transpile_seconds": tr,
       "marginal": res.data.meas.to_bool_array(order="little").mean(0).tolist()}
""",
    ("qsimdist", "estimator"): """
from qsimdist.qiskit import EstimatorV2
t = time.perf_counter(); res = EstimatorV2().run([(bare, obs)]).result()[0]
sec = time.perf_counter() - t
route = res.metadata.get("route") or {}
spent = res.metadata.get("qsimdist") or {}
out = {"seconds": sec, "values": [float(res.data.evs)], "method": route.get("method"),
       "engine": route.get("engine"), "grouped_terms": spent.get("grouped_terms"),
       "qwc_groups": spent.get("qwc_groups")}
""",
    ("aer", "estimator"): """
from qiskit import transpile
from qiskit_aer import AerSimulator
from qiskit_aer.primitives import EstimatorV2
t = time.perf_counter(); tqc = transpile(bare, AerSimulator(), optimization_level=1)
tr = time.perf_counter() - t
obs_t = obs.apply_layout(tqc.layout)
t = time.perf_counter(); res = EstimatorV2().run([(tqc, obs_t)]).result()[0]
sec = time.perf_counter() - t
out = {"seconds": sec, "transpile_seconds": tr, "values": [float(res.data.evs)]}
""",
}

CASES = ["rc20", "rc22", "rc24", "rc26", "su2_24", "qft20", "brick26"]
WIDE = {"sampler": ["ghz40"], "estimator": ["brick50"]}


def _run(code: str, timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", code + "\nprint('@@' + json.dumps(out))\n"],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return dict(json.loads(line[2:]), process_seconds=time.perf_counter() - t0)
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:300]}


def _compare(prim: str, ours: dict, aer: dict, shots: int) -> dict:
    if "error" in ours or "error" in aer:
        return {}
    row = {"ratio": aer["seconds"] / ours["seconds"]}
    if prim == "estimator":
        row["max_abs_diff"] = max(abs(a - b) for a, b in zip(ours["values"], aer["values"]))
    else:
        z = 0.0
        for p1, p2 in zip(ours["marginal"], aer["marginal"]):
            p = (p1 + p2) / 2
            z = max(z, abs(p1 - p2) / max((p * (1 - p) * 2 / shots) ** 0.5, 1e-12))
        row["max_z"] = z
    return row


def compare_case(primitive: str, case: str, shots: int = 2000, timeout: float = 900.0,
                 with_aer: bool = True, repeats: int = 1) -> dict:
    """One row: ``primitive`` (sampler or estimator) on ``case``, qsimdist then Aer.

    Each contender runs in its own subprocess, ``repeats`` times, alternating
    (qsimdist, Aer, qsimdist, Aer, ...): one process per call, so every call is a
    cold one, and a burst of load on this shared machine falls on both sides.
    ``seconds`` is then the median of a side's calls; all of them are kept under
    ``runs_seconds``. Aer is not run (its side reads ``{"error": "not run"}``) with
    ``with_aer=False`` or for a wide case of ``primitive``. The row holds both
    sides' records (the marginals dropped) and, when both ran, ``ratio`` (Aer /
    qsimdist, of the medians) and the agreement (``max_abs_diff`` or ``max_z``,
    from each side's first call).
    """
    if primitive not in WIDE:
        raise ValueError(f"unknown primitive {primitive!r}; valid: {', '.join(WIDE)}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    setup = _BUILD.format(case=case, shots=shots)
    run_aer = with_aer and case not in WIDE[primitive]
    calls: dict[str, list[dict]] = {"qsimdist": [], "aer": []}
    for _ in range(repeats):
        calls["qsimdist"].append(_run(setup + _CODE[("qsimdist", primitive)], timeout))
        if run_aer:
            calls["aer"].append(_run(setup + _CODE[("aer", primitive)], timeout))
    sides = {}
    for side, runs in calls.items():
        if not runs:
            sides[side] = {"error": "not run"}
            continue
        failed = [r for r in runs if "error" in r]
        sides[side] = dict(failed[0] if failed else runs[0])
        if not failed:
            sides[side]["seconds"] = statistics.median(r["seconds"] for r in runs)
            sides[side]["runs_seconds"] = [r["seconds"] for r in runs]
    ours, aer = sides["qsimdist"], sides["aer"]
    row = {"primitive": primitive, "case": case, "qsimdist": ours, "aer": aer,
           "repeats": repeats, **_compare(primitive, ours, aer, shots)}
    for side in ("qsimdist", "aer"):  # keep the report short
        row[side].pop("marginal", None)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=None)
    ap.add_argument("--primitives", nargs="+", default=["sampler", "estimator"])
    ap.add_argument("--shots", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--only-qsimdist", action="store_true")
    ap.add_argument("--repeats", type=positive_int, default=1,
                    help="calls per contender, alternating; the median is compared")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for prim in args.primitives:
        cases = args.cases or CASES + WIDE[prim]
        for case in cases:
            row = compare_case(prim, case, shots=args.shots, timeout=args.timeout,
                               with_aer=not args.only_qsimdist, repeats=args.repeats)
            rows.append(row)
            print(json.dumps(row), flush=True)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    summary = {"median_ratio": statistics.median(ratios) if ratios else None,
               "min_ratio": min(ratios) if ratios else None}
    print(_table(rows, summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                      time.gmtime()),
                                               "rows": rows, "summary": summary}, indent=1)
                                   + "\n")
    return 0


def _table(rows: list[dict], summary: dict) -> str:
    out = ["| primitive | case | qsimdist (s) | route, engine | Aer (s) | Aer transpile (s) | "
           "Aer / qsimdist | agreement |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        q, a = r["qsimdist"], r["aer"]
        qs = q.get("error") or f"{q['seconds']:.2f}"
        as_ = a.get("error") or f"{a['seconds']:.2f}"
        tr = f"{a['transpile_seconds']:.2f}" if "transpile_seconds" in a else ""
        how = f"{q.get('method')}, {q.get('engine')}" if "error" not in q else ""
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else ""
        agree = (f"max abs diff {r['max_abs_diff']:.1e}" if "max_abs_diff" in r
                 else f"max z {r['max_z']:.1f}" if "max_z" in r else "")
        out.append(f"| {r['primitive']} | {r['case']} | {qs} | {how} | {as_} | {tr} | {ratio} "
                   f"| {agree} |")
    if summary["median_ratio"] is not None:
        out.append(f"\nmedian Aer / qsimdist {summary['median_ratio']:.2f}, smallest "
                   f"{summary['min_ratio']:.2f}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
