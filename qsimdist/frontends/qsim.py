"""qsim's text circuit format -> :class:`GateCircuit`.

First line: the number of qubits. Then one gate per line,
``<moment> <gate> <qubit> [<qubit>] [params...]``, with qsim's own gate
definitions (Google's random-circuit benchmark files use this format).
Bitstrings for these files are usually given in natural order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .._fileio import read_input_text
from ..errors import CircuitParseError, shorten
from .circuit import MAX_QUBITS, GateCircuit

_S2 = 1 / math.sqrt(2)


def _rx(t: float) -> np.ndarray:
    c, s = math.cos(t / 2), math.sin(t / 2)
    return np.array([[c, -1j * s], [-1j * s, c]])


def _ry(t: float) -> np.ndarray:
    c, s = math.cos(t / 2), math.sin(t / 2)
    return np.array([[c, -s], [s, c]], dtype=complex)


def _rz(t: float) -> np.ndarray:
    return np.diag([np.exp(-0.5j * t), np.exp(0.5j * t)])


def _fsim(theta: float, phi: float) -> np.ndarray:
    c, s = math.cos(theta), math.sin(theta)
    return np.array(
        [[1, 0, 0, 0], [0, c, -1j * s, 0], [0, -1j * s, c, 0], [0, 0, 0, np.exp(-1j * phi)]]
    )


#: name -> (number of qubits, number of parameters, matrix builder)
QSIM_GATES: dict[str, tuple[int, int, Callable[..., np.ndarray]]] = {
    "id1": (1, 0, lambda: np.eye(2, dtype=complex)),
    "h": (1, 0, lambda: np.array([[1, 1], [1, -1]], dtype=complex) * _S2),
    "t": (1, 0, lambda: np.diag([1, np.exp(0.25j * math.pi)])),
    "s": (1, 0, lambda: np.diag([1, 1j])),
    "x": (1, 0, lambda: np.array([[0, 1], [1, 0]], dtype=complex)),
    "y": (1, 0, lambda: np.array([[0, -1j], [1j, 0]])),
    "z": (1, 0, lambda: np.diag([1.0 + 0j, -1.0])),
    "x_1_2": (1, 0, lambda: np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2),
    "y_1_2": (1, 0, lambda: np.array([[1 + 1j, -1 - 1j], [1 + 1j, 1 + 1j]]) / 2),
    "hz_1_2": (
        1,
        0,
        lambda: np.array([[1 + 1j, -1j * math.sqrt(2)], [math.sqrt(2), 1 + 1j]]) / 2,
    ),
    "rx": (1, 1, _rx),
    "ry": (1, 1, _ry),
    "rz": (1, 1, _rz),
    "id2": (2, 0, lambda: np.eye(4, dtype=complex)),
    "cz": (2, 0, lambda: np.diag([1.0 + 0j, 1, 1, -1])),
    "cx": (2, 0, lambda: np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=complex)),
    "is": (2, 0, lambda: np.array([[1, 0, 0, 0], [0, 0, 1j, 0], [0, 1j, 0, 0], [0, 0, 0, 1]])),
    "fs": (2, 2, _fsim),
    "cp": (2, 1, lambda p: np.diag([1, 1, 1, np.exp(1j * p)])),
}
QSIM_GATES["cnot"] = QSIM_GATES["cx"]


_TIME = re.compile(r"[0-9]+")


def parse_qsim(text: str, source: str = "<string>") -> GateCircuit:
    """Parse qsim circuit text. Measurements (``m``) are ignored.

    The first column of every gate line is its moment: an integer >= 0 that
    never decreases down the file, and two gates of one moment act on
    different qubits. The header may declare at most :data:`MAX_QUBITS`
    qubits and every angle must be a finite number; any violation raises
    :class:`CircuitParseError` naming the line.
    """
    lines = text.splitlines()
    first = next((k for k, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")), None)
    if first is None:
        raise CircuitParseError(f"{source}: empty file; the first line must be the qubit count")
    header = lines[first].split()[0]
    try:
        n = int(header) if _TIME.fullmatch(header) else -1
        if n < 1:
            raise ValueError
    except ValueError:
        raise CircuitParseError(
            f"{source}: line {first + 1}: expected the number of qubits (an integer >= 1), "
            f"got {shorten(lines[first].strip())}"
        ) from None
    if n > MAX_QUBITS:
        raise CircuitParseError(
            f"{source}: line {first + 1}: declares {n} qubits; at most {MAX_QUBITS} are "
            "supported (MAX_QUBITS)"
        )
    gc = GateCircuit(n, name=Path(source).stem)
    moment, moment_line = -1, 0
    busy: dict[int, int] = {}  # qubit -> line of the gate using it in the current moment
    for lineno, line in enumerate(lines[first + 1 :], start=first + 2):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{source}: line {lineno}"
        if len(fields) < 2:
            raise CircuitParseError(f"{where}: expected '<moment> <gate> <qubits> [params]'")
        if not _TIME.fullmatch(fields[0]) or len(fields[0]) > 18:
            raise CircuitParseError(
                f"{where}: time {shorten(fields[0])} is not a moment; the first column must be "
                "an integer >= 0"
            )
        time = int(fields[0])
        if time < moment:
            raise CircuitParseError(
                f"{where}: time {time} comes after time {moment} (line {moment_line}); times "
                "must never decrease down the file"
            )
        if time > moment:
            moment, busy = time, {}
        moment_line = lineno
        name = fields[1].lower()
        args = fields[2:]
        if name == "m":
            nq, npar, build = len(args), 0, None
        elif name not in QSIM_GATES:
            valid = ", ".join(sorted(QSIM_GATES))
            raise CircuitParseError(
                f"{where}: unknown gate {shorten(fields[1])}; valid: {valid}, m"
            )
        else:
            nq, npar, build = QSIM_GATES[name]
        if len(args) != nq + npar or not args:
            raise CircuitParseError(
                f"{where}: gate {name!r} takes {nq} qubit(s) and {npar} parameter(s), "
                f"got {len(args)} values"
            )
        try:
            qubits = [int(a) if _TIME.fullmatch(a.lstrip("-")) else int("x") for a in args[:nq]]
        except ValueError:
            raise CircuitParseError(
                f"{where}: cannot read qubits {shorten(' '.join(args[:nq]))}; qubits are "
                f"integers in 0..{n - 1}"
            ) from None
        if any(not 0 <= q < n for q in qubits) or len(set(qubits)) != nq:
            raise CircuitParseError(
                f"{where}: qubits {shorten(qubits)} must be distinct and in 0..{n - 1}"
            )
        for q in qubits:
            if q in busy:
                raise CircuitParseError(
                    f"{where}: qubit {q} is already used at time {time} by line {busy[q]}; "
                    "gates in one moment must act on different qubits"
                )
            busy[q] = lineno
        params = []
        for a in args[nq:]:
            try:
                value = float(a)
            except ValueError:
                raise CircuitParseError(
                    f"{where}: cannot read parameter {shorten(a)} of gate {name!r}; parameters "
                    "are finite numbers"
                ) from None
            if not math.isfinite(value):
                raise CircuitParseError(
                    f"{where}: parameter {shorten(a)} of gate {name!r} is not a finite number; "
                    "NaN or infinite angles leave the amplitude undefined"
                )
            params.append(value)
        if build is not None:
            gc.append(build(*params), qubits, name)
    return gc


def read_qsim(path: str | Path) -> GateCircuit:
    """Read a qsim circuit file."""
    path = Path(path)
    text = read_input_text(path, "qsim text")
    return parse_qsim(text, str(path))
