"""Long, checkpointed path search for a distribution benchmark workload.

    python -m benchmarks.pathsearch n60m24 --minutes 40 --chunk-minutes 10

Each chunk runs cotengra's hyper-optimiser (kahypar + greedy, ``--objective``,
scoring each tree sliced and reconfigured to ``2^search_slicing_log2``; the
cheapest unsliced trees slice badly) for ``--chunk-minutes``, then anneals its best tree
with slicing scheduled in (cotengra's ``simulated_anneal_tree``, after the
TreeSA method) towards ``2^target_log2`` elements per intermediate (default
2^31: one H100's usable memory for two complex64 operands and their output,
the distribution planner's one-device target). The workload's saved path is
annealed the same way first. After each chunk the
best sliced tree so far — its path and its sliced indices — is saved as the
workload's plan in ``benchmarks/plans/``, so a session that stops
mid-search keeps what it found. The distribution planner starts every
slicing target from the saved slicing (restoring or adding indices), which
for such trees is orders of magnitude cheaper than re-slicing blindly.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

from benchmarks.distribution import PLANS, workload_network, workloads


def main(argv: list[str] | None = None) -> None:
    import cotengra as ctg
    from cotengra.pathfinders.path_simulated_annealing import simulated_anneal_tree

    from qsimdist.planner.plan import Plan, build_plan
    from qsimdist.planner.slicing import sliced_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--minutes", type=float, default=55.0)
    ap.add_argument("--chunk-minutes", type=float, default=11.0)
    ap.add_argument("--target-log2", type=int, default=31)
    ap.add_argument("--objective", default="combo")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--anneal-steps", type=int, default=100, help="temperature steps")
    ap.add_argument("--anneal-iters", type=int, default=100, help="sweeps per temperature")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--search-slicing-log2", type=int, default=33,
                    help="the hyper-optimiser scores trees sliced (and reconfigured) to this")
    args = ap.parse_args(argv)

    source, kw = workloads(Path(args.data))[args.workload]
    net = workload_network(source, kw)
    out = PLANS / f"{args.workload}.json"
    inputs, output, size_dict, _ = net.symbolic()
    target = 2**args.target_log2

    def finish(tree):
        """Slice the (unsliced) tree to the target; return the plan of the cheaper of
        cotengra's simulated annealing with slicing scheduled in (TreeSA-style) and
        its slicing with subtree reconfiguration.
        """
        annealed = simulated_anneal_tree(
            tree, tsteps=args.anneal_steps, numiter=args.anneal_iters, minimize="flops",
            target_size=target, slice_mode="basic", seed=args.seed,
        )
        if tree.max_size() > target:  # annealing varies by seed: also try plain reconfiguration
            reconf = tree.slice_and_reconfigure(
                target_size=target, step_size=2, reconf_opts={"subtree_size": 10, "maxiter": 200}
            )
            if reconf.total_flops() < annealed.total_flops():
                annealed = reconf
        tree = annealed
        ssa = [tuple(int(v) for v in p) for p in tree.get_ssa_path()]
        return build_plan(net, ssa, sliced_names(net, tree), "complex64")

    best = None
    t0 = time.perf_counter()

    def offer(plan, label):
        nonlocal best
        better = best is None or plan.stats.log10_cost < best.stats.log10_cost
        print(f"{label}: log10 cost {plan.stats.log10_cost:.3f} sliced to 2^"
              f"{math.log2(plan.stats.max_intermediate):.1f} ({len(plan.sliced)} indices)"
              + ("  <- best, saved" if better else ""), flush=True)
        if better:
            spent = time.perf_counter() - t0
            plan.meta.update({
                "search": (f"{label}; sliced to 2^{args.target_log2} by the cheaper of cotengra "
                           f"simulated_anneal_tree ({args.anneal_steps} x {args.anneal_iters}, "
                           f"seed {args.seed}) and slice_and_reconfigure; hyper-optimiser "
                           f"chunks: kahypar + greedy, {args.objective}, scored sliced to "
                           f"2^{args.search_slicing_log2}, {args.chunk_minutes:g} min on "
                           f"{args.processes} process(es); best after {spent:.0f} s"),
                "search_seconds": spent,
                "search_target_log2": args.target_log2,
            })
            plan.save(out)
            best = plan

    if out.exists():
        old = Plan.load(out)
        if old.sliced and old.meta.get("search_target_log2") == args.target_log2:
            best = old
            print(f"saved plan: log10 cost {old.stats.log10_cost:.3f}", flush=True)
        # anneal from the saved path itself, unsliced
        tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=old.path)
        unsliced = math.log10(tree.total_flops())
        offer(finish(tree), f"saved path (unsliced log10 {unsliced:.2f}), annealed")
    chunk = 0
    while time.perf_counter() - t0 < args.minutes * 60 - 60:
        chunk += 1
        secs = min(args.chunk_minutes * 60, args.minutes * 60 - (time.perf_counter() - t0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = ctg.HyperOptimizer(
                methods=["kahypar", "greedy"], minimize=args.objective, max_time=secs,
                max_repeats=1_000_000, parallel=args.processes if args.processes > 1 else False,
                on_trial_error="ignore", progbar=False,
                slicing_reconf_opts={"target_size": 2**args.search_slicing_log2,
                                     "allow_outer": False},
            )
            found = opt.search(inputs, output, size_dict)
            # trees scored sliced anneal far better than the cheapest unsliced ones;
            # anneal the found path from scratch, unsliced
            tree = ctg.ContractionTree.from_path(
                inputs, output, size_dict, ssa_path=found.get_ssa_path()
            )
        offer(finish(tree), f"chunk {chunk} ({secs:.0f} s, unsliced log10 "
                            f"{math.log10(tree.total_flops()):.2f})")


if __name__ == "__main__":
    main()
