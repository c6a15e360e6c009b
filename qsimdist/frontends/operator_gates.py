"""Gates applied as their operator: Qiskit's ``PauliEvolutionGate`` as ``e^{-iHt}``.

Qiskit's ``Statevector`` and ``StatevectorEstimator`` apply every gate that states
its operator (``to_matrix``) as that operator, whatever its definition says. For
nearly every gate the two agree. A ``PauliEvolutionGate`` is the exception that
matters: its definition is a product formula (Lie-Trotter, Suzuki-Trotter, QDrift),
an *approximation* of ``e^{-iHt}`` whenever the terms of ``H`` do not commute. So
the conversion (:mod:`qsimdist.frontends.qiskit_circuit`) applies it as:

- the dense operator ``e^{-iHt}`` (:func:`evolution_matrix`) where it acts on at
  most :data:`OPERATOR_GATE_QUBITS` qubits;
- its definition where that definition *is* ``e^{-iHt}`` exactly
  (:func:`definition_is_operator`: a Lie-Trotter or Suzuki-Trotter formula of
  pairwise commuting terms, the QAOA cost layer's case, or the
  ``MatrixExponential`` synthesis), at any width: the same operator, and its
  rotations keep the circuit's structure (light cones, fusion, the stabilizer
  route) where a dense matrix would erase it;
- its definition, *reported*, where it is wider than the bound and the definition
  is not exact: every result of the Qiskit primitives lists such gates under
  ``"gates_by_definition"`` (:func:`~qsimdist.frontends.qiskit_circuit.recording_definitions`).

``HamiltonianGate`` and ``UnitaryGate`` state their matrices (``__array__``) and are
applied as them up to :data:`~qsimdist.frontends.circuit.MAX_GATE_QUBITS` qubits
(the same number); their definitions are exact syntheses of those matrices.

``e^{-iHt}`` is computed from the eigendecomposition of the dense Hermitian ``H``
(real symmetric, 4-8x cheaper, where no term has an odd number of ``Y``), kept per
operator, so a sweep over the time pays one matrix product per value, and the
operators themselves are kept per ``(H, t)`` (a Trotter circuit repeats one step);
both in one least-recently-used cache of :data:`OPERATOR_CACHE_BYTES`. Qiskit's own
``to_matrix`` (a sparse ``expm``) takes 50 s for a 10-qubit transverse-field Ising
step and 18 minutes for 12 qubits on a 2-core machine; this takes 0.3 s and
about 10 s.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np

#: a ``PauliEvolutionGate`` on at most this many qubits is applied as its dense operator
#: ``e^{-iHt}`` (``4^k`` entries: 268 MB at 12 qubits, about 10 s to build for a real
#: ``H`` and a minute for a complex one on two cores); a wider one follows its definition
OPERATOR_GATE_QUBITS = 12
#: bytes of eigendecompositions and operators kept between conversions
OPERATOR_CACHE_BYTES = 1 << 30
#: pairwise commutation is checked where ``terms^2 * qubits`` is at most this (beyond it a
#: gate is taken as non-commuting: applied as its operator, or reported if wider)
COMMUTATION_CHECK_LIMIT = 1 << 31
#: coefficients whose imaginary part is within this of zero (relative) are real
_HERMITIAN_TOLERANCE = 1e-12


def is_pauli_evolution(op) -> bool:
    """Whether ``op`` is Qiskit's ``PauliEvolutionGate`` (or a subclass)."""
    if getattr(op, "name", None) != "PauliEvolution":
        return False
    from qiskit.circuit.library import PauliEvolutionGate

    return isinstance(op, PauliEvolutionGate)


def summed_operator(op):
    """The gate's ``H`` as one ``SparsePauliOp`` (a list of operators summed, a
    ``SparseObservable`` or ``Pauli`` converted), or ``None`` where it cannot be
    (unbound coefficients, an unknown operator type)."""
    from qiskit.quantum_info import Pauli, SparseObservable, SparsePauliOp

    parts = op.operator if isinstance(op.operator, list) else [op.operator]
    out = []
    for part in parts:
        try:
            if isinstance(part, SparseObservable):
                part = SparsePauliOp.from_sparse_observable(part)
            elif isinstance(part, Pauli):
                part = SparsePauliOp(part)
            if not isinstance(part, SparsePauliOp):
                return None
            coeffs = np.asarray(part.coeffs, dtype=complex)  # fails on unbound parameters
        except (TypeError, ValueError):
            return None
        out.append(SparsePauliOp(part.paulis, coeffs))
    if not out:
        return None
    return out[0] if len(out) == 1 else SparsePauliOp.sum(out)


def evolution_time(op) -> float | None:
    """The gate's time as a float, or ``None`` where it is not bound."""
    try:
        value = float(op.params[0])
    except (TypeError, ValueError, IndexError):
        return None
    return value if math.isfinite(value) else None


def terms_commute(h) -> bool:
    """Whether every pair of ``h``'s Pauli terms commutes (``False`` also where there are
    too many to check, :data:`COMMUTATION_CHECK_LIMIT`)."""
    x = np.asarray(h.paulis.x, dtype=bool)
    z = np.asarray(h.paulis.z, dtype=bool)
    keep = (x | z).any(axis=1)  # the identity commutes with everything
    x, z = x[keep], z[keep]
    m, n = x.shape
    if m <= 1 or not x.any() or not z.any():
        return True  # all diagonal (Z and I) or all X and I
    if m * m * n > COMMUTATION_CHECK_LIMIT:
        return False
    xf, zf = x.astype(np.float64), z.astype(np.float64)
    # P_i and P_j anticommute where x_i.z_j + z_i.x_j is odd (exact in float64: n < 2^52)
    form = xf @ zf.T + zf @ xf.T
    return not np.any(np.remainder(np.rint(form), 2.0))


def definition_is_operator(op) -> bool:
    """Whether a ``PauliEvolutionGate``'s definition is ``e^{-iHt}`` exactly: Qiskit's
    ``MatrixExponential`` synthesis, or a ``LieTrotter``/``SuzukiTrotter`` formula with
    its own atomic evolution of pairwise commuting terms (then every factor commutes and
    the product is the exponential of the sum, whatever the order or the repetitions).
    ``QDrift`` samples its terms at random, and a custom atomic evolution may be anything:
    neither is taken as exact."""
    from qiskit.synthesis import LieTrotter, MatrixExponential, SuzukiTrotter

    synthesis = getattr(op, "synthesis", None)
    if type(synthesis) is MatrixExponential:
        return True
    if type(synthesis) not in (LieTrotter, SuzukiTrotter):
        return False
    if getattr(synthesis, "atomic_evolution", None) is not None:
        return False
    h = summed_operator(op)
    return h is not None and terms_commute(h)


class _OperatorCache:
    """Eigendecompositions by operator and exponentials by (operator, time), least
    recently used dropped past ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple, object] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: tuple):
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
            return found

    def put(self, key: tuple, value, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return
        with self.lock:
            if key in self.entries:
                return
            self.entries[key] = (value, nbytes)
            self.bytes += nbytes
            while self.bytes > self.max_bytes:
                _, (_, old) = self.entries.popitem(last=False)
                self.bytes -= old

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.bytes = 0


#: the process's cache of eigendecompositions and operators (see :func:`evolution_matrix`)
OPERATORS = _OperatorCache(OPERATOR_CACHE_BYTES)


def _operator_key(h) -> tuple:
    x = np.packbits(np.asarray(h.paulis.x, dtype=bool), axis=1)
    z = np.packbits(np.asarray(h.paulis.z, dtype=bool), axis=1)
    phase = np.asarray(h.paulis.phase)
    coeffs = np.ascontiguousarray(h.coeffs, dtype=complex)
    return (h.num_qubits, x.tobytes(), z.tobytes(), phase.tobytes(), coeffs.tobytes())


def _eigen(h, key: tuple):
    """``(eigenvalues, eigenvectors)`` of the Hermitian ``h`` (real eigenvectors where
    ``h``'s matrix is real), or ``None`` where ``h`` is not Hermitian."""
    found = OPERATORS.get(("eigh", key))
    if found is not None:
        return found[0]
    coeffs = np.asarray(h.coeffs, dtype=complex)
    scale = float(np.max(np.abs(coeffs), initial=0.0))
    matrix = h.to_matrix()
    if np.abs(matrix - matrix.conj().T).max(initial=0.0) > _HERMITIAN_TOLERANCE * max(
            scale, 1.0) * len(coeffs):
        return None
    if not matrix.imag.any():
        matrix = matrix.real
    values, vectors = np.linalg.eigh(matrix)
    del matrix
    OPERATORS.put(("eigh", key), (values, vectors), values.nbytes + vectors.nbytes)
    return values, vectors


def evolution_matrix(op) -> np.ndarray | None:
    """``e^{-iHt}`` of a bound ``PauliEvolutionGate``, little-endian over its qubits as
    Qiskit's ``to_matrix``, from ``H``'s eigendecomposition (kept per ``H``; each result
    is kept per ``(H, t)``); ``None`` where ``H`` or ``t`` is not numeric, or ``H`` not
    Hermitian (Qiskit refuses complex coefficients when the gate is made).
    """
    h = summed_operator(op)
    t = evolution_time(op)
    if h is None or t is None:
        return None
    key = _operator_key(h)
    found = OPERATORS.get(("expm", key, t))
    if found is not None:
        return found[0]
    eigen = _eigen(h, key)
    if eigen is None:
        return None
    values, vectors = eigen
    phases = np.exp(-1j * t * values)
    if np.isrealobj(vectors):
        matrix = (vectors * phases.real) @ vectors.T + 1j * ((vectors * phases.imag) @ vectors.T)
    else:
        matrix = (vectors * phases) @ vectors.conj().T
    matrix.flags.writeable = False  # shared by every conversion that meets (H, t)
    OPERATORS.put(("expm", key, t), matrix, matrix.nbytes)
    return matrix


__all__ = [
    "COMMUTATION_CHECK_LIMIT",
    "OPERATORS",
    "OPERATOR_CACHE_BYTES",
    "OPERATOR_GATE_QUBITS",
    "definition_is_operator",
    "evolution_matrix",
    "evolution_time",
    "is_pauli_evolution",
    "summed_operator",
    "terms_commute",
]
