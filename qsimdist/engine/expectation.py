"""Expectation values ``<psi|P|psi>`` of Pauli strings on light-cone-reduced doubled networks.

For a term ``P`` acting on the qubits ``S``, the value is the contraction of
the *doubled* network: the circuit ``U`` on ``|0...0>`` (ket), the term's
one-qubit operators on ``S``, and the complex conjugate of ``U`` on
``<0...0|`` (bra). A gate that cannot reach ``S`` (outside the backward light
cone of ``S``) meets its own adjoint and cancels, so only the gates in the
light cone are built, and qubits outside it are left out altogether. Local
observables of wide, shallow circuits are therefore cheap: ``<Z_i Z_{i+1}>``
of a depth-4 brickwork circuit on 50 qubits involves at most 8 qubits.

Before the light cone is taken, one-qubit gates are fused into the
neighbouring multi-qubit gate on their qubit (and consecutive gates on the
same qubits are multiplied together). The doubled route
(:mod:`qsimdist.engine.doubled`) never folds a one-qubit gate into a diagonal
gate: diagonal gates stay diagonal (tensors on hyper-indices), its light cone
drops diagonal gates that commute with the term's Heisenberg-picture operator,
and quimb's ``ADCRS`` simplification runs on networks that are not cheap as
built. Plans are keyed by the network finally contracted.

The network of a term is named by *local* qubit positions (rank within the
light cone), so terms whose light cones are translates of each other (the
interior ``Z_i Z_{i+1}`` of a brickwork circuit) build the same network up
to its arrays and share one :class:`~qsimdist.planner.plan.Plan`: the path
is searched once per structure, and later terms, other parameter values and
other observables reuse it with new arrays (``dataclasses.replace(plan,
network=...)``). An :class:`ExpectationEngine` keeps those plans between
calls.

Term labels follow Qiskit's order: the rightmost character is qubit 0.
Besides ``I X Y Z``, the projectors of Qiskit's ``SparseObservable``
(``0 1 + - r l``) are accepted, since every one-qubit operator is just
another 2x2 tensor here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..config import check_dtype
from ..errors import InvalidInputError, shorten
from ..frontends import GateCircuit, load
from ..frontends.fusion import fuse_into_neighbours
from ..network import Network
from ..planner.path import PathOptions
from ..planner.plan import Plan

_S = 1.0 / np.sqrt(2.0)

#: the one-qubit operator of each label character (``I`` is never built)
SINGLE_QUBIT_OPERATORS: dict[str, np.ndarray] = {
    "I": np.eye(2, dtype=complex),
    "X": np.array([[0, 1], [1, 0]], dtype=complex),
    "Y": np.array([[0, -1j], [1j, 0]], dtype=complex),
    "Z": np.array([[1, 0], [0, -1]], dtype=complex),
    "0": np.array([[1, 0], [0, 0]], dtype=complex),
    "1": np.array([[0, 0], [0, 1]], dtype=complex),
    "+": np.array([[0.5, 0.5], [0.5, 0.5]], dtype=complex),
    "-": np.array([[0.5, -0.5], [-0.5, 0.5]], dtype=complex),
    "r": np.array([[0.5, -0.5j], [0.5j, 0.5]], dtype=complex),
    "l": np.array([[0.5, 0.5j], [-0.5j, 0.5]], dtype=complex),
}
_VALID_CHARS = "".join(SINGLE_QUBIT_OPERATORS)


@dataclass(frozen=True)
class PauliTerm:
    """One product operator: ``ops[j]`` acts on qubit ``qubits[j]`` (ascending, no identities)."""

    qubits: tuple[int, ...]
    ops: str

    @property
    def weight(self) -> int:
        """The number of qubits the term acts on non-trivially."""
        return len(self.qubits)


def parse_term(label: str, n_qubits: int) -> PauliTerm:
    """A label in Qiskit order (rightmost character = qubit 0) as a :class:`PauliTerm`.

    Raises:
        InvalidInputError: the label has the wrong length or a character outside
            ``I X Y Z 0 1 + - r l``.
    """
    if not isinstance(label, str):
        raise InvalidInputError(
            f"an observable must be a label string such as 'ZZII', got {shorten(label)} "
            f"({type(label).__name__})"
        )
    if len(label) != n_qubits:
        raise InvalidInputError(
            f"observable {shorten(label)} has {len(label)} characters; the circuit has "
            f"{n_qubits} qubits (one character per qubit, rightmost = qubit 0)"
        )
    bad = sorted(set(label) - set(_VALID_CHARS))
    if bad:
        raise InvalidInputError(
            f"observable {shorten(label)} has invalid characters {shorten(''.join(bad))}; "
            f"valid: I, X, Y, Z (and the projectors 0, 1, +, -, r, l)"
        )
    pairs = [(n_qubits - 1 - k, c) for k, c in enumerate(label) if c != "I"]
    pairs.sort()
    return PauliTerm(tuple(q for q, _ in pairs), "".join(c for _, c in pairs))


# --------------------------------------------------------------------------- networks
def _structure(circuit: GateCircuit, term: PauliTerm, kept: Sequence[int]) -> tuple:
    """The term's network structure in local qubit numbers (rank within the light cone)."""
    cone = set(term.qubits)
    for k in kept:
        cone.update(circuit.gates[k].qubits)
    local = {q: j for j, q in enumerate(sorted(cone))}
    return (
        len(local),
        tuple(local[q] for q in term.qubits),
        tuple(tuple(local[q] for q in circuit.gates[k].qubits) for k in kept),
    )


def expectation_network(circuit: GateCircuit, term: PauliTerm,
                        kept: Sequence[int] | None = None) -> Network:
    """The doubled network whose contraction is ``<0|U^dag P U|0>`` (light cone only).

    Ket indices are ``k{j}.{layer}``, bra indices ``b{j}.{layer}``, with ``j``
    the qubit's rank in the light cone; on a light-cone qubit outside the
    term's support the ket's and the bra's last indices are one index (the
    identity). The global phase cancels and is not built.
    """
    if kept is None:
        kept = circuit.light_cone(term.qubits).gates
    n_local, support, gate_qubits = _structure(circuit, term, kept)
    layers = [0] * n_local
    for qs in gate_qubits:
        for j in qs:
            layers[j] += 1
    in_support = set(support)

    def ket(j: int, layer: int) -> str:
        return f"k{j}.{layer}"

    def bra(j: int, layer: int) -> str:
        if layer == layers[j] and j not in in_support:
            return ket(j, layer)
        return f"b{j}.{layer}"

    zero = np.array([1.0, 0.0], dtype=complex)
    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    for j in range(n_local):
        inputs.append((ket(j, 0),))
        arrays.append(zero)
        inputs.append((bra(j, 0),))
        arrays.append(zero)
    at = [0] * n_local
    for k, qs in zip(kept, gate_qubits):
        g = circuit.gates[k]
        shape = (2,) * (2 * len(qs))
        ins = [at[j] for j in qs]
        for j in qs:
            at[j] += 1
        inputs.append((*(ket(j, at[j]) for j in qs), *(ket(j, i) for j, i in zip(qs, ins))))
        arrays.append(g.matrix.reshape(shape))
        inputs.append((*(bra(j, at[j]) for j in qs), *(bra(j, i) for j, i in zip(qs, ins))))
        arrays.append(g.matrix.conj().reshape(shape))
    for j, op in zip(support, term.ops):
        # <y|P|x>: the bra's index is the row, the ket's the column
        inputs.append((bra(j, layers[j]), ket(j, layers[j])))
        arrays.append(SINGLE_QUBIT_OPERATORS[op])
    size_dict = {i: 2 for term_inds in inputs for i in term_inds}
    return Network(inputs, (), size_dict, arrays,
                   meta={"n_qubits": n_local, "name": f"{circuit.name}:expectation"})


def state_network(circuit: GateCircuit, qubits: Sequence[int],
                  kept: Sequence[int]) -> Network:
    """The single-layer network of ``U|0...0>`` on ``qubits`` (gates ``kept``), all left open.

    ``qubits`` must hold every qubit of the ``kept`` gates. Indices are named by
    local position as in :func:`expectation_network`; output axis ``j`` is
    ``sorted(qubits)[j]``. The global phase is not built (it cancels in every
    expectation value).
    """
    local = {q: j for j, q in enumerate(sorted(qubits))}
    zero = np.array([1.0, 0.0], dtype=complex)
    inputs: list[tuple[str, ...]] = [(f"k{j}.0",) for j in range(len(local))]
    arrays: list[np.ndarray] = [zero] * len(local)
    at = [0] * len(local)
    for k in kept:
        g = circuit.gates[k]
        qs = [local[q] for q in g.qubits]
        ins = [f"k{j}.{at[j]}" for j in qs]
        for j in qs:
            at[j] += 1
        inputs.append((*(f"k{j}.{at[j]}" for j in qs), *ins))
        arrays.append(g.matrix.reshape((2,) * (2 * len(qs))))
    output = tuple(f"k{j}.{at[j]}" for j in range(len(local)))
    size_dict = {i: 2 for term_inds in inputs for i in term_inds}
    return Network(inputs, output, size_dict, arrays,
                   meta={"n_qubits": len(local), "name": f"{circuit.name}:state"})


def _state_flops(circuit: GateCircuit, kept: Iterable[int], n_qubits: int) -> float:
    """Predicted FLOPs of applying the gates ``kept`` to a state of ``n_qubits`` qubits."""
    return sum(8.0 * 2.0 ** (n_qubits + len(circuit.gates[k].qubits)) for k in kept)


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


#: for each Pauli: (whether it flips the bit, its phase on the input bit 0 and 1), so that
#: ``P|x> = phase[x] |x ^ flip>``
_PAULI_ACTION = {
    "X": (True, np.array([1.0, 1.0], dtype=complex)),
    "Y": (True, np.array([1j, -1j], dtype=complex)),
    "Z": (False, np.array([1.0, -1.0], dtype=complex)),
}


def _pauli_reading_seconds(n: int, terms: Sequence[PauliTerm]) -> tuple[float, float]:
    """Predicted seconds to read Pauli ``terms`` off a ``2^n`` state: ``(numpy's
    pauli_on_state, the compiled one-pass kernel with this process's numba start-up)``."""
    from ..executors.statevector import compiled_kernel_runs
    from .router import PAULI_PASS_SECONDS_PER_ELEMENT

    size = 2.0**n
    diagonal = [t for t in terms if _is_z_string(t)]
    terms = [t for t in terms if not _is_z_string(t)]
    diagonal_s = Z_STRINGS_SECONDS_PER_ELEMENT * size if diagonal else 0.0
    numpy_s = sum(seconds for _, _, seconds in _numpy_reading_plan(n, terms)) + diagonal_s
    if not terms:
        return numpy_s, numpy_s
    if not compiled_kernel_runs(n, 0):
        return numpy_s, math.inf
    from ..executors.sv_kernels import startup_seconds

    return numpy_s, (PAULI_PASS_SECONDS_PER_ELEMENT * size * len(terms) + diagonal_s
                     + startup_seconds())


def _is_z_string(term: PauliTerm) -> bool:
    return bool(term.ops) and set(term.ops) == {"Z"}


def _numpy_reading_plan(n: int, terms: Sequence[PauliTerm]
                        ) -> list[tuple[list[int], dict[int, str] | None, float]]:
    """How numpy reads Pauli ``terms`` off a ``2^n`` state: ``[(indices, basis, seconds)]``,
    a qubit-wise commuting group read together (``basis`` given) where that is predicted
    cheaper than its terms one by one (``basis`` None: :func:`pauli_on_state` each).

    Routing, the reader's choice and the reading each ask for it: the search is
    made once per ``(n, terms)`` and copies handed out."""
    from . import router

    prices = (GROUP_COPY_SECONDS_PER_ELEMENT, GROUP_ROTATION_SECONDS_PER_ELEMENT,
              GROUP_MARGINAL_SECONDS_PER_ELEMENT, GROUP_SIGNS_SECONDS_PER_ELEMENT,
              GROUP_TERM_SECONDS_PER_ELEMENT, router.TERM_SECONDS_PER_ELEMENT,
              GROUPING_TRIES, GROUPING_SEARCH_SECONDS)  # in the key: tests change them
    plan = _cached_reading_plan(n, tuple(terms), prices)
    return [(list(members), None if basis is None else dict(basis), seconds)
            for members, basis, seconds in plan]


@functools.lru_cache(maxsize=64)
def _cached_reading_plan(n: int, terms: tuple[PauliTerm, ...], prices: tuple
                         ) -> list[tuple[list[int], dict[int, str] | None, float]]:
    from .router import TERM_SECONDS_PER_ELEMENT

    size = 2.0**n

    def priced(groups):
        plan = []
        for members, basis in groups:
            alone = sum(TERM_SECONDS_PER_ELEMENT * size * (terms[i].weight + 1)
                        for i in members)
            together = _group_seconds(n, basis, len(members))
            if together < alone:
                plan.append((members, basis, together))
            else:
                plan.append((members, None, alone))
        return plan, sum(seconds for *_, seconds in plan)

    best, best_s = priced(qwc_groups(terms))
    if best_s >= GROUPING_SEARCH_SECONDS and len(terms) > 2:
        rng = np.random.default_rng(len(terms))
        for _ in range(GROUPING_TRIES):
            plan, seconds = priced(qwc_groups(terms, rng.permutation(len(terms)).tolist()))
            if seconds < best_s:
                best, best_s = plan, seconds
    return best


def _one_pass_pays(n: int, terms: Sequence[PauliTerm]) -> bool:
    """Whether the compiled one-pass reader is predicted faster for these Pauli terms."""
    numpy_s, compiled_s = _pauli_reading_seconds(n, terms)
    return compiled_s < numpy_s


def _reading_seconds(n: int, terms: Sequence[PauliTerm]) -> float:
    """Predicted seconds to read every term off the state (the faster Pauli reader)."""
    from .router import TERM_SECONDS_PER_ELEMENT

    paulis = [t for t in terms if set(t.ops) <= set(_PAULI_ACTION)]
    others = sum(TERM_SECONDS_PER_ELEMENT * 2.0**n * (t.weight + 1) for t in terms
                 if not set(t.ops) <= set(_PAULI_ACTION))
    return min(_pauli_reading_seconds(n, paulis)) + others


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
    flips = {a for a, op in op_at.items() if _PAULI_ACTION[op][0]}
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
            phase = _PAULI_ACTION[op_at[a]][1].conj()
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


# ------------------------------------------------------------- qubit-wise commuting groups
#: ``U`` with ``U P U^dagger = Z`` for the Pauli P measured on a qubit (H; H S^dagger)
_TO_Z = {
    "X": np.array([[1, 1], [1, -1]], dtype=complex) / np.sqrt(2),
    "Y": np.array([[1, -1j], [1, 1j]], dtype=complex) / np.sqrt(2),
}
#: rotations applied per GEMM when a group's basis is turned to Z (2^3 = 8 multiply-adds
#: per element: memory-bound, like a copy); see :func:`_rotation_chunks`
_ROTATION_CHUNK = 3


def _rotation_chunks(r: int) -> list[int]:
    """How many of a group's ``r`` rotated qubits each GEMM turns, from the last axis up.

    The chunk on the last axes is one tall GEMM; a chunk above ``inner`` axes is a
    batch of GEMMs over ``inner`` columns, and numpy's per-GEMM overhead makes a
    small ``inner`` dear (22 qubits, 3 qubits: 8 ms on the last axes, 35 ms at
    ``inner`` 2, 12 ms at 8 or more). So the remainder of ``r / 3`` goes where
    ``inner`` is large (a chunk of 2 on top) or into the last chunk (4 qubits:
    14 ms), never where ``inner`` is 2 or 4.
    """
    if r <= _ROTATION_CHUNK + 1:
        return [r] if r else []
    sizes = [_ROTATION_CHUNK] * (r // _ROTATION_CHUNK)
    if r % _ROTATION_CHUNK == 1:
        sizes[0] += 1
    elif r % _ROTATION_CHUNK == 2:
        sizes.append(2)
    return sizes
#: measured seconds per state element (complex128, numpy, this host, 18-22 qubits;
#: docs/benchmarks/history.md, "The estimator's qubit-wise commuting groups beside Aer" and
#: "The primitives beside Aer again") of the grouped reader's passes: the copy moving
#: the group's qubits last into a reused buffer (0.6-8 ns, the scattered supports
#: dearest), one rotation GEMM of up to 3 qubits, the marginal as one contiguous sum
#: of squares over the float view (0.54-0.76 ns); then, per marginal element, the Z
#: strings' values (:func:`z_string_values`: a fixed part, and one multiply-add per term)
GROUP_COPY_SECONDS_PER_ELEMENT = 4.0e-9
GROUP_ROTATION_SECONDS_PER_ELEMENT = 2.6e-9
GROUP_MARGINAL_SECONDS_PER_ELEMENT = 0.7e-9
GROUP_SIGNS_SECONDS_PER_ELEMENT = 0.5e-9
GROUP_TERM_SECONDS_PER_ELEMENT = 0.1e-9


def qwc_groups(terms: Sequence[PauliTerm], order: Sequence[int] | None = None
               ) -> list[tuple[list[int], dict[int, str]]]:
    """Qubit-wise commuting groups of Pauli ``terms``: ``[(indices, basis)]``.

    Greedy: in ``order`` (default: heaviest terms first), a term joins the first
    group whose basis (the Pauli measured on each qubit) agrees with it on every
    qubit both touch. Every term of a group is then a Z string after one change
    of basis per qubit.
    """
    if order is None:
        order = sorted(range(len(terms)), key=lambda j: (-terms[j].weight, j))
    groups: list[tuple[list[int], dict[int, str]]] = []
    for i in order:
        t = terms[i]
        for members, basis in groups:
            if all(basis.get(q, op) == op for q, op in zip(t.qubits, t.ops)):
                members.append(i)
                basis.update(zip(t.qubits, t.ops))
                break
        else:
            groups.append(([i], dict(zip(t.qubits, t.ops))))
    return groups


#: greedy groupings tried beyond the heaviest-first one (seeded shuffles of the terms),
#: when the reading is predicted to take at least GROUPING_SEARCH_SECONDS; the cheapest
#: predicted wins (rc22's 40 terms: 6 groups, 320 ms predicted, against 5 and 265 ms
#: for the best of 200 shuffles)
GROUPING_TRIES = 48
GROUPING_SEARCH_SECONDS = 0.05


def _group_seconds(n: int, basis: dict[int, str], members: int) -> float:
    """Predicted seconds of the grouped reader (:func:`group_values`) for one group."""
    r = sum(1 for op in basis.values() if op != "Z")
    chunks = len(_rotation_chunks(r))
    u = len(basis)
    return (2.0**n * (GROUP_COPY_SECONDS_PER_ELEMENT + chunks * GROUP_ROTATION_SECONDS_PER_ELEMENT
                      + GROUP_MARGINAL_SECONDS_PER_ELEMENT)
            + 2.0**u * (GROUP_SIGNS_SECONDS_PER_ELEMENT
                        + members * GROUP_TERM_SECONDS_PER_ELEMENT))


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


#: measured seconds per state element of :func:`z_strings_on_state`, whatever the number
#: of strings (24 qubits, 12 strings: 1.5 ns, where 12 compiled passes took 29 ns)
Z_STRINGS_SECONDS_PER_ELEMENT = 1.6e-9
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


def _is_diagonal_term(term: PauliTerm) -> bool:
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
    from ..executors.statevector import matmul_in_parts, permute_axes

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
    for c in _rotation_chunks(len(rotated)):
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
        from ..executors.statevector import state_buffer

        buf = work[key] = state_buffer(size, dtype)
    return buf[:size]


# --------------------------------------------------------------------------- engine
@dataclass
class ExpectationStats:
    """What an engine did: terms by method, contractions, plans made and reused, seconds, FLOPs.

    ``flops`` are the plans' own counts of the contractions run (the doubled
    networks, or the light-cone states); applying terms to a state is not counted.
    """

    terms: int = 0
    trivial_terms: int = 0
    doubled_terms: int = 0
    state_terms: int = 0
    statevector_terms: int = 0
    #: statevector terms read in qubit-wise commuting groups, and those groups
    grouped_terms: int = 0
    qwc_groups: int = 0
    #: statevector terms that are Z strings, read together in one pass over |s|^2
    z_string_terms: int = 0
    #: terms read off stim's tableau (a Clifford circuit: :mod:`qsimdist.engine.stabilizer`)
    stabilizer_terms: int = 0
    contractions: int = 0
    #: slices run over all contractions (more than ``contractions`` when a plan was sliced
    #: to fit the memory limit)
    slices: int = 0
    plans_made: int = 0
    plans_reused: int = 0
    flops: float = 0.0
    plan_seconds: float = 0.0
    execute_seconds: float = 0.0
    max_light_cone_qubits: int = 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: how an engine evaluates the terms of one circuit (see :class:`ExpectationEngine`)
METHODS = ("auto", "statevector", "doubled", "state", "stabilizer")


@dataclass
class ExpectationEngine:
    """Evaluates Pauli terms of circuits and keeps one plan per network structure.

    Two methods, chosen per circuit by predicted cost (``method="auto"``):

    - ``doubled``: each term is ``<0|U^dag P U|0>`` on the doubled network of
      its own light cone (:func:`expectation_network`); cheap for local terms of
      wide, shallow circuits, whatever the width.
    - ``state``: when the union of the terms' light cones has at most
      ``state_max_qubits`` qubits, one contraction of the single-layer network
      with those qubits open (:func:`state_network`) gives the light-cone state,
      and every term is applied to it. It wins when the cones overlap, as in
      narrow, deep circuits, where the doubled networks would repeat the same
      work for every term.

    The prediction counts state-vector FLOPs over each light cone (twice per
    term for the doubled network, once for the union's state); the plans'
    own FLOPs are reported in :attr:`stats`.

    Attributes:
        dtype: ``complex128`` (default) or ``complex64``.
        memory_limit: peak bytes per contraction (``None``: the machine's default;
            ``"none"``: unlimited); per rank under ``executor="mpi"``.
        backend: array library, ``numpy`` or ``cupy``.
        path_options: path search options (:class:`PathOptions` or a dict).
        executor: ``local`` or ``mpi`` (every rank of ``mpiexec`` makes the same calls;
            plans are made on rank 0 for the ranks of ``comm`` and ``profile``).
        profile: hardware profile for ``executor="mpi"`` (default ``local-cpu``).
        comm: MPI communicator (default ``MPI.COMM_WORLD``).
        fuse: fold one-qubit gates into their neighbours first
            (:func:`~qsimdist.frontends.fusion.fuse_into_neighbours`).
        method: ``auto``, ``statevector``, ``doubled``, ``state`` (see above) or
            ``stabilizer``: a Clifford circuit's terms read exactly off stim's tableau
            (:mod:`qsimdist.engine.stabilizer`), which ``auto`` takes where predicted
            cheaper (nearly always, at any width).
        state_max_qubits: widest light-cone state the ``state`` method may open.
    """

    dtype: str = "complex128"
    memory_limit: str | int | None = None
    backend: str = "numpy"
    path_options: PathOptions | dict | None = None
    executor: str = "local"
    profile: object = None
    comm: object = None
    fuse: bool = True
    method: str = "auto"
    state_max_qubits: int = 20
    stats: ExpectationStats = field(default_factory=ExpectationStats)
    _plans: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.dtype = check_dtype(self.dtype)
        from .options import check_executor

        check_executor(self.executor)  # an unknown name: one line with the valid list
        if not 1 <= self.state_max_qubits <= 40:
            raise InvalidInputError(
                f"state_max_qubits must be in 1..40, got {self.state_max_qubits!r}"
            )
        if self.method not in METHODS:
            raise InvalidInputError(f"unknown method {self.method!r}; valid: {', '.join(METHODS)}")
        if isinstance(self.path_options, dict):
            self.path_options = PathOptions(**self.path_options)
        from .options import RunOptions

        self._options = RunOptions.resolve(dtype=self.dtype, memory_limit=self.memory_limit,
                                           backend=self.backend, executor=self.executor,
                                           comm=self.comm)
        self._budget = self._options.memory
        self._limit = self._budget.limit
        self.comm = self._options.comm
        self.route: dict | None = None
        #: keep the last statevector route's state for the next call on the same circuit
        #: object (a dynamic circuit's branch probabilities and terms, read one by one)
        self.keep_state = False
        self._held: tuple | None = None  # (weak reference to the circuit, dtype, state, fused)
        self._profile = None
        if self._options.distributed:
            from .coordination import profile_for

            self._profile = profile_for(self.profile or "local-cpu", self._limit)

    @property
    def plans(self) -> int:
        """The number of plans held (one per network structure seen)."""
        return len(self._plans)

    def _plan_for(self, key: tuple, net: Network, share: bool = False) -> Plan:
        """The process's cached plan for ``net`` (:data:`qsimdist.engine.cache.PLANS`).

        ``share``: plan as a batch qsimdist chose itself (within a quarter of the limit
        where that costs no refusal, :func:`~qsimdist.engine.amplitudes.plan_batch`), so
        the executor's free buffers beside the peak stay within the limit too."""
        from .cache import PLANS

        build = None
        if share:
            from ..planner.plan import make_plan
            from .amplitudes import plan_batch

            opts = self.path_options or PathOptions()

            def build(limit: int | None) -> Plan:
                # within a quarter of the limit where that costs at most twice the
                # work (more slices of small networks cost Python time per slice)
                full = make_plan(net, dtype=self.dtype, memory_limit=limit, path_options=opts)
                if limit is None:  # unsliced (distributed: then scheduled for the profile)
                    return full
                quarter = plan_batch(net, self.dtype, limit, opts, True)
                return quarter if quarter.stats.flops <= 2 * full.stats.flops else full

        # checked against the budget in one process; distributed, made on rank 0 and shared
        plan, reused = PLANS.plan_for(net, self._options, profile=self._profile,
                                      path_options=self.path_options, build=build,
                                      variant="share" if share else None)
        self._plans[key] = True
        if reused:
            self.stats.plans_reused += 1
        else:
            self.stats.plans_made += 1
        return plan

    def _contract(self, key: tuple, net: Network, t0: float, share: bool = False) -> np.ndarray:
        """Plan (or reuse a plan for) ``net``, run it, and account for it in :attr:`stats`."""
        plan = self._plan_for(key, net, share)
        t1 = time.perf_counter()
        value = plan.execute(backend=self.backend, **self._options.execute_keywords())
        value = np.asarray(value.get() if hasattr(value, "get") else value)
        st = self.stats
        st.contractions += 1
        st.slices += max(1, plan.stats.n_slices)
        st.flops += plan.stats.flops
        st.plan_seconds += t1 - t0
        st.execute_seconds += time.perf_counter() - t1
        return value

    def _choose(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                cones: list[tuple[list[int], set[int]]],
                method: str) -> tuple[str, list[int], set[int], float]:
        """The tensor-network method for these (non-trivial) terms, the union light cone
        (gates, qubits), and the method's predicted seconds (the router's unit)."""
        from .router import TN_RATE, tn_floor

        union: set[int] = set()
        for term in terms:
            union.update(term.qubits)
        kept = circuit.light_cone(union).gates
        qubits = set(union)
        for k in kept:
            qubits.update(circuit.gates[k].qubits)
        doubled = sum(2 * _state_flops(circuit, k, len(q)) + 8.0 * 2.0 ** len(q) * t.weight
                      for t, (k, q) in zip(terms, cones))
        doubled_s = doubled / (8.0 * TN_RATE) + tn_floor(2 * len(circuit.gates), len(terms))
        m = len(qubits)
        if m <= 40:
            state = (_state_flops(circuit, kept, m)
                     + sum(8.0 * 2.0**m * (t.weight + 1) for t in terms))
            state_s = state / (8.0 * TN_RATE) + tn_floor(len(circuit.gates), 1)
        else:
            state, state_s = math.inf, math.inf
        if method in ("doubled", "state"):
            return method, kept, qubits, doubled_s if method == "doubled" else state_s
        if len(qubits) > self.state_max_qubits or not state < doubled:
            return "doubled", kept, qubits, doubled_s
        return "state", kept, qubits, state_s

    def held_state(self, circuit: GateCircuit):
        """``(state, fused)`` kept from the last statevector run of this very circuit object
        (with :attr:`keep_state`), else ``None``."""
        held = self._held
        if held is None or held[0]() is not circuit or held[1] != self.dtype:
            return None
        return held[2], held[3]

    def release_state(self) -> None:
        """Stop keeping states, and drop the one held."""
        self.keep_state = False
        self._held = None

    def _held_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm]) -> np.ndarray:
        """The terms read off the held state: the statevector route at the price of
        reading alone (cheapest route first: nothing else is priced)."""
        from .router import Route

        values = np.ones(len(terms), dtype=np.float64)
        live = [i for i, t in enumerate(terms) if t.qubits]
        st = self.stats
        st.terms += len(terms)
        st.trivial_terms += len(terms) - len(live)
        if live:
            read = _reading_seconds(circuit.n_qubits, [terms[i] for i in live])
            route = Route("statevector", "the circuit's state is held from the call before",
                          read, engine="qsimdist")
            self.route = route.to_dict()
            self._statevector_values(circuit, terms, live, values, route)
        return values

    def _statevector_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                            live: list[int], values: np.ndarray, route) -> None:
        """Every live term read off the full state (fused gates applied in circuit order).

        numpy's passes split the state over the cores themselves, with BLAS on one
        thread (its own threads spin between calls and hold the cores)."""
        from ..executors.statevector import blas_threads

        with blas_threads(1):
            self._read_statevector(circuit, terms, live, values, route)

    def _read_statevector(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                          live: list[int], values: np.ndarray, route) -> None:
        from ..frontends.fusion import statevector_flops
        from .router import final_state

        t0 = time.perf_counter()
        n = circuit.n_qubits
        sim_work: dict = {}
        held = self.held_state(circuit)
        if held is not None:
            (state, fused), fuse_seconds = held, 0.0
        else:
            state, fused, fuse_seconds = final_state(circuit, self.dtype, route, work=sim_work)
            if self.keep_state:  # read only from here on: nothing below writes the state
                import weakref

                self._held = (weakref.ref(circuit), self.dtype, state, fused)
        t1 = t0 + fuse_seconds
        paulis = [i for i in live if set(terms[i].ops) <= set(_PAULI_ACTION)]
        # every diagonal term (Z strings, projectors of a dynamic circuit's branches) in one
        # pass over |s|^2, whatever reads the other terms
        diagonal = [i for i in live if _is_diagonal_term(terms[i])]
        for i, v in zip(diagonal, diagonal_terms_on_state(state, [terms[i] for i in diagonal])):
            values[i] = v
        self.stats.z_string_terms += sum(1 for i in diagonal if _is_z_string(terms[i]))
        others = [i for i in live if i not in set(paulis) and i not in set(diagonal)]
        paulis = [i for i in paulis if not _is_z_string(terms[i])]
        if paulis and _one_pass_pays(n, [terms[i] for i in paulis]):
            # one compiled, blocked pass over the flat state for every Pauli string
            # (sums in float64)
            from ..executors import sv_kernels

            masks = []
            for i in paulis:
                t = terms[i]
                x = sum(1 << q for q, op in zip(t.qubits, t.ops) if op in "XY")
                z = sum(1 << q for q, op in zip(t.qubits, t.ops) if op in "ZY")
                masks.append((x, z, t.ops.count("Y")))
            read = sv_kernels.pauli_expectations(state, masks, sv_kernels.n_chunks())
            for i, v in zip(paulis, read):
                values[i] = v
            paulis = []
        if paulis or others:
            state = state.astype(np.complex128, copy=False).reshape((2,) * n)
        # qubit-wise commuting groups read together where predicted cheaper
        grouped: set[int] = set()
        group_work: dict = {}
        spare = sim_work.get("spare")
        if spare is not None and spare.dtype == state.dtype and spare.size == state.size:
            group_work[("group", spare.dtype)] = spare  # paged in already by the simulation
        for members, basis, _ in _numpy_reading_plan(n, [terms[i] for i in paulis]):
            if basis is not None:
                chosen = [paulis[j] for j in members]
                for i, v in group_values(state, terms, chosen, basis, group_work).items():
                    values[i] = v
                grouped.update(chosen)
                self.stats.qwc_groups += 1
        self.stats.grouped_terms += len(grouped)
        paulis = [i for i in paulis if i not in grouped]
        conj_state = state.conj() if paulis else None
        work: dict = {}  # one set of buffers for every term of this state
        for i in paulis + others:
            t = terms[i]
            axes = [n - 1 - q for q in t.qubits]  # axis a of the state holds qubit n-1-a
            if i in paulis:
                values[i] = pauli_on_state(state, conj_state, axes, t.ops, None, work)
            else:
                values[i] = term_on_state(state, axes, t.ops)
        st = self.stats
        st.statevector_terms += len(live)
        st.flops += statevector_flops(fused) if held is None else 0.0
        st.plan_seconds += t1 - t0
        st.execute_seconds += time.perf_counter() - t1

    def _clifford(self, circuit: GateCircuit, terms: Sequence[PauliTerm]):
        """The stabilizer route's side of these terms (``None``: not a Clifford circuit, no
        stim, or no non-trivial term): :mod:`qsimdist.engine.stabilizer`."""
        from . import stabilizer

        live = [t for t in terms if t.qubits]
        if not live and self.method != "stabilizer":
            return None
        return stabilizer.choose_for_terms(circuit, live, self.method, self.executor,
                                           self.backend)

    def _stabilizer_values(self, choice, terms: Sequence[PauliTerm], route,
                           counted: bool = False) -> np.ndarray:
        """Every term's exact value off stim's tableau (``choice``: the circuit's stim
        program, :class:`~qsimdist.engine.stabilizer.StabilizerChoice`); ``counted``: the
        terms are in :attr:`stats` already."""
        from .stabilizer import term_values

        t0 = time.perf_counter()
        values = np.ones(len(terms), dtype=np.float64)
        live = [i for i, t in enumerate(terms) if t.qubits]
        term_values(choice.circuit, terms, live, values)
        st = self.stats
        if not counted:
            st.terms += len(terms)
            st.trivial_terms += len(terms) - len(live)
        st.stabilizer_terms += len(live)
        st.execute_seconds += time.perf_counter() - t0
        self.route = route.to_dict()
        return values

    def term_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm]) -> np.ndarray:
        """``Re <psi|P|psi>`` for each term, ``psi = U|0...0>`` (float64 values).

        The circuit is fused once; the method is chosen for the terms together
        (see the class docstring), and networks of the same structure reuse one
        plan.
        """
        original = circuit
        if self.method in ("auto", "statevector") and self.held_state(circuit) is not None:
            return self._held_values(circuit, terms)
        clifford = None
        if self.method in ("auto", "stabilizer"):  # a Clifford circuit: stim
            clifford = self._clifford(circuit, terms)
            if clifford is not None and clifford.route is not None:
                return self._stabilizer_values(clifford, terms, clifford.route)
        values = np.ones(len(terms), dtype=np.float64)
        live = [i for i, t in enumerate(terms) if t.qubits]
        st = self.stats
        st.terms += len(terms)
        st.trivial_terms += len(terms) - len(live)
        if not live:
            return values
        live_terms = [terms[i] for i in live]
        side: dict = {}

        def prepared() -> dict:
            """The tensor-network side, made where it is named, priced or run: the circuit
            fused, each live term's light cone, the cheapest method."""
            if not side:
                fused = fuse_into_neighbours(original) if self.fuse else original
                cones = []
                for i in live:
                    kept = fused.light_cone(terms[i].qubits).gates
                    qubits = set(terms[i].qubits)
                    for k in kept:
                        qubits.update(fused.gates[k].qubits)
                    cones.append((kept, qubits))
                    st.max_light_cone_qubits = max(st.max_light_cone_qubits, len(qubits))
                side["circuit"] = fused
                side["choice"] = self._choose(fused, live_terms, cones, self.method)
            return side

        if self.method in ("auto", "statevector"):
            from .router import route_state_reading, tn_floor

            read = _reading_seconds(original.n_qubits, live_terms)

            def tn_seconds() -> float:
                method, kept, qubits, tn_s = prepared()["choice"]
                if method != "state":
                    return tn_s
                # one all-open light-cone network: priced as amplitudes are (greedy path)
                from .router import TN_RATE, greedy_cost

                fused = prepared()["circuit"]
                net = state_network(fused, qubits, kept)
                return greedy_cost(net) / TN_RATE + tn_floor(len(fused.gates), 1)

            route = route_state_reading(
                original, what="expectation values", dtype=self.dtype, budget=self._budget,
                method=self.method, executor=self.executor, backend=self.backend,
                tn_method=lambda: prepared()["choice"][0], tn_seconds_predicted=tn_seconds,
                read_seconds=read,
                tn_floor_seconds=tn_floor(cone_gates_at_least(original, live_terms), 1))
            if clifford is not None:
                from .router import prefer_stabilizer

                route = prefer_stabilizer(route, clifford.seconds, tn_seconds)
                if route.method == "stabilizer":
                    return self._stabilizer_values(clifford, terms, route, counted=True)
            self.route = route.to_dict()
            if route.method == "statevector":
                self._statevector_values(original, terms, live, values, route)
                return values
            method, kept, qubits, tn_s = prepared()["choice"]
        else:
            method, kept, qubits, tn_s = prepared()["choice"]
            self.route = {"method": method, "reason": "requested", "executor": self.executor}
        circuit = prepared()["circuit"]
        if method == "state" and len(qubits) > self.state_max_qubits:
            raise InvalidInputError(
                f"the terms' light cones span {len(qubits)} qubits, over state_max_qubits="
                f"{self.state_max_qubits}; use method='doubled' or 'auto'"
            )
        if method == "state":
            t0 = time.perf_counter()
            local = {q: j for j, q in enumerate(sorted(qubits))}
            key = ("state", len(local),
                   tuple(tuple(local[q] for q in circuit.gates[k].qubits) for k in kept))
            state = self._contract(key, state_network(circuit, qubits, kept), t0)
            state = state.reshape((2,) * len(local)).astype(np.complex128, copy=False)
            conj_state = state.conj()
            probabilities = None
            if sum(1 for i in live if set(terms[i].ops) == {"Z"}) > 1:
                probabilities = (state * conj_state).real
            work: dict = {}
            for i in live:
                t = terms[i]
                axes = [local[q] for q in t.qubits]
                if set(t.ops) <= set(_PAULI_ACTION):
                    values[i] = pauli_on_state(state, conj_state, axes, t.ops, probabilities,
                                               work)
                else:
                    values[i] = term_on_state(state, axes, t.ops)
            st.state_terms += len(live)
            return values
        self._doubled_values(original, terms, live, values)
        return values

    def _doubled_values(self, circuit: GateCircuit, terms: Sequence[PauliTerm],
                        live: list[int], values: np.ndarray) -> None:
        """Each live term on its own doubled network (:mod:`qsimdist.engine.doubled`):
        diagonal gates kept diagonal, the commutation-aware light cone, quimb's
        simplification; networks of one structure share a plan."""
        from .cache import structure_key
        from .doubled import DoubledCircuit

        prepared = DoubledCircuit.of(circuit, fuse=self.fuse)
        st = self.stats
        for i in live:
            t0 = time.perf_counter()
            term = terms[i]
            net = prepared.simplified(term.qubits, term.ops, SINGLE_QUBIT_OPERATORS,
                                      limit=self._limit, dtype=self.dtype)
            key = ("doubled", structure_key(net))
            values[i] = complex(self._contract(key, net, t0, share=True).reshape(-1)[0]).real
        st.doubled_terms += len(live)


def cone_gates_at_least(circuit: GateCircuit, terms: Sequence[PauliTerm]) -> int:
    """The router's floor for the tensor-network methods of ``terms``: the multi-qubit
    gates in the plain light cone of the term on the most qubits (every method contracts
    at least one term's cone, and fusing one-qubit gates into neighbours keeps every
    multi-qubit gate; the doubled method's diagonal-aware cone can be smaller, but where
    the statevector costs less than this floor it is cheap either way)."""
    widest = max(terms, key=lambda t: len(t.qubits))
    kept = circuit.light_cone(widest.qubits).gates
    return max(sum(1 for k in kept if len(circuit.gates[k].qubits) > 1), 1)


def _circuit(source) -> GateCircuit:
    obj = load(source)
    if isinstance(obj, Network):
        raise InvalidInputError(
            "expectation values need a circuit, but this input is a tensor network"
        )
    return obj


def expectation_values(
    circuit,
    paulis: str | Sequence[str],
    *,
    dtype: str = "complex128",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    path_options: PathOptions | dict | None = None,
    executor: str = "local",
    profile=None,
    comm=None,
    engine: ExpectationEngine | None = None,
) -> np.ndarray:
    """``<psi|P|psi>`` for each Pauli label, ``psi`` the circuit's state on ``|0...0>``.

    Args:
        circuit: anything :func:`qsimdist.frontends.load` accepts that is a
            circuit (Qiskit ``QuantumCircuit`` with bound parameters, OpenQASM,
            .qsim, quimb ``Circuit``, :class:`GateCircuit`). Final measurements
            are ignored; a mid-circuit measurement is refused.
        paulis: one label or a list of labels in Qiskit order (rightmost
            character = qubit 0), characters ``I X Y Z`` (projectors ``0 1 + - r l``
            also work).
        dtype: ``complex128`` (default) or ``complex64``.
        memory_limit: peak bytes per contraction (``"8GiB"``; ``None``: default).
        backend: ``numpy`` or ``cupy``.
        path_options: path search options.
        executor: ``local`` or ``mpi`` (see :class:`ExpectationEngine`).
        profile: hardware profile for ``executor="mpi"``.
        comm: MPI communicator for ``executor="mpi"``.
        engine: an engine to use (and whose plans to reuse) instead of a new one;
            the keywords above are then ignored.

    Returns:
        A float64 array with one value per label (the real part; a Hermitian
        term's value is real).
    """
    labels = [paulis] if isinstance(paulis, str) else list(paulis)
    gc = _circuit(circuit)
    terms = [parse_term(label, gc.n_qubits) for label in labels]
    if engine is None:
        engine = ExpectationEngine(dtype=dtype, memory_limit=memory_limit, backend=backend,
                                   path_options=path_options, executor=executor,
                                   profile=profile, comm=comm)
    return engine.term_values(gc, terms)


__all__ = [
    "METHODS",
    "SINGLE_QUBIT_OPERATORS",
    "ExpectationEngine",
    "ExpectationStats",
    "PauliTerm",
    "expectation_network",
    "expectation_values",
    "parse_term",
    "pauli_on_state",
    "state_network",
    "term_on_state",
]
