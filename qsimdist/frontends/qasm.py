"""OpenQASM 2 and 3 files -> Qiskit circuit -> :class:`GateCircuit`.

The version is read from the ``OPENQASM`` header. OpenQASM 2 files are
loaded with Qiskit's legacy custom instructions, so the files Qiskit itself
writes (which use gates such as ``u``, ``rzz`` or ``sx`` that the strict
``qelib1.inc`` lacks) load too.
"""

from __future__ import annotations

import re
from pathlib import Path

from .._fileio import read_input_text
from .._optional import require
from ..errors import CircuitParseError
from .circuit import GateCircuit
from .qiskit_circuit import from_qiskit

_HEADER = re.compile(r"^\s*OPENQASM\s+([0-9]+)(?:\.[0-9]+)?\s*;", re.MULTILINE)


def qasm_version(text: str, source: str = "<string>") -> int:
    """The major version in the ``OPENQASM`` header (2 or 3)."""
    # Strip comments before looking for the header.
    stripped = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.DOTALL)
    m = _HEADER.search(stripped)
    if not m:
        raise CircuitParseError(
            f"{source}: no 'OPENQASM 2.0;' or 'OPENQASM 3.0;' header found on any line"
        )
    version = int(m.group(1))
    if version not in (2, 3):
        raise CircuitParseError(f"{source}: OpenQASM version {version} unsupported; valid: 2, 3")
    return version


def _first_line(msg: object) -> str:
    msg = " ".join(str(msg).split()).strip("\"'")
    return msg or "syntax error"


def _antlr_line(exc: BaseException) -> str:
    """'line N, column M: ' from the OpenQASM 3 parser's underlying ANTLR error, if any."""
    seen = exc
    for _ in range(4):
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            break
        for arg in getattr(seen, "args", ()):
            token = getattr(arg, "offendingToken", None)
            if token is not None:
                return f"line {token.line}, column {token.column}: "
    return ""


def qiskit_from_qasm(text: str, source: str = "<string>"):
    """Parse OpenQASM 2 or 3 text into a ``QuantumCircuit``."""
    version = qasm_version(text, source)
    if version == 2:
        import qiskit.qasm2 as qasm2

        try:
            return qasm2.loads(text, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
        except qasm2.QASM2Error as exc:
            # Messages look like '<input>:4,0: ...' -> 'FILE line 4, col 0: ...'
            msg = re.sub(r"<input>:(\d+),(\d+):", r"line \1, column \2:", _first_line(exc))
            raise CircuitParseError(f"{source}: invalid OpenQASM 2: {msg}") from None
    require("qiskit_qasm3_import")
    import qiskit.qasm3 as qasm3

    try:
        return qasm3.loads(text)
    except qasm3.QASM3Error as exc:
        msg = re.sub(r"^(\d+),(\d+):", r"line \1, column \2:", _first_line(exc))
        raise CircuitParseError(f"{source}: invalid OpenQASM 3: {msg}") from None
    except Exception as exc:  # noqa: BLE001 - the OpenQASM 3 parser raises its own types
        raise CircuitParseError(
            f"{source}: invalid OpenQASM 3: {_antlr_line(exc)}{_first_line(exc)}"
        ) from None


def read_qasm(path: str | Path) -> GateCircuit:
    """Read an OpenQASM 2 or 3 file into a :class:`GateCircuit`."""
    path = Path(path)
    text = read_input_text(path, "OpenQASM text")
    gc = from_qiskit(qiskit_from_qasm(text, str(path)))
    gc.name = path.stem
    return gc
