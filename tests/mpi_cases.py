"""Cases run under ``mpiexec -n P python tests/mpi_cases.py CASE`` by tests/test_mpi.py.

Rank 0 makes the plan and its schedule, broadcasts the plan as data, every
rank loads it (validated and replayed) and runs the ``mpi`` executor; rank 0
compares with the single-process executor and prints one JSON line.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI
from test_distribute import toy_profile  # this script runs from tests/, so it is importable


def circuit_plan(n: int, depth: int, stars: int, dtype: str, seed: int):
    from qiskit.circuit.random import random_circuit

    import qsimdist
    from qsimdist.planner import path

    # These networks are cheap enough that the planner would keep the greedy path
    # (NO_SEARCH_COST); the cases were chosen on the hyper-optimiser's paths, whose
    # schedules need every distributed action (redistribute included), so keep searching.
    path.NO_SEARCH_COST = 0.0
    qc = random_circuit(n, depth, max_operands=2, seed=seed)
    return qsimdist.plan(qc, bitstrings="*" * stars + "0" * (n - stars), max_repeats=4,
                         memory_limit="none", dtype=dtype)


def network_plan(name: str, k: int, dtype: str):
    """A connected piece of a benchmark network: ``k`` tensors grown breadth-first from the
    first one, each cut bond closed by a seeded random vector, random seeded arrays."""
    from collections import deque
    from pathlib import Path

    import qsimdist
    from qsimdist.network import Network, load_network

    net = load_network(Path(name))
    where: dict[str, list[int]] = {}
    for t, term in enumerate(net.inputs):
        for i in term:
            where.setdefault(i, []).append(t)
    chosen, queue = [], deque([0])
    seen = {0}
    while queue and len(chosen) < k:
        t = queue.popleft()
        chosen.append(t)
        for i in net.inputs[t]:
            for u in where[i]:
                if u not in seen:
                    seen.add(u)
                    queue.append(u)
    keep = set(chosen)
    inputs = [tuple(net.inputs[t]) for t in chosen]
    for i, ts in where.items():
        inside = [t for t in ts if t in keep]
        if inside and len(inside) < len(ts):
            inputs.append((i,))  # close the cut bond
    rng = np.random.default_rng(0)
    arrays = [(rng.normal(size=tuple(net.size_dict[i] for i in t))
               + 1j * rng.normal(size=tuple(net.size_dict[i] for i in t))) / 2 for t in inputs]
    used = {i for t in inputs for i in t}
    sub = Network(inputs, (), {i: net.size_dict[i] for i in used}, arrays)
    from qsimdist.planner.path import PathOptions

    return qsimdist.planner.plan.make_plan(sub, dtype=dtype,
                                           path_options=PathOptions(max_repeats=8))


def peps_plan(dtype: str):
    import quimb.tensor as qtn

    import qsimdist
    from qsimdist.frontends import network_from_quimb

    peps = qtn.PEPS.rand(3, 3, bond_dim=2, seed=7, dtype="complex128")
    net = network_from_quimb(peps.H & peps)  # the norm network <psi|psi>
    return qsimdist.planner.plan.make_plan(net, dtype=dtype)


def make(case: str, nranks: int):
    from qsimdist.planner.distribution import (
        schedule,
        schedule_slice,
        scheduled_plan,
        sliced_plan,
    )

    kind, *args = case.split(":")
    dtype = "complex128" if "c128" in args else "complex64"
    if kind == "circuit":  # circuit:n:depth:stars:seed:fraction[:strategy]
        n, depth, stars, seed = (int(a) for a in args[:4])
        frac = float(args[4])
        plan = circuit_plan(n, depth, stars, dtype, seed)
    elif kind == "network":  # network:PATH:K:fraction
        plan = network_plan(args[0], int(args[1]), dtype)
        frac = float(args[2])
    elif kind == "peps":  # peps:fraction
        plan = peps_plan(dtype)
        frac = float(args[0])
    else:
        raise SystemExit(f"unknown case {case}")
    mem = max(512, int(plan.stats.peak_bytes * frac))
    prof = toy_profile(memory_bytes=mem, devices_per_node=nranks)
    if "reuse" in args:  # sliced, every group keeps what it can reuse across slices
        from qsimdist.planner.distribution.reuse import with_reuse

        sp = sliced_plan(plan, max(2, plan.stats.max_intermediate // 8))
        d = nranks // 2 if "groups" in args else nranks
        sched = schedule_slice(sp, prof, d, big_bytes=0.0, devices=nranks)
        sched = with_reuse(sp, sched) if sched is not None else None
        plan = sp
    elif "sharded" in args:  # every rank shares one slice: distribution forced
        sched = schedule_slice(plan, prof, nranks, big_bytes=0.0)
    elif "groups" in args:  # two groups of nranks/2 share the slices of a sliced plan
        sp = sliced_plan(plan, max(2, plan.stats.max_intermediate // 4))
        sched = schedule_slice(sp, prof, nranks // 2, big_bytes=0.0, devices=nranks)
        plan = sp
    else:
        sched = schedule(plan, prof, nranks)
    if sched is None:
        raise SystemExit("no schedule of this kind fits")
    return plan, scheduled_plan(plan, sched)


def _runs(plan) -> list[int]:
    from qsimdist.planner.reuse import step_counts

    sched = plan.schedule
    return step_counts(plan, sched.sliced, sched.groups, frozenset(sched.kept))


def main() -> None:
    from qsimdist.executors.mpi import RunStats, execute
    from qsimdist.planner.distribution import replay
    from qsimdist.planner.plan import Plan

    comm = MPI.COMM_WORLD
    case = sys.argv[1]
    payload = None
    base = None
    if comm.rank == 0:
        base, sp = make(case, comm.size)
        payload = sp.to_dict()
    payload = comm.bcast(payload, root=0)
    plan = Plan.from_dict(payload, "broadcast plan")
    stats = RunStats()
    out = execute(plan, comm=comm, stats=stats)
    rep = replay(plan, plan.schedule)
    all_stats = comm.gather(stats.to_dict(), root=0)
    if comm.rank == 0:
        ref = base.execute()
        err = float(np.abs(np.asarray(out) - ref).max() / max(np.abs(ref).max(), 1e-30))
        sched = plan.schedule
        print(json.dumps({
            "case": case, "ranks": comm.size, "rel_err": err, "dtype": plan.dtype,
            "group_size": sched.group_size, "n_slices": sched.n_slices,
            "actions": sorted({r.action.value for r in sched.steps}),
            "predicted_peak": sched.predicted.peak_bytes_per_device,
            "usable": sched.usable_memory,
            "replay_sent_per_slice": rep.total_sent, "replay_recv_per_slice": rep.total_recv,
            "replay_step_sent": list(rep.sent_bytes), "replay_step_recv": list(rep.recv_bytes),
            "kept": list(sched.kept), "runs": _runs(plan),
            "predicted_comm_bytes": sched.predicted.comm_bytes_per_device,
            "stats": all_stats,
        }))


if __name__ == "__main__":
    main()
