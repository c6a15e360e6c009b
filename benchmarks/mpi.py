"""Distributed against slice-only, measured: ``E_2``, ``R_2`` and predicted against measured.

    mpiexec -n 2 python -m mpi4py -m benchmarks.mpi [--data ../shared/data]
        [--limit-fraction 0.6] [--stars 0] [--repeats 3] [--reuse] [--json OUT]
        [--workload n30|kicked-ising [--steps 6] [--observable W17] [--theta 0.8]]

Rank 0 plans the workload's network once (default ``n30``: the n30 reference
circuit's amplitude; ``kicked-ising``: one Pauli term ``--observable`` of IBM's
127-qubit kicked-Ising circuit after ``--steps`` steps, on its doubled light-cone
network as :class:`~qsimdist.engine.expectation.ExpectationEngine` contracts it),
sets a per-rank memory limit below the plan's largest intermediate
(``--limit-fraction`` of it), and makes two schedules for the same ranks and the
same limit with the ``local-cpu`` profile: *slice-only* (each rank contracts its
own slices) and *distributed* (the fastest predicted schedule whose groups span
more than one rank).
Both are broadcast and run in the same job, alternating, ``--repeats`` times.
Reported: measured seconds (median), measured ``E_2`` = slice-only time /
distributed time, ``R_2`` = slice-only FLOPs / distributed executed FLOPs
(counts, not timings), ``E_2 / R_2``, and each schedule's predicted seconds
next to the measured ones, per step for the distributed one. With
``kicked-ising`` (complex128 by default) rank 0 also contracts the unsliced plan in
one process (``plan.execute()``) and reports both distributed results' largest
absolute difference from that value.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def n30_network(data: Path, stars: int):
    """n30's amplitude network with ``stars`` open qubits, simplified by quimb's passes: the
    shipped trees (``benchmarks/plans/trees/n30_*``) were searched on that network."""
    from .distribution import workload_network

    circuit = data / "circuits" / "circuit_n30_m14_s0_e0_pEFGH.qsim"
    return workload_network(str(circuit), {"bitstrings": "*" * stars + "0" * (30 - stars),
                                           "order": "natural"})


def kicked_ising_network(data: Path, steps: int, observable: str, theta: float,
                         dtype: str = "complex128"):
    """The doubled light-cone network of one kicked-Ising Pauli term, simplified as
    :meth:`ExpectationEngine._doubled_values
    <qsimdist.engine.expectation.ExpectationEngine>` makes it (fused circuit,
    :meth:`~qsimdist.engine.doubled.DoubledCircuit.simplified`, no limit)."""
    from qsimdist.engine.doubled import DoubledCircuit
    from qsimdist.engine.pauli_terms import SINGLE_QUBIT_OPERATORS, parse_term
    from qsimdist.frontends import load

    from .kicked_ising import N_QUBITS, OBSERVABLES, kicked_ising, load_edges, pauli_label

    circuit = load(kicked_ising(load_edges(data), theta, steps))
    term = parse_term(pauli_label(OBSERVABLES[observable]), N_QUBITS)
    return DoubledCircuit.of(circuit, fuse=True).simplified(
        term.qubits, term.ops, SINGLE_QUBIT_OPERATORS, limit=None, dtype=dtype)


def workload_name(args) -> str:
    if args.workload == "n30":
        return "n30"
    return f"kicked-Ising {args.observable}, {args.steps} steps, theta_h {args.theta:g}"


def base_plan(data: Path, stars: int, args=None):
    import qsimdist

    if args is not None and args.workload == "kicked-ising":
        from qsimdist.planner.plan import make_plan

        # unsliced, as the engine's distributed route makes a term's plan before scheduling
        net = kicked_ising_network(data, args.steps, args.observable, args.theta, args.dtype)
        return make_plan(net, dtype=args.dtype, memory_limit=None)
    return qsimdist.plan(n30_network(data, stars), memory_limit="none", max_repeats=64,
                         simplify_sequence="")


def tree_plan(data: Path, stars: int, tree: str, args=None):
    """The workload's plan (default n30's amplitude) along a searched tree (``qsimdist
    search``), unsliced, its slicing kept as the search's for the distribution planner."""
    import qsimdist

    if args is not None and args.workload == "kicked-ising":
        net = kicked_ising_network(data, args.steps, args.observable, args.theta, args.dtype)
        plan = qsimdist.plan(net, memory_limit="none", tree=tree, simplify_sequence="",
                             dtype=args.dtype)
    else:
        plan = qsimdist.plan(n30_network(data, stars), memory_limit="none", tree=tree,
                             simplify_sequence="")
    from qsimdist.planner.plan import build_plan

    return build_plan(plan.network, plan.path, [], plan.dtype, meta=plan.meta)


def make_plans(base, limit_fraction: float, nranks: int, profile, base_two=None,
               limit_bytes: int | None = None, reuse: bool = False, info: dict | None = None):
    """(slice-only plan on ``base``, distributed plan on ``base_two`` or ``base``, limit,
    largest intermediate of ``base``). ``info["dp_group_size"]``: the group size the dp
    strategy chose itself (1: the model preferred slicing, and the best sharded schedule
    was taken instead)."""
    import dataclasses

    from qsimdist.planner.distribution import schedule, scheduled_plan

    isz = np.dtype(base.dtype).itemsize
    limit = (int(limit_bytes) if limit_bytes is not None
             else int(base.stats.max_intermediate * isz * limit_fraction))
    prof = dataclasses.replace(profile, memory_bytes=limit, usable_memory_fraction=1.0)
    slice_only = schedule(base, prof, nranks, "slice_only", reuse=reuse)
    one = base
    base = base_two if base_two is not None else base
    dist = schedule(base, prof, nranks, "dp", reuse=reuse)
    if info is not None:
        info["dp_group_size"] = dist.group_size
        info["dp_predicted_seconds"] = dist.predicted.seconds
    if dist.group_size == 1:  # the model preferred slicing: take the best sharded schedule
        from qsimdist.planner.distribution import BIG_FRACTIONS, schedule_slice, sliced_plan
        from qsimdist.planner.plan import slice_target

        best = None
        target = slice_target(int(limit) * nranks, isz)
        while target >= 1 and best is None:
            sp = sliced_plan(base, target)
            for frac in BIG_FRACTIONS:
                s = schedule_slice(sp, prof, nranks, big_bytes=frac * limit, devices=nranks)
                if s is not None and reuse:
                    from qsimdist.planner.distribution.reuse import with_reuse

                    s = with_reuse(sp, s)
                if s is not None and (best is None
                                      or s.predicted.seconds < best[0].predicted.seconds):
                    best = (s, sp)
            target //= 2
        dist = best[0]
    return (scheduled_plan(one, slice_only), scheduled_plan(base, dist), limit,
            one.stats.max_intermediate * isz)


def timed_runs(comm, plans: dict, repeats: int):
    """Run every plan ``repeats`` times (after one warm-up round), alternating; per-rank stats."""
    from qsimdist.executors.mpi import RunStats, execute

    times = {k: [] for k in plans}
    stats, results = {}, {}
    for _ in range(repeats + 1):
        for name, plan in plans.items():
            st = RunStats()
            comm.Barrier()
            t = time.perf_counter()
            results[name] = execute(plan, comm=comm, stats=st)
            comm.Barrier()
            times[name].append(time.perf_counter() - t)
            stats[name] = st
    gathered = {k: comm.gather(v.to_dict(), root=0) for k, v in stats.items()}
    return times, gathered, results


def broadcast_plans(comm, build) -> dict:
    from qsimdist.planner.plan import Plan

    payload = build() if comm.rank == 0 else None
    payload = comm.bcast(payload, root=0)
    return {k: Plan.from_dict(v, f"{k} plan") for k, v in payload.items()}


def main(argv: list[str] | None = None) -> dict | None:
    from mpi4py import MPI

    from qsimdist.executors.run_stats import trace_rows
    from qsimdist.hardware import load_profile
    from qsimdist.hardware.calibrate import fit_profile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--limit-fraction", type=float, default=0.6)
    ap.add_argument("--stars", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree-one", default=None, help="the competitive one-device tree "
                    "(qsimdist search --devices 1) for slice-only")
    ap.add_argument("--tree-two", default=None, help="the tree searched for the ranks "
                    "(qsimdist search --devices 2) for the distributed schedule")
    ap.add_argument("--limit-bytes", type=int, default=None,
                    help="per-rank limit in bytes (default: --limit-fraction of the largest "
                    "intermediate); the trees' searches should use the same")
    ap.add_argument("--reuse", action="store_true", help="both schedules keep step outputs "
                    "across slices where memory allows (benchmarks.reuse)")
    ap.add_argument("--workload", choices=("n30", "kicked-ising"), default="n30",
                    help="n30: the n30 amplitude (default); kicked-ising: one Pauli term of "
                    "the 127-qubit kicked-Ising circuit on its doubled light-cone network")
    ap.add_argument("--steps", type=int, default=6, help="kicked-ising: Trotter steps")
    ap.add_argument("--observable", default="W17", choices=("Z62", "W10", "W17"),
                    help="kicked-ising: the term (benchmarks.kicked_ising.OBSERVABLES)")
    ap.add_argument("--theta", type=float, default=0.8, help="kicked-ising: theta_h")
    ap.add_argument("--dtype", default=None, help="kicked-ising: default complex128 (n30 "
                    "keeps qsimdist.plan's default)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.workload == "kicked-ising":
        args.dtype = args.dtype or "complex128"
    elif args.dtype is not None:
        ap.error("--dtype is for --workload kicked-ising")
    comm = MPI.COMM_WORLD
    t0 = time.perf_counter()
    data = Path(args.data)
    base = two = None
    if comm.rank == 0:
        base = (tree_plan(data, args.stars, args.tree_one, args) if args.tree_one
                else base_plan(data, args.stars, args))
        two = tree_plan(data, args.stars, args.tree_two, args) if args.tree_two else None
    info = {}

    def build(profile):
        def run():
            a, b, limit, biggest = make_plans(base, args.limit_fraction, comm.size, profile,
                                              base_two=two, limit_bytes=args.limit_bytes,
                                              reuse=args.reuse, info=info)
            info.update(limit=limit, biggest=biggest)
            return {"slice_only": a.to_dict(), "distributed": b.to_dict()}
        return run

    # 1. calibration: the bundled local-cpu profile's schedules, measured once, then fitted
    plans = broadcast_plans(comm, build(load_profile("local-cpu")))
    _, gathered, _ = timed_runs(comm, plans, 1)
    fitted = None
    if comm.rank == 0:
        rows = [r for k, p in plans.items() for r in trace_rows(p, gathered[k])]
        fitted = fit_profile(load_profile("local-cpu"), rows, base.dtype, "local-cpu-fitted")
    fitted = comm.bcast(fitted, root=0)
    # 2. the measured comparison, planned with the fitted profile
    plans = broadcast_plans(comm, build(fitted))
    times, gathered, results = timed_runs(comm, plans, args.repeats)
    if comm.rank != 0:
        return None
    one_process = None
    if args.workload != "n30":  # the one-process value of the unsliced plan, timed
        t = time.perf_counter()
        value = complex(np.asarray(base.execute()).reshape(-1)[0])
        secs = time.perf_counter() - t
        diffs = {k: float(np.abs(np.asarray(v).reshape(-1)[0] - value))
                 for k, v in results.items()}
        one_process = {"value": [value.real, value.imag], "seconds": secs,
                       "max_abs_diff": diffs, "agree_1e-10": max(diffs.values()) <= 1e-10}
    err = float(np.abs(results["slice_only"] - results["distributed"]).max()
                / max(np.abs(results["slice_only"]).max(), 1e-30))
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    so, di = plans["slice_only"].schedule, plans["distributed"].schedule
    r2 = so.predicted.flops_executed / di.predicted.flops_executed
    e2 = med["slice_only"] / med["distributed"]
    limit, biggest = info["limit"], info["biggest"]
    out = {
        "workload": workload_name(args), "dtype": base.dtype,
        "ranks": comm.size, "limit_bytes": limit, "reuse": args.reuse,
        "kept_outputs": {"slice_only": len(so.kept), "distributed": len(di.kept)},
        "trees": {"slice_only": args.tree_one, "distributed": args.tree_two},
        "largest_intermediate_bytes": biggest,
        "wall_s": time.perf_counter() - t0, "rel_diff_between_results": err,
        "fitted_profile": {"complex64_flops": fitted.flops["complex64"],
                           "step_overhead_s": fitted.step_overhead,
                           "link_bandwidth": fitted.intra_bandwidth,
                           "latency_s": fitted.intra_latency},
        "measured_seconds": med, "all_seconds": times,
        "predicted_seconds": {"slice_only": so.predicted.seconds,
                              "distributed": di.predicted.seconds},
        "slices": {"slice_only": so.n_slices, "distributed": di.n_slices},
        "group_size_distributed": di.group_size,
        "dp_chose_group_size": info.get("dp_group_size"),
        "group_sizes": {"slice_only": so.group_size, "distributed": di.group_size},
        "redistributions": {"slice_only": so.predicted.n_redistributions,
                            "distributed": di.predicted.n_redistributions},
        "one_process": one_process,
        "actions_distributed": sorted({r.action.value for r in di.steps}),
        "actions_slice_only": sorted({r.action.value for r in so.steps}),
        "measured_E_2": e2, "R_2": r2, "E_2_over_R_2": e2 / r2,  # P is "ranks"
        "measured_peak_bytes": {k: max(s["peak_bytes"] for s in v) for k, v in gathered.items()},
        "predicted_peak_bytes": {"slice_only": so.predicted.peak_bytes_per_device,
                                 "distributed": di.predicted.peak_bytes_per_device},
        "sent_bytes_per_rank": {k: [s["sent_bytes"] for s in v] for k, v in gathered.items()},
        "steps_distributed": trace_rows(plans["distributed"], gathered["distributed"]),
    }
    print(f"{workload_name(args)}, {comm.size} ranks, per-rank limit {limit / 2**20:.1f} MiB "
          f"(largest intermediate {biggest / 2**20:.1f} MiB); results agree to {err:.1e}")
    print(f"  fitted local-cpu: {fitted.flops['complex64'] / 1e9:.2f} GFLOP/s, "
          f"{fitted.step_overhead * 1e6:.1f} us per step, link "
          f"{fitted.intra_bandwidth / 1e9:.2f} GB/s, latency {fitted.intra_latency * 1e6:.1f} us")
    for k in ("slice_only", "distributed"):
        print(f"  {k:<12} measured {med[k]:8.3f} s  predicted {out['predicted_seconds'][k]:8.3f} s"
              f" ({out['predicted_seconds'][k] / med[k]:.2f}x)  slices {out['slices'][k]}  peak "
              f"measured {out['measured_peak_bytes'][k] / 2**20:.2f} MiB, predicted "
              f"{out['predicted_peak_bytes'][k] / 2**20:.2f} MiB")
    if args.workload != "n30":
        print(f"  the dp strategy itself chose group size {info.get('dp_group_size')}"
              + ("" if info.get("dp_group_size", 1) > 1 else
                 " (slicing predicted faster; the best sharded schedule was taken)"))
        for k, sched in (("slice_only", so), ("distributed", di)):
            print(f"  {k:<12} group size {sched.group_size}, redistributions "
                  f"{sched.predicted.n_redistributions}, actions "
                  f"{', '.join(sorted({r.action.value for r in sched.steps}))}")
        diffs = one_process["max_abs_diff"]
        print(f"  one process: value {one_process['value'][0]:.15g}"
              f"{one_process['value'][1]:+.3g}j in {one_process['seconds']:.3f} s; max abs "
              f"diff slice-only {diffs['slice_only']:.1e}, distributed "
              f"{diffs['distributed']:.1e} (1e-10: "
              f"{'yes' if one_process['agree_1e-10'] else 'NO'})")
    print(f"  measured E_{comm.size} {e2:.3f}, R_{comm.size} {r2:.3f}, "
          f"E_{comm.size}/R_{comm.size} {e2 / r2:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
