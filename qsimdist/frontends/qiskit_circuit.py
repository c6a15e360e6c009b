"""Qiskit ``QuantumCircuit`` -> :class:`GateCircuit`.

Every unitary instruction is taken through its matrix, so custom gates and
parametrised gates with bound parameters work. A gate without a matrix of its
own (one made by ``QuantumCircuit.to_gate()``, a controlled custom gate), a
gate wider than :data:`~qsimdist.frontends.circuit.MAX_GATE_QUBITS` qubits and
a composite instruction (``qc.append(sub_circuit, qubits)`` makes an
``Instruction``, not a ``Gate``) are expanded through their definitions,
recursively, with their bound parameters and global phases: a 20-qubit
composite gate becomes its gates, never a dense ``2^20 x 2^20`` matrix.
Barriers and delays are skipped, and final measurements are ignored
(amplitudes are taken before them). A ``reset`` on a qubit that nothing has
touched yet is the identity (QASMBench files start with such resets) and is
skipped; a reset after use, or inside a definition, is not unitary. Anything
else that is not unitary raises :class:`UnsupportedInstructionError` naming
the instruction and its position.

Matrices of Qiskit's standard gates are cached per (gate class, parameters)
within one conversion, so a file of 10^5 ``cx``/``t``/``h`` gates converts
without 10^5 ``to_matrix`` calls.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import InvalidInputError, UnsupportedInstructionError, shorten
from .circuit import MAX_GATE_QUBITS, GateCircuit
from .circuit import Gate as IRGate

_SKIPPED = {"barrier", "delay"}
#: how deep definitions may nest before the expansion gives up (a cycle, or a pathological
#: circuit)
MAX_DEFINITION_DEPTH = 64


def _numeric_params(op) -> tuple | None:
    params = []
    for value in op.params:
        if not isinstance(value, numbers.Number):
            return None
        params.append(complex(value))
    return tuple(params)


def _cache_key(op) -> tuple | None:
    """A key fixing ``op``'s matrix, or ``None`` when there is none to trust:

    - one of Qiskit's standard gates with numeric parameters;
    - a gate defined by a ``gate`` statement of an OpenQASM 2 program, with numeric
      parameters: the program's gate table (shared by every gate it parsed) and the name
      fix the body, since OpenQASM 2 forbids redefining a name.
    """
    if getattr(op, "condition", None) is not None:
        return None
    standard = getattr(op, "_standard_gate", None)
    if standard is not None:
        params = _numeric_params(op)
        return None if params is None else (standard, op.name, params)
    table = getattr(op, "_gates", None)
    if table is not None and type(op).__module__.startswith("qiskit.qasm2"):
        params = _numeric_params(op)
        return None if params is None else ("qasm2", id(table), op.name, params)
    return None


def _composed_matrix(op, depth: int = 0) -> np.ndarray | None:
    """The matrix of a gate defined by other gates (an OpenQASM 2 ``gate``), composed
    from its definition's gate matrices here, little-endian like Qiskit's.

    Qiskit's route (``Operator(definition)``) costs about 3 ms per gate instance, and a
    file whose defined gates take per-instance angles builds one per instance.
    ``None`` where the definition holds anything but gates and barriers (the caller
    falls back to Qiskit).
    """
    standard = getattr(op, "_standard_gate", None)
    if standard is not None:
        return np.asarray(op.to_matrix(), dtype=complex)
    if depth > 16 or getattr(op, "_gates", None) is None:
        return None
    definition = op.definition
    if definition is None:
        return None
    k = definition.num_qubits
    index = {q: i for i, q in enumerate(definition.qubits)}
    u = np.eye(1 << k, dtype=complex).reshape((2,) * (2 * k))  # axis a <-> qubit k-1-a
    for inst in definition.data:
        sub_op = inst.operation
        if sub_op.name == "barrier":
            continue
        if inst.clbits or getattr(sub_op, "condition", None) is not None:
            return None
        sub = _composed_matrix(sub_op, depth + 1)
        if sub is None:
            return None
        qs = [index[q] for q in inst.qubits]
        s = len(qs)
        # sub is little-endian over qs: its C-order axes hold qs[s-1], ..., qs[0]
        axes = [k - 1 - q for q in reversed(qs)]
        u = np.tensordot(sub.reshape((2,) * (2 * s)), u, axes=(list(range(s, 2 * s)), axes))
        u = np.moveaxis(u, list(range(s)), axes)
    phase = definition.global_phase
    u = u.reshape(1 << k, 1 << k)
    return u * np.exp(1j * float(phase)) if phase else u


def definition_of(op, where: str):
    """``op.definition`` (a ``QuantumCircuit``), or ``None`` when the instruction has none.

    Raises:
        UnsupportedInstructionError: building the definition failed (naming ``where``).
    """
    try:
        definition = op.definition
    except Exception as exc:  # noqa: BLE001 - a synthesis that fails for these parameters
        raise UnsupportedInstructionError(
            f"instruction {where} has no usable definition ({shorten(str(exc), 200)})"
        ) from None
    if definition is None or not hasattr(definition, "data"):
        return None
    return definition


def _own_matrix(op) -> np.ndarray | None:
    """The matrix an instruction states itself (standard, OpenQASM 2 and matrix gates), or
    ``None`` where it would have to be built from the definition."""
    try:
        matrix = _composed_matrix(op)
        if matrix is None and hasattr(type(op), "__array__"):
            matrix = op.to_matrix()
    except Exception:  # noqa: BLE001 - some gates only define a decomposition
        return None
    return None if matrix is None else np.asarray(matrix, dtype=complex)


class _Conversion:
    """One conversion's state: the gate list, the qubits measured or touched so far, and the
    standard-gate matrix cache."""

    def __init__(self, gc: GateCircuit) -> None:
        self.gc = gc
        self.measured: set[int] = set()
        self.touched: set[int] = set()
        self.matrices: dict[tuple, np.ndarray] = {}

    def add(self, circuit, qmap: list[int], inside: str = "", depth: int = 0) -> None:
        """Append ``circuit``'s instructions; its qubit ``i`` is ``qmap[i]`` of the result.

        ``inside`` names the instructions whose definition ``circuit`` is (for messages).
        """
        from qiskit.circuit import ControlFlowOp, Gate, ParameterExpression

        gc, measured, touched, matrices = self.gc, self.measured, self.touched, self.matrices
        index = {q: qmap[i] for i, q in enumerate(circuit.qubits)}
        for pos, inst in enumerate(circuit.data):
            op = inst.operation
            qubits = [index[q] for q in inst.qubits]
            if op.name in _SKIPPED:
                continue
            if op.name == "reset" and not inside and not touched.intersection(qubits) and (
                    not inst.clbits and getattr(op, "condition", None) is None):
                continue  # a fresh qubit is already |0>: the reset is the identity
            key = _cache_key(op) if not inst.clbits and not measured.intersection(qubits) else None
            cached = matrices.get(key) if key is not None else None
            if cached is not None:
                gc.gates.append(IRGate(cached, tuple(reversed(qubits)), op.name))
                touched.update(qubits)
                continue
            where = f"{shorten(op.name)} at position {pos} on qubits {shorten(qubits)}{inside}"
            if op.name == "measure":
                touched.update(qubits)
                measured.update(qubits)
                continue
            if isinstance(op, ControlFlowOp) or getattr(op, "condition", None) is not None:
                raise UnsupportedInstructionError(
                    f"classically controlled instruction {where}: amplitudes need a unitary "
                    "circuit"
                )
            is_gate = isinstance(op, Gate) or op.name == "unitary"
            if op.name != "reset" and not is_gate:
                # a composite instruction (qc.append(sub_circuit, ...)): its definition's
                # instructions are checked one by one, as if written here
                definition = definition_of(op, where)
                if definition is None:
                    raise UnsupportedInstructionError(
                        f"non-unitary instruction {where} has no definition; supported: "
                        "unitary gates, instructions defined by them, barrier, delay, final "
                        "measure"
                    )
                self.expand(definition, qubits, where, depth)
                continue
            touched.update(qubits)
            if measured.intersection(qubits):
                raise UnsupportedInstructionError(
                    f"instruction {where} follows a measurement of the same qubit (mid-circuit "
                    "measurement); only final measurements are allowed"
                )
            if inst.clbits:
                raise UnsupportedInstructionError(
                    f"instruction {where} writes classical bits; only unitary gates and final "
                    "measurements are allowed"
                )
            if not is_gate:
                raise UnsupportedInstructionError(
                    f"non-unitary instruction {where}; supported: unitary gates, barrier, "
                    "delay, final measure"
                )
            for value in getattr(op, "params", ()):
                if isinstance(value, ParameterExpression):
                    try:
                        value = complex(value)
                    except (TypeError, ValueError):
                        continue
                if isinstance(value, numbers.Number) and not np.isfinite(value):
                    raise InvalidInputError(
                        f"instruction {where} has the parameter {value}; parameters must be "
                        "finite numbers (NaN or infinite angles leave the amplitude undefined)"
                    )
            wide = len(qubits) > MAX_GATE_QUBITS
            matrix = None if wide else _own_matrix(op)
            if matrix is None:
                definition = None if op.name == "unitary" else definition_of(op, where)
                if definition is not None:
                    self.expand(definition, qubits, where, depth)
                    continue
                if wide:
                    raise UnsupportedInstructionError(
                        f"instruction {where} acts on {len(qubits)} qubits and has no "
                        f"definition; a matrix is used for gates on at most {MAX_GATE_QUBITS} "
                        "qubits (it has 4^k entries), wider gates are expanded through their "
                        "definitions"
                    )
                raise UnsupportedInstructionError(
                    f"instruction {where} has no matrix and no definition"
                )
            if not np.isfinite(matrix).all():
                raise InvalidInputError(
                    f"instruction {where} has NaN or infinite matrix entries; its parameters "
                    "must be finite numbers"
                )
            # Qiskit's matrices are little-endian in qargs: reverse to big-endian.
            gc.append(matrix, tuple(reversed(qubits)), op.name)
            if key is not None:
                matrices[key] = gc.gates[-1].matrix

    def expand(self, definition, qubits: list[int], where: str, depth: int) -> None:
        """Append a definition on ``qubits`` and add its global phase."""
        if depth >= MAX_DEFINITION_DEPTH:
            raise UnsupportedInstructionError(
                f"instruction {where} nests definitions more than {MAX_DEFINITION_DEPTH} deep"
            )
        if definition.num_qubits != len(qubits):
            raise UnsupportedInstructionError(
                f"instruction {where} has a definition on {definition.num_qubits} qubits, "
                f"not {len(qubits)}"
            )
        self.gc.global_phase += _phase_value(definition.global_phase, where)
        self.add(definition, qubits, f" inside {where}", depth + 1)


def _phase_value(phase, where: str) -> float:
    try:
        value = float(phase)
    except (TypeError, ValueError):
        raise UnsupportedInstructionError(
            f"instruction {where} has an unbound global phase {shorten(str(phase))}; bind "
            "its parameters first"
        ) from None
    if not math.isfinite(value):
        raise InvalidInputError(
            f"instruction {where} has the global phase {value}; it must be a finite number"
        )
    return value


def from_qiskit(qc) -> GateCircuit:  # qc: qiskit.QuantumCircuit
    """Convert a Qiskit circuit; the result's qubit q is ``qc.qubits[q]``.

    Raises:
        UnsupportedInstructionError: unbound parameters, a mid-circuit measurement, a
            reset after use, control flow, or an instruction with neither a matrix nor
            a definition (the message names it and its position).
        InvalidInputError: NaN or infinite parameters or global phase.
    """
    from qiskit.circuit import ParameterExpression

    if qc.parameters:
        names = ", ".join(sorted(p.name for p in qc.parameters))
        where = next(
            (
                f" (first in {inst.operation.name!r} at position {pos})"
                for pos, inst in enumerate(qc.data)
                if getattr(inst.operation, "is_parameterized", lambda: False)()
            ),
            "",
        )
        raise UnsupportedInstructionError(
            f"unbound parameters {names}{where}; bind them with assign_parameters() first"
        )
    phase = qc.global_phase
    if isinstance(phase, ParameterExpression):
        phase = float(phase)
    if not math.isfinite(float(phase)):
        raise InvalidInputError(
            f"the circuit's global phase is {float(phase)}; it must be a finite number"
        )
    gc = GateCircuit(qc.num_qubits, global_phase=float(phase), name=qc.name)
    _Conversion(gc).add(qc, list(range(qc.num_qubits)))
    return gc
