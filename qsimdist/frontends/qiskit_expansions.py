"""Expanded composite and library gates, kept per process: :class:`ExpansionCache` and
:data:`EXPANSIONS`, keyed by :func:`expansion_key` (a hashable key fixing what an
instruction expands into, read from definitions already built). The conversion
(:mod:`qsimdist.frontends.qiskit_circuit`) splices a cached expansion where it meets the
same instruction again."""

from __future__ import annotations

import numbers

import numpy as np

from .qiskit_instructions import MAX_DEFINITION_DEPTH


class ExpansionCache:
    """Expanded composite and library gates (their IR gates on local qubits ``0..k-1``,
    the definition's global phase, and where a permutation inside leaves each qubit),
    by :func:`expansion_key`, least recently used dropped past :attr:`max_gates` gates.

    ``built`` and ``reused`` count the expansions made and taken from here."""

    def __init__(self, max_gates: int = 2_000_000) -> None:
        from collections import OrderedDict

        self.max_gates = max_gates
        self.entries: OrderedDict[tuple, tuple] = OrderedDict()
        self.gates = 0
        self.built = 0
        self.reused = 0

    def get(self, key: tuple) -> tuple | None:
        found = self.entries.get(key)
        if found is not None:
            self.entries.move_to_end(key)
        return found

    def put(self, key: tuple, gates: list, phase: float, wire: list[int] | None,
            marks: list | tuple = ()) -> tuple:
        self.built += 1
        entry = (tuple(gates), phase, None if wire is None else list(wire), tuple(marks), {})
        if len(gates) <= self.max_gates:
            self.entries[key] = entry
            self.gates += len(gates)
            while self.gates > self.max_gates:
                _, (old, *_) = self.entries.popitem(last=False)
                self.gates -= len(old)
        return entry

    def clear(self) -> None:
        self.entries.clear()
        self.gates = self.built = self.reused = 0


#: placements (the expansion's gates on given wires) kept per cached expansion
PLACED_PER_EXPANSION = 16

#: the process's cache of expansions (see :func:`~qsimdist.frontends.qiskit_circuit.from_qiskit`)
EXPANSIONS = ExpansionCache()

#: library classes whose definition is fixed by their class, name, width, parameters and
#: control state (nothing else given to their constructors changes it)
_KEYED_CLASSES = frozenset({
    "QFTGate", "MCXGate", "MCXGrayCode", "MCXRecursive", "MCXVChain", "C3XGate",
    "C3SXGate", "C4XGate", "RCCXGate", "RC3XGate", "MCPhaseGate", "MCU1Gate",
    "PermutationGate", "UnitaryGate", "DiagonalGate", "FullAdderGate", "HalfAdderGate",
    "ModularAdderGate", "MultiplierGate", "ControlledGate",
})
_PARAM_BYTES = 1 << 16


def _param_key(value):
    if isinstance(value, numbers.Number):
        return complex(value)
    if isinstance(value, np.ndarray) and value.nbytes <= _PARAM_BYTES:
        return (value.shape, str(value.dtype), value.tobytes())
    if isinstance(value, (list, tuple)) and len(value) <= 4096:
        inner = [_param_key(v) for v in value]
        return None if any(v is None for v in inner) else tuple(inner)
    return None


def expansion_key(op, depth: int = 0) -> tuple | None:
    """A hashable key fixing what ``op`` expands into, or ``None`` where there is none to
    trust: a standard gate or a listed library gate (:data:`_KEYED_CLASSES`) by its
    parameters; a gate or instruction made from a circuit (``to_gate``, ``append`` of a
    circuit, an OpenQASM ``gate``) by its definition's instructions, recursively; a
    controlled gate by its base gate's key as well. Cheap next to the expansion: it reads
    definitions already built and builds none."""
    from qiskit.circuit import Gate, Instruction

    if depth > MAX_DEFINITION_DEPTH or getattr(op, "condition", None) is not None:
        return None
    params = tuple(_param_key(v) for v in getattr(op, "params", ()))
    if any(v is None for v in params):
        return None
    standard = getattr(op, "_standard_gate", None)
    if standard is not None:
        return ("standard", standard, op.name, params)
    cls = type(op)
    head = (cls.__name__, op.name, op.num_qubits, op.num_clbits, params)
    if cls.__name__ in _KEYED_CLASSES and cls.__module__.startswith("qiskit."):
        base = getattr(op, "base_gate", None)
        if base is None:
            return ("library", *head)
        base_key = expansion_key(base, depth + 1)
        if base_key is None:
            return None
        return ("controlled", *head, op.num_ctrl_qubits, op.ctrl_state, base_key)
    if cls in (Gate, Instruction) or cls.__module__.startswith("qiskit.qasm2"):
        definition = getattr(op, "_definition", None)
        if definition is None:
            return None
        body = definition_fingerprint(definition, depth + 1)
        return None if body is None else ("defined", *head, body)
    return None


def definition_fingerprint(circuit, depth: int = 0) -> tuple | None:
    """The instructions of a definition (each one's :func:`expansion_key`, qubit and clbit
    positions) and its global phase; ``None`` where one has no key."""
    try:
        phase = float(circuit.global_phase)
    except (TypeError, ValueError):
        return None
    qubit = {q: i for i, q in enumerate(circuit.qubits)}
    clbit = {c: i for i, c in enumerate(circuit.clbits)}
    items = []
    for inst in circuit.data:
        key = expansion_key(inst.operation, depth)
        if key is None:
            return None
        items.append((key, tuple(qubit[q] for q in inst.qubits),
                      tuple(clbit[c] for c in inst.clbits)))
    return (phase, circuit.num_qubits, tuple(items))
