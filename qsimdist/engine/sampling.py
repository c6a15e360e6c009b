"""Exact sampling of measured qubits from a unitary circuit, by tensor-network contraction.

Given a :class:`~qsimdist.frontends.GateCircuit` ``U`` (started in ``|0...0>``)
and the qubits measured at the end, :func:`sample_bits` draws bitstrings from
``p(x) = ||(<x|_M (x) I) U|0>||^2`` exactly, by the route the engine's router
prices cheapest (reported with the predictions it was chosen on and the
predicted FLOPs of the plans it ran):

- ``statevector``: the fused gates applied to the full ``2^n`` state, the
  measured qubits' marginal summed from ``|psi|^2``, every shot drawn from it
  (the cost does not grow with the shots); taken where the state fits a
  quarter of the memory budget and is predicted faster than the cheapest
  tensor-network method below:

- ``marginal``: the amplitudes of the measured qubits' backward light cone
  (every light-cone qubit open, one contraction), squared and summed over the
  unmeasured ones; then every shot is drawn from that distribution;
- ``doubled-marginal``: the doubled network ``<psi|x><x|_M|psi>`` with the light
  cone cancelled (gates outside the measured qubits' backward light cone meet
  their adjoints and vanish), the measured qubits open as shared ket/bra
  indices: the marginal itself, for a wide light cone but few measured qubits;
- ``chain``: a chain of conditional marginals over groups of measured qubits.
  Group ``j`` is drawn from ``<psi|P_prefix (x) |x><x|_g|psi>``, the prefix
  drawn so far projected on both sides, again with only the light cone of the
  prefix and the group. The distinct prefixes of one group share contractions
  through a batch index (up to
  :data:`~qsimdist.engine.network_sampling.CHAIN_MAX_BATCH` each); batches of 8 or
  more are built with a fixed structure (unsimplified, two-qubit gates split
  at their operator-Schmidt rank), and plans are reused for every network of
  the same structure (new arrays in the same plan), so the path search runs
  once per structure.

- ``stabilizer``: a Clifford circuit (every gate maps Paulis to Paulis) sampled
  by stim's frame sampler (:mod:`qsimdist.engine.stabilizer`), polynomial in
  the width; stim's seed is drawn from the caller's generator.

Where each part lives: :func:`sample_bits` and the route (this module);
drawing from a state (:mod:`qsimdist.engine.state_sampling`); the
tensor-network methods, their networks and prices
(:mod:`qsimdist.engine.network_sampling`); contracting through cached plans
(:mod:`qsimdist.engine.contractor`).

Randomness: every uniform number is drawn up front from the caller's
generator, so the same seed gives the same bitstrings whatever the executor
or the rank count (under MPI, rank 0's bits are broadcast as well).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..frontends import GateCircuit
from ..frontends.one_qubit_fusion import fuse_single_qubit_gates
from ..hardware import costs
from .contractor import Contractor
from .network_sampling import (
    choose_method,
    marginal_by_amplitudes,
    marginal_doubled,
    record_chain,
    sample_chain,
    sample_rejection,
    tn_sampling_seconds,
)
from .state_sampling import draw_rows, sample_statevector

#: sampling methods (``auto``: the router picks by predicted cost)
METHODS = ("auto", "statevector", "marginal", "doubled-marginal", "chain", "rejection",
           "stabilizer")


@dataclass
class SampleInfo:
    """How a sample was drawn: the method, its predicted cost and the contractions run."""

    method: str
    measured_qubits: int
    light_cone_qubits: int
    predicted_flops: float = 0.0
    contractions: int = 0
    plans_made: int = 0
    plans_reused: int = 0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        out.update(self.extra)
        out["cost_note"] = "predicted_flops: the plans' cost model (predicted), not measured"
        return out


def sample_bits(circuit: GateCircuit, measured: list[int], shots: int,
                rng: np.random.Generator, contractor: Contractor,
                method: str = "auto") -> tuple[np.ndarray, SampleInfo, dict]:
    """Draw ``shots`` bitstrings of the ``measured`` qubits of ``U|0>``.

    Returns ``(bits, info, probabilities)``: ``bits`` is ``shots x len(measured)``
    (uint8, column ``j`` is qubit ``measured[j]``), ``info`` the method and its
    predicted cost, and ``probabilities`` maps each distinct drawn row (as a
    tuple) to its probability where the method computed it.
    """
    measured = [int(q) for q in measured]
    if len(set(measured)) != len(measured):
        raise InvalidInputError(f"measured qubits repeat: {measured}")
    if method not in METHODS:
        raise InvalidInputError(f"unknown sampling method {method!r}; valid: {', '.join(METHODS)}")
    m = len(measured)
    if m == 0 or shots == 0:
        return np.zeros((shots, m), np.uint8), SampleInfo("none", m, 0), {}
    original = circuit
    clifford = None
    if method in ("auto", "stabilizer"):  # a Clifford circuit: stim (engine/stabilizer.py)
        from . import stabilizer

        clifford = stabilizer.choose_for_sampling(circuit, measured, shots, method,
                                                  contractor.executor, contractor.backend)
        if clifford is not None and clifford.route is not None:
            return _sample_stabilizer(clifford, measured, shots, rng, clifford.route)
    tn_side: dict = {}

    def prepared() -> dict:
        """The tensor-network side, made where it is priced or run: one-qubit gates folded
        into their neighbours, the cheapest method and its notes."""
        if not tn_side:
            folded = fuse_single_qubit_gates(original)
            tn_side["circuit"] = folded
            tn_side["method"], tn_side["notes"] = choose_method(folded, measured)
        return tn_side

    route = cache = None
    if method in ("auto", "statevector"):
        from .router import CircuitCache

        cache = CircuitCache(original)  # the fusion blocks priced are the blocks run
        route = route_sampling(original, prepared, measured, shots, contractor, method, cache)
        if clifford is not None:
            from .router import prefer_stabilizer

            route = prefer_stabilizer(route, clifford.seconds, lambda tn=route.method: (
                tn_sampling_seconds(prepared()["circuit"], measured, shots, tn,
                                    prepared()["notes"])),
                costs.DRAW_SECONDS_PER_SHOT * shots)
            if route.method == "stabilizer":
                return _sample_stabilizer(clifford, measured, shots, rng, route)
        chosen = route.method
    else:
        chosen = method
    if chosen != "statevector":
        circuit = prepared()["circuit"]
        notes = prepared()["notes"] if method in ("auto", "statevector") else {}
    if chosen == "statevector":
        u = rng.random(shots)
        bits, probs, flops = sample_statevector(original, measured, contractor.dtype, route, u,
                                                cache)
        info = SampleInfo("statevector", m, original.n_qubits, predicted_flops=flops,
                          extra={"route": route.to_dict()})
        return bits, info, probs
    if route is not None:
        notes["route"] = route.to_dict()
    before = dataclasses.replace(contractor.stats)
    if chosen == "chain":
        bits = sample_chain(circuit, measured, shots, rng, contractor)
        probs: dict = {}
        record_chain(circuit, measured)
    elif chosen == "rejection":
        bits, accepted = sample_rejection(circuit, measured, shots, rng, contractor)
        probs = {}
        notes.update(accepted)
    else:
        u = rng.random(shots)
        p = (marginal_by_amplitudes(circuit, measured, contractor) if chosen == "marginal"
             else marginal_doubled(circuit, measured, contractor))
        bits, probs = draw_rows(p, u, m)
    bits = contractor.options.runner.broadcast(bits)  # rank 0's draw on every rank
    after = contractor.stats
    _, cone = circuit.light_cone(measured)
    info = SampleInfo(
        method=chosen,
        measured_qubits=m,
        light_cone_qubits=notes.get("light_cone_qubits", len(cone)),
        predicted_flops=after.predicted_flops - before.predicted_flops,
        contractions=after.contractions - before.contractions,
        plans_made=after.plans_made - before.plans_made,
        plans_reused=after.plans_reused - before.plans_reused,
        extra={k: v for k, v in notes.items() if k != "light_cone_qubits"},
    )
    return bits, info, probs


def _sample_stabilizer(choice, measured: list[int], shots: int, rng: np.random.Generator,
                       route) -> tuple[np.ndarray, SampleInfo, dict]:
    """Shots of a Clifford circuit from stim's frame sampler, seeded from ``rng``
    (``choice``: :class:`~qsimdist.engine.stabilizer.StabilizerChoice`)."""
    from .stabilizer import seed_from

    bits = choice.circuit.sample(measured, shots, seed_from(rng))
    info = SampleInfo("stabilizer", len(measured), choice.circuit.n_qubits,
                      extra={"route": route.to_dict()})
    return bits, info, {}


def route_sampling(original: GateCircuit, prepared, measured: list[int], shots: int,
                   contractor: Contractor, method: str, cache=None):
    """The router's choice between the statevector and the cheapest tensor-network method
    for these shots. ``prepared()`` gives the tensor-network side (see
    :func:`sample_bits`); it is called only where that side must be named or priced:
    where the statevector's price is below the tensor network's floor (per-gate, from a
    lower bound on the fused gates), nothing of that side is made. ``cache``: the
    router's :class:`~qsimdist.engine.router.CircuitCache` for the run to fuse from."""
    from .router import route_state_reading, tn_floor

    n = original.n_qubits
    read = costs.MARGINAL_SECONDS_PER_ELEMENT * 2.0**n + costs.DRAW_SECONDS_PER_SHOT * shots

    def tn_seconds() -> float:
        side = prepared()
        return tn_sampling_seconds(side["circuit"], measured, shots, side["method"],
                                   side["notes"])

    return route_state_reading(original, what="sampling", dtype=contractor.dtype,
                               budget=contractor.budget, method=method,
                               executor=contractor.executor, backend=contractor.backend,
                               tn_method=lambda: prepared()["method"],
                               tn_seconds_predicted=tn_seconds, read_seconds=read,
                               tn_floor_seconds=tn_floor(folded_gates_at_least(original), 1),
                               cache=cache)


def folded_gates_at_least(circuit: GateCircuit) -> int:
    """At least as many gates as :func:`fuse_single_qubit_gates` leaves (it folds only
    one-qubit gates, so every multi-qubit gate stays), counted without folding."""
    return max(sum(1 for g in circuit.gates if len(g.qubits) > 1), 1)


__all__ = [
    "METHODS",
    "SampleInfo",
    "folded_gates_at_least",
    "route_sampling",
    "sample_bits",
]
