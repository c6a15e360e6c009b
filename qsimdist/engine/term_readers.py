"""Pauli terms read off a state: ``<s|P|s>`` for a state the statevector route or a
light-cone contraction produced.

* :func:`term_on_state`: any product of one-qubit operators (projectors too),
  one contiguous pass per factor;
* :func:`pauli_on_state`: a Pauli string in about two passes (flips merged into
  runs of axes, the product reduced contiguously);
* :func:`group_values`: a qubit-wise commuting group together (one copy, the
  basis turned to Z a few qubits per GEMM, one marginal, every term a Z string
  on it: :func:`z_string_values`);
* :func:`z_strings_on_state` and :func:`diagonal_terms_on_state`: every
  diagonal term (Z strings, the projectors ``0`` and ``1``) in one blocked pass
  over ``|s|^2``.

Which reader takes which term is priced in :mod:`qsimdist.engine.pauli_terms`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .pauli_terms import PAULI_ACTION, SINGLE_QUBIT_OPERATORS, PauliTerm, rotation_chunks


def term_on_state(state: np.ndarray, axes: Sequence[int], ops: str) -> float:
    """``Re <s|P|s>`` for a state tensor (one axis per qubit), ``ops[i]`` on axis ``axes[i]``.

    Each one-qubit operator is applied on a contiguous ``(before, 2, after)``
    view of the state (two scaled additions per output half), never through a
    transposed copy.
    """
    phi = np.ascontiguousarray(state)
    shape = phi.shape
    for j, op in zip(axes, ops):
        m = SINGLE_QUBIT_OPERATORS[op]
        v = phi.reshape(int(np.prod(shape[:j], dtype=np.int64)), 2, -1)
        out = np.empty_like(v)
        for row in (0, 1):
            a, b = m[row, 0], m[row, 1]
            if b == 0:
                np.multiply(v[:, 0], a, out=out[:, row])
            elif a == 0:
                np.multiply(v[:, 1], b, out=out[:, row])
            else:
                np.multiply(v[:, 0], a, out=out[:, row])
                out[:, row] += b * v[:, 1]
        phi = out.reshape(shape)
    # Re <s|phi> is the dot product of the float views; einsum's own loop, not a BLAS call
    # (a zdotc on a busy machine measured 300x slower: its threads wait on the cores)
    s_re = np.ascontiguousarray(state).reshape(-1).view(np.float64)
    return float(np.einsum("i,i->", s_re, phi.reshape(-1).view(np.float64)))


def pauli_on_state(state: np.ndarray, conj_state: np.ndarray, axes: Sequence[int],
                   ops: str, probabilities: np.ndarray | None = None,
                   work: dict | None = None) -> float:
    """``Re <s|P|s>`` for a Pauli string (``ops`` from ``X Y Z``) in about two passes.

    ``<s|P|s> = sum_x conj(s[x ^ f]) phase(x) s[x]``. The flip ``f`` reverses the
    axes holding X or Y; runs of adjacent axes that are all flipped (or all not)
    are merged first, flipping every bit of a run being a reversal of the merged
    axis, so numpy multiplies a few long axes, not ``n`` axes of 2. One product
    ``s[x ^ f] conj(s[x])`` (``conj_state`` computed once per state) is then
    reduced from its last axis on, contiguously: a term's axis by its phase
    vector, a run of the other axes by a sum. A diagonal term (Z only) reduces
    ``probabilities`` (``|s|^2``, real) instead, when given.

    ``work``: a dict this function keeps its buffers in; pass the same one for
    every term of one state, so that a large state's terms reuse memory already
    paged in (a fresh 256 MiB product costs more in page faults than in
    arithmetic).
    """
    n = state.ndim
    work = {} if work is None else work
    op_at = dict(zip(axes, ops))
    flips = {a for a, op in op_at.items() if PAULI_ACTION[op][0]}
    size = state.size
    if flips:
        runs: list[list] = []  # [length, flipped] of adjacent axes alike
        for a in range(n):
            if runs and runs[-1][1] == (a in flips):
                runs[-1][0] += 1
            else:
                runs.append([1, a in flips])
        shape = [1 << k for k, _ in runs]
        rev = tuple(i for i, (_, f) in enumerate(runs) if f)
        prod = _buffer(work, "product", size, np.result_type(state, conj_state))
        np.multiply(np.flip(state.reshape(shape), axis=rev), conj_state.reshape(shape),
                    out=prod.reshape(shape))
    elif probabilities is not None:  # diagonal term: |s|^2, computed once per state
        prod = probabilities.reshape(-1)
    else:
        prod = (state * conj_state).real.reshape(-1)
    reduced = prod
    dtype = np.result_type(prod.dtype, np.complex64)
    spare = ("reduce-a", "reduce-b")
    turn = 0
    a = n - 1
    while a >= 0:
        if a in op_at:  # the last remaining axis is a term's: contract it with its phase
            phase = PAULI_ACTION[op_at[a]][1].conj()
            pair = reduced.reshape(-1, 2)
            out = _buffer(work, spare[turn], pair.shape[0], dtype)
            tmp = _buffer(work, "reduce-tmp", pair.shape[0], dtype)
            np.multiply(pair[:, 0], phase[0], out=out)
            np.multiply(pair[:, 1], phase[1], out=tmp)
            np.add(out, tmp, out=out)
            a -= 1
        else:
            k = 0
            while a >= 0 and a not in op_at:
                k, a = k + 1, a - 1
            block = reduced.reshape(-1, 1 << k)
            out = _buffer(work, spare[turn], block.shape[0], reduced.dtype)
            np.sum(block, axis=1, out=out)
        reduced, turn = out, 1 - turn
    return float(np.conj(reduced.reshape(-1)[0]).real)


#: ``U`` with ``U P U^dagger = Z`` for the Pauli P measured on a qubit (H; H S^dagger)
_TO_Z = {
    "X": np.array([[1, 1], [1, -1]], dtype=complex) / np.sqrt(2),
    "Y": np.array([[1, -1j], [1, 1j]], dtype=complex) / np.sqrt(2),
}


def _parity_signs(bits: int, masks: Sequence[int]) -> np.ndarray:
    """``(2^bits, len(masks))``: column ``t`` is ``(-1)^popcount(k & masks[t])`` over ``k``."""
    k = np.arange(1 << bits, dtype=np.int64)
    out = np.empty((1 << bits, len(masks)))
    for t, mask in enumerate(masks):
        parity = np.zeros(1 << bits, dtype=np.int64)
        for b in range(bits):
            if mask >> b & 1:
                parity ^= k >> b & 1
        out[:, t] = 1.0 - 2.0 * parity
    return out


def z_string_values(marginal: np.ndarray, axes_lists: Sequence[Sequence[int]]) -> list[float]:
    """``sum_k marginal[k] (-1)^(bits of k on axes)`` for each axes list, on a ``(2,)*u``
    probability tensor (axis 0 the most significant bit of ``k``).

    A Z string's sign vector is a product of one on the leading ``u/2`` axes and
    one on the others, so with the marginal as a ``2^h x 2^(u-h)`` matrix ``M``
    every value is ``s_hi . (M s_lo)``: one GEMM of ``M`` with the terms' low sign
    vectors, then a dot per term; about ``u``'s worth of work per element less
    than a Walsh-Hadamard transform (83 ms against 3 ms for 11 terms on 21 qubits).
    """
    u = marginal.ndim
    if not axes_lists:
        return []
    h = u // 2
    lo_bits = u - h
    m = np.ascontiguousarray(marginal, dtype=np.float64).reshape(1 << h, 1 << lo_bits)
    hi_masks, lo_masks = [], []
    for axes in axes_lists:
        hi = lo = 0
        for a in axes:
            if a < h:
                hi |= 1 << (h - 1 - a)
            else:
                lo |= 1 << (u - 1 - a)
        hi_masks.append(hi)
        lo_masks.append(lo)
    projected = m @ _parity_signs(lo_bits, lo_masks)
    return [float(v) for v in np.einsum("it,it->t", _parity_signs(h, hi_masks), projected)]


#: state elements per block of :func:`z_strings_on_state` (its temporaries stay in cache;
#: 24 qubits, 12 strings: 20 ms at 2^18, 26 ms at 2^16, 24 ms at 2^20)
Z_STRING_BLOCK = 1 << 18


def z_strings_on_state(state: np.ndarray, qubit_lists: Sequence[Sequence[int]]) -> list[float]:
    """``<s|Z..Z|s>`` for each list of qubits, from a flat state in Qiskit's order (bit
    ``q`` of the index is qubit ``q``), in one pass however many strings there are.

    With the index split into its high and low halves, a Z string's sign is a
    product of a sign of each half, so per block of rows ``|s|^2`` is multiplied
    (one GEMM) by the strings' low-half sign vectors, then by their high-half
    signs: no state-sized temporary, and a pass over the state costs what one
    string's would.
    """
    if not qubit_lists:
        return []
    n = state.size.bit_length() - 1
    lo_bits = n // 2 if n >= 2 else n
    masks = [sum(1 << q for q in qs) for qs in qubit_lists]
    lo_signs = _parity_signs(lo_bits, [m & ((1 << lo_bits) - 1) for m in masks])
    hi_signs = _parity_signs(n - lo_bits, [m >> lo_bits for m in masks])
    return _weighted_probability_sums(state, lo_bits, lo_signs, hi_signs)


#: the single-qubit factors of diagonal terms, on a qubit's bit 0 and bit 1
_DIAGONAL_FACTORS = {"Z": (1.0, -1.0), "0": (1.0, 0.0), "1": (0.0, 1.0)}


def is_diagonal_term(term: PauliTerm) -> bool:
    return bool(term.ops) and set(term.ops) <= set(_DIAGONAL_FACTORS)


def _factor_table(bits: int, offset: int, terms: Sequence[PauliTerm]) -> np.ndarray:
    """``(2^bits, len(terms))``: column ``t`` is the product over term ``t``'s qubits in
    ``offset..offset+bits-1`` of its factor (:data:`_DIAGONAL_FACTORS`) on that bit of
    ``k + offset``'s part, over ``k``."""
    k = np.arange(1 << bits, dtype=np.int64)
    out = np.ones((1 << bits, len(terms)))
    for t, term in enumerate(terms):
        for q, op in zip(term.qubits, term.ops):
            b = q - offset
            if 0 <= b < bits:
                f0, f1 = _DIAGONAL_FACTORS[op]
                out[:, t] *= np.where(k >> b & 1, f1, f0)
    return out


def diagonal_terms_on_state(state: np.ndarray, terms: Sequence[PauliTerm]) -> list[float]:
    """``<s|T|s>`` for terms whose operators are all diagonal (``Z``, and the projectors
    ``0`` and ``1``: a dynamic circuit's branch probabilities and its terms on one
    branch), from a flat state in Qiskit's order, in one pass however many terms there
    are: as :func:`z_strings_on_state`, each term a product of a low-half and a high-half
    factor."""
    if not terms:
        return []
    n = state.size.bit_length() - 1
    lo_bits = n // 2 if n >= 2 else n
    return _weighted_probability_sums(state, lo_bits, _factor_table(lo_bits, 0, terms),
                                      _factor_table(n - lo_bits, lo_bits, terms))


def _weighted_probability_sums(state: np.ndarray, lo_bits: int, lo: np.ndarray,
                               hi: np.ndarray) -> list[float]:
    """``sum_k |s_k|^2 lo[k_low, t] hi[k_high, t]`` for each column ``t``, in blocks."""
    size = state.size
    flat = state.reshape(-1)
    width = 1 << lo_bits
    rows_per_block = max(1, Z_STRING_BLOCK // width)
    total = np.zeros(lo.shape[1])
    for r0 in range(0, size // width, rows_per_block):
        r1 = min(r0 + rows_per_block, size // width)
        prob = np.abs(flat[r0 * width:r1 * width]).astype(np.float64, copy=False)
        np.square(prob, out=prob)
        total += np.einsum("it,it->t", hi[r0:r1], prob.reshape(r1 - r0, width) @ lo)
    return [float(v) for v in total]


def group_values(state: np.ndarray, terms: Sequence[PauliTerm], members: Sequence[int],
                 basis: dict[int, str], work: dict | None = None) -> dict[int, float]:
    """``<s|P|s>`` for the qubit-wise commuting terms ``members`` of ``terms``.

    ``state`` is the ``(2,)*n`` tensor in Qiskit's axis order (axis ``a`` holds
    qubit ``n-1-a``), complex128. One copy moves the group's qubits to the
    last axes (those measured in X or Y last of all), where they are turned to
    Z a few per GEMM; the probabilities' marginal on the group's qubits is
    then one contiguous sum of squares (no temporary), and every term a Z
    string on that marginal. ``work`` keeps the two state-sized buffers between
    the groups of one state (fresh ones would be page-faulted in each time).
    """
    from ..executors import matmul_in_parts, permute_axes

    work = {} if work is None else work
    n = state.ndim
    support = sorted({n - 1 - q for i in members for q in terms[i].qubits})
    rotated = [a for a in support if basis[n - 1 - a] != "Z"]
    plain = [a for a in support if basis[n - 1 - a] == "Z"]
    rest = [a for a in range(n) if a not in set(support)]
    # one copy, even for an all-Z group: the contiguous marginal after it costs less
    # than a strided one in place (measured 7.0 + 0.7 against 17 ns per element)
    psi = _buffer(work, "group", state.size, state.dtype)
    permute_axes(state.reshape(-1), psi, rest + plain + rotated)
    out = _buffer(work, "group rotated", state.size, state.dtype) if rotated else None
    inner_bits = 0  # the chunks from the last axis up: the one on the last axes first
    for c in rotation_chunks(len(rotated)):
        mat = np.array([[1.0]], dtype=complex)
        chunk = rotated[len(rotated) - inner_bits - c:len(rotated) - inner_bits]
        for a in chunk:
            mat = np.kron(mat, _TO_Z[basis[n - 1 - a]])
        inner = 1 << inner_bits
        outer = psi.size // ((1 << c) * inner)
        matmul_in_parts(mat, psi, out, outer, 1 << c, inner)
        psi, out = out, psi
        inner_bits += c
    u = len(support)
    rows = psi.view(np.float64).reshape(-1, 2 << u)  # (re, im) of each marginal entry
    squares = np.einsum("ij,ij->j", rows, rows)
    marginal = (squares[0::2] + squares[1::2]).reshape([2] * u)
    at = {a: j for j, a in enumerate(plain + rotated)}
    values = z_string_values(marginal, [[at[n - 1 - q] for q in terms[i].qubits]
                                        for i in members])
    return dict(zip(members, values))


def _buffer(work: dict, name: str, size: int, dtype) -> np.ndarray:
    """A flat buffer of ``size`` elements of ``dtype`` kept in ``work`` (grown, never shrunk)."""
    dtype = np.dtype(dtype)
    key = (name, dtype)
    buf = work.get(key)
    if buf is None or buf.size < size:
        from ..executors import state_buffer

        buf = work[key] = state_buffer(size, dtype)
    return buf[:size]


__all__ = [
    "Z_STRING_BLOCK",
    "diagonal_terms_on_state",
    "group_values",
    "is_diagonal_term",
    "pauli_on_state",
    "term_on_state",
    "z_string_values",
    "z_strings_on_state",
]
