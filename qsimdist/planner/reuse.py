"""Reuse across slices: step outputs kept from one slice to the next.

A plan's slices run in order: slice number ``s`` fixes the sliced indices
with the last one of ``plan.sliced`` varying fastest, and group ``g`` of
``G`` runs one contiguous block of them, ``g * N // G`` up to
``(g + 1) * N // G`` (one group for a local plan; ``Schedule.slices_of_group``
for a distributed one), so the groups split the prefixes between them
instead of each meeting all. Every node of the contraction (a leaf or a
step's output) depends on the sliced indices found on its subtree's leaves;
its *depth* ``m`` is the largest position among them (1-based, outermost
first, 0 for none). Its value changes only when ``s // stride(m)`` does,
``stride(m)`` being the product of the sizes at the positions after ``m``.
A slice that leaves that prefix unchanged would compute the same tensor again.

Keeping such an output lets the group skip the step, and the steps below
it, until its prefix changes. A kept output stays resident for the whole
run, so it adds to every step's live bytes: only what fits the memory left
free is kept, the most predicted seconds saved per byte first
(:func:`choose_kept`), and the sliced indices are ordered so that the
expensive steps depend on as few of the fast-varying ones as can be
(:func:`slice_order`). Without kept outputs nothing changes: every step
runs once per slice.

Cost: a kept node's count of computations over the busiest group's slices
is the number of distinct prefixes its block meets: ``(N / G) / stride(m)``
when the stride divides the block and 1 when the block lies within one
prefix. A step that is not kept runs as often as its consumer. All of it is
a cost-model prediction.

A local plan sliced to fit a memory limit keeps outputs by default where
that saves at least :data:`LOCAL_MIN_SAVING` (:func:`local_choice`;
``Plan.kept``); distributed schedules keep them through
:mod:`qsimdist.planner.distribution.reuse`. The executors read both through
:class:`qsimdist.executors.carry.Carry`. This module is plain arithmetic on a
plan and imports nothing of the planner at run time, so
:mod:`qsimdist.planner.plan` can use it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..hardware import costs

if TYPE_CHECKING:  # pragma: no cover
    from .plan import Plan


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
    return ReuseModel(plan, groups, [0.0] * len(plan.steps)).runs(order, kept)


class ReuseModel:
    """Runs and weighted cost of a plan's steps for any order and kept set (fast to re-ask).

    ``groups`` groups share the slices; ``weights``: per step, its cost per run.
    """

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
    model = ReuseModel(plan, groups, weights)
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

    model = ReuseModel(plan, groups, weights)
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


def check_kept(plan: Plan, kept: Sequence[int]) -> str | None:
    """Why ``kept`` cannot be the kept outputs of ``plan`` or of its schedule (``None``: it can)."""
    n = plan.network.num_tensors
    outs = {s.out for s in plan.steps[:-1]}
    bad = [k for k in kept if k not in outs]
    if bad:
        return (f"kept node {bad[0]} is not the output of a step other than the last "
                f"(step outputs are {n}..{n + len(plan.steps) - 2})")
    if len(set(kept)) != len(kept):
        return "kept names a node twice"
    return None


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

    Steps are weighed by their FLOPs plus
    :data:`~qsimdist.hardware.costs.LOCAL_STEP_FLOPS`; outputs are kept in the memory
    the plan leaves free under ``memory_limit``, and only when that saves at least
    :data:`LOCAL_MIN_SAVING` of the weight
    (:func:`qsimdist.planner.plan.with_local_reuse` applies it).
    """
    if (plan.schedule is not None or plan.kept or plan.stats.n_slices < 2
            or len(plan.steps) < 2):
        return None
    free = int(memory_limit) - plan.stats.peak_bytes
    if free <= 0:
        return None
    weights = [s.flops + costs.LOCAL_STEP_FLOPS for s in plan.steps]
    order = slice_order(plan, 1, weights)
    node_bytes = {s.out: local_kept_bytes(plan, (s.out,)) for s in plan.steps}
    kept = choose_kept(plan, order, 1, weights, node_bytes, free)
    model = ReuseModel(plan, 1, weights)
    if not kept or model.cost(order, kept) > (1 - LOCAL_MIN_SAVING) * model.cost(
            plan.sliced, frozenset()):
        return None
    return order, kept
