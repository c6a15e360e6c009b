"""Executors run a Plan: ``local`` (numpy or cupy, one process) and ``mpi`` (ranks of MPI).

This face is the only part of the package that code outside ``executors/`` imports
(``tests/test_import_graph.py`` fails on an import of an executor module from
outside): what the engine, the doors and the commands need of the executors is
named here.

Executors come from one registry (:mod:`qsimdist.planner.registry`, where
:meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` looks them up):
:func:`register_executor` registers an executor kind (an :class:`Executor`
subclass whose ``execute(plan, **kw)`` loads its module when first used, so cupy
and mpi4py load only where they are needed). Importing this package registers
the built-in kinds; ``import qsimdist`` imports it.

What an executor means to its callers (runs over ranks or in one process, its
rank, a broadcast from rank 0, how a plan is shared) is asked of its
:class:`~qsimdist.executors.kinds.Executor` (:func:`executor_kind`,
:func:`bind_executor`), never read from its name outside this package.

The rest of what this face names (:data:`LAZY`: communicator checks, liveness,
the MPI run's statistics, the statevector kernels) is loaded from its module on
first use, so ``import qsimdist`` loads no executor module but :mod:`.kinds`.
"""

from __future__ import annotations

from ..planner.registry import (
    executor_kind,
    executor_names,
    executors,
    get_executor,
    register_executor,
)
from .kinds import Executor, LocalExecutor, MPIExecutor, bind_executor

for _kind in (LocalExecutor, MPIExecutor):
    if _kind.name not in executor_names():  # a reload of this package registers nothing twice
        register_executor(_kind)
del _kind


def resolve_executor(name: str, comm=None) -> str:
    """``name``, with ``"auto"`` read as ``"mpi"`` when a communicator ``comm`` is given or
    when started by mpiexec with several ranks, else ``"local"`` (the one place ``"auto"``
    is resolved)."""
    if name != "auto":
        return name
    from .comm import launched_under_mpi

    return MPIExecutor.name if comm is not None or launched_under_mpi() else LocalExecutor.name


#: name this face gives -> (module of this package, the name there), loaded on first use
LAZY: dict[str, tuple[str, str]] = {
    **{n: ("comm", n) for n in (
        "COMM_CHOICES", "check_comm_choice", "check_nccl_backend", "launched_under_mpi",
        "mpi_module")},
    **{n: ("liveness", n) for n in (
        "abort_on_signals", "agreed_error", "barrier_sleeping", "bcast_from_root", "fail_rank",
        "is_collective", "mark_collective", "plan_on_root")},
    "array_module": ("local", "array_module"),
    # the compiled contraction kernels (numba): their first load in a process
    "contraction_startup_seconds": ("kernels", "startup_seconds"),
    **{n: ("rank_checks", n) for n in ("agreed_fault", "fault_point", "ranks_on_host")},
    **{n: ("run_stats", n) for n in ("RunStats", "write_trace")},
    **{n: ("statevector", n) for n in (
        "apply_gates", "bitstring_amplitudes", "blas_threads", "compiled_kernel_runs",
        "matmul_in_parts", "pattern_amplitudes", "permute_axes", "run_dtype", "simulate",
        "state_buffer", "statevector_bytes")},
    # the compiled statevector kernels (numba)
    "draw_indices": ("sv_kernels", "draw_indices"),
    "kernel_chunks": ("sv_kernels", "n_chunks"),
    "kernels_warm": ("sv_kernels", "warm"),
    "pauli_expectations": ("sv_kernels", "pauli_expectations"),
    "startup_seconds": ("sv_kernels", "startup_seconds"),
    # qsim through qsimcirq
    "FUSED_GATE_QUBITS": ("qsim_engine", "FUSED_GATE_QUBITS"),
    "MAX_GATE_QUBITS": ("qsim_engine", "MAX_GATE_QUBITS"),
    "qsim_direct_failed": ("qsim_engine", "direct_failed"),
    "qsim_loaded": ("qsim_engine", "loaded"),
    "qsim_simulate": ("qsim_engine", "simulate"),
}


def _module(name: str):
    """The module ``name`` of this package, each import written out (the import graph of
    ``tools/import_graph.py`` sees every one)."""
    if name == "comm":
        from . import comm as module
    elif name == "liveness":
        from . import liveness as module
    elif name == "kernels":
        from . import kernels as module
    elif name == "local":
        from . import local as module
    elif name == "rank_checks":
        from . import rank_checks as module
    elif name == "run_stats":
        from . import run_stats as module
    elif name == "statevector":
        from . import statevector as module
    elif name == "sv_kernels":
        from . import sv_kernels as module
    elif name == "qsim_engine":
        from . import qsim_engine as module
    else:
        raise AttributeError(f"module {__name__!r} has no module {name!r}")
    return module


def __getattr__(name: str):
    # looked up on every access (not cached here), so a name patched in its module is
    # the name every caller sees
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = LAZY[name]
    return getattr(_module(module), attribute)


def __dir__() -> list[str]:
    return sorted({*globals(), *LAZY})


__all__ = ["Executor", "LocalExecutor", "MPIExecutor", "bind_executor", "executor_kind",
           "executor_names", "executors", "get_executor", "register_executor",
           "resolve_executor", *LAZY]
