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

import importlib.util
import math

import numpy as np

#: numba ships with quimb; without it the executor falls back to numpy.matmul. It is
#: imported only when a plan first needs the compiled loop (importing it costs ~0.5 s).
_HAVE_NUMBA = importlib.util.find_spec("numba") is not None

#: inner GEMMs up to this many multiply-adds run in the compiled loop
SMALL_INNER = 4096
#: extents of n and k that get a specialised (unrolled) kernel, compiled once and cached
UNROLLED_N = (1, 2, 4, 8, 16)
UNROLLED_K = (2, 4, 8)
#: plans of fewer FLOPs than this run their loop steps through numpy.matmul instead: on a
#: fresh machine each compiled variant takes seconds to compile (then it is cached on disk
#: under numba's cache), while such a plan takes milliseconds either way
COMPILE_MIN_FLOPS = 1e8

prange = range  # numba.prange once numba is loaded (read when the loop is compiled)
_loop = None  # the compiled generic loop (numba dispatcher), made on first use
_chunk = None  # the compiled serial body of one chunk of outer indices
_unrolled: dict[tuple[int, int], object] = {}


def available() -> bool:
    return _HAVE_NUMBA


def worthwhile(flops: float) -> bool:
    """Whether a plan of ``flops`` should use the compiled loop (numba present, plan not tiny)."""
    return _HAVE_NUMBA and flops >= COMPILE_MIN_FLOPS


def _gemm_chunk(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, first, last):  # pragma: no cover
    """Outer indices ``first..last-1`` of the step, serially."""
    nd = dims.shape[0]
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


def _small_gemm_loop(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, chunk):  # pragma: no cover
    n_outer = out.size // (m * n)
    n_chunks = (n_outer + chunk - 1) // chunk
    if n_chunks <= 1:
        # one chunk runs here: waking the thread pool for it costs more than the work
        # (and ~15 ms when the other cores are busy)
        _chunk(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, 0, n_outer)
    else:
        for c in prange(n_chunks):
            first = c * chunk
            _chunk(x, y, out, dims, xs, ys, os, m, n, k, xs_m, ys_n, first,
                   min(first + chunk, n_outer))


def _compiled_loop():
    """The generic compiled loop (``n`` and ``k`` at run time), jitted on first use."""
    global _loop, _chunk, prange
    if _loop is None:
        import numba

        prange = numba.prange
        _chunk = numba.njit(cache=True, fastmath=True, inline="always")(_gemm_chunk)
        _loop = numba.njit(parallel=True, cache=True, fastmath=True)(_small_gemm_loop)
    return _loop


def _compiled_unrolled(n: int, k: int):
    """A loop with ``n`` and ``k`` fixed at compile time, so its innermost loops unroll.

    ``n`` and ``k`` are closure constants: numba types them as literals and
    specialises the generic loop on them, and its on-disk cache keys each
    variant by them. (``numba.literally`` did the same, but re-ran type
    inference on every call before dispatching: ~40 ms a call.)
    """
    run = _unrolled.get((n, k))
    if run is None:
        import numba

        _compiled_loop()  # the global _loop, which the variant calls
        n_c, k_c = n, k

        def unrolled(x, y, out, dims, xs, ys, os, m, xs_m, ys_n, chunk):  # pragma: no cover
            _loop(x, y, out, dims, xs, ys, os, m, n_c, k_c, xs_m, ys_n, chunk)

        run = _unrolled[(n, k)] = numba.njit(cache=True)(unrolled)
    return run


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
    x, y, out = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    # the commonest tiny shapes get kernels with n and k unrolled at compile time
    if n in UNROLLED_N and k in UNROLLED_K:
        _compiled_unrolled(n, k)(x, y, out, dims, xs, ys, os, m, k, k, 16384)
    else:
        _compiled_loop()(x, y, out, dims, xs, ys, os, m, n, k, k, k, 16384)
