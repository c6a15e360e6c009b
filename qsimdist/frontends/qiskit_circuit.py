"""Qiskit ``QuantumCircuit`` -> :class:`GateCircuit`.

Every unitary instruction is taken through its matrix, so custom gates and
parametrised gates with bound parameters work. A gate without a matrix of its
own (one made by ``QuantumCircuit.to_gate()``, a controlled custom gate), a
gate wider than :data:`~qsimdist.frontends.circuit.MAX_GATE_QUBITS` qubits and
a composite instruction (``qc.append(sub_circuit, qubits)`` makes an
``Instruction``, not a ``Gate``) are expanded through their definitions,
recursively, with their bound parameters and global phases: a 20-qubit
composite gate becomes its gates, never a dense ``2^20 x 2^20`` matrix. An
operation with no definition of its own (a ``Clifford``, an
``AnnotatedOperation``, library gates whose circuit Qiskit leaves to its
synthesis plugins) goes through Qiskit's own synthesis
(:func:`expansion_of`). A ``PermutationGate`` is a relabelling of qubits: no
gate, no tensor; the later gates act on the permuted wires, and the wires are
renamed at the end so that qubit ``q`` of the result is ``qc.qubits[q]`` (every
qubit starts in ``|0>``, which a renaming leaves as it is).
Barriers and delays are skipped, and final measurements are ignored
(amplitudes are taken before them). A ``reset`` on a qubit that nothing has
touched yet is the identity (QASMBench files start with such resets) and is
skipped; a reset after use, or inside a definition, is not unitary. Anything
else that is not unitary raises :class:`UnsupportedInstructionError` naming
the instruction and its position.

Matrices of Qiskit's standard gates are cached per (gate class, parameters)
within one conversion, so a file of 10^5 ``cx``/``t``/``h`` gates converts
without 10^5 ``to_matrix`` calls. What each instruction is (its matrix, definition,
synthesis) is read by :mod:`qsimdist.frontends.qiskit_instructions`; expansions are
kept across conversions by :mod:`qsimdist.frontends.qiskit_expansions`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import threading

import numpy as np

from ..errors import InstructionPlace, InvalidInputError, UnsupportedInstructionError
from .circuit import MAX_GATE_QUBITS, ControlledGate, GateCircuit
from .circuit import Gate as IRGate
from .operator_gates import (
    OPERATOR_GATE_QUBITS,
    definition_is_operator,
    evolution_matrix,
    is_pauli_evolution,
)
from .qiskit_expansions import EXPANSIONS, PLACED_PER_EXPANSION, expansion_key
from .qiskit_instructions import (
    COMPACT_MAX_TARGETS,
    COMPACT_MIN_QUBITS,
    DENSE_GATE_QUBITS,
    MAX_DEFINITION_DEPTH,
    definition_of,
    definition_preferred,
    expansion_of,
    matrix_key,
    own_matrix,
    permutation_pattern,
    phase_value,
)

_SKIPPED = {"barrier", "delay"}


class _Conversion:
    """One conversion's state: the gate list, the qubits measured or touched so far, and the
    standard-gate matrix cache."""

    def __init__(self, gc: GateCircuit) -> None:
        self.gc = gc
        self.measured: set[int] = set()  # wires
        self.touched: set[int] = set()  # wires
        self.matrices: dict[tuple, np.ndarray] = {}
        self.wire = list(range(gc.n_qubits))  # qubit of the circuit -> wire holding it now
        self.permuted = False
        self.track = True  # mark multi-controlled gates (see compact_form)
        self.keys: dict[int, tuple] = {}  # id(instruction) -> (instruction, expansion key)
        #: ``(first gate, end, global phase added, ControlledGate)`` per multi-controlled
        #: gate: the gates ``first:end`` of ``gc.gates`` are its matrix or expansion
        self.marks: list[tuple[int, int, float, ControlledGate]] = []
        #: gates that state an exact operator but were applied through a definition that
        #: is not it (see :meth:`evolution`): ``{"gate", "qubits", "where", "why"}`` each
        self.by_definition: list[dict] = []

    def compact_form(self, inst, index: dict) -> ControlledGate | None:
        """The :class:`ControlledGate` a Qiskit multi-controlled gate (``MCXGate``,
        ``MCPhaseGate``, ``C3XGate``, ...) is in the statevector route, on the wires its
        qubits hold now; ``None`` for any other instruction, a narrow one (below
        :data:`COMPACT_MIN_QUBITS`), one whose base gate is wider than
        :data:`COMPACT_MAX_TARGETS` or states no matrix, or one that follows a measurement
        (the conversion refuses those)."""
        from qiskit.circuit import ControlledGate as QiskitControlledGate

        op = inst.operation
        if (not isinstance(op, QiskitControlledGate) or inst.clbits
                or op.num_qubits < COMPACT_MIN_QUBITS or op.num_ctrl_qubits < 2
                or getattr(op, "condition", None) is not None):
            return None
        base = op.base_gate
        if base is None or base.num_qubits > COMPACT_MAX_TARGETS or \
                base.num_qubits + op.num_ctrl_qubits != op.num_qubits:
            return None
        key = matrix_key(base)
        matrix = self.matrices.get(key) if key is not None else None
        if matrix is None:
            matrix = own_matrix(base)
            if matrix is None or not np.isfinite(matrix).all():
                return None
            if key is not None:
                self.matrices[key] = matrix
        logical = [index[q] for q in inst.qubits]
        qubits = [self.wire[q] for q in logical] if self.permuted else logical
        if self.measured.intersection(qubits):
            return None
        c = op.num_ctrl_qubits
        state = int(op.ctrl_state)
        # Qiskit's base matrix is little-endian over its qubits: reversed, big-endian
        return ControlledGate(matrix, (*qubits[:c], *reversed(qubits[c:])), c,
                              tuple((state >> i) & 1 for i in range(c)), op.name)

    def compact_circuit(self) -> GateCircuit | None:
        """``gc`` with each outermost marked run of gates replaced by its
        :class:`ControlledGate` and the phases those runs added taken back; ``None``
        where nothing was marked."""
        gc = self.gc
        kept, end = [], -1
        for mark in sorted(self.marks, key=lambda m: (m[0], -m[1])):
            if mark[0] >= end and mark[1] > mark[0]:  # inner marks lie inside a kept one
                kept.append(mark)
                end = mark[1]
        if not kept:
            return None
        gates: list = []
        at, phase = 0, gc.global_phase
        for first, stop, added, cg in kept:
            gates.extend(gc.gates[at:first])
            gates.append(cg)
            at, phase = stop, phase - added
        gates.extend(gc.gates[at:])
        return GateCircuit(gc.n_qubits, gates, phase, gc.name)

    def add(self, circuit, qmap: list[int], inside: str = "", depth: int = 0) -> None:
        """Append ``circuit``'s instructions; its qubit ``i`` is ``qmap[i]`` of the top-level
        circuit (on wire ``self.wire[qmap[i]]`` of the result until a permutation moves it).

        ``inside`` names the instructions whose definition ``circuit`` is (for messages).
        A multi-controlled gate (:meth:`compact_form`) is appended as the conversion
        makes it (its matrix or expansion) and marked, so that :meth:`compact_circuit`
        can put one :class:`ControlledGate` in its place for the statevector route.
        """
        index = {q: qmap[i] for i, q in enumerate(circuit.qubits)}
        gc = self.gc
        for pos, inst in enumerate(circuit.data):
            compact = self.compact_form(inst, index) if self.track else None
            start, phase = len(gc.gates), gc.global_phase
            self.add_one(inst, pos, index, inside, depth)
            if compact is not None:
                self.marks.append((start, len(gc.gates), gc.global_phase - phase, compact))

    def add_one(self, inst, pos: int, index: dict, inside: str, depth: int) -> None:
        """Append one instruction (see :meth:`add`)."""
        from qiskit.circuit import ControlFlowOp, Gate, ParameterExpression

        gc, measured, touched, matrices = self.gc, self.measured, self.touched, self.matrices
        op = inst.operation
        logical = [index[q] for q in inst.qubits]
        qubits = [self.wire[q] for q in logical] if self.permuted else logical
        if op.name in _SKIPPED:
            return
        if op.name == "reset" and not inside and not touched.intersection(qubits) and (
                not inst.clbits and getattr(op, "condition", None) is None):
            return  # a fresh qubit is already |0>: the reset is the identity
        key = matrix_key(op) if not inst.clbits and not measured.intersection(qubits) else None
        cached = matrices.get(key) if key is not None else None
        if cached is not None:
            gc.gates.append(IRGate(cached, tuple(reversed(qubits)), op.name))
            touched.update(qubits)
            return
        where = InstructionPlace(op.name, pos, logical, inside)
        if op.name == "measure":
            touched.update(qubits)
            measured.update(qubits)
            return
        if isinstance(op, ControlFlowOp) or getattr(op, "condition", None) is not None:
            raise UnsupportedInstructionError(
                f"classically controlled instruction {where}: amplitudes need a unitary "
                "circuit"
            )
        pattern = permutation_pattern(op)
        if pattern is not None and not inst.clbits:
            self.permute(logical, pattern, where)
            return
        is_gate = isinstance(op, Gate) or op.name == "unitary"
        if op.name != "reset" and not is_gate:
            # a composite instruction (qc.append(sub_circuit, ...)): its definition's
            # instructions are checked one by one, as if written here
            definition, why = expansion_of(op, where)
            if definition is None:
                raise UnsupportedInstructionError(
                    f"non-unitary instruction {where} has no definition{why}; supported: "
                    "unitary gates, instructions defined by them or synthesized by Qiskit, "
                    "barrier, delay, final measure"
                )
            self.expand(definition, logical, where, depth, op)
            return
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
        if is_pauli_evolution(op) and self.evolution(op, qubits, logical, where):
            return
        wide = len(qubits) > MAX_GATE_QUBITS
        if not wide and len(qubits) > DENSE_GATE_QUBITS and definition_preferred(op):
            # a library gate on many qubits (QFTGate, MCXGate): its few gates fuse and
            # run faster than its 4^k-entry matrix is even built
            definition = definition_of(op, where)
            if definition is not None:
                self.expand(definition, logical, where, depth, op)
                return
        matrix = None if wide else own_matrix(op)
        if matrix is None:
            definition, why = (None, "") if op.name == "unitary" else expansion_of(op, where)
            if definition is not None:
                self.expand(definition, logical, where, depth, op)
                return
            if wide:
                raise UnsupportedInstructionError(
                    f"instruction {where} acts on {len(qubits)} qubits and has no "
                    f"definition{why}; a matrix is used for gates on at most "
                    f"{MAX_GATE_QUBITS} qubits (it has 4^k entries), wider gates are "
                    "expanded through their definitions or Qiskit's synthesis"
                )
            raise UnsupportedInstructionError(
                f"instruction {where} has no matrix and no definition{why}"
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

    def evolution(self, op, qubits: list[int], logical: list[int], where: str) -> bool:
        """A ``PauliEvolutionGate``: ``True`` where it was appended as its operator
        ``e^{-iHt}`` (:mod:`~qsimdist.frontends.operator_gates`); ``False`` where its
        definition is to be followed, either because that definition is the operator
        exactly or, noted in :attr:`by_definition`, because the gate is wider than
        :data:`~qsimdist.frontends.operator_gates.OPERATOR_GATE_QUBITS` or its operator
        cannot be built."""
        if definition_is_operator(op):
            return False
        why = f"wider than {OPERATOR_GATE_QUBITS} qubits"
        if len(qubits) <= OPERATOR_GATE_QUBITS:
            matrix = evolution_matrix(op)
            if matrix is not None:
                # Qiskit's matrices are little-endian in qargs: reverse to big-endian
                self.gc.gates.append(IRGate(matrix, tuple(reversed(qubits)), op.name))
                return True
            why = "its operator is not a numeric Hermitian Pauli sum, or its time not a number"
        self.by_definition.append({"gate": op.name, "qubits": len(qubits), "where": str(where),
                                   "why": why})
        return False

    def permute(self, logical: list[int], pattern: list[int], where: str) -> None:
        """A ``PermutationGate`` on the circuit's qubits ``logical``: position ``k`` receives
        the state of ``logical[pattern[k]]``; nothing is appended, the wires are relabelled."""
        old = [self.wire[q] for q in logical]
        moved = [k for k, p in enumerate(pattern) if p != k]
        if self.measured.intersection(old[k] for k in moved):
            raise UnsupportedInstructionError(
                f"instruction {where} follows a measurement of the same qubit (mid-circuit "
                "measurement); only final measurements are allowed"
            )
        for k in moved:
            self.wire[logical[k]] = old[pattern[k]]
        self.permuted = self.permuted or bool(moved)

    def relabel(self, *circuits: GateCircuit) -> None:
        """Rename the wires so that the circuit's qubit ``q`` ends on wire ``q`` (in ``gc``
        and in ``circuits``, made from it)."""
        if not self.permuted or self.wire == list(range(len(self.wire))):
            return
        name = [0] * len(self.wire)
        for q, w in enumerate(self.wire):
            name[w] = q
        for circuit in (self.gc, *circuits):
            circuit.gates = [dataclasses.replace(g, qubits=tuple(name[w] for w in g.qubits))
                             for g in circuit.gates]

    def expand(self, definition, qubits: list[int], where: str, depth: int,
               op=None) -> None:
        """Append a definition on the circuit's qubits ``qubits`` and add its global phase.

        With ``op`` (the instruction it defines) whose :func:`expansion_key` exists, the
        expansion is taken from, or made once into, :data:`EXPANSIONS`."""
        key = None
        if op is not None and depth < MAX_DEFINITION_DEPTH:
            # one instruction object (a Grover operator repeated) is keyed once per conversion
            found = self.keys.get(id(op))
            if found is None or found[0] is not op:
                found = self.keys[id(op)] = (op, expansion_key(op))
            key = found[1]
        if key is not None and self.splice(key, definition, qubits, where, depth):
            return
        self.expand_here(definition, qubits, where, depth)

    def splice(self, key: tuple, definition, qubits: list[int], where: str,
               depth: int) -> bool:
        """Append the cached expansion of ``key`` (made now on a fresh conversion where it
        is missing) on the circuit's qubits ``qubits``; ``False`` where it cannot be used
        here (the definition measures, fails, or a qubit it uses was measured): the caller
        expands in place, with the messages naming the circuit's qubits."""
        wires = [self.wire[q] for q in qubits] if self.permuted else list(qubits)
        if self.measured.intersection(wires):
            return False
        found = EXPANSIONS.get(key)
        if found is None:
            sub = _Conversion(GateCircuit(len(qubits)))
            sub.matrices, sub.keys = self.matrices, self.keys
            sub.by_definition = self.by_definition
            try:
                sub.expand_here(definition, list(range(len(qubits))), where, depth)
            except Exception:  # noqa: BLE001 - expanded again in place, to raise there
                return False
            if sub.measured:
                return False
            found = EXPANSIONS.put(key, sub.gc.gates, sub.gc.global_phase,
                                   sub.wire if sub.permuted else None, sub.marks)
        else:
            EXPANSIONS.reused += 1
        gates, phase, wire, marks, placed = found
        offset = len(self.gc.gates)
        # the expansion on these wires, made once (a walk or a search repeats one gate on the
        # same wires many times; the gates are never changed in place, so they are shared)
        here = placed.get(tuple(wires))
        if here is None:
            here = (tuple(IRGate(g.matrix, tuple(wires[w] for w in g.qubits), g.name)
                          for g in gates),
                    tuple((first, stop, added, dataclasses.replace(
                        cg, qubits=tuple(wires[w] for w in cg.qubits)))
                        for first, stop, added, cg in marks))
            if len(placed) < PLACED_PER_EXPANSION:
                placed[tuple(wires)] = here
        self.gc.gates.extend(here[0])
        self.marks.extend((offset + first, offset + stop, added, cg)
                          for first, stop, added, cg in here[1])
        self.gc.global_phase += phase
        self.touched.update(wires)
        if wire is not None:  # a permutation inside: local qubit i ends on local wire wire[i]
            for i, q in enumerate(qubits):
                self.wire[q] = wires[wire[i]]
            self.permuted = True
        return True

    def expand_here(self, definition, qubits: list[int], where: str, depth: int) -> None:
        """Append a definition's instructions one by one on the circuit's qubits."""
        if depth >= MAX_DEFINITION_DEPTH:
            raise UnsupportedInstructionError(
                f"instruction {where} nests definitions more than {MAX_DEFINITION_DEPTH} deep"
            )
        if definition.num_qubits != len(qubits):
            raise UnsupportedInstructionError(
                f"instruction {where} has a definition on {definition.num_qubits} qubits, "
                f"not {len(qubits)}"
            )
        self.gc.global_phase += phase_value(definition.global_phase, where)
        self.add(definition, qubits, f" inside {where}", depth + 1)


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
    conversion = _Conversion(gc)
    conversion.add(qc, list(range(qc.num_qubits)))
    compact = conversion.compact_circuit()
    conversion.relabel(*([compact] if compact is not None else []))
    gc.compact = compact
    notes = {note["where"]: note for note in conversion.by_definition}
    gc.by_definition = list(notes.values())
    for recorder in getattr(_RECORDERS, "active", ()):
        for where, note in notes.items():
            recorder.setdefault(where, note)
    return gc


_RECORDERS = threading.local()


@contextlib.contextmanager
def recording_definitions():
    """Collect, from every :func:`from_qiskit` call in this thread inside the block, the
    gates applied through a definition that is not their exact operator (a
    ``PauliEvolutionGate`` wider than
    :data:`~qsimdist.frontends.operator_gates.OPERATOR_GATE_QUBITS` qubits whose terms do
    not commute): yields a list, filled on exit, of ``{"gate", "qubits", "where", "why"}``
    dicts, one per instruction. The Qiskit primitives put it in each pub's metadata under
    ``"gates_by_definition"``."""
    found: dict[str, dict] = {}
    out: list[dict] = []
    active = getattr(_RECORDERS, "active", None)
    if active is None:
        active = _RECORDERS.active = []
    active.append(found)
    try:
        yield out
    finally:
        del active[next(i for i, r in enumerate(active) if r is found)]
        out.extend(found.values())
