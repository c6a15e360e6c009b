"""Gate fusion: merge runs of gates acting within the same few qubits into one unitary.

A pass over the gate list keeps, for every qubit, the *open block* that last
touched it. A gate joins the open blocks on its qubits when their qubits and
its own number at most ``max_qubits`` (open blocks on disjoint qubits
commute, so merging them is exact); otherwise those blocks are closed
(emitted) and the gate opens a new block. Every open block is the latest
block on each of its qubits, so blocks are emitted in an order that respects
every qubit's gate order.

Closing any open block is always valid, so a gate that cannot join all the
blocks on its qubits closes those it cannot join and merges with the rest.
With ``keep_diagonal`` (the default), diagonal gates only merge with diagonal
gates: a fused run of diagonal gates stays one diagonal gate, so the
network's diagonal reduction still turns it into hyper-indices, and the
statevector kernel applies it as an element-wise product. Diagonal blocks may
grow to ``max_diagonal_qubits`` (applying a diagonal costs one pass over the
state whatever its width).

The cost model (:func:`statevector_seconds`) prices applying a fused circuit
to a ``2^n`` state; :func:`choose_fusion` tries ``max_qubits`` = 2..5 on the
structure alone and builds the matrices only for the cheapest. The global
phase is kept as it is. Matrices are big-endian over the fused gate's qubit
tuple (sorted ascending), as every :class:`~qsimdist.frontends.circuit.Gate`.

The narrower passes of the tensor-network routes, which never widen a gate beyond
its own qubits, are in :mod:`qsimdist.frontends.one_qubit_fusion`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..hardware import costs
from ..network.matrices import is_diagonal
from .circuit import Gate, GateCircuit, is_controlled

#: widths :func:`choose_fusion` tries
FUSION_WIDTHS = (2, 3, 4, 5)
#: default widest diagonal block (one pass over the state to apply whatever its width; kept
#: as a dense 2^k x 2^k matrix like every Gate, so not wider than this)
MAX_DIAGONAL_QUBITS = 6


@dataclass
class _Block:
    qubits: set[int]
    gates: list[int] = field(default_factory=list)
    diagonal: bool = True
    #: a block of one controlled gate (:class:`~qsimdist.frontends.circuit.ControlledGate`)
    #: has its controls here: it runs on the ``2^(n - controls)`` amplitudes they select
    controls: int = 0


@dataclass(frozen=True)
class FusionInfo:
    """What a fusion did: width, gates before and after, diagonal gates after."""

    max_qubits: int
    gates_before: int
    gates_after: int
    diagonal_after: int
    histogram: dict[int, int]

    def to_dict(self) -> dict:
        return {"max_qubits": self.max_qubits, "gates_before": self.gates_before,
                "gates_after": self.gates_after, "diagonal_after": self.diagonal_after,
                "histogram": {str(k): v for k, v in sorted(self.histogram.items())}}


def _check_width(max_qubits: int, name: str) -> None:
    if isinstance(max_qubits, bool) or not isinstance(max_qubits, int) or not 1 <= max_qubits <= 12:
        raise InvalidInputError(f"{name} must be an integer in 1..12, got {max_qubits!r}")


def diagonal_flags(circuit: GateCircuit) -> list[bool]:
    """Whether each gate of ``circuit`` is diagonal (identical matrices are checked once)."""
    seen: dict[tuple, bool] = {}
    flags = []
    for g in circuit.gates:
        if is_controlled(g):
            flags.append(is_diagonal(g.target))
            continue
        m = g.matrix
        if m.shape[0] > 4:
            flags.append(is_diagonal(m))
            continue
        key = (m.shape[0], m.tobytes())
        flag = seen.get(key)
        if flag is None:
            flag = seen[key] = is_diagonal(m)
        flags.append(flag)
    return flags


def fusion_blocks(circuit: GateCircuit, max_qubits: int, *, keep_diagonal: bool = True,
                  max_diagonal_qubits: int | None = None,
                  diagonal: Sequence[bool] | None = None) -> list[_Block]:
    """The fused blocks (structure only: qubits and gate indices), in a valid order."""
    _check_width(max_qubits, "max_qubits")
    max_diag = max_qubits if max_diagonal_qubits is None else max(max_qubits, max_diagonal_qubits)
    _check_width(max_diag, "max_diagonal_qubits")
    flags = diagonal_flags(circuit) if diagonal is None else list(diagonal)
    open_block: list[_Block | None] = [None] * circuit.n_qubits
    out: list[_Block] = []

    def close(b: _Block) -> None:
        for q in b.qubits:
            open_block[q] = None
        out.append(b)

    for idx, g in enumerate(circuit.gates):
        diag = flags[idx]
        touching: list[_Block] = []
        for q in g.qubits:
            b = open_block[q]
            if b is not None and all(b is not t for t in touching):
                touching.append(b)
        if is_controlled(g):  # a block of its own, closed at once: nothing joins it
            for b in touching:
                close(b)
            out.append(_Block(set(g.qubits), [idx], diag, g.controls))
            continue
        if keep_diagonal:  # blocks of the other kind are closed, never merged
            for b in [b for b in touching if b.diagonal != diag]:
                close(b)
            touching = [b for b in touching if b.diagonal == diag]
        qubits = set(g.qubits)
        for b in touching:
            qubits |= b.qubits
        merged_diag = diag and all(b.diagonal for b in touching)
        limit = max_diag if merged_diag else max_qubits
        if len(g.qubits) > limit:
            for b in touching:
                close(b)
            block = _Block(set(g.qubits), [idx], diag)
        elif len(qubits) > limit:
            # keep the smallest open blocks that still fit beside the gate, close the rest
            # (closing any block is valid; disjoint open blocks commute)
            keep: list[_Block] = []
            qubits = set(g.qubits)
            for b in sorted(touching, key=lambda b: len(b.qubits)):
                if len(qubits | b.qubits) <= (max_diag if merged_diag else max_qubits) and (
                        not merged_diag or b.diagonal):
                    keep.append(b)
                    qubits |= b.qubits
                else:
                    close(b)
            block = _Block(qubits, [], diag and all(b.diagonal for b in keep))
            for b in keep:
                block.gates.extend(b.gates)
            block.gates.append(idx)
        elif len(touching) == 1 and touching[0].qubits >= qubits:
            block = touching[0]
            block.gates.append(idx)
            block.diagonal = merged_diag
            continue
        else:
            block = _Block(qubits, [], merged_diag)
            for b in touching:
                block.gates.extend(b.gates)  # disjoint open blocks commute: any order
            block.gates.append(idx)
        for q in block.qubits:
            open_block[q] = block
    seen: set[int] = set()
    for b in open_block:
        if b is not None and id(b) not in seen:
            seen.add(id(b))
            out.append(b)
    return _merge_back(out, circuit.n_qubits, max_qubits, max_diag, keep_diagonal)


def fused_gates_at_least(circuit: GateCircuit, max_qubits: int, *,
                         max_diagonal_qubits: int | None = MAX_DIAGONAL_QUBITS,
                         diagonal: Sequence[bool] | None = None) -> int:
    """A lower bound on ``len(fusion_blocks(circuit, max_qubits, keep_diagonal=True, ...))``
    from one pass over the gates, no block built (a router's floor, before any fusion).

    With ``keep_diagonal``, every block is of one kind (diagonal or not), is at most as
    wide as its kind's limit (or is one wider gate alone), and holds a contiguous run of
    each of its qubits' gates. Two gates that follow each other on a qubit cannot share
    a block where their kinds differ or their qubits together exceed the limit, so each
    qubit's gates split into segments no block spans; a block covers at most one
    segment per qubit it acts on. Hence, per kind, at least the segments divided by
    the widest block of that kind.
    """
    _check_width(max_qubits, "max_qubits")
    max_diag = max_qubits if max_diagonal_qubits is None else max(max_qubits, max_diagonal_qubits)
    flags = diagonal_flags(circuit) if diagonal is None else diagonal
    limits = (max_qubits, max_diag)
    widest = [max_qubits, max_diag]
    segments = [0, 0]
    last: list[tuple | None] = [None] * circuit.n_qubits  # per qubit: its last gate's kind, qubits
    for g, diag in zip(circuit.gates, flags):
        kind = 1 if diag else 0
        qs = g.qubits
        limit = limits[kind]
        if len(qs) > widest[kind]:
            widest[kind] = len(qs)
        here = (kind, qs)
        for q in qs:
            prev = last[q]
            if (prev is None or prev[0] != kind or len(qs) > limit or len(prev[1]) > limit
                    or (prev[1] != qs and len(set(qs).union(prev[1])) > limit)):
                segments[kind] += 1
            last[q] = here
    return sum(-(-s // w) for s, w in zip(segments, widest))


def _merge_back(blocks: list[_Block], n_qubits: int, max_qubits: int, max_diag: int,
                keep_diagonal: bool) -> list[_Block]:
    """Blocks multiplied into the block before them where that stays within the width.

    A block whose qubits were last touched by one and the same earlier block
    ``P`` (or by nothing) commutes with every block between them, so it can
    move back and join ``P`` when their qubits together fit (one pass fewer
    over the state). ``keep_diagonal``: only blocks of the same kind join.
    """
    last: list[_Block | None] = [None] * n_qubits
    out: list[_Block] = []
    for b in blocks:
        preds = {id(last[q]): last[q] for q in b.qubits if last[q] is not None}
        if len(preds) == 1 and not b.controls and not next(iter(preds.values())).controls:
            (p,) = preds.values()
            diag = p.diagonal and b.diagonal
            fits = len(p.qubits | b.qubits) <= (max_diag if diag else max_qubits)
            if fits and (not keep_diagonal or p.diagonal == b.diagonal):
                p.qubits |= b.qubits
                p.gates.extend(b.gates)
                p.diagonal = diag
                for q in b.qubits:
                    last[q] = p
                continue
        out.append(b)
        for q in b.qubits:
            last[q] = b
    return out


def _block_matrix(circuit: GateCircuit, block: _Block, embedded: _Embeddings | None = None,
                  ) -> tuple[np.ndarray, tuple[int, ...]]:
    """The block's unitary, big-endian over its sorted qubits (diagonal blocks: dense too).

    A dense block is the product of its gates' matrices embedded in the block's qubits;
    ``embedded`` (one per :func:`fuse` call) keeps the embeddings for reuse.
    """
    qubits = tuple(sorted(block.qubits))
    m = len(qubits)
    pos = {q: i for i, q in enumerate(qubits)}
    if block.diagonal:
        d = np.ones((2,) * m, dtype=complex)
        for idx in block.gates:
            g = circuit.gates[idx]
            k = len(g.qubits)
            gd = np.diagonal(g.matrix).reshape((2,) * k)
            order = sorted(range(k), key=lambda j: pos[g.qubits[j]])
            gd = np.transpose(gd, order)
            shape = [1] * m
            for j in order:
                shape[pos[g.qubits[j]]] = 2
            d = d * gd.reshape(shape)
        return np.diag(d.reshape(-1)), qubits
    if m > EMBED_MAX_QUBITS:  # each gate applied to the legs: no 2^m x 2^m matrix products
        dim = 2**m
        u = np.eye(dim, dtype=complex).reshape((2,) * m + (dim,))  # output legs, then input
        for idx in block.gates:
            g = circuit.gates[idx]
            u = _apply_on_legs(g.matrix, tuple(pos[q] for q in g.qubits), u, m)
        return u.reshape(dim, dim), qubits
    embedded = _Embeddings() if embedded is None else embedded
    u = None
    for idx in block.gates:
        g = circuit.gates[idx]
        e = embedded.get(g.matrix, tuple(pos[q] for q in g.qubits), m)
        u = e.copy() if u is None else e @ u
    return u, qubits


#: widest dense block multiplied out as a product of embedded gate matrices (2^m x 2^m
#: each); wider blocks apply each gate to the block's legs
EMBED_MAX_QUBITS = 6


#: bytes of embedded gate matrices one :func:`fuse` call keeps for reuse (a deep circuit
#: repeats a few gates on a few positions within its blocks)
EMBEDDED_CACHE_BYTES = 32 << 20


class _Embeddings:
    """Gates' matrices embedded in their blocks' qubits, kept while they fit
    :data:`EMBEDDED_CACHE_BYTES`; keyed by the matrix object (the circuit holds it
    meanwhile), its positions and the block's width."""

    def __init__(self) -> None:
        self.kept: dict[tuple, np.ndarray] = {}
        self.bytes = 0

    def get(self, matrix: np.ndarray, where: tuple[int, ...], m: int) -> np.ndarray:
        key = (id(matrix), where, m)
        e = self.kept.get(key)
        if e is None:
            e = _embed(matrix, where, m)
            if self.bytes < EMBEDDED_CACHE_BYTES:
                self.kept[key] = e
                self.bytes += e.nbytes
        return e


def _embed(matrix: np.ndarray, where: tuple[int, ...], m: int) -> np.ndarray:
    """A gate's ``2^m x 2^m`` matrix on ``m`` qubits, big-endian; it acts on positions
    ``where`` (its own qubits' order, big-endian like its matrix)."""
    dim = 2**m
    u = np.eye(dim, dtype=complex).reshape((2,) * m + (dim,))
    return _apply_on_legs(matrix, where, u, m).reshape(dim, dim)


def _apply_on_legs(matrix: np.ndarray, where: tuple[int, ...], u: np.ndarray,
                   m: int) -> np.ndarray:
    """``matrix`` applied to the output legs ``where`` of ``u`` (``m`` output legs, then
    the input axis)."""
    k = len(where)
    u = np.tensordot(matrix.reshape((2,) * (2 * k)), u, axes=(list(range(k, 2 * k)), list(where)))
    # u's axes now: the gate's output legs (in ``where`` order), the other output legs, input
    rest = [i for i in range(m) if i not in where]
    perm = [0] * m
    for j, i in enumerate(where):
        perm[i] = j
    for j, i in enumerate(rest):
        perm[i] = k + j
    return np.transpose(u, perm + [m])


_SWAP = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])


def absorb_swaps(circuit: GateCircuit) -> tuple[GateCircuit, list[int] | None]:
    """The circuit with its SWAP gates turned into relabellings, and where each qubit ended.

    A SWAP of qubits ``a`` and ``b`` applied as a gate costs a pass over a state;
    applied as a relabelling it costs nothing: every later gate on ``a`` acts on
    the wire that held ``b``, and the other way round. Returns ``(circuit without
    SWAPs, logical)``, where wire ``w`` of the returned circuit's final state
    holds qubit ``logical[w]`` of the original's (None, and the circuit itself,
    where there was no SWAP).
    """
    if not any(g.name == "swap" and len(g.qubits) == 2 for g in circuit.gates):
        return circuit, None
    where = list(range(circuit.n_qubits))  # where[q]: the wire holding qubit q now
    out = GateCircuit(circuit.n_qubits, global_phase=circuit.global_phase, name=circuit.name)
    for g in circuit.gates:
        if (g.name == "swap" and len(g.qubits) == 2
                and np.array_equal(np.asarray(g.matrix), _SWAP)):
            a, b = g.qubits
            where[a], where[b] = where[b], where[a]
            continue
        out.gates.append(g if all(where[q] == q for q in g.qubits)
                         else dataclasses.replace(g, qubits=tuple(where[q] for q in g.qubits)))
    logical = [0] * circuit.n_qubits
    for q, w in enumerate(where):
        logical[w] = q
    return out, logical


def fuse(circuit: GateCircuit, max_qubits: int = 4, *, keep_diagonal: bool = True,
         max_diagonal_qubits: int | None = MAX_DIAGONAL_QUBITS,
         progress: Callable[[str, int, int], None] | None = None,
         blocks: Sequence[_Block] | None = None) -> GateCircuit:
    """A circuit with the same unitary (global phase included) and fewer, wider gates.

    Args:
        circuit: the gates to fuse.
        max_qubits: widest dense fused gate (a gate already wider stays as it is).
        keep_diagonal: diagonal gates merge only with diagonal gates.
        max_diagonal_qubits: widest fused diagonal gate (at least ``max_qubits``).
        progress: ``progress("fusing", done, total)`` every few thousand blocks.
        blocks: :func:`fusion_blocks` of ``circuit`` with the same arguments, where the
            caller has them already (a router that priced the fusion); made here otherwise.

    Fused gates are named ``fused`` (``fused_diagonal`` for diagonal ones);
    a block of one gate keeps that gate as it is.
    """
    if blocks is None:
        blocks = fusion_blocks(circuit, max_qubits, keep_diagonal=keep_diagonal,
                               max_diagonal_qubits=max_diagonal_qubits)
    out = GateCircuit(circuit.n_qubits, global_phase=circuit.global_phase, name=circuit.name)
    embedded = _Embeddings()
    for i, b in enumerate(blocks):
        if len(b.gates) == 1:
            out.gates.append(circuit.gates[b.gates[0]])
        else:
            matrix, qubits = _block_matrix(circuit, b, embedded)
            out.gates.append(Gate(matrix, qubits, "fused_diagonal" if b.diagonal else "fused"))
        if progress is not None and (i + 1) % 4096 == 0:
            progress("fusing", i + 1, len(blocks))
    return out


def fusion_info(circuit: GateCircuit, fused: GateCircuit, max_qubits: int) -> FusionInfo:
    """Counts describing ``fused`` (made from ``circuit`` with width ``max_qubits``)."""
    hist: dict[int, int] = {}
    for g in fused.gates:
        hist[len(g.qubits)] = hist.get(len(g.qubits), 0) + 1
    diag = sum(diagonal_flags(fused))
    return FusionInfo(max_qubits, len(circuit.gates), len(fused.gates), int(diag), hist)


def gate_seconds(n_qubits: int, width: int, diagonal: bool, *, itemsize: int = 16,
                 compiled: bool = False) -> float:
    """Predicted seconds to apply one gate of ``width`` qubits to a ``2^n_qubits`` state.

    ``compiled``: the dense gate runs through the compiled in-place kernel
    (``qsimdist.executors.sv_kernels``, whose amortised low-bit swaps are in
    its base rate) rather than numpy's GEMMs; ``itemsize``: bytes per
    amplitude (8 for complex64, 16 for complex128).
    """
    elements = float(2**n_qubits)
    if diagonal:
        return costs.GATE_OVERHEAD_SECONDS + elements * costs.DIAGONAL_SECONDS_PER_ELEMENT
    if compiled:
        mac = costs.COMPILED_MAC_SECONDS_PER_ELEMENT[8 if itemsize <= 8 else 16]
        return costs.GATE_OVERHEAD_SECONDS + elements * (
            costs.COMPILED_SECONDS_PER_ELEMENT + mac * 2**width)
    return costs.GATE_OVERHEAD_SECONDS + elements * (
        costs.DENSE_SECONDS_PER_ELEMENT + costs.MAC_SECONDS_PER_ELEMENT * 2**width)


def blocks_seconds(n_qubits: int, blocks: Sequence[_Block], **kernel) -> float:
    """Predicted seconds to apply fused ``blocks`` to a ``2^n_qubits`` state
    (``kernel``: :func:`gate_seconds`'s keywords)."""
    return sum(gate_seconds(n_qubits, len(b.qubits), b.diagonal, **kernel) if not b.controls
               else controlled_seconds(n_qubits, len(b.qubits), b.controls, b.diagonal)
               for b in blocks)


def controlled_seconds(n_qubits: int, width: int, controls: int, diagonal: bool) -> float:
    """Predicted seconds to apply a controlled gate of ``width`` qubits, ``controls`` of
    them controls: numpy's pass over the ``2^(n - controls)`` amplitudes they select
    (a strided view, copied once for a dense target)."""
    return gate_seconds(n_qubits - controls, width - controls, diagonal)


def statevector_seconds(circuit: GateCircuit, n_qubits: int | None = None, **kernel) -> float:
    """Predicted seconds to apply ``circuit``'s gates (as they are) to its state."""
    n = circuit.n_qubits if n_qubits is None else n_qubits
    flags = diagonal_flags(circuit)
    return sum(gate_seconds(n, len(g.qubits), d, **kernel) if not is_controlled(g)
               else controlled_seconds(n, len(g.qubits), g.controls, d)
               for g, d in zip(circuit.gates, flags))


def statevector_flops(circuit: GateCircuit) -> float:
    """Real FLOPs of applying ``circuit``'s gates to its ``2^n`` state (8 per complex MAC)."""
    n = circuit.n_qubits
    flags = diagonal_flags(circuit)
    c = [getattr(g, "controls", 0) for g in circuit.gates]
    return float(sum(8.0 * 2**(n - k) * (1 if d else 2 ** (len(g.qubits) - k))
                     for g, d, k in zip(circuit.gates, flags, c)))


def predict_statevector(circuit: GateCircuit, widths: Sequence[int] = FUSION_WIDTHS,
                        structures: dict | None = None, **kernel) -> tuple[int, float]:
    """``(width, seconds)``: the fusion width the cost model predicts cheapest for a
    statevector run of ``circuit`` and its predicted time (fusing included).

    Only the block structure is made for each width (no matrices), with
    ``keep_diagonal=False`` (diagonal runs still fuse into diagonal blocks).
    ``kernel``: :func:`gate_seconds`'s keywords (``itemsize``, ``compiled``).
    ``structures`` (a dict), where given, keeps each width's blocks (key: the width),
    and blocks found there are not made again: pricing a second kernel, or
    :func:`fuse` at the chosen width (``blocks=``), reuses them.
    """
    n = circuit.n_qubits
    structures = {} if structures is None else structures
    flags = None
    best: tuple[float, int] | None = None
    for k in widths:
        blocks = structures.get(k)
        if blocks is None:
            if flags is None:
                flags = diagonal_flags(circuit)
            blocks = structures[k] = fusion_blocks(
                circuit, k, keep_diagonal=False, max_diagonal_qubits=MAX_DIAGONAL_QUBITS,
                diagonal=flags)
        merged = sum(len(b.gates) for b in blocks if len(b.gates) > 1)
        seconds = blocks_seconds(n, blocks, **kernel) + costs.FUSE_SECONDS_PER_GATE * merged
        if best is None or seconds < best[0]:
            best = (seconds, k)
    if best is None:
        raise InvalidInputError("no fusion width given")
    return best[1], best[0]


def choose_fusion(circuit: GateCircuit, widths: Sequence[int] = FUSION_WIDTHS,
                  progress: Callable[[str, int, int], None] | None = None,
                  ) -> tuple[GateCircuit, FusionInfo, float]:
    """Fuse (for a statevector run) with the width :func:`predict_statevector` picks.

    Returns ``(fused circuit, info, predicted seconds)``.
    """
    k, seconds = predict_statevector(circuit, widths)
    fused = fuse(circuit, k, keep_diagonal=False, progress=progress)
    return fused, fusion_info(circuit, fused, k), seconds
