"""Expectation values ``<psi|P|psi>`` of Pauli terms: the :class:`ExpectationEngine`, the
service an :class:`~qsimdist.engine.engine.Engine` values terms with, keeping plans
between calls (the public functions are in :mod:`qsimdist.engine.expectation_api`).

The engine prices the statevector route against the tensor-network methods
(:mod:`qsimdist.engine.router`): on the statevector route the terms are read
off the full state (:mod:`qsimdist.engine.term_readers`, in the plan of
:mod:`qsimdist.engine.pauli_terms`); the tensor-network methods contract each
term's doubled light-cone network or the union light cone's state
(:mod:`qsimdist.engine.term_networks`, :mod:`qsimdist.engine.doubled`);
a Clifford circuit's terms are read off stim's tableau
(:mod:`qsimdist.engine.stabilizer`). Plans are keyed by the network finally
contracted, so terms whose light cones are translates of each other share one.

Term labels follow Qiskit's order: the rightmost character is qubit 0.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError
from ..frontends import GateCircuit
from ..frontends.one_qubit_fusion import fuse_into_neighbours
from ..hardware import costs
from ..network import Network
from ..planner.path import PathOptions
from ..planner.plan import Plan
from .doubled import DoubledPrice, doubled_circuit, doubled_plan, doubled_price
from .pauli_terms import (
    PAULI_ACTION,
    SINGLE_QUBIT_OPERATORS,
    PauliTerm,
    is_z_string,
    numpy_reading_plan,
    one_pass_pays,
    reading_seconds,
)
from .results import ExpectationStats
from .term_networks import cone_gates_at_least, state_flops, state_network
from .term_readers import (
    diagonal_terms_on_state,
    group_values,
    is_diagonal_term,
    pauli_on_state,
    term_on_state,
)
from .term_spreading import spread_term_values, worth_spreading

if TYPE_CHECKING:
    from .memory import MemoryBudget
    from .options import RunOptions

#: how an engine evaluates the terms of one circuit (see :class:`ExpectationEngine`)
METHODS = ("auto", "statevector", "doubled", "state", "stabilizer")


def check_term_options(method: str, state_max_qubits: int) -> None:
    """Refuse (one line) an unknown ``method`` or a ``state_max_qubits`` outside 1..40."""
    if not 1 <= state_max_qubits <= 40:
        raise InvalidInputError(f"state_max_qubits must be in 1..40, got {state_max_qubits!r}")
    if method not in METHODS:
        raise InvalidInputError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")


@dataclass
class ExpectationEngine:
    """Evaluates Pauli terms of circuits and keeps one plan per network structure.

    Tensor-network methods, chosen per circuit by predicted cost (``method="auto"``):
    ``doubled``, each term ``<0|U^dag P U|0>`` on the doubled network of its own light
    cone (cheap for local terms of wide, shallow circuits, whatever the width); ``state``,
    where the union of the light cones has at most ``state_max_qubits`` qubits, one
    contraction with those qubits open gives the light-cone state every term is applied
    to (it wins where the cones overlap, in narrow, deep circuits). The prediction counts
    state-vector FLOPs over each light cone; the plans' own FLOPs are in :attr:`stats`.

    Attributes:
        dtype: ``complex128`` (default) or ``complex64``.
        memory_limit: peak bytes per contraction (``None``: the machine's default;
            ``"none"``: unlimited); per rank under ``executor="mpi"``.
        backend: array library, ``numpy`` or ``cupy``.
        path_options: path search options (:class:`PathOptions` or a dict).
        executor: ``local`` or ``mpi`` (every rank of ``mpiexec`` makes the same calls;
            plans are made on rank 0 for the ranks of ``comm`` and ``profile``).
        profile: hardware profile for ``executor="mpi"`` (default ``local-cpu``).
        comm: MPI communicator (default ``MPI.COMM_WORLD``).
        fuse: fold one-qubit gates into their neighbours first
            (:func:`~qsimdist.frontends.one_qubit_fusion.fuse_into_neighbours`).
        method: ``auto``, ``statevector``, ``doubled``, ``state`` (see above) or
            ``stabilizer``: a Clifford circuit's terms read exactly off stim's tableau
            (:mod:`qsimdist.engine.stabilizer`), which ``auto`` takes where predicted
            cheaper (nearly always, at any width).
        state_max_qubits: widest light-cone state the ``state`` method may open.
        spread_terms: under ``executor="mpi"``, with a live term per rank or more, each rank
            values its share alone (:mod:`qsimdist.engine.term_spreading`).
    """

    dtype: str = "complex128"
    memory_limit: str | int | None = None
    backend: str = "numpy"
    path_options: PathOptions | dict | None = None
    executor: str = "local"
    profile: object = None
    comm: object = None
    fuse: bool = True
    method: str = "auto"
    state_max_qubits: int = 20
    spread_terms: bool = True
    #: the resolved options (:class:`~qsimdist.engine.options.RunOptions`): given (the
    #: :class:`~qsimdist.engine.engine.Engine` passes its own), the fields above from
    #: ``dtype`` to ``comm`` are read from it and nothing is resolved again
    run: RunOptions | None = None
    stats: ExpectationStats = field(default_factory=ExpectationStats)
    _plans: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_term_options(self.method, self.state_max_qubits)
        if self.run is None:
            from .options import RunOptions

            self.run = RunOptions.resolve(
                dtype=self.dtype, memory_limit=self.memory_limit, backend=self.backend,
                executor=self.executor, comm=self.comm, profile=self.profile,
                path_options=self.path_options)
        run = self.run
        self.dtype, self.backend, self.executor = run.dtype, run.backend, run.executor
        self.memory_limit, self.path_options = run.memory, run.path_options
        self.profile = run.profile
        self._options = run
        self._budget = run.memory
        self._limit = self._budget.limit
        self.comm = self._options.comm
        self.route: dict | None = None
        #: keep the last statevector route's state for the next call on the same circuit
        #: object (a dynamic circuit's branch probabilities and terms, read one by one)
        self.keep_state = False
        self._held: tuple | None = None  # (weak reference to the circuit, dtype, state, fused)
        self._doubled: tuple | None = None  # (weak reference to the circuit, fuse, prepared)
        self._profile = self._options.profile if self._options.distributed else None
        #: set while :func:`qsimdist.engine.term_costs.term_costs` prices terms: plans are
        #: made and recorded there instead of run (:class:`~.term_costs.CostRecorder`)
        self._costing = None

    @property
    def budget(self) -> MemoryBudget:
        """The memory budget of :attr:`run` (resolved once)."""
        return self.run.memory

    @property
    def plans(self) -> int:
        """The number of plans held (one per network structure seen)."""
        return len(self._plans)

    def _plan_for(self, key: tuple, net: Network, share: bool = False) -> Plan:
        """The process's cached plan for ``net`` (:data:`qsimdist.engine.cache.PLANS`).

        ``share``: a doubled network, planned as the doubled route plans it (within a
        quarter of the limit where that costs no refusal,
        :func:`~qsimdist.engine.doubled.doubled_plan`), so the executor's free buffers
        beside the peak stay within the limit too."""
        from .cache import PLANS

        build = None
        if share:
            opts = self._options.path_options

            def build(limit: int | None) -> Plan:
                return doubled_plan(net, self.dtype, limit, opts)

        # checked against the budget in one process; distributed, made on rank 0 and shared
        plan, reused = PLANS.plan_for(net, self._options, build=build,
                                      variant="share" if share else None)
        self._plans[key] = True
        if reused:
            self.stats.plans_reused += 1
        else:
            self.stats.plans_made += 1
        return plan

    def _contract(self, key: tuple, net: Network, t0: float, share: bool = False) -> np.ndarray:
        """Plan (or reuse a plan for) ``net``, run it, and account for it in :attr:`stats`."""
        plan = self._plan_for(key, net, share)
        if self._costing is not None:  # priced, not run: the run reuses this very plan
            return self._costing.record(plan, time.perf_counter() - t0)
        t1 = time.perf_counter()
        value = plan.execute(backend=self.backend, **self._options.execute_keywords())
        value = np.asarray(value.get() if hasattr(value, "get") else value)
        st = self.stats
        st.contractions += 1
        st.slices += max(1, plan.stats.n_slices)
        st.flops += plan.stats.flops
        st.plan_seconds += t1 - t0
        st.execute_seconds += time.perf_counter() - t1
        return value

    def _choose(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                doubled: Callable[[], DoubledPrice],
                method: str) -> tuple[str, list[int], set[int], float]:
        """The tensor-network method for these (non-trivial) terms, the union light cone
        (gates, qubits), and the method's predicted seconds (the router's unit).

        ``doubled()``: the doubled route's price, made on the diagonal cones it contracts
        (:func:`~qsimdist.engine.doubled.doubled_price`), asked only where it is needed."""
        from .router import tn_floor

        union: set[int] = set()
        for term in terms:
            union.update(term.qubits)
        kept = circuit.light_cone(union).gates
        qubits = set(union)
        for k in kept:
            qubits.update(circuit.gates[k].qubits)
        m = len(qubits)
        if m <= 40:
            state = (state_flops(circuit, kept, m)
                     + sum(8.0 * 2.0**m * (t.weight + 1) for t in terms))
            state_s = state / (8.0 * costs.TN_RATE) + tn_floor(len(circuit.gates), 1)
        else:
            state, state_s = math.inf, math.inf
        if method == "state":
            return method, kept, qubits, state_s
        price = doubled()
        if method == "doubled" or len(qubits) > self.state_max_qubits \
                or not state < price.flops:
            return "doubled", kept, qubits, price.seconds
        return "state", kept, qubits, state_s

    def _doubled_circuit(self, circuit: GateCircuit, fused: GateCircuit | None = None):
        """The doubled route's prepared circuit (:func:`~qsimdist.engine.doubled.doubled_circuit`),
        made once for the same circuit object as the last call."""
        held = self._doubled
        if held is not None and held[0]() is circuit and held[1] == self.fuse:
            return held[2]
        prepared = doubled_circuit(circuit, self.fuse, fused)
        self._doubled = (weakref.ref(circuit), self.fuse, prepared)
        return prepared

    def held_state(self, circuit: GateCircuit):
        """``(state, fused)`` kept from the last statevector run of this very circuit object
        (with :attr:`keep_state`), else ``None``."""
        held = self._held
        if held is None or held[0]() is not circuit or held[1] != self.dtype:
            return None
        return held[2], held[3]

    def release_state(self) -> None:
        """Stop keeping states, and drop the one held."""
        self.keep_state = False
        self._held = None

    def _held_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm]) -> np.ndarray:
        """The terms read off the held state: the statevector route at the price of
        reading alone (cheapest route first: nothing else is priced)."""
        from .router import Route

        values = np.ones(len(terms), dtype=np.float64)
        live = [i for i, t in enumerate(terms) if t.qubits]
        st = self.stats
        st.terms += len(terms)
        st.trivial_terms += len(terms) - len(live)
        if live:
            read = reading_seconds(circuit.n_qubits, [terms[i] for i in live])
            route = Route("statevector", "the circuit's state is held from the call before",
                          read, engine="qsimdist")
            self.route = route.to_dict()
            self._statevector_values(circuit, terms, live, values, route)
        return values

    def _statevector_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                            live: list[int], values: np.ndarray, route,
                            cache=None) -> None:
        """Every live term read off the full state (fused gates applied in circuit order).

        numpy's passes split the state over the cores themselves, with BLAS on one
        thread (its own threads spin between calls and hold the cores)."""
        from ..executors import blas_threads

        with blas_threads(1):
            self._read_statevector(circuit, terms, live, values, route, cache)

    def _read_statevector(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                          live: list[int], values: np.ndarray, route, cache=None) -> None:
        from ..frontends.fusion import statevector_flops
        from .statevector_run import final_state

        t0 = time.perf_counter()
        n = circuit.n_qubits
        sim_work: dict = {}
        held = self.held_state(circuit)
        if held is not None:
            (state, fused), fuse_seconds = held, 0.0
        else:
            state, fused, fuse_seconds = final_state(circuit, self.dtype, route, work=sim_work,
                                                     cache=cache)
            if self.keep_state:  # read only from here on: nothing below writes the state
                self._held = (weakref.ref(circuit), self.dtype, state, fused)
        t1 = t0 + fuse_seconds
        paulis = [i for i in live if set(terms[i].ops) <= set(PAULI_ACTION)]
        # every diagonal term (Z strings, projectors of a dynamic circuit's branches) in one
        # pass over |s|^2, whatever reads the other terms
        diagonal = [i for i in live if is_diagonal_term(terms[i])]
        for i, v in zip(diagonal, diagonal_terms_on_state(state, [terms[i] for i in diagonal])):
            values[i] = v
        self.stats.z_string_terms += sum(1 for i in diagonal if is_z_string(terms[i]))
        others = [i for i in live if i not in set(paulis) and i not in set(diagonal)]
        paulis = [i for i in paulis if not is_z_string(terms[i])]
        if paulis and one_pass_pays(n, [terms[i] for i in paulis]):
            # one compiled, blocked pass over the flat state for every Pauli string
            # (sums in float64)
            from ..executors import kernel_chunks, pauli_expectations

            masks = []
            for i in paulis:
                t = terms[i]
                x = sum(1 << q for q, op in zip(t.qubits, t.ops) if op in "XY")
                z = sum(1 << q for q, op in zip(t.qubits, t.ops) if op in "ZY")
                masks.append((x, z, t.ops.count("Y")))
            read = pauli_expectations(state, masks, kernel_chunks())
            for i, v in zip(paulis, read):
                values[i] = v
            paulis = []
        if paulis or others:
            state = state.astype(np.complex128, copy=False).reshape((2,) * n)
        # qubit-wise commuting groups read together where predicted cheaper
        grouped: set[int] = set()
        group_work: dict = {}
        spare = sim_work.get("spare")
        if spare is not None and spare.dtype == state.dtype and spare.size == state.size:
            group_work[("group", spare.dtype)] = spare  # paged in already by the simulation
        for members, basis, _ in numpy_reading_plan(n, [terms[i] for i in paulis]):
            if basis is not None:
                chosen = [paulis[j] for j in members]
                for i, v in group_values(state, terms, chosen, basis, group_work).items():
                    values[i] = v
                grouped.update(chosen)
                self.stats.qwc_groups += 1
        self.stats.grouped_terms += len(grouped)
        paulis = [i for i in paulis if i not in grouped]
        conj_state = state.conj() if paulis else None
        work: dict = {}  # one set of buffers for every term of this state
        for i in paulis + others:
            t = terms[i]
            axes = [n - 1 - q for q in t.qubits]  # axis a of the state holds qubit n-1-a
            if i in paulis:
                values[i] = pauli_on_state(state, conj_state, axes, t.ops, None, work)
            else:
                values[i] = term_on_state(state, axes, t.ops)
        st = self.stats
        st.statevector_terms += len(live)
        st.flops += statevector_flops(fused) if held is None else 0.0
        st.plan_seconds += t1 - t0
        st.execute_seconds += time.perf_counter() - t1

    def _clifford(self, circuit: GateCircuit, terms: Sequence[PauliTerm]):
        """The stabilizer route's side of these terms (``None``: not a Clifford circuit, no
        stim, or no non-trivial term): :mod:`qsimdist.engine.stabilizer`."""
        from . import stabilizer

        live = [t for t in terms if t.qubits]
        if not live and self.method != "stabilizer":
            return None
        return stabilizer.choose_for_terms(circuit, live, self.method, self.executor,
                                           self.backend)

    def _stabilizer_values(self, choice, terms: Sequence[PauliTerm], route,
                           counted: bool = False) -> np.ndarray:
        """Every term's exact value off stim's tableau (``choice``: the circuit's stim
        program, :class:`~qsimdist.engine.stabilizer.StabilizerChoice`); ``counted``: the
        terms are in :attr:`stats` already."""
        from .stabilizer import term_values

        t0 = time.perf_counter()
        values = np.ones(len(terms), dtype=np.float64)
        live = [i for i, t in enumerate(terms) if t.qubits]
        term_values(choice.circuit, terms, live, values)
        st = self.stats
        if not counted:
            st.terms += len(terms)
            st.trivial_terms += len(terms) - len(live)
        st.stabilizer_terms += len(live)
        st.execute_seconds += time.perf_counter() - t0
        self.route = route.to_dict()
        return values

    def term_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm]) -> np.ndarray:
        """``Re <psi|P|psi>`` for each term, ``psi = U|0...0>`` (float64 values). The circuit
        is fused once; the method is chosen for the terms together (see the class
        docstring), and networks of the same structure reuse one plan."""
        original = circuit
        if self.method in ("auto", "statevector") and self.held_state(circuit) is not None:
            return self._held_values(circuit, terms)
        spread = (self._costing is None and worth_spreading(self, terms)
                  and spread_term_values(self, circuit, terms))
        if spread is not None and spread is not False:  # each rank valued its share alone
            return spread
        clifford = None
        if self.method in ("auto", "stabilizer"):  # a Clifford circuit: stim
            clifford = self._clifford(circuit, terms)
            if clifford is not None and clifford.route is not None:
                if self._costing is not None:
                    return self._costing.routed(clifford.route, len(terms))
                return self._stabilizer_values(clifford, terms, clifford.route)
        values = np.ones(len(terms), dtype=np.float64)
        live = [i for i, t in enumerate(terms) if t.qubits]
        st = self.stats
        st.terms += len(terms)
        st.trivial_terms += len(terms) - len(live)
        if not live:
            return values
        live_terms = [terms[i] for i in live]
        side: dict = {}

        def prepared() -> dict:
            """The tensor-network side, made where it is named, priced or run: the circuit
            fused, each live term's light cone, the cheapest method (the doubled route
            priced on its prepared circuit's cones, kept for its run)."""
            if not side:
                fused = fuse_into_neighbours(original) if self.fuse else original
                for i in live:
                    qubits = set(terms[i].qubits)
                    for k in fused.light_cone(terms[i].qubits).gates:
                        qubits.update(fused.gates[k].qubits)
                    st.max_light_cone_qubits = max(st.max_light_cone_qubits, len(qubits))
                side["circuit"] = fused

                def doubled() -> DoubledPrice:
                    if "doubled" not in side:
                        ready = self._doubled_circuit(original, fused)
                        side["doubled"] = (ready, doubled_price(ready, live_terms))
                    return side["doubled"][1]

                side["choice"] = self._choose(fused, live_terms, doubled, self.method)
            return side

        if self.method in ("auto", "statevector"):
            from .router import CircuitCache, route_state_reading, tn_floor

            cache = CircuitCache(original)  # the blocks priced are the blocks run

            read = reading_seconds(original.n_qubits, live_terms)

            def tn_seconds() -> float:
                method, kept, qubits, tn_s = prepared()["choice"]
                if method != "state":
                    return tn_s
                # one all-open light-cone network: priced as amplitudes are (greedy path)
                from .router import greedy_cost

                fused = prepared()["circuit"]
                net = state_network(fused, qubits, kept)
                return greedy_cost(net) / costs.TN_RATE + tn_floor(len(fused.gates), 1)

            route = route_state_reading(
                original, what="expectation values", dtype=self.dtype, budget=self._budget,
                method=self.method, executor=self.executor, backend=self.backend,
                tn_method=lambda: prepared()["choice"][0], tn_seconds_predicted=tn_seconds,
                read_seconds=read,
                tn_floor_seconds=tn_floor(cone_gates_at_least(original, live_terms), 1),
                cache=cache)
            if clifford is not None:
                from .router import prefer_stabilizer

                route = prefer_stabilizer(route, clifford.seconds, tn_seconds)
                if route.method == "stabilizer" and self._costing is not None:
                    return self._costing.routed(route, len(terms))
                if route.method == "stabilizer":
                    return self._stabilizer_values(clifford, terms, route, counted=True)
            self.route = route.to_dict()
            if route.method == "statevector" and self._costing is not None:
                return self._costing.routed(route, len(terms))
            if route.method == "statevector":
                self._statevector_values(original, terms, live, values, route, cache)
                return values
            method, kept, qubits, tn_s = prepared()["choice"]
        else:
            method, kept, qubits, tn_s = prepared()["choice"]
            self.route = {"method": method, "reason": "requested", "executor": self.executor}
        circuit = prepared()["circuit"]
        if method == "state" and len(qubits) > self.state_max_qubits:
            raise InvalidInputError(
                f"the terms' light cones span {len(qubits)} qubits, over state_max_qubits="
                f"{self.state_max_qubits}; use method='doubled' or 'auto'"
            )
        if method == "state":
            t0 = time.perf_counter()
            local = {q: j for j, q in enumerate(sorted(qubits))}
            key = ("state", len(local),
                   tuple(tuple(local[q] for q in circuit.gates[k].qubits) for k in kept))
            state = self._contract(key, state_network(circuit, qubits, kept), t0)
            state = state.reshape((2,) * len(local)).astype(np.complex128, copy=False)
            conj_state = state.conj()
            probabilities = None
            if sum(1 for i in live if set(terms[i].ops) == {"Z"}) > 1:
                probabilities = (state * conj_state).real
            work: dict = {}
            for i in live:
                t = terms[i]
                axes = [local[q] for q in t.qubits]
                if set(t.ops) <= set(PAULI_ACTION):
                    values[i] = pauli_on_state(state, conj_state, axes, t.ops, probabilities,
                                               work)
                else:
                    values[i] = term_on_state(state, axes, t.ops)
            st.state_terms += len(live)
            return values
        self._doubled_values(terms, live, values, side["doubled"])
        return values

    def _doubled_values(self, terms: Sequence[PauliTerm], live: list[int], values: np.ndarray,
                        priced: tuple) -> None:
        """Each live term on its own doubled network (:mod:`qsimdist.engine.doubled`), one
        plan per structure; ``priced``: ``(prepared circuit, DoubledPrice)`` of the live
        terms as the choice made them: their cones are the ones contracted."""
        from .cache import structure_key

        prepared, price = priced
        st = self.stats
        for i, cone in zip(live, price.cones):
            t0 = time.perf_counter()
            term = terms[i]
            net = prepared.simplified(term.qubits, term.ops, SINGLE_QUBIT_OPERATORS,
                                      limit=self._limit, dtype=self.dtype, cone=cone)
            key = ("doubled", structure_key(net))
            values[i] = complex(self._contract(key, net, t0, share=True).reshape(-1)[0]).real
        st.doubled_terms += len(live)


__all__ = [
    "METHODS",
    "ExpectationEngine",
    "ExpectationStats",
]
