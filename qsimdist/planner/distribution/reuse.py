"""Reuse across slices in a distributed schedule: what its groups keep and what it saves.

The model (depths, strides, runs per step, the slice order and the greedy
choice of kept outputs) is :mod:`qsimdist.planner.reuse`, shared with local
plans; here it is priced with a schedule's records. Distributed schedules
keep outputs when planned with ``reuse=True`` (:func:`with_reuse`;
``Schedule.kept``), each device its shard of them. All of it is a
cost-model prediction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..reuse import ReuseModel, choose_kept, slice_order, step_counts

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import Plan
    from .schedule import Schedule


def _sched_model(plan: Plan, sched: Schedule) -> tuple[ReuseModel, list[float], int]:
    """(model weighted by per-device FLOPs, those FLOPs, devices per round) of a schedule."""
    flops = [r.flops_per_device for r in sched.steps]
    return ReuseModel(plan, sched.groups, flops), flops, sched.group_size * sched.groups


def _out_bytes(plan: Plan, sched: Schedule) -> dict[int, int]:
    """Per step output: the bytes one device stores of it."""
    import numpy as np

    isz = np.dtype(sched.dtype).itemsize
    return {s.out: math.prod(r.out_shape) * isz for s, r in zip(plan.steps, sched.steps)}


def kept_bytes(plan: Plan, sched: Schedule) -> int:
    """Bytes per device the schedule's kept outputs hold for the whole run."""
    if not sched.kept:
        return 0
    out = _out_bytes(plan, sched)
    return sum(out[k] for k in sched.kept)


def predicted_totals(plan: Plan, sched: Schedule, sent: Sequence[int] | None = None) -> dict:
    """The totals of ``sched.predicted`` as its records, slicing and kept outputs give them.

    ``sent``: bytes each step's collectives send per device (default: the records').
    """
    groups = sched.devices // sched.group_size
    rounds = math.ceil(sched.n_slices / groups)
    recs = sched.steps
    if sent is None:
        sent = [sum(c.send_bytes for c in r.collectives) for r in recs]
    if sched.kept:
        runs = step_counts(plan, sched.sliced, groups, frozenset(sched.kept))
    else:
        runs = [rounds] * len(recs)
    compute = sum(r.predicted_compute_seconds * c for r, c in zip(recs, runs))
    comm = sum(r.predicted_comm_seconds * c for r, c in zip(recs, runs))
    pack = sum(r.predicted_pack_seconds * c for r, c in zip(recs, runs))
    flops_dev = sum(r.flops_per_device * c for r, c in zip(recs, runs))
    per_slice = sum(r.predicted_compute_seconds + r.predicted_comm_seconds
                    + r.predicted_pack_seconds for r in recs)
    if sched.kept:  # the busiest group's runs, every group alike
        executed = flops_dev * sched.group_size * groups
    else:
        executed = sum(r.flops_per_device for r in recs) * sched.group_size * sched.n_slices
    return {
        "rounds": rounds,
        "n_redistributions": sum(1 for r in recs for c in r.pre if c.kind == "alltoall"),
        "comm_bytes_per_device": float(sum(b * c for b, c in zip(sent, runs))),
        "flops_per_device": flops_dev,
        "flops_executed": executed,
        "flops_counted": plan.stats.flops,
        "seconds_per_slice": per_slice,
        "seconds": compute + comm + pack,
        "compute_seconds": compute,
        "comm_seconds": comm,
        "pack_seconds": pack,
    }


def with_reuse(plan: Plan, sched: Schedule) -> Schedule:
    """``sched`` with the step outputs worth keeping across slices that fit its free memory.

    The sliced indices are reordered for reuse (:func:`slice_order`); the
    schedule comes back unchanged when nothing is worth keeping or nothing fits.
    """
    import dataclasses

    if sched.n_slices < 2 or len(plan.steps) < 2:
        return sched
    groups = sched.devices // sched.group_size
    weights = [r.predicted_compute_seconds + r.predicted_comm_seconds + r.predicted_pack_seconds
               for r in sched.steps]
    free = sched.usable_memory - sched.predicted.peak_bytes_per_device
    if free <= 0:
        return sched
    order = slice_order(plan, groups, weights)
    kept = choose_kept(plan, order, groups, weights, _out_bytes(plan, sched), free)
    if not kept:
        return sched
    out = dataclasses.replace(sched, sliced=tuple(order), kept=tuple(sorted(kept)))
    totals = predicted_totals(plan, out)
    if totals["seconds"] >= sched.predicted.seconds:
        return sched
    pred = dataclasses.replace(
        sched.predicted, peak_bytes_per_device=sched.predicted.peak_bytes_per_device
        + kept_bytes(plan, out), **{k: v for k, v in totals.items() if k != "rounds"})
    return dataclasses.replace(out, predicted=pred)


def breakdown(plan: Plan, sched: Schedule, unsliced_flops: float) -> dict[str, float]:
    """Where a schedule's executed FLOPs go: predicted totals over every device.

    ``plan`` is the plan sliced as ``sched`` (``scheduler.scheduled_plan``);
    ``unsliced_flops`` the FLOPs of its path unsliced (``stats.flops`` of the
    plan before slicing). From the fewest up: ``unsliced`` (the path run
    once), ``once_per_value`` (each step once per value of the sliced indices
    it depends on: a floor no order of the slices reaches when steps depend
    on different indices),
    ``every_kept`` (every step output kept, the schedule's order: what the
    order allows), ``kept`` (the schedule's kept outputs: what memory allows;
    its ``flops_executed`` when it keeps any) and ``nothing_kept`` (every step
    once per slice).
    """
    model, flops, scale = _sched_model(plan, sched)
    once = sum(f * c for f, c in zip(flops, model.once()))
    return {"unsliced": float(unsliced_flops), "once_per_value": once * scale,
            "every_kept": model.cost(sched.sliced, model.every()) * scale,
            "kept": model.cost(sched.sliced, frozenset(sched.kept or ())) * scale,
            "nothing_kept": model.cost(sched.sliced, frozenset()) * scale}



def order_loss(plan: Plan, sched: Schedule, top: int = 5) -> dict:
    """Which steps carry the cost of the slices' order: FLOPs above once per value.

    With every output kept, a step still runs again for each value of a
    sliced index it does not depend on that varies more slowly than one it
    does (its *reruns*). Keeping a copy of its output per value of the
    sliced indices it depends on after the first of those would avoid them:
    ``versions`` copies of ``bytes_per_version`` per device. ``plan`` is
    sliced as ``sched`` (``scheduler.scheduled_plan``).

    Returns ``extra_flops`` (every device, over the once-per-value floor),
    ``fits_share`` (the share of it in steps whose copies alone would fit the
    usable memory: a bound on what keeping copies could recover) and the
    ``top`` steps by extra FLOPs. All of it is a cost-model prediction.
    """
    model, flops, scale = _sched_model(plan, sched)
    runs, once_runs = model.runs(sched.sliced, model.every()), model.once()
    size = plan.network.size_dict
    pos = {ix: k + 1 for k, ix in enumerate(sched.sliced)}
    out_bytes = _out_bytes(plan, sched)
    rows, total, fits = [], 0.0, 0.0
    for j, s in enumerate(plan.steps):
        deps = model.sets[s.out]
        extra = flops[j] * max(0, runs[j] - once_runs[j]) * scale
        if extra <= 0:
            continue
        depth = max((pos[ix] for ix in deps), default=0)
        rerun = [ix for ix in sched.sliced[:depth] if ix not in deps]
        first = pos[rerun[0]] if rerun else depth
        versions = math.prod(size[ix] for ix in deps if pos[ix] > first)
        total += extra
        if out_bytes[s.out] * versions <= sched.usable_memory:
            fits += extra
        rows.append({"step": j, "extra_flops": extra, "depends_on": len(deps),
                     "reruns_for": rerun, "versions": versions,
                     "bytes_per_version": out_bytes[s.out],
                     "bytes_all_versions": out_bytes[s.out] * versions})
    rows.sort(key=lambda r: -r["extra_flops"])
    for r in rows:
        r["share"] = r["extra_flops"] / total
    return {"extra_flops": total, "fits_share": fits / total if total else 0.0,
            "steps": rows[:top]}
