"""What the primitives share: option coercion, the ``auto`` executor, job submission."""

from __future__ import annotations

#: what the primitives' ``executor`` option takes beside the registered executors' names
AUTO = "auto"


def executor_choices() -> tuple[str, ...]:
    """``auto`` and the registered executors (:func:`qsimdist.executors.executor_names`)."""
    from ..executors import executor_names

    return (AUTO, *executor_names())


def check_executor_choice(executor) -> str:
    """``executor`` if it is ``auto`` or a registered executor; else the one-line error."""
    from ..errors import InvalidInputError, shorten

    choices = executor_choices()
    if not isinstance(executor, str) or executor not in choices:
        raise InvalidInputError(
            f"unknown executor {shorten(executor)}; valid: {', '.join(choices)}")
    return executor


class PrimitiveOptions:
    """Mixin for the frozen option dataclasses of :class:`SamplerV2` and :class:`EstimatorV2`.

    Subclasses set ``_what`` (the name used in messages) and have an ``executor`` field.
    """

    _what = "primitive"

    @classmethod
    def coerce(cls, options):
        """``options`` as this options class (from ``None``, a dict of its fields or itself)."""
        from ..config import coerce_options

        return coerce_options(cls, options, cls._what)

    def check_shared(self) -> None:
        """Refuse, at construction, what the engine would refuse at the first run: an
        unreadable ``memory_limit`` (its default is still read per run), an unknown or
        missing ``backend``, an unknown executor or hardware ``profile``."""
        from ..config import parse_memory
        from ..engine.options import check_backend
        from ..memory_limit import is_none_word

        limit = getattr(self, "memory_limit", None)
        if limit is not None and not is_none_word(limit):
            parse_memory(limit)
        check_backend(self.backend)
        check_executor_choice(self.executor)
        profile = getattr(self, "profile", None)
        if profile is not None:
            from ..hardware import load_profile

            load_profile(profile)

    def resolved_executor(self) -> str:
        """``local`` or ``mpi`` (``auto``: ``mpi`` when started by mpiexec with several ranks)."""
        from ..executors import resolve_executor

        return resolve_executor(self.executor)


def submit_job(run, pubs: list, executor: str):
    """A submitted ``PrimitiveJob`` of ``run(pubs)``.

    Under a distributed executor (``executor="mpi"``) every rank runs the pubs at once,
    on its main thread and in the same order (collectives must not run on a job's worker
    thread); the job then only hands the result over.
    """
    from qiskit.primitives import PrimitiveJob

    from ..executors import executor_kind

    if executor_kind(executor).distributed:
        result = run(pubs)
        job = PrimitiveJob(lambda: result)
    else:
        job = PrimitiveJob(run, pubs)
    job._submit()
    return job
