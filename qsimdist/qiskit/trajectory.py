"""A dynamic circuit's branches as trajectories of its own qubits' state.

:class:`~qsimdist.qiskit.EstimatorV2` gives every element of a pub whose circuit
measures mid-circuit, resets or branches on classical bits the values of one
sampled branch (see :mod:`qsimdist.qiskit.estimator`). The deferred-measurement
circuit (:func:`~qsimdist.qiskit.dynamic.lower_circuit`) holds one more qubit per
reset or measurement; here the circuit's own ``n``-qubit state is evolved
instead, one trajectory per branch:

- the circuit is compiled once per parameter binding into a program of unitary
  segments (each converted with
  :func:`~qsimdist.frontends.qiskit_circuit.from_qiskit` and fused once), branch
  points (a measurement or reset that the lowering turns into a branch wire, in
  the lowering's order) and classical flags; a segment, a measurement and a reset
  inside a conditional block carry the block's condition as ``(wire, value)``
  pairs on classical wires, exactly the controls the lowering gives them;
- at a branch point where the condition holds, ``p0`` of the qubit is read off
  the normalised state, the outcome is drawn as :class:`_BranchSampler` draws it
  (``rng.random() * prob < p0`` on joint probabilities, with the same clamps),
  the state is projected and renormalised (a reset then moves an outcome of 1 to
  ``|0>``); where the condition fails the outcome is the one the lowered branch
  wire holds for certain (the clbit's old value; 0 for a reset), still drawn, so
  the generator is consumed as on the lowered circuit;
- a measurement after which nothing but measurements uses its qubit (the lowering
  keeps such a qubit in place) takes the qubit out of the state: the state halves,
  the qubit's value is the outcome from then on (a later measurement of it gives the
  same outcome for certain), and a term's operator on it contributes ``<b|op|b>``;
  MQT Bench's dynamic QFT measures every qubit so, and its trajectories shrink to
  nothing;
- segments run on the statevector route's numpy kernel
  (:func:`~qsimdist.executors.statevector.apply_gates`), with one BLAS thread;
- the terms are read off the final normalised state.

The same seed therefore gives the same branches and the same values as the lowered
circuit. States are kept per branch prefix (a bounded cache, least recently used
first out), so a prefix several elements share is simulated once; a prefix is
replayed from its deepest kept ancestor when it was dropped.

:func:`trajectories_for` says when this route is taken: one process (not under
MPI), numpy, method ``auto`` (a method named in the options runs on the lowered
circuit), a state that fits the memory budget, and per binding a circuit it can
compile whose lowered form is not a Clifford circuit (those keep the stabilizer
route). Anything else (loops, ``switch``, unbound parameters) returns to the
lowered path, which accepts or refuses it as before.
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict

import numpy as np

from ..errors import ExecutionError, UnsupportedInstructionError
from ..executors import apply_gates, blas_threads
from ..frontends.qiskit_circuit import (
    expansion_of,
    from_qiskit,
    permutation_pattern,
    states_operator,
)
from .dynamic import (
    MAX_EXPRESSION_QUBITS,
    expression_bits,
    expression_truth,
    later_uses,
    simple_equality,
)

#: set False to evaluate every dynamic circuit on its lowered (deferred-measurement) form
ENABLED = True
#: widest circuit taken as trajectories (wider ones keep the lowered circuit's routes)
MAX_QUBITS = 24
#: the states a trajectory run may hold at once beside its cache (current state, the
#: copy it came from, a reader's buffers)
WORK_STATES = 4
#: most bytes of states kept between branch prefixes
CACHE_BYTES = 512 << 20
#: under the default memory limit, states this small are taken without reading the
#: memory available (two reads of the host's memory counters cost 8 ms, a 17-qubit run 100 ms)
UNCHECKED_BYTES = 64 << 20
#: fused gates of the segments act on at most this many qubits
FUSION_WIDTH = 4
#: the first segment runs on numpy's GEMMs below this many qubits (the statevector
#: route's compiled kernel from there)
NUMPY_KERNEL_BELOW = 20

_SKIPPED = ("barrier", "delay")
OP_GATES, OP_MEASURE, OP_RESET, OP_FLAG_ALL, OP_FLAG_TABLE = range(5)
#: the source of a clbit last written by a final measurement (no branch: never read)
LIVE = -1


class _Compiler:
    """Walks a bound circuit as :class:`qsimdist.qiskit.dynamic._Lowering` does, emitting a
    trajectory program: ``(kind, ...)`` tuples in the lowering's order (see
    :class:`Program`). Classical wires are numbered from 0; a clbit's source is the
    wire holding its value, ``None`` (never written: 0) or :data:`LIVE`."""

    def __init__(self, qc) -> None:
        self.qc = qc
        self.n = qc.num_qubits
        self.touched: set[int] = set()
        self.wires = 0
        self.sources: list[int | None] = [None] * qc.num_clbits
        self.ops: list[tuple] = []
        self.segments: list[tuple[tuple, object]] = []  # (controls, QuantumCircuit)
        self.run: tuple | None = None
        self.branches = 0
        #: whether the lowered circuit may be Clifford (no gate with two classical
        #: controls or more, no measurement or reset inside a condition)
        self.maybe_clifford = True
        self.used_later, self.read_later = later_uses(qc)
        #: clbit -> the qubit a final measurement writes it from (source :data:`LIVE`)
        self.finals: dict[int, int] = {}
        #: branch points the lowering keeps on their own qubit (a final measurement whose
        #: bit a later condition reads): wires that are no ancilla there
        self.in_place = 0

    def fresh(self) -> int:
        self.wires += 1
        return self.wires - 1

    def flush(self) -> None:
        self.run = None

    def controlled(self, count: int) -> None:
        if count >= 2:
            self.maybe_clifford = False

    def gate(self, op, qubits: list[int], controls: tuple) -> None:
        from qiskit import QuantumCircuit

        self.touched.update(qubits)
        self.controlled(len(controls))
        if self.run is None or self.run[0] != controls:
            self.run = (controls, QuantumCircuit(self.n))
            self.ops.append((OP_GATES, controls, len(self.segments)))
            self.segments.append(self.run)
        if self.ops != [(OP_GATES, (), 0)]:
            # from_qiskit takes a permutation as a relabelling of the wires, which holds
            # for a segment run from |0...0> only: elsewhere it is SWAPs
            pattern = permutation_pattern(op)
            if pattern is not None:
                _append_swaps(self.run[1], pattern, qubits)
                return
            if _holds_permutation(op):
                raise UnsupportedInstructionError(f"{op.name!r} holds a permutation")
        self.run[1].append(op, qubits)

    def walk(self, circuit, qmap: list[int], cmap: list[int], controls: tuple,
             top: bool) -> None:
        from qiskit.circuit import BoxOp, ControlFlowOp, Gate, IfElseOp

        for pos, inst in enumerate(circuit.data):
            op = inst.operation
            qubits = [qmap[circuit.find_bit(q).index] for q in inst.qubits]
            clbits = [cmap[circuit.find_bit(c).index] for c in inst.clbits]
            name = op.name
            where = f"{name!r} at position {pos}"
            if name in _SKIPPED:
                continue
            if name == "measure":
                (logical,), (clbit,) = qubits, clbits
                self.touched.add(logical)
                final = top and not controls and logical not in self.used_later[pos]
                if final and clbit not in self.read_later[pos]:
                    self.sources[clbit] = LIVE
                    self.finals[clbit] = logical
                    continue
                self.in_place += int(final)
                self.finals.pop(clbit, None)
                old = self.sources[clbit]
                if controls:
                    self.maybe_clifford = False
                    if old == LIVE:
                        raise UnsupportedInstructionError(f"{where} rewrites a final bit")
                new = self.fresh()
                self.flush()
                # a qubit nothing uses after this measurement leaves the state (its value
                # is the outcome): the trajectory's state halves
                self.ops.append((OP_MEASURE, logical, new, controls, old, final))
                self.sources[clbit] = new
                self.branches += 1
                continue
            if name == "reset":
                (logical,) = qubits
                if logical not in self.touched:
                    continue  # a fresh qubit is already |0>: the lowering drops it
                if controls:
                    self.maybe_clifford = False
                self.flush()
                self.ops.append((OP_RESET, logical, self.fresh(), controls))
                self.branches += 1
                continue
            if isinstance(op, IfElseOp):
                self.if_else(op, qubits, clbits, cmap, circuit, controls, where)
                continue
            if isinstance(op, BoxOp):
                self.walk(op.blocks[0], qubits, clbits, controls, top=False)
                continue
            if isinstance(op, ControlFlowOp) or getattr(op, "condition", None) is not None:
                raise UnsupportedInstructionError(f"control flow {where}")
            composite = not isinstance(op, Gate) and name != "unitary"
            definition = None
            if composite:
                definition, _ = expansion_of(op, where)
            elif controls and (not states_operator(op)
                               or permutation_pattern(op) is not None):
                definition, _ = expansion_of(op, where)
                composite = definition is not None
            if composite:
                if definition is None:
                    raise UnsupportedInstructionError(f"{where} has no definition")
                phase = definition.global_phase
                if controls and not (isinstance(phase, (int, float)) and phase == 0):
                    self.controlled(len(controls))  # a phase on the condition's wires
                self.walk(definition, qubits, clbits, controls, top=False)
                continue
            if clbits or not isinstance(op, Gate) or op.is_parameterized():
                raise UnsupportedInstructionError(f"{where} is not a bound unitary gate")
            self.gate(op, qubits, controls)

    def condition(self, condition, bits: dict, where: str):
        """The condition as sorted ``(wire, value)`` pairs, or ``None`` where it never
        holds (the lowering's ``condition_controls``)."""
        from qiskit.circuit import ClassicalRegister, Clbit
        from qiskit.circuit.classical import expr

        if isinstance(condition, expr.Expr):
            simple = simple_equality(condition)
            if simple is None:
                return self.expression(condition, bits, where)
            condition = simple
        target, value = condition if isinstance(condition, tuple) else (None, None)
        if isinstance(target, Clbit):
            members, values = [target], [int(bool(value))]
        elif isinstance(target, ClassicalRegister):
            members, value = list(target), int(value)
            if value < 0 or value >> len(members):
                return None
            values = [(value >> k) & 1 for k in range(len(members))]
        else:
            raise UnsupportedInstructionError(f"the condition of {where}")
        pairs: dict[int, int] = {}
        for bit, want in zip(members, values):
            src = self.sources[bits[bit]]
            if src == LIVE:
                raise UnsupportedInstructionError(f"the condition of {where} reads a final bit")
            if src is None:
                if want:
                    return None
                continue
            if pairs.setdefault(src, want) != want:
                return None
        return tuple(sorted(pairs.items()))

    def expression(self, condition, bits: dict, where: str):
        """A classical expression as the lowering's ``expression_controls``: a sub-cube
        of the wires it reads is their pairs, otherwise a flag wire holds it."""
        members = expression_bits(condition)
        source = {bit: self.sources[bits[bit]] for bit in members}
        if any(s == LIVE for s in source.values()):
            raise UnsupportedInstructionError(f"the condition of {where} reads a final bit")
        wires = sorted({w for w in source.values() if w is not None})
        if len(wires) > MAX_EXPRESSION_QUBITS:
            raise UnsupportedInstructionError(f"the condition of {where} reads too many bits")
        truth = expression_truth(condition, members, [source[b] for b in members], wires, where)
        k = len(wires)
        holds = [a for a, t in enumerate(truth) if t]
        if not holds:
            return None
        fixed = [(i, holds[0] >> i & 1) for i in range(k)
                 if all((a >> i & 1) == (holds[0] >> i & 1) for a in holds)]
        if len(holds) << len(fixed) == 1 << k:
            return tuple((wires[i], v) for i, v in fixed)
        flag = self.fresh()
        const = truth[0]
        parity = [i for i in range(k) if truth[1 << i] != const]
        mask = sum(1 << i for i in parity)
        if not all(truth[a] == (const ^ (bin(a & mask).count("1") & 1)) for a in range(1 << k)):
            self.maybe_clifford = self.maybe_clifford and k < 2
        self.flush()
        self.ops.append((OP_FLAG_TABLE, flag, tuple(wires), tuple(truth)))
        return ((flag, 1),)

    def if_else(self, op, qubits, clbits, cmap, circuit, controls: tuple, where: str) -> None:
        from qiskit.circuit.classical import expr

        if isinstance(op.condition, expr.Expr):
            members = expression_bits(op.condition)
        else:
            from qiskit.circuit import ClassicalRegister

            target = op.condition[0] if isinstance(op.condition, tuple) else None
            members = list(target) if isinstance(target, ClassicalRegister) else [target]
        bits = {b: cmap[circuit.find_bit(b).index] for b in members if b is not None}
        true_body = op.blocks[0]
        false_body = op.blocks[1] if len(op.blocks) > 1 else None
        cond = self.condition(op.condition, bits, where)
        merged = dict(controls)
        if cond is None or any(merged.setdefault(q, v) != v for q, v in cond):
            if false_body is not None:
                self.walk(false_body, qubits, clbits, controls, top=False)
            return
        both = tuple(sorted(merged.items()))
        if false_body is None:
            self.walk(true_body, qubits, clbits, both, top=False)
            return
        if not cond:
            self.walk(true_body, qubits, clbits, controls, top=False)
            return
        # as the lowering: a flag wire holds the whole condition (outer controls included)
        flag = self.fresh()
        self.controlled(len(both))
        self.flush()
        self.ops.append((OP_FLAG_ALL, flag, both))
        self.walk(true_body, qubits, clbits, ((flag, 1),), top=False)
        # the false branch: where the outer controls hold and the flag does not
        self.walk(false_body, qubits, clbits, tuple(sorted((*controls, (flag, 0)))), top=False)


def _append_swaps(qc, pattern: list[int], qubits: list[int]) -> None:
    """A ``PermutationGate`` (position ``k`` receives qubit ``pattern[k]``) as SWAPs."""
    from qiskit.circuit.library import SwapGate

    holds = list(range(len(pattern)))  # position k holds the state of qubit holds[k]
    for k, want in enumerate(pattern):
        j = holds.index(want)
        if j != k:
            qc.append(SwapGate(), [qubits[k], qubits[j]])
            holds[k], holds[j] = holds[j], holds[k]


def _holds_permutation(op, depth: int = 0) -> bool:
    """Whether a gate outside Qiskit's standard set has a ``PermutationGate`` in its
    definition (:func:`~qsimdist.frontends.qiskit_circuit.from_qiskit` would expand it
    into a relabelling)."""
    if depth > 8 or op.name in _standard_names() or op.name == "unitary":
        return False
    if permutation_pattern(op) is not None:
        return True
    definition = getattr(op, "definition", None)
    return definition is not None and any(
        _holds_permutation(inst.operation, depth + 1) for inst in definition.data)


@functools.lru_cache(maxsize=1)
def _standard_names() -> frozenset[str]:
    from qiskit.circuit.library import get_standard_gate_name_mapping

    return frozenset(get_standard_gate_name_mapping())


class Program:
    """One binding's compiled circuit.

    Attributes:
        n: qubits.
        ops: ``(OP_GATES, controls, segment)``, ``(OP_MEASURE, qubit, wire, controls, old
            wire, drop)`` (``drop``: no later instruction but a measurement uses the qubit,
            so it leaves the state once measured), ``(OP_RESET, qubit, wire, controls)``,
            ``(OP_FLAG_ALL, wire, controls)`` or ``(OP_FLAG_TABLE, wire, wires, truth)``;
            ``controls`` are ``(wire, value)`` pairs that must all hold.
        segments: per segment, its fused gates (:func:`_prepared`).
        first: the fused gates of the first segment (run from ``|0...0>`` by
            :func:`qsimdist.executors.statevector.simulate`) where ``ops`` begins with one
            without controls, else ``None``.
        wires: classical wires.
        sources: per clbit, the wire holding its value, ``None`` (never written: 0) or
            :data:`LIVE` (a final measurement: ``finals`` names its qubit).
        finals: clbit -> the qubit its final measurement reads.
        lowered_qubits: the qubits of the deferred-measurement circuit.
        branches: branch points (measurements and resets), in order.
        maybe_clifford: whether the lowered circuit may be Clifford.
        gate_lists: the unfused gates of each segment (for that check).
    """

    def __init__(self, compiler: _Compiler) -> None:
        from ..frontends.fusion import diagonal_flags, fuse

        self.n = compiler.n
        self.ops = compiler.ops
        self.wires = compiler.wires
        self.branches = compiler.branches
        self.maybe_clifford = compiler.maybe_clifford
        self.sources = list(compiler.sources)
        self.finals = dict(compiler.finals)
        #: qubits of the lowered (deferred-measurement) circuit: one more per wire that
        #: is not kept on its own qubit
        self.lowered_qubits = self.n + self.wires - compiler.in_place
        self.segments: list[list[tuple]] = []
        self.gate_lists: list[tuple[int, list]] = []
        self.first = None
        for s, (controls, qc) in enumerate(compiler.segments):
            gc = from_qiskit(qc)
            self.gate_lists.append((len(controls), gc.gates))
            fused = fuse(gc.statevector_form(), FUSION_WIDTH, keep_diagonal=False)
            flags = diagonal_flags(fused)
            if s == 0 and self.ops and self.ops[0][0] == OP_GATES and not self.ops[0][1]:
                self.first = (fused.gates, flags)
            self.segments.append([_prepared(g, d) for g, d in zip(fused.gates, flags)])

    def may_be_clifford(self) -> bool:
        """Whether the lowered circuit may be Clifford (where not, it certainly is not):
        no two classical controls on anything, unconditional gates Clifford, and a gate
        under one control a Pauli up to phase (:func:`_pauli_like`)."""
        if not self.maybe_clifford:
            return False
        from ..engine.stabilizer import gate_program, stabilizer_available

        if not stabilizer_available():
            return False
        for controls, gates in self.gate_lists:
            for g in gates:
                m = np.asarray(g.matrix)
                if controls == 0 and gate_program(m) is None:
                    return False
                if controls and not _pauli_like(m):
                    return False
        return True


def _pauli_like(m: np.ndarray) -> bool:
    """Whether ``m`` may be a Pauli string times a phase: its square a multiple of the
    identity, one nonzero entry per row, each the first one times 1, -1, i or -i."""
    square = m @ m
    if not np.allclose(square, square[0, 0] * np.eye(m.shape[0]), atol=1e-9):
        return False
    nonzero = np.abs(m) > 1e-9
    if not (np.count_nonzero(nonzero, axis=1) == 1).all():
        return False
    entries = m[nonzero]
    ratios = entries / entries[0]
    return bool(np.all(np.min(np.abs(ratios[:, None] - np.array([1, -1, 1j, -1j])),
                              axis=1) < 1e-9))


def _prepared(g, diagonal: bool) -> tuple:
    """A fused gate as ``(kind, matrix or diagonal, qubits, controls, ctrl_state)``."""
    controls = getattr(g, "controls", 0)
    if controls:
        return ("controlled", np.asarray(g.target, dtype=np.complex128), tuple(g.qubits),
                controls, tuple(int(b) for b in g.ctrl_state))
    mat = np.asarray(g.matrix, dtype=np.complex128)
    if diagonal:
        return ("diagonal", np.ascontiguousarray(np.diagonal(mat)), tuple(g.qubits), 0, ())
    return ("dense", mat, tuple(g.qubits), 0, ())


def _halves(state: np.ndarray, n: int, q: int) -> np.ndarray:
    """The state as ``(2^(n-1-q), 2, 2^q)``: ``[:, b, :]`` holds the amplitudes with qubit
    ``q`` at ``b``."""
    return state.reshape(1 << (n - 1 - q), 2, 1 << q)


def _half_norms(state: np.ndarray, n: int, q: int) -> tuple[float, float]:
    """``(|s restricted to qubit q = 0|^2, ... = 1|^2)``, reading the state's real and
    imaginary parts as runs of ``2^(q+1)`` numbers: long runs reduced where they lie, short
    ones squared first and summed down the columns (one GEMV)."""
    f = state.view(np.float64)
    inner = 2 << q
    if q >= 4:
        p = np.einsum("ijk,ijk->j", *(f.reshape(-1, 2, inner),) * 2)
        return float(p[0]), float(p[1])
    rows = (f * f).reshape(-1, 2 * inner)
    columns = np.ones(rows.shape[0]) @ rows
    return float(columns[:inner].sum()), float(columns[inner:].sum())


class Node:
    """A trajectory at a branch point: the state, the next op and the classical wires.

    ``dropped`` maps each qubit measured for the last time to its outcome: it has left
    the state, which holds the others (``alive``, ascending; bit ``i`` of the state's
    index is qubit ``alive[i]``, at position ``where[alive[i]] = i``)."""

    __slots__ = ("state", "pos", "wires", "dropped", "alive", "where")

    def __init__(self, state: np.ndarray, pos: int, wires: list[int],
                 dropped: dict | None = None, alive: tuple = ()) -> None:
        self.state, self.pos, self.wires = state, pos, wires
        self.dropped = dropped or {}
        self.alive = alive
        self.where = {q: i for i, q in enumerate(alive)} if self.dropped else None

    @property
    def width(self) -> int:
        """The state's qubits."""
        return int(self.state.size).bit_length() - 1

    def position(self, q: int) -> int:
        return q if self.where is None else self.where[q]

    def drop(self, q: int, bit: int, rest: np.ndarray, n: int) -> None:
        """Qubit ``q`` leaves with value ``bit``; ``rest`` is the state of the others."""
        if not self.dropped:
            self.alive = tuple(range(n))
        self.dropped[q] = bit
        self.alive = tuple(x for x in self.alive if x != q)
        self.where = {x: i for i, x in enumerate(self.alive)}
        self.state = rest

    def copy(self) -> Node:
        return Node(self.state.copy(), self.pos, list(self.wires), dict(self.dropped),
                     self.alive)


class Kept:
    """The states kept between branch prefixes, every binding's together: at most
    ``states`` of them, the least recently used dropped first."""

    def __init__(self, states: int) -> None:
        self.states = max(1, states)
        self.nodes: OrderedDict[tuple, Node] = OrderedDict()

    def get(self, key: tuple) -> Node | None:
        node = self.nodes.get(key)
        if node is not None:
            self.nodes.move_to_end(key)
        return node

    def put(self, key: tuple, node: Node) -> None:
        self.nodes[key] = node
        self.nodes.move_to_end(key)
        while len(self.nodes) > self.states:
            self.nodes.popitem(last=False)


class Binding:
    """One binding's program, the ``p0`` of every branch prefix met and the values read
    on each branch; its states are kept in ``kept`` under ``(b, prefix)``."""

    def __init__(self, program: Program, kept: Kept, b: int) -> None:
        self.program = program
        self.p0: dict[tuple, float] = {}
        self.kept = kept
        self.b = b
        self.values: dict[tuple, float] = {}
        self.simulated = 0  # branch points simulated (not read from the cache)
        #: a work buffer per state size (:func:`~qsimdist.executors.statevector.apply_gates`)
        self.spares: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ running
    def start(self) -> Node:
        p = self.program
        if p.first is not None:
            from ..executors import simulate

            gates, flags = p.first
            # numpy's GEMMs: on these narrow states the compiled in-place kernel took 5-8x
            # as long (shors_nine_qubit_code, 17 qubits, 12 fused gates: 159 ms against 19)
            kernel = "numpy" if p.n < NUMPY_KERNEL_BELOW else "auto"
            state = simulate(p.n, gates, 0.0, "complex128", diagonal=flags, kernel=kernel)
            state = np.array(state, dtype=np.complex128, copy=True)
            node = Node(state, 1, [0] * p.wires)
        else:
            state = np.zeros(1 << p.n, dtype=np.complex128)
            state[0] = 1.0
            node = Node(state, 0, [0] * p.wires)
        self.advance(node)
        return node

    def advance(self, node: Node) -> None:
        """Run ``node`` to its next branch point (or the end)."""
        ops, n, wires = self.program.ops, self.program.n, node.wires
        pos = node.pos
        while pos < len(ops):
            op = ops[pos]
            kind = op[0]
            if kind == OP_GATES:
                if all(wires[w] == v for w, v in op[1]):
                    gates = self.program.segments[op[2]]
                    width = n
                    if node.where is not None:
                        where, width = node.where, node.width
                        gates = [(g[0], g[1], tuple(where[q] for q in g[2]), g[3], g[4])
                                 for g in gates]
                    size = node.state.size
                    node.state, spare = apply_gates(node.state, width, gates,
                                                    self.spares.pop(size, None),
                                                    one_blas_thread=False)
                    if spare is not None:
                        self.spares[size] = spare
            elif kind == OP_FLAG_ALL:
                wires[op[1]] = int(all(wires[w] == v for w, v in op[2]))
            elif kind == OP_FLAG_TABLE:
                wires[op[1]] = int(op[3][sum(wires[w] << i for i, w in enumerate(op[2]))])
            else:
                break
            pos += 1
        node.pos = pos

    def branch_p0(self, node: Node, tol: float) -> float:
        """The clamped probability of outcome 0 at ``node``'s branch point, given its
        prefix."""
        op = self.program.ops[node.pos]
        wires = node.wires
        if not all(wires[w] == v for w, v in op[3]):  # the condition fails: a sure outcome
            old = op[4] if op[0] == OP_MEASURE else None
            return 0.0 if old is not None and wires[old] else 1.0
        if op[1] in node.dropped:  # measured again, untouched since: the same outcome
            return 0.0 if node.dropped[op[1]] else 1.0
        p0, p1 = _half_norms(node.state, node.width, node.position(op[1]))
        p0 = p0 / (p0 + p1)
        if p0 < tol:
            return 0.0
        if p0 > 1 - tol:
            return 1.0
        return p0

    def take(self, node: Node, bit: int) -> None:
        """Take outcome ``bit`` at ``node``'s branch point, then run to the next one."""
        op = self.program.ops[node.pos]
        wires = node.wires
        if op[1] in node.dropped:
            if bit != node.dropped[op[1]]:
                raise ExecutionError(f"the sampled outcome {bit} of a measurement has "
                                     "probability 0")
        elif all(wires[w] == v for w, v in op[3]):
            width, q = node.width, node.position(op[1])
            norm = _half_norms(node.state, width, q)[bit]
            halves = _halves(node.state, width, q)
            keep = halves[:, bit, :]
            if norm <= 0:
                raise ExecutionError(f"the sampled outcome {bit} of a reset or measurement "
                                     "has probability 0")
            keep *= 1.0 / math.sqrt(norm)
            if op[0] == OP_MEASURE and op[5] and width > 1:  # the qubit leaves the state
                node.drop(op[1], bit, np.ascontiguousarray(keep).reshape(-1), self.program.n)
            elif op[0] == OP_RESET and bit:  # the reset qubit goes back to |0>
                halves[:, 0, :] = keep
                halves[:, 1, :] = 0
            else:
                halves[:, 1 - bit, :] = 0
        wires[op[2]] = bit
        node.pos += 1
        self.advance(node)
        self.simulated += 1

    # ------------------------------------------------------------------ the cache
    def keep(self, prefix: tuple, node: Node) -> None:
        self.kept.put((self.b, prefix), node)

    def kept_at(self, prefix: tuple) -> Node | None:
        return self.kept.get((self.b, prefix))

    def node_at(self, prefix: tuple) -> Node:
        """A fresh copy of the trajectory at ``prefix``: from the deepest kept ancestor,
        replaying the outcomes after it."""
        for j in range(len(prefix), -1, -1):
            found = self.kept_at(prefix[:j])
            if found is not None:
                node = found.copy()
                break
        else:
            j, node = 0, None
        if node is None:
            node = self.start()
            if self.program.branches:
                self.keep((), node.copy())
        for bit in prefix[j:]:
            self.take(node, bit)
        return node


def compile_program(qc) -> Program | None:
    """The trajectory program of a bound circuit, or ``None`` where it cannot be compiled
    (unbound parameters, loops, ``switch``...: the lowered path accepts it or says why
    not)."""
    if qc.parameters:
        return None
    try:
        compiler = _Compiler(qc)
        compiler.walk(qc, list(range(qc.num_qubits)), list(range(qc.num_clbits)), (),
                      top=True)
        return Program(compiler)
    except Exception:  # noqa: BLE001 - the lowered path accepts it or says why not
        return None


class Trajectories:
    """The trajectory route of one pub (see the module docstring): :meth:`takes` says
    whether a binding runs here, :meth:`draw` samples an element's branch in the
    element order (consuming the generator as the lowered path would), and
    :meth:`fill` reads every element's terms, a branch's together."""

    def __init__(self, engine, pub, rng: np.random.Generator, lowered,
                 cache_bytes: int = CACHE_BYTES) -> None:
        self.engine = engine
        self.pub = pub
        self.rng = rng
        self.lowered = lowered  # binding -> (LoweredCircuit, GateCircuit) of the other path
        self.n = pub.circuit.num_qubits
        self.tol = 1e-10 if engine.dtype == "complex128" else 1e-5
        self.bindings: dict[int, Binding | None] = {}
        self.elements: list[tuple] = []  # (index, binding, branch, observable, noise)
        self.kept = Kept(min(CACHE_BYTES, cache_bytes) // (16 << self.n))
        self.seconds = 0.0

    def takes(self, b: int) -> bool:
        """Whether binding ``b`` runs as trajectories (compiled on first ask)."""
        if b not in self.bindings:
            t0 = time.perf_counter()
            self.bindings[b] = self._prepare(b)
            self.seconds += time.perf_counter() - t0
        return self.bindings[b] is not None

    def _prepare(self, b: int) -> Binding | None:
        params = self.pub.parameter_values
        where = (tuple(int(i) for i in np.unravel_index(b, params.shape))
                 if params.shape else ())
        try:
            bound = params.bind(self.pub.circuit, where)
        except Exception:  # noqa: BLE001 - the lowered path accepts it or says why not
            return None
        program = compile_program(bound)
        if program is None:
            return None
        if program.may_be_clifford():
            from ..engine.stabilizer import to_stabilizer

            if to_stabilizer(self.lowered(b)[1]) is not None:
                return None  # a Clifford circuit keeps the stabilizer route
        return Binding(program, self.kept, b)

    def draw(self, index: tuple, b: int, o: int, precision: float) -> None:
        """Sample element ``index``'s branch of binding ``b`` (and its noise, where the
        precision is positive); its values are read by :meth:`fill`."""
        with blas_threads(1):  # once here, not per segment (see apply_gates)
            self._draw(index, b, o, precision)

    def _draw(self, index: tuple, b: int, o: int, precision: float) -> None:
        t0 = time.perf_counter()
        binding = self.bindings[b]
        branch: tuple[int, ...] = ()
        prob = 1.0
        node = None
        for _ in range(binding.program.branches):
            p0 = binding.p0.get(branch)
            if p0 is None:
                if node is None:
                    node = binding.node_at(branch)
                p0 = binding.p0[branch] = binding.branch_p0(node, self.tol)
                if 0.0 < p0 < 1.0 and binding.kept_at(branch) is None:
                    binding.keep(branch, node.copy())  # the other outcome may come
            joint = prob if p0 == 1.0 else prob * p0
            bit = 0 if self.rng.random() * prob < joint else 1
            prob = joint if bit == 0 else prob - joint
            if node is not None:
                binding.take(node, bit)
            branch = (*branch, bit)
        if node is not None and binding.kept_at(branch) is None:
            binding.keep(branch, node)
        noise = self.rng.normal(0.0, precision) if precision != 0 else None
        self.elements.append((index, b, branch, o, noise))
        self.seconds += time.perf_counter() - t0

    def fill(self, evs: np.ndarray, flat_obs) -> None:
        """Every drawn element's value into ``evs``: the terms of each (binding, branch)
        read together off its final state."""
        with blas_threads(1):
            self._fill(evs, flat_obs)

    def _fill(self, evs: np.ndarray, flat_obs) -> None:
        t0 = time.perf_counter()
        wanted: dict[tuple, dict[str, None]] = {}
        for _, b, branch, o, _ in self.elements:
            labels = wanted.setdefault((b, branch), {})
            for label in flat_obs[o]:
                if set(label) != {"I"} and (branch, label) not in self.bindings[b].values:
                    labels.setdefault(label, None)
        terms = 0
        for (b, branch), labels in wanted.items():
            if not labels:
                continue
            binding = self.bindings[b]
            node = binding.kept_at(branch)
            if node is None or node.pos != len(binding.program.ops):
                node = binding.node_at(branch)
            order = list(labels)
            got = read_labels(node, self.n, order)
            for lb, v in zip(order, got):
                binding.values[(branch, lb)] = float(v)
            terms += len(order)
        for index, b, branch, o, noise in self.elements:
            values = self.bindings[b].values
            ev = float(sum(float(c) * (1.0 if set(lb) == {"I"} else values[(branch, lb)])
                           for lb, c in flat_obs[o].items()))
            evs[index] = ev if noise is None else ev + noise
        self.seconds += time.perf_counter() - t0
        if self.elements:
            st = self.engine.stats
            st.terms += terms
            st.statevector_terms += terms
            st.execute_seconds += self.seconds
            self.engine.route = {
                "method": "trajectory",
                "reason": "a dynamic circuit's branches simulated on its own qubits",
                "executor": "local", "engine": "qsimdist", "qubits": self.n,
                "branch_points_simulated": sum(x.simulated for x in self.bindings.values()
                                               if x is not None),
            }


def read_labels(node: Node, n: int, labels: list[str]) -> list[float]:
    """``<s|T|s>`` for each term label (Qiskit's order, ``n`` characters of
    :data:`~qsimdist.engine.pauli_terms.SINGLE_QUBIT_OPERATORS`) on a finished
    trajectory's normalised state; a qubit that left the state contributes its
    operator's value on its outcome (``<b|op|b>``: Z gives +-1, X and Y 0)."""
    from ..engine.pauli_terms import SINGLE_QUBIT_OPERATORS, parse_term

    if not node.dropped:
        return _read_terms(node.state, n, [parse_term(lb, n) for lb in labels])
    width = node.width
    values = [0.0] * len(labels)
    reduced: list[str] = []
    at: list[int] = []
    for i, label in enumerate(labels):
        factor = 1.0
        for q, bit in node.dropped.items():
            c = label[n - 1 - q]
            if c != "I":
                factor *= float(SINGLE_QUBIT_OPERATORS[c][bit, bit].real)
        if factor == 0.0:
            continue
        values[i] = factor
        reduced.append("".join(label[n - 1 - q] for q in reversed(node.alive)))
        at.append(i)
    if reduced:
        got = _read_terms(node.state, width, [parse_term(lb, width) for lb in reduced])
        for i, v in zip(at, got):
            values[i] *= v
    return values


def _read_terms(state: np.ndarray, n: int, terms: list) -> list[float]:
    """``<s|T|s>`` for each term on a normalised flat state (Qiskit's order)."""
    from ..engine.pauli_terms import PAULI_ACTION
    from ..engine.term_readers import (
        diagonal_terms_on_state,
        is_diagonal_term,
        pauli_on_state,
        term_on_state,
    )

    values = [1.0] * len(terms)
    diagonal = [i for i, t in enumerate(terms) if t.qubits and is_diagonal_term(t)]
    for i, v in zip(diagonal, diagonal_terms_on_state(state, [terms[i] for i in diagonal])):
        values[i] = float(v)
    others = [i for i, t in enumerate(terms) if t.qubits and i not in set(diagonal)]
    if others:
        tensor = state.reshape((2,) * n)
        conj = tensor.conj()
        work: dict = {}
        for i in others:
            t = terms[i]
            axes = [n - 1 - q for q in t.qubits]
            if set(t.ops) <= set(PAULI_ACTION):
                values[i] = float(pauli_on_state(tensor, conj, axes, t.ops, None, work))
            else:
                values[i] = float(term_on_state(tensor, axes, t.ops))
    return values


def route_allowed(backend: str, executor: str, method: str, n: int) -> bool:
    """Whether a trajectory route (the estimator's, the sampler's tree) may run at all:
    the switch on, numpy, method ``auto`` (a method asked for by name runs on the lowered
    circuit), one process, and ``1 <= n <=`` :data:`MAX_QUBITS`."""
    if not ENABLED or backend != "numpy" or method != "auto":
        return False
    from ..executors import executor_kind

    return not executor_kind(executor).distributed and 1 <= n <= MAX_QUBITS


def cache_room(n: int, bound: int | None) -> int | None:
    """Bytes a trajectory route may keep in states beside its :data:`WORK_STATES`
    working ones under a memory bound (``None``: unbounded), at most
    :data:`CACHE_BYTES`; ``None`` where not even the working states fit."""
    need = WORK_STATES * (16 << n)
    if bound is None:
        return CACHE_BYTES
    if need > bound:
        return None
    return min(CACHE_BYTES, bound - need)


def trajectories_for(engine, pub, rng: np.random.Generator, lowered) -> Trajectories | None:
    """The trajectory route for ``pub`` where it may be taken at all (:func:`route_allowed`,
    and the states within the memory budget), else ``None``; bindings are checked one by
    one (:meth:`Trajectories.takes`). ``lowered(b)``: binding ``b``'s lowered circuit, for
    the Clifford check."""
    n = pub.circuit.num_qubits
    if not route_allowed(engine.backend, engine.executor, engine.method, n):
        return None
    cache: int | None = CACHE_BYTES
    if engine.memory_limit is not None or WORK_STATES * (16 << n) > UNCHECKED_BYTES:
        from ..engine.memory import MemoryBudget

        cache = cache_room(n, MemoryBudget.resolve(engine.memory_limit, engine.comm).bound)
        if cache is None:
            return None
    return Trajectories(engine, pub, rng, lowered, cache)


__all__ = ["ENABLED", "MAX_QUBITS", "Trajectories", "cache_room", "route_allowed",
           "trajectories_for"]
