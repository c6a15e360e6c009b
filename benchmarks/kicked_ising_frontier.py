"""Exact kicked-Ising values past the published 5 steps, each with its cost and cross-checks.

    python -m benchmarks.kicked_ising_frontier --data ../shared/data [--steps 6 7]
        [--theta 0.8 1.2] [--observables Z62 W10 W17] [--final-rx] [--memory-limit 4GiB]
        [--max-predicted 3600] [--json OUT]

For each (steps, θ_h, observable), in one process per row (a fresh engine):

* the cost before the run (:func:`qsimdist.expectation_costs`, complex128): FLOPs, largest
  intermediate, slices, predicted seconds here, and the dp schedule's predicted seconds on
  ``dgx-h100`` x 8 and ``h100-ib`` x 1024 (**predicted**);
* where the prediction here is under ``--max-predicted`` seconds, the exact value in
  complex128 (measured seconds beside it) and, as cross-checks:
  - the same term in complex64 (agrees to about 1e-6);
  - the mirrored circuit θ_h -> -θ_h: ``Z^n RX(θ) Z^n = RX(-θ)`` and ``Z^n`` commutes with
    ``RZZ`` and fixes ``|0...0>``, so ``<P>(-θ) = (-1)^(#X + #Y in P) <P>(θ)``: a different
    network that must give the same magnitude;
* once per (steps, observable), the Clifford point θ_h = π/2: the tensor-network route
  (``method="doubled"``) against the stabilizer route (stim), exact.

Memory is limited to ``--memory-limit`` per contraction (plans slice to fit).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from .kicked_ising import OBSERVABLES, kicked_ising, load_edges, pauli_label, term_arguments

PROFILES = (("dgx-h100", 8), ("h100-ib", 1024))


def _value(qc, label: str, dtype: str, memory_limit: str, method: str = "auto"):
    from qsimdist import expectation_values
    from qsimdist.engine.expectation import ExpectationEngine

    engine = ExpectationEngine(dtype=dtype, memory_limit=memory_limit, method=method)
    t0 = time.perf_counter()
    (v,) = expectation_values(qc, [label], engine=engine)
    return float(v), time.perf_counter() - t0, engine


def row(edges, steps: int, theta: float, name: str, args) -> dict:
    import qsimdist

    qc = kicked_ising(edges, theta, steps, final_rx=args.final_rx)
    label = pauli_label(OBSERVABLES[name])
    out: dict = {"steps": steps, "theta": theta, "observable": name,
                 "final_rx": args.final_rx, "memory_limit": args.memory_limit}
    t0 = time.perf_counter()
    (cost,) = qsimdist.expectation_costs(qc, label, memory_limit=args.memory_limit)
    out["pricing_seconds"] = time.perf_counter() - t0
    out["method"] = cost.method
    k = cost.contraction
    if k is not None:
        out.update(flops=k.flops, log10_flops=k.log10_flops, slices=k.slices,
                   largest_intermediate_bytes=k.largest_intermediate_bytes,
                   peak_bytes=k.peak_bytes)
        from qsimdist.planner.estimate import distributed_cost
        from qsimdist.planner.plan import make_plan

        unsliced = make_plan(k_network(qc, label, args.memory_limit), dtype="complex128")
        for prof, devices in PROFILES:
            d = distributed_cost(unsliced, prof, devices)
            out[f"predicted_seconds_{prof}_{devices}"] = d.predicted_seconds
            out[f"peak_bytes_per_device_{prof}_{devices}"] = d.peak_bytes_per_device
    out["predicted_seconds"] = cost.predicted_seconds
    if not cost.predicted_seconds <= args.max_predicted:
        out["skipped"] = f"predicted {cost.predicted_seconds:.3g} s > {args.max_predicted} s"
        return out
    v128, s128, eng = _value(qc, label, "complex128", args.memory_limit)
    out.update(value=v128, seconds=s128, executed_flops=eng.stats.flops,
               execute_seconds=eng.stats.execute_seconds)
    v64, _, _ = _value(qc, label, "complex64", args.memory_limit)
    out["complex64_difference"] = abs(v64 - v128)
    mirrored = kicked_ising(edges, -theta, steps, final_rx=args.final_rx)
    sign = (-1) ** sum(1 for op in OBSERVABLES[name].values() if op in "XY")
    vm, _, _ = _value(mirrored, label, "complex128", args.memory_limit)
    out["mirror_difference"] = abs(sign * vm - v128)
    return out


def k_network(qc, label: str, memory_limit: str):
    """The term's doubled network as the engine builds it (for its unsliced plan)."""
    from qsimdist.engine.doubled import DoubledCircuit
    from qsimdist.engine.pauli_terms import SINGLE_QUBIT_OPERATORS, parse_term
    from qsimdist.frontends import load

    gc = load(qc)
    term = parse_term(label, gc.n_qubits)
    from qsimdist.engine.memory import MemoryBudget

    limit = MemoryBudget.resolve(memory_limit).limit
    return DoubledCircuit.of(gc, fuse=True).simplified(
        term.qubits, term.ops, SINGLE_QUBIT_OPERATORS, limit=limit, dtype="complex128")


def clifford_row(edges, steps: int, name: str, args) -> dict:
    qc = kicked_ising(edges, math.pi / 2, steps, final_rx=args.final_rx)
    label = pauli_label(OBSERVABLES[name])
    tn, tn_s, _ = _value(qc, label, "complex128", args.memory_limit, method="doubled")
    st, st_s, _ = _value(qc, label, "complex128", args.memory_limit, method="stabilizer")
    return {"steps": steps, "theta": "pi/2", "observable": name, "network_value": tn,
            "stabilizer_value": st, "difference": abs(tn - st), "network_seconds": tn_s,
            "stabilizer_seconds": st_s}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    term_arguments(p, [6, 7])
    p.add_argument("--max-predicted", type=float, default=3600.0,
                   help="compute values only where predicted under this many seconds here")
    p.add_argument("--no-clifford", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    edges = load_edges(args.data)
    rows = []

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1, default=str))

    for steps in args.steps:
        for name in args.observables:
            for theta in args.theta:
                r = row(edges, steps, theta, name, args)
                rows.append(r)
                save()
                print(json.dumps(r, default=str), flush=True)
            if not args.no_clifford:
                r = clifford_row(edges, steps, name, args)
                rows.append(r)
                save()
                print(json.dumps(r, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
