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
  through a batch index (up to :data:`CHAIN_MAX_BATCH` each); batches of 8 or
  more are built with a fixed structure (unsimplified, two-qubit gates split
  at their operator-Schmidt rank), and plans are reused for every network of
  the same structure (new arrays in the same plan), so the path search runs
  once per structure.

- ``stabilizer``: a Clifford circuit (every gate maps Paulis to Paulis) sampled
  by stim's frame sampler (:mod:`qsimdist.engine.stabilizer`), polynomial in
  the width; stim's seed is drawn from the caller's generator.

Randomness: every uniform number is drawn up front from the caller's
generator, so the same seed gives the same bitstrings whatever the executor
or the rank count (under MPI, rank 0's bits are broadcast as well).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError, PlanError
from ..frontends import GateCircuit, amplitude_network
from ..frontends.fusion import fuse_single_qubit_gates
from ..network import Network

#: the marginal method opens at most this many light-cone qubits (2^k amplitudes)
MARGINAL_MAX_QUBITS = 22
#: the doubled-marginal method opens at most this many measured qubits
DOUBLED_MAX_QUBITS = 16
#: qubits per group of the conditional chain
CHAIN_GROUP = 8
#: most elements (prefixes x 2^group) one chain contraction may output
CHAIN_MAX_OUTPUT = 1 << 20
#: most prefixes one chain contraction batches (a wider batch index makes the path worse)
CHAIN_MAX_BATCH = 128
#: chain batches of at least this many prefixes are planned unsimplified (gates split at their
#: operator-Schmidt rank instead), so that every batch of a size shares one plan
CHAIN_FIXED_STRUCTURE_BATCH = 8
#: path-search trials for those unsimplified chain networks
CHAIN_PATH_REPEATS = 8
#: predicted seconds to plan one chain network whose path is not cached (measured:
#: efficient_su2(24, reps=3), 2,000 shots, 3 plans made: 4.3 s with empty caches against
#: 1.24 s with the paths on disk); the router adds it per structure the chain will plan
#: unless this circuit's chain has run before with this cache (:func:`chain_planned`)
CHAIN_PLAN_SECONDS = 1.0
#: network structures a Contractor remembers as cheap or not (to simplify or not)
CHEAP_CACHE_SIZE = 512
METHODS = ("auto", "statevector", "marginal", "doubled-marginal", "chain", "rejection",
           "stabilizer")
#: frugal rejection sampling accepts a candidate x with probability min(1, p(x) 2^n / M)
REJECTION_M = 12.0
#: rounds of candidates before frugal rejection sampling gives up
REJECTION_ROUNDS = 50


@dataclass
class ContractionStats:
    """What a :class:`Contractor` did (``predicted_flops`` comes from the plans' cost model)."""

    contractions: int = 0
    plans_made: int = 0
    plans_reused: int = 0
    predicted_flops: float = 0.0
    peak_bytes: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Contractor:
    """Contracts networks through cached plans: one path search per network structure.

    Args:
        dtype: ``complex64`` or ``complex128``.
        memory_limit: peak bytes per contraction (``"8GiB"``, an int, ``None``:
            the machine's default, ``"none"``: unlimited).
        executor: ``"local"`` or ``"mpi"`` (run the same calls on every rank).
        profile: hardware profile for ``executor="mpi"`` (default ``local-cpu``).
        comm: MPI communicator (default ``MPI.COMM_WORLD``).
        backend: array library, ``numpy`` or ``cupy``.
    """

    def __init__(self, dtype: str = "complex64", memory_limit=None, executor: str = "local",
                 profile=None, comm=None, backend: str = "numpy") -> None:
        from .options import RunOptions

        self.options = RunOptions.resolve(dtype=dtype, memory_limit=memory_limit,
                                          backend=backend, executor=executor, profile=profile,
                                          comm=comm)
        self.dtype = self.options.dtype
        self.budget = self.options.memory
        self.limit = self.budget.limit
        self.executor = executor
        self.backend = backend
        self.comm = self.options.comm
        self.profile = None
        if self.options.distributed:
            from .coordination import profile_for

            self.profile = profile_for(profile or "local-cpu", self.limit)
        self.cheap: dict = {}
        self.stats = ContractionStats()

    @property
    def rank(self) -> int:
        return 0 if self.comm is None else self.comm.Get_rank()

    def contract(self, net: Network, simplify_network: bool = True,
                 path_options=None) -> np.ndarray:
        """Contract ``net``; the result's axes follow ``net.output``.

        ``simplify_network``: simplify first (quimb) unless the network is cheap
        as it is; ``False`` keeps the structure, so that networks differing only
        in their arrays share one plan. ``path_options``: the path search's
        budget (:class:`~qsimdist.planner.path.PathOptions`).
        """
        from ..planner.simplify import DEFAULT_SEQUENCE, is_cheap, simplify

        # whether a structure is cheap enough to plan as it is, decided once per structure
        raw = (net.inputs, net.output, tuple(sorted(net.size_dict.items())))
        cheap = self.cheap.get(raw)
        if cheap is None:
            cheap = self.cheap[raw] = is_cheap(net)
            while len(self.cheap) > CHEAP_CACHE_SIZE:
                self.cheap.pop(next(iter(self.cheap)))
        if not cheap and simplify_network:
            net = simplify(net, DEFAULT_SEQUENCE, skip_cheap=False)
        from .cache import PLANS

        # distributed: made unsliced on rank 0 and distributed for the profile's memory (every
        # rank decides reuse alike: the per-rank limits may differ, the profile does not)
        plan, reused = PLANS.plan_for(net, self.options, profile=self.profile,
                                      path_options=path_options)
        if reused:
            self.stats.plans_reused += 1
        else:
            self.stats.plans_made += 1
        out = plan.execute(backend=self.backend, **self.options.execute_keywords())
        out = out.get() if hasattr(out, "get") else out
        self.stats.contractions += 1
        self.stats.predicted_flops += float(plan.stats.flops)
        self.stats.peak_bytes = max(self.stats.peak_bytes, int(plan.stats.peak_bytes))
        return np.asarray(out)

# ------------------------------------------------------- light cones (GateCircuit.light_cone)
def _sub_circuit(circuit: GateCircuit, gates: Sequence[int], qubits: Sequence[int]) -> GateCircuit:
    """The given gates on the given qubits, renumbered 0.. in the order of ``qubits``."""
    where = {q: k for k, q in enumerate(qubits)}
    sub = GateCircuit(len(qubits), name=circuit.name)
    for k in gates:
        g = circuit.gates[k]
        sub.gates.append(dataclasses.replace(g, qubits=tuple(where[q] for q in g.qubits)))
    return sub


def _schmidt_split(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A two-qubit gate as ``A[o0, i0, r] B[r, o1, i1]`` when its operator-Schmidt rank is < 4."""
    t = matrix.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(4, 4)
    u, sv, vh = np.linalg.svd(t)
    rank = int(np.count_nonzero(sv > 1e-12 * max(sv[0], 1e-300)))
    if rank >= 4:
        return None
    return (u[:, :rank] * sv[:rank]).reshape(2, 2, rank), vh[:rank].reshape(rank, 2, 2)


def doubled_network(circuit: GateCircuit, open_qubits: list[int], fixed_qubits: list[int] = (),
                    prefixes: np.ndarray | None = None, split_gates: bool = False) -> Network:
    """``<psi| P |psi>`` with the light cone cancelled.

    ``P`` keeps the ``open_qubits`` open (ket and bra share one index per
    qubit, which is an output index, in the given order), projects
    ``fixed_qubits`` on ``prefixes`` (an ``S x len(fixed_qubits)`` 0/1 array:
    row ``s`` is one prefix; the output then starts with a batch index of size
    ``S``) and traces every other light-cone qubit. The result is real and
    non-negative up to rounding: ``out[s, x] = p(prefix_s, x)``.
    """
    measured = list(open_qubits) + list(fixed_qubits)
    gates, cone = circuit.light_cone(measured)
    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    size_dict: dict[str, int] = {}
    ket0 = np.array([1.0, 0.0], dtype=complex)
    size_bonds: dict[str, int] = {}
    split = {k: _schmidt_split(circuit.gates[k].matrix) for k in gates
             if len(circuit.gates[k].qubits) == 2} if split_gates else None
    for side, conj in (("k", False), ("b", True)):
        start = len(inputs)
        wire = {q: f"{side}{q}.0" for q in cone}
        layer = dict.fromkeys(cone, 0)
        for q in cone:
            inputs.append((wire[q],))
            arrays.append(ket0.copy())
        for k in gates:
            g = circuit.gates[k]
            outs = []
            for q in g.qubits:
                layer[q] += 1
                outs.append(f"{side}{q}.{layer[q]}")
            pair = split.get(k) if split is not None else None
            if pair is not None:  # two tensors joined by a bond of the operator-Schmidt rank
                a, b = pair
                bond = f"{side}g{k}"
                size_bonds[bond] = a.shape[-1]
                inputs.append((outs[0], wire[g.qubits[0]], bond))
                inputs.append((bond, outs[1], wire[g.qubits[1]]))
                arrays.extend((a.conj(), b.conj()) if conj else (a, b))
            else:
                inputs.append((*outs, *(wire[q] for q in g.qubits)))
                m = g.matrix.conj() if conj else g.matrix
                arrays.append(m.reshape((2,) * (2 * len(g.qubits))))
            for q, o in zip(g.qubits, outs):
                wire[q] = o
        # the last index of every wire is shared by ket and bra: rename it
        final = {wire[q]: f"m{q}" for q in cone}
        for t in range(start, len(inputs)):
            inputs[t] = tuple(final.get(i, i) for i in inputs[t])
    for term in inputs:
        for i in term:
            size_dict[i] = size_bonds.get(i, 2)
    output = tuple(f"m{q}" for q in open_qubits)
    if fixed_qubits:
        if prefixes is None:
            raise InvalidInputError("fixed qubits need prefixes (one row of bits per prefix)")
        prefixes = np.asarray(prefixes, dtype=np.int64).reshape(-1, len(fixed_qubits))
        size_dict["s"] = prefixes.shape[0]
        for j, q in enumerate(fixed_qubits):
            onehot = np.zeros((prefixes.shape[0], 2), dtype=complex)
            onehot[np.arange(prefixes.shape[0]), prefixes[:, j]] = 1.0
            inputs.append(("s", f"m{q}"))
            arrays.append(onehot)
        output = ("s", *output)
    return Network(inputs, output, size_dict, arrays, meta={"name": circuit.name})


# ---------------------------------------------------------------------- sampling
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


def choose_method(circuit: GateCircuit, measured: list[int]) -> tuple[str, dict]:
    """The cheapest method by predicted work, and the numbers it was chosen on.

    The marginal method costs about ``2^c`` amplitudes (``c`` light-cone
    qubits) times the gates; the doubled marginal about ``2^m`` outputs of a
    network twice the light cone's size; the chain ``shots``-independent
    groups of ``2^group`` outputs per distinct prefix. The first two are
    refused beyond :data:`MARGINAL_MAX_QUBITS` / :data:`DOUBLED_MAX_QUBITS`.
    """
    gates, cone = circuit.light_cone(measured)
    c, m = len(cone), len(measured)
    work = 1.0 + sum(2 ** len(circuit.gates[k].qubits) for k in gates)
    predicted = {
        "marginal": 8.0 * 2.0**c * work if c <= MARGINAL_MAX_QUBITS else math.inf,
        "doubled-marginal": 16.0 * 2.0**m * work if m <= DOUBLED_MAX_QUBITS else math.inf,
    }
    shown = {k: v for k, v in predicted.items() if math.isfinite(v)}
    notes = {"light_cone_qubits": c, "predicted_selection_work": shown}
    if c > MARGINAL_MAX_QUBITS and m > DOUBLED_MAX_QUBITS:
        return "chain", notes
    # the amplitude marginal is one plain contraction; prefer it on ties
    method = min(("marginal", "doubled-marginal"), key=lambda k: (predicted[k], k != "marginal"))
    return method, notes


def _draw(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices drawn from the unnormalised, rounding-noisy distribution ``p`` by uniforms ``u``."""
    p = np.clip(np.asarray(p, dtype=np.float64).real, 0.0, None).ravel()
    cdf = np.cumsum(p)
    total = cdf[-1]
    if not np.isfinite(total) or total <= 0.0:
        raise PlanError(f"the marginal distribution sums to {total}; cannot sample from it")
    idx = np.searchsorted(cdf, u * total, side="right")
    return np.minimum(idx, p.size - 1)


def _index_bits(idx: np.ndarray, width: int) -> np.ndarray:
    """Rows of ``width`` bits, the first column the most significant bit of ``idx``."""
    shifts = np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((idx[:, None] >> shifts[None, :]) & 1).astype(np.uint8)


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

    route = None
    if method in ("auto", "statevector"):
        route = route_sampling(original, prepared, measured, shots, contractor, method)
        if clifford is not None:
            from .router import DRAW_SECONDS_PER_SHOT, prefer_stabilizer

            route = prefer_stabilizer(route, clifford.seconds, lambda tn=route.method: (
                tn_sampling_seconds(prepared()["circuit"], measured, shots, tn,
                                    prepared()["notes"])),
                DRAW_SECONDS_PER_SHOT * shots)
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
        bits, probs, flops = _sample_statevector(original, measured, contractor.dtype, route, u)
        info = SampleInfo("statevector", m, original.n_qubits, predicted_flops=flops,
                          extra={"route": route.to_dict()})
        return bits, info, probs
    if route is not None:
        notes["route"] = route.to_dict()
    before = dataclasses.replace(contractor.stats)
    if chosen == "chain":
        bits = _sample_chain(circuit, measured, shots, rng, contractor)
        probs: dict = {}
        _record_chain(circuit, measured)
    elif chosen == "rejection":
        bits, accepted = _sample_rejection(circuit, measured, shots, rng, contractor)
        probs = {}
        notes.update(accepted)
    else:
        u = rng.random(shots)
        p = (_marginal_by_amplitudes(circuit, measured, contractor) if chosen == "marginal"
             else _marginal_doubled(circuit, measured, contractor))
        bits, probs = _draw_rows(p, u, m)
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


def _draw_rows(p: np.ndarray, u: np.ndarray, m: int) -> tuple[np.ndarray, dict]:
    """Rows of ``m`` bits drawn from ``p`` by ``u``, and each distinct row's probability."""
    idx = _draw(p, u)
    total = float(np.clip(p, 0, None).sum())
    drawn = np.unique(idx)
    probs = dict(zip(map(tuple, _index_bits(drawn, m).tolist()),
                     (np.clip(p[drawn], 0, None) / total).tolist()))
    return _index_bits(idx, m), probs


def tn_sampling_seconds(circuit: GateCircuit, measured: list[int], shots: int, method: str,
                        notes: dict) -> float:
    """Predicted seconds of a tensor-network sampling method (the router's unit).

    As for amplitudes (:func:`qsimdist.engine.router.tn_seconds`): per contraction,
    the multiply-adds of cotengra's greedy path on the network the method builds,
    at the router's contraction rate, plus the per-gate floor. ``marginal``: one
    contraction of the light cone with every qubit open; ``doubled-marginal``: one
    doubled network; ``chain``: per group of qubits, its contractions (prefixes
    batched), each priced as the doubled network with the group's window open
    times the batch's prefixes (pricing every group as the first one, batch
    ignored, predicted 0.1 s for efficient_su2(24, reps=3)'s 2,000 shots, which
    took 2.3-14.7 s).
    """
    from .router import TN_RATE, greedy_cost, tn_floor

    floor = tn_floor(len(circuit.gates), 1)
    if method == "marginal":
        gates, cone = circuit.light_cone(measured)
        net = amplitude_network(_sub_circuit(circuit, gates, cone), "*" * len(cone))
        return greedy_cost(net) / TN_RATE + floor
    if method == "doubled-marginal":
        return greedy_cost(doubled_network(circuit, measured)) / TN_RATE + floor
    if method == "chain":
        total, done, structures = 0.0, 0, 0
        for a in range(0, len(measured), CHAIN_GROUP):
            g = min(CHAIN_GROUP, len(measured) - a)
            prefixes = min(shots, 1 << min(done, 62))
            batch = min(prefixes, max(1, min(CHAIN_MAX_BATCH, CHAIN_MAX_OUTPUT >> g)))
            calls = -(-prefixes // batch)
            # the group's window open, the rest summed (a fixed prefix costs about the same);
            # a batch of prefixes multiplies the contraction
            window = greedy_cost(doubled_network(circuit, measured[a:a + g]))
            total += calls * (batch * window / TN_RATE + floor)
            # full batches share one plan, a last partial batch has one of its own
            structures += 1 if calls == 1 or prefixes % batch == 0 else 2
            done += g
        if not chain_planned(circuit, measured):
            total += CHAIN_PLAN_SECONDS * structures
            notes["chain_plans_priced"] = structures
        return total
    return math.inf


def route_sampling(original: GateCircuit, prepared, measured: list[int], shots: int,
                   contractor: Contractor, method: str):
    """The router's choice between the statevector and the cheapest tensor-network method
    for these shots. ``prepared()`` gives the tensor-network side (see
    :func:`sample_bits`); it is called only where that side must be named or priced:
    where the statevector's price is below the tensor network's floor (per-gate, from a
    lower bound on the fused gates), nothing of that side is made."""
    from .router import (
        DRAW_SECONDS_PER_SHOT,
        MARGINAL_SECONDS_PER_ELEMENT,
        route_state_reading,
        tn_floor,
    )

    n = original.n_qubits
    read = MARGINAL_SECONDS_PER_ELEMENT * 2.0**n + DRAW_SECONDS_PER_SHOT * shots

    def tn_seconds() -> float:
        side = prepared()
        return tn_sampling_seconds(side["circuit"], measured, shots, side["method"],
                                   side["notes"])

    return route_state_reading(original, what="sampling", dtype=contractor.dtype,
                               budget=contractor.budget, method=method,
                               executor=contractor.executor, backend=contractor.backend,
                               tn_method=lambda: prepared()["method"],
                               tn_seconds_predicted=tn_seconds, read_seconds=read,
                               tn_floor_seconds=tn_floor(folded_gates_at_least(original), 1))


def folded_gates_at_least(circuit: GateCircuit) -> int:
    """At least as many gates as :func:`fuse_single_qubit_gates` leaves (it folds only
    one-qubit gates, so every multi-qubit gate stays), counted without folding."""
    return max(sum(1 for g in circuit.gates if len(g.qubits) > 1), 1)


#: from this many qubits the statevector sampler draws from the state with the compiled
#: kernel even where this process has not loaded it yet (below, numpy's marginal and
#: cumulative sum cost less than numba's start-up)
DIRECT_DRAW_MIN_QUBITS = 24


def _sample_statevector(circuit: GateCircuit, measured: list[int], dtype: str, route,
                        u: np.ndarray) -> tuple[np.ndarray, dict, float]:
    """Rows of the ``measured`` bits drawn by ``u`` from the final state, each distinct
    row's probability, and the statevector's FLOPs.

    Where every qubit is measured, indices are drawn from ``|state|^2`` directly by the
    compiled two-pass kernel (:func:`qsimdist.executors.sv_kernels.draw_indices`: no
    probability array, no cumulative sum); otherwise from the marginal of ``measured``.
    """
    from .router import final_state
    from ..executors.statevector import compiled_kernel_runs
    from ..frontends.fusion import statevector_flops

    n = circuit.n_qubits
    state, fused, _ = final_state(circuit, dtype, route)
    if len(set(measured)) == n:  # every qubit: draw state indices, no marginal
        from ..executors import sv_kernels

        if compiled_kernel_runs(n, 0) and (sv_kernels.warm() or n >= DIRECT_DRAW_MIN_QUBITS):
            idx, total = sv_kernels.draw_indices(state, u, sv_kernels.n_chunks())
            if not np.isfinite(total) or total <= 0.0:
                raise PlanError(f"the state's norm is {total}; cannot sample from it")
        else:
            p = np.square(state.real, dtype=np.float64)
            p += np.square(state.imag, dtype=np.float64)
            idx = _draw(p, u)
            total = float(p.sum())
            del p
        shifts = np.array(measured, dtype=np.int64)  # column j is qubit measured[j]
        rows = ((idx[:, None] >> shifts[None, :]) & 1).astype(np.uint8)
        drawn, first = np.unique(idx, return_index=True)
        p = np.abs(state[drawn].astype(np.complex128)) ** 2 / total
        probs = dict(zip(map(tuple, rows[first].tolist()), p.tolist()))
        return rows, probs, statevector_flops(fused)
    p = _marginal_of_state(state, measured)
    del state
    bits, probs = _draw_rows(p, u, len(measured))
    return bits, probs, statevector_flops(fused)


def _marginal_of_state(state: np.ndarray, measured: list[int]) -> np.ndarray:
    """``p`` over ``measured`` (first the most significant) from the flat state."""
    n = int(state.size).bit_length() - 1
    probs = np.square(state.real)
    probs += np.square(state.imag)
    del state
    # axis a of the (2,)*n tensor holds qubit n-1-a
    keep = [n - 1 - q for q in measured]
    summed = tuple(a for a in range(n) if a not in set(keep))
    tensor = probs.reshape((2,) * n)
    marginal = tensor.sum(axis=summed, dtype=np.float64) if summed else tensor.astype(np.float64)
    remaining = sorted(keep)
    marginal = np.transpose(marginal, [remaining.index(a) for a in keep])
    return marginal.reshape(-1)


def _marginal_by_amplitudes(circuit: GateCircuit, measured: list[int],
                            contractor: Contractor) -> np.ndarray:
    """``p`` over ``measured`` (first the most significant), from the light cone's amplitudes."""
    gates, cone = circuit.light_cone(measured)
    sub = _sub_circuit(circuit, gates, cone)
    n = len(cone)
    amps = contractor.contract(amplitude_network(sub, "*" * n))
    probs = (np.abs(np.asarray(amps, dtype=np.complex128)) ** 2).reshape((2,) * n)
    # axis j of the amplitudes is sub-qubit n-1-j; keep the measured ones in the asked order
    axis_of = {cone[n - 1 - j]: j for j in range(n)}
    keep = [axis_of[q] for q in measured]
    summed = tuple(j for j in range(n) if j not in keep)
    probs = probs.sum(axis=summed) if summed else probs
    remaining = sorted(keep)
    probs = np.transpose(probs, [remaining.index(a) for a in keep])
    return probs.reshape(-1)


def _marginal_doubled(circuit: GateCircuit, measured: list[int],
                      contractor: Contractor) -> np.ndarray:
    out = contractor.contract(doubled_network(circuit, measured))
    return np.asarray(out).real.reshape(-1)


def _bucket(n: int) -> int:
    """``n`` rounded up to a power of two (batch sizes share plans)."""
    return 1 << max(0, int(n - 1).bit_length())


def _chain_record(circuit: GateCircuit, measured: list[int]):
    """Where this circuit's chain notes that it has run (its paths then sit in the cache):
    a file named by the structure (qubits of every gate, the measured qubits)."""
    import hashlib
    import json

    from ..planner.path import cache_dir

    blob = json.dumps([circuit.n_qubits, [list(g.qubits) for g in circuit.gates], measured])
    return cache_dir().parent / "chains" / f"{hashlib.sha256(blob.encode()).hexdigest()}"


def chain_planned(circuit: GateCircuit, measured: list[int]) -> bool:
    """Whether the chain of this circuit's structure ran before with this cache directory
    (its plan searches are then recalled, not repeated)."""
    import os

    return os.path.lexists(_chain_record(circuit, measured))


def _record_chain(circuit: GateCircuit, measured: list[int]) -> None:
    """Note that this structure's chain has planned (an empty file; a cache that cannot be
    written is skipped, as the path cache skips it)."""
    record = _chain_record(circuit, measured)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.touch()
    except OSError:
        pass


def _chain_path_options():
    from ..planner.path import PathOptions

    return PathOptions(max_repeats=CHAIN_PATH_REPEATS, reconfigure=False)


def _sample_chain(circuit: GateCircuit, measured: list[int], shots: int,
                  rng: np.random.Generator, contractor: Contractor) -> np.ndarray:
    m = len(measured)
    groups = [measured[a:a + CHAIN_GROUP] for a in range(0, m, CHAIN_GROUP)]
    u = rng.random((shots, len(groups)))
    bits = np.zeros((shots, m), dtype=np.uint8)
    done = 0
    for j, group in enumerate(groups):
        g = len(group)
        prefix_qubits = measured[:done]
        if done:
            rows, inverse = np.unique(bits[:, :done], axis=0, return_inverse=True)
            inverse = np.asarray(inverse).reshape(-1)
        else:
            rows, inverse = np.zeros((1, 0), np.uint8), np.zeros(shots, np.int64)
        per_call = max(1, min(CHAIN_MAX_BATCH, CHAIN_MAX_OUTPUT >> g))
        cond = np.empty((rows.shape[0], 1 << g))
        for a in range(0, rows.shape[0], per_call):
            chunk = rows[a:a + per_call]
            if done:
                size = _bucket(chunk.shape[0])
                padded = np.concatenate([chunk, np.repeat(chunk[:1], size - chunk.shape[0], 0)])
                if size >= CHAIN_FIXED_STRUCTURE_BATCH:
                    # many prefixes: keep one structure per batch size (plans reused) instead of
                    # simplifying every batch into a structure of its own
                    net = doubled_network(circuit, group, prefix_qubits, padded, split_gates=True)
                    out = contractor.contract(net, simplify_network=False,
                                              path_options=_chain_path_options())
                else:
                    out = contractor.contract(doubled_network(circuit, group, prefix_qubits,
                                                              padded))
                cond[a:a + chunk.shape[0]] = np.asarray(out).real.reshape(size, -1)[:chunk.shape[0]]
            else:
                out = contractor.contract(doubled_network(circuit, group))
                cond[0] = np.asarray(out).real.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(rows.shape[0] + 1))
        for r in range(rows.shape[0]):
            who = order[bounds[r]:bounds[r + 1]]
            idx = _draw(cond[r], u[who, j])
            bits[who, done:done + g] = _index_bits(idx, g)
        done += g
    return bits


def _sample_rejection(circuit: GateCircuit, measured: list[int], shots: int,
                      rng: np.random.Generator, contractor: Contractor) -> tuple[np.ndarray, dict]:
    """Frugal rejection sampling (Markov et al. 2018) from batches of amplitudes.

    Candidates are uniform bitstrings of the light cone's qubits, which must
    all be measured (no marginal to take); each is accepted with probability
    ``min(1, p(x) 2^n / M)``. This is exact for every ``x`` with
    ``p(x) <= M / 2^n``; mass above is truncated, which for a Porter-Thomas
    distribution is ``(1 + M) e^-M`` (1e-4 at ``M = 12``), reported as
    ``truncated`` when a drawn candidate was over the bound.
    """
    gates, cone = circuit.light_cone(measured)
    if sorted(cone) != sorted(measured):
        raise InvalidInputError(
            "rejection sampling needs every qubit of the measured qubits' light cone measured "
            f"({len(measured)} measured, {len(cone)} in the light cone); use method 'auto'")
    sub = _sub_circuit(circuit, gates, measured)  # sub-qubit k is measured[k]
    m = len(measured)
    bits = np.zeros((shots, m), dtype=np.uint8)
    filled = candidates = over = 0
    for _ in range(REJECTION_ROUNDS):
        need = shots - filled
        if need <= 0:
            break
        batch = int(min(max(2 * REJECTION_M * need, 64), 1 << 16))
        cand = rng.integers(0, 2, size=(batch, m), dtype=np.uint8)
        u = rng.random(batch)
        # qiskit order: the rightmost character is sub-qubit 0
        labels = ["".join(map(str, row[::-1])) for row in cand.tolist()]
        amps = _amplitudes_of(sub, labels, contractor)
        ratio = np.abs(amps) ** 2 * 2.0**m / REJECTION_M
        over += int(np.count_nonzero(ratio > 1))
        keep = np.flatnonzero(u < ratio)[:need]
        bits[filled:filled + keep.size] = cand[keep]
        filled += keep.size
        candidates += batch
    if filled < shots:
        raise PlanError(
            f"rejection sampling accepted {filled} of {shots} shots in {candidates} candidates; "
            "the distribution is far from uniform-like; use method 'auto'")
    return bits, {"candidates": candidates, "rejection_M": REJECTION_M,
                  "candidates_over_bound": over,
                  "truncated": "exact" if over == 0 else "probabilities above M/2^n truncated"}


def _amplitudes_of(circuit: GateCircuit, labels: list[str], contractor: Contractor) -> np.ndarray:
    """Amplitudes of ``labels`` through :func:`qsimdist.amplitudes` (batched contractions)."""
    from .amplitudes import run_amplitudes

    # the contractor's options whole (backend, memory budget, executor): never rebuilt
    res = run_amplitudes(circuit, labels, contractor.options)
    contractor.stats.contractions += int(res.stats.get("contractions", 0))
    contractor.stats.predicted_flops += float(res.stats.get("flops", 0.0))
    return np.asarray(res.amplitudes, dtype=np.complex128)
