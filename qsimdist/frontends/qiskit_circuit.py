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
            matrix = op.to_matrix() if hasattr(op, "to_matrix") else None
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
