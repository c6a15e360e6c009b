"""Long, checkpointed path search for a distribution benchmark workload.

    python -m qsimdist.bench.pathsearch n60m24 --minutes 55 --chunk-minutes 11

Runs cotengra's hyper-optimiser with slicing-aware reconfiguration towards
``2^target_log2`` elements per intermediate (default 2^31: one H100's usable
memory for two complex64 operands and their output, the distribution
planner's one-device target) in chunks of ``--chunk-minutes``. After each
chunk the best tree so far — its path *and* the indices the search sliced —
is saved as the workload's plan in ``qsimdist/bench/plans/``, so a session
that stops mid-search keeps what it found. The saved plan carries the
search's slicing; the distribution planner starts every slicing target from
it (restoring or adding indices) instead of re-slicing the path blindly,
which for slicing-aware trees costs orders of magnitude.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from qsimdist.bench.distribution import PLANS, workloads


def main(argv: list[str] | None = None) -> None:
    from qsimdist.frontends import amplitude_network, load
    from qsimdist.network import Network
    from qsimdist.planner.path import PathOptions, find_path
    from qsimdist.planner.plan import Plan, build_plan
    from qsimdist.planner.simplify import simplify

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--minutes", type=float, default=55.0)
    ap.add_argument("--chunk-minutes", type=float, default=11.0)
    ap.add_argument("--target-log2", type=int, default=31)
    ap.add_argument("--objective", default="combo")
    ap.add_argument("--processes", type=int, default=1)
    args = ap.parse_args(argv)

    source, kw = workloads(Path(args.data))[args.workload]
    obj = load(source)
    if isinstance(obj, Network):
        net = obj
    else:
        net = simplify(amplitude_network(obj, kw["bitstrings"], kw.get("order", "qiskit")))
    out = PLANS / f"{args.workload}.json"
    best = Plan.load(out) if out.exists() else None
    if best is not None and best.meta.get("search_target_log2") != args.target_log2:
        best = None  # a plan sliced for another target is not comparable
    t0 = time.perf_counter()
    chunk = 0
    while time.perf_counter() - t0 < args.minutes * 60 - 30:
        chunk += 1
        left = args.minutes * 60 - (time.perf_counter() - t0)
        secs = min(args.chunk_minutes * 60, left)
        opts = PathOptions(max_repeats=1_000_000, max_time=secs, minimize=args.objective,
                           parallel=args.processes if args.processes > 1 else False,
                           cache=False)
        res = find_path(net, opts, target_size=2**args.target_log2)
        plan = build_plan(net, res.ssa_path, res.sliced, "complex64")
        better = best is None or plan.stats.log10_cost < best.stats.log10_cost
        print(f"chunk {chunk}: {secs:.0f} s, log10 cost {plan.stats.log10_cost:.3f} "
              f"({len(res.sliced)} sliced, log2 width "
              f"{math.log2(plan.stats.max_intermediate):.1f})"
              + ("  <- best, saved" if better else ""), flush=True)
        if better:
            spent = time.perf_counter() - t0
            plan.meta.update({
                "search": (f"cotengra hyper-optimiser with slicing reconfiguration, "
                           f"{args.objective}, chunks of {args.chunk_minutes:g} min on "
                           f"{args.processes} process(es), best after {spent:.0f} s"),
                "search_seconds": spent,
                "search_target_log2": args.target_log2,
            })
            plan.save(out)
            best = plan


if __name__ == "__main__":
    main()
