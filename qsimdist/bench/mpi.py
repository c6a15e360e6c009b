"""Distributed against slice-only, measured: ``E_2``, ``R_2`` and predicted against measured.

    mpiexec -n 2 python -m mpi4py -m qsimdist.bench.mpi [--data ../shared/data]
        [--limit-fraction 0.6] [--stars 0] [--repeats 3] [--json OUT]

Rank 0 plans the n30 reference circuit's amplitude once, sets a per-rank
memory limit below the plan's largest intermediate (``--limit-fraction`` of
it), and makes two schedules for the same ranks and the same limit with the
``local-cpu`` profile: *slice-only* (each rank contracts its own slices) and
*distributed* (the fastest predicted schedule whose groups span both ranks).
Both are broadcast and run in the same job, alternating, ``--repeats`` times.
Reported: measured seconds (median), measured ``E_2`` = slice-only time /
distributed time, ``R_2`` = slice-only FLOPs / distributed executed FLOPs
(counts, not timings), ``E_2 / R_2``, and each schedule's predicted seconds
next to the measured ones, per step for the distributed one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def make_plans(data: Path, limit_fraction: float, stars: int, nranks: int):
    import dataclasses

    import qsimdist
    from qsimdist.hardware import load_profile
    from qsimdist.planner.distribution import schedule, scheduled_plan

    circuit = data / "circuits" / "circuit_n30_m14_s0_e0_pEFGH.qsim"
    base = qsimdist.plan(str(circuit), bitstrings="*" * stars + "0" * (30 - stars),
                         order="natural", memory_limit="none", max_repeats=64)
    isz = np.dtype(base.dtype).itemsize
    limit = int(base.stats.max_intermediate * isz * limit_fraction)
    prof = dataclasses.replace(load_profile("local-cpu"), memory_bytes=limit,
                               usable_memory_fraction=1.0, name="local-cpu-limited")
    slice_only = schedule(base, prof, nranks, "slice_only")
    dist = schedule(base, prof, nranks, "dp")
    if dist.group_size == 1:  # the model preferred slicing: take the best sharded schedule
        from qsimdist.planner.distribution import BIG_FRACTIONS, schedule_slice, sliced_plan

        best = None
        target = max(1, int(limit * nranks / (3 * isz)))
        while target >= 1 and best is None:
            sp = sliced_plan(base, target)
            for frac in BIG_FRACTIONS:
                s = schedule_slice(sp, prof, nranks, big_bytes=frac * limit, devices=nranks)
                if s is not None and (best is None or s.predicted.seconds < best.predicted.seconds):
                    best = (s, sp)
            target //= 2
        dist = best[0]
    return (scheduled_plan(base, slice_only), scheduled_plan(base, dist), limit,
            base.stats.max_intermediate * isz)


def main(argv: list[str] | None = None) -> dict | None:
    from mpi4py import MPI

    from qsimdist.executors.mpi import RunStats, execute
    from qsimdist.planner.plan import Plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--limit-fraction", type=float, default=0.6)
    ap.add_argument("--stars", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    payload = None
    if comm.rank == 0:
        t = time.perf_counter()
        a, b, limit, biggest = make_plans(Path(args.data), args.limit_fraction, args.stars,
                                          comm.size)
        payload = (a.to_dict(), b.to_dict(), limit, biggest, time.perf_counter() - t)
    da, db, limit, biggest, plan_s = comm.bcast(payload, root=0)
    plans = {"slice_only": Plan.from_dict(da, "slice-only plan"),
             "distributed": Plan.from_dict(db, "distributed plan")}
    times = {k: [] for k in plans}
    stats = {}
    results = {}
    for _ in range(args.repeats + 1):  # the first round warms up (compiled kernels, pages)
        for name, plan in plans.items():
            st = RunStats()
            comm.Barrier()
            t = time.perf_counter()
            results[name] = execute(plan, comm=comm, stats=st)
            comm.Barrier()
            times[name].append(time.perf_counter() - t)
            stats[name] = st
    gathered = {k: comm.gather(v.to_dict(), root=0) for k, v in stats.items()}
    if comm.rank != 0:
        return None
    err = float(np.abs(results["slice_only"] - results["distributed"]).max()
                / max(np.abs(results["slice_only"]).max(), 1e-30))
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    so, di = plans["slice_only"].schedule, plans["distributed"].schedule
    r2 = so.predicted.flops_executed / di.predicted.flops_executed
    e2 = med["slice_only"] / med["distributed"]
    steps = []
    for rec, secs in zip(di.steps, gathered["distributed"][0]["step_seconds"]):
        per_slice = secs / max(1, gathered["distributed"][0]["slices"])
        steps.append({"step": rec.index, "action": rec.action.value,
                      "predicted_s": rec.predicted_compute_seconds + rec.predicted_comm_seconds
                      + rec.predicted_pack_seconds, "measured_s": per_slice})
    out = {
        "ranks": comm.size, "limit_bytes": limit, "largest_intermediate_bytes": biggest,
        "planning_s": plan_s, "rel_diff_between_results": err,
        "measured_seconds": med, "all_seconds": times,
        "predicted_seconds": {"slice_only": so.predicted.seconds,
                              "distributed": di.predicted.seconds},
        "slices": {"slice_only": so.n_slices, "distributed": di.n_slices},
        "group_size_distributed": di.group_size,
        "actions_distributed": sorted({r.action.value for r in di.steps}),
        "measured_E_2": e2, "R_2": r2, "E_2_over_R_2": e2 / r2,
        "measured_peak_bytes": {k: max(s["peak_bytes"] for s in v) for k, v in gathered.items()},
        "predicted_peak_bytes": {"slice_only": so.predicted.peak_bytes_per_device,
                                 "distributed": di.predicted.peak_bytes_per_device},
        "sent_bytes_per_rank": {k: [s["sent_bytes"] for s in v] for k, v in gathered.items()},
        "steps_distributed": steps,
    }
    print(f"n30, {comm.size} ranks, per-rank limit {limit / 2**20:.1f} MiB "
          f"(largest intermediate {biggest / 2**20:.1f} MiB); results agree to {err:.1e}")
    for k in ("slice_only", "distributed"):
        print(f"  {k:<12} measured {med[k]:8.3f} s  predicted {out['predicted_seconds'][k]:8.3f} s"
              f"  slices {out['slices'][k]}  peak measured "
              f"{out['measured_peak_bytes'][k] / 2**20:.1f} MiB, predicted "
              f"{out['predicted_peak_bytes'][k] / 2**20:.1f} MiB")
    print(f"  measured E_2 {e2:.3f}, R_2 {r2:.3f}, E_2/R_2 {e2 / r2:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
