"""Compiled CPU kernel for broadcast GEMM steps whose inner GEMM is small.

A lifetime-ordered step writes its output in place through views
``x (outer..., m, k)``, ``y (outer..., n, k)`` and ``out (outer..., m, n)``,
where an operand has extent 1 on outer axes it lacks. When ``m * n * k`` is
small (a gate-like tensor applied to a large one), one BLAS call per outer
index costs far more than the arithmetic, so this kernel runs the whole
step in one parallel loop: each outer index decodes its operand offsets
from the strides and computes its small ``m x n`` block directly into the
output. No operand or output is copied or permuted.
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba ships with quimb; without it the executor falls back to numpy.matmul
    import numba

    _HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    _HAVE_NUMBA = False

#: inner GEMMs up to this many multiply-adds run in the compiled loop
SMALL_INNER = 4096
#: extents of n and k that get a specialised (unrolled) kernel, compiled once and cached
UNROLLED_N = (1, 2, 4, 8, 16)
UNROLLED_K = (2, 4, 8)


def available() -> bool:
    return _HAVE_NUMBA


if _HAVE_NUMBA:

    @numba.njit(parallel=True, cache=True, fastmath=True)
    def _small_gemm_impl(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, chunk):  # pragma: no cover
        n_outer = out.size // (m * n)
        nd = dims.shape[0]
        n_chunks = (n_outer + chunk - 1) // chunk
        for c in numba.prange(n_chunks):
            first = c * chunk
            last = min(first + chunk, n_outer)
            # decode the first outer index of the chunk, then step like an odometer
            pos = np.empty(nd, dtype=np.int64)
            rem = first * 1  # a copy: the parallel loop index must not be written
            xo = 0
            yo = 0
            oo = 0
            for d in range(nd - 1, -1, -1):
                pos[d] = rem % dims[d]
                rem //= dims[d]
                xo += pos[d] * xs[d]
                yo += pos[d] * ys[d]
                oo += pos[d] * os[d]
            for _ in range(first, last):
                for ii in range(m):
                    xb = xo + ii * xs_m
                    for jj in range(n):
                        yb = yo + jj * ys_n
                        acc = x[xb] * y[yb]
                        for ll in range(1, k):
                            acc += x[xb + ll] * y[yb + ll]
                        out[oo + ii * n + jj] = acc
                d = nd - 1
                while d >= 0:
                    pos[d] += 1
                    xo += xs[d]
                    yo += ys[d]
                    oo += os[d]
                    if pos[d] < dims[d]:
                        break
                    xo -= xs[d] * dims[d]
                    yo -= ys[d] * dims[d]
                    oo -= os[d] * dims[d]
                    pos[d] = 0
                    d -= 1


    @numba.njit(cache=True)
    def _small_gemm(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, chunk):  # pragma: no cover
        # n and k become compile-time constants, so the innermost loops unroll
        numba.literally(n)
        numba.literally(k)
        _small_gemm_impl(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, chunk)


def _outer_strides(view: tuple[int, ...], outer: tuple[int, ...]) -> np.ndarray:
    """Element strides of a C-ordered ``view`` over the outer axes (0 where it has extent 1)."""
    strides = np.zeros(len(outer), dtype=np.int64)
    step = view[-1] * view[-2]
    for d in range(len(outer) - 1, -1, -1):
        strides[d] = 0 if view[d] == 1 and outer[d] != 1 else step
        step *= view[d]
    return strides


def small_gemm(x, y, out, x_view, y_view, out_view) -> None:
    """``out[..., i, j] = sum_l x[..., i, l] * y[..., j, l]`` with broadcasting over outer axes.

    Outer axes along which the larger operand is constant are iterated
    innermost, so each of its blocks is reused from cache for every row of
    the smaller operand before moving on.
    """
    outer = tuple(out_view[:-2])
    m, n = out_view[-2], out_view[-1]
    k = x_view[-1]
    if outer:
        xs = _outer_strides(x_view, outer)
        ys = _outer_strides(y_view, outer)
        os = _outer_strides(out_view, outer)
        # iterate innermost the axes along which the larger operand is constant,
        # so each block of it is reused from cache by every row of the smaller
        big = ys if math.prod(y_view) >= math.prod(x_view) else xs
        order = sorted(range(len(outer)), key=lambda d: (big[d] == 0 and outer[d] > 1, d))
        dims = np.asarray([outer[d] for d in order], dtype=np.int64)
        xs, ys, os = xs[order], ys[order], os[order]
    else:
        dims = np.ones(1, np.int64)
        xs = ys = os = np.zeros(1, np.int64)
    # the commonest tiny shapes get kernels with n and k unrolled at compile time
    run = _small_gemm if (n in UNROLLED_N and k in UNROLLED_K) else _small_gemm_impl
    run(x.reshape(-1), y.reshape(-1), out.reshape(-1), dims, xs, ys, os, m, n, k, k, k, 16384)
