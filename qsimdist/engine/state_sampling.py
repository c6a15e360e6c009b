"""Shots drawn from a state: the statevector route's sampler, and drawing rows of bits from
a (marginal) distribution, which the tensor-network methods share.

Every uniform number comes from the caller (drawn up front from its generator),
so the same seed gives the same bitstrings on every route that computes the
same distribution.
"""

from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..frontends import GateCircuit


def draw_from_distribution(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices drawn from the unnormalised, rounding-noisy distribution ``p`` by uniforms ``u``."""
    p = np.clip(np.asarray(p, dtype=np.float64).real, 0.0, None).ravel()
    cdf = np.cumsum(p)
    total = cdf[-1]
    if not np.isfinite(total) or total <= 0.0:
        raise PlanError(f"the marginal distribution sums to {total}; cannot sample from it")
    idx = np.searchsorted(cdf, u * total, side="right")
    return np.minimum(idx, p.size - 1)


def index_bits(idx: np.ndarray, width: int) -> np.ndarray:
    """Rows of ``width`` bits, the first column the most significant bit of ``idx``."""
    shifts = np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((idx[:, None] >> shifts[None, :]) & 1).astype(np.uint8)


def draw_rows(p: np.ndarray, u: np.ndarray, m: int) -> tuple[np.ndarray, dict]:
    """Rows of ``m`` bits drawn from ``p`` by ``u``, and each distinct row's probability."""
    idx = draw_from_distribution(p, u)
    total = float(np.clip(p, 0, None).sum())
    drawn = np.unique(idx)
    probs = dict(zip(map(tuple, index_bits(drawn, m).tolist()),
                     (np.clip(p[drawn], 0, None) / total).tolist()))
    return index_bits(idx, m), probs


#: from this many qubits the statevector sampler draws from the state with the compiled
#: kernel even where this process has not loaded it yet (below, numpy's marginal and
#: cumulative sum cost less than numba's start-up)
DIRECT_DRAW_MIN_QUBITS = 24


def sample_statevector(circuit: GateCircuit, measured: list[int], dtype: str, route,
                        u: np.ndarray, cache=None) -> tuple[np.ndarray, dict, float]:
    """Rows of the ``measured`` bits drawn by ``u`` from the final state, each distinct
    row's probability, and the statevector's FLOPs.

    Where every qubit is measured, indices are drawn from ``|state|^2`` directly by the
    compiled two-pass kernel (:func:`qsimdist.executors.sv_kernels.draw_indices`: no
    probability array, no cumulative sum); otherwise from the marginal of ``measured``.
    ``cache``: the router's :class:`~qsimdist.engine.router.CircuitCache` (its fusion
    blocks are run).
    """
    from ..frontends.fusion import statevector_flops
    from .statevector_run import final_state

    state, fused, _ = final_state(circuit, dtype, route, cache=cache)
    rows, probs = rows_from_state(state, measured, u)
    return rows, probs, statevector_flops(fused)


def rows_from_state(state: np.ndarray, measured: list[int], u: np.ndarray
                    ) -> tuple[np.ndarray, dict]:
    """Rows of the ``measured`` bits drawn by ``u`` from a flat state (index bit ``q``:
    qubit ``q``), and each distinct row's probability: the statevector route's draw
    (:func:`sample_statevector`), also that of the sampler's batched pass."""
    from ..executors import compiled_kernel_runs

    n = int(state.size).bit_length() - 1
    if len(set(measured)) == n:  # every qubit: draw state indices, no marginal
        from ..executors import draw_indices, kernel_chunks, kernels_warm

        if compiled_kernel_runs(n, 0) and (kernels_warm() or n >= DIRECT_DRAW_MIN_QUBITS):
            idx, total = draw_indices(state, u, kernel_chunks())
            if not np.isfinite(total) or total <= 0.0:
                raise PlanError(f"the state's norm is {total}; cannot sample from it")
        else:
            p = np.square(state.real, dtype=np.float64)
            p += np.square(state.imag, dtype=np.float64)
            idx = draw_from_distribution(p, u)
            total = float(p.sum())
            del p
        shifts = np.array(measured, dtype=np.int64)  # column j is qubit measured[j]
        rows = ((idx[:, None] >> shifts[None, :]) & 1).astype(np.uint8)
        drawn, first = np.unique(idx, return_index=True)
        p = np.abs(state[drawn].astype(np.complex128)) ** 2 / total
        probs = dict(zip(map(tuple, rows[first].tolist()), p.tolist()))
        return rows, probs
    p = marginal_of_state(state, measured)
    del state
    return draw_rows(p, u, len(measured))


def marginal_of_state(state: np.ndarray, measured: list[int]) -> np.ndarray:
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


__all__ = [
    "DIRECT_DRAW_MIN_QUBITS",
    "draw_from_distribution",
    "draw_rows",
    "index_bits",
    "rows_from_state",
    "sample_statevector",
]
