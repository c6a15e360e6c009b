"""The exception tree of qsimdist.

Every error qsimdist raises on purpose derives from :class:`QsimdistError`, and
each subclass also inherits the builtin exception it refines, so callers may
catch either. Messages name the offending value and list the valid choices.
The CLI turns any ``QsimdistError`` into one line on stderr and exit code 2.

The Qiskit primitives (:mod:`qsimdist.qiskit`) raise each of these as its
Qiskit flavour from :mod:`qsimdist.qiskit.errors`, a subclass that is also a
``qiskit.exceptions.QiskitError``; this module itself never imports Qiskit.
"""

from __future__ import annotations


def shorten(value: object, limit: int = 100) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters.

    A long value keeps its first characters, then an ellipsis and its total
    length, e.g. ``'aaaa…' (200000000 chars)``, so that a huge input never
    makes a huge message. Strings are measured in characters, other values in
    the characters of their ``repr``; a string is sliced before ``repr`` so a
    200 MB string is never copied whole.

    Parameters
    ----------
    value : object
        The value to show.
    limit : int, default 100
        About the most characters kept (at least 8).

    Returns
    -------
    str
        The value's ``repr``, shortened where it is longer than ``limit``.
    """
    limit = max(int(limit), 8)
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        head = repr(value[:limit])[: limit + 1]  # escapes can make the repr longer
        return f"{head}…{head[0]} ({len(value)} chars)"
    if isinstance(value, (bytes, bytearray)):
        if len(value) <= limit:
            return repr(bytes(value))
        return f"{bytes(value[:limit])!r}… ({len(value)} bytes)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


class InstructionPlace:
    """Where an instruction sits, for an error message: ``'name' at position p on qubits
    [..]`` (and ``suffix``), written only when a message uses it (``str``/``format``), so a
    walker over many instructions pays nothing for the messages it never raises."""

    __slots__ = ("name", "pos", "qubits", "suffix")

    def __init__(self, name: str, pos: int, qubits, suffix: str = "") -> None:
        self.name, self.pos, self.qubits, self.suffix = name, pos, qubits, suffix

    def __str__(self) -> str:
        return (f"{shorten(self.name)} at position {self.pos} on qubits "
                f"{shorten(self.qubits)}{self.suffix}")

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return str(self)


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


class OutOfMemoryError(QsimdistError, MemoryError):
    """The host could not give a run the memory its plan was made within.

    The plan fitted the memory limit, but the limit promised more than was free when
    the run allocated (other processes took memory, or an explicit limit exceeded it).
    The message names the allocation, the plan's peak and the limit; a lower limit
    makes the planner slice more.
    """


class NcclUnavailableError(InvalidInputError):
    """NCCL collectives were asked for (``--comm nccl``) where they cannot run: no GPU of
    its own on some rank (or no CuPy), two ranks on one device, or no NCCL library."""


__all__ = [
    "BitstringError",
    "InstructionPlace",
    "CircuitParseError",
    "ExecutionError",
    "InvalidInputError",
    "MissingDependencyError",
    "NcclUnavailableError",
    "OutOfMemoryError",
    "PlanError",
    "PlanFormatError",
    "ProfileError",
    "QsimdistError",
    "UnsupportedInstructionError",
    "shorten",
]
