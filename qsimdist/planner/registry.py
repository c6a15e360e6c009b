"""What :class:`~qsimdist.planner.plan.Plan` reaches without importing it: executors, and
the reader of a saved distributed schedule.

An executor is a ``module.function(plan, **kw)`` named by strings and imported
only when first used (so cupy and mpi4py load only where they are needed).
The planner never imports the executors: :mod:`qsimdist.executors` registers
the built-in ones (``local``, ``mpi``) when it is imported, which
``import qsimdist`` does.

The schedule reader turns a plan file's ``distribution`` field into the plan's
schedule, replayed (:func:`qsimdist.planner.distribution.replay.read_schedule`).
The distribution package imports the plan module, so the plan module does not
import it back: :mod:`qsimdist.planner`, whose face runs before any of its
modules, registers the reader.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import InvalidInputError, PlanFormatError

_REGISTRY: dict[str, tuple[str, str]] = {}


def register_executor(name: str, module: str, function: str = "execute") -> None:
    """Register ``module.function(plan, **kw)`` as executor ``name`` (duplicates are refused)."""
    if name in _REGISTRY:
        raise ValueError(f"executor {name!r} is already registered")
    _REGISTRY[name] = (module, function)


def executors() -> tuple[str, ...]:
    """Names of the registered executors."""
    return tuple(_REGISTRY)


def get_executor(name: str):
    """The ``execute(plan, **kw)`` function of executor ``name``."""
    if name not in _REGISTRY:
        raise InvalidInputError(f"unknown executor {name!r}; valid: {', '.join(_REGISTRY)}")
    module, function = _REGISTRY[name]
    return getattr(importlib.import_module(module), function)


_SCHEDULE_READER: list[Callable] = []


def register_schedule_reader(read: Callable) -> None:
    """Register ``read(plan, data, source) -> schedule`` as the reader of a plan file's
    ``distribution`` field (one reader: a second is refused)."""
    if _SCHEDULE_READER:
        raise ValueError("a schedule reader is already registered")
    _SCHEDULE_READER.append(read)


def schedule_reader_registered() -> bool:
    """Whether a schedule reader is registered."""
    return bool(_SCHEDULE_READER)


def read_schedule(plan, data: object, source: str):
    """The schedule of ``plan`` that ``data`` (a plan file's ``distribution`` field) holds,
    checked by the registered reader."""
    if not _SCHEDULE_READER:
        raise PlanFormatError(f"{source}: this plan holds a distributed schedule, but no "
                              "schedule reader is registered (import qsimdist.planner)")
    return _SCHEDULE_READER[0](plan, data, source)
