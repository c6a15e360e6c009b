"""The time-ordered (Schrödinger) path: apply gates to the full ``2^n`` state in circuit order.

For narrow circuits (the state fits the memory limit) this is the cheapest
exact route whatever the depth: each (fused) gate is one small GEMM over the
state, a diagonal gate one element-wise product, and the state holds every
amplitude at once.

Layout: one flat vector in Qiskit's order (bit ``q`` of the index is qubit
``q``). A dense ``k``-qubit gate is one ``tensordot`` over the state split
around the gate's bits (a BLAS GEMM of the ``2^k x 2^k`` matrix with a
``2^k x 2^(n-k)`` view) and one copy back into place; a diagonal gate is an
in-place product with a broadcast view of its diagonal. This is what
:func:`qsimdist.frontends.fusion.gate_seconds` prices. Compiled gather/scatter
loops (numba, the qsim/Aer kernel shape) were measured against it and
dropped: for fused gates (``k`` = 3..5) they were 1.5-3x slower at 12-23
qubits, within 15% at ``k`` <= 2, faster only below 12 qubits by about 10 µs
per gate, and importing numba (and compiling, on a fresh cache) cost 0.4-2 s
per process (BENCHMARKS.md section 16).

Gates are taken by duck typing (anything with ``.matrix``, big-endian over
``.qubits``), so this module needs numpy only (layer 3 imports no frontend).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..errors import InvalidInputError

#: bytes the run holds beside the state, in units of the state (tensordot's copy and output)
WORKSPACE_STATES = 3
def statevector_bytes(n_qubits: int, dtype: str) -> int:
    """Peak bytes of :func:`simulate` for ``n_qubits`` (the state and its workspace)."""
    return WORKSPACE_STATES * (1 << n_qubits) * np.dtype(dtype).itemsize


def _is_diagonal(matrix: np.ndarray) -> bool:
    return not np.any(matrix[~np.eye(matrix.shape[0], dtype=bool)])


def _apply_dense(state: np.ndarray, mat: np.ndarray, qubits: tuple[int, ...], n: int
                 ) -> np.ndarray:
    """The state split around the gate's bits, one tensordot, one copy back into order."""
    k = len(qubits)
    desc = sorted(qubits, reverse=True)  # C-order axis of (2,)*n holds qubit n-1-axis
    dims, prev = [], n
    for q in desc:
        dims += [1 << (prev - 1 - q), 2]
        prev = q
    dims.append(1 << prev)
    gate_axes = [1 + 2 * desc.index(q) for q in qubits]
    out = np.tensordot(mat.reshape((2,) * (2 * k)), state.reshape(dims),
                       axes=(list(range(k, 2 * k)), gate_axes))
    rest = [a for a in range(len(dims)) if a not in gate_axes]
    perm = [0] * len(dims)
    for j, a in enumerate(gate_axes):
        perm[a] = j
    for j, a in enumerate(rest):
        perm[a] = k + j
    return np.ascontiguousarray(out.transpose(perm)).reshape(-1)


def _apply_diagonal(state: np.ndarray, diag: np.ndarray, qubits: tuple[int, ...], n: int
                    ) -> np.ndarray:
    """Multiply by a broadcast view of the diagonal, in place."""
    k = len(qubits)
    axes = [n - 1 - q for q in qubits]  # C-order axis of (2,)*n holding each qubit
    order = sorted(range(k), key=lambda j: axes[j])
    shape = [1] * n
    for j in order:
        shape[axes[j]] = 2
    view = state.reshape((2,) * n) if n else state
    view *= np.transpose(diag.reshape((2,) * k), order).reshape(shape)
    return state


def simulate(n_qubits: int, gates: Iterable, global_phase: float = 0.0,
             dtype: str = "complex128", diagonal: Sequence[bool] | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> np.ndarray:
    """The state ``U|0...0>`` as a flat vector in Qiskit's order (bit ``q`` of the index is
    qubit ``q``), global phase included.

    Args:
        n_qubits: number of qubits.
        gates: objects with ``.matrix`` (``2^k x 2^k``, big-endian over
            ``.qubits``) and ``.qubits``.
        global_phase: radians, multiplied into the state.
        dtype: ``complex64`` or ``complex128``.
        diagonal: per gate, whether it is diagonal (``None``: checked here).
        progress: ``progress("statevector", done, total)`` every 1024 gates.
    """
    gates = list(gates)
    if n_qubits < 0:
        raise InvalidInputError(f"n_qubits must be >= 0, got {n_qubits}")
    dt = np.dtype(dtype)
    state = np.zeros(1 << n_qubits, dtype=dt)
    state[0] = 1.0
    cast: dict[int, tuple] = {}
    total = len(gates)
    for done, g in enumerate(gates, start=1):
        qubits = tuple(int(q) for q in g.qubits)
        entry = cast.get(id(g.matrix))
        if entry is None:
            mat = np.ascontiguousarray(g.matrix, dtype=dt)
            entry = cast[id(g.matrix)] = (mat, np.ascontiguousarray(np.diagonal(mat)))
        mat, diag_entries = entry
        diag = diagonal[done - 1] if diagonal is not None else _is_diagonal(mat)
        if diag:
            state = _apply_diagonal(state, diag_entries, qubits, n_qubits)
        else:
            state = _apply_dense(state, mat, qubits, n_qubits)
        if progress is not None and done % 1024 == 0:
            progress("statevector", done, total)
    if global_phase:
        state *= dt.type(np.exp(1j * global_phase))
    return state


def pattern_amplitudes(state: np.ndarray, per_qubit: Sequence[str],
                       open_order: Sequence[int]) -> np.ndarray:
    """Amplitudes of one pattern from a flat state in Qiskit's order (see :func:`simulate`).

    ``per_qubit[q]`` is ``'0'``, ``'1'`` or ``'*'``; ``open_order`` lists the
    open qubits, the first being the most significant bit of the flat result.
    """
    n = len(per_qubit)
    tensor = state.reshape((2,) * n)  # axis a holds qubit n-1-a
    index = tuple(slice(None) if per_qubit[n - 1 - a] == "*" else int(per_qubit[n - 1 - a])
                  for a in range(n))
    sub = tensor[index]
    open_desc = [q for q in range(n - 1, -1, -1) if per_qubit[q] == "*"]
    perm = [open_desc.index(q) for q in open_order]
    return np.ascontiguousarray(np.transpose(sub, perm)).reshape(-1)


def bitstring_amplitudes(state: np.ndarray, bitstrings: Sequence[str], order: str) -> np.ndarray:
    """Amplitudes of many star-free bitstrings (``qiskit`` or ``natural`` order), vectorised."""
    n = int(state.size).bit_length() - 1
    if not bitstrings:
        return np.zeros(0, dtype=state.dtype)
    if n == 0:
        return state[np.zeros(len(bitstrings), dtype=np.int64)]
    raw = np.frombuffer("".join(bitstrings).encode("ascii"), dtype=np.uint8).reshape(-1, n)
    bits = (raw == ord("1")).astype(np.int64)
    if order == "qiskit":  # character j is qubit n-1-j: the index is the binary number
        weights = np.array([1 << (n - 1 - j) for j in range(n)], dtype=np.int64)
    else:  # character j is qubit j
        weights = np.array([1 << j for j in range(n)], dtype=np.int64)
    return state[bits @ weights]
