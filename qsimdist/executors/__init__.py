"""Executors run a Plan: ``local`` (numpy or cupy, one process) and ``mpi`` (ranks of MPI).

Executors come from a registry: :func:`register_executor` names a module and
the function in it that runs a plan, imported only when the executor is
first used (so cupy and mpi4py load only where they are needed).
"""

from __future__ import annotations

import importlib
import os

from ..errors import InvalidInputError

_EXECUTORS: dict[str, tuple[str, str]] = {}


def register_executor(name: str, module: str, function: str = "execute") -> None:
    """Register ``module.function(plan, **kw)`` as executor ``name`` (duplicates are refused)."""
    if name in _EXECUTORS:
        raise ValueError(f"executor {name!r} is already registered")
    _EXECUTORS[name] = (module, function)


def executors() -> tuple[str, ...]:
    """Names of the registered executors."""
    return tuple(_EXECUTORS)


def get_executor(name: str):
    """The ``execute(plan, **kw)`` function of executor ``name``."""
    if name not in _EXECUTORS:
        raise InvalidInputError(f"unknown executor {name!r}; valid: {', '.join(_EXECUTORS)}")
    module, function = _EXECUTORS[name]
    return getattr(importlib.import_module(module), function)


register_executor("local", "qsimdist.executors.local")
register_executor("mpi", "qsimdist.executors.mpi")

#: kept for callers of the first release
EXECUTORS = executors()


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
