"""Executors run a Plan: ``local`` (numpy or cupy, one process) and ``mpi`` (ranks of MPI).

Executors come from a registry (:mod:`qsimdist.planner.registry`, where
:meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` looks them up):
:func:`register_executor` names a module and the function in it that runs a
plan, imported only when the executor is first used (so cupy and mpi4py load
only where they are needed). Importing this package registers the built-in
executors; ``import qsimdist`` imports it.

What an executor means to its callers (runs over ranks or in one process, its
rank, a broadcast from rank 0, how a plan is shared) is asked of its
:class:`~qsimdist.executors.kinds.Executor` (:func:`executor_kind`,
:func:`bind_executor`), never read from its name outside this package.
"""

from __future__ import annotations

import os

from ..planner.registry import executors, get_executor, register_executor
from .kinds import (
    Executor,
    LocalExecutor,
    MPIExecutor,
    bind_executor,
    executor_kind,
    executor_names,
    register_executor_kind,
)

for _kind in (LocalExecutor, MPIExecutor):
    if _kind.name not in executors():  # a reload of this package registers nothing twice
        register_executor(_kind.name, f"qsimdist.executors.{_kind.name}")
    if _kind.name not in executor_names():
        register_executor_kind(_kind)
del _kind


def launched_under_mpi() -> bool:
    """Whether this process was started by mpiexec/srun with more than one rank.

    Reads the launcher's environment only (no mpi4py import), so the CLI can
    decide its executor without loading the MPI executor.
    """
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE",
                "MV2_COMM_WORLD_SIZE"):
        value = os.environ.get(var)
        if value and value.isdigit() and int(value) > 1:
            return True
    return False


def resolve_executor(name: str, comm=None) -> str:
    """``name``, with ``"auto"`` read as ``"mpi"`` when a communicator ``comm`` is given or
    when started by mpiexec with several ranks, else ``"local"`` (the one place ``"auto"``
    is resolved)."""
    if name != "auto":
        return name
    return MPIExecutor.name if comm is not None or launched_under_mpi() else LocalExecutor.name


__all__ = ["Executor", "LocalExecutor", "MPIExecutor", "bind_executor", "executor_kind",
           "executor_names", "executors", "get_executor", "launched_under_mpi",
           "register_executor", "register_executor_kind", "resolve_executor"]
