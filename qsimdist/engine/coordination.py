"""Running under ``mpiexec``: plan once on rank 0, broadcast, execute on every rank.

Rank 0 *leads*: it reads the circuit, chooses the route, plans each contraction
(path search is randomised and expensive) and sends each plan to the other
ranks as plain data (:class:`Coordinator`); they only *follow*: validate the
plan, replay its schedule and execute it. Followers wait for rank 0 with short
sleeps instead of MPI's busy poll (:mod:`qsimdist.executors.liveness`), so a
rank that plans is not slowed by ranks that wait. Every failure ends every
rank (see that module).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import QsimdistError
from ..executors import (  # noqa: F401  (plan_on_root: public here since 0.1)
    agreed_error,
    bcast_from_root,
    fail_rank,
    is_collective,
    mark_collective,
    plan_on_root,
)
from ..hardware import HardwareProfile, load_profile
from ..planner.plan import Plan
from .memory import MemoryBudget


def rank_memory_limit(memory_limit, comm) -> int | None:
    """This rank's planning limit (see :class:`~qsimdist.engine.memory.MemoryBudget`)."""
    return MemoryBudget.resolve(memory_limit, comm).limit


class Coordinator:
    """Rank 0 leads a computation; the other ranks execute the plans it sends.

    ``run(plan)`` executes a plan collectively on this rank and returns its value
    (every rank calls it with the same plan, in the same order). On rank 0,
    :meth:`lead` runs ``body(execute)``, where ``execute(plan)`` sends the plan to
    every rank and runs it; the other ranks call :meth:`follow`, which runs what
    arrives and returns what ``body`` returned. A :class:`QsimdistError` raised by
    ``body`` outside an execution reaches every rank as the same error.
    """

    def __init__(self, comm, run: Callable[[Plan], Any]) -> None:
        self.comm = comm
        self.run = run

    def _execute(self, plan: Plan):
        """Rank 0's side of one collective execution: a failure here is rank 0's alone."""
        from ..executors import fault_point

        try:
            data = plan.to_dict()
            fault_point("broadcast", self.comm)
            bcast_from_root(("run", data), self.comm)
            return self.run(Plan.from_dict(data, "broadcast plan"))
        except BaseException as exc:
            if is_collective(exc):
                raise
            fail_rank(self.comm, exc)

    def lead(self, body: Callable[[Callable[[Plan], Any]], Any]) -> Any:
        try:
            result = body(self._execute)
        except QsimdistError as exc:
            if is_collective(exc):  # already agreed inside an execution (plan or memory check)
                raise
            bcast_from_root(("error", type(exc).__name__, str(exc)), self.comm)
            raise mark_collective(exc) from None
        except BaseException as exc:  # a bug or an interrupt: the followers must not wait
            fail_rank(self.comm, exc)
        bcast_from_root(("done", result), self.comm)
        return result

    def follow(self) -> Any:
        from ..executors import fault_point

        while True:
            try:
                message = bcast_from_root(None, self.comm)
                if message[0] == "run":
                    fault_point("broadcast", self.comm)
                    self.run(Plan.from_dict(message[1], "broadcast plan"))
                    continue
            except BaseException as exc:
                if is_collective(exc):
                    raise
                fail_rank(self.comm, exc)
            if message[0] == "done":
                return message[1]
            raise agreed_error(message[1], message[2])


def world():
    """``MPI.COMM_WORLD`` (imports mpi4py, which starts MPI)."""
    from ..executors import mpi_module

    return mpi_module().COMM_WORLD


def rank_of(comm) -> int:
    return 0 if comm is None else comm.Get_rank()


def profile_for(profile: str | HardwareProfile, memory_limit: int | None) -> HardwareProfile:
    """The hardware profile, with its per-device memory replaced by ``memory_limit`` if given."""
    prof = load_profile(profile)
    if memory_limit is None:
        return prof
    return dataclasses.replace(prof, memory_bytes=int(memory_limit), usable_memory_fraction=1.0)


def distribute(plan: Plan, profile: HardwareProfile, devices: int,
               reuse: bool | None = None) -> Plan:
    """``plan`` with the dp schedule for ``devices`` ranks attached (sliced as it runs); the
    search is budgeted against the predicted run (``schedule(..., budgeted=True)``).

    ``reuse`` (default: ``$QSIMDIST_REUSE``, on, as for local plans sliced to a
    memory limit): a sliced schedule's groups keep the step outputs worth keeping
    from one slice to the next in the memory it leaves free
    (:mod:`qsimdist.planner.distribution.reuse`; kept only where the prediction is
    faster)."""
    from ..config import reuse_enabled
    from ..planner.distribution import schedule, scheduled_plan

    if reuse is None:
        reuse = reuse_enabled()

    return scheduled_plan(plan, schedule(plan, profile, devices, "dp", budgeted=True,
                                         reuse=reuse))
