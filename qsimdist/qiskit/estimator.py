"""``EstimatorV2``: Qiskit's estimator primitive on light-cone-reduced tensor networks.

It follows :class:`qiskit.primitives.StatevectorEstimator`: a keyword-only
constructor (``default_precision``, ``seed``, ``options``), pubs coerced with
the public ``EstimatorPub.coerce``, parameter values broadcast against the
observables array, ``evs`` and ``stds`` in a ``DataBin`` of the pub's shape,
and ``precision`` with the reference's meaning: the values are exact, and a
positive precision adds Gaussian noise of that standard deviation, drawn from
``numpy.random.default_rng(seed)`` (a fresh generator per pub, in the pub's
index order, as the reference does; ``stds`` stay zero as there).

Every term of every observable is ``<psi|P|psi>`` on the doubled network with
the light cone removed (:mod:`qsimdist.engine.expectation`); a term met twice for one
parameter binding is contracted once, and terms of the same network structure
share one plan, kept by the estimator between calls. The pubs of one call that share a
circuit and a set of labels (a QNN's backward pass: a pub per sample) run, where the
batched statevector pass is taken, as one pass over all their parameter sets; each pub's
metadata counts its share.

Composite instructions are expanded through their definitions. A circuit with
``reset``, mid-circuit measurement or ``if_test`` blocks is evolved as
``StatevectorEstimator`` evolves one: every element of the pub's broadcast
shape samples one branch (the outcome of each reset and measurement) from the
pub's generator, and its values are those of that branch, so the same seed
gives the same values and the mean over elements is the mixed-state value.
The branch is drawn outcome by outcome from light-cone marginals of the
deferred-measurement circuit (:mod:`qsimdist.qiskit.dynamic`), and the values
are ``<psi|P (x) Pi_b|psi> / <psi|Pi_b|psi>`` with ``Pi_b`` the projector on
the branch. In one process (method ``auto``) a circuit whose lowered form is not
Clifford runs instead as trajectories of its own qubits' state
(:mod:`qsimdist.qiskit.trajectory`): the same draws, the same values. Final
measurements (of qubits nothing uses afterwards, into bits nothing reads) are
ignored: the values are those before them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from qiskit.primitives import BaseEstimatorV2, DataBin, PrimitiveJob, PrimitiveResult, PubResult
from qiskit.primitives.containers.estimator_pub import EstimatorPub

from ..config import check_dtype
from ..engine.expectation import METHODS, ExpectationEngine
from ..engine.pauli_terms import PauliTerm, parse_term
from ..engine.stabilizer import absent_routes
from ..errors import ExecutionError, InvalidInputError, shorten
from ..executors import bind_executor
from ..frontends.circuit import GateCircuit
from ..frontends.qiskit_circuit import from_qiskit, recording_definitions
from ..planner.path import PathOptions
from .dynamic import LoweredCircuit, lower_circuit, needs_lowering
from .errors import qiskit_errors
from .options import PrimitiveOptions, submit_job
from .templates import TemplateCache
from .trajectory import trajectories_for


@dataclass(frozen=True)
class EstimatorOptions(PrimitiveOptions):
    """Options of :class:`EstimatorV2` (pass this or a dict as ``options``).

    Attributes:
        dtype: ``complex128`` (default) or ``complex64``.
        memory_limit: peak bytes per contraction (``"8GiB"``; ``None``: 80% of the
            available memory; ``"none"``: no limit); per rank under MPI.
        backend: array library, ``numpy`` or ``cupy``.
        path_options: contraction path search options (``PathOptions`` or a dict).
        executor: ``auto`` (``mpi`` under ``mpiexec`` with several ranks), ``local`` or
            ``mpi``. Under MPI every rank runs the same pubs in the same order.
        profile: hardware profile the distributed plans are made for (default
            ``local-cpu``).
        method: ``auto`` (by predicted work), ``doubled`` (one doubled light-cone
            network per term), ``state`` (one light-cone state per circuit) or
            ``stabilizer`` (a Clifford circuit on stim's tableau, exact at any width;
            ``auto`` takes it where predicted cheaper, nearly always); see
            :class:`qsimdist.engine.expectation.ExpectationEngine`.
        state_max_qubits: widest light-cone state the ``state`` method may open.
    """

    _what = "estimator"

    dtype: str = "complex128"
    memory_limit: str | int | None = None
    backend: str = "numpy"
    path_options: PathOptions | dict | None = None
    executor: str = "auto"
    profile: str | None = None
    method: str = "auto"
    state_max_qubits: int = 20

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        if self.method not in METHODS:
            raise InvalidInputError(f"unknown method {self.method!r}; valid: {', '.join(METHODS)}")
        self.check_shared()
        if self.path_options is not None:
            object.__setattr__(self, "path_options", PathOptions.coerce(self.path_options))


class EstimatorV2(BaseEstimatorV2):
    """Exact expectation values of Pauli observables by light-cone tensor networks.

    Example:
        >>> from qiskit import QuantumCircuit
        >>> from qsimdist.qiskit import EstimatorV2
        >>> qc = QuantumCircuit(2); qc.h(0); qc.cx(0, 1)
        >>> EstimatorV2().run([(qc, ["ZZ", "XX", "ZI"])]).result()[0].data.evs
        array([1., 1., 0.])
    """

    def __init__(
        self,
        *,
        default_precision: float = 0.0,
        seed: np.random.Generator | int | None = None,
        options: EstimatorOptions | dict | None = None,
    ) -> None:
        """Create an estimator.

        Args:
            default_precision: precision of pubs that give none (0: exact values).
            seed: seed or ``numpy.random.Generator`` of the noise added when the
                precision is positive, and of the branches sampled for circuits with
                resets or mid-circuit measurements.
            options: :class:`EstimatorOptions` or a dict of its fields. Aer's
                layout is read too: ``default_precision`` and ``run_options``
                (``{"seed_simulator": seed}``) may be given in the dict.
        """
        with qiskit_errors():
            options, default_precision, seed = _aer_style_options(options, default_precision,
                                                                  seed)
            self._options = EstimatorOptions.coerce(options)
        self._default_precision = default_precision
        self._seed = seed
        self._engine: ExpectationEngine | None = None
        self._lock = threading.Lock()
        #: each circuit met, converted once (:mod:`qsimdist.qiskit.templates`)
        self._templates = TemplateCache()

    @property
    def default_precision(self) -> float:
        """The precision of pubs that give none."""
        return self._default_precision

    @property
    def seed(self) -> np.random.Generator | int | None:
        """The seed or generator of the noise added for a positive precision."""
        return self._seed

    @property
    def options(self) -> EstimatorOptions:
        """This estimator's options."""
        return self._options

    @property
    def engine(self) -> ExpectationEngine:
        """The engine that holds this estimator's plans (one per network structure)."""
        if self._engine is None:
            o = self._options
            self._engine = ExpectationEngine(
                dtype=o.dtype, memory_limit=o.memory_limit, backend=o.backend,
                path_options=o.path_options, executor=o.resolved_executor(), profile=o.profile,
                method=o.method, state_max_qubits=o.state_max_qubits,
            )
        return self._engine

    def run(
        self, pubs: Iterable, *, precision: float | None = None
    ) -> PrimitiveJob[PrimitiveResult[PubResult]]:
        """Estimate expectation values of each pub; returns a submitted ``PrimitiveJob``.

        A qsimdist error (an unsupported instruction, a bad label) is raised as its
        Qiskit flavour (:mod:`qsimdist.qiskit.errors`): also a ``QiskitError``.
        """
        with qiskit_errors():
            return self._submit(pubs, precision)

    def cost(self, pubs: Iterable, *, profile: str | None = None,
             devices: int | None = None) -> list[dict]:
        """What :meth:`run` would cost for ``pubs``, before anything is contracted.

        The engine takes the decisions it takes to run (route, method, each term's
        network and plan within the memory limit) and prices each plan instead of running
        it; the plans are kept, so a later :meth:`run` of the same pubs executes exactly
        the FLOPs priced here. Every time is a cost-model prediction.

        Args:
            pubs: estimator pubs, as for :meth:`run` (static circuits: gates and final
                measurements).
            profile: a hardware profile name (``qsimdist profiles``): each contraction is
                also scheduled by the distribution planner on ``devices`` devices of it.
            devices: devices of ``profile`` (a power of two; default one node).

        Returns:
            One dict per pub: ``terms``, a list of
            :class:`~qsimdist.engine.term_costs.TermCost` dicts (each with its
            ``binding`` index and ``label``) for every (binding, Pauli label) the pub
            evaluates; ``flops`` and ``predicted_seconds``, their totals.
        """
        from ..engine.term_costs import expectation_costs

        with self._lock, qiskit_errors():
            out = []
            for pub in (EstimatorPub.coerce(p, self._default_precision) for p in pubs):
                if needs_lowering(pub.circuit):
                    raise InvalidInputError(
                        "cost() prices static circuits (gates and final measurements); this "
                        "pub's circuit has mid-circuit measurements, resets or control flow")
                shape, params = pub.shape, pub.parameter_values
                p_of = np.broadcast_to(np.arange(params.size).reshape(params.shape), shape)
                o_of = np.broadcast_to(
                    np.arange(pub.observables.size).reshape(pub.observables.shape), shape)
                terms = []
                # the engine calls run() makes, each priced instead of run
                for b, gc, labels, cost in _engine_calls(self.engine, pub, _pairs(p_of, o_of),
                                                         self._templates):
                    loc = _location(b, params.shape)
                    costs = cost if cost is not None else expectation_costs(
                        gc, labels, engine=self.engine, profile=profile, devices=devices)
                    for c in costs:
                        terms.append(dict(c.to_dict(), binding=loc))
                flops = sum(t["contraction"]["flops"] for t in terms if t["contraction"])
                out.append({"terms": terms, "flops": flops,
                            "predicted_seconds": sum(t["predicted_seconds"] for t in terms)})
            return out

    def _submit(self, pubs: Iterable, precision: float | None) -> PrimitiveJob:
        if precision is None:
            precision = self._default_precision
        coerced = [EstimatorPub.coerce(pub, precision) for pub in pubs]
        return submit_job(self._run, coerced, self.engine.executor)

    def _run(self, pubs: list[EstimatorPub]) -> PrimitiveResult[PubResult]:
        with self._lock, qiskit_errors():
            batched = (_call_batches(self.engine, pubs, self._templates) if len(pubs) > 1
                       else [None] * len(pubs))
            return PrimitiveResult([self._run_pub(pub, done)
                                    for pub, done in zip(pubs, batched)],
                                   metadata={"version": 2})

    def _generator(self) -> np.random.Generator:
        """A fresh generator per pub from the seed (the reference's rule). Under MPI
        without a seed, rank 0 picks one for all: every rank must draw the same
        branches of a circuit with resets, or their contractions would differ."""
        seed = self._seed
        if seed is None:
            seed = bind_executor(self.engine.executor, self.engine.comm).shared_seed()
        return np.random.default_rng(seed)

    def _run_pub(self, pub: EstimatorPub, done: _Batched | None = None) -> PubResult:
        precision = pub.precision if pub.precision is not None else self._default_precision
        lowering = done is None and needs_lowering(pub.circuit)
        # (the generator only where it is drawn from: noise, or branches)
        rng = self._generator() if precision != 0 or lowering else None
        engine = self.engine
        before = engine.stats.to_dict()
        observables = pub.observables
        params = pub.parameter_values
        shape = pub.shape
        p_of = np.broadcast_to(np.arange(params.size).reshape(params.shape), shape)
        o_of = np.broadcast_to(np.arange(observables.size).reshape(observables.shape), shape)

        pairs = _pairs(p_of, o_of)  # every (binding, observable) pair the broadcast needs
        with recording_definitions() as by_definition:
            if lowering:
                evs = _BranchSampler(engine, pub, rng).evs(p_of, o_of, pairs, precision)
            else:
                if done is not None:  # this pub's share of the call's batched passes
                    done.charge(engine)
                evs = self._static_evs(pub, p_of, o_of, pairs, rng, precision, done)
        stds = np.zeros(shape, dtype=np.float64)
        after = engine.stats.to_dict()
        spent = {k: after[k] - before[k] for k in after if k != "max_light_cone_qubits"}
        data = DataBin(evs=evs, stds=stds, shape=shape)
        return PubResult(data, metadata={
            "target_precision": precision,
            "circuit_metadata": pub.circuit.metadata,
            "simulator": "qsimdist",
            "qsimdist": spent,
            "route": engine.route,
            "gates_by_definition": by_definition,
            "routes_absent": absent_routes(),
        })

    def _static_evs(self, pub: EstimatorPub, p_of: np.ndarray, o_of: np.ndarray,
                    pairs: dict[int, set[int]], rng: np.random.Generator | None,
                    precision: float, done: _Batched | None = None) -> np.ndarray:
        """Values of a circuit of gates and final measurements: each (binding, observable)
        pair once, the circuit converted once (:mod:`qsimdist.qiskit.templates`), and
        the bindings of one set of labels valued in one batched statevector pass where
        that route is taken (:mod:`qsimdist.engine.binding_sweep`), else every term of
        one binding in one engine call. ``done``: what the call's batched passes found
        already, and the pub's template (:func:`_call_batches`)."""
        flat_obs = pub.observables.ravel()
        value: dict[tuple[int, int], float] = {}
        for b, obs_indices, got in _binding_values(self.engine, pub, pairs, self._templates,
                                                   done):
            for o in obs_indices:
                value[(b, o)] = float(
                    sum(float(c) * got[label] for label, c in flat_obs[o].items())
                )
        evs = np.zeros(pub.shape, dtype=np.float64)
        for index in np.ndindex(*pub.shape):
            ev = value[(int(p_of[index]), int(o_of[index]))]
            if precision != 0:
                ev = rng.normal(ev, precision)
            evs[index] = ev
        return evs


def _pairs(p_of: np.ndarray, o_of: np.ndarray) -> dict[int, set[int]]:
    """The observables each binding is paired with by the pub's broadcast."""
    pairs: dict[int, set[int]] = {}
    for b, o in zip(p_of.reshape(-1).tolist(), o_of.reshape(-1).tolist()):
        pairs.setdefault(b, set()).add(o)
    return pairs


def _label_groups(pub: EstimatorPub, pairs: dict[int, set[int]], templates: TemplateCache):
    """``(labels, terms, bindings)`` per set of observables the bindings are paired with:
    every label of those observables once, first-seen order, each label parsed once per
    estimator (:meth:`TemplateCache.term`)."""
    flat_obs = pub.observables.ravel()
    n = pub.circuit.num_qubits
    groups: dict[tuple, list[int]] = {}
    for b in sorted(pairs):
        groups.setdefault(tuple(sorted(pairs[b])), []).append(b)
    for obs_indices, bindings in groups.items():
        labels: dict[str, None] = {}
        for o in obs_indices:
            for label in flat_obs[o]:
                labels.setdefault(label, None)
        order = list(labels)
        yield order, [templates.term(label, n) for label in order], bindings


def _pub_template(pub: EstimatorPub, templates: TemplateCache):
    """``(template, rows)``: the pub's circuit converted once and its parameter sets as
    rows, or ``(None, None)`` where every binding is converted on its own."""
    params = pub.parameter_values
    if params.size == 0:
        return None, None
    rows = None
    if pub.circuit.parameters:
        try:
            rows = np.asarray(params.as_array(list(pub.circuit.parameters)),
                              dtype=float).reshape(params.size, -1)
        except Exception:  # noqa: BLE001 - binding them raises it, with Qiskit's message
            return None, None
    template = templates.template(pub.circuit, None if rows is None else rows[0])
    if template is None:
        return None, None
    return template, rows if rows is not None else template.rows(params)


def _bound(pub: EstimatorPub, b: int, template, rows) -> GateCircuit:
    """Binding ``b`` of the pub as a GateCircuit: from the template, or (where there is
    none, or that binding changes its structure) the bound circuit converted whole."""
    gc = template.bind(rows[b]) if template is not None else None
    if gc is None:
        params = pub.parameter_values
        gc = from_qiskit(params.bind(pub.circuit, _location(b, params.shape)))
    return gc


def _binding_values(engine: ExpectationEngine, pub: EstimatorPub, pairs: dict[int, set[int]],
                    templates: TemplateCache, done: _Batched | None = None):
    """``(binding, its observables, {label: value})`` for every binding of a static pub
    (those the call's batched passes found, ``done``, as found there)."""
    from ..engine.binding_sweep import sweep_term_values

    known = None if done is None else done.values
    if known:
        for b in pairs:
            if b in known:
                yield b, pairs[b], known[b]
        pairs = {b: o for b, o in pairs.items() if b not in known}
        if not pairs:
            return
    if done is None or done.template is None:
        template, rows = _pub_template(pub, templates)
        groups = _label_groups(pub, pairs, templates)
    else:
        template, rows = done.template
        groups = [(order, terms, [b for b in bindings if b in pairs])
                  for order, terms, bindings in done.groups]
    for order, terms, bindings in groups:
        if not bindings:
            continue
        done: set[int] = set()
        if template is not None:
            swept = sweep_term_values(engine, template, rows[bindings], terms)
            if swept is not None:
                values, ok = swept
                for j, b in enumerate(bindings):
                    if ok[j]:
                        done.add(b)
                        yield b, pairs[b], dict(zip(order, values[j].tolist()))
        for b in bindings:
            if b not in done:
                gc = _bound(pub, b, template, rows)
                yield b, pairs[b], dict(zip(order, engine.term_values(gc, terms)))


@dataclass
class _Batched:
    """What a call's batched passes found for one pub: ``values`` (binding -> {label:
    value}) and the pub's share of the engine's statistics of those passes (by its
    parameter sets), charged to it when it runs so that each pub's metadata counts its own
    terms, FLOPs and seconds."""

    values: dict
    stats: dict
    route: dict | None
    #: the pub's ``(template, rows)`` (:func:`_pub_template`) and label groups
    #: (:func:`_label_groups`), found once per call
    template: tuple | None = None
    groups: list | None = None

    def charge(self, engine: ExpectationEngine) -> None:
        st = engine.stats
        for k, v in self.stats.items():
            setattr(st, k, getattr(st, k) + v)
        if self.route is not None:
            engine.route = self.route


def _call_batches(engine: ExpectationEngine, pubs: list[EstimatorPub],
                  templates: TemplateCache) -> list[_Batched | None]:
    """One batched statevector pass per circuit and set of labels over all of a call's
    static pubs (a QNN's backward pass, a gradient's pubs: the same circuit and observable,
    pub after pub), where two or more pubs share them and the pass is taken
    (:func:`~qsimdist.engine.binding_sweep.sweep_term_values`); per pub, what was found
    (``None``: nothing, the pub runs alone)."""
    from ..engine.binding_sweep import sweep_term_values

    # (template, labels) -> [(pub index, bindings, rows, terms)]
    groups: dict[tuple, list] = {}
    out: list[_Batched | None] = [None] * len(pubs)
    met: dict[int, tuple] = {}  # a circuit object met before in this call
    for i, pub in enumerate(pubs):
        found = met.get(id(pub.circuit))
        if found is None:
            found = met[id(pub.circuit)] = (needs_lowering(pub.circuit),)
        if found[0]:
            continue
        shape, params = pub.shape, pub.parameter_values
        if params.size == 0:
            continue
        template, rows = _pub_template(pub, templates)
        if template is None:
            continue
        out[i] = done = _Batched({}, {}, None, (template, rows), [])
        p_of = np.broadcast_to(np.arange(params.size).reshape(params.shape), shape)
        o_of = np.broadcast_to(
            np.arange(pub.observables.size).reshape(pub.observables.shape), shape)
        for order, terms, bindings in _label_groups(pub, _pairs(p_of, o_of), templates):
            done.groups.append((order, terms, bindings))
            groups.setdefault((id(template), tuple(order)), []).append(
                (i, bindings, rows[bindings], terms, template))
    for (_, order), members in groups.items():
        if len(members) < 2:
            continue
        template, terms = members[0][4], members[0][3]
        before = engine.stats.to_dict()
        swept = sweep_term_values(engine, template,
                                  np.concatenate([m[2] for m in members]), terms)
        if swept is None:
            continue
        values, ok = swept
        after = engine.stats.to_dict()
        spent = {k: after[k] - before[k] for k in after if after[k] != before[k]}
        for k in spent:  # charged back to the pubs, each its share
            setattr(engine.stats, k, before[k])
        taken_all = int(ok.sum())
        at = 0
        for i, bindings, _, _, _ in members:
            part, ok_part = values[at:at + len(bindings)], ok[at:at + len(bindings)]
            at += len(bindings)
            done = out[i]
            done.route = engine.route
            for j, b in enumerate(bindings):
                if ok_part[j]:
                    done.values[b] = dict(zip(order, part[j].tolist()))
            taken = int(ok_part.sum())
            for k, v in spent.items():
                share = (v * taken // taken_all if isinstance(v, int)
                         else v * taken / taken_all) if taken_all else 0
                done.stats[k] = done.stats.get(k, 0) + share
    return out


def _engine_calls(engine: ExpectationEngine, pub: EstimatorPub, pairs: dict[int, set[int]],
                  templates: TemplateCache):
    """What :meth:`EstimatorV2.run` does for a static pub, to be priced: ``(binding, bound
    GateCircuit, labels, costs)`` per binding, ``costs`` the batched pass's share of each
    label where that pass is taken (:func:`~qsimdist.engine.binding_sweep.sweep_route`),
    else ``None`` (price the engine call)."""
    from ..engine.binding_sweep import sweep_route
    from ..engine.term_costs import TermCost

    template, rows = _pub_template(pub, templates)
    for order, terms, bindings in _label_groups(pub, pairs, templates):
        chosen = None if template is None else sweep_route(engine, template, len(bindings),
                                                          terms)
        share = None
        if chosen is not None:
            live = sum(1 for t in terms if t.qubits)
            seconds = chosen[1].statevector_seconds / max(1, live)
            share = [TermCost(label, "statevector" if t.qubits else "trivial", None,
                              seconds if t.qubits else 0.0) for label, t in zip(order, terms)]
        for b in bindings:
            yield b, (None if share else _bound(pub, b, template, rows)), order, share


def _location(b: int, shape: tuple) -> tuple[int, ...]:
    """The index of flat binding ``b`` in a bindings array of ``shape``."""
    return tuple(int(i) for i in np.unravel_index(b, shape)) if shape else ()


class _BranchSampler:
    """Values of a pub whose circuit has resets, mid-circuit measurements or conditions.

    Each element of the broadcast shape draws one branch: the branch wires of the
    lowered circuit (:class:`~qsimdist.qiskit.dynamic.LoweredCircuit`), outcome by
    outcome, each from its probability given the outcomes before it. The probability
    of every branch prefix and the value of every term on every drawn branch are
    contracted once per binding, however many elements meet them.
    """

    def __init__(self, engine: ExpectationEngine, pub: EstimatorPub,
                 rng: np.random.Generator) -> None:
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
        # own qubits (:mod:`qsimdist.qiskit.trajectory`), the same draws and values
        self.trajectories = trajectories_for(engine, pub, rng, self.circuit)

    def circuit(self, b: int) -> tuple[LoweredCircuit, GateCircuit]:
        found = self.lowered.get(b)
        if found is None:
            params = self.pub.parameter_values
            bound = params.bind(self.pub.circuit, _location(b, params.shape))
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
            fast.fill(evs, flat_obs)


def _aer_style_options(options, default_precision: float, seed):
    """Read Aer's option layout (``default_precision`` and ``run_options`` inside the
    dict) into the constructor's arguments; the other keys are qsimdist's options."""
    if not isinstance(options, dict) or not ({"default_precision", "run_options"} & set(options)):
        return options, default_precision, seed
    options = dict(options)
    if "default_precision" in options:
        given = options.pop("default_precision")
        if default_precision not in (0, given):
            raise InvalidInputError(
                f"default_precision is given twice, {default_precision} and {given} in the "
                "options; give it once"
            )
        default_precision = given
    run_options = options.pop("run_options", None) or {}
    if not isinstance(run_options, dict):
        raise InvalidInputError(
            f"run_options must be a dict, got {shorten(run_options)}; valid keys: "
            "seed_simulator")
    unknown = sorted(set(run_options) - {"seed_simulator"})
    if unknown:
        raise InvalidInputError(
            f"unknown run_options {', '.join(map(str, unknown))}; valid: seed_simulator "
            "(the estimator's values are exact, so Aer's shots and methods do not apply)"
        )
    if "seed_simulator" in run_options:
        given = run_options["seed_simulator"]
        if seed is not None and seed is not given and seed != given:
            raise InvalidInputError(
                f"the seed is given twice, {shorten(seed)} and seed_simulator={shorten(given)}; "
                "give it once"
            )
        seed = given
    return options, default_precision, seed


__all__ = ["EstimatorOptions", "EstimatorV2"]
