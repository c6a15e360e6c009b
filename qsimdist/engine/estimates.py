"""An estimator call's pubs valued together: :func:`estimate` and :func:`pub_costs`.

A door translates each pub into an :class:`EstimatePub` (a circuit's parameter sets as
rows of one template where it has one, its observables as ``{label: coefficient}``
dicts, the broadcast of the two) and hands the call's pubs to
:meth:`Engine.expectation <qsimdist.engine.engine.Engine.expectation>`. Each
(parameter set, observable) pair is valued once; the parameter sets of one set of labels
run in one batched statevector pass where the router takes it
(:mod:`qsimdist.engine.binding_sweep`), else every term of one set in one engine call;
and the pubs of one call that share a circuit and a set of labels (a QNN's backward pass:
a pub per sample) share one such pass, each pub charged its share of the statistics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..frontends import GateCircuit
from ..frontends.qiskit_circuit import recording_definitions

if TYPE_CHECKING:
    from ..frontends.parametric import ParametricCircuit
    from .engine import Engine


@dataclass
class EstimatePub:
    """One estimator pub as the engine takes it.

    Attributes:
        n_qubits: the circuit's qubits.
        observables: the pub's observables, flat: ``{label: coefficient}`` each (labels in
            Qiskit order, the rightmost character qubit 0).
        p_of: for each element of the broadcast shape, its parameter set (flat index).
        o_of: for each element of the broadcast shape, its observable (flat index).
        sets_shape: the shape of the parameter sets (where each is reported).
        bind: parameter set ``b`` converted whole (where there is no template, or the set
            changes the template's structure).
        template: the circuit converted once
            (:class:`~qsimdist.frontends.parametric.ParametricCircuit`), or ``None``.
        rows: the parameter sets as rows of the template's parameters.
        precision: a positive precision adds Gaussian noise of that standard deviation.
        rng: the pub's generator (the noise; the door's own valuer's draws).
        dynamic: for a circuit that measures mid-circuit, resets or branches, the door's
            pub as :func:`~qsimdist.engine.trajectory_values.dynamic_values` reads it (its
            circuit, parameter values and observables): each element draws a branch from
            :attr:`rng`, by trajectories where the router takes them.
    """

    n_qubits: int
    observables: Sequence[dict]
    p_of: np.ndarray
    o_of: np.ndarray
    sets_shape: tuple
    bind: Callable[[int], GateCircuit]
    template: ParametricCircuit | None = None
    rows: np.ndarray | None = None
    precision: float = 0.0
    rng: np.random.Generator | None = None
    dynamic: object = None

    @property
    def shape(self) -> tuple:
        return self.p_of.shape

    def pairs(self) -> dict[int, set[int]]:
        """The observables each parameter set is paired with by the broadcast."""
        pairs: dict[int, set[int]] = {}
        for b, o in zip(self.p_of.reshape(-1).tolist(), self.o_of.reshape(-1).tolist()):
            pairs.setdefault(b, set()).add(o)
        return pairs

    def location(self, b: int) -> tuple[int, ...]:
        """The index of flat parameter set ``b`` in :attr:`sets_shape`."""
        shape = self.sets_shape
        return tuple(int(i) for i in np.unravel_index(b, shape)) if shape else ()

    def bound(self, b: int) -> GateCircuit:
        """Parameter set ``b`` as a GateCircuit: from the template, or converted whole."""
        gc = self.template.bind(self.rows[b]) if self.template is not None else None
        return gc if gc is not None else self.bind(b)


@dataclass
class PubValues:
    """What :func:`estimate` found for one pub.

    Attributes:
        values: one value per element of the pub's broadcast shape (float64).
        stats: the engine's statistics spent on this pub (its share of shared passes).
        route: the router's record of the route taken.
        by_definition: gates applied through a definition that is not their exact
            operator (:attr:`GateCircuit.by_definition`), one note per instruction.
    """

    values: np.ndarray
    stats: dict
    route: dict | None
    by_definition: list = field(default_factory=list)


@dataclass
class _Batched:
    """What a call's batched passes found for one pub: ``values`` (set -> {label: value})
    and the pub's share of the statistics of those passes, charged to it when it runs."""

    values: dict
    stats: dict
    route: dict | None
    groups: list

    def charge(self, engine) -> None:
        st = engine.stats
        for k, v in self.stats.items():
            setattr(st, k, getattr(st, k) + v)
        if self.route is not None:
            engine.route = self.route


def estimate(engine: Engine, pubs: list[EstimatePub]) -> list[PubValues]:
    """Every pub's values (see the module docstring), in order."""
    batched = call_batches(engine, pubs) if len(pubs) > 1 else [None] * len(pubs)
    return [_one_pub(engine, pub, done) for pub, done in zip(pubs, batched)]


def _one_pub(engine: Engine, pub: EstimatePub, done: _Batched | None) -> PubValues:
    terms = engine.terms
    before = terms.stats.to_dict()
    # the notes of the template (made by the door), then those of every conversion here
    notes = {note["where"]: note for note in getattr(pub.template, "by_definition", ())}
    ran = None  # the trajectories' report (statistics, route), where they ran
    with recording_definitions() as recorded:
        if pub.dynamic is not None:
            from .trajectory_values import dynamic_values

            evs, ran = dynamic_values(terms, pub.dynamic, pub.rng, pub.precision)
        else:
            if done is not None:  # this pub's share of the call's batched passes
                done.charge(terms)
            evs = _static_values(engine, pub, done)
    for note in recorded:
        notes.setdefault(note["where"], note)
    after = terms.stats.to_dict()
    spent = {k: after[k] - before[k] for k in after if k != "max_light_cone_qubits"}
    if ran is not None:
        return PubValues(evs, ran.added_to(spent), ran.route, list(notes.values()))
    return PubValues(evs, spent, terms.route, list(notes.values()))


def _static_values(engine: Engine, pub: EstimatePub, done: _Batched | None) -> np.ndarray:
    """Values of a circuit of gates and final measurements: each (set, observable) pair
    once, then the noise of a positive precision drawn element by element."""
    flat_obs = pub.observables
    value: dict[tuple[int, int], float] = {}
    for b, obs_indices, got in _set_values(engine, pub, done):
        for o in obs_indices:
            value[(b, o)] = float(sum(float(c) * got[label] for label, c in flat_obs[o].items()))
    evs = np.zeros(pub.shape, dtype=np.float64)
    p_of, o_of, rng, precision = pub.p_of, pub.o_of, pub.rng, pub.precision
    for index in np.ndindex(*pub.shape):
        ev = value[(int(p_of[index]), int(o_of[index]))]
        if precision != 0:
            ev = rng.normal(ev, precision)
        evs[index] = ev
    return evs


def label_groups(engine: Engine, pub: EstimatePub,
                 pairs: dict[int, set[int]]) -> Iterator[tuple[list, list, list]]:
    """``(labels, terms, sets)`` per set of observables the parameter sets are paired with:
    every label of those observables once, first-seen order, each parsed once per engine."""
    flat_obs = pub.observables
    groups: dict[tuple, list[int]] = {}
    for b in sorted(pairs):
        groups.setdefault(tuple(sorted(pairs[b])), []).append(b)
    for obs_indices, bindings in groups.items():
        labels: dict[str, None] = {}
        for o in obs_indices:
            for label in flat_obs[o]:
                labels.setdefault(label, None)
        order = list(labels)
        yield order, [engine.term(label, pub.n_qubits) for label in order], bindings


def _set_values(engine: Engine, pub: EstimatePub, done: _Batched | None):
    """``(set, its observables, {label: value})`` for every parameter set of a static pub
    (those the call's batched passes found, ``done``, as found there)."""
    from .binding_sweep import sweep_term_values  # (read at call time: a test counts passes)

    pairs = pub.pairs()
    known = None if done is None else done.values
    if known:
        for b in pairs:
            if b in known:
                yield b, pairs[b], known[b]
        pairs = {b: o for b, o in pairs.items() if b not in known}
        if not pairs:
            return
    if done is None:
        groups = list(label_groups(engine, pub, pairs))
    else:
        groups = [(order, terms, [b for b in sets if b in pairs])
                  for order, terms, sets in done.groups]
    service, template, rows = engine.terms, pub.template, pub.rows
    for order, terms, bindings in groups:
        if not bindings:
            continue
        swept: set[int] = set()
        if template is not None:
            found = sweep_term_values(service, template, rows[bindings], terms)
            if found is not None:
                values, ok = found
                for j, b in enumerate(bindings):
                    if ok[j]:
                        swept.add(b)
                        yield b, pairs[b], dict(zip(order, values[j].tolist()))
        for b in bindings:
            if b not in swept:
                yield b, pairs[b], dict(zip(order, service.term_values(pub.bound(b), terms)))


def call_batches(engine: Engine, pubs: list[EstimatePub]) -> list[_Batched | None]:
    """One batched statevector pass per circuit and set of labels over all of a call's
    static pubs with a template, where two or more pubs share them and the pass is taken
    (:func:`~qsimdist.engine.binding_sweep.sweep_term_values`); per pub, what was found
    (``None``: nothing, the pub runs alone)."""
    from .binding_sweep import sweep_term_values

    service = engine.terms
    groups: dict[tuple, list] = {}  # (template, labels) -> [(pub, sets, rows, terms)]
    out: list[_Batched | None] = [None] * len(pubs)
    for i, pub in enumerate(pubs):
        if pub.dynamic is not None or pub.template is None or pub.rows is None:
            continue
        out[i] = done = _Batched({}, {}, None, [])
        for order, terms, bindings in label_groups(engine, pub, pub.pairs()):
            done.groups.append((order, terms, bindings))
            groups.setdefault((id(pub.template), tuple(order)), []).append(
                (i, bindings, pub.rows[bindings], terms, pub.template))
    for (_, order), members in groups.items():
        if len(members) < 2:
            continue
        template, terms = members[0][4], members[0][3]
        before = service.stats.to_dict()
        swept = sweep_term_values(service, template,
                                  np.concatenate([m[2] for m in members]), terms)
        if swept is None:
            continue
        values, ok = swept
        after = service.stats.to_dict()
        spent = {k: after[k] - before[k] for k in after if after[k] != before[k]}
        for k in spent:  # charged back to the pubs, each its share
            setattr(service.stats, k, before[k])
        taken_all = int(ok.sum())
        at = 0
        for i, bindings, _, _, _ in members:
            part, ok_part = values[at:at + len(bindings)], ok[at:at + len(bindings)]
            at += len(bindings)
            done = out[i]
            done.route = service.route
            for j, b in enumerate(bindings):
                if ok_part[j]:
                    done.values[b] = dict(zip(order, part[j].tolist()))
            taken = int(ok_part.sum())
            for k, v in spent.items():
                share = (v * taken // taken_all if isinstance(v, int)
                         else v * taken / taken_all) if taken_all else 0
                done.stats[k] = done.stats.get(k, 0) + share
    return out


def pub_costs(engine: Engine, pubs: list[EstimatePub], *, profile=None,
              devices: int | None = None) -> list[dict]:
    """What :func:`estimate` would cost for each pub, before anything is contracted: one
    dict per pub, ``terms`` (a :class:`~qsimdist.engine.term_costs.TermCost` dict with its
    ``binding`` index and ``label`` for every (set, label) the pub evaluates), ``flops``
    and ``predicted_seconds`` (their totals). The plans made are kept."""
    from .binding_sweep import sweep_route
    from .term_costs import TermCost, term_costs

    service = engine.terms
    out = []
    for pub in pubs:
        terms_out = []
        for order, terms, bindings in label_groups(engine, pub, pub.pairs()):
            chosen = None if pub.template is None else sweep_route(
                service, pub.template, len(bindings), terms)
            share = None
            if chosen is not None:  # the batched pass's share of each label
                live = sum(1 for t in terms if t.qubits)
                seconds = chosen[1].statevector_seconds / max(1, live)
                share = [TermCost(label, "statevector" if t.qubits else "trivial", None,
                                  seconds if t.qubits else 0.0)
                         for label, t in zip(order, terms)]
            for b in bindings:
                costs = share if share else term_costs(service, pub.bound(b), terms, order,
                                                       profile=profile, devices=devices)
                terms_out.extend(dict(c.to_dict(), binding=pub.location(b)) for c in costs)
        flops = sum(t["contraction"]["flops"] for t in terms_out if t["contraction"])
        out.append({"terms": terms_out, "flops": flops,
                    "predicted_seconds": sum(t["predicted_seconds"] for t in terms_out)})
    return out


__all__ = ["EstimatePub", "PubValues", "call_batches", "estimate", "label_groups",
           "pub_costs"]
