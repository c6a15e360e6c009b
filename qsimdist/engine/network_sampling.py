"""The tensor-network sampling methods: ``marginal``, ``doubled-marginal``, ``chain`` and
``rejection`` (described in :mod:`qsimdist.engine.sampling`), their networks, the choice
between them (:func:`choose_method`) and their price in the router's unit
(:func:`tn_sampling_seconds`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ..config import reorder_bits
from ..errors import InvalidInputError, PlanError
from ..frontends import GateCircuit, amplitude_network
from ..hardware import costs
from ..network import Network
from .contractor import Contractor
from .state_sampling import draw_from_distribution, index_bits

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
#: frugal rejection sampling accepts a candidate x with probability min(1, p(x) 2^n / M)
REJECTION_M = 12.0
#: rounds of candidates before frugal rejection sampling gives up
REJECTION_ROUNDS = 50


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
    from .router import greedy_cost, tn_floor

    floor = tn_floor(len(circuit.gates), 1)
    if method == "marginal":
        gates, cone = circuit.light_cone(measured)
        net = amplitude_network(_sub_circuit(circuit, gates, cone), "*" * len(cone))
        return greedy_cost(net) / costs.TN_RATE + floor
    if method == "doubled-marginal":
        return greedy_cost(doubled_network(circuit, measured)) / costs.TN_RATE + floor
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
            total += calls * (batch * window / costs.TN_RATE + floor)
            # full batches share one plan, a last partial batch has one of its own
            structures += 1 if calls == 1 or prefixes % batch == 0 else 2
            done += g
        if not chain_planned(circuit, measured):
            total += costs.CHAIN_PLAN_SECONDS * structures
            notes["chain_plans_priced"] = structures
        return total
    return math.inf


def marginal_by_amplitudes(circuit: GateCircuit, measured: list[int],
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


def marginal_doubled(circuit: GateCircuit, measured: list[int],
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

    from ..planner.path_cache import cache_dir

    blob = json.dumps([circuit.n_qubits, [list(g.qubits) for g in circuit.gates], measured])
    return cache_dir().parent / "chains" / f"{hashlib.sha256(blob.encode()).hexdigest()}"


def chain_planned(circuit: GateCircuit, measured: list[int]) -> bool:
    """Whether the chain of this circuit's structure ran before with this cache directory
    (its plan searches are then recalled, not repeated)."""
    import os

    return os.path.lexists(_chain_record(circuit, measured))


def record_chain(circuit: GateCircuit, measured: list[int]) -> None:
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


def sample_chain(circuit: GateCircuit, measured: list[int], shots: int,
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
            idx = draw_from_distribution(cond[r], u[who, j])
            bits[who, done:done + g] = index_bits(idx, g)
        done += g
    return bits


def sample_rejection(circuit: GateCircuit, measured: list[int], shots: int,
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
        labels = [reorder_bits(row, "natural") for row in cand.tolist()]
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


__all__ = [
    "CHAIN_FIXED_STRUCTURE_BATCH",
    "CHAIN_GROUP",
    "CHAIN_MAX_BATCH",
    "CHAIN_MAX_OUTPUT",
    "CHAIN_PATH_REPEATS",
    "DOUBLED_MAX_QUBITS",
    "MARGINAL_MAX_QUBITS",
    "REJECTION_M",
    "REJECTION_ROUNDS",
    "chain_planned",
    "choose_method",
    "doubled_network",
    "marginal_by_amplitudes",
    "marginal_doubled",
    "record_chain",
    "sample_chain",
    "sample_rejection",
    "tn_sampling_seconds",
]
