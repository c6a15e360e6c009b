"""What one Qiskit instruction is to the conversion: the key that fixes its matrix, the
matrix it states (or composes from an OpenQASM 2 definition), its definition or Qiskit's
synthesis of it, a permutation's pattern, and the width rules that decide whether a
gate is taken whole or through its definition. Qiskit is imported only inside functions.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import InvalidInputError, UnsupportedInstructionError, shorten
from .operator_gates import OPERATOR_GATE_QUBITS, is_pauli_evolution

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


def matrix_key(op) -> tuple | None:
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


def composed_matrix(op, depth: int = 0) -> np.ndarray | None:
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
        sub = composed_matrix(sub_op, depth + 1)
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
    """``op.definition`` (a ``QuantumCircuit``), or ``None`` when the instruction has none
    (an operation such as a ``Clifford`` has no ``definition`` attribute at all).

    Raises:
        UnsupportedInstructionError: building the definition failed (naming ``where``).
    """
    if not hasattr(type(op), "definition"):
        return None
    try:
        definition = op.definition
    except Exception as exc:  # noqa: BLE001 - a synthesis that fails for these parameters
        raise UnsupportedInstructionError(
            f"instruction {where} has no usable definition ({shorten(str(exc), 200)})"
        ) from None
    if definition is None or not hasattr(definition, "data"):
        return None
    return definition


#: what Qiskit's synthesis may leave in the circuit it makes for an operation without a
#: definition: the standard gates, matrices, and what the conversion handles itself
_SYNTHESIS_KEEPS = ("unitary", "measure", "reset", "barrier", "delay")


def synthesized(op) -> tuple[object | None, str]:
    """``(circuit, "")``: Qiskit's own synthesis of ``op`` (``HighLevelSynthesis`` into the
    standard gates, on ``op``'s own qubits, none assumed ``|0>``, no ancilla), or
    ``(None, why)`` where Qiskit cannot synthesize it so."""
    from qiskit import QuantumCircuit
    from qiskit.circuit.library.standard_gates import get_standard_gate_name_mapping
    from qiskit.transpiler.passes import HighLevelSynthesis

    try:
        qc = QuantumCircuit(op.num_qubits, op.num_clbits)
        qc.append(op, qc.qubits, qc.clbits)
        basis = sorted({*get_standard_gate_name_mapping(), *_SYNTHESIS_KEEPS})
        out = HighLevelSynthesis(basis_gates=basis, qubits_initially_zero=False)(qc)
    except Exception as exc:  # noqa: BLE001 - whatever Qiskit's synthesis refuses
        return None, shorten(" ".join(str(exc).split()), 200)
    if out.num_qubits != op.num_qubits or any(i.operation is op for i in out.data):
        return None, "the synthesis needs more qubits or leaves the operation as it is"
    return out, ""


def expansion_of(op, where: str) -> tuple[object | None, str]:
    """``(circuit, "")``: ``op``'s definition or, where it has none, Qiskit's synthesis of
    it (:func:`synthesized`); ``(None, note)`` where neither exists, ``note`` saying why
    for the caller's message.

    Raises:
        UnsupportedInstructionError: building the definition failed (naming ``where``).
    """
    definition = definition_of(op, where)
    if definition is not None:
        return definition, ""
    circuit, why = synthesized(op)
    if circuit is None:
        return None, f" (and Qiskit cannot synthesize it: {why})"
    return circuit, ""


def permutation_pattern(op) -> list[int] | None:
    """The pattern of a ``PermutationGate`` (position ``k`` receives qubit ``pattern[k]``),
    or ``None`` for any other operation."""
    if op.name != "permutation" or not hasattr(op, "pattern"):
        return None
    from qiskit.circuit.library import PermutationGate

    if not isinstance(op, PermutationGate):
        return None
    return [int(p) for p in op.pattern]


#: gates on more qubits than this are expanded through their definitions even where they
#: state a matrix (a 12-qubit ``QFTGate``'s matrix has 2^24 entries, its definition 84
#: gates); matrix gates (``UnitaryGate`` and gates controlling one), whose definitions
#: are costly syntheses, keep their matrices up to ``MAX_GATE_QUBITS``
DENSE_GATE_QUBITS = 6
#: multi-controlled gates on at least this many qubits also get a compact form for the
#: statevector route (:class:`~qsimdist.frontends.circuit.ControlledGate`: one pass over
#: the amplitudes their controls select); narrower ones fuse with their neighbours
COMPACT_MIN_QUBITS = 5
#: ... whose base gate acts on at most this many qubits
COMPACT_MAX_TARGETS = 2


def states_operator(op) -> bool:
    """Whether the conversion may take ``op`` whole, as an operator of its own, rather than
    through its definition: a gate stating its matrix (``__array__``), or a
    ``PauliEvolutionGate`` on at most
    :data:`~qsimdist.frontends.operator_gates.OPERATOR_GATE_QUBITS` qubits (its operator
    ``e^{-iHt}``, where the definition is a product formula). The lowering of dynamic
    circuits asks this before controlling a gate by a classical condition: such a gate is
    controlled whole (``gate.control()``), any other through its definition's gates."""
    if hasattr(type(op), "__array__"):
        return True
    return is_pauli_evolution(op) and op.num_qubits <= OPERATOR_GATE_QUBITS


def definition_preferred(op) -> bool:
    """Whether a wide gate is better expanded than taken as its matrix: anything but a
    matrix gate, a Hamiltonian gate or a gate controlling one."""
    base = getattr(op, "base_gate", None)
    names = {op.name, getattr(base, "name", None)}
    return not names.intersection({"unitary", "hamiltonian"})


def own_matrix(op) -> np.ndarray | None:
    """The matrix an instruction states itself (standard, OpenQASM 2 and matrix gates), or
    ``None`` where it would have to be built from the definition."""
    try:
        matrix = composed_matrix(op)
        if matrix is None and hasattr(type(op), "__array__"):
            matrix = op.to_matrix()
    except Exception:  # noqa: BLE001 - some gates only define a decomposition
        return None
    return None if matrix is None else np.asarray(matrix, dtype=complex)


def phase_value(phase, where: str) -> float:
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
