"""Small facts about the dense matrices of gates and tensors, shared by every layer
above: fusion (``frontends``), the statevector kernels (``executors``) and the doubled
route (``engine``) ask the same question the same way."""

from __future__ import annotations

import numpy as np

#: dimension -> mask of the entries off the diagonal (for a tolerance above zero)
_OFF_DIAGONAL: dict[int, np.ndarray] = {}


def is_diagonal(matrix: np.ndarray, atol: float = 0.0) -> bool:
    """Whether the square ``matrix`` has no entry off its diagonal larger than ``atol`` in
    magnitude (``atol=0``, the default: no nonzero entry off it, exactly; a NaN off the
    diagonal is never within any tolerance)."""
    m = np.asarray(matrix)
    if not atol:
        # every nonzero entry on the diagonal (NaN counts as nonzero)
        return int(np.count_nonzero(m)) == int(np.count_nonzero(np.diagonal(m)))
    mask = _OFF_DIAGONAL.get(m.shape[0])
    if mask is None:
        mask = _OFF_DIAGONAL[m.shape[0]] = ~np.eye(m.shape[0], dtype=bool)
    off = m[mask]
    return not off.size or float(np.max(np.abs(off))) <= atol
