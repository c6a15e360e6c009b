"""What the primitives' option classes share: coercion from a dict and the ``auto`` executor."""

from __future__ import annotations


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

    def resolved_executor(self) -> str:
        """``local`` or ``mpi`` (``auto``: ``mpi`` when started by mpiexec with several ranks)."""
        from ..executors import resolve_executor

        return resolve_executor(self.executor)
