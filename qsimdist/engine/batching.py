"""Batching star-free bitstrings into patterns: which characters to leave open, priced.

Bitstrings that agree on most characters share one contraction with the
differing characters open (``*``); :func:`batches` picks how many to open by a
cost model (:func:`batch_cost`: per contraction a fixed part, plus ``2^k``
outputs times a per-amplitude part) within the memory budget.
"""

from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..frontends import GateCircuit
from ..hardware import costs
from ..network import Network
from ..planner.path import PathOptions
from ..planner.plan import Plan, make_plan
from .memory import MemoryBudget

#: most open qubits (``*``) one pattern may have (2^k amplitudes in one array)
MAX_STARS = 30

#: a batch qsimdist chose is planned within 1/BATCH_PLAN_SHARE of the memory limit (the
#: executor's free buffers and the arrays already held need the rest), and its output may take
#: at most 1/BATCH_OUTPUT_SHARE (intermediates need room beside it)
BATCH_PLAN_SHARE = 4
BATCH_OUTPUT_SHARE = 16


def _bit_codes(bits: list[str], n: int) -> np.ndarray:
    """Bitstrings (0/1 only) as rows of uint64 words; character j is bit j % 64 of word j // 64."""
    words = (n + 63) // 64
    raw = np.frombuffer("".join(bits).encode("ascii"), dtype=np.uint8).reshape(len(bits), n)
    padded = np.zeros((len(bits), words * 64), dtype=bool)
    padded[:, :n] = raw == ord("1")
    return np.packbits(padded, axis=1, bitorder="little").view("<u8").reshape(len(bits), words)


def _distinct(codes: np.ndarray, keep: np.ndarray) -> int:
    masked = codes & keep
    if masked.shape[1] == 1:
        return int(np.unique(masked[:, 0]).size)
    return int(np.unique(masked, axis=0).shape[0])


def open_positions(bitstrings: list[str], max_open: int) -> tuple[list[int], list[int]]:
    """Greedy choice of the characters to leave open (``*``) when batching bitstrings.

    Returns ``(positions, groups)``: ``positions`` in the order they are
    opened, and ``groups[k]`` the number of contractions needed with the first
    ``k`` positions open (bitstrings agreeing elsewhere share one). Each step
    opens the position that merges the most groups; ties go to the rightmost
    character, so the leftmost ones stay fixed (for random bitstrings every
    choice ties; which characters stay fixed changes the network, not the
    number of contractions).
    """
    n = len(bitstrings[0])
    codes = np.unique(_bit_codes(bitstrings, n), axis=0)
    words = codes.shape[1]
    raw = np.frombuffer("".join(bitstrings).encode("ascii"), np.uint8).reshape(-1, n)
    ones = (raw == ord("1")).mean(axis=0)
    keep = np.full(words, np.uint64(0xFFFFFFFFFFFFFFFF))
    positions: list[int] = []
    groups = [codes.shape[0]]
    candidates = [j for j in range(n) if 0.0 < ones[j] < 1.0]
    keys = codes[:, 0] if words == 1 else None  # distinct keys so far (sorted), one word
    while candidates and len(positions) < max_open and groups[-1] > 1:
        best = None
        for j in candidates:
            trial = keep.copy()
            trial[j // 64] &= ~np.uint64(1 << (j % 64))
            if keys is not None:
                # opening j merges each key having bit j set with its partner without it
                bit = np.uint64(1 << j)
                high = keys[(keys & bit) != 0]
                partner = high ^ bit
                found = np.searchsorted(keys, partner)
                found[found == keys.size] = 0
                count = int(keys.size - np.count_nonzero(keys[found] == partner))
            else:
                count = _distinct(codes, trial)
            key = (count, -j)
            if best is None or key < best[0]:
                best = (key, trial)
        (count, neg_j), keep = best
        j = -neg_j
        if keys is not None:
            keys = np.unique(keys & keep[0])
        positions.append(j)
        candidates.remove(j)
        groups.append(count)
    return positions, groups


def batch_cost(circuit: GateCircuit, groups: list[int]) -> list[float]:
    """Model of the total cost with ``k`` open positions, for each ``k``.

    ``groups[k]`` contractions, each costing a fixed part (building,
    simplifying and planning the network, ~2 ms per gate, in flop-equivalents)
    plus ``2^k`` outputs times a per-amplitude part (8 flops times the
    state-vector work of the multi-qubit gates). Only the ratios matter.
    """
    n = circuit.n_qubits
    per_amp = 8.0 * (n + sum(2 ** len(g.qubits) for g in circuit.gates if len(g.qubits) > 1))
    fixed = costs.SECONDS_PER_GATE * (len(circuit.gates) + n) * costs.NOMINAL_FLOP_RATE
    return [g * (fixed + per_amp * 2.0**k) for k, g in enumerate(groups)]


#: open-position counts the priced batcher builds a network for (0 and the model's choice
#: always among them)
PRICED_CANDIDATES = 8
#: the share of one by one's price a grouping must save before the priced batcher opens
#: qubits. The price is the greedy path's, and its error differs between open and closed
#: patterns: on 1,000 random n30 bitstrings it priced six 12-open contractions 0.7 %
#: below twelve closed ones, where the searched paths ran them in 5.6 s against 0.48 s,
#: and the batched call took 1.13x one by one (docs/benchmarks/history.md, "Issue 24 closed
#: out")
BATCH_MIN_SAVING = 0.25


def batches(circuit: GateCircuit, bits: list[str], dtype: str, budget: MemoryBudget,
            price=None, report: dict | None = None) -> list[tuple]:
    """Group star-free bitstrings into patterns: [(pattern, [indices into bits], [offsets])].

    ``price(pattern)``: predicted seconds of one contraction of ``pattern`` (the
    router's tensor-network price). Given, it may narrow the model's choice: for up
    to :data:`PRICED_CANDIDATES` widths up to the model's (none open, the model's
    choice, and the widths where groups merge), the groups times one
    representative pattern's price; the lowest wins, where it saves at least
    :data:`BATCH_MIN_SAVING` of one by one's price (else one by one).
    ``report`` (a dict), where given, receives the grouping: bitstrings, the
    model's width and the chosen one (``open_qubits``), the contractions, and
    with ``price`` the predicted seconds of the chosen grouping and of one
    contraction per distinct bitstring (labelled predicted).
    Without it, :func:`batch_cost`'s model alone chooses, which counts a
    contraction's fixed cost but prices every open qubit as one more amplitude
    of statevector work: for the n30 circuit it opened the 15 characters two
    bitstrings differ in, 22x the FLOPs of the two alone (issue 24).
    """
    n = circuit.n_qubits
    bound = budget.bound
    max_open = min(MAX_STARS, n)
    if bound is not None:
        fit = bound // (BATCH_OUTPUT_SHARE * np.dtype(dtype).itemsize)
        max_open = min(max_open, max(0, int(fit).bit_length() - 1))
    positions, groups = open_positions(bits, max_open)
    cost = batch_cost(circuit, groups)
    k = model_k = min(range(len(cost)), key=lambda j: (cost[j], -j))
    priced: dict[int, float] = {}
    if price is not None and k > 0:
        k, priced = _priced_width(bits, positions, groups, k, price)
    out = _group(bits, n, sorted(positions[:k]))
    if report is not None:
        report.update(bitstrings=len(bits), model_open_qubits=model_k, open_qubits=k,
                      contractions=len(out))
        if priced:
            report.update(predicted_seconds=priced[k],
                          one_by_one_predicted_seconds=priced[0])
    return out


def _group(bits: list[str], n: int, opened: list[int]) -> list[tuple]:
    """``bits`` grouped by their characters outside ``opened`` (those become ``*``)."""
    k = len(opened)
    if not opened:
        unique: dict[str, list[int]] = {}
        for i, b in enumerate(bits):
            unique.setdefault(b, []).append(i)
        return [(b, idx, [0] * len(idx)) for b, idx in unique.items()]
    raw = np.frombuffer("".join(bits).encode("ascii"), np.uint8).reshape(len(bits), n)
    weights = np.array([1 << (k - 1 - j) for j in range(k)], dtype=np.int64)
    offsets = (raw[:, opened] == ord("1")).astype(np.int64) @ weights
    keyed = raw.copy()
    keyed[:, opened] = ord("*")
    patterns = keyed.view(f"S{n}").ravel()
    out: dict[bytes, tuple[list[int], list[int]]] = {}
    for i, (p, off) in enumerate(zip(patterns.tolist(), offsets.tolist())):
        entry = out.setdefault(p, ([], []))
        entry[0].append(i)
        entry[1].append(off)
    # a group of one distinct bitstring is contracted closed: opening its positions would
    # only make its contraction dearer (1,000 random n30 bitstrings, 12 positions open for
    # 6 pairs: every one of 994 contractions paid for them, 7.3e12 FLOPs where one by one
    # took 4.5e12)
    return [(p.decode("ascii"), idx, offs) if len({bits[i] for i in idx}) > 1
            else (bits[idx[0]], idx, [0] * len(idx)) for p, (idx, offs) in out.items()]


def _group_kinds(bits: list[str], n: int, opened: list[int]) -> tuple[int, int]:
    """``(groups of several distinct bitstrings, groups of one)`` when ``opened`` open."""
    if not opened:
        return 0, len(set(bits))
    keep = [j for j in range(n) if j not in set(opened)]
    members: dict[str, set[str]] = {}
    for b in bits:
        members.setdefault("".join(b[j] for j in keep), set()).add(b)
    multi = sum(1 for m in members.values() if len(m) > 1)
    return multi, len(members) - multi


def _priced_width(bits: list[str], positions: list[int], groups: list[int], model_k: int,
                  price) -> tuple[int, dict[int, float]]:
    """The width (open positions) whose contractions cost least at ``price``: a group of
    several distinct strings one open contraction, a group of one a closed one; and the
    predicted seconds of every width tried (0: one contraction per distinct string)."""
    # the price only narrows the model's choice: on 100 random n30 bitstrings, letting it
    # widen took 97 contractions and 2.9e12 FLOPs where the model's 98 took 1.3e12 (the greedy
    # path flatters wide patterns more than the searched one does)
    merges = [j for j in range(1, model_k) if groups[j] < groups[j - 1]]
    if len(merges) > PRICED_CANDIDATES - 2:
        step = len(merges) / (PRICED_CANDIDATES - 2)
        merges = [merges[int(i * step)] for i in range(PRICED_CANDIDATES - 2)]
    candidates = sorted({0, model_k, *merges})

    first = bits[0]
    closed = price(first)

    def total(k: int) -> float:
        # groups of several strings share one open contraction; the others stay closed
        multi, single = _group_kinds(bits, len(first), positions[:k])
        chars = list(first)
        for j in positions[:k]:
            chars[j] = "*"
        return (multi * price("".join(chars)) if multi else 0.0) + single * closed

    priced = {j: total(j) for j in candidates}
    best = min(candidates, key=lambda j: (priced[j], -j))
    if best and priced[best] > (1.0 - BATCH_MIN_SAVING) * priced[0]:
        best = 0  # a saving within the price's error: one by one is the sure cost
    return best, priced


def plan_batch(net: Network, dtype: str, limit: int | None, opts: PathOptions,
               chosen: bool) -> Plan:
    """Plan one contraction; a batch qsimdist chose itself must peak within a quarter of the limit.

    The local executor keeps up to twice the plan's peak in free buffers beside
    the live peak (executors/local.py BufferPool), and the arrays already held
    need room too; a batch's width is ours to choose, not the user's. The plan
    made against the whole limit is kept when its own peak is that small
    (planning against a quarter can pick a costlier path: 1.3x the FLOPs and
    8.7 GB of transposes on the n30 reference batches); otherwise the batch is
    re-planned within the quarter (the path search is cached by structure).
    """
    full = make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts)
    if not chosen or limit is None or BATCH_PLAN_SHARE * full.stats.peak_bytes <= limit:
        return full
    try:
        return make_plan(net, dtype=dtype, memory_limit=limit // BATCH_PLAN_SHARE,
                         path_options=opts)
    except PlanError:
        return full


__all__ = ["BATCH_OUTPUT_SHARE", "BATCH_PLAN_SHARE", "MAX_STARS", "batch_cost", "batches",
           "open_positions", "plan_batch"]
