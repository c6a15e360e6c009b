"""Dynamic circuits as unitary circuits, by the deferred-measurement principle.

:func:`lower_circuit` renders a circuit's :class:`~qsimdist.frontends.dynamic.DynamicProgram`
(the one walk of its control flow) as a unitary circuit on more qubits whose final
computational-basis measurement gives the same joint distribution of classical bits.
Each classical wire of the program becomes a qubit:

- a measurement whose qubit is used again copies the qubit onto a fresh ancilla (CX);
  the classical bit then *is* that ancilla; a measurement whose qubit is never used
  again maps its bit to the qubit (``collapse=True``: only where no later condition
  reads the bit);
- a classically controlled gate becomes a gate controlled by the qubits its condition
  reads; a flag wire is a fresh qubit set by CX (a parity) or by one multi-controlled
  X per value of the qubits its table reads (where it holds, or where it fails after
  an X);
- a reset swaps in a fresh qubit in ``|0>`` (the old one is traced out);
- inside a conditional block, a measurement and a reset act only where the condition
  holds (controlled copy / controlled swap with a fresh ancilla);
- a ``PermutationGate`` stays one (the frontend relabels the wires for it), and
  inside a conditional block becomes its synthesized SWAPs, controlled.

Every reset and every measurement that is not final leaves a *branch* wire: the
qubit that held the reset qubit's old state, or the measured copy. Such a wire is only
ever a control afterwards, so its final value is the outcome of that reset or
measurement; fixing the branch wires to sampled values picks one run's branch (what
:class:`qsimdist.qiskit.EstimatorV2` does, as Qiskit's ``StatevectorEstimator`` samples
a reset's outcome).

The result holds the unitary circuit and, for every clbit, the qubit holding its value
at the end (``None``: the bit is never written and reads 0). Final measurements of an
ordinary circuit map to their qubits without ancillas, so such a circuit is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .dynamic import (
    FINAL,
    FLAG_ALL,
    FLAG_TABLE,
    GATE,
    LIVE,
    MEASURE,
    PHASE,
    RESET,
    DynamicProgram,
    dynamic_program,
)


@dataclass
class LoweredCircuit:
    """A unitary circuit plus the qubit that holds each classical bit's final value.

    Attributes:
        circuit: a ``QuantumCircuit`` without classical bits on ``num_qubits``
            qubits (the original ones first, then ancillas).
        clbit_sources: per clbit of the original circuit (by index), the qubit
            of ``circuit`` whose measured value the bit takes, or ``None``
            (never written: 0).
        ancillas: qubits added beyond the original circuit's.
        dynamic: whether the circuit had mid-circuit measurement, reset or
            classical control.
        wires: per qubit of the original circuit, the qubit of ``circuit``
            holding it at the end.
        branches: the branch wires (see the module docstring), in the order
            their resets and measurements happen.
    """

    circuit: object
    clbit_sources: list[int | None]
    ancillas: int
    dynamic: bool
    wires: list[int] = field(default_factory=list)
    branches: list[int] = field(default_factory=list)

    @property
    def num_qubits(self) -> int:
        return self.circuit.num_qubits


class _Rendering:
    """The deferred-measurement rendering: the qubit of each logical qubit and of each
    classical wire, and the gates emitted so far."""

    def __init__(self, program: DynamicProgram, collapse: bool) -> None:
        self.collapse = collapse
        self.n_physical = program.n
        self.wire = list(range(program.n))  # logical qubit -> physical qubit holding it now
        self.qubit_of: list[int | None] = [None] * program.wires  # classical wire -> qubit
        self.ops: list[tuple[object, tuple[int, ...]]] = []  # (gate, physical qubits)
        self.branches: list[int] = []

    def fresh(self) -> int:
        self.n_physical += 1
        return self.n_physical - 1

    def controls(self, condition: tuple) -> list[tuple[int, int]]:
        """A program condition as ``[(physical qubit, value)]``, by qubit."""
        return sorted((self.qubit_of[w], v) for w, v in condition)

    def emit(self, gate, qubits: list[int], controls: list[tuple[int, int]]) -> None:
        """Append ``gate`` on physical ``qubits``, controlled by ``controls`` [(qubit, value)]."""
        if not controls:
            self.ops.append((gate, tuple(qubits)))
            return
        ctrl_state = sum(v << k for k, (_, v) in enumerate(controls))
        controlled = gate.control(len(controls), ctrl_state=ctrl_state)
        self.ops.append((controlled, tuple(q for q, _ in controls) + tuple(qubits)))

    def copy(self, source: int, target: int, controls: list[tuple[int, int]]) -> None:
        """``target ^= source`` where ``controls`` hold (the source may be one of them)."""
        from qiskit.circuit.library import CXGate

        wanted = dict(controls).get(source)
        if wanted == 0:  # the copy acts only where the source is 1: never
            return
        self.emit(CXGate(), [source, target], [(q, v) for q, v in controls if q != source])

    def render(self, program: DynamicProgram) -> list[int | None]:
        """Emit every op of ``program``; per clbit, the qubit holding its final value."""
        from qiskit.circuit.library import GlobalPhaseGate, SwapGate, XGate

        finals: dict[int, int] = {}  # clbit -> the qubit its final measurement reads

        for op in program.ops:
            kind = op[0]
            if kind == GATE:
                self.emit(op[1], [self.wire[q] for q in op[2]], self.controls(op[3]))
            elif kind == PHASE:
                self.emit(GlobalPhaseGate(op[1]), [], self.controls(op[2]))
            elif kind == FINAL:
                finals[op[2]] = self.wire[op[1]]
            elif kind == MEASURE:
                _, logical, _, w, condition, old, final = op
                if final and not self.collapse:  # the wire stays on its qubit
                    self.qubit_of[w] = self.wire[logical]
                    continue
                anc = self.qubit_of[w] = self.fresh()
                controls = self.controls(condition)
                if controls and old is not None:
                    # anc = old where the condition fails, the measured value where it holds
                    self.copy(self.qubit_of[old], anc, [])
                    self.copy(self.qubit_of[old], anc, controls)
                self.copy(self.wire[logical], anc, controls)
                self.branches.append(anc)
            elif kind == RESET:
                _, logical, w, condition = op
                anc = self.fresh()
                if condition:
                    self.emit(SwapGate(), [self.wire[logical], anc], self.controls(condition))
                    self.qubit_of[w] = anc
                else:
                    self.qubit_of[w] = self.wire[logical]
                    self.wire[logical] = anc
                self.branches.append(self.qubit_of[w])
            elif kind == FLAG_ALL:
                flag = self.qubit_of[op[1]] = self.fresh()
                self.emit(XGate(), [flag], self.controls(op[2]))
            elif kind == FLAG_TABLE:
                self.flag_table(op[1], [self.qubit_of[w] for w in op[2]], op[3])
        return [None if src is None else finals[c] if src == LIVE else self.qubit_of[src]
                for c, src in enumerate(program.sources)]

    def flag_table(self, w: int, qubits: list[int], truth: tuple) -> None:
        """A fresh qubit for flag wire ``w`` holding ``truth[a]`` (``qubits[i]`` holding bit
        ``i`` of ``a``): CX from each qubit of a parity, else one multi-controlled X per
        value where it holds (or where it fails, after an X)."""
        from qiskit.circuit.library import CXGate, XGate

        flag = self.qubit_of[w] = self.fresh()
        k = len(qubits)
        const = truth[0]
        parity = [i for i in range(k) if truth[1 << i] != const]
        mask = sum(1 << i for i in parity)
        if all(truth[a] == (const ^ (bin(a & mask).count("1") & 1)) for a in range(1 << k)):
            for i in parity:
                self.emit(CXGate(), [qubits[i], flag], [])
            if const:
                self.emit(XGate(), [flag], [])
            return
        holds = [a for a, t in enumerate(truth) if t]
        fails = [a for a, t in enumerate(truth) if not t]
        if len(fails) < len(holds):
            self.emit(XGate(), [flag], [])
        for a in (fails if len(fails) < len(holds) else holds):
            self.emit(XGate(), [flag], sorted((qubits[i], a >> i & 1) for i in range(k)))


def lower_circuit(qc, allow_parameters: bool = False, collapse: bool = False) -> LoweredCircuit:
    """Rewrite a (bound) Qiskit circuit as a unitary circuit plus its clbit sources.

    ``allow_parameters=True`` lowers a parametrised circuit as a template (its
    gates keep their parameters; bind the result's ``circuit`` afterwards).
    ``collapse=True`` also copies out a final measurement whose bit a later
    condition reads, so that every measured value a later gate depends on is a
    branch wire (the estimator fixes them all to one sampled branch).

    Raises:
        UnsupportedInstructionError: for loops, switch, a classical-expression node
            outside :data:`~qsimdist.frontends.classical.SUPPORTED_EXPRESSIONS`, other
            non-unitary instructions and unbound parameters, naming the instruction.
    """
    return render_lowered(dynamic_program(qc, allow_parameters), qc, collapse)


def render_lowered(program: DynamicProgram, qc, collapse: bool = False) -> LoweredCircuit:
    """The deferred-measurement circuit of ``program`` (walked from ``qc``)."""
    from qiskit import QuantumCircuit

    rendering = _Rendering(program, collapse)
    sources = rendering.render(program)
    out = QuantumCircuit(rendering.n_physical, global_phase=program.phase, name=qc.name)
    for gate, qubits in rendering.ops:
        out.append(gate, qubits)
    dynamic = program.dynamic or (collapse and program.in_place > 0)
    return LoweredCircuit(out, sources, rendering.n_physical - program.n, dynamic,
                          wires=list(rendering.wire), branches=list(rendering.branches))


__all__ = ["LoweredCircuit", "lower_circuit", "render_lowered"]
