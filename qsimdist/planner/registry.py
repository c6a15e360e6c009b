"""The executor registry that :meth:`Plan.execute <qsimdist.planner.plan.Plan.execute>` uses.

An executor is a ``module.function(plan, **kw)`` named by strings and imported
only when first used (so cupy and mpi4py load only where they are needed).
The planner never imports the executors: :mod:`qsimdist.executors` registers
the built-in ones (``local``, ``mpi``) when it is imported, which
``import qsimdist`` does.
"""

from __future__ import annotations

import importlib

from ..errors import InvalidInputError

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
