"""Parametrised Qiskit circuits as templates: converted once, bound per parameter set.

A variational algorithm sends one circuit with many parameter sets. Binding the
Qiskit circuit and converting it again for every set
(:func:`~qsimdist.frontends.qiskit_circuit.from_qiskit`) costs about a millisecond
even for two qubits; :func:`parametric_from_qiskit` converts the circuit once into a
:class:`ParametricCircuit`, whose gates are fixed except for its *slots*, and a
parameter set only fills in the slots' matrices:

- a parametrised standard gate (``rx``, ``rzz``, ``u``, ``cp``, ...) is one slot, its
  matrix for many parameter sets at once a trigonometric polynomial of its angles
  (:class:`~qsimdist.frontends.gate_models.MatrixModel`: fitted once per gate class
  from Qiskit's own matrices, then checked at other angles; where the fit is not
  exact, Qiskit's ``to_matrix`` per set);
- any other parametrised instruction (a ``PauliEvolutionGate`` whose time is a
  parameter, a custom gate) is a *piece*: bound and converted alone per set, its
  gates filling in its slot. Where a set gives the piece another gate structure than
  the template's (a definition that drops a gate at some angle, say), that set is not
  taken from the template: :meth:`ParametricCircuit.bind` returns ``None`` for it and
  the caller converts the bound circuit whole;
- the fixed instructions between slots are converted as they are, in runs
  (:func:`from_qiskit` on each run); a plain ``Gate`` or ``Instruction`` made from a
  circuit (``to_gate()``, a blueprint library circuit) is replaced by its definition
  first, as the conversion would expand it.

Gate parameters are read off the parameter columns as Qiskit binds them: a bare
parameter is its column, an affine expression (``2*a - b``) a linear combination of
columns, anything else (``sin(a)``, ``(pi - x)*(pi - y)``) evaluated by Qiskit per set.

The template is checked once, at the first parameter set, against the whole
conversion of the bound circuit (gates, qubits, matrices to 1e-12, global phase), so a
case this module reads differently from :func:`from_qiskit` is never taken from it.
Circuits with resets, mid-circuit measurement, control flow or permutation gates are
not made into templates (``None``: convert per set).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .circuit import ControlledGate, Gate, GateCircuit
from .gate_models import (
    TEMPLATE_TOLERANCE,
    MatrixModel,
    ParameterReader,
    matrix_model,
    numeric_matrix,
)

#: plain classes whose instances are circuits made into gates (expanded by definition)
_PLAIN_CLASSES = ("Gate", "Instruction")
_SKIPPED = ("barrier", "delay")


# ------------------------------------------------------------------ the template
@dataclass
class _Slot:
    """A parametrised standard gate: gate ``index`` of the template."""

    index: int
    op: object
    readers: list[ParameterReader]
    model: MatrixModel | None


@dataclass
class _Piece:
    """Any other parametrised instruction, converted alone per parameter set into the
    gates ``start:stop`` of the template (``circuit``: it alone on its qubits)."""

    start: int
    stop: int
    circuit: object
    qubits: tuple[int, ...]
    columns: dict
    phase: float = 0.0


@dataclass
class BoundGates:
    """The template's gates for many parameter sets.

    Attributes:
        matrices: per gate of the template, its matrix: ``(d, d)`` where fixed,
            ``(sets, d, d)`` where a slot's.
        phases: the global phase per set.
        ok: per set, whether it is taken from the template (``False``: a piece changed
            its structure, or a value is not finite; convert that set whole).
    """

    matrices: list[np.ndarray]
    phases: np.ndarray
    ok: np.ndarray


@dataclass
class ParametricCircuit:
    """A circuit converted once with its parameters kept (see the module docstring).

    Attributes:
        n_qubits: the circuit's qubits.
        gates: the template's gates; a slot's or a piece's hold the first parameter
            set's matrices (their qubits are those of every set).
        parameters: the Qiskit parameters, in the order of the columns of the rows
            :meth:`rows` reads from a ``BindingsArray``.
        diagonal: per gate, whether it is diagonal for every parameter set.
        name: the circuit's name.
    """

    n_qubits: int
    gates: list[Gate]
    parameters: tuple
    diagonal: list[bool]
    name: str = "circuit"
    fixed_phase: float = 0.0
    phase_readers: list[ParameterReader] = field(default_factory=list)
    slots: list[_Slot] = field(default_factory=list)
    pieces: list[_Piece] = field(default_factory=list)
    #: the compact (statevector) form: gate indices of ``gates`` or ControlledGates
    compact_layout: list | None = None
    compact_phase: float = 0.0
    #: notes of gates applied by definition (:attr:`GateCircuit.by_definition`)
    by_definition: list = field(default_factory=list)
    #: what users of the template work out about it once (the engine's batched plans)
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def parametrised(self) -> bool:
        """Whether any gate or the phase depends on the parameters."""
        return bool(self.slots or self.pieces or self.phase_readers)

    def rows(self, bindings) -> np.ndarray:
        """The parameter sets of a Qiskit ``BindingsArray`` as rows (flat over its shape,
        C order) of this template's parameter columns."""
        size = int(np.prod(bindings.shape, dtype=int))
        if not self.parameters:
            return np.zeros((size, 0))
        return np.asarray(bindings.as_array(list(self.parameters)),
                          dtype=float).reshape(size, len(self.parameters))

    def bound_gates(self, rows: np.ndarray) -> BoundGates:
        """Every gate's matrix (slots' for every row at once) and each row's phase."""
        rows = np.asarray(rows, dtype=float).reshape(len(rows), len(self.parameters))
        b = len(rows)
        ok = np.isfinite(rows).all(axis=1) if rows.size else np.ones(b, dtype=bool)
        safe = np.where(np.isfinite(rows), rows, 0.0)
        matrices: list[np.ndarray] = [g.matrix for g in self.gates]
        for group in self._slot_groups():
            # the slots of one gate class: their values side by side, one model call
            columns = self._bare_columns(group)
            if columns is not None:  # every parameter a bare column: one gather
                values = safe[:, columns]
            else:
                values = np.stack([np.stack([r(safe) for r in slot.readers], axis=1)
                                   for slot in group], axis=1)  # (sets, slots, parameters)
            good = np.isfinite(values).all(axis=(1, 2))
            ok &= good
            values = np.where(np.isfinite(values), values, 0.0)
            model = group[0].model
            if model is not None:
                flat = model(values.reshape(-1, values.shape[-1]))
                out = flat.reshape(b, len(group), model.dim, model.dim)
                for j, slot in enumerate(group):
                    matrices[slot.index] = out[:, j]
            else:
                for j, slot in enumerate(group):
                    matrices[slot.index] = np.stack(
                        [numeric_matrix(slot.op, v) for v in values[:, j]])
        phases = np.full(b, self.fixed_phase)
        for reader in self.phase_readers:
            phases = phases + reader(safe)
        ok &= np.isfinite(phases)
        for piece in self.pieces:
            self._fill_piece(piece, safe, matrices, phases, ok)
        return BoundGates(matrices, phases, ok)

    def _bare_columns(self, group: list[_Slot]) -> np.ndarray | None:
        """``(slots, parameters)`` column indices where every parameter of the group's
        slots is a bare parameter (``None`` otherwise)."""
        key = ("bare", id(group[0]))
        if key not in self.memo:
            bare = all(r.kind == "affine" and len(r.columns) == 1 and r.offset == 0.0
                       and r.coefficients[0] == 1.0 for slot in group for r in slot.readers)
            self.memo[key] = np.array([[r.columns[0] for r in slot.readers] for slot in group],
                                      dtype=np.intp) if bare else None
        return self.memo[key]

    def _slot_groups(self) -> list[list[_Slot]]:
        """The slots grouped by their :class:`MatrixModel` (each slot without one alone)."""
        groups = self.memo.get("slot_groups")
        if groups is None:
            by_model: dict[int, list[_Slot]] = {}
            groups = []
            for slot in self.slots:
                if slot.model is None:
                    groups.append([slot])
                else:
                    by_model.setdefault(id(slot.model), []).append(slot)
            groups.extend(by_model.values())
            self.memo["slot_groups"] = groups
        return groups

    def _fill_piece(self, piece: _Piece, rows: np.ndarray, matrices: list, phases: np.ndarray,
                    ok: np.ndarray) -> None:
        from .qiskit_circuit import from_qiskit

        width = piece.stop - piece.start
        stacked = [np.empty((len(rows),) + self.gates[k].matrix.shape, dtype=complex)
                   for k in range(piece.start, piece.stop)]
        for i, row in enumerate(rows):
            gc = None
            if ok[i]:
                try:
                    bound = piece.circuit.assign_parameters(
                        {p: float(row[c]) for p, c in piece.columns.items()})
                    gc = from_qiskit(bound)
                except Exception:  # noqa: BLE001 - converted whole, to raise there
                    gc = None
            if gc is None or gc.compact is not None or len(gc.gates) != width or any(
                    tuple(piece.qubits[q] for q in g.qubits) != self.gates[k].qubits
                    for k, g in zip(range(piece.start, piece.stop), gc.gates)):
                ok[i] = False  # another structure at this set: converted whole
                for s in stacked:
                    s[i] = np.eye(s.shape[-1])
                continue
            for s, g in zip(stacked, gc.gates):
                s[i] = g.matrix
            phases[i] += gc.global_phase
        for k, s in zip(range(piece.start, piece.stop), stacked):
            matrices[k] = s

    def bind(self, row: np.ndarray) -> GateCircuit | None:
        """The :class:`GateCircuit` of one parameter set (``None``: that set is not taken
        from the template; convert the bound circuit whole)."""
        bound = self.bound_gates(np.asarray(row, dtype=float).reshape(1, -1))
        return self.circuit_of(bound, 0)

    def circuit_of(self, bound: BoundGates, i: int) -> GateCircuit | None:
        """Row ``i`` of ``bound`` as a :class:`GateCircuit` (``None`` where not ``ok``)."""
        if not bound.ok[i]:
            return None
        gates = [g if m.ndim == 2 else Gate(m[i], g.qubits, g.name)
                 for g, m in zip(self.gates, bound.matrices)]
        phase = float(bound.phases[i])
        gc = GateCircuit(self.n_qubits, gates, phase, self.name)
        if self.compact_layout is not None:
            compact = [gates[x] if isinstance(x, int) else x for x in self.compact_layout]
            gc.compact = GateCircuit(self.n_qubits, compact, phase + self.compact_phase,
                                     self.name)
        if self.by_definition and hasattr(gc, "by_definition"):
            gc.by_definition = list(self.by_definition)
        return gc

    @classmethod
    def fixed(cls, gc: GateCircuit) -> ParametricCircuit:
        """A circuit without parameters as a template (one parameter set, no columns)."""
        from .fusion import diagonal_flags

        layout = None
        compact_phase = 0.0
        if gc.compact is not None:
            index = {id(g): k for k, g in enumerate(gc.gates)}
            layout = [index.get(id(g), g) for g in gc.compact.gates]
            compact_phase = gc.compact.global_phase - gc.global_phase
        return cls(gc.n_qubits, list(gc.gates), (), diagonal_flags(gc), gc.name,
                   gc.global_phase, compact_layout=layout, compact_phase=compact_phase,
                   by_definition=list(getattr(gc, "by_definition", []) or []))


def parametric_from_qiskit(qc, probe: np.ndarray | None = None) -> ParametricCircuit | None:
    """``qc`` (a Qiskit circuit with parameters) as a :class:`ParametricCircuit`, or
    ``None`` where it must be converted per parameter set (see the module docstring).

    ``probe``: one parameter set (a row over ``qc.parameters`` in their order) the
    template is checked at against the whole conversion; default ones of 0.1, 0.2, ...
    """
    from .qiskit_circuit import from_qiskit

    try:
        template = _Builder(qc).build()
    except _NoTemplate:
        return None
    if template is None:
        return None
    params = list(qc.parameters)
    if probe is None:
        probe = 0.1 * np.arange(1, len(params) + 1)
    probe = np.asarray(probe, dtype=float).reshape(len(params))
    mine = template.bind(probe)
    if mine is None:
        return None
    try:
        whole = from_qiskit(qc.assign_parameters(dict(zip(params, probe.tolist()))))
    except Exception:  # noqa: BLE001 - the per-set conversion raises it, with its message
        return None
    return template if same_circuit(mine, whole) else None


def same_circuit(a: GateCircuit, b: GateCircuit, atol: float = TEMPLATE_TOLERANCE) -> bool:
    """Whether two conversions hold the same gates (qubits, matrices to ``atol``), global
    phase and compact form."""
    if a.n_qubits != b.n_qubits or len(a.gates) != len(b.gates):
        return False
    if abs(np.exp(1j * a.global_phase) - np.exp(1j * b.global_phase)) > atol:
        return False
    for g, h in zip(a.gates, b.gates):
        if g.qubits != h.qubits or g.matrix.shape != h.matrix.shape or (
                np.abs(g.matrix - h.matrix).max(initial=0.0) > atol):
            return False
    if (a.compact is None) != (b.compact is None):
        return False
    if a.compact is not None:
        if len(a.compact.gates) != len(b.compact.gates):
            return False
        for g, h in zip(a.compact.gates, b.compact.gates):
            if type(g) is not type(h) or g.qubits != h.qubits:
                return False
    return True


class _NoTemplate(Exception):
    """The circuit holds something a template does not take."""


class _Builder:
    """One :func:`parametric_from_qiskit` call: the flat instruction list, then the
    template."""

    def __init__(self, qc) -> None:
        self.qc = qc
        self.n = qc.num_qubits
        self.column = {p: j for j, p in enumerate(qc.parameters)}
        self.items: list[tuple] = []  # ("fixed" | "slot" | "piece", op, qubits)
        self.phases: list = [qc.global_phase]
        self.measured: set[int] = set()

    def flatten(self, circuit, qmap: list[int], depth: int = 0) -> None:
        from qiskit.circuit import ParameterExpression

        if depth > 32:
            raise _NoTemplate("definitions nest too deep")
        index = {q: qmap[i] for i, q in enumerate(circuit.qubits)}
        for inst in circuit.data:
            op = inst.operation
            qubits = tuple(index[q] for q in inst.qubits)
            if op.name in _SKIPPED:
                continue
            if op.name == "measure":
                self.measured.update(qubits)
                continue
            if self.measured.intersection(qubits) or inst.clbits or op.name in (
                    "reset", "permutation") or getattr(op, "condition", None) is not None \
                    or hasattr(op, "blocks"):
                raise _NoTemplate(op.name)
            # (a controlled gate's ``is_parameterized`` looks at its base gate only)
            parametrised = op.is_parameterized() or any(
                isinstance(v, ParameterExpression) and v.parameters for v in op.params)
            if parametrised and type(op).__name__ in _PLAIN_CLASSES and \
                    type(op).__module__.startswith("qiskit.circuit"):
                definition = op.definition
                if definition is None:
                    raise _NoTemplate(op.name)
                if not set(definition.parameters) <= set(self.column):
                    raise _NoTemplate("a definition's parameters are not the circuit's")
                self.phases.append(definition.global_phase)
                self.flatten(definition, list(qubits), depth + 1)
                continue
            if not parametrised:
                self.items.append(("fixed", op, qubits))
            elif getattr(op, "_standard_gate", None) is not None and op.num_qubits >= 1:
                self.items.append(("slot", op, qubits))
            elif op.num_qubits >= 1:
                self.items.append(("piece", op, qubits))
            else:
                raise _NoTemplate(op.name)

    def build(self) -> ParametricCircuit | None:
        from qiskit import QuantumCircuit

        from .fusion import diagonal_flags
        from .qiskit_circuit import from_qiskit

        self.flatten(self.qc, list(range(self.n)))
        gates: list[Gate] = []
        diagonal: list[bool] = []
        layout: list = []
        compact_seen = False
        compact_phase = 0.0
        fixed_phase = 0.0
        notes: list = []
        slots: list[_Slot] = []
        pieces: list[_Piece] = []
        run: list[tuple] = []

        def convert(items: list[tuple]) -> GateCircuit:
            sub = QuantumCircuit(self.n)
            for _, op, qubits in items:
                sub.append(op, list(qubits), copy=False)
            return from_qiskit(sub)

        def close_run() -> None:
            nonlocal compact_seen, compact_phase, fixed_phase
            if not run:
                return
            gc = convert(run)
            run.clear()
            start = len(gates)
            gates.extend(gc.gates)
            diagonal.extend(diagonal_flags(gc))
            fixed_phase += gc.global_phase
            notes.extend(getattr(gc, "by_definition", []) or [])
            if gc.compact is None:
                layout.extend(range(start, len(gates)))
                return
            compact_seen = True
            compact_phase += gc.compact.global_phase - gc.global_phase
            index = {id(g): start + k for k, g in enumerate(gc.gates)}
            layout.extend(index.get(id(g), g) for g in gc.compact.gates)

        for kind, op, qubits in self.items:
            if kind == "fixed":
                run.append((kind, op, qubits))
                continue
            close_run()
            columns = {p: self.column[p] for v in op.params
                       for p in getattr(v, "parameters", ())}
            if kind == "slot":
                readers = [ParameterReader(v, self.column) for v in op.params]
                model = matrix_model(op)
                # (a placeholder: every binding fills it in)
                gates.append(Gate(np.eye(1 << len(qubits), dtype=complex),
                                  tuple(reversed(qubits)), op.name))
                diagonal.append(bool(model is not None and model.diagonal))
                layout.append(len(gates) - 1)
                slots.append(_Slot(len(gates) - 1, op, readers, model))
                continue
            # a piece: converted alone at a first set, the gate structure every set keeps
            local = QuantumCircuit(len(qubits))
            local.append(op, list(range(len(qubits))))
            first = from_qiskit(local.assign_parameters({p: 0.1 for p in columns}))
            if first.compact is not None or any(isinstance(g, ControlledGate)
                                                for g in first.gates):
                raise _NoTemplate("a piece with a compact form")
            start = len(gates)
            for g in first.gates:
                gates.append(Gate(g.matrix, tuple(qubits[q] for q in g.qubits), g.name))
                diagonal.append(False)
            layout.extend(range(start, len(gates)))
            notes.extend(getattr(first, "by_definition", []) or [])
            pieces.append(_Piece(start, len(gates), local, tuple(qubits), columns))
        close_run()
        readers = []
        for phase in self.phases:
            reader = ParameterReader(phase, self.column)
            if reader.kind == "constant":
                fixed_phase += reader.offset
            else:
                readers.append(reader)
        return ParametricCircuit(
            self.n, gates, tuple(self.qc.parameters), diagonal, self.qc.name, fixed_phase,
            readers, slots, pieces, layout if compact_seen else None, compact_phase, notes)


__all__ = [
    "BoundGates",
    "ParametricCircuit",
    "parametric_from_qiskit",
    "same_circuit",
]
