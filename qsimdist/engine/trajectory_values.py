"""A dynamic circuit's expectation values (``EstimatorV2``): each element one branch.

Each element of a pub's broadcast shape draws one branch of its circuit (the outcomes of
its mid-circuit measurements and resets, each from its probability given the outcomes
before it, as Qiskit's ``StatevectorEstimator`` samples a reset's outcome) and takes the
value of its observable on that branch. Two routes give the same draws and values:

- **deferred measurement** (:class:`BranchValues`): the lowered circuit
  (:func:`~qsimdist.frontends.lowering.lower_circuit` with ``collapse=True``), whose
  branch wires are fixed to the drawn outcomes; the probability of every branch prefix
  and the value of every term on every drawn branch are valued by the term engine
  (:class:`~qsimdist.engine.expectation.ExpectationEngine`) once per binding;
- **trajectory** (:class:`Trajectories`): the circuit's own qubits' state, measured,
  projected and drawn as the circuit goes (:mod:`qsimdist.engine.trajectory`): at a
  branch point the outcome is drawn as the lowered route draws it (``rng.random() *
  prob < p0`` on joint probabilities, with the same clamps), where the condition fails
  the outcome is the one the lowered branch wire holds for certain, still drawn, so the
  generator is consumed alike; the terms are read off the final normalised state.

The router (:func:`~qsimdist.engine.router.route_dynamic`) picks the route per binding
under the call's resolved options: one process, numpy, method ``auto``, working states
within the memory budget, a circuit it can compile whose lowered form is not Clifford
(those keep the stabilizer route), one trajectory predicted no dearer than the lowered
circuit's run. Anything else (loops, ``switch``, unbound parameters) returns to the
lowered route, which accepts or refuses it as before. The trajectories report what
they spent and the route they took (:class:`TrajectoryReport`); the caller puts them in
the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ExecutionError, shorten
from ..executors import blas_threads
from ..frontends.lowering import lower_circuit
from ..frontends.qiskit_circuit import from_qiskit
from .dynamic_prices import TrajectoryPrices, states_kept, trajectories_refused
from .pauli_terms import PauliTerm, parse_term
from .router import route_dynamic
from .trajectory import Binding, Kept, Node, compile_program

if TYPE_CHECKING:
    from ..frontends.circuit import GateCircuit
    from ..frontends.lowering import LoweredCircuit
    from .expectation import ExpectationEngine
    from .options import RunOptions
    from .route import DynamicRoute


@dataclass
class TrajectoryReport:
    """What a pub's trajectories did: ``stats`` (``terms``, ``statevector_terms``,
    ``execute_seconds``: the term engine's statistics they add to) and ``route`` (the
    router's :class:`~qsimdist.engine.route.DynamicRoute` as a dict, with
    ``branch_points_simulated``)."""

    stats: dict
    route: dict

    def added_to(self, spent: dict) -> dict:
        """``spent`` (a pub's statistics) with these added."""
        out = dict(spent)
        for k, v in self.stats.items():
            out[k] = out.get(k, 0) + v
        return out


class BranchValues:
    """Values of a pub whose circuit has resets, mid-circuit measurements or conditions.

    Each element of the broadcast shape draws one branch: the branch wires of the
    lowered circuit (:class:`~qsimdist.frontends.lowering.LoweredCircuit`), outcome by
    outcome, each from its probability given the outcomes before it. The probability
    of every branch prefix and the value of every term on every drawn branch are
    contracted once per binding, however many elements meet them.
    """

    def __init__(self, engine: ExpectationEngine, pub, rng: np.random.Generator,
                 run: RunOptions | None = None) -> None:
        self.engine = engine
        self.pub = pub
        self.rng = rng
        self.n = pub.circuit.num_qubits
        # a probability below this fraction of its prefix's is taken as zero (rounding)
        self.tol = 1e-10 if engine.dtype == "complex128" else 1e-5
        self.lowered: dict[int, tuple[LoweredCircuit, GateCircuit]] = {}
        self.joint: dict[tuple, float] = {}   # (binding, branch prefix) -> its probability
        self.values: dict[tuple, float] = {}  # (binding, branch, label) -> <psi|P Pi_b|psi>
        self.terms: dict[str, PauliTerm] = {}
        # where one process holds the state: the branches as trajectories of the circuit's
        # own qubits (:mod:`qsimdist.engine.trajectory`), the same draws and values
        self.trajectories = trajectories_for(engine, pub, rng, self.circuit, run)
        #: what the trajectories spent and their route (:meth:`evs` fills it)
        self.report: TrajectoryReport | None = None

    def circuit(self, b: int) -> tuple[LoweredCircuit, GateCircuit]:
        found = self.lowered.get(b)
        if found is None:
            params = self.pub.parameter_values
            where = (tuple(int(i) for i in np.unravel_index(b, params.shape))
                     if params.shape else ())
            bound = params.bind(self.pub.circuit, where)
            lowered = lower_circuit(bound, collapse=True)
            found = self.lowered[b] = (lowered, from_qiskit(lowered.circuit))
        return found

    def term(self, label: str | None, lowered: LoweredCircuit, branch: tuple) -> PauliTerm:
        """``label`` (on the circuit's qubits; ``None``: the identity) times the projector on
        ``branch``, as one term on the lowered circuit's qubits."""
        ops: dict[int, str] = {}
        if label is not None:
            if label not in self.terms:
                self.terms[label] = parse_term(label, self.n)
            t = self.terms[label]
            ops = {lowered.wires[q]: c for q, c in zip(t.qubits, t.ops)}
        for wire, bit in zip(lowered.branches, branch):
            ops[wire] = "01"[bit]
        qubits = sorted(ops)
        return PauliTerm(tuple(qubits), "".join(ops[q] for q in qubits))

    def draw(self, b: int) -> tuple[tuple[int, ...], float]:
        """One branch of binding ``b`` and its probability."""
        lowered, gc = self.circuit(b)
        branch: tuple[int, ...] = ()
        prob = 1.0
        for _ in lowered.branches:
            key = (b, (*branch, 0))
            p0 = self.joint.get(key)
            if p0 is None:
                p0 = float(self.engine.term_values(gc, [self.term(None, lowered, key[1])])[0])
                if p0 < self.tol * prob:
                    p0 = 0.0
                elif p0 > (1 - self.tol) * prob:
                    p0 = prob
                self.joint[key] = p0
            bit = 0 if self.rng.random() * prob < p0 else 1
            prob = p0 if bit == 0 else prob - p0
            branch = (*branch, bit)
        if prob <= 0:
            raise ExecutionError(
                f"the sampled branch {shorten(branch)} of a reset or measurement has "
                f"probability {prob}; the circuit's probabilities do not add up"
            )
        return branch, prob

    def evs(self, p_of: np.ndarray, o_of: np.ndarray, pairs: dict[int, set[int]],
            precision: float) -> np.ndarray:
        flat_obs = self.pub.observables.ravel()
        evs = np.zeros(self.pub.shape, dtype=np.float64)
        # the branch probabilities and terms of one binding read one final state
        self.engine.keep_state = True
        try:
            self._evs(evs, flat_obs, p_of, o_of, pairs, precision)
        finally:
            self.engine.release_state()
        return evs

    def _evs(self, evs: np.ndarray, flat_obs, p_of: np.ndarray, o_of: np.ndarray,
             pairs: dict[int, set[int]], precision: float) -> None:
        fast = self.trajectories
        for index in np.ndindex(*self.pub.shape):
            b, o = int(p_of[index]), int(o_of[index])
            if fast is not None and fast.takes(b):
                fast.draw(index, b, o, precision)
                continue
            lowered, gc = self.circuit(b)
            branch, prob = self.draw(b)
            needed = flat_obs[o] if lowered.branches else {
                lb: None for j in sorted(pairs[b]) for lb in flat_obs[j]}
            labels = [lb for lb in needed if set(lb) != {"I"}
                      and (b, branch, lb) not in self.values]
            if labels:
                got = self.engine.term_values(
                    gc, [self.term(lb, lowered, branch) for lb in labels])
                for lb, v in zip(labels, got):
                    self.values[(b, branch, lb)] = float(v)
            ev = float(sum(
                float(c) * (1.0 if set(lb) == {"I"} else self.values[(b, branch, lb)] / prob)
                for lb, c in flat_obs[o].items()))
            if precision != 0:
                ev = self.rng.normal(ev, precision)
            evs[index] = ev
        if fast is not None:
            self.report = fast.fill(evs, flat_obs)


class Trajectories:
    """The trajectory route of one pub (see the module docstring): :meth:`takes` says
    whether a binding runs here, :meth:`draw` samples an element's branch in the
    element order (consuming the generator as the lowered path would), and
    :meth:`fill` reads every element's terms, a branch's together."""

    def __init__(self, pub, rng: np.random.Generator, lowered, run: RunOptions,
                 method: str = "auto") -> None:
        self.pub = pub
        self.rng = rng
        self.lowered = lowered  # binding -> (LoweredCircuit, GateCircuit) of the other path
        self.run = run
        self.method = method
        self.n = pub.circuit.num_qubits
        self.tol = 1e-10 if run.dtype == "complex128" else 1e-5
        self.bindings: dict[int, Binding | None] = {}
        self.elements: list[tuple] = []  # (index, binding, branch, observable, noise)
        self.kept = Kept(states_kept(self.n, run.memory.bound))
        self.seconds = 0.0
        #: the router's route of the first binding taken here
        self.route: DynamicRoute | None = None

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

        def is_clifford() -> bool:  # a Clifford circuit keeps the stabilizer route
            from .stabilizer import to_stabilizer

            return program.may_be_clifford() and to_stabilizer(self.lowered(b)[1]) is not None

        route = route_dynamic(TrajectoryPrices(program), shots=False, run=self.run,
                              method=self.method, is_clifford=is_clifford)
        if route.method != "trajectory":
            return None
        if self.route is None:
            self.route = route
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

    def fill(self, evs: np.ndarray, flat_obs) -> TrajectoryReport | None:
        """Every drawn element's value into ``evs``: the terms of each (binding, branch)
        read together off its final state. Returns what the trajectories spent and the
        route they took (``None`` where no element was drawn here): the caller reports
        them, nothing else's statistics are written."""
        with blas_threads(1):
            return self._fill(evs, flat_obs)

    def _fill(self, evs: np.ndarray, flat_obs) -> TrajectoryReport | None:
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
        if not self.elements:
            return None
        simulated = sum(x.simulated for x in self.bindings.values() if x is not None)
        return TrajectoryReport(
            {"terms": terms, "statevector_terms": terms, "execute_seconds": self.seconds},
            dict(self.route.to_dict(), branch_points_simulated=simulated))



def trajectories_for(engine, pub, rng: np.random.Generator, lowered,
                     run: RunOptions | None = None) -> Trajectories | None:
    """The trajectory route for ``pub`` where it may be taken at all
    (:func:`~qsimdist.engine.dynamic_prices.trajectories_refused` under ``run``, the call's
    resolved options: by default the term engine's, ``engine.run``), else ``None``; the
    router decides binding by binding (:meth:`Trajectories.takes`). ``lowered(b)``:
    binding ``b``'s lowered circuit, for the Clifford check."""
    run = run if run is not None else engine.run
    if trajectories_refused(run, engine.method, pub.circuit.num_qubits) is not None:
        return None
    return Trajectories(pub, rng, lowered, run, engine.method)


def read_labels(node: Node, n: int, labels: list[str]) -> list[float]:
    """``<s|T|s>`` for each term label (Qiskit's order, ``n`` characters of
    :data:`~qsimdist.engine.pauli_terms.SINGLE_QUBIT_OPERATORS`) on a finished
    trajectory's normalised state; a qubit that left the state contributes its
    operator's value on its outcome (``<b|op|b>``: Z gives +-1, X and Y 0)."""
    from .pauli_terms import SINGLE_QUBIT_OPERATORS, parse_term

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
    from .pauli_terms import PAULI_ACTION
    from .term_readers import (
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


def dynamic_values(engine: ExpectationEngine, pub, rng: np.random.Generator,
                   precision: float = 0.0, run: RunOptions | None = None,
                   ) -> tuple[np.ndarray, TrajectoryReport | None]:
    """The values of a Qiskit estimator pub whose circuit measures mid-circuit, resets or
    branches: one per element of its broadcast shape, each on a drawn branch (see the module
    docstring), plus the trajectories' report (``None``: every binding ran on the lowered
    circuit, whose statistics and route are the term engine's)."""
    params, observables, shape = pub.parameter_values, pub.observables, pub.shape
    p_of = np.broadcast_to(np.arange(params.size).reshape(params.shape), shape)
    o_of = np.broadcast_to(np.arange(observables.size).reshape(observables.shape), shape)
    pairs: dict[int, set[int]] = {}
    for b, o in zip(p_of.reshape(-1).tolist(), o_of.reshape(-1).tolist()):
        pairs.setdefault(b, set()).add(o)
    values = BranchValues(engine, pub, rng, run)
    evs = values.evs(p_of, o_of, pairs, precision)
    return evs, values.report


__all__ = ["BranchValues", "TrajectoryReport", "Trajectories", "dynamic_values", "read_labels",
           "trajectories_for"]
