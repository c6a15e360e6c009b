"""Compiled in-place kernels of the statevector route (numba, parallel over the cores).

:func:`apply_dense` applies a ``k``-qubit matrix to a flat ``2^n`` state in
place, whatever bits of the index its qubits sit on. The index splits into
the gate's bits, the bits below its lowest one (a contiguous run of
``2^q0`` elements) and the rest. Each unit of work takes ``lb`` consecutive
elements of the run for every one of the ``2^k`` combinations of the gate's
bits, splits them into real and imaginary rows in a scratch block (in
cache), multiplies by the matrix row by row with the run innermost (so the
loop vectorises), and writes the ``2^k`` rows back. One pass over the state,
no copy of it, and the work splits over the cores. The run must be at least
``2^LOW_BITS`` long to vectorise; the caller keeps the gates' qubits off the
low bits with :func:`swap_bits` (docs/benchmarks/history.md, "The statevector route
near qsim": 0.7-2.9 ns per element for gates of 1-4 qubits at 20-24 qubits).

:func:`swap_bits` exchanges bit ``lows[t]`` with bit ``highs[t]`` of every
index in place (an involution, so each pair of elements swaps once): a
relabelling of which qubit sits on which bit.

numba is imported on first use (it costs ~0.5 s per process); the compiled
functions are cached on disk by numba.
"""

from __future__ import annotations

import numpy as np

from ..hardware import costs

#: gates whose lowest bit sits below this run through a swap first: a contiguous run of
#: 2^LOW_BITS elements is the shortest the compiled loop vectorises well (a run of 1 was
#: 10x slower)
LOW_BITS = 4
#: elements of the run taken per unit of work (the scratch block is 2^k rows of this many)
RUN_BLOCK = 64
#: units of work per thread (balances the threads when some are busy)
CHUNKS_PER_THREAD = 8

_apply = None
_swap = None


def _apply_dense(state, mr, mi, bits_sorted, offs, n, lb_max, n_chunks):  # pragma: no cover
    k = bits_sorted.shape[0]
    kk = 1 << k
    q0 = bits_sorted[0]
    run = 1 << q0
    lb = run if run < lb_max else lb_max
    per_o = run // lb
    units = (1 << (n - k - q0)) * per_o
    chunk = (units + n_chunks - 1) // n_chunks
    for ch in _prange(n_chunks):
        u0 = ch * chunk
        u1 = min(units, u0 + chunk)
        vr = np.empty((kk, lb), dtype=mr.dtype)
        vi = np.empty((kk, lb), dtype=mr.dtype)
        ar = np.empty(lb, dtype=mr.dtype)
        ai = np.empty(lb, dtype=mr.dtype)
        for u in range(u0, u1):
            o = u // per_o
            idx = o << q0
            for t in range(k):  # insert a zero at each of the gate's bits
                b = bits_sorted[t]
                idx = ((idx >> b) << (b + 1)) | (idx & ((1 << b) - 1))
            base = idx + (u - o * per_o) * lb
            for c in range(kk):
                p = base + offs[c]
                for j in range(lb):
                    v = state[p + j]
                    vr[c, j] = v.real
                    vi[c, j] = v.imag
            for r in range(kk):
                for j in range(lb):
                    ar[j] = 0
                    ai[j] = 0
                for c in range(kk):
                    a = mr[r, c]
                    b2 = mi[r, c]
                    for j in range(lb):
                        x = vr[c, j]
                        y = vi[c, j]
                        ar[j] += a * x - b2 * y
                        ai[j] += a * y + b2 * x
                p = base + offs[r]
                for j in range(lb):
                    state[p + j] = ar[j] + 1j * ai[j]


def _swap_tiles(state, highs_sorted, toffs, perm, low, n_chunks):  # pragma: no cover
    size = state.shape[0]
    m = highs_sorted.shape[0]
    tile = 1 << low
    block = tile << m
    outer = size // block
    chunk = (outer + n_chunks - 1) // n_chunks
    for ch in _prange(n_chunks):
        tmp = np.empty(block, dtype=state.dtype)
        for o in range(ch * chunk, min(outer, (ch + 1) * chunk)):
            idx = o << low
            for t in range(m):  # insert a zero at each high bit
                b = highs_sorted[t]
                idx = ((idx >> b) << (b + 1)) | (idx & ((1 << b) - 1))
            for h in range(1 << m):
                p = idx + toffs[h]
                for e in range(tile):
                    tmp[h * tile + e] = state[p + e]
            for h in range(1 << m):
                p = idx + toffs[h]
                for e in range(tile):
                    state[p + e] = tmp[perm[h * tile + e]]


_prange = range


def _compiled():
    global _apply, _swap, _prange
    if _apply is None:
        import numba

        _prange = numba.prange
        opts = dict(parallel=True, cache=True, fastmath=True, boundscheck=False,
                    error_model="numpy")
        _apply = numba.njit(**opts)(_apply_dense)
        _swap = numba.njit(**opts)(_swap_tiles)
    return _apply, _swap


def startup_seconds() -> float:
    """Predicted seconds before this process's first compiled statevector call."""
    import sys

    if _apply is not None:
        return 0.0
    return costs.LOAD_SECONDS if "numba" in sys.modules else costs.STARTUP_SECONDS


def warm() -> bool:
    """Whether this process has loaded the compiled kernels (their next use costs no start)."""
    return _apply is not None


def n_chunks() -> int:
    import numba

    return CHUNKS_PER_THREAD * max(1, numba.get_num_threads())


def gate_offsets(bits) -> np.ndarray:
    """Index offsets of the ``2^k`` rows of a gate on ``bits`` (big-endian: ``bits[0]``
    is the matrix index's most significant bit)."""
    k = len(bits)
    offs = np.zeros(1 << k, dtype=np.int64)
    for j, b in enumerate(bits):
        step = 1 << (k - 1 - j)
        rows = np.arange(1 << k)
        offs[(rows & step) != 0] += 1 << b
    return offs


def apply_dense(state: np.ndarray, real: np.ndarray, imag: np.ndarray, bits,
                chunks: int) -> None:
    """``state`` (flat, complex) times the gate ``real + i imag`` on index ``bits``, in place.

    ``bits[j]`` is the index bit of the matrix's ``j``-th qubit (big-endian).
    """
    run, _ = _compiled()
    n = int(state.size).bit_length() - 1
    run(state, real, imag, np.array(sorted(bits), dtype=np.int64), gate_offsets(bits), n,
        RUN_BLOCK, chunks)


def swap_bits(state: np.ndarray, lows, highs, chunks: int) -> None:
    """Exchange index bit ``lows[t]`` with ``highs[t]`` for every ``t``, in place.

    Every ``lows[t]`` is below :data:`LOW_BITS` and every ``highs[t]`` at or
    above it. The state is read as blocks of ``2^len(highs)`` tiles of
    ``2^LOW_BITS`` contiguous elements (one tile per combination of the high
    bits); each block is copied to a scratch and written back permuted, so
    each element moves once and in runs.
    """
    _, run = _compiled()
    low = LOW_BITS
    hs = sorted(int(h) for h in highs)
    m = len(hs)
    toffs = np.zeros(1 << m, dtype=np.int64)
    for t, b in enumerate(hs):
        toffs[(np.arange(1 << m) >> t) & 1 == 1] += 1 << b
    # element (tile h, offset e) of the block <-> index bits: h's bit t is bit hs[t]
    dest = np.arange(1 << (m + low))
    h, e = dest >> low, dest & ((1 << low) - 1)
    src_h, src_e = h.copy(), e.copy()
    for lo, hi in zip(lows, highs):
        t = hs.index(int(hi))
        hb, eb = (h >> t) & 1, (e >> int(lo)) & 1
        src_h = (src_h & ~(1 << t)) | (eb << t)
        src_e = (src_e & ~(1 << int(lo))) | (hb << int(lo))
    perm = (src_h << low) | src_e
    run(state, np.array(hs, dtype=np.int64), toffs, perm.astype(np.int64), low, chunks)


#: the blocked reader's block: 2^10 elements, so that a block, its partner and the split
#: scratch rows stay in the core's cache while every term reads them (2^10, 2^12 and 2^14
#: measured alike at 24 qubits)
PAULI_BLOCK_BITS = 10
_paulis = None


def _pauli_block_sums(state, xhs, xls, zhs, signs, b, n_chunks):  # pragma: no cover
    # term t: sum_k conj(s[k]) (-1)^|(k^x)&z| s[k^x], with k = (h << b) | e; the partner
    # k^x sits in block h ^ xh at e ^ xl. Its sign splits into the high bits' parity (one
    # per block and term) and signs[t, e ^ xl] for the low bits. The block is split into
    # real and imaginary rows once; each term gathers its signed partner into two more
    # rows (in cache), then one contiguous, vectorised product sums them.
    size = state.shape[0]
    width = 1 << b
    n_blocks = size >> b
    n_terms = xhs.shape[0]
    per = (n_blocks + n_chunks - 1) // n_chunks
    acc = np.zeros((n_chunks, n_terms, 2))
    for ch in _prange(n_chunks):
        are = np.empty(width)
        aim = np.empty(width)
        cre = np.empty(width)
        cim = np.empty(width)
        for h in range(ch * per, min(n_blocks, (ch + 1) * per)):
            base = h << b
            for e in range(width):
                a = state[base + e]
                are[e] = a.real
                aim[e] = a.imag
            for t in range(n_terms):
                h2 = h ^ xhs[t]
                p = h2 & zhs[t]
                p ^= p >> 32
                p ^= p >> 16
                p ^= p >> 8
                p ^= p >> 4
                p ^= p >> 2
                p ^= p >> 1
                xl = xls[t]
                pbase = h2 << b
                for e in range(width):
                    j = e ^ xl
                    c = state[pbase + j]
                    sg = signs[t, j]
                    cre[e] = sg * c.real
                    cim[e] = sg * c.imag
                re = 0.0
                im = 0.0
                for e in range(width):
                    re += are[e] * cre[e] + aim[e] * cim[e]
                    im += are[e] * cim[e] - aim[e] * cre[e]
                s = 1.0 - 2.0 * (p & 1)
                acc[ch, t, 0] += s * re
                acc[ch, t, 1] += s * im
    return acc


def pauli_expectations(state: np.ndarray, masks, chunks: int) -> list[float]:
    """``Re <s|P|s>`` for many Pauli strings in one blocked pass over the flat state ``s``.

    ``masks``: per string ``(xmask, zmask, n_y)``: X on ``xmask``'s bits, Z on ``zmask``'s,
    ``n_y`` of them Y (on both masks); ``P = i^n_y X^x Z^z``, so ``<s|P|s> = i^n_y sum_k
    conj(s[k]) (-1)^|(k^x) & z| s[k^x]``. The
    state is read block by block (:data:`PAULI_BLOCK_BITS`); every string reads its
    partner block while the block is in cache, with no branch per element (the low
    bits' signs come from a table, the high bits' parity once per block).
    """
    global _paulis
    _compiled()
    if _paulis is None:
        import numba

        _paulis = numba.njit(parallel=True, cache=True, fastmath=True, boundscheck=False,
                             error_model="numpy")(_pauli_block_sums)
    masks = list(masks)
    if not masks:
        return []
    size = state.shape[0]
    n = size.bit_length() - 1
    b = min(PAULI_BLOCK_BITS, n)
    low = (1 << b) - 1
    xs = np.array([m[0] for m in masks], dtype=np.int64)
    zs = np.array([m[1] for m in masks], dtype=np.int64)
    j = np.arange(1 << b, dtype=np.int64)
    bits = np.zeros((len(masks), 1 << b), dtype=np.int64)
    for q in range(b):  # parity of j & zl, bit by bit
        bits ^= ((j >> q) & 1)[None, :] & ((zs[:, None] >> q) & 1)
    signs = 1.0 - 2.0 * bits
    acc = _paulis(state, xs >> b, xs & low, zs >> b, signs, b, chunks).sum(axis=0)
    return [float((complex(re, im) * (1j ** (ny % 4))).real)
            for (re, im), (_, _, ny) in zip(acc, masks)]


_gather = None
_norms = None
_walk = None


def _gather_bits(src, dest, tables, n_chunks):  # pragma: no cover
    size = dest.shape[0]
    n_tables = tables.shape[0]
    chunk = (size + n_chunks - 1) // n_chunks
    for ch in _prange(n_chunks):
        for j in range(ch * chunk, min(size, (ch + 1) * chunk)):
            i = 0
            for t in range(n_tables):
                i |= tables[t, (j >> (8 * t)) & 255]
            dest[j] = src[i]


def _chunk_norms(state, n_chunks):  # pragma: no cover
    size = state.shape[0]
    chunk = (size + n_chunks - 1) // n_chunks
    out = np.zeros(n_chunks, dtype=np.float64)
    for ch in _prange(n_chunks):
        acc = 0.0
        for i in range(ch * chunk, min(size, (ch + 1) * chunk)):
            a = state[i]
            acc += a.real * a.real + a.imag * a.imag
        out[ch] = acc
    return out


def _walk_targets(state, targets, starts, offsets, n_chunks, out):  # pragma: no cover
    # chunk ch owns targets[starts[ch]:starts[ch + 1]] (sorted), its running sum starting at
    # offsets[ch]; the drawn index of a target t is the first i with cumsum[i] > t
    size = state.shape[0]
    chunk = (size + n_chunks - 1) // n_chunks
    for ch in _prange(n_chunks):
        k = starts[ch]
        stop = starts[ch + 1]
        if k == stop:
            continue
        acc = offsets[ch]
        last = min(size, (ch + 1) * chunk)
        for i in range(ch * chunk, last):
            a = state[i]
            acc += a.real * a.real + a.imag * a.imag
            while k < stop and targets[k] < acc:
                out[k] = i
                k += 1
            if k == stop:
                break
        while k < stop:  # rounding at the chunk's end: its last element
            out[k] = last - 1
            k += 1


def _jit(fn):
    import numba

    _compiled()
    return numba.njit(parallel=True, cache=True, fastmath=False, boundscheck=False,
                      error_model="numpy")(fn)


def gather_bits(src: np.ndarray, dest: np.ndarray, source_bit: list[int], chunks: int) -> None:
    """``dest[j] = src[i]`` where bit ``q`` of ``j`` is bit ``source_bit[q]`` of ``i``.

    A relabelling of index bits, out of place, in one parallel pass (the index
    is looked up byte by byte in tables of 256 entries).
    """
    global _gather
    if _gather is None:
        _gather = _jit(_gather_bits)
    n = len(source_bit)
    tables = np.zeros((max(1, -(-n // 8)), 256), dtype=np.int64)
    values = np.arange(256)
    for q, b in enumerate(source_bit):
        tables[q // 8, (values >> (q % 8)) & 1 == 1] |= 1 << b
    _gather(src, dest, tables, chunks)


def draw_indices(state: np.ndarray, u: np.ndarray, chunks: int) -> np.ndarray:
    """Indices drawn from ``|state|^2`` (unnormalised) by uniforms ``u``, in ``u``'s order:
    the first index whose running sum exceeds ``u * total``, as ``searchsorted`` on the
    cumulative sum would give, in two parallel passes and no array of the state's size."""
    global _norms, _walk
    if _norms is None:
        _norms = _jit(_chunk_norms)
        _walk = _jit(_walk_targets)
    sums = _norms(state, chunks)
    offsets = np.concatenate([[0.0], np.cumsum(sums)])
    total = offsets[-1]
    order = np.argsort(u, kind="stable")
    targets = u[order] * total
    starts = np.searchsorted(targets, offsets, side="left").astype(np.int64)
    starts[0], starts[-1] = 0, len(targets)
    drawn = np.empty(len(targets), dtype=np.int64)
    _walk(state, targets, starts, offsets[:-1].copy(), chunks, drawn)
    out = np.empty_like(drawn)
    out[order] = drawn
    return out, total
