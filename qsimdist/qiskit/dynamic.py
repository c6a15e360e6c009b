"""Dynamic circuits as unitary circuits, by the deferred-measurement principle.

A circuit with mid-circuit measurements, resets and classically controlled
blocks (``if_test`` / :class:`~qiskit.circuit.IfElseOp` on a clbit or a
register) is rewritten as a unitary circuit on more qubits whose final
computational-basis measurement gives the same joint distribution of
classical bits:

- a measurement whose qubit is used again copies the qubit onto a fresh
  ancilla (CX); the classical bit then *is* that ancilla;
- a measurement whose qubit is never used again maps its bit to the qubit;
- a classically controlled gate becomes a gate controlled by the qubits its
  condition reads (a bit never written reads 0, as in Qiskit); a condition
  that is a classical expression (``qiskit.circuit.classical.expr``:
  ``expr.equal(creg, 3)``, ``expr.logic_and(...)``, ``expr.bit_not(bit)``, ...)
  is evaluated on every value of the measured qubits it reads
  (:func:`expression_truth`): where it holds on one sub-cube of them it is
  those qubits' controls, where it is a parity a flag qubit gets it by CX,
  otherwise a flag qubit gets it by one multi-controlled X per value;
- a reset swaps in a fresh qubit in ``|0>`` (the old one is traced out);
- inside a conditional block, a measurement and a reset act only where the
  condition holds (controlled copy / controlled swap with a fresh ancilla);
- a reset of a qubit nothing has touched yet is the identity and is dropped;
- a composite instruction (``qc.append(sub_circuit, ...)``, an ``Instruction``
  rather than a ``Gate``) is replaced by its definition, recursively, with its
  global phase (a controlled phase inside a conditional block); a gate without
  a matrix of its own inside a conditional block is expanded the same way, so
  that its small gates are controlled rather than the whole gate. An operation
  without a definition goes through Qiskit's synthesis
  (:func:`~qsimdist.frontends.qiskit_circuit.expansion_of`); a
  ``PermutationGate`` stays one (the frontend relabels the wires for it), and
  inside a conditional block becomes its synthesized SWAPs, controlled.

Every reset and every measurement that is not final leaves a *branch* wire:
the qubit that held the reset qubit's old state, or the measured copy. Such a
wire is only ever a control afterwards, so its final value is the outcome of
that reset or measurement; fixing the branch wires to sampled values picks one
run's branch (what :class:`qsimdist.qiskit.EstimatorV2` does, as Qiskit's
``StatevectorEstimator`` samples a reset's outcome).

:func:`lower_circuit` returns the unitary circuit and, for every clbit, the
qubit holding its value at the end (``None``: the bit is never written and
reads 0). Final measurements of an ordinary circuit map to their qubits
without ancillas, so such a circuit is unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedInstructionError, shorten
from ..frontends.qiskit_circuit import expansion_of, permutation_pattern, states_operator

_SKIPPED = ("barrier", "delay")
#: the classical-expression nodes a condition may use (``qiskit.circuit.classical.expr``)
SUPPORTED_EXPRESSIONS = (
    "Var (a clbit or a classical register), Value (bool or uint), Unary (bit_not, "
    "logic_not), Binary (bit_and, bit_or, bit_xor, logic_and, logic_or, equal, not_equal, "
    "less, less_equal, greater, greater_equal, shift_left, shift_right), Cast (to bool or "
    "uint), Index (a bit of a register)")
#: the most measured qubits one expression condition may read (it is evaluated on every
#: combination of their values)
MAX_EXPRESSION_QUBITS = 16


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


class _Lowering:
    """The rewriting state: physical wires, ancillas and the gates emitted so far."""

    def __init__(self, qc, collapse: bool = False) -> None:
        self.qc = qc
        self.collapse = collapse  # a final measurement whose bit is read later is a branch too
        self.branches: list[int] = []
        self.touched: set[int] = set()  # logical qubits some instruction has acted on
        self.phase = 0.0  # global phases of the definitions expanded outside conditions
        self.n = qc.num_qubits
        self.wire = list(range(self.n))  # logical qubit -> physical qubit holding it now
        self.n_physical = self.n
        self.sources: list[int | None] = [None] * qc.num_clbits
        self.ops: list[tuple[object, tuple[int, ...]]] = []  # (gate, physical qubits)
        self.dynamic = False
        self.allow_parameters = False
        # for each top-level position, the logical qubits some later instruction uses
        # (other than barrier, delay and measure): a measurement of any other qubit is final
        self.used_later, self.read_later = later_uses(qc)

    def fresh(self) -> int:
        self.n_physical += 1
        return self.n_physical - 1

    # ----------------------------------------------------------------- emitting
    def emit(self, gate, qubits: list[int], controls: list[tuple[int, int]]) -> None:
        """Append ``gate`` on physical ``qubits``, controlled by ``controls`` [(qubit, value)]."""
        if not controls:
            self.ops.append((gate, tuple(qubits)))
            return
        ctrl_state = sum(v << k for k, (_, v) in enumerate(controls))
        controlled = gate.control(len(controls), ctrl_state=ctrl_state)
        self.ops.append((controlled, tuple(q for q, _ in controls) + tuple(qubits)))

    def add_phase(self, phase, controls: list[tuple[int, int]]) -> None:
        """A definition's global phase: global outside conditions, a controlled phase inside."""
        from qiskit.circuit.library import GlobalPhaseGate

        if isinstance(phase, (int, float)) and phase == 0:
            return
        if controls:
            self.emit(GlobalPhaseGate(phase), [], controls)
        else:
            self.phase = self.phase + phase

    def copy(self, source: int, target: int, controls: list[tuple[int, int]]) -> None:
        """``target ^= source`` where ``controls`` hold (the source may be one of them)."""
        from qiskit.circuit.library import CXGate

        wanted = dict(controls).get(source)
        if wanted == 0:  # the copy acts only where the source is 1: never
            return
        self.emit(CXGate(), [source, target], [(q, v) for q, v in controls if q != source])

    # ----------------------------------------------------------------- walking
    def walk(self, circuit, qmap: list[int], cmap: list[int],
             controls: list[tuple[int, int]], top: bool) -> None:
        """Rewrite ``circuit`` whose qubit i is logical ``qmap[i]`` and clbit j is ``cmap[j]``."""
        from qiskit.circuit import BoxOp, ControlFlowOp, Gate, IfElseOp
        from qiskit.circuit.library import SwapGate

        for pos, inst in enumerate(circuit.data):
            op = inst.operation
            qubits = [qmap[circuit.find_bit(q).index] for q in inst.qubits]
            clbits = [cmap[circuit.find_bit(c).index] for c in inst.clbits]
            name = op.name
            where = f"{shorten(name)} at position {pos} on qubits {shorten(qubits)}"
            if name in _SKIPPED:
                continue
            if name == "measure":
                (logical,), (clbit,) = qubits, clbits
                self.touched.add(logical)
                final = top and not controls and logical not in self.used_later[pos]
                if final and self.collapse:
                    final = clbit not in self.read_later[pos]
                if final:
                    self.sources[clbit] = self.wire[logical]
                    continue
                self.dynamic = True
                anc = self.fresh()
                old = self.sources[clbit]
                if controls and old is not None:
                    # anc = old where the condition fails, the measured value where it holds
                    self.copy(old, anc, [])
                    self.copy(old, anc, controls)
                self.copy(self.wire[logical], anc, controls)
                self.sources[clbit] = anc
                self.branches.append(anc)
                continue
            if name == "reset":
                (logical,) = qubits
                if logical not in self.touched:
                    continue  # a fresh qubit is already |0>: the reset is the identity
                self.dynamic = True
                anc = self.fresh()
                if controls:
                    self.emit(SwapGate(), [self.wire[logical], anc], controls)
                    self.branches.append(anc)
                else:
                    self.branches.append(self.wire[logical])
                    self.wire[logical] = anc
                continue
            if isinstance(op, IfElseOp):
                self.dynamic = True
                cbits = {b: cmap[circuit.find_bit(b).index] for b in _condition_bits(op, where)}
                self.if_else(op, qubits, clbits, cbits, controls, where)
                continue
            if isinstance(op, BoxOp):
                body = op.blocks[0]
                self.walk(body, qubits, clbits, controls, top=False)
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
                definition, why = expansion_of(op, where)  # control its gates
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
            self.emit(op, [self.wire[q] for q in qubits], controls)

    def condition_controls(self, condition, cmap_bits: dict, where: str):
        """The condition as [(physical qubit, value)], or ``None`` when it can never hold."""
        from qiskit.circuit import ClassicalRegister, Clbit
        from qiskit.circuit.classical import expr

        if isinstance(condition, expr.Expr):
            simple = simple_equality(condition)
            if simple is None:
                return self.expression_controls(condition, cmap_bits, where)
            condition = simple
        target, value = condition if isinstance(condition, tuple) else (None, None)
        if isinstance(target, Clbit):
            bits = [target]
            values = [int(bool(value))]
        elif isinstance(target, ClassicalRegister):
            bits = list(target)
            value = int(value)
            if value < 0 or value >> len(bits):
                return None
            values = [(value >> k) & 1 for k in range(len(bits))]
        else:
            raise UnsupportedInstructionError(
                f"condition {shorten(condition)} of {where} is not supported; supported: "
                "(clbit, value), (register, value) and classical expressions"
            )
        pairs: dict[int, int] = {}
        for bit, want in zip(bits, values):
            clbit = cmap_bits[bit]
            src = self.sources[clbit]
            if src is None:  # never written: reads 0
                if want:
                    return None
                continue
            if pairs.setdefault(src, want) != want:
                return None
        return sorted(pairs.items())

    def expression_controls(self, condition, cmap_bits: dict, where: str):
        """A classical-expression condition as [(physical qubit, value)] (``None``: it
        never holds), evaluated on every value of the measured qubits it reads: a sub-cube
        of them is their controls; otherwise a fresh flag qubit takes the condition's value
        (CX from each qubit of a parity, else one multi-controlled X per value where it
        holds, or where it fails after an X) and the condition is ``flag == 1``."""
        from qiskit.circuit.library import CXGate, XGate

        bits = expression_bits(condition, where)
        source = {bit: self.sources[cmap_bits[bit]] for bit in bits}
        wires = sorted({w for w in source.values() if w is not None})
        if len(wires) > MAX_EXPRESSION_QUBITS:
            raise UnsupportedInstructionError(
                f"the condition of {where} reads {len(wires)} measured qubits; an expression "
                f"condition may read at most {MAX_EXPRESSION_QUBITS}"
            )
        truth = expression_truth(condition, bits, [source[b] for b in bits], wires, where)
        k = len(wires)
        holds = [a for a, t in enumerate(truth) if t]
        if not holds:
            return None
        fixed = [(i, holds[0] >> i & 1) for i in range(k)
                 if all((a >> i & 1) == (holds[0] >> i & 1) for a in holds)]
        if len(holds) << len(fixed) == 1 << k:  # a sub-cube: a conjunction of wire values
            return [(wires[i], v) for i, v in fixed]
        flag = self.fresh()
        const = truth[0]
        parity = [i for i in range(k) if truth[1 << i] != const]
        mask = sum(1 << i for i in parity)
        if all(truth[a] == (const ^ (bin(a & mask).count("1") & 1)) for a in range(1 << k)):
            for i in parity:
                self.emit(CXGate(), [wires[i], flag], [])
            if const:
                self.emit(XGate(), [flag], [])
            return [(flag, 1)]
        fails = [a for a, t in enumerate(truth) if not t]
        if len(fails) < len(holds):
            self.emit(XGate(), [flag], [])
        for a in (fails if len(fails) < len(holds) else holds):
            self.emit(XGate(), [flag], [(wires[i], a >> i & 1) for i in range(k)])
        return [(flag, 1)]

    def if_else(self, op, qubits: list[int], clbits: list[int], cmap_bits: dict,
                controls: list[tuple[int, int]], where: str) -> None:
        from qiskit.circuit.library import XGate

        true_body, false_body = op.blocks[0], (op.blocks[1] if len(op.blocks) > 1 else None)
        cond = self.condition_controls(op.condition, cmap_bits, where)
        if cond is None:  # the condition never holds
            if false_body is not None:
                self.walk(false_body, qubits, clbits, controls, top=False)
            return
        merged = dict(controls)
        clash = any(merged.setdefault(q, v) != v for q, v in cond)
        if clash:
            if false_body is not None:
                self.walk(false_body, qubits, clbits, controls, top=False)
            return
        both = sorted(merged.items())
        if false_body is None:
            self.walk(true_body, qubits, clbits, both, top=False)
            return
        if not cond:  # always true
            self.walk(true_body, qubits, clbits, controls, top=False)
            return
        # a flag qubit holds the whole condition (outer controls included); the false
        # branch runs where the outer controls hold and the flag does not
        flag = self.fresh()
        self.emit(XGate(), [flag], both)
        self.walk(true_body, qubits, clbits, [(flag, 1)], top=False)
        self.walk(false_body, qubits, clbits, sorted([*controls, (flag, 0)]), top=False)


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
        if inst.operation.name not in (*_SKIPPED, "measure"):
            seen.update(qc.find_bit(q).index for q in inst.qubits)
            read.update(qc.find_bit(c).index for c in inst.clbits)
    return used_later, read_later


def simple_equality(condition):
    """``(clbit or register, value)`` for ``expr.equal(clbit or register, value)`` (either
    way round) or a bare clbit (``(clbit, True)``), else ``None``."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    if isinstance(condition, expr.Var) and isinstance(condition.var, Clbit):
        return condition.var, True
    if not (isinstance(condition, expr.Binary) and condition.op is expr.Binary.Op.EQUAL):
        return None
    for var, value in ((condition.left, condition.right), (condition.right, condition.left)):
        if (isinstance(var, expr.Var) and isinstance(var.var, (Clbit, ClassicalRegister))
                and isinstance(value, expr.Value)):
            return var.var, value.value
    return None


def _unsupported_node(node, where: str) -> UnsupportedInstructionError:
    op = getattr(node, "op", None)
    name = type(node).__name__ + (f".{op.name}" if op is not None else "")
    return UnsupportedInstructionError(
        f"the condition of {where} uses the classical expression node {name} "
        f"({shorten(str(node), 120)}), which is not supported; supported: "
        f"{SUPPORTED_EXPRESSIONS}"
    )


def expression_bits(condition, where: str = "a condition") -> list:
    """The clbits a classical expression reads, in first-use order."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    bits: dict = {}
    for var in expr.iter_vars(condition):
        target = var.var
        if isinstance(target, Clbit):
            bits.setdefault(target, None)
        elif isinstance(target, ClassicalRegister):
            for bit in target:
                bits.setdefault(bit, None)
        else:
            raise _unsupported_node(var, where)
    return list(bits)


def expression_truth(condition, bits: list, sources: list, wires: list[int],
                     where: str) -> list[bool]:
    """The value of a classical expression for every assignment ``a`` of ``wires``
    (wire ``wires[i]`` holds bit ``i`` of ``a``); clbit ``bits[j]`` reads the wire
    ``sources[j]`` (``None``: never written, reads 0).

    The expression is evaluated once on arrays holding every assignment (one entry
    per ``a``); one whose integers may pass 62 bits is evaluated per assignment on
    Python integers instead.

    Raises:
        UnsupportedInstructionError: a node outside :data:`SUPPORTED_EXPRESSIONS`.
    """
    position = {w: i for i, w in enumerate(wires)}
    count = 1 << len(wires)
    if _widest(condition) <= _ARRAY_BITS:
        a = np.arange(count, dtype=np.int64)
        zero = np.zeros(count, dtype=np.int64)
        value_of = {bit: zero if w is None else (a >> position[w]) & 1
                    for bit, w in zip(bits, sources)}
        value = _evaluate(condition, value_of, where)
        return np.broadcast_to(np.asarray(value) != 0, (count,)).tolist()
    out = []
    for a in range(count):
        value_of = {bit: 0 if w is None else a >> position[w] & 1
                    for bit, w in zip(bits, sources)}
        out.append(bool(_evaluate(condition, value_of, where)))
    return out


#: integer widths evaluated on int64 arrays (wider ones on Python integers)
_ARRAY_BITS = 62


def _widest(node) -> int:
    """The most bits any integer of a classical expression may hold (its registers and
    unsigned types)."""
    from qiskit.circuit import ClassicalRegister
    from qiskit.circuit.classical import expr, types

    widest = 1
    stack = [node]
    while stack:
        x = stack.pop()
        ty = getattr(x, "type", None)
        if isinstance(ty, types.Uint):
            widest = max(widest, ty.width)
        if isinstance(x, expr.Var) and isinstance(x.var, ClassicalRegister):
            widest = max(widest, len(x.var))
        for name in ("operand", "left", "right", "target", "index"):
            child = getattr(x, name, None)
            if isinstance(child, expr.Expr):
                stack.append(child)
    return widest


def _truth(x):
    """``x`` as a truth value: a bool, or a bool array entry by entry."""
    return np.asarray(x) != 0 if isinstance(x, np.ndarray) else bool(x)


def _integer(x):
    """``x`` as an integer: an int, or an int64 array entry by entry."""
    return x.astype(np.int64) if isinstance(x, np.ndarray) else int(x)


def _evaluate(node, value_of: dict, where: str):
    """A classical expression's value (a truth value, or an integer for a uint) with the
    clbits' values; each value is a scalar or an array of them, entry by entry (numpy's
    operators and logical functions act alike on both)."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr, types

    def width_mask(ty) -> int | None:
        if isinstance(ty, types.Uint):
            return (1 << ty.width) - 1
        if isinstance(ty, types.Bool):
            return None
        raise _unsupported_node(node, where)

    if isinstance(node, expr.Var):
        target = node.var
        if isinstance(target, Clbit):
            return _truth(value_of[target])
        if isinstance(target, ClassicalRegister):
            return sum(_integer(value_of[bit]) << k for k, bit in enumerate(target))
        raise _unsupported_node(node, where)
    if isinstance(node, expr.Value):
        width_mask(node.type)
        return node.value
    if isinstance(node, expr.Cast):
        x = _evaluate(node.operand, value_of, where)
        mask = width_mask(node.type)
        return _truth(x) if mask is None else _integer(x) & mask
    if isinstance(node, expr.Index):
        target = _evaluate(node.target, value_of, where)
        index = _evaluate(node.index, value_of, where)
        if isinstance(target, bool) or (isinstance(target, np.ndarray)
                                        and target.dtype == bool):
            raise _unsupported_node(node, where)
        return _truth(_integer(target) >> _integer(index) & 1)
    if isinstance(node, expr.Unary):
        x = _evaluate(node.operand, value_of, where)
        if node.op is expr.Unary.Op.LOGIC_NOT:
            return _not(x)
        if node.op is expr.Unary.Op.BIT_NOT:
            mask = width_mask(node.type)
            return _not(x) if mask is None else ~_integer(x) & mask
        raise _unsupported_node(node, where)
    if isinstance(node, expr.Binary):
        ops = expr.Binary.Op
        a = _evaluate(node.left, value_of, where)
        b = _evaluate(node.right, value_of, where)
        if node.op is ops.LOGIC_AND:
            return _truth(a) & _truth(b)
        if node.op is ops.LOGIC_OR:
            return _truth(a) | _truth(b)
        if node.op in (ops.BIT_AND, ops.BIT_OR, ops.BIT_XOR):
            a, b = _integer(a), _integer(b)
            v = a & b if node.op is ops.BIT_AND else a | b if node.op is ops.BIT_OR else a ^ b
            return v if width_mask(node.type) is not None else _truth(v)
        if not isinstance(a, np.ndarray) and isinstance(a, bool) != isinstance(b, bool):
            a, b = _integer(a), _integer(b)
        compare = {ops.EQUAL: np.equal, ops.NOT_EQUAL: np.not_equal, ops.LESS: np.less,
                   ops.LESS_EQUAL: np.less_equal, ops.GREATER: np.greater,
                   ops.GREATER_EQUAL: np.greater_equal}
        if node.op in compare:
            v = compare[node.op](a, b)
            return v if isinstance(v, np.ndarray) else bool(v)
        if node.op is ops.SHIFT_LEFT:
            return _shift(_integer(a), _integer(b), left=True) & width_mask(node.type)
        if node.op is ops.SHIFT_RIGHT:
            return _shift(_integer(a), _integer(b), left=False)
    raise _unsupported_node(node, where)


def _shift(a, b, left: bool):
    """``a << b`` or ``a >> b`` (``a`` non-negative); on arrays a shift past
    :data:`_ARRAY_BITS` gives 0, as it does on Python integers once masked."""
    if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        return a << b if left else a >> b
    b = np.asarray(b)
    short = np.minimum(b, _ARRAY_BITS)
    return np.where(b > _ARRAY_BITS, 0, a << short if left else a >> short)


def _not(x):
    """Logical not of a truth value or of each entry of a bool array."""
    return ~_truth(x) if isinstance(x, np.ndarray) else not x


def _condition_bits(op, where: str) -> list:
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    if isinstance(op.condition, expr.Expr):
        return expression_bits(op.condition, where)
    target = op.condition[0] if isinstance(op.condition, tuple) else None
    if isinstance(target, Clbit):
        return [target]
    if isinstance(target, ClassicalRegister):
        return list(target)
    return []


def lower_circuit(qc, allow_parameters: bool = False, collapse: bool = False) -> LoweredCircuit:
    """Rewrite a (bound) Qiskit circuit as a unitary circuit plus its clbit sources.

    ``allow_parameters=True`` lowers a parametrised circuit as a template (its
    gates keep their parameters; bind the result's ``circuit`` afterwards).
    ``collapse=True`` also copies out a final measurement whose bit a later
    condition reads, so that every measured value a later gate depends on is a
    branch wire (the estimator fixes them all to one sampled branch).

    Raises:
        UnsupportedInstructionError: for loops, switch, a classical-expression node
            outside :data:`SUPPORTED_EXPRESSIONS`, other non-unitary instructions and
            unbound parameters, naming the instruction.
    """
    from qiskit import QuantumCircuit

    if qc.parameters and not allow_parameters:
        names = ", ".join(sorted(p.name for p in qc.parameters))
        first = next((f" (first in {inst.operation.name!r} at position {pos})"
                      for pos, inst in enumerate(qc.data)
                      if getattr(inst.operation, "is_parameterized", lambda: False)()), "")
        raise UnsupportedInstructionError(
            f"unbound parameters {names}{first}; give parameter values in the pub or bind them "
            "with assign_parameters()"
        )
    state = _Lowering(qc, collapse=collapse)
    state.allow_parameters = allow_parameters
    state.walk(qc, list(range(qc.num_qubits)), list(range(qc.num_clbits)), [], top=True)
    out = QuantumCircuit(state.n_physical, global_phase=qc.global_phase + state.phase,
                         name=qc.name)
    for gate, qubits in state.ops:
        out.append(gate, qubits)
    return LoweredCircuit(out, state.sources, state.n_physical - qc.num_qubits, state.dynamic,
                          wires=list(state.wire), branches=list(state.branches))


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
    resets of fresh qubits (then :func:`lower_circuit` must rewrite it; otherwise
    :func:`~qsimdist.frontends.qiskit_circuit.from_qiskit` reads it as it is)."""
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
        if name in _SKIPPED:
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
