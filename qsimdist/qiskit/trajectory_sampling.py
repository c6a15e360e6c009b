"""A dynamic circuit's shots as a tree of trajectories (``SamplerV2``).

The deferred-measurement circuit (:func:`~qsimdist.qiskit.dynamic.lower_circuit`)
holds one more qubit per mid-circuit measurement or reset: MQT Bench's 20-qubit
iterative phase estimation (2 qubits, 19 measurements) becomes a 21-qubit state.
Here the circuit's own ``n``-qubit state is evolved instead (the trajectory
program of :mod:`qsimdist.qiskit.trajectory`), and the shots are split as they
go, as a measurement splits them:

- all shots start at the root; at a branch point whose condition holds, the
  probability ``p0`` of the qubit's outcome 0 is read off the state, and
  ``Binomial(shots, p0)`` of the shots take outcome 0, the rest outcome 1 (where
  the condition fails, every shot takes the outcome the lowering holds for
  certain);
- a qubit measured for the last time leaves the state, which halves (see
  :mod:`qsimdist.qiskit.trajectory`), so deep branches are cheap;
- a branch both of whose outcomes have shots keeps a copy of its state for the
  second one, depth first, so that at most one copy per level is held (beyond
  the memory limit's room the second outcome is replayed from the start);
- at a leaf, the final state's marginal over the finally measured qubits is
  drawn once per shot of that leaf; every clbit is then the leaf's wire, the
  drawn bit or 0;
- the rows are finally put in a uniformly random order, so the shots are
  independent draws in order as well as in their counts (a multinomial split
  of the shots followed by a random order is exactly ``shots`` independent
  draws of the joint distribution).

Price against the lowered circuit. The work of a tree grows with its leaves:
where every outcome is random (a dynamic QFT) the tree of ``shots`` leaves can
cost far more than one run of the lowered circuit; where the outcomes are nearly
certain (syndromes of an error-free code) it is one trajectory. The route is
tried where one trajectory is predicted at most :data:`TRY_SHARE` of the lowered
circuit's statevector run (both from the statevector cost model's constants,
:mod:`qsimdist.hardware.costs`, predicted), and abandoned (the lowered route then
runs) as soon as the tree's predicted work passes the lowered run's: the bound
is about twice the lowered route's time where the tree loses, and the tree's own
time where it wins. The tree draws from a generator seeded by one number of the
run's generator, so one seed gives the same shots either way.

Taken where the estimator's trajectory route is (:func:`trajectory_sampler_for`):
one process, numpy, method ``auto``, at most :data:`~qsimdist.qiskit.trajectory.MAX_QUBITS`
qubits, a circuit that measures mid-circuit, resets or branches, compiles, and is
not Clifford (the stabilizer route samples those).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..hardware import costs
from . import trajectory as _trajectory
from .trajectory import LIVE, OP_GATES, OP_MEASURE, OP_RESET, Binding, Kept, Node, Program

#: set False to sample every dynamic circuit on its lowered (deferred-measurement) form
ENABLED = True
#: the tree is tried where one trajectory is predicted at most this share of the lowered run
TRY_SHARE = 0.25
#: the tree is abandoned once its predicted work passes this share of the lowered run
ABANDON_SHARE = 1.0
#: the widest lowered circuit priced as a statevector (wider: the lowered route is a tensor
#: network, priced as unbounded here)
LOWERED_STATEVECTOR_QUBITS = 32

_NON_UNITARY = frozenset({"reset", "if_else", "box", "while_loop", "for_loop", "switch_case"})


def may_be_dynamic(qc) -> bool:
    """Whether a circuit measures a qubit it then uses, resets or branches (its top
    level; ``False`` means certainly not, so nothing is compiled for it). Where every
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
        elif name not in ("barrier", "delay"):
            break
    if closing == total:
        return False
    measured: set = set()
    for inst in qc.data:
        name = inst.operation.name
        if name == "measure":
            measured.update(inst.qubits)
        elif name not in ("barrier", "delay") and measured.intersection(inst.qubits):
            return True
    return False


@dataclass
class TreeSample:
    """A tree's shots: every clbit's value, and the route's report.

    Attributes:
        clbits: ``shots x num_clbits`` uint8; column ``j`` is clbit ``j``.
        route: the route's report (method ``trajectory``, leaves, predicted seconds).
        qubits: the circuit's qubits (the state's width).
        measured: the qubits finally measured.
    """

    clbits: np.ndarray
    route: dict
    qubits: int
    measured: list[int]


class _Prices:
    """Predicted seconds of a program's work (the statevector cost model's constants),
    the state halving after each measurement that drops its qubit."""

    def __init__(self, program: Program) -> None:
        over = costs.GATE_OVERHEAD_SECONDS
        width = program.n
        self.cum = [0.0]  # cum[i]: ops[:i], their gates and branch points
        for op in program.ops:
            size = float(1 << width)
            step = 0.0
            if op[0] == OP_GATES:
                dense = over + costs.DENSE_SECONDS_PER_ELEMENT * size
                diagonal = over + costs.DIAGONAL_SECONDS_PER_ELEMENT * size
                step = sum(diagonal if g[0] == "diagonal" else dense
                           for g in program.segments[op[2]])
            elif op[0] in (OP_MEASURE, OP_RESET):  # reading p0 and projecting: two passes
                step = over + 2 * costs.MARGINAL_SECONDS_PER_ELEMENT * size
                if op[0] == OP_MEASURE and op[5] and width > 1:
                    width -= 1
            self.cum.append(self.cum[-1] + step)
        self.leaf = over + costs.MARGINAL_SECONDS_PER_ELEMENT * float(1 << width)
        self.one = self.cum[-1] + self.leaf
        nl = program.lowered_qubits
        if nl > LOWERED_STATEVECTOR_QUBITS:
            self.lowered = math.inf
        else:
            gates = sum(len(seg) for seg in program.segments) + 2 * program.branches
            self.lowered = gates * (over + costs.DENSE_SECONDS_PER_ELEMENT * float(1 << nl))

    def between(self, start: int, end: int) -> float:
        """The ops ``start`` (a branch point) to ``end`` (the next one or the end)."""
        return self.cum[end] - self.cum[start]

    @staticmethod
    def copy(node: Node) -> float:
        return costs.MARGINAL_SECONDS_PER_ELEMENT * float(node.state.size)


class _Abandoned(Exception):
    """The tree's predicted work passed the lowered circuit's."""


class _Tree:
    """The depth-first walk of one binding's tree (see the module docstring)."""

    def __init__(self, binding: Binding, prices: _Prices, rng: np.random.Generator,
                 tol: float, held_states: int, budget: float) -> None:
        self.binding = binding
        self.program = binding.program
        self.prices = prices
        self.rng = rng
        self.tol = tol
        self.held_states = held_states
        self.budget = budget
        self.spent = 0.0
        self.held = 0
        self.leaves: list[tuple[list[int], np.ndarray, int]] = []  # (wires, bits, shots)
        self.measured = sorted(set(self.program.finals.values()))

    def charge(self, seconds: float) -> None:
        self.spent += seconds
        if self.spent > self.budget:
            raise _Abandoned

    def take(self, node: Node, bit: int) -> None:
        start = node.pos
        self.binding.take(node, bit)
        self.charge(self.prices.between(start, node.pos))

    def replay(self, prefix: tuple) -> Node:
        node = self.binding.start()
        self.charge(self.prices.between(0, node.pos))
        for bit in prefix:
            self.take(node, bit)
        return node

    def run(self, shots: int) -> None:
        pending: list[tuple[tuple, int, Node | None]] = [((), shots, None)]
        while pending:
            prefix, count, node = pending.pop()
            if node is None:  # the root, or a second outcome whose parent was not kept
                node = self.replay(prefix)
            else:  # the parent's copy: take the second outcome
                self.held -= 1
                self.take(node, prefix[-1])
            self.walk(node, prefix, count, pending)

    def walk(self, node: Node, prefix: tuple, count: int, pending: list) -> None:
        """Follow ``node`` (holding ``count`` shots) to its leaves: the first outcome
        with shots now, the second pushed on ``pending`` (with a copy where room is)."""
        ops = self.program.ops
        while node.pos < len(ops):
            p0 = self.binding.branch_p0(node, self.tol)
            zeros = count if p0 == 1.0 else 0 if p0 == 0.0 else int(self.rng.binomial(count, p0))
            if 0 < zeros < count:
                copy = None
                if self.held < self.held_states:
                    copy = node.copy()
                    self.held += 1
                    self.charge(self.prices.copy(node))
                pending.append(((*prefix, 1), count - zeros, copy))
                bit, count = 0, zeros
            else:
                bit = 0 if zeros else 1
            self.take(node, bit)
            prefix = (*prefix, bit)
        self.leaf(node, count)

    def leaf(self, node: Node, count: int) -> None:
        from ..engine.state_sampling import draw_rows, marginal_of_state

        self.charge(self.prices.leaf + costs.DRAW_SECONDS_PER_SHOT * count)
        bits = np.zeros((count, len(self.measured)), dtype=np.uint8)
        live = [k for k, q in enumerate(self.measured) if q not in node.dropped]
        for k, q in enumerate(self.measured):
            if q in node.dropped:  # measured mid-circuit for the last time: its outcome
                bits[:, k] = node.dropped[q]
        if live:
            p = marginal_of_state(node.state, [node.position(self.measured[k]) for k in live])
            bits[:, live], _ = draw_rows(p, self.rng.random(count), len(live))
        self.leaves.append((list(node.wires), bits, count))

    def rows(self, shots: int) -> np.ndarray:
        """Every clbit of every shot, the leaves' rows in a random order."""
        sources, finals = self.program.sources, self.program.finals
        column = {q: k for k, q in enumerate(self.measured)}
        out = np.zeros((shots, len(sources)), dtype=np.uint8)
        at = 0
        for wires, bits, count in self.leaves:
            block = out[at:at + count]
            for j, src in enumerate(sources):
                if src == LIVE:
                    block[:, j] = bits[:, column[finals[j]]]
                elif src is not None:
                    block[:, j] = wires[src]
            at += count
        return out[self.rng.permutation(shots)]


def compile_program(qc) -> Program | None:
    """The trajectory program of a bound circuit, or ``None`` where it cannot be compiled
    or has no branch point (the lowered path accepts it or says why not)."""
    program = _trajectory.compile_program(qc)
    return program if program is not None and program.branches else None


def trajectory_sampler_for(contractor, method: str, qc) -> bool:
    """Whether the tree may be tried for ``qc`` at all: this module's switch, the
    trajectory routes' conditions (:func:`~qsimdist.qiskit.trajectory.route_allowed`) and
    a circuit that may be dynamic."""
    return (ENABLED and _trajectory.route_allowed(contractor.backend, contractor.executor,
                                                  method, qc.num_qubits)
            and may_be_dynamic(qc))


def sample_tree(qc, shots: int, rng: np.random.Generator, contractor,
                is_clifford) -> TreeSample | None:
    """``shots`` of a bound dynamic circuit by the tree, or ``None`` where the lowered
    route is to run instead (not compiled, Clifford, not predicted cheaper, abandoned, or
    no room in memory). ``is_clifford()``: whether the lowered circuit is Clifford (asked
    only of programs that may be). Consumes one number of ``rng`` once the tree is tried."""
    import time

    if shots <= 0:
        return None
    t0 = time.perf_counter()
    program = compile_program(qc)
    if program is None:
        return None
    if program.may_be_clifford() and is_clifford():
        return None  # the stabilizer route samples it
    prices = _Prices(program)
    if prices.one > TRY_SHARE * prices.lowered:
        return None
    held = _held_states(contractor, program.n)
    if held is None:
        return None
    tree_rng = np.random.default_rng(int(rng.integers(2**63)))
    binding = Binding(program, Kept(1), 0)
    tol = 1e-10 if contractor.dtype == "complex128" else 1e-5
    tree = _Tree(binding, prices, tree_rng, tol, held, ABANDON_SHARE * prices.lowered)
    from ..executors import blas_threads

    try:
        with blas_threads(1):  # once here, not per segment
            tree.run(shots)
    except _Abandoned:
        return None
    clbits = tree.rows(shots)
    route = {
        "method": "trajectory",
        "reason": "a dynamic circuit's shots split over its branches on its own qubits",
        "executor": "local", "engine": "qsimdist", "qubits": program.n,
        "leaves": len(tree.leaves), "branch_points_simulated": binding.simulated,
        "predicted_seconds": tree.spent, "lowered_predicted_seconds": prices.lowered,
        "lowered_qubits": program.lowered_qubits,
        "seconds": time.perf_counter() - t0,
    }
    return TreeSample(clbits, route, program.n, tree.measured)


def _held_states(contractor, n: int) -> int | None:
    """How many states of ``n`` qubits the tree may hold beside its working ones
    (:func:`~qsimdist.qiskit.trajectory.cache_room` under the contractor's budget;
    ``None``: not even the working states fit)."""
    room = _trajectory.cache_room(n, contractor.budget.bound)
    return None if room is None else room // (16 << n)


__all__ = ["ABANDON_SHARE", "ENABLED", "TRY_SHARE", "TreeSample", "may_be_dynamic", "sample_tree",
           "trajectory_sampler_for"]
