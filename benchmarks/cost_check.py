"""The cost before the run against the run: predicted FLOPs and time beside the executed ones.

    python -m benchmarks.cost_check --data ../shared/data [--steps 5 6] [--theta 0.8 1.2]
        [--observables Z62 W10 W17] [--final-rx] [--memory-limit 4GiB] [--repeats 3]
        [--json OUT]

For each kicked-Ising term (127 qubits, :mod:`benchmarks.kicked_ising`), in one process:
:func:`qsimdist.expectation_costs` prices the term on an engine (nothing contracted), then
:func:`qsimdist.expectation_values` runs it ``--repeats`` times on the
same engine, which reuses the priced plan. Reported: the priced FLOPs and the executed ones
(the engine's own count; they must be equal), the predicted seconds on this machine and the
best measured execution time (``stats.execute_seconds``, the contraction alone), and their
ratio; the time spent pricing (path search included) and the whole first call after it.
Every "predicted" number is the cost model's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .kicked_ising import OBSERVABLES, kicked_ising, load_edges, pauli_label, term_arguments


def check(qc, label: str, memory_limit: str, repeats: int) -> dict:
    import qsimdist
    from qsimdist import expectation_values
    from qsimdist.engine.expectation import ExpectationEngine

    engine = ExpectationEngine(memory_limit=memory_limit, dtype="complex128")
    t0 = time.perf_counter()
    (cost,) = qsimdist.expectation_costs(qc, label, engine=engine)
    priced_s = time.perf_counter() - t0
    best, first, value = float("inf"), None, None
    for _ in range(repeats):
        before = engine.stats.execute_seconds
        t0 = time.perf_counter()
        (value,) = expectation_values(qc, [label], engine=engine)
        call = time.perf_counter() - t0
        first = call if first is None else first
        best = min(best, engine.stats.execute_seconds - before)
    executed = engine.stats.flops / repeats
    k = cost.contraction
    return {"method": cost.method, "value": float(value),
            "flops_priced": k.flops if k else None, "flops_executed": executed,
            "slices": k.slices if k else None,
            "largest_intermediate_bytes": k.largest_intermediate_bytes if k else None,
            "predicted_seconds": cost.predicted_seconds, "measured_seconds": best,
            "ratio": best / cost.predicted_seconds if cost.predicted_seconds else None,
            "pricing_seconds": priced_s, "first_call_seconds": first,
            "plans_made_by_runs": engine.stats.plans_made}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    term_arguments(p, [5, 6])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    edges = load_edges(args.data)
    rows = []
    print(f"{'steps':>5} {'theta':>5} {'obs':4} {'log10 FLOPs':>11} {'equal':>5} "
          f"{'pred s':>9} {'meas s':>9} {'meas/pred':>9} {'price s':>8} {'value':>16}",
          flush=True)
    for steps in args.steps:
        for theta in args.theta:
            qc = kicked_ising(edges, theta, steps, final_rx=args.final_rx)
            for name in args.observables:
                r = check(qc, pauli_label(OBSERVABLES[name]), args.memory_limit, args.repeats)
                r.update(steps=steps, theta=theta, observable=name, final_rx=args.final_rx)
                rows.append(r)
                import math

                lf = math.log10(r["flops_priced"]) if r["flops_priced"] else float("nan")
                print(f"{steps:5d} {theta:5.2f} {name:4} {lf:11.3f} "
                      f"{str(r['flops_priced'] == r['flops_executed']):>5} "
                      f"{r['predicted_seconds']:9.4f} {r['measured_seconds']:9.4f} "
                      f"{r['ratio']:9.2f} {r['pricing_seconds']:8.2f} {r['value']:16.12f}",
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
