"""Reuse across slices: step outputs a group keeps from one slice to the next.

A group runs its slices in order: slice number ``s`` fixes the sliced
indices with the last one of ``plan.sliced`` varying fastest, and group
``g`` of ``G`` runs one contiguous block of them, ``g * N // G`` up to
``(g + 1) * N // G`` (``Schedule.slices_of_group``), so the groups split
the prefixes between them instead of each meeting all. Every node of the
contraction (a leaf or a step's output) depends on the sliced indices
found on its subtree's leaves; its *depth* ``m`` is
the largest position among them (1-based, outermost first, 0 for none).
Its value changes only when ``s // stride(m)`` does, ``stride(m)`` being
the product of the sizes at the positions after ``m``. A slice that leaves
that prefix unchanged would compute the same tensor again.

Keeping such an output (each device its shard) lets the group skip the
step, and the steps below it, until its prefix changes. A kept output stays
resident for the whole run, so it adds to every step's live bytes: the
planner keeps only what fits the memory the schedule leaves free, the most
predicted seconds saved per byte first, and orders the sliced indices so
that the expensive steps depend on as few of the fast-varying ones as it
can (:func:`slice_order`). Without kept outputs nothing changes: every step
runs once per slice.

Cost: a kept node's count of computations over the busiest group's slices
is the number of distinct prefixes its block meets: ``(N / G) / stride(m)``
when the stride divides the block and 1 when the block lies within one
prefix. A step that is not kept runs as often as its consumer. All of it is a cost-model prediction.

Distributed schedules keep outputs when planned with ``reuse=True``
(:func:`with_reuse`; ``Schedule.kept``). A local plan sliced to fit a memory
limit keeps them by default where that saves at least
:data:`LOCAL_MIN_SAVING` (:func:`local_choice`; ``Plan.kept``). The executors
read both through :class:`qsimdist.executors.carry.Carry`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import Plan
    from .schedule import Schedule


def sliced_sets(plan: Plan, order: Sequence[str]) -> list[frozenset[str]]:
    """Per node (leaves, then step outputs by SSA id): the sliced indices it depends on."""
    sliced = set(order)
    net = plan.network
    sets: list[frozenset[str]] = [frozenset(set(t) & sliced) for t in net.inputs]
    sets.extend(frozenset() for _ in plan.steps)
    for s in plan.steps:
        sets[s.out] = sets[s.lhs] | sets[s.rhs]
    return sets


def depths(plan: Plan, order: Sequence[str]) -> list[int]:
    """Per node: the largest 1-based position in ``order`` of a sliced index it depends on."""
    pos = {ix: k + 1 for k, ix in enumerate(order)}
    return [max((pos[ix] for ix in s), default=0) for s in sliced_sets(plan, order)]


def strides(plan: Plan, order: Sequence[str]) -> list[int]:
    """``stride(m)`` for ``m = 0 .. len(order)``: the slices one prefix of length ``m`` spans."""
    sizes = [plan.network.size_dict[ix] for ix in order]
    out = [1] * (len(sizes) + 1)
    for m in range(len(sizes) - 1, -1, -1):
        out[m] = out[m + 1] * sizes[m]
    return out


def prefix_counts(n_slices: int, groups: int, stride: list[int]) -> list[int]:
    """Computations of a node of depth ``m`` over the busiest group's slices, kept.

    Group ``g`` runs the contiguous block of slice numbers ``g * N // G`` up to
    ``(g + 1) * N // G`` (``Schedule.slices_of_group``), so it meets
    ``block / stride`` prefixes when the stride divides its block and one when
    the block lies within a prefix; other extents are counted block by block.
    """
    return list(_prefix_counts(n_slices, groups, tuple(stride)))


@functools.lru_cache(maxsize=4096)
def _prefix_counts(n: int, groups: int, stride: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for st in stride:
        if n % groups == 0 and (n // groups) % st == 0:
            out.append(n // groups // st)
        elif n % groups == 0 and st % (n // groups) == 0:
            out.append(1)
        else:
            out.append(max(((g + 1) * n // groups - 1) // st - (g * n // groups) // st + 1
                           for g in range(groups) if (g + 1) * n // groups > g * n // groups))
    return tuple(out)


def step_counts(plan: Plan, order: Sequence[str], groups: int,
                kept: set[int] | frozenset[int]) -> list[int]:
    """Per step: how often the busiest group runs it, ``kept`` step outputs reused."""
    return _Model(plan, groups, [0.0] * len(plan.steps)).runs(order, kept)


class _Model:
    """Runs and weighted cost of a plan's steps for any order and kept set (fast to re-ask)."""

    def __init__(self, plan: Plan, groups: int, weights: Sequence[float]) -> None:
        self.plan, self.groups, self.weights = plan, groups, list(weights)
        self.sets = sliced_sets(plan, plan.sliced)
        self.n = plan.network.num_tensors
        self.size = plan.network.size_dict
        self.n_slices = math.prod(self.size[ix] for ix in plan.sliced)

    def depth(self, pos: dict[str, int], node: int) -> int:
        """The node's depth for the positions ``pos`` of the sliced indices."""
        return max((pos[ix] for ix in self.sets[node]), default=0)

    def runs(self, order: Sequence[str], kept) -> list[int]:
        pos = {ix: k + 1 for k, ix in enumerate(order)}
        stride = strides(self.plan, order)
        own = prefix_counts(self.n_slices, self.groups, stride)
        steps = self.plan.steps
        if not steps:
            return []
        runs = {steps[-1].out: math.ceil(self.n_slices / self.groups)}
        out = [0] * len(steps)
        for j in range(len(steps) - 1, -1, -1):
            s = steps[j]
            c = out[j] = runs.get(s.out, 0)
            for child in (s.lhs, s.rhs):
                if child >= self.n:
                    if child in kept:
                        runs[child] = min(c, own[self.depth(pos, child)])
                    else:
                        runs[child] = c
        return out

    def cost(self, order: Sequence[str], kept) -> float:
        return sum(w * c for w, c in zip(self.weights, self.runs(order, kept)))

    def once(self) -> list[int]:
        """Per step: how often the busiest group runs it once per value of the sliced
        indices it depends on (the floor no order of the slices goes below)."""
        return [max(1, math.ceil(math.prod(self.size[ix] for ix in self.sets[s.out])
                                 / self.groups)) for s in self.plan.steps]

    def every(self) -> frozenset[int]:
        """Every step output, as a kept set."""
        return frozenset(range(self.n, self.n + len(self.plan.steps)))


def _sched_model(plan: Plan, sched: Schedule) -> tuple[_Model, list[float], int]:
    """(model weighted by per-device FLOPs, those FLOPs, devices per round) of a schedule."""
    flops = [r.flops_per_device for r in sched.steps]
    return _Model(plan, sched.groups, flops), flops, sched.group_size * sched.groups


#: the tries an order gets after its first guess: random swaps of two positions, kept
#: while they lower the cost with every output kept (seeded: a plan's order is repeatable)
ORDER_TRIES = 1500
#: ... stopping early after this many tries per sliced index without a better order
ORDER_PATIENCE = 20


def slice_order(plan: Plan, groups: int, weights: Sequence[float],
                tries: int = ORDER_TRIES, seed: int = 0) -> list[str]:
    """An order of the sliced indices (outermost first) for reuse.

    Every step output kept (no memory limit), the total of ``weights`` (per
    step and slice) times the runs is what is minimised: indices first by
    the fewest sliced indices of a node they appear on, then up to ``tries``
    random swaps of two positions, each kept if it lowers the total (ending
    after :data:`ORDER_PATIENCE` tries per index in a row that do not).
    """
    import random

    order = list(plan.sliced)
    if len(order) < 2 or not plan.steps:
        return order
    model = _Model(plan, groups, weights)
    first = {ix: len(order) + 1 for ix in order}
    load = {ix: 0.0 for ix in order}
    for j, s in enumerate(plan.steps):
        for ix in model.sets[s.out]:
            first[ix] = min(first[ix], len(model.sets[s.out]))
            load[ix] += weights[j]
    order.sort(key=lambda ix: (first[ix], -load[ix], ix))
    every = model.every()
    best = model.cost(order, every)
    rng = random.Random(seed)
    idle, patience = 0, ORDER_PATIENCE * len(order)
    for _ in range(tries):
        if idle >= patience:
            break
        i, k = rng.randrange(len(order)), rng.randrange(len(order))
        if i == k:
            continue
        cand = list(order)
        cand[i], cand[k] = cand[k], cand[i]
        cost = model.cost(cand, every)
        idle += 1
        if cost < best * (1 - 1e-12):
            order, best, idle = cand, cost, 0
    return order


def choose_kept(plan: Plan, order: Sequence[str], groups: int, weights: Sequence[float],
                node_bytes: dict[int, int], free_bytes: int) -> frozenset[int]:
    """Step outputs to keep within ``free_bytes`` per device, most seconds saved per byte first.

    ``node_bytes``: per step output, the bytes one device holds of it. Lazy
    greedy: candidates are ranked by their saving per byte with nothing else
    kept (an upper bound), and the top one is priced again against what is
    already kept before it is taken.
    """
    import heapq

    model = _Model(plan, groups, weights)
    n = model.n
    base = model.runs(order, frozenset())
    pos = {ix: k + 1 for k, ix in enumerate(order)}
    own = prefix_counts(model.n_slices, groups, strides(plan, order))
    below: dict[int, float] = {}
    for j, s in enumerate(plan.steps):
        below[s.out] = weights[j] + below.get(s.lhs, 0.0) + below.get(s.rhs, 0.0)
    heap = []
    for j, s in enumerate(plan.steps):
        for child in (s.lhs, s.rhs):
            if child < n:
                continue
            saved = base[j] - own[model.depth(pos, child)]
            nbytes = node_bytes.get(child, 0)
            if saved > 0 and 0 < nbytes <= free_bytes:
                heapq.heappush(heap, (-below[child] * saved / nbytes, child, nbytes))
    kept: set[int] = set()
    used, cost = 0, model.cost(order, kept)
    while heap:
        _, node, nbytes = heapq.heappop(heap)
        if used + nbytes > free_bytes:
            continue
        new = model.cost(order, kept | {node})
        gain = (cost - new) / nbytes
        if gain <= 0:
            continue
        if heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, node, nbytes))  # priced lower now: back in line
            continue
        kept.add(node)
        used, cost = used + nbytes, new
    return frozenset(kept)


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


def check_kept(plan: Plan, kept: Sequence[int]) -> str | None:
    """Why ``kept`` cannot be a schedule's kept outputs of ``plan`` (``None``: it can)."""
    n = plan.network.num_tensors
    outs = {s.out for s in plan.steps[:-1]}
    bad = [k for k in kept if k not in outs]
    if bad:
        return (f"kept node {bad[0]} is not the output of a step other than the last "
                f"(step outputs are {n}..{n + len(plan.steps) - 2})")
    if len(set(kept)) != len(kept):
        return "kept names a node twice"
    return None


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


#: a step's fixed cost in the local executor, in FLOPs: about 25 us a step at 10 GFLOP/s
#: (the n30 amplitude's small steps on this project's 2-core machine, measured in
#: docs/benchmarks/history.md, "Reuse across slices")
LOCAL_STEP_FLOPS = 2.5e5
#: a local plan keeps outputs only for a predicted saving of at least this share
LOCAL_MIN_SAVING = 0.1


def local_kept_bytes(plan: Plan, kept: Sequence[int]) -> int:
    """Bytes the local executor holds for ``kept`` step outputs (one slice's extents)."""
    import numpy as np

    isz = np.dtype(plan.dtype).itemsize
    want = set(kept)
    return sum(math.prod(s.out_view) * isz for s in plan.steps if s.out in want)


def local_choice(plan: Plan, memory_limit: int) -> tuple[list[str], frozenset[int]] | None:
    """(slice order, kept step outputs) for a sliced local plan, or ``None`` when not worth it.

    Steps are weighed by their FLOPs plus :data:`LOCAL_STEP_FLOPS`; outputs are
    kept in the memory the plan leaves free under ``memory_limit``, and only
    when that saves at least :data:`LOCAL_MIN_SAVING` of the weight
    (``planner.plan.with_local_reuse`` applies it).
    """
    if (plan.schedule is not None or plan.kept or plan.stats.n_slices < 2
            or len(plan.steps) < 2):
        return None
    free = int(memory_limit) - plan.stats.peak_bytes
    if free <= 0:
        return None
    weights = [s.flops + LOCAL_STEP_FLOPS for s in plan.steps]
    order = slice_order(plan, 1, weights)
    node_bytes = {s.out: local_kept_bytes(plan, (s.out,)) for s in plan.steps}
    kept = choose_kept(plan, order, 1, weights, node_bytes, free)
    model = _Model(plan, 1, weights)
    if not kept or model.cost(order, kept) > (1 - LOCAL_MIN_SAVING) * model.cost(
            plan.sliced, frozenset()):
        return None
    return order, kept
