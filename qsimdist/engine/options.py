"""Run options, validated and resolved once per call, the same way on every route."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import check_dtype, check_gemm
from ..errors import InvalidInputError
from ..executors import Executor, bind_executor, executor_kind
from ..planner.path import PathOptions
from .memory import MemoryBudget


def check_backend(backend: str) -> str:
    """``backend`` if its array library is importable here; else the one-line error.

    Unknown names raise InvalidInputError with the valid list; ``cupy`` without
    CuPy raises MissingDependencyError, whichever route the call then takes.
    """
    from ..executors import array_module

    if not isinstance(backend, str):
        raise InvalidInputError(
            f"backend must be a name (numpy, cupy), got {type(backend).__name__}")
    array_module(backend)
    return backend


def check_executor(executor: str) -> str:
    """``executor`` if it is registered (:func:`qsimdist.executors.executor_names`); else the
    one-line error with the valid list."""
    executor_kind(executor)
    return executor


def check_run(*, dtype: str = "complex64", backend: str = "numpy",
              executor: str | None = "local", gemm: str = "complex", collectives: str = "auto",
              memory_limit=None) -> str:
    """Refuse, one line each, what :meth:`RunOptions.resolve` refuses, reading nothing of
    the machine, the environment or the ranks (options kept to resolve later check here).

    Parameters
    ----------
    dtype : {"complex64", "complex128"}
        The dtype the run computes in (the GEMM mode is checked against it).
    backend : {"numpy", "cupy"}
        The array library (importable here).
    executor : str or None
        A registered executor (``None``: resolved later, not checked).
    gemm : str
        The executors' GEMM mode (:func:`qsimdist.config.check_gemm`).
    collectives : {"auto", "mpi", "nccl"}
        How the ranks exchange arrays.
    memory_limit : str, int, float, MemoryBudget or None
        A size must be readable (``None`` and ``"none"`` are).

    Returns
    -------
    str
        The dtype's name.
    """
    from ..config import parse_memory
    from ..executors import check_comm_choice, check_nccl_backend
    from ..memory_limit import is_none_word

    dtype = check_dtype(dtype)
    if executor is not None:
        check_executor(executor)
    check_backend(backend)
    check_gemm(gemm, backend, dtype)
    check_comm_choice(collectives)
    check_nccl_backend(collectives, backend)
    if memory_limit is not None and not isinstance(memory_limit, MemoryBudget) \
            and not is_none_word(memory_limit):
        parse_memory(memory_limit)
    return dtype


def executor_choices() -> tuple[str, ...]:
    """``auto`` (resolved by :meth:`RunOptions.resolve`) and the registered executors."""
    from ..executors import executor_names

    return ("auto", *executor_names())


@dataclass(frozen=True)
class RunOptions:
    """What every route needs to know, resolved once: dtype, memory, backend, executor,
    GEMM, the hardware profile and the path search's options.

    Build it with :meth:`resolve`; the memory limit is read there and only there
    (see :class:`~qsimdist.engine.memory.MemoryBudget` for what ``None`` and
    ``"none"`` mean), so a default does not shrink mid-run as arrays are held.
    Distributed, :attr:`profile` is the resolved
    :class:`~qsimdist.hardware.HardwareProfile` (default ``local-cpu``) with its
    per-device memory set to the limit; the routes, the plan cache and the
    executors take the object whole and never resolve it again.

    Attributes
    ----------
    dtype : {"complex64", "complex128"}
        The dtype plans run in.
    memory : MemoryBudget
        The resolved memory limit (per rank under MPI).
    backend : {"numpy", "cupy"}
        The array library.
    executor : str
        A registered executor, ``"local"`` or ``"mpi"`` (``"auto"`` resolved).
    profile : HardwareProfile, str or None
        The hardware profile distributed plans are made for.
    comm : MPI communicator or None
        The ranks a distributed executor runs on.
    gemm : str
        How BLAS steps multiply: ``"complex"``, ``"3m"``, ``"tf32"``, ``"3m-tf32"``.
    seed : object
        Kept as given (no route reads it).
    collectives : {"auto", "mpi", "nccl"}
        How the ranks exchange arrays under ``executor="mpi"``
        (:func:`qsimdist.executors.comm.choose_collectives`; the CLI's ``--comm``).
    path_options : PathOptions
        The path search's options.
    """

    dtype: str = "complex64"
    memory: MemoryBudget = field(default_factory=lambda: MemoryBudget.resolve(None))
    backend: str = "numpy"
    executor: str = "local"
    profile: object = None
    comm: object = None
    gemm: str = "complex"
    seed: object = None
    collectives: str = "auto"
    path_options: PathOptions = field(default_factory=PathOptions)

    @classmethod
    def resolve(cls, *, dtype: str = "complex64", memory_limit=None, backend: str = "numpy",
                executor: str = "local", profile=None, comm=None, gemm: str = "complex",
                seed=None, collectives: str = "auto", path_options=None) -> RunOptions:
        """Validate and resolve every option once (bad input: one-line InvalidInputError).

        Parameters
        ----------
        dtype : {"complex64", "complex128"}
            The dtype plans run in.
        memory_limit : str, int or None
            Peak bytes (``"8GiB"``, an int; per rank under MPI), ``None`` (the
            default limit) or ``"none"``; see :class:`MemoryBudget`.
        backend : {"numpy", "cupy"}
            The array library (CuPy must be importable).
        executor : str, default "local"
            ``"local"``, ``"mpi"`` or ``"auto"``: ``"mpi"`` with a ``comm`` or under
            mpiexec with several ranks, else ``"local"``
            (:func:`qsimdist.executors.resolve_executor`).
        profile : str or HardwareProfile, optional
            Distributed only: the hardware profile plans are made for (default
            ``local-cpu``), its per-device memory set to the limit.
        comm : MPI communicator, optional
            The ranks of a distributed executor (default ``MPI.COMM_WORLD``).
        gemm : str, default "complex"
            ``"complex"``, ``"3m"``; ``"tf32"`` and ``"3m-tf32"`` with
            ``backend="cupy"`` and complex64 (see :func:`qsimdist.config.check_gemm`).
        seed : object, optional
            Kept as given.
        collectives : {"auto", "mpi", "nccl"}
            How the ranks exchange arrays (``"nccl"`` needs ``backend="cupy"``).
        path_options : PathOptions or dict, optional
            The path search's options (:meth:`PathOptions.coerce`).

        Returns
        -------
        RunOptions

        Raises
        ------
        InvalidInputError
            An unknown dtype, executor, backend, GEMM mode or collectives choice, an
            unreadable memory limit, or bad path options.
        MissingDependencyError
            ``backend="cupy"`` without CuPy (or ``"mpi"`` without mpi4py).
        """
        from ..executors import resolve_executor

        if executor == "auto":
            executor = resolve_executor(executor, comm)
        dtype = check_run(dtype=dtype, backend=backend, executor=executor, gemm=gemm,
                          collectives=collectives)
        runner = bind_executor(executor, comm)  # a distributed one takes MPI.COMM_WORLD
        if runner.distributed:
            comm = runner.comm
        memory = MemoryBudget.resolve(memory_limit, comm if runner.distributed else None)
        if runner.distributed:
            from .coordination import profile_for

            profile = profile_for(profile or "local-cpu", memory.limit)
        return cls(dtype, memory, backend, executor, profile, comm, gemm, seed, collectives,
                   PathOptions.coerce(path_options))

    def hardware(self):
        """The resolved hardware profile of a distributed run (resolved in :meth:`resolve`;
        resolved here only for options built field by field)."""
        from ..hardware.profiles import HardwareProfile

        if isinstance(self.profile, HardwareProfile):
            return self.profile
        from .coordination import profile_for

        return profile_for(self.profile or "local-cpu", self.limit)

    @property
    def runner(self) -> Executor:
        """The executor, bound to :attr:`comm`: what callers ask instead of its name
        (:attr:`~qsimdist.executors.kinds.Executor.distributed`, ``rank``,
        ``broadcast``, ``shared_seed``, ``share_plan``)."""
        return bind_executor(self.executor, self.comm)

    @property
    def distributed(self) -> bool:
        """Whether plans run over the ranks of :attr:`comm` (every rank makes each call)."""
        return executor_kind(self.executor).distributed

    def execute_keywords(self) -> dict:
        """The keywords of :meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` beyond
        ``backend`` and ``gemm`` for this run: none in one process; distributed, the
        executor, :attr:`comm`, the per-rank limit and :attr:`collectives`."""
        return self.runner.execute_keywords(memory_limit=self.limit,
                                            collectives=self.collectives)

    @property
    def limit(self) -> int | None:
        """Bytes plans are made within (per rank); ``None`` for ``"none"``."""
        return self.memory.limit

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "memory": self.memory.to_dict(), "backend": self.backend,
                "executor": self.executor, "gemm": self.gemm, "collectives": self.collectives}


__all__ = ["RunOptions", "check_backend", "check_executor", "check_run", "executor_choices"]
