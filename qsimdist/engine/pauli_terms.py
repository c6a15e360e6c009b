"""Pauli terms: labels parsed into :class:`PauliTerm`, qubit-wise commuting groups, and
the priced plan for reading terms off a state.

Term labels follow Qiskit's order: the rightmost character is qubit 0.
Besides ``I X Y Z``, the projectors of Qiskit's ``SparseObservable``
(``0 1 + - r l``) are accepted, since every one-qubit operator is just
another 2x2 tensor here.

The reading plan (:func:`numpy_reading_plan`) and the predicted seconds of
reading terms off a full state (:func:`reading_seconds`, :func:`one_pass_pays`)
are what the router and :class:`~qsimdist.engine.expectation.ExpectationEngine`
price the statevector route's reading with; the readers themselves are in
:mod:`qsimdist.engine.term_readers`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError, shorten
from ..hardware import costs

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


#: for each Pauli: (whether it flips the bit, its phase on the input bit 0 and 1), so that
#: ``P|x> = phase[x] |x ^ flip>``
PAULI_ACTION = {
    "X": (True, np.array([1.0, 1.0], dtype=complex)),
    "Y": (True, np.array([1j, -1j], dtype=complex)),
    "Z": (False, np.array([1.0, -1.0], dtype=complex)),
}


def _pauli_reading_seconds(n: int, terms: Sequence[PauliTerm]) -> tuple[float, float]:
    """Predicted seconds to read Pauli ``terms`` off a ``2^n`` state: ``(numpy's
    pauli_on_state, the compiled one-pass kernel with this process's numba start-up)``."""
    from ..executors import compiled_kernel_runs

    size = 2.0**n
    diagonal = [t for t in terms if is_z_string(t)]
    terms = [t for t in terms if not is_z_string(t)]
    diagonal_s = costs.Z_STRINGS_SECONDS_PER_ELEMENT * size if diagonal else 0.0
    numpy_s = sum(seconds for _, _, seconds in numpy_reading_plan(n, terms)) + diagonal_s
    if not terms:
        return numpy_s, numpy_s
    if not compiled_kernel_runs(n, 0):
        return numpy_s, math.inf
    from ..executors import startup_seconds

    return numpy_s, (costs.PAULI_PASS_SECONDS_PER_ELEMENT * size * len(terms) + diagonal_s
                     + startup_seconds())


def is_z_string(term: PauliTerm) -> bool:
    return bool(term.ops) and set(term.ops) == {"Z"}


def numpy_reading_plan(n: int, terms: Sequence[PauliTerm]
                        ) -> list[tuple[list[int], dict[int, str] | None, float]]:
    """How numpy reads Pauli ``terms`` off a ``2^n`` state: ``[(indices, basis, seconds)]``,
    a qubit-wise commuting group read together (``basis`` given) where that is predicted
    cheaper than its terms one by one (``basis`` None: :func:`pauli_on_state` each).

    Routing, the reader's choice and the reading each ask for it: the search is
    made once per ``(n, terms)`` and copies handed out."""
    prices = (costs.GROUP_COPY_SECONDS_PER_ELEMENT, costs.GROUP_ROTATION_SECONDS_PER_ELEMENT,
              costs.GROUP_MARGINAL_SECONDS_PER_ELEMENT, costs.GROUP_SIGNS_SECONDS_PER_ELEMENT,
              costs.GROUP_TERM_SECONDS_PER_ELEMENT, costs.TERM_SECONDS_PER_ELEMENT,
              GROUPING_TRIES, costs.GROUPING_SEARCH_SECONDS)  # in the key: tests change them
    plan = _cached_reading_plan(n, tuple(terms), prices)
    return [(list(members), None if basis is None else dict(basis), seconds)
            for members, basis, seconds in plan]


@functools.lru_cache(maxsize=64)
def _cached_reading_plan(n: int, terms: tuple[PauliTerm, ...], prices: tuple
                         ) -> list[tuple[list[int], dict[int, str] | None, float]]:
    size = 2.0**n

    def priced(groups):
        plan = []
        for members, basis in groups:
            alone = sum(costs.TERM_SECONDS_PER_ELEMENT * size * (terms[i].weight + 1)
                        for i in members)
            together = _group_seconds(n, basis, len(members))
            if together < alone:
                plan.append((members, basis, together))
            else:
                plan.append((members, None, alone))
        return plan, sum(seconds for *_, seconds in plan)

    best, best_s = priced(qwc_groups(terms))
    if best_s >= costs.GROUPING_SEARCH_SECONDS and len(terms) > 2:
        rng = np.random.default_rng(len(terms))
        for _ in range(GROUPING_TRIES):
            plan, seconds = priced(qwc_groups(terms, rng.permutation(len(terms)).tolist()))
            if seconds < best_s:
                best, best_s = plan, seconds
    return best


def one_pass_pays(n: int, terms: Sequence[PauliTerm]) -> bool:
    """Whether the compiled one-pass reader is predicted faster for these Pauli terms."""
    numpy_s, compiled_s = _pauli_reading_seconds(n, terms)
    return compiled_s < numpy_s


def reading_seconds(n: int, terms: Sequence[PauliTerm]) -> float:
    """Predicted seconds to read every term off the state (the faster Pauli reader)."""
    paulis = [t for t in terms if set(t.ops) <= set(PAULI_ACTION)]
    others = sum(costs.TERM_SECONDS_PER_ELEMENT * 2.0**n * (t.weight + 1) for t in terms
                 if not set(t.ops) <= set(PAULI_ACTION))
    return min(_pauli_reading_seconds(n, paulis)) + others


# ------------------------------------------------------------- qubit-wise commuting groups
#: rotations applied per GEMM when a group's basis is turned to Z (2^3 = 8 multiply-adds
#: per element: memory-bound, like a copy); see :func:`rotation_chunks`
_ROTATION_CHUNK = 3


def rotation_chunks(r: int) -> list[int]:
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
#: when the reading is predicted to take at least
#: :data:`~qsimdist.hardware.costs.GROUPING_SEARCH_SECONDS`; the cheapest predicted wins
#: (rc22's 40 terms: 6 groups, 320 ms predicted, against 5 and 265 ms for the best of
#: 200 shuffles)
GROUPING_TRIES = 48


def _group_seconds(n: int, basis: dict[int, str], members: int) -> float:
    """Predicted seconds of the grouped reader (:func:`group_values`) for one group."""
    r = sum(1 for op in basis.values() if op != "Z")
    chunks = len(rotation_chunks(r))
    u = len(basis)
    return (2.0**n * (costs.GROUP_COPY_SECONDS_PER_ELEMENT
                      + chunks * costs.GROUP_ROTATION_SECONDS_PER_ELEMENT
                      + costs.GROUP_MARGINAL_SECONDS_PER_ELEMENT)
            + 2.0**u * (costs.GROUP_SIGNS_SECONDS_PER_ELEMENT
                        + members * costs.GROUP_TERM_SECONDS_PER_ELEMENT))


__all__ = [
    "GROUPING_TRIES",
    "PAULI_ACTION",
    "SINGLE_QUBIT_OPERATORS",
    "PauliTerm",
    "is_z_string",
    "numpy_reading_plan",
    "one_pass_pays",
    "parse_term",
    "qwc_groups",
    "reading_seconds",
    "rotation_chunks",
]
