"""A dynamic circuit's branches as trajectories of its own qubits' state.

The deferred-measurement circuit (:func:`~qsimdist.frontends.lowering.lower_circuit`)
holds one more qubit per reset or measurement; a trajectory evolves the circuit's own
``n``-qubit state instead, one branch at a time. The circuit's program (the one walk of
its control flow, :func:`~qsimdist.frontends.dynamic.dynamic_program`) is compiled once
per parameter binding (:func:`compile_program`) into a :class:`TrajectoryProgram`:
unitary segments (each converted with
:func:`~qsimdist.frontends.qiskit_circuit.from_qiskit` and fused once), branch points
(a measurement or reset that the lowering turns into a branch wire, in the lowering's
order) and classical flags; a segment, a measurement and a reset inside a conditional
block carry the block's condition as ``(wire, value)`` pairs on classical wires, exactly
the controls the lowering gives them.

A :class:`Binding` runs it (:class:`Node`: one trajectory at a branch point):

- at a branch point where the condition holds, ``p0`` of the qubit is read off the
  normalised state (:meth:`Binding.branch_p0`, clamped as the lowered route clamps its
  joint probabilities); :meth:`Binding.take` projects and renormalises the state for the
  outcome drawn (a reset then moves an outcome of 1 to ``|0>``); where the condition
  fails the outcome is the one the lowered branch wire holds for certain (the clbit's old
  value; 0 for a reset);
- a measurement after which nothing but measurements uses its qubit (the lowering
  keeps such a qubit in place) takes the qubit out of the state: the state halves, the
  qubit's value is the outcome from then on (a later measurement of it gives the same
  outcome for certain), and a term's operator on it contributes ``<b|op|b>``;
  MQT Bench's dynamic QFT measures every qubit so, and its trajectories shrink to
  nothing;
- segments run on the statevector route's numpy kernel
  (:func:`~qsimdist.executors.statevector.apply_gates`).

States are kept per branch prefix (:class:`Kept`, a bounded cache, least recently used
first out), so a prefix several elements share is simulated once. The estimator's
values (:mod:`qsimdist.engine.trajectory_values`) and the sampler's tree
(:mod:`qsimdist.engine.tree_sampling`) run on these; the router decides when
(:func:`~qsimdist.engine.router.route_dynamic`).
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict

import numpy as np

from ..errors import ExecutionError, UnsupportedInstructionError
from ..executors import apply_gates
from ..frontends.dynamic import (
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
from ..frontends.qiskit_circuit import from_qiskit
from ..frontends.qiskit_instructions import permutation_pattern

#: fused gates of the segments act on at most this many qubits
FUSION_WIDTH = 4
#: the first segment runs on numpy's GEMMs below this many qubits (the statevector
#: route's compiled kernel from there)
NUMPY_KERNEL_BELOW = 20

#: the trajectory ops' kinds: the program's (:mod:`qsimdist.frontends.dynamic`), a
#: ``GATE`` op here running a whole segment
OP_GATES, OP_MEASURE, OP_RESET, OP_FLAG_ALL, OP_FLAG_TABLE = (GATE, MEASURE, RESET, FLAG_ALL,
                                                              FLAG_TABLE)


class _Compiled:
    """A :class:`DynamicProgram` rendered as trajectory ops: the gates grouped into
    segments by their condition (see :class:`TrajectoryProgram`)."""

    def __init__(self, program: DynamicProgram) -> None:
        self.n = program.n
        self.ops: list[tuple] = []
        self.segments: list[tuple[tuple, object]] = []  # (controls, QuantumCircuit)
        self.run: tuple | None = None
        #: whether the lowered circuit may be Clifford (no gate with two classical
        #: controls or more, no measurement or reset inside a condition)
        self.maybe_clifford = True
        for op in program.ops:
            kind = op[0]
            if kind == GATE:
                self.gate(op[1], list(op[2]), op[3])
                continue
            if kind == PHASE:  # a phase on the condition's wires
                self.controlled(len(op[2]))
                continue
            if kind in (MEASURE, RESET, FLAG_ALL, FLAG_TABLE):
                self.run = None  # the next gates start a segment
            if kind == MEASURE:
                _, logical, _, wire, controls, old, final = op
                self.maybe_clifford = self.maybe_clifford and not controls
                # a qubit nothing uses after this measurement leaves the state (its value
                # is the outcome): the trajectory's state halves
                self.ops.append((OP_MEASURE, logical, wire, controls, old, final))
            elif kind == RESET:
                self.maybe_clifford = self.maybe_clifford and not op[3]
                self.ops.append((OP_RESET, op[1], op[2], op[3]))
            elif kind == FLAG_ALL:
                self.controlled(len(op[2]))
                self.ops.append((OP_FLAG_ALL, op[1], op[2]))
            elif kind == FLAG_TABLE:
                _, flag, wires, truth = op
                k = len(wires)
                const = truth[0]
                mask = sum(1 << i for i in range(k) if truth[1 << i] != const)
                if not all(truth[a] == (const ^ (bin(a & mask).count("1") & 1))
                           for a in range(1 << k)):
                    self.maybe_clifford = self.maybe_clifford and k < 2
                self.ops.append((OP_FLAG_TABLE, flag, wires, truth))

    def controlled(self, count: int) -> None:
        if count >= 2:
            self.maybe_clifford = False

    def gate(self, op, qubits: list[int], controls: tuple) -> None:
        from qiskit import QuantumCircuit

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


class TrajectoryProgram:
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

    def __init__(self, program: DynamicProgram) -> None:
        from ..frontends.fusion import diagonal_flags, fuse

        compiler = _Compiled(program)
        self.n = program.n
        self.ops = compiler.ops
        self.wires = program.wires
        self.branches = program.branches
        self.maybe_clifford = compiler.maybe_clifford
        self.sources = list(program.sources)
        self.finals = dict(program.finals)
        #: qubits of the lowered (deferred-measurement) circuit: one more per wire that
        #: is not kept on its own qubit (the sampler's lowering), or one more per wire
        #: (``collapse=True``, the estimator's)
        self.lowered_qubits = self.n + self.wires - program.in_place
        self.collapsed_qubits = self.n + self.wires
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
        from .stabilizer import gate_program, stabilizer_available

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

    def __init__(self, program: TrajectoryProgram, kept: Kept, b: int) -> None:
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


def compile_program(qc) -> TrajectoryProgram | None:
    """The trajectory program of a bound circuit, or ``None`` where it cannot be compiled
    (unbound parameters, loops, ``switch``...: the lowered path accepts it or says why
    not)."""
    if qc.parameters:
        return None
    try:
        return TrajectoryProgram(dynamic_program(qc))
    except Exception:  # noqa: BLE001 - the lowered path accepts it or says why not
        return None


__all__ = ["FUSION_WIDTH", "LIVE", "NUMPY_KERNEL_BELOW", "OP_FLAG_ALL", "OP_FLAG_TABLE",
           "OP_GATES", "OP_MEASURE", "OP_RESET", "Binding", "Kept", "Node", "TrajectoryProgram",
           "compile_program"]
