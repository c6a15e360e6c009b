"""Qiskit ``QuantumCircuit`` -> :class:`GateCircuit`.

Every unitary instruction is taken through its matrix, so custom gates and
parametrised gates with bound parameters work. Barriers and delays are
skipped, and final measurements are ignored (amplitudes are taken before
them). A ``reset`` on a qubit that nothing has touched yet is the identity
(QASMBench files start with such resets) and is skipped; a reset after use
is not unitary. Anything else that is not a unitary raises
:class:`UnsupportedInstructionError` naming the instruction and its position.

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


def from_qiskit(qc) -> GateCircuit:  # qc: qiskit.QuantumCircuit
    """Convert a Qiskit circuit; the result's qubit q is ``qc.qubits[q]``."""
    from qiskit.circuit import ControlFlowOp, Gate, ParameterExpression
    from qiskit.quantum_info import Operator

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
    measured: set[int] = set()
    touched: set[int] = set()
    matrices: dict[tuple, np.ndarray] = {}
    index = {q: i for i, q in enumerate(qc.qubits)}
    for pos, inst in enumerate(qc.data):
        op = inst.operation
        qubits = [index[q] for q in inst.qubits]
        if op.name in _SKIPPED:
            continue
        if op.name == "reset" and not touched.intersection(qubits) and not inst.clbits and (
                getattr(op, "condition", None) is None):
            continue  # a fresh qubit is already |0>: the reset is the identity
        key = _cache_key(op) if not inst.clbits and not measured.intersection(qubits) else None
        cached = matrices.get(key) if key is not None else None
        if cached is not None:
            gc.gates.append(IRGate(cached, tuple(reversed(qubits)), op.name))
            touched.update(qubits)
            continue
        where = f"{shorten(op.name)} at position {pos} on qubits {shorten(qubits)}"
        touched.update(qubits)
        if op.name == "measure":
            measured.update(qubits)
            continue
        if isinstance(op, ControlFlowOp) or getattr(op, "condition", None) is not None:
            raise UnsupportedInstructionError(
                f"classically controlled instruction {where}: amplitudes need a unitary circuit"
            )
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
        if not isinstance(op, Gate) and op.name not in ("unitary",):
            raise UnsupportedInstructionError(
                f"non-unitary instruction {where}; supported: unitary gates, barrier, delay, "
                "final measure"
            )
        for value in getattr(op, "params", ()):
            if isinstance(value, ParameterExpression):
                try:
                    value = complex(value)
                except (TypeError, ValueError):
                    continue
            if isinstance(value, numbers.Number) and not np.isfinite(value):
                raise InvalidInputError(
                    f"instruction {where} has the parameter {value}; parameters must be finite "
                    "numbers (NaN or infinite angles leave the amplitude undefined)"
                )
        if len(qubits) > MAX_GATE_QUBITS:
            raise UnsupportedInstructionError(
                f"instruction {where} acts on {len(qubits)} qubits; gates on at most "
                f"{MAX_GATE_QUBITS} qubits are supported (a gate's matrix has 4^k entries)"
            )
        try:
            matrix = _composed_matrix(op)
            if matrix is None and hasattr(op, "to_matrix"):
                matrix = op.to_matrix()
        except Exception:  # noqa: BLE001 - some gates only define a decomposition
            matrix = None
        if matrix is None:
            try:
                matrix = Operator(op).data
            except Exception as exc:  # noqa: BLE001
                raise UnsupportedInstructionError(
                    f"instruction {where} has no matrix ({exc})"
                ) from None
        matrix = np.asarray(matrix, dtype=complex)
        if not np.isfinite(matrix).all():
            raise InvalidInputError(
                f"instruction {where} has NaN or infinite matrix entries; its parameters must "
                "be finite numbers"
            )
        # Qiskit's matrices are little-endian in qargs: reverse to big-endian.
        gc.append(matrix, tuple(reversed(qubits)), op.name)
        if key is not None:
            matrices[key] = gc.gates[-1].matrix
    return gc
