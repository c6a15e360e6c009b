"""One plan cache for every entry point: keyed by a network's structure and what changes a plan.

Users contract networks of one structure many times (amplitude batches, the
chain sampler's prefixes, one doubled network per Pauli term, a quimb network
inside an optimiser), so the process keeps up to :data:`PLAN_CACHE_SIZE` plans
in memory. The key is the exact structure (``inputs``, ``output``, sizes) plus
the dtype, the path-search options, the executor with its profile and rank
count, whether step outputs are kept across slices (``QSIMDIST_REUSE``, read
at each lookup), and a caller's ``variant`` (e.g. a batch planned within a
quarter of the limit). A kept plan serves while its peak fits the limit and it is either
unsliced or was made under the same limit. The path search itself is cached
on disk by structure (:mod:`qsimdist.planner.path`), so a new process rebuilds
a plan from its cached path without searching again.

Under a distributed executor (``executor="mpi"``) every rank calls
:meth:`PlanCache.get` with the same networks in the same order; rank 0 alone
looks the plan up (or makes it) and sends it, arrays included, to every rank,
which validates it (the executor's
:meth:`~qsimdist.executors.kinds.Executor.share_plan`): the ranks run rank 0's
plan even where they named one network's indices differently.

Entry points ask :meth:`PlanCache.plan_for` with their resolved options
(:class:`~qsimdist.engine.options.RunOptions`): it knows how each executor's
plan is made (within the limit and checked against it here; unsliced on rank 0
and distributed for the ranks there), so no caller branches on the executor.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..executors import bind_executor, executor_kind
from ..network import Network
from ..planner.path import PathOptions
from ..planner.plan import Plan

if TYPE_CHECKING:
    from .options import RunOptions

#: plans kept per process (least recently used dropped first)
PLAN_CACHE_SIZE = 256


def structure_key(net: Network) -> tuple:
    """The part of the key a network gives: its exact inputs, output and index sizes."""
    return (tuple(map(tuple, net.inputs)), tuple(net.output),
            tuple(sorted(net.size_dict.items())))


class PlanCache:
    """Plans by structure and options; thread-safe; shared by the entry points."""

    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        self.size = size
        self._plans: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.made = 0
        self.reused = 0

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def get(self, net: Network, *, dtype: str, limit: int | None,
            path_options: PathOptions | None = None, executor: str = "local",
            profile=None, comm=None, variant: object = None,
            build: Callable[[], Plan] | None = None) -> tuple[Plan, bool]:
        """``(plan, reused)`` for ``net``: a kept plan with ``net``'s arrays, or a new one.

        ``build()`` makes the plan when none is kept (default: :func:`make_plan`
        within ``limit``; under ``executor="mpi"``, planned unsliced-first on rank 0
        and distributed for the ranks of ``comm`` on ``profile``, then broadcast;
        ``reused`` is rank 0's answer there and False on the other ranks).
        """
        opts = path_options or PathOptions()
        distributed = executor_kind(executor).distributed
        if build is None:
            build = _default_build(net, dtype, limit, opts, distributed, profile, comm)
        if distributed:
            # rank 0 alone looks up, plans and keeps; every rank receives rank 0's plan (with
            # its arrays: ranks may name the indices of one network differently) as data
            where = (executor, getattr(profile, "name", profile),
                     getattr(profile, "memory_bytes", None), comm.Get_size())
            found = [False]

            def on_root() -> Plan:
                plan, found[0] = self._lookup(net, dtype, limit, opts, where, variant, build)
                return plan

            return bind_executor(executor, comm).share_plan(on_root), found[0]
        return self._lookup(net, dtype, limit, opts, (executor,), variant, build)

    def plan_for(self, net: Network, run: RunOptions, *, profile=None,
                 path_options: PathOptions | None = None, variant: object = None,
                 build: Callable[[int | None], Plan] | None = None,
                 check: bool = True) -> tuple[Plan, bool]:
        """``(plan, reused)`` for ``net`` under ``run`` (its dtype, memory and executor), checked.

        In one process the plan is made within ``run``'s limit and, with ``check``,
        refused (the memory guard, :meth:`~qsimdist.engine.memory.MemoryBudget.check_plan`) where
        its peak exceeds ``run.memory``. On a distributed executor it is made unsliced
        on rank 0, distributed for the ranks of ``run.comm`` on ``profile`` and shared
        with every rank, which check it as they run it. ``profile``: the resolved
        hardware profile; default ``run.profile`` (default ``"local-cpu"``) with its
        memory set to ``run``'s limit. ``build(limit)``: how the one-device plan is
        made within ``limit`` (``None`` where it is then distributed); default
        :func:`~qsimdist.planner.plan.make_plan`.
        """
        if path_options is None:
            path_options = run.path_options
        if run.distributed:
            if profile is None:
                profile = run.hardware()
            one = None if build is None else (lambda: build(None))
            made = _default_build(net, run.dtype, None, path_options or PathOptions(), True,
                                  profile, run.comm, one)
            return self.get(net, dtype=run.dtype, limit=None, path_options=path_options,
                            executor=run.executor, profile=profile, comm=run.comm,
                            variant=variant, build=made)
        limit = run.limit
        plan, reused = self.get(net, dtype=run.dtype, limit=limit, path_options=path_options,
                                executor=run.executor, variant=variant,
                                build=None if build is None else (lambda: build(limit)))
        if check:
            run.memory.check_plan(plan)
        return plan, reused

    def _lookup(self, net: Network, dtype: str, limit: int | None, opts: PathOptions,
                where: tuple, variant: object, build: Callable[[], Plan]) -> tuple[Plan, bool]:
        from ..config import reuse_enabled

        key = (structure_key(net), dtype, json.dumps(opts.key(), sort_keys=True, default=list),
               where, reuse_enabled(), variant)
        with self._lock:
            known = self._plans.get(key)
            if known is not None:
                self._plans.move_to_end(key)
        if known is not None:
            plan, made_under = known
            if (limit is None or plan.stats.peak_bytes <= limit) and (
                    plan.stats.n_slices == 1 or made_under == limit):
                with self._lock:
                    self.reused += 1
                return dataclasses.replace(plan, network=net, meta=dict(net.meta)), True
        plan = build()
        with self._lock:
            self.made += 1
            self._plans[key] = (plan, limit)
            while len(self._plans) > self.size:
                self._plans.popitem(last=False)
        return plan, False


def _default_build(net: Network, dtype: str, limit: int | None, opts: PathOptions,
                   distributed: bool, profile, comm,
                   one_device: Callable[[], Plan] | None = None) -> Callable[[], Plan]:
    """How a plan is made: within ``limit`` in one process; distributed, the one-device plan
    (``one_device()``, default unsliced :func:`make_plan`) scheduled for the ranks of
    ``comm`` on ``profile``."""
    from ..planner.plan import make_plan

    if distributed:
        from .coordination import distribute

        def build() -> Plan:
            one = (one_device() if one_device is not None else
                   make_plan(net, dtype=dtype, memory_limit=None, path_options=opts))
            return distribute(one, profile, comm.Get_size())

        return build
    return lambda: make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts)


def small_first(net: Network, dtype: str,
                path_options: PathOptions) -> Callable[[int | None], Plan]:
    """``build(limit)`` for the plan cache: one or two tensors take their only path without a
    search (quimb's own simplification hands the hook many such contractions) where that fits
    ``limit``; otherwise the path is searched and the plan sliced as usual."""
    from ..planner.plan import build_plan, make_plan

    def build(limit: int | None) -> Plan:
        if net.num_tensors <= 2:
            plan = build_plan(net, [(0, 1)] if net.num_tensors == 2 else [], (), dtype)
            if limit is None or plan.stats.peak_bytes <= limit:
                return plan
        return make_plan(net, dtype=dtype, memory_limit=limit, path_options=path_options)

    return build


#: the process's plan cache (every entry point's)
PLANS = PlanCache()

__all__ = ["PLANS", "PLAN_CACHE_SIZE", "PlanCache", "small_first", "structure_key"]
