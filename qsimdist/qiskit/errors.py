"""qsimdist's errors as Qiskit raises them: each also a ``qiskit.exceptions.QiskitError``.

Qiskit's primitives raise :class:`~qiskit.exceptions.QiskitError` where a
circuit holds something they cannot run, and callers written for them catch
``QiskitError``. The primitives of :mod:`qsimdist.qiskit` therefore re-raise
every :class:`~qsimdist.errors.QsimdistError` as its Qiskit flavour: a
subclass of both the qsimdist class (so ``except QsimdistError``,
``except UnsupportedInstructionError`` and the builtin it refines, e.g.
``ValueError``, still catch it) and ``QiskitError``. The message is unchanged
and reads without the quotes ``QiskitError.__str__`` would add.

This module imports Qiskit, so only ``qsimdist.qiskit`` modules import it;
the CLI and the plain-Python API keep raising the qsimdist classes.

Example::

    from qiskit.exceptions import QiskitError
    try:
        SamplerV2().run([circuit_with_a_while_loop]).result()
    except QiskitError as exc:          # also a qsimdist UnsupportedInstructionError
        print(exc)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from qiskit.exceptions import QiskitError

from .. import errors as _base


class QiskitFlavour(QiskitError):
    """What the Qiskit flavours share: the qsimdist message, unquoted, and ``.message``."""

    def __init__(self, *message: object) -> None:
        text = " ".join(str(m) for m in message)
        Exception.__init__(self, text)
        self.message = text

    def __str__(self) -> str:
        return self.message


class QsimdistError(QiskitFlavour, _base.QsimdistError):
    """:class:`qsimdist.errors.QsimdistError` that is also a ``QiskitError``."""


class InvalidInputError(QiskitFlavour, _base.InvalidInputError):
    """:class:`qsimdist.errors.InvalidInputError` (a ValueError) that is also a QiskitError."""


class BitstringError(QiskitFlavour, _base.BitstringError):
    """:class:`qsimdist.errors.BitstringError` that is also a ``QiskitError``."""


class CircuitParseError(QiskitFlavour, _base.CircuitParseError):
    """:class:`qsimdist.errors.CircuitParseError` that is also a ``QiskitError``."""


class UnsupportedInstructionError(QiskitFlavour, _base.UnsupportedInstructionError):
    """:class:`qsimdist.errors.UnsupportedInstructionError` that is also a ``QiskitError``."""


class PlanError(QiskitFlavour, _base.PlanError):
    """:class:`qsimdist.errors.PlanError` that is also a ``QiskitError``."""


class PlanFormatError(QiskitFlavour, _base.PlanFormatError):
    """:class:`qsimdist.errors.PlanFormatError` that is also a ``QiskitError``."""


class ProfileError(QiskitFlavour, _base.ProfileError):
    """:class:`qsimdist.errors.ProfileError` that is also a ``QiskitError``."""


class MissingDependencyError(QiskitFlavour, _base.MissingDependencyError):
    """:class:`qsimdist.errors.MissingDependencyError` that is also a ``QiskitError``."""


class ExecutionError(QiskitFlavour, _base.ExecutionError):
    """:class:`qsimdist.errors.ExecutionError` that is also a ``QiskitError``."""


#: each qsimdist error class and its Qiskit flavour, most derived first
_FLAVOURS: dict[type, type] = {
    _base.BitstringError: BitstringError,
    _base.ProfileError: ProfileError,
    _base.InvalidInputError: InvalidInputError,
    _base.CircuitParseError: CircuitParseError,
    _base.UnsupportedInstructionError: UnsupportedInstructionError,
    _base.PlanFormatError: PlanFormatError,
    _base.PlanError: PlanError,
    _base.MissingDependencyError: MissingDependencyError,
    _base.ExecutionError: ExecutionError,
    _base.QsimdistError: QsimdistError,
}


def qiskit_flavour(exc: _base.QsimdistError) -> _base.QsimdistError:
    """``exc`` as the Qiskit flavour of its class (itself when it is a ``QiskitError`` already).

    A subclass defined elsewhere maps to the flavour of its nearest listed base.
    """
    if isinstance(exc, QiskitError):
        return exc
    flavour = next(f for base, f in _FLAVOURS.items() if isinstance(exc, base))
    new = flavour(*[str(a) for a in exc.args] or [""])
    new.__cause__ = exc.__cause__
    new.__suppress_context__ = True
    return new.with_traceback(exc.__traceback__)


@contextmanager
def qiskit_errors() -> Iterator[None]:
    """Re-raise a :class:`~qsimdist.errors.QsimdistError` from the block as its Qiskit flavour."""
    try:
        yield
    except _base.QsimdistError as exc:
        flavoured = qiskit_flavour(exc)
        if flavoured is exc:
            raise
        raise flavoured from exc.__cause__


__all__ = [
    "BitstringError",
    "CircuitParseError",
    "ExecutionError",
    "InvalidInputError",
    "MissingDependencyError",
    "PlanError",
    "PlanFormatError",
    "ProfileError",
    "QiskitFlavour",
    "QsimdistError",
    "UnsupportedInstructionError",
    "qiskit_errors",
    "qiskit_flavour",
]
