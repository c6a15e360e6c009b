"""Executors run a Plan: ``local`` (numpy or cupy, one process); ``mpi`` comes later."""

from __future__ import annotations

from ..errors import InvalidInputError

EXECUTORS = ("local",)


def get_executor(name: str):
    """The ``execute(plan, **kw)`` function of executor ``name``."""
    if name == "local":
        from .local import execute

        return execute
    raise InvalidInputError(f"unknown executor {name!r}; valid: {', '.join(EXECUTORS)}")
