"""Reuse across slices, measured: the same dp schedule with and without kept outputs.

    mpiexec -n 2 python -m mpi4py -m benchmarks.reuse [--data ../shared/data]
        [--limit-bytes 1258291] [--tree FILE] [--repeats 5] [--json OUT]

Rank 0 plans one amplitude of the n30 reference circuit (along ``--tree``, a
``qsimdist search`` tree, if given) and makes the ``dp`` schedule for the
ranks of the job at a per-rank memory limit with the ``local-cpu`` profile,
once as it is and once with reuse (``schedule(..., reuse=True)``: each group
keeps the step outputs worth keeping across its slices in the memory the
schedule leaves free). Both plans are broadcast and run in the same job,
alternating, after one warm-up round. Reported: the medians, the measured
speed-up of reuse next to the predicted one, the steps each rank ran (and
the planner's count), the results' agreement and the measured peaks next to
the predicted ones. Works with ``-n 1`` too (one rank, the mpi executor).

    python -m benchmarks.reuse --local [--limit-bytes 2097152] [--repeats 5]

measures the local executor instead, in one process: the plan
``qsimdist.plan(..., memory_limit=L)`` makes (which keeps outputs across
slices where that saves 10 % or more) against the same path and slicing
with nothing kept, alternating.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def make(data: Path, tree: str | None, limit: int, nranks: int) -> dict:
    import dataclasses

    from qsimdist.hardware import load_profile
    from qsimdist.planner.distribution import schedule, scheduled_plan

    from .mpi import base_plan, tree_plan

    base = tree_plan(data, 0, tree) if tree else base_plan(data, 0)
    prof = dataclasses.replace(load_profile("local-cpu"), memory_bytes=int(limit),
                               usable_memory_fraction=1.0)
    plain = schedule(base, prof, nranks, "dp")
    kept = schedule(base, prof, nranks, "dp", reuse=True)
    return {"plain": scheduled_plan(base, plain).to_dict(),
            "reuse": scheduled_plan(base, kept).to_dict()}


def local_main(args) -> dict:
    """The local executor: the plan with kept outputs against the same plan without."""
    import qsimdist
    from qsimdist.planner.reuse import local_kept_bytes
    from qsimdist.planner.plan import build_plan

    circuit = Path(args.data) / "circuits" / "circuit_n30_m14_s0_e0_pEFGH.qsim"
    t0 = time.perf_counter()
    kept = qsimdist.plan(str(circuit), bitstrings="0" * 30, order="natural",
                         memory_limit=args.limit_bytes, max_repeats=64)
    plain = build_plan(kept.network, kept.path, kept.sliced, kept.dtype)
    plans = {"plain": plain, "reuse": kept}
    times = {k: [] for k in plans}
    results = {}
    for _ in range(args.repeats + 1):
        for k, p in plans.items():
            t = time.perf_counter()
            results[k] = p.execute()
            times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    err = float(np.abs(results["plain"] - results["reuse"]).max()
                / max(np.abs(results["plain"]).max(), 1e-30))
    out = {"executor": "local", "limit_bytes": args.limit_bytes, "n_slices": kept.stats.n_slices,
           "kept_outputs": len(kept.kept), "kept_bytes": local_kept_bytes(kept, kept.kept),
           "peak_bytes": {"plain": plain.stats.peak_bytes, "reuse": kept.stats.peak_bytes},
           "measured_seconds": med, "all_seconds": times,
           "measured_speedup": med["plain"] / med["reuse"], "rel_diff_between_results": err,
           "wall_s": time.perf_counter() - t0}
    print(f"n30, local executor, {args.limit_bytes / 2**20:.2f} MiB: {kept.stats.n_slices} "
          f"slices, {len(kept.kept)} outputs kept ({out['kept_bytes'] / 2**20:.2f} MiB); "
          f"results agree to {err:.1e}")
    print(f"  plain {med['plain']:.4f} s, reuse {med['reuse']:.4f} s: measured speed-up "
          f"{out['measured_speedup']:.2f}x")
    return _written(out, args.json)


def _written(out: dict, path: str | None) -> dict:
    """``out``, also written as JSON to ``path`` when one is given."""
    if path:
        Path(path).write_text(json.dumps(out, indent=1))
    return out


def main(argv: list[str] | None = None) -> dict | None:

    from qsimdist.planner.reuse import step_counts

    from . import positive_int
    from .mpi import broadcast_plans, timed_runs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--limit-bytes", type=positive_int, default=1258291)
    ap.add_argument("--tree", default=None)
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--local", action="store_true", help="the local executor, no MPI")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.local:
        return local_main(args)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    t0 = time.perf_counter()
    plans = broadcast_plans(comm, lambda: make(Path(args.data), args.tree, args.limit_bytes,
                                               comm.size))
    times, gathered, results = timed_runs(comm, plans, args.repeats)
    if comm.rank != 0:
        return None
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    a, b = plans["plain"].schedule, plans["reuse"].schedule
    runs = step_counts(plans["reuse"], b.sliced, b.groups, frozenset(b.kept))
    err = float(np.abs(results["plain"] - results["reuse"]).max()
                / max(np.abs(results["plain"]).max(), 1e-30))
    out = {
        "ranks": comm.size, "limit_bytes": args.limit_bytes, "tree": args.tree,
        "wall_s": time.perf_counter() - t0, "rel_diff_between_results": err,
        "n_slices": b.n_slices, "group_size": b.group_size, "kept_outputs": len(b.kept),
        "measured_seconds": med, "all_seconds": times,
        "predicted_seconds": {"plain": a.predicted.seconds, "reuse": b.predicted.seconds},
        "measured_speedup": med["plain"] / med["reuse"],
        "predicted_speedup": a.predicted.seconds / b.predicted.seconds,
        "flops_executed": {"plain": a.predicted.flops_executed,
                           "reuse": b.predicted.flops_executed},
        "steps_run_as_priced": all(s["step_runs"] == runs for s in gathered["reuse"]),
        "measured_peak_bytes": {k: max(s["peak_bytes"] for s in v) for k, v in gathered.items()},
        "predicted_peak_bytes": {"plain": a.predicted.peak_bytes_per_device,
                                 "reuse": b.predicted.peak_bytes_per_device},
    }
    print(f"n30, {comm.size} rank(s), {args.limit_bytes / 2**20:.2f} MiB per rank: "
          f"{b.n_slices} slices, groups of {b.group_size}, {len(b.kept)} outputs kept; "
          f"results agree to {err:.1e}; steps run as priced: {out['steps_run_as_priced']}")
    for k in ("plain", "reuse"):
        print(f"  {k:<6} measured {med[k]:8.4f} s  predicted {out['predicted_seconds'][k]:8.4f} s"
              f"  FLOPs {out['flops_executed'][k]:.3g}  peak measured "
              f"{out['measured_peak_bytes'][k] / 2**20:.2f} MiB, predicted "
              f"{out['predicted_peak_bytes'][k] / 2**20:.2f} MiB")
    print(f"  reuse speed-up: measured {out['measured_speedup']:.2f}x, predicted "
          f"{out['predicted_speedup']:.2f}x")
    return _written(out, args.json)


if __name__ == "__main__":
    main()
