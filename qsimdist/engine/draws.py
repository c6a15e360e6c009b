"""Shots of circuits and of a sampler's pubs: :func:`draw_circuit`, :func:`draw_pub`.

What :meth:`Engine.sample <qsimdist.engine.engine.Engine.sample>` runs beyond
:func:`~qsimdist.engine.sampling.sample_bits`: a circuit with mid-circuit measurements,
resets or conditions is tried as a tree of trajectories on its own qubits
(:func:`~qsimdist.engine.tree_sampling.sample_tree`, where the router takes that route),
else sampled in its deferred-measurement form (:mod:`qsimdist.frontends.lowering`); every
clbit's value is read off the measured qubits. A pub's parameter sets are drawn from one
batched statevector pass where that is priced cheaper than routing each set
(:func:`~qsimdist.engine.binding_sweep.sampling_sweep_route`), else set by set from the
circuit's template (:mod:`qsimdist.frontends.parametric`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..config import reorder_bits
from ..errors import InvalidInputError
from ..frontends.lowering import LoweredCircuit, lower_circuit
from .sampling import SampleInfo, sample_bits

if TYPE_CHECKING:
    from ..frontends.parametric import ParametricCircuit
    from .engine import Engine


@dataclass
class DrawnSample:
    """One circuit's shots: every clbit's value, and how they were drawn.

    Attributes:
        clbits: ``shots x num_clbits`` uint8; column ``j`` is clbit ``j`` (for a
            :class:`~qsimdist.frontends.GateCircuit`, column ``j`` is ``measured[j]``).
        info: the sampling method, its route and its predicted cost
            (:class:`~qsimdist.engine.sampling.SampleInfo`).
        circuit: the unitary (lowered) circuit as a GateCircuit (``None``: drawn as
            trajectories, :mod:`qsimdist.engine.tree_sampling`).
        lowered: the deferred-measurement rewriting (``None`` likewise, or for a
            GateCircuit).
        measured: the qubits finally measured (of ``circuit`` where there is one).
        bits: ``shots x len(measured)`` uint8 (``None`` for trajectories).
        probabilities: each distinct drawn row's probability, where the method computed it.
    """

    clbits: np.ndarray
    info: SampleInfo
    circuit: object
    lowered: object
    measured: list[int]
    bits: np.ndarray | None
    probabilities: dict = field(default_factory=dict)

    @property
    def qubits(self) -> int:
        """The sampled circuit's qubits (the lowered one's where there is one)."""
        return self.circuit.n_qubits if self.circuit is not None else self.info.light_cone_qubits


def draw_circuit(engine: Engine, circuit, shots: int, rng: np.random.Generator,
                 method: str = "auto", converted=None) -> DrawnSample:
    """Draw ``shots`` values of every clbit of a bound Qiskit circuit (dynamic ones included).

    ``circuit`` may also be a :class:`LoweredCircuit` already (bound, or a template whose
    binding is ``converted``: its GateCircuit, made by
    :meth:`~qsimdist.frontends.parametric.ParametricCircuit.bind`). A dynamic circuit
    given as a Qiskit circuit is first tried as a tree of trajectories on its own qubits
    (:func:`~qsimdist.engine.tree_sampling.sample_tree`), where the router takes that route
    (:func:`~qsimdist.engine.router.route_dynamic`, under the engine's resolved options and
    memory budget).
    """
    from ..frontends.qiskit_circuit import from_qiskit
    from .tree_sampling import sample_tree

    lowered = circuit if isinstance(circuit, LoweredCircuit) else None
    made: dict = {} if converted is None else {"lowered": lowered, "gc": converted}

    def lowered_gc():
        if "gc" not in made:
            made["lowered"] = lowered or lower_circuit(circuit)
            made["gc"] = from_qiskit(made["lowered"].circuit)
        return made["lowered"], made["gc"]

    if lowered is None:
        tree = sample_tree(circuit, shots, rng, engine.run, method,
                           lowered=lambda: lowered_gc()[1])
        if tree is not None:
            info = SampleInfo("trajectory", len(tree.measured), tree.qubits,
                              extra={"route": tree.route, "dynamic": True, "ancillas": 0})
            return DrawnSample(tree.clbits, info, None, None, tree.measured, None)
    lowered, gc = lowered_gc()
    sources = lowered.clbit_sources
    measured = sorted({q for q in sources if q is not None})
    bits, info, probs = sample_bits(gc, measured, shots, rng, engine.contractor, method)
    info.extra.update({"dynamic": lowered.dynamic, "ancillas": lowered.ancillas})
    return DrawnSample(clbits_of(bits, measured, sources), info, gc, lowered, measured, bits,
                       probs)


def clbits_of(bits: np.ndarray, measured: list[int], sources: list) -> np.ndarray:
    """Every clbit's values (``shots x len(sources)``) from the measured qubits' ``bits``:
    clbit ``j`` holds qubit ``sources[j]`` (``None``: never written, 0)."""
    column = {q: k for k, q in enumerate(measured)}
    clbits = np.zeros((bits.shape[0], len(sources)), dtype=np.uint8)
    for j, q in enumerate(sources):
        if q is not None:
            clbits[:, j] = bits[:, column[q]]
    return clbits


@dataclass
class SamplePub:
    """A sampler pub as the engine takes it.

    Attributes:
        circuit: the pub's (Qiskit) circuit, drawn set by set where there is no template.
        shape: the shape of its parameter sets.
        shots: shots per parameter set.
        bind: ``bind(circuit, index)``: that circuit (the pub's, or its lowered form's)
            with the parameter set at ``index`` bound.
        keep: ``keep(index, clbits)``: where each set's clbits (``shots x num_clbits``
            uint8) go.
        lowered: the circuit's deferred-measurement form, parameters kept, or ``None``.
        template: the lowered circuit converted once, or ``None``.
        rows: the parameter sets as rows of the template's parameters.
        method: the sampling method (``auto``: the router's choice).
        amplitudes: also each distinct drawn bitstring's amplitude.
    """

    circuit: object
    shape: tuple
    shots: int
    bind: Callable[[object, tuple], object]
    keep: Callable[[tuple, np.ndarray], None]
    lowered: LoweredCircuit | None = None
    template: ParametricCircuit | None = None
    rows: np.ndarray | None = None
    method: str = "auto"
    amplitudes: bool = False


@dataclass
class PubShots:
    """What :func:`draw_pub` reports for a pub: ``summary`` (the method(s), the route and
    the totals over its parameter sets, :func:`summary`) and, where asked, ``amplitudes``
    (per set index, ``{bitstring: amplitude}``)."""

    summary: dict
    amplitudes: dict


def draw_pub(engine: Engine, pub: SamplePub, rng: np.random.Generator) -> PubShots:
    """Every parameter set of ``pub`` drawn, in index order, each set's clbits handed to
    ``pub.keep``."""
    infos = []
    amplitudes: dict = {}
    lowered, template, rows = pub.lowered, pub.template, pub.rows
    batch = _batch(engine, pub)
    chunk = None
    for flat, index in enumerate(np.ndindex(*pub.shape)):
        if batch is not None:  # the batched pass's state of this set
            if chunk is None or flat >= chunk[0] + len(chunk[1]):
                chunk = next(batch.chunks)
            if chunk[2][flat - chunk[0]]:
                pub.keep(index, batch.draw(chunk[1][flat - chunk[0]], pub.shots, rng))
                infos.append(batch.info)
                continue
        gc = template.bind(rows[flat]) if template is not None else None
        if gc is not None:
            one = lowered
        elif lowered is not None:  # this set changes the structure: its own
            one = dataclasses.replace(lowered, circuit=pub.bind(lowered.circuit, index))
        else:
            one = pub.bind(pub.circuit, index)
        drawn = draw_circuit(engine, one, pub.shots, rng, pub.method, converted=gc)
        infos.append(drawn.info)
        pub.keep(index, drawn.clbits)
        if pub.amplitudes:
            amplitudes[index] = drawn_amplitudes(engine, drawn)
    return PubShots(summary(infos), amplitudes)


@dataclass
class _Batch:
    """A pub's sets drawn from the batched pass: its states chunk by chunk
    (:func:`~qsimdist.engine.binding_sweep.sweep_states`), the clbits' source qubits, the
    measured qubits and the report of each set."""

    chunks: Iterator
    sources: list
    measured: list[int]
    info: SampleInfo

    def draw(self, state: np.ndarray, shots: int, rng: np.random.Generator) -> np.ndarray:
        """Every clbit's ``shots`` values from ``state``: the statevector route's draw
        (:func:`~qsimdist.engine.state_sampling.rows_from_state`), one ``rng.random(shots)``
        as it takes."""
        from .state_sampling import rows_from_state

        bits, _ = rows_from_state(state, self.measured, rng.random(shots))
        return clbits_of(bits, self.measured, self.sources)


def _batch(engine: Engine, pub: SamplePub) -> _Batch | None:
    """The pub's parameter sets drawn from one batched statevector pass, where taken: a
    static circuit (final measurements only) with a template, without amplitudes asked."""
    lowered, template = pub.lowered, pub.template
    if (template is None or lowered is None or lowered.dynamic or lowered.ancillas
            or pub.amplitudes):
        return None
    from .binding_sweep import sampling_sweep_route, sweep_states

    sources = lowered.clbit_sources
    measured = sorted({q for q in sources if q is not None})
    if not measured or pub.shots == 0:
        return None
    run = engine.run
    chosen = sampling_sweep_route(template, len(pub.rows), measured, pub.shots, pub.method,
                                  run.executor, run.backend)
    if chosen is None:
        return None
    plan, route = chosen
    info = SampleInfo("statevector", len(measured), template.n_qubits,
                      predicted_flops=plan.flops,
                      extra={"route": route.to_dict(), "dynamic": False, "ancillas": 0})
    return _Batch(sweep_states(template, plan, pub.rows), sources, measured, info)


def drawn_amplitudes(engine: Engine, drawn: DrawnSample) -> dict:
    """``{bitstring over all qubits (qubit 0 rightmost): amplitude}`` of the drawn rows,
    computed with the engine's resolved options whole (backend, memory budget, executor,
    profile): the amplitude pass runs where the shots were drawn."""
    gc, lowered, measured, bits = drawn.circuit, drawn.lowered, drawn.measured, drawn.bits
    dynamic = lowered is None or lowered.dynamic  # None: sampled as trajectories
    n = drawn.qubits
    if dynamic or measured != list(range(n)):
        raise InvalidInputError(
            "return_amplitudes needs a circuit whose every qubit is measured once at the "
            f"end (measured {len(measured)} of {n} qubits"
            f"{', with mid-circuit measurement or reset' if dynamic else ''}); "
            "an amplitude of a partial or non-unitary measurement is undefined"
        )
    rows = np.unique(bits, axis=0)
    labels = [reorder_bits(row, "natural") for row in rows.tolist()]  # qubit 0 rightmost
    res = engine.amplitudes(gc, labels)
    return {b: complex(res.get(b)) for b in labels}


def summary(infos: list[SampleInfo]) -> dict:
    """One pub's sampling report: the method(s) and the totals over its parameter values."""
    if not infos:
        return {}
    methods = sorted({i.method for i in infos})
    first = infos[0].to_dict()
    out = {
        "method": methods[0] if len(methods) == 1 else methods,
        "predicted_flops": float(sum(i.predicted_flops for i in infos)),
        "contractions": sum(i.contractions for i in infos),
        "plans_made": sum(i.plans_made for i in infos),
        "plans_reused": sum(i.plans_reused for i in infos),
        "measured_qubits": first["measured_qubits"],
        "light_cone_qubits": max(i.light_cone_qubits for i in infos),
        "dynamic": any(i.extra.get("dynamic") for i in infos),
        "ancillas": max(i.extra.get("ancillas", 0) for i in infos),
        "cost_note": first["cost_note"],
        "route": first.get("route"),
    }
    if len(infos) == 1:  # method-specific numbers (e.g. rejection sampling's candidates)
        out.update({k: v for k, v in first.items() if k not in out})
    return out


__all__ = ["DrawnSample", "PubShots", "SamplePub", "clbits_of", "draw_circuit", "draw_pub",
           "drawn_amplitudes", "summary"]
