"""Micro-benchmark of one step shape on the three local kernels, side by side.

    python -m qsimdist.bench.kernels

A gate-sized operand ``x`` contracted with a 2^26-element tensor ``y`` whose
output interleaves their modes (shapes taken from the circuit_n53_m10 plan):
the compiled small-GEMM loop, one ``numpy.matmul`` with broadcasting (BLAS
once per outer index), and GEMM followed by a permutation into place.
"""

from __future__ import annotations

import json
import time

import numpy as np

CASES = [
    ((1, 2, 1, 2, 4), (8, 1, 1048576, 2, 4), (8, 2, 1048576, 2, 2)),
    ((1, 4, 4), (1048576, 16, 4), (1048576, 4, 16)),
]


def _best(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> list[dict]:
    from qsimdist.executors.kernels import small_gemm

    rng = np.random.default_rng(0)
    rows = []
    for xv, yv, ov in CASES:
        x = rng.standard_normal(xv).astype(np.complex64)
        y = rng.standard_normal(yv).astype(np.complex64)
        out = np.empty(ov, np.complex64)
        small_gemm(x, y, out, xv, yv, ov)  # compile outside the timing
        loop = _best(lambda: small_gemm(x, y, out, xv, yv, ov))
        blas = _best(lambda: np.matmul(x, np.swapaxes(y, -1, -2), out=out), repeats=1)
        # GEMM over the flattened operands, then permute [y-rows | x-rows] into place
        k = xv[-1]
        x2 = x.reshape(-1, k)
        y2 = y.reshape(-1, k)

        n_outer = len(ov) - 2
        y_axes = [d for d in range(n_outer) if yv[d] != 1]  # these cases have no batch axes
        x_axes = [d for d in range(n_outer) if yv[d] == 1]
        dims = [yv[d] for d in y_axes] + [ov[-1]] + [xv[d] for d in x_axes] + [ov[-2]]
        src = y_axes + ["n"] + x_axes + ["m"]
        axes = [src.index(d) for d in list(range(n_outer)) + ["m", "n"]]

        def gemm_permute():
            tmp = y2 @ x2.T  # (y rows, x rows): one BLAS call
            out[...] = tmp.reshape(dims).transpose(axes)

        perm = _best(gemm_permute)
        ref = np.matmul(x, np.swapaxes(y, -1, -2))
        gemm_permute()
        assert np.allclose(out, ref, rtol=1e-4, atol=1e-4)
        rows.append({"x": xv, "y": yv, "out": ov, "loop_s": loop, "blas_broadcast_s": blas,
                     "gemm_permute_s": perm})
        print(json.dumps(rows[-1]))
    return rows


if __name__ == "__main__":
    main()
