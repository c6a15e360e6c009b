"""The one executor registry, and the reader of a saved distributed schedule: what
:class:`~qsimdist.planner.plan.Plan` reaches without importing the executors.

The registry is one table, executor name to executor kind (a
:class:`qsimdist.executors.Executor` subclass). Every caller reads it:
:meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` takes the kind's
``execute(plan, **kw)`` (:func:`get_executor`), and the entry points check names
against it and ask the kind what an executor means to them (:func:`executor_kind`).
:mod:`qsimdist.executors` registers the built-in kinds (``local``, ``mpi``) when it
is imported, which ``import qsimdist`` does, and re-exports these functions: code
outside the planner reaches them through that face.

Why the table lives here and not under ``executors/``: the planner may not import the
executors (layer rule, ``tests/test_import_graph.py``), yet ``Plan.execute`` must find
them; this module imports nothing but :mod:`qsimdist.errors`, so the planner and the
executors both reach it. It holds the kinds as objects and never imports an executor
module: a kind loads its own module when its ``execute`` first runs (so cupy and
mpi4py load only where they are needed). ``tests/test_import_graph.py`` fails on a
second table of executors anywhere in the package.

The schedule reader turns a plan file's ``distribution`` field into the plan's
schedule, replayed (:func:`qsimdist.planner.distribution.replay.read_schedule`).
The distribution package imports the plan module, so the plan module does not
import it back: :mod:`qsimdist.planner`, whose face runs before any of its
modules, registers the reader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidInputError, PlanFormatError, shorten

#: executor name -> executor kind: the one table (``register_executor`` fills it)
_EXECUTORS: dict[str, Any] = {}


def register_executor(kind: Any) -> Any:
    """Register the executor kind ``kind`` (a :class:`qsimdist.executors.Executor`
    subclass with a ``name`` and an ``execute(plan, **kw)``) under ``kind.name``; returns
    ``kind``, so it serves as a class decorator. A second registration of a name is
    refused."""
    name = getattr(kind, "name", "")
    if not name:
        raise ValueError(f"{getattr(kind, '__name__', kind)!r} has no name")
    if name in _EXECUTORS:
        raise ValueError(f"executor {name!r} is already registered")
    if kind.one_process == kind.distributed:
        raise ValueError(f"executor kind {name!r}: one_process must be not distributed")
    if not callable(getattr(kind, "execute", None)):
        raise ValueError(f"executor kind {name!r} has no execute(plan, **kw)")
    _EXECUTORS[name] = kind
    return kind


def executor_names() -> tuple[str, ...]:
    """The executors every entry point accepts (registered order)."""
    return tuple(_EXECUTORS)


#: the same list under its older name
executors = executor_names


def executor_kind(name: str) -> Any:
    """The registered executor kind of ``name``; an unknown name raises
    :class:`~qsimdist.errors.InvalidInputError` with the valid list."""
    kind = _EXECUTORS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise InvalidInputError(
            f"unknown executor {shorten(name)}; valid: {', '.join(_EXECUTORS)}")
    return kind


def get_executor(name: str) -> Callable:
    """The ``execute(plan, **kw)`` function of executor ``name``."""
    return executor_kind(name).execute


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
