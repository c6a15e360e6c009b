"""Run options, validated and resolved once per call, the same way on every route."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import check_dtype, check_gemm
from ..errors import InvalidInputError
from .memory import MemoryBudget

#: executors every entry point knows
EXECUTORS = ("local", "mpi")


def check_backend(backend: str) -> str:
    """``backend`` if its array library is importable here; else the one-line error.

    Unknown names raise InvalidInputError with the valid list; ``cupy`` without
    CuPy raises MissingDependencyError, whichever route the call then takes.
    """
    from ..executors.local import array_module

    if not isinstance(backend, str):
        raise InvalidInputError(
            f"backend must be a name (numpy, cupy), got {type(backend).__name__}")
    array_module(backend)
    return backend


def check_executor(executor: str) -> str:
    if executor not in EXECUTORS:
        raise InvalidInputError(f"unknown executor {executor!r}; valid: {', '.join(EXECUTORS)}")
    return executor


@dataclass(frozen=True)
class RunOptions:
    """What every route needs to know, resolved once: dtype, memory, backend, executor, GEMM.

    Build it with :meth:`resolve`; the memory limit is read there and only there
    (see :class:`~qsimdist.engine.memory.MemoryBudget` for what ``None`` and
    ``"none"`` mean), so a default does not shrink mid-run as arrays are held.
    """

    dtype: str = "complex64"
    memory: MemoryBudget = field(default_factory=lambda: MemoryBudget.resolve(None))
    backend: str = "numpy"
    executor: str = "local"
    profile: object = None
    comm: object = None
    gemm: str = "complex"
    seed: object = None
    #: how the ranks exchange arrays under ``executor="mpi"``: ``"auto"``, ``"mpi"`` or
    #: ``"nccl"`` (:func:`qsimdist.executors.comm.choose_collectives`; the CLI's ``--comm``)
    collectives: str = "auto"

    @classmethod
    def resolve(cls, *, dtype: str = "complex64", memory_limit=None, backend: str = "numpy",
                executor: str = "local", profile=None, comm=None, gemm: str = "complex",
                seed=None, collectives: str = "auto") -> RunOptions:
        from ..executors.comm import check_comm_choice, check_nccl_backend

        dtype = check_dtype(dtype)
        check_executor(executor)
        check_backend(backend)
        check_gemm(gemm, backend, dtype)
        check_comm_choice(collectives)
        check_nccl_backend(collectives, backend)
        if executor == "mpi" and comm is None:
            from .coordination import world

            comm = world()
        memory = MemoryBudget.resolve(memory_limit, comm if executor == "mpi" else None)
        return cls(dtype, memory, backend, executor, profile, comm, gemm, seed, collectives)

    @property
    def limit(self) -> int | None:
        """Bytes plans are made within (per rank); ``None`` for ``"none"``."""
        return self.memory.limit

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "memory": self.memory.to_dict(), "backend": self.backend,
                "executor": self.executor, "gemm": self.gemm, "collectives": self.collectives}


__all__ = ["EXECUTORS", "RunOptions", "check_backend", "check_executor"]
