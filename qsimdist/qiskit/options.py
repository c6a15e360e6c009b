"""What the primitives share: their run options, the ``auto`` executor, job submission."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..engine import RunOptions, executor_choices
from ..errors import InvalidInputError, shorten
from ..planner.path import PathOptions


@dataclass(frozen=True)
class PrimitiveOptions:
    """The run options of a primitive (its own fields are in its subclass), validated at
    construction and resolved once, by :meth:`run_options`, into the engine's
    :class:`~qsimdist.engine.RunOptions`.

    Parameters
    ----------
    dtype : {"complex64", "complex128"}
        The dtype contractions run in (the subclass sets the default).
    memory_limit : str, int or None
        Peak bytes per contraction (``"8GiB"``, an int; ``None``: 80% of the
        available memory; ``"none"``: no limit); per rank under MPI.
    backend : {"numpy", "cupy"}
        The array library.
    executor : {"auto", "local", "mpi"}
        ``auto`` (``mpi`` under ``mpiexec`` with several ranks), ``local`` or
        ``mpi``. Under MPI every rank runs the same pubs in the same order.
    profile : str, optional
        Hardware profile the distributed plans are made for (default ``local-cpu``).
    path_options : PathOptions or dict, optional
        Contraction path search options.

    Raises
    ------
    InvalidInputError
        An unknown dtype, executor or profile, or an unreadable ``memory_limit``.
    MissingDependencyError
        ``backend="cupy"`` without CuPy.
    """

    _what: ClassVar[str] = "primitive"

    dtype: str = "complex64"
    memory_limit: str | int | None = None
    backend: str = "numpy"
    executor: str = "auto"
    profile: str | None = None
    path_options: PathOptions | dict | None = None

    def __post_init__(self) -> None:
        """Refuse, at construction, what the engine would refuse: an unknown dtype, an
        unreadable ``memory_limit``, an unknown or missing ``backend``, an unknown executor
        or hardware ``profile``."""
        from ..config import check_dtype, parse_memory
        from ..engine import check_backend
        from ..memory_limit import is_none_word

        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        if self.memory_limit is not None and not is_none_word(self.memory_limit):
            parse_memory(self.memory_limit)
        check_backend(self.backend)
        choices = executor_choices()
        if not isinstance(self.executor, str) or self.executor not in choices:
            raise InvalidInputError(
                f"unknown executor {shorten(self.executor)}; valid: {', '.join(choices)}")
        if self.profile is not None:
            from ..hardware import load_profile

            load_profile(self.profile)
        if self.path_options is not None:
            object.__setattr__(self, "path_options", PathOptions.coerce(self.path_options))

    @classmethod
    def coerce(cls, options):
        """``options`` as this options class.

        Parameters
        ----------
        options : PrimitiveOptions, dict or None
            ``None`` (the defaults), a dict of its fields, or an instance (returned
            as it is).

        Raises
        ------
        InvalidInputError
            An unknown key (the message lists the valid ones) or another type.
        """
        from ..config import coerce_options

        return coerce_options(cls, options, cls._what)

    def run_options(self) -> RunOptions:
        """These options resolved (the memory limit read, ``auto`` read as an executor and
        bound): what the primitive builds its one :class:`~qsimdist.engine.Engine` from."""
        return RunOptions.resolve(dtype=self.dtype, memory_limit=self.memory_limit,
                                  backend=self.backend, executor=self.executor,
                                  profile=self.profile, path_options=self.path_options)


def submit_job(run, pubs: list, engine):
    """A submitted ``PrimitiveJob`` of ``run(pubs)``.

    Under a distributed executor (``engine.run.distributed``) every rank runs the pubs at
    once, on its main thread and in the same order (collectives must not run on a job's
    worker thread); the job then only hands the result over.
    """
    from qiskit.primitives import PrimitiveJob

    if engine.run.distributed:
        result = run(pubs)
        job = PrimitiveJob(lambda: result)
    else:
        job = PrimitiveJob(run, pubs)
    job._submit()
    return job
