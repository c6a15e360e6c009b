"""Clifford circuits through SamplerV2 / EstimatorV2: qsimdist's stabilizer route beside Aer.

Circuits: ``ghzN`` (H, then a CX chain) and ``graphN`` (H on every qubit, CZ on a ring
plus chords ``(q, q + N/2)`` for every seventh ``q``), N = 24 and 1,000. The sampler
measures every qubit (Z basis), 1,024 shots; the estimator reads 12 Pauli strings
(GHZ: ``X^N``, ``Z^N`` and ten ``Z_i Z_i+1``; graph: ten stabilizers ``K_v`` and two
``Z_v``), exactly. Aer: ``qiskit_aer.primitives.SamplerV2`` / ``EstimatorV2`` with
default options (its automatic method picks the stabilizer simulator for Clifford
circuits). One process, warm calls (each contender runs once before timing), then
``--repeats`` rounds alternating which goes first; the best of each is reported. A
contender whose single call takes more than ``--max-seconds`` is timed once.
``--without-route`` adds qsimdist with stim hidden (the routes it took before).

Run::

    python -m benchmarks.stabilizer_vs_aer [--repeats 5] [--cases ghz24 ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

CASES = ("ghz24", "graph24", "ghz1000", "graph1000")
SHOTS = 1024


def width(case: str) -> int:
    return int(case.removeprefix("ghz").removeprefix("graph"))


def build(case: str, measure: bool):
    from qiskit import QuantumCircuit

    n = width(case)
    qc = QuantumCircuit(n)
    if case.startswith("ghz"):
        qc.h(0)
        for q in range(n - 1):
            qc.cx(q, q + 1)
    else:
        qc.h(range(n))
        for a, b in edges(n):
            qc.cz(a, b)
    if measure:
        qc.measure_all()
    return qc


def edges(n: int) -> list[tuple[int, int]]:
    return [(q, (q + 1) % n) for q in range(n)] + [(q, (q + n // 2) % n)
                                                   for q in range(0, n // 2, 7)]


def label(n: int, ops: dict[int, str]) -> str:
    chars = ["I"] * n
    for q, op in ops.items():
        chars[n - 1 - q] = op
    return "".join(chars)


def observables(case: str) -> tuple[list[str], np.ndarray]:
    """The labels and their exact values."""
    n = width(case)
    spots = np.linspace(0, n - 2, 10).astype(int).tolist()
    if case.startswith("ghz"):
        labels = ["X" * n, "Z" * n] + [label(n, {q: "Z", q + 1: "Z"}) for q in spots]
        return labels, np.ones(len(labels))
    nbrs: dict[int, set[int]] = {v: set() for v in range(n)}
    for a, b in edges(n):
        nbrs[a].add(b)
        nbrs[b].add(a)
    labels = [label(n, {v: "X"} | {u: "Z" for u in nbrs[v]}) for v in spots]
    labels += [label(n, {0: "Z"}), label(n, {n - 1: "Z"})]
    return labels, np.array([1.0] * 10 + [0.0] * 2)


def contenders(which: str, without_route: bool):
    from qiskit_aer.primitives import EstimatorV2 as AerEstimator
    from qiskit_aer.primitives import SamplerV2 as AerSampler

    from qsimdist.qiskit import EstimatorV2, SamplerV2

    if which == "sampler":
        out = {"qsimdist": SamplerV2(seed=1), "aer": AerSampler(seed=1)}
        if without_route:
            out["qsimdist (no stim)"] = SamplerV2(seed=1)
    else:
        out = {"qsimdist": EstimatorV2(), "aer": AerEstimator()}
        if without_route:
            out["qsimdist (no stim)"] = EstimatorV2()
    return out


def call(name: str, prim, which: str, qc, labels):
    import qsimdist.engine.stabilizer as stabilizer

    hidden = name.endswith("(no stim)")
    real = stabilizer.stabilizer_available
    if hidden:
        stabilizer.stabilizer_available = lambda: False
        stabilizer._LAST.clear()
    try:
        t0 = time.perf_counter()
        if which == "sampler":
            res = prim.run([qc], shots=SHOTS).result()[0]
        else:
            res = prim.run([(qc, labels)]).result()[0]
        return time.perf_counter() - t0, res
    finally:
        stabilizer.stabilizer_available = real
        stabilizer._LAST.clear()


def check(which: str, case: str, res, want) -> str:
    """``exact`` where the result is what the circuit gives, else what is wrong."""
    n = width(case)
    if which == "estimator":
        err = float(np.max(np.abs(np.asarray(res.data.evs) - want)))
        return "exact" if err < 1e-12 else f"max error {err:.2g}"
    bits = res.data.meas.to_bool_array()
    if case.startswith("ghz"):
        rows = bits.sum(axis=1)
        ok = np.isin(rows, (0, n)).all() and 0.4 < (rows == 0).mean() < 0.6
        return "exact" if ok else "wrong outcomes"
    dev = float(np.abs(bits.mean(axis=0) - 0.5).max())
    return "exact" if dev < 0.15 else f"marginal off by {dev:.2f}"


def route_of(name: str, which: str, res) -> str:
    if name == "aer":
        return "aer automatic"
    if which == "sampler":
        return res.metadata["sampling"]["method"]
    return res.metadata["route"]["method"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=30.0)
    ap.add_argument("--without-route", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for case in args.cases:
        labels, want = observables(case)
        for which in ("sampler", "estimator"):
            qc = build(case, measure=which == "sampler")
            prims = contenders(which, args.without_route and case.endswith("24"))
            best: dict[str, float] = {}
            notes: dict[str, str] = {}
            once = set()
            for name, prim in prims.items():  # warm-up
                seconds, res = call(name, prim, which, qc, labels)
                best[name] = float("inf")
                notes[name] = f"{route_of(name, which, res)}, {check(which, case, res, want)}"
                if seconds > args.max_seconds:  # too slow to repeat: this call is the time
                    once.add(name)
                    best[name] = seconds
            names = list(prims)
            for r in range(args.repeats):
                for name in (names if r % 2 == 0 else names[::-1]):
                    if name in once:
                        continue
                    seconds, _ = call(name, prims[name], which, qc, labels)
                    best[name] = min(best[name], seconds)
            row = {"case": case, "primitive": which,
                   **{f"{k} s": v for k, v in best.items()},
                   "aer / qsimdist": best["aer"] / best["qsimdist"],
                   "notes": notes, "timed once": sorted(once)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
