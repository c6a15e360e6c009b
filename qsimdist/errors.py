"""The exception tree of qsimdist.

Every error qsimdist raises on purpose derives from :class:`QsimdistError`, and
each subclass also inherits the builtin exception it refines, so callers may
catch either. Messages name the offending value and list the valid choices.
The CLI turns any ``QsimdistError`` into one line on stderr and exit code 2.
"""

from __future__ import annotations


class QsimdistError(Exception):
    """Root of every error raised by qsimdist on purpose."""


class InvalidInputError(QsimdistError, ValueError):
    """An argument or option has a value outside its valid set."""


class BitstringError(InvalidInputError):
    """A bitstring has the wrong length or characters other than 0, 1 and ``*``."""


class CircuitParseError(QsimdistError, ValueError):
    """A circuit or network file could not be read (the message gives the line)."""


class UnsupportedInstructionError(QsimdistError, NotImplementedError):
    """A circuit holds an operation that has no place in an amplitude network."""


class PlanError(QsimdistError, ValueError):
    """A plan cannot be made (e.g. the memory limit is too small) or is malformed."""


class PlanFormatError(PlanError):
    """A plan file is not valid JSON, has a wrong schema version, or a bad field."""


class ProfileError(InvalidInputError):
    """An unknown or malformed hardware profile, or a device count it does not support."""


class MissingDependencyError(QsimdistError, ImportError):
    """An optional dependency is absent; the message names the extra to install."""


class ExecutionError(QsimdistError, RuntimeError):
    """Executing a plan failed for a reason other than bad input."""


__all__ = [
    "BitstringError",
    "CircuitParseError",
    "ExecutionError",
    "InvalidInputError",
    "MissingDependencyError",
    "PlanError",
    "PlanFormatError",
    "ProfileError",
    "QsimdistError",
    "UnsupportedInstructionError",
]
