"""What each executor means to its callers, asked of the executor instead of its name.

An entry point holds an executor by name (``"local"``, ``"mpi"``; users pass
these strings). Where the caller's own work depends on the executor (plan on
rank 0 and share the plan, draw one seed for every rank, let rank 0 alone
print, price the one-process routes), it asks the registered
:class:`Executor` for that capability: :attr:`~Executor.distributed`,
:attr:`~Executor.rank`, :meth:`~Executor.broadcast`,
:meth:`~Executor.shared_seed`, :meth:`~Executor.share_plan`. No code outside
this package compares an executor's name.

:func:`bind_executor` gives an instance bound to a communicator. The kinds are
registered in the one executor registry (:mod:`qsimdist.planner.registry`:
:func:`~qsimdist.planner.registry.register_executor`,
:func:`~qsimdist.planner.registry.executor_kind`,
:func:`~qsimdist.planner.registry.executor_names`), which
:mod:`qsimdist.executors` fills with the built-in ones. Each kind runs a plan
through its ``execute(plan, **kw)``, which loads its executor module on first use.

Light: nothing here imports mpi4py; :class:`MPIExecutor` starts MPI only when
bound without a communicator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..planner.registry import executor_kind

if TYPE_CHECKING:
    from ..planner.plan import Plan


class Executor:
    """An executor as its callers see it: one process (this class) or ranks of MPI.

    Attributes:
        name: the registered name (``executor=`` in every entry point).
        distributed: each plan runs over the ranks of a communicator (every
            rank makes the same calls in the same order; rank 0 plans).
        one_process: ``not distributed``: the plan runs here alone, so the
            one-process routes (statevector, stabilizer) may be priced.
        comm: the communicator the ranks share (``None`` in one process).
    """

    name: ClassVar[str] = ""
    distributed: ClassVar[bool] = False
    one_process: ClassVar[bool] = True

    def __init__(self, comm: Any = None) -> None:
        self.comm = comm

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def rank(self) -> int:
        """This process's rank (0 in one process)."""
        return 0

    @property
    def size(self) -> int:
        """The number of ranks that run each plan."""
        return 1

    def broadcast(self, obj: Any) -> Any:
        """``obj`` as rank 0 has it, on every rank (``obj`` itself in one process)."""
        return obj

    def shared_seed(self) -> int:
        """A fresh seed, the same on every rank (rank 0 draws it): every rank then draws
        the same numbers."""
        return self.broadcast(int(np.random.SeedSequence().entropy % (1 << 63)))

    def share_plan(self, build: Callable[[], Plan]) -> Plan:
        """The plan ``build()`` makes, on every rank: here, ``build()`` itself."""
        return build()

    def execute_keywords(self, **ranks: Any) -> dict:
        """The keywords :meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` takes to
        run a plan here, beyond ``backend`` and ``gemm``; ``ranks``: what only a
        distributed run reads (``memory_limit`` per rank, ``collectives``). None here."""
        return {}


class LocalExecutor(Executor):
    """``executor="local"``: one process, NumPy or CuPy (:mod:`qsimdist.executors.local`)."""

    name = "local"

    @staticmethod
    def execute(plan: Plan, **options: Any) -> Any:
        """Run ``plan`` in this process (:func:`qsimdist.executors.local.execute`)."""
        from .local import execute

        return execute(plan, **options)


class MPIExecutor(Executor):
    """``executor="mpi"``: the ranks of ``comm`` (default ``MPI.COMM_WORLD``) run each
    plan's distributed schedule (:mod:`qsimdist.executors.mpi`)."""

    name = "mpi"
    distributed = True
    one_process = False

    def __init__(self, comm: Any = None) -> None:
        if comm is None:
            from .comm import mpi_module

            comm = mpi_module().COMM_WORLD  # imports mpi4py, which starts MPI
        super().__init__(comm)

    @staticmethod
    def execute(plan: Plan, **options: Any) -> Any:
        """Run ``plan``'s distributed schedule over MPI ranks
        (:func:`qsimdist.executors.mpi.execute`)."""
        from .mpi import execute

        return execute(plan, **options)

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def size(self) -> int:
        return self.comm.Get_size()

    def broadcast(self, obj: Any) -> Any:
        return self.comm.bcast(obj, root=0)

    def share_plan(self, build: Callable[[], Plan]) -> Plan:
        """``build()`` on rank 0, sent as data and validated on every rank; a failure in
        ``build`` reaches every rank as the same error
        (:func:`qsimdist.executors.liveness.plan_on_root`)."""
        from .liveness import plan_on_root

        return plan_on_root(build, self.comm)

    def execute_keywords(self, **ranks: Any) -> dict:
        return {"executor": self.name, "comm": self.comm, **ranks}


def bind_executor(name: str, comm: Any = None) -> Executor:
    """The executor ``name`` bound to ``comm`` (a distributed one without a communicator
    takes ``MPI.COMM_WORLD``; one process ignores ``comm``)."""
    return executor_kind(name)(comm)


__all__ = ["Executor", "LocalExecutor", "MPIExecutor", "bind_executor"]
