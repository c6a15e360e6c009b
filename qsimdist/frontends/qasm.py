"""OpenQASM 2 and 3 files -> Qiskit circuit -> :class:`GateCircuit`.

The version is read from the ``OPENQASM`` header. OpenQASM 2 files are
loaded with Qiskit's legacy custom instructions, so the files Qiskit itself
writes (which use gates such as ``u``, ``rzz`` or ``sx`` that the strict
``qelib1.inc`` lacks) load too; a gate the file defines itself wins over a
legacy one of the same name.

Files are untrusted: before any parser sees the text, register declarations
are added up and refused beyond :data:`MAX_QUBITS` qubits or
:data:`MAX_CLBITS` classical bits, and number literals too large to be a
finite float are refused, each naming the line.
"""

from __future__ import annotations

import ast
import bisect
import math
import re
from pathlib import Path

from .._fileio import read_input_text
from .._optional import require
from ..errors import CircuitParseError, InvalidInputError, shorten
from .circuit import MAX_CLBITS, MAX_QUBITS, GateCircuit
from .qiskit_circuit import from_qiskit

_HEADER = re.compile(r"^\s*OPENQASM\s+([0-9]+)(?:\.[0-9]+)?\s*;", re.MULTILINE)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|$)", re.DOTALL)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
#: (pattern, kind); group "size" is the designator, absent for one-bit declarations
_DECLARATIONS = [
    (re.compile(rf"\bqreg\s+{_NAME}\s*\[(?P<size>[^\]]*)\]"), "qubit"),
    (re.compile(rf"\bcreg\s+{_NAME}\s*\[(?P<size>[^\]]*)\]"), "bit"),
    (re.compile(r"\bqubit\s*\[(?P<size>[^\]]*)\]"), "qubit"),
    (re.compile(rf"\bqubit\s+{_NAME}"), "qubit"),
    (re.compile(r"\bbit\s*\[(?P<size>[^\]]*)\]"), "bit"),
    (re.compile(rf"\bbit\s+{_NAME}"), "bit"),
]
_PHYSICAL = re.compile(r"\$([0-9]+)")
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)[eE][+-]?[0-9_]+")
_GATE_DEFINITION = re.compile(rf"\b(?:gate|opaque)\s+({_NAME})")
_INT_LITERAL = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*")
_BIG = 1 << 64  # designator values beyond this are refused without further arithmetic


def _strip_comments(text: str) -> str:
    """``text`` with comments blanked out, line breaks kept (so line numbers still hold)."""
    return _COMMENT.sub(lambda m: " " + "\n" * m.group().count("\n"), text)


class _Lines:
    """Line numbers of character offsets in one text."""

    def __init__(self, text: str) -> None:
        self._starts = [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) + 1


def _int_literal(token: str) -> int:
    """An OpenQASM integer literal's value; ``_BIG`` for one too long to matter."""
    digits = token.replace("_", "")
    if len(digits) > 40:
        return _BIG
    if digits[:2].lower() in ("0x", "0b", "0o"):
        return int(digits, 0) if len(digits) > 2 else 0
    return int(digits or "0", 10)


def _designator_value(text: str) -> int | None:
    """The value of a register size written as integer arithmetic, or None if it is not one.

    Integer literals (decimal, hex, binary, octal, with ``_``) joined by ``+ - * / %
    << >> **`` and parentheses are evaluated with every intermediate bounded, so a
    size like ``1 << 40`` or ``2000 * 2000000`` is seen before any parser acts on it.
    """
    body = text.strip()
    if not body or len(body) > 1000:
        return None if not body else _BIG
    if not re.fullmatch(r"[0-9\s+\-*/%<>()]*", _INT_LITERAL.sub("0", body)):
        return None
    try:
        tree = ast.parse(_INT_LITERAL.sub(lambda m: str(_int_literal(m.group())), body),
                         mode="eval")
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            result = node.value
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            result = -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        elif isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            op = node.op
            if isinstance(op, (ast.LShift, ast.Pow)) and not 0 <= b <= 128:
                return _BIG
            if isinstance(op, ast.Pow) and abs(a) > 1 and b > 64:
                return _BIG
            if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                raise ValueError("division by zero")
            result = {
                ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                ast.Div: lambda: a // b, ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b,
                ast.LShift: lambda: a << b, ast.RShift: lambda: a >> min(b, 1 << 16),
                ast.Pow: lambda: a**b,
            }.get(type(op), lambda: None)()
            if result is None:
                raise ValueError("operator")
        else:
            raise ValueError("not integer arithmetic")
        return max(min(result, _BIG), -_BIG)

    try:
        return value(tree.body)
    except (ValueError, RecursionError):
        return None


def check_declared_sizes(text: str, source: str = "<string>") -> None:
    """Refuse OpenQASM text declaring more than MAX_QUBITS qubits or MAX_CLBITS bits.

    Runs on the raw text, before Qiskit's parsers (which allocate every
    declared register, and panic on sizes like ``qreg q[2000000000];``).
    Sizes that are not integer arithmetic are left for the parser to judge.
    """
    stripped = _strip_comments(text)
    line_of = _Lines(stripped)
    limits = {"qubit": MAX_QUBITS, "bit": MAX_CLBITS}
    found = []
    for pattern, kind in _DECLARATIONS:
        for m in pattern.finditer(stripped):
            size = _designator_value(m.group("size")) if "size" in m.groupdict() else 1
            if size is not None:
                found.append((m.start(), kind, size))
    for m in _PHYSICAL.finditer(stripped):
        index = int(m.group(1)) if len(m.group(1)) < 20 else _BIG
        found.append((m.start(), "physical", index + 1))
    totals = {"qubit": 0, "bit": 0}
    for start, kind, size in sorted(found):
        where = f"{source}: line {line_of(start)}"
        if kind == "physical":
            if size > MAX_QUBITS:
                raise CircuitParseError(
                    f"{where}: physical qubit ${size - 1} is beyond the {MAX_QUBITS} qubits "
                    "supported (MAX_QUBITS)"
                )
            continue
        if size < 0:
            raise CircuitParseError(f"{where}: a register of {size} {kind}s; sizes are >= 0")
        totals[kind] += size
        if totals[kind] > limits[kind]:
            bound = "MAX_QUBITS" if kind == "qubit" else "MAX_CLBITS"
            declared = "a size beyond 2^64" if size >= _BIG else f"{size} {kind}s"
            raise CircuitParseError(
                f"{where}: this declaration ({declared}) brings the file to "
                f"{min(totals[kind], _BIG)} {kind}s; at most {limits[kind]} are supported ({bound})"
            )


def check_float_literals(text: str, source: str = "<string>") -> None:
    """Refuse number literals too large to be finite floats (``1e400``), naming the line."""
    stripped = _strip_comments(text)
    line_of = None
    for m in _FLOAT_LITERAL.finditer(stripped):
        try:
            finite = math.isfinite(float(m.group().replace("_", "")))
        except ValueError:
            continue
        if not finite:
            line_of = line_of or _Lines(stripped)
            raise CircuitParseError(
                f"{source}: line {line_of(m.start())}: the number {shorten(m.group())} is too "
                "large to be a finite float; angles and parameters must be finite numbers"
            )


def defined_gate_names(text: str) -> set[str]:
    """Names the file defines itself with ``gate NAME`` or ``opaque NAME``."""
    return set(_GATE_DEFINITION.findall(_strip_comments(text)))


def qasm_version(text: str, source: str = "<string>") -> int:
    """The major version in the ``OPENQASM`` header (2 or 3)."""
    # Strip comments before looking for the header.
    stripped = _strip_comments(text)
    m = _HEADER.search(stripped)
    if not m:
        raise CircuitParseError(
            f"{source}: no 'OPENQASM 2.0;' or 'OPENQASM 3.0;' header found on any line"
        )
    digits = m.group(1)
    version = int(digits) if len(digits) < 6 else -1
    if version not in (2, 3):
        shown = digits if len(digits) < 6 else f"{digits[:5]}… ({len(digits)} digits)"
        raise CircuitParseError(f"{source}: OpenQASM version {shown} unsupported; valid: 2, 3")
    return version


def _first_line(msg: object, limit: int = 240) -> str:
    """A parser's message on one line, cut to ``limit`` characters (it may quote the input)."""
    msg = " ".join(str(msg).split()).strip("\"'")
    if len(msg) > limit:
        msg = f"{msg[:limit]}… ({len(msg)} chars)"
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
    check_declared_sizes(text, source)
    check_float_literals(text, source)
    if version == 2:
        import qiskit.qasm2 as qasm2

        # A gate the file defines itself wins over a legacy built-in of the same name
        # (e.g. Qiskit's own benchmark files define 'gate cu c,t { ... }').
        own = defined_gate_names(text)
        custom = [c for c in qasm2.LEGACY_CUSTOM_INSTRUCTIONS if c.name not in own]
        try:
            return qasm2.loads(text, custom_instructions=custom)
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
    try:
        gc = from_qiskit(qiskit_from_qasm(text, str(path)))
    except InvalidInputError as exc:  # e.g. an angle that evaluates to NaN or infinity
        raise CircuitParseError(f"{path}: {exc}") from None
    gc.name = path.stem
    return gc
