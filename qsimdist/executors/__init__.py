"""Executors run a Plan: ``local`` (numpy or cupy, one process) and ``mpi`` (ranks of MPI).

Executors come from a registry (:mod:`qsimdist.planner.registry`, where
:meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` looks them up):
:func:`register_executor` names a module and the function in it that runs a
plan, imported only when the executor is first used (so cupy and mpi4py load
only where they are needed). Importing this package registers the built-in
executors; ``import qsimdist`` imports it.
"""

from __future__ import annotations

import os

from ..planner.registry import executors, get_executor, register_executor

for _name in ("local", "mpi"):
    if _name not in executors():  # a reload of this package registers nothing twice
        register_executor(_name, f"qsimdist.executors.{_name}")
del _name


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


def resolve_executor(name: str) -> str:
    """``name``, with ``"auto"`` read as ``"mpi"`` when started by mpiexec with several ranks."""
    if name != "auto":
        return name
    return "mpi" if launched_under_mpi() else "local"


__all__ = ["executors", "get_executor", "launched_under_mpi", "register_executor",
           "resolve_executor"]
