"""Outputs a run keeps from one slice to the next (a schedule's ``kept``), for the executors.

A kept output is reused while the sliced indices it depends on keep their
values (see :mod:`qsimdist.planner.distribution.reuse`); each slice then
computes only the nodes it needs: the root, and below a node it computes,
every child that is not a kept output still valid for this slice.
"""

from __future__ import annotations

from ..planner.reuse import depths, strides


class Carry:
    """The kept outputs of one run (one group's slices, in order)."""

    def __init__(self, plan, kept) -> None:
        self.kept = frozenset(kept)
        self.depth = depths(plan, plan.sliced)
        self.stride = strides(plan, plan.sliced)
        self.store: dict[int, tuple[int, object]] = {}  # node -> (prefix, value)
        self.nbytes = 0  # of the values held, as their ``put`` gave them
        self._sizes: dict[int, int] = {}

    @classmethod
    def of(cls, plan) -> Carry | None:
        """The plan's carry (its schedule's kept outputs, or the local plan's), or ``None``
        when it keeps nothing."""
        sched = getattr(plan, "schedule", None)
        kept = sched.kept if sched is not None else getattr(plan, "kept", ())
        if not kept or not plan.steps:
            return None
        return cls(plan, kept)

    def prefix(self, node: int, s: int) -> int:
        return s // self.stride[self.depth[node]]

    def valid(self, node: int, s: int) -> bool:
        got = self.store.get(node)
        return got is not None and got[0] == self.prefix(node, s)

    def needed(self, plan, s: int) -> set[int]:
        """Nodes slice ``s`` computes (leaves to load, step outputs to make)."""
        need = {plan.steps[-1].out}
        for step in reversed(plan.steps):
            if step.out in need:
                for child in (step.lhs, step.rhs):
                    if not self.valid(child, s):
                        need.add(child)
        return need

    def get(self, node: int):
        return self.store[node][1]

    def put(self, node: int, s: int, value, nbytes: int = 0):
        """Keep ``value`` (of ``nbytes``) for ``node`` from slice ``s``; returns the value
        it replaces."""
        old = self.store.get(node)
        self.store[node] = (self.prefix(node, s), value)
        self.nbytes += nbytes - self._sizes.get(node, 0)
        self._sizes[node] = nbytes
        return None if old is None else old[1]

    def values(self):
        return [v for _, v in self.store.values()]


def slice_assignment(plan, s: int) -> dict[str, int]:
    """The values of the sliced indices for slice number ``s`` (last index fastest)."""
    values = {}
    for i in reversed(plan.sliced):
        n = plan.network.size_dict[i]
        values[i] = s % n
        s //= n
    return values
