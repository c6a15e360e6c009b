"""A dynamic circuit's shots as a tree of trajectories (``SamplerV2``).

The deferred-measurement circuit (:func:`~qsimdist.frontends.lowering.lower_circuit`)
holds one more qubit per mid-circuit measurement or reset: MQT Bench's 20-qubit
iterative phase estimation (2 qubits, 19 measurements) becomes a 21-qubit state.
Here the circuit's own ``n``-qubit state is evolved instead (the trajectory
program of :mod:`qsimdist.engine.trajectory`), and the shots are split as they
go, as a measurement splits them:

- all shots start at the root; at a branch point whose condition holds, the
  probability ``p0`` of the qubit's outcome 0 is read off the state, and
  ``Binomial(shots, p0)`` of the shots take outcome 0, the rest outcome 1 (where
  the condition fails, every shot takes the outcome the lowering holds for
  certain);
- a qubit measured for the last time leaves the state, which halves (see
  :mod:`qsimdist.engine.trajectory`), so deep branches are cheap;
- a branch both of whose outcomes have shots keeps a copy of its state for the
  second one, depth first, so that at most one copy per level is held (beyond
  the memory budget's room the second outcome is replayed from the start);
- at a leaf, the final state's marginal over the finally measured qubits is
  drawn once per shot of that leaf; every clbit is then the leaf's wire, the
  drawn bit or 0;
- the rows are finally put in a uniformly random order, so the shots are
  independent draws in order as well as in their counts (a multinomial split
  of the shots followed by a random order is exactly ``shots`` independent
  draws of the joint distribution).

The router decides whether the tree is tried
(:func:`~qsimdist.engine.router.route_dynamic`, priced by
:mod:`qsimdist.engine.dynamic_prices`): the work of a tree grows with its leaves, so
where every outcome is random (a dynamic QFT) a tree of ``shots`` leaves can cost far
more than one run of the lowered circuit, and where the outcomes are nearly certain
(syndromes of an error-free code) it is one trajectory. A tree tried is abandoned (the
lowered route then runs) as soon as its predicted work passes ``ABANDON_SHARE`` of the
lowered run's: the bound is about twice the lowered route's time where the tree loses,
and the tree's own time where it wins. The tree draws from a generator seeded by one
number of the run's generator, so one seed gives the same shots either way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..hardware import costs
from .dynamic_prices import TrajectoryPrices
from .trajectory import LIVE, Binding, Kept, Node, TrajectoryProgram, compile_program

if TYPE_CHECKING:
    from .options import RunOptions


@dataclass
class TreeSample:
    """A tree's shots: every clbit's value, and the route's report.

    Attributes:
        clbits: ``shots x num_clbits`` uint8; column ``j`` is clbit ``j``.
        route: the router's :class:`~qsimdist.engine.route.DynamicRoute` (``to_dict()``),
            with what the tree did: ``leaves``, ``branch_points_simulated``, its
            ``predicted_seconds`` and its ``seconds``.
        qubits: the circuit's qubits (the state's width).
        measured: the qubits finally measured.
    """

    clbits: np.ndarray
    route: dict
    qubits: int
    measured: list[int]


class _Abandoned(Exception):
    """The tree's predicted work passed the lowered circuit's."""


class _Tree:
    """The depth-first walk of one binding's tree (see the module docstring)."""

    def __init__(self, binding: Binding, prices: TrajectoryPrices, rng: np.random.Generator,
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
        from .state_sampling import draw_rows, marginal_of_state

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


def tree_program(qc) -> TrajectoryProgram | None:
    """The trajectory program of a bound circuit, or ``None`` where it cannot be compiled
    or has no branch point (the lowered path accepts it or says why not)."""
    program = compile_program(qc)
    return program if program is not None and program.branches else None


def sample_tree(qc, shots: int, rng: np.random.Generator, run: RunOptions,
                method: str = "auto", lowered=None) -> TreeSample | None:
    """``shots`` of a bound dynamic circuit by the tree, or ``None`` where the lowered
    route is to run instead: the router's choice
    (:func:`~qsimdist.engine.router.route_dynamic` under ``run``, the call's resolved
    options and memory budget), a circuit that is not dynamic or does not compile, or a
    tree abandoned. ``lowered()``: the deferred-measurement circuit as a
    :class:`~qsimdist.frontends.circuit.GateCircuit`, asked only of programs that may be
    Clifford (the stabilizer route samples those). Consumes one number of ``rng`` once the
    tree is tried."""
    from ..frontends.dynamic import may_be_dynamic
    from .dynamic_prices import ABANDON_SHARE, trajectories_refused
    from .router import route_dynamic

    if shots <= 0 or trajectories_refused(run, method, qc.num_qubits) is not None:
        return None
    if not may_be_dynamic(qc):
        return None
    t0 = time.perf_counter()
    program = tree_program(qc)
    if program is None:
        return None
    prices = TrajectoryPrices(program)

    def clifford() -> bool:
        from .stabilizer import to_stabilizer

        return (program.may_be_clifford() and lowered is not None
                and to_stabilizer(lowered()) is not None)

    route = route_dynamic(prices, shots=True, run=run, method=method, is_clifford=clifford)
    if route.method != "trajectory":
        return None
    tree_rng = np.random.default_rng(int(rng.integers(2**63)))
    binding = Binding(program, Kept(1), 0)
    tol = 1e-10 if run.dtype == "complex128" else 1e-5
    tree = _Tree(binding, prices, tree_rng, tol, route.states_kept,
                 ABANDON_SHARE * prices.deferred(True))
    from ..executors import blas_threads

    try:
        with blas_threads(1):  # once here, not per segment
            tree.run(shots)
    except _Abandoned:
        return None
    clbits = tree.rows(shots)
    report = dict(route.to_dict(), leaves=len(tree.leaves),
                  branch_points_simulated=binding.simulated, predicted_seconds=tree.spent,
                  seconds=time.perf_counter() - t0)
    return TreeSample(clbits, report, program.n, tree.measured)


__all__ = ["TreeSample", "sample_tree", "tree_program"]
