"""Dynamic circuits: Qiskit's control flow walked once into one program.

A circuit with mid-circuit measurements, resets and classically controlled blocks
(``if_test`` / :class:`~qiskit.circuit.IfElseOp` on a clbit, a register or a
classical expression, ``box``) is read by one walker, :func:`dynamic_program`, into a
:class:`DynamicProgram`: the circuit's instructions in order, on its own qubits, as

- unitary gates, each with the classical condition it runs under;
- branch points: a measurement whose outcome matters later (its qubit is used
  again, it sits inside a conditional block, or a condition reads its bit) and a
  reset of a qubit something has touched; each writes a fresh *classical wire*
  (numbered from 0 in the order they are made) with its outcome;
- classical flags: a wire holding a condition that is not a conjunction of wire
  values (an ``else`` branch, a parity, any table of an expression);
- final measurements, whose bits nothing reads later.

A condition is a tuple of ``(wire, value)`` pairs that must all hold; ``()`` always
holds. A bit never written reads 0, as in Qiskit. A composite instruction (an
``Instruction`` rather than a ``Gate``) is replaced by its definition, recursively,
with its global phase (a conditioned phase inside a conditional block); a gate without
a matrix of its own inside a conditional block is expanded the same way, so that its
small gates are conditioned rather than the whole gate (see
:func:`~qsimdist.frontends.qiskit_instructions.expansion_of`).

The program is rendered two ways: the deferred-measurement circuit
(:func:`qsimdist.frontends.lowering.lower_circuit`: each wire a qubit, each condition
controls) and the trajectory program of :mod:`qsimdist.engine.trajectory` (the
circuit's own state, projected at each branch point). Qiskit is imported inside the
functions only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..errors import InstructionPlace, UnsupportedInstructionError, shorten
from .classical import (
    MAX_EXPRESSION_QUBITS,
    condition_bits,
    expression_bits,
    expression_truth,
    simple_equality,
)
from .qiskit_instructions import expansion_of, permutation_pattern, states_operator

SKIPPED = ("barrier", "delay")
#: the program's operations, ``(kind, ...)`` tuples (see :class:`DynamicProgram`)
GATE, PHASE, MEASURE, FINAL, RESET, FLAG_ALL, FLAG_TABLE = range(7)
#: the source of a clbit written by a final measurement (its qubit: ``finals``)
LIVE = -1


@dataclass
class DynamicProgram:
    """A dynamic circuit as one program (see the module docstring).

    Attributes:
        n: the circuit's qubits.
        ops: in circuit order, each one of
            ``(GATE, gate, qubits, condition)``,
            ``(PHASE, phase, condition)`` (a definition's global phase under a condition),
            ``(MEASURE, qubit, clbit, wire, condition, old, final)`` (``old``: the clbit's
            source before; ``final``: top level, unconditioned, and no later instruction
            but a measurement uses the qubit),
            ``(FINAL, qubit, clbit)`` (a final measurement whose bit nothing reads),
            ``(RESET, qubit, wire, condition)``,
            ``(FLAG_ALL, wire, condition)`` (the wire is 1 where the condition holds),
            ``(FLAG_TABLE, wire, wires, truth)`` (the wire is ``truth[a]``, ``a`` holding
            ``wires[i]`` in bit ``i``).
        wires: classical wires made.
        sources: per clbit, the wire holding its final value, ``None`` (never written:
            0) or :data:`LIVE` (a final measurement; ``finals`` names its qubit).
        finals: clbit -> the qubit its final measurement reads.
        phase: the global phase, definitions' phases outside conditions included.
        dynamic: whether the circuit has a measurement that is not final, a reset of a
            touched qubit or a conditional block.
        branches: the branch points (measurements and resets), in order.
    """

    n: int
    ops: list = field(default_factory=list)
    wires: int = 0
    sources: list = field(default_factory=list)
    finals: dict = field(default_factory=dict)
    phase: object = 0.0
    dynamic: bool = False
    branches: int = 0

    @property
    def in_place(self) -> int:
        """Branch points on a qubit nothing uses afterwards (final ``MEASURE`` ops): the
        deferred-measurement circuit may keep such a wire on its qubit."""
        return sum(1 for op in self.ops if op[0] == MEASURE and op[6])


class _Walker:
    """The walking state: classical wires, the sources of the clbits, the ops so far."""

    def __init__(self, qc, allow_parameters: bool) -> None:
        self.allow_parameters = allow_parameters
        self.touched: set[int] = set()  # qubits some instruction has acted on
        self.program = DynamicProgram(qc.num_qubits, sources=[None] * qc.num_clbits)
        #: qubit -> the wire of its final (in-place) measurement: measured again, untouched
        #: since, it gives the same outcome
        self.kept: dict[int, int] = {}
        # for each top-level position, the qubits and clbits some later instruction uses
        # (other than barrier, delay and measure): a measurement of any other qubit is final
        self.used_later, self.read_later = later_uses(qc)

    def fresh(self) -> int:
        self.program.wires += 1
        return self.program.wires - 1

    def add(self, *op) -> None:
        self.program.ops.append(op)

    def walk(self, circuit, qmap: list[int], cmap: list[int], controls: tuple,
             top: bool) -> None:
        """Walk ``circuit``, whose qubit i is ``qmap[i]`` and clbit j is ``cmap[j]``, under
        the condition ``controls``."""
        from qiskit.circuit import BoxOp, ControlFlowOp, Gate, IfElseOp

        p = self.program
        for pos, inst in enumerate(circuit.data):
            op = inst.operation
            qubits = [qmap[circuit.find_bit(q).index] for q in inst.qubits]
            clbits = [cmap[circuit.find_bit(c).index] for c in inst.clbits]
            name = op.name
            where = InstructionPlace(name, pos, qubits)
            if name in SKIPPED:
                continue
            if name == "measure":
                self.measure(qubits[0], clbits[0], controls,
                             top and not controls and qubits[0] not in self.used_later[pos],
                             top and clbits[0] in self.read_later[pos], where)
                continue
            if name == "reset":
                (logical,) = qubits
                if logical not in self.touched:
                    continue  # a fresh qubit is already |0>: the reset is the identity
                p.dynamic = True
                p.branches += 1
                self.add(RESET, logical, self.fresh(), controls)
                continue
            if isinstance(op, IfElseOp):
                p.dynamic = True
                bits = {b: cmap[circuit.find_bit(b).index] for b in condition_bits(op, where)}
                self.if_else(op, qubits, clbits, bits, controls, where)
                continue
            if isinstance(op, BoxOp):
                self.walk(op.blocks[0], qubits, clbits, controls, top=False)
                continue
            if isinstance(op, ControlFlowOp) or getattr(op, "condition", None) is not None:
                raise UnsupportedInstructionError(
                    f"control-flow instruction {where} is not supported; supported: if_test / "
                    "IfElseOp on a clbit, a register or a classical expression, box, "
                    "mid-circuit measure, reset"
                )
            composite = not isinstance(op, Gate) and name != "unitary"
            definition, why = None, ""
            if composite:
                definition, why = expansion_of(op, where)
            elif controls and (not states_operator(op)
                               or permutation_pattern(op) is not None):
                definition, why = expansion_of(op, where)  # condition its gates
                composite = definition is not None
            if composite:
                if definition is None:
                    raise UnsupportedInstructionError(
                        f"non-unitary instruction {where} has no definition{why}; supported: "
                        "unitary gates, instructions defined by them or synthesized by Qiskit, "
                        "measure, reset, barrier, delay, if_test / IfElseOp on a clbit, a "
                        "register or a classical expression"
                    )
                self.add_phase(definition.global_phase, controls)
                self.walk(definition, qubits, clbits, controls, top=False)
                continue
            if clbits or not isinstance(op, Gate):
                raise UnsupportedInstructionError(
                    f"non-unitary instruction {where}; supported: unitary gates, measure, reset, "
                    "barrier, delay, if_test / IfElseOp on a clbit, a register or a classical "
                    "expression"
                )
            if op.is_parameterized() and not self.allow_parameters:
                names = ", ".join(sorted(str(p) for p in op.params if hasattr(p, "parameters")))
                raise UnsupportedInstructionError(
                    f"instruction {where} has unbound parameters {names}; bind them first"
                )
            self.touched.update(qubits)
            self.add(GATE, op, tuple(qubits), controls)

    def measure(self, logical: int, clbit: int, controls: tuple, final: bool, read: bool,
                where: str) -> None:
        p = self.program
        self.touched.add(logical)
        if final and not read:
            p.sources[clbit] = LIVE
            p.finals[clbit] = logical
            self.add(FINAL, logical, clbit)
            return
        old = p.sources[clbit]
        if controls and old == LIVE:  # (Qiskit counts a block's clbits as the block's own)
            raise UnsupportedInstructionError(
                f"{where} rewrites a bit taken as finally measured")
        p.finals.pop(clbit, None)
        if final and logical in self.kept:
            p.sources[clbit] = self.kept[logical]  # measured again, untouched: the same
            return
        p.dynamic = p.dynamic or not final
        p.branches += 1
        wire = self.fresh()
        if final:
            self.kept[logical] = wire
        self.add(MEASURE, logical, clbit, wire, controls, old, final)
        p.sources[clbit] = wire

    def add_phase(self, phase, controls: tuple) -> None:
        """A definition's global phase: global outside conditions, conditioned inside."""
        if isinstance(phase, (int, float)) and phase == 0:
            return
        if controls:
            self.add(PHASE, phase, controls)
        else:
            self.program.phase = self.program.phase + phase

    def condition(self, condition, bits: dict, where: str) -> tuple | None:
        """The condition as sorted ``(wire, value)`` pairs, or ``None`` where it never
        holds."""
        from qiskit.circuit import ClassicalRegister, Clbit
        from qiskit.circuit.classical import expr

        if isinstance(condition, expr.Expr):
            simple = simple_equality(condition)
            if simple is None:
                return self.expression(condition, bits, where)
            condition = simple
        target, value = condition if isinstance(condition, tuple) else (None, None)
        if isinstance(target, Clbit):
            members = [target]
            values = [int(bool(value))]
        elif isinstance(target, ClassicalRegister):
            members = list(target)
            value = int(value)
            if value < 0 or value >> len(members):
                return None
            values = [(value >> k) & 1 for k in range(len(members))]
        else:
            raise UnsupportedInstructionError(
                f"condition {shorten(condition)} of {where} is not supported; supported: "
                "(clbit, value), (register, value) and classical expressions"
            )
        pairs: dict[int, int] = {}
        for bit, want in zip(members, values):
            src = self.source(bits[bit], where)
            if src is None:  # never written: reads 0
                if want:
                    return None
                continue
            if pairs.setdefault(src, want) != want:
                return None
        return tuple(sorted(pairs.items()))

    def source(self, clbit: int, where: str) -> int | None:
        src = self.program.sources[clbit]
        if src == LIVE:  # (Qiskit counts a condition's clbits as the instruction's own)
            raise UnsupportedInstructionError(
                f"the condition of {where} reads a bit taken as finally measured")
        return src

    def expression(self, condition, bits: dict, where: str) -> tuple | None:
        """A classical-expression condition as ``(wire, value)`` pairs (``None``: it never
        holds), evaluated on every value of the wires it reads: a sub-cube of them is their
        pairs; otherwise a fresh flag wire takes the condition's table."""
        members = expression_bits(condition, where)
        source = {bit: self.source(bits[bit], where) for bit in members}
        wires = sorted({w for w in source.values() if w is not None})
        if len(wires) > MAX_EXPRESSION_QUBITS:
            raise UnsupportedInstructionError(
                f"the condition of {where} reads {len(wires)} measured qubits; an expression "
                f"condition may read at most {MAX_EXPRESSION_QUBITS}"
            )
        truth = expression_truth(condition, members, [source[b] for b in members], wires,
                                 where)
        k = len(wires)
        holds = [a for a, t in enumerate(truth) if t]
        if not holds:
            return None
        fixed = [(i, holds[0] >> i & 1) for i in range(k)
                 if all((a >> i & 1) == (holds[0] >> i & 1) for a in holds)]
        if len(holds) << len(fixed) == 1 << k:  # a sub-cube: a conjunction of wire values
            return tuple((wires[i], v) for i, v in fixed)
        flag = self.fresh()
        self.add(FLAG_TABLE, flag, tuple(wires), tuple(truth))
        return ((flag, 1),)

    def if_else(self, op, qubits: list[int], clbits: list[int], bits: dict, controls: tuple,
                where: str) -> None:
        true_body, false_body = op.blocks[0], (op.blocks[1] if len(op.blocks) > 1 else None)
        cond = self.condition(op.condition, bits, where)
        merged = dict(controls)
        if cond is None or any(merged.setdefault(q, v) != v for q, v in cond):
            # the condition never holds (or contradicts the block's)
            if false_body is not None:
                self.walk(false_body, qubits, clbits, controls, top=False)
            return
        both = tuple(sorted(merged.items()))
        if false_body is None:
            self.walk(true_body, qubits, clbits, both, top=False)
            return
        if not cond:  # always true
            self.walk(true_body, qubits, clbits, controls, top=False)
            return
        # a flag wire holds the whole condition (outer conditions included); the false
        # branch runs where the outer conditions hold and the flag does not
        flag = self.fresh()
        self.add(FLAG_ALL, flag, both)
        self.walk(true_body, qubits, clbits, ((flag, 1),), top=False)
        self.walk(false_body, qubits, clbits, tuple(sorted((*controls, (flag, 0)))),
                  top=False)


def dynamic_program(qc, allow_parameters: bool = False) -> DynamicProgram:
    """Walk a Qiskit circuit into its :class:`DynamicProgram` (the one walker of Qiskit's
    control flow).

    ``allow_parameters=True`` keeps unbound parameters in the gates (a template).

    Raises:
        UnsupportedInstructionError: loops, ``switch``, a classical-expression node
            outside :data:`~qsimdist.frontends.classical.SUPPORTED_EXPRESSIONS`, other
            non-unitary instructions and unbound parameters, naming the instruction.
    """
    if qc.parameters and not allow_parameters:
        names = ", ".join(sorted(p.name for p in qc.parameters))
        first = next((f" (first in {inst.operation.name!r} at position {pos})"
                      for pos, inst in enumerate(qc.data)
                      if getattr(inst.operation, "is_parameterized", lambda: False)()), "")
        raise UnsupportedInstructionError(
            f"unbound parameters {names}{first}; give parameter values in the pub or bind them "
            "with assign_parameters()"
        )
    walker = _Walker(qc, allow_parameters)
    walker.program.phase = qc.global_phase
    walker.walk(qc, list(range(qc.num_qubits)), list(range(qc.num_clbits)), (), top=True)
    return walker.program


def later_uses(qc) -> tuple[list[frozenset[int]], list[frozenset[int]]]:
    """Per top-level position of ``qc``: the qubits and the clbits some later instruction
    uses (barrier, delay and measure aside). A measurement of a qubit outside the first is
    final; a clbit outside the second is never read again."""
    used_later: list[frozenset[int]] = [frozenset()] * len(qc.data)
    read_later: list[frozenset[int]] = [frozenset()] * len(qc.data)
    seen: set[int] = set()
    read: set[int] = set()
    for pos in range(len(qc.data) - 1, -1, -1):
        used_later[pos] = frozenset(seen)
        read_later[pos] = frozenset(read)
        inst = qc.data[pos]
        if inst.operation.name not in (*SKIPPED, "measure"):
            seen.update(qc.find_bit(q).index for q in inst.qubits)
            read.update(qc.find_bit(c).index for c in inst.clbits)
    return used_later, read_later


@functools.cache
def _conditions_exist() -> bool:
    """Whether this Qiskit still has ``c_if`` conditions (before 2.0: a standard gate may
    carry one, which only its operation object shows)."""
    import qiskit

    return int(qiskit.__version__.split(".")[0]) < 2


def plain_standard_gate(inst) -> bool:
    """Whether the circuit instruction ``inst`` is one of Qiskit's standard gates with no
    condition, told without making its Python gate object (a few microseconds each)."""
    return (getattr(inst, "is_standard_gate", bool)() and not _conditions_exist())


def needs_lowering(qc) -> bool:
    """Whether ``qc`` holds anything but gates, barriers, delays, final measurements and
    resets of fresh qubits (then it is a dynamic circuit, read by :func:`dynamic_program`;
    otherwise :func:`~qsimdist.frontends.qiskit_circuit.from_qiskit` reads it as it is)."""
    from qiskit.circuit import Gate

    touched: set = set()
    measured: set = set()
    for inst in qc.data:
        if plain_standard_gate(inst):  # read off the instruction: no gate object made
            if measured.intersection(inst.qubits):
                return True
            touched.update(inst.qubits)
            continue
        op = inst.operation
        name = op.name
        if name in SKIPPED:
            continue
        if name == "measure":
            measured.update(inst.qubits)
            touched.update(inst.qubits)
            continue
        if name == "reset":
            if touched.intersection(inst.qubits):
                return True
            continue
        if not isinstance(op, Gate) and name != "unitary":
            return True  # control flow, or a composite instruction (it may measure or reset)
        if getattr(op, "condition", None) is not None or measured.intersection(inst.qubits):
            return True
        touched.update(inst.qubits)
    return False


_NON_UNITARY = frozenset({"reset", "if_else", "box", "while_loop", "for_loop", "switch_case"})


def may_be_dynamic(qc) -> bool:
    """Whether a circuit measures a qubit it then uses, resets or branches (its top
    level; ``False`` means certainly not, so nothing is walked for it). Where every
    measurement is in the circuit's closing run of measurements and barriers, only
    that run is read."""
    ops = qc.count_ops()
    if _NON_UNITARY.intersection(ops):
        return True
    total = ops.get("measure", 0)
    if not total:
        return False
    closing = 0
    for inst in reversed(qc.data):
        name = inst.operation.name
        if name == "measure":
            closing += 1
        elif name not in SKIPPED:
            break
    if closing == total:
        return False
    measured: set = set()
    for inst in qc.data:
        name = inst.operation.name
        if name == "measure":
            measured.update(inst.qubits)
        elif name not in SKIPPED and measured.intersection(inst.qubits):
            return True
    return False


__all__ = ["FINAL", "FLAG_ALL", "FLAG_TABLE", "GATE", "LIVE", "MEASURE", "PHASE", "RESET",
           "SKIPPED", "DynamicProgram", "dynamic_program", "later_uses", "may_be_dynamic",
           "needs_lowering", "plain_standard_gate"]
