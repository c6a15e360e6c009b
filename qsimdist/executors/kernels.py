"""Compiled CPU kernels for broadcast GEMM steps whose inner GEMM is small.

A lifetime-ordered step writes its output in place through views
``x (outer..., m, k)``, ``y (outer..., n, k)`` and ``out (outer..., m, n)``,
where an operand has extent 1 on outer axes it lacks. When ``m * n * k`` is
small (a gate-like tensor applied to a large one), one BLAS call per outer
index costs far more than the arithmetic, so this kernel runs the whole
step in one parallel loop: each outer index decodes its operand offsets
from the strides and computes its small ``m x n`` block directly into the
output. No operand or output is copied or permuted.

When the two operands share no outer axis and one of them is small (a
gate), :func:`tiled_gemm` does the same step faster: the large operand's
rows (``rows x k``, contiguous) times the small operand's rows (``cols x
k``) is one ordinary GEMM, so BLAS (vectorised) computes it tile by tile
into a scratch buffer that stays in cache, and a compiled loop scatters
each tile into the interleaved output. Output offsets separate into a part
from the large operand's row and a part from the small one's, so the
scatter needs one small offset table and an odometer over the rows. No
FLOP is wasted (unlike a Kronecker-expanded GEMM), the large operand is
read once in order and the output written once, and the tiles split over
the cores (each thread asks OpenBLAS for single-threaded GEMMs). Thin tiles
(``k <= REAL_GEMM_K``) run as real GEMMs on the interleaved complex storage,
and the scatter walks the large operand's two innermost row axes as plain
loops (a "plane"), tiles holding whole planes (docs/benchmarks/history.md,
"Tiled kernel, second pass": a median 1.5x faster than the first version on 122 step
shapes).
Both kernels cache their per-shape tables, so a repeated step (every slice)
pays its Python set-up once.
"""

from __future__ import annotations

import importlib.util
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# inner GEMMs up to SMALL_INNER multiply-adds run in the compiled loop (the name is kept
# here for the benchmarks); n in UNROLLED_N and k in UNROLLED_K get a specialised (unrolled)
# kernel. Their home is the cost module (LocalCosts' defaults), which prices the same kernels.
from ..hardware.costs import COMPILE_MIN_FLOPS as COMPILE_MIN_FLOPS
from ..hardware.costs import SMALL_INNER as SMALL_INNER
from ..hardware.costs import UNROLLED_K, UNROLLED_N

#: numba ships with quimb; without it the executor falls back to numpy.matmul. It is
#: imported only when a plan first needs the compiled loop (importing it costs ~0.5 s).
_HAVE_NUMBA = importlib.util.find_spec("numba") is not None


prange = range  # numba.prange once numba is loaded (read when the loop is compiled)
_loop = None  # the compiled generic loop (numba dispatcher), made on first use
_chunk = None  # the compiled serial body of one chunk of outer indices
_unrolled: dict[tuple[int, int], object] = {}
_scatter = None  # the compiled scatters of tiled_gemm, made on first use
_scatter_p = None
_workers: ThreadPoolExecutor | None = None
#: per-shape layouts (stride tables, offsets) kept for reuse: a step's Python set-up cost
#: more than its arithmetic on small steps, and every slice repeats every step
LAYOUT_CACHE = 4096
_small_layouts: dict = {}
_tiled_layouts: dict = {}

#: tiled_gemm: output elements per scratch tile (complex64: 1 MiB; 4x smaller measured
#: slower).
TILE_ELEMENTS = 131072
#: tiled_gemm: contractions over at most this many elements run as real GEMMs on the
#: interleaved complex storage (measured 1.1-1.9x faster than complex GEMMs at k <= 4
#: and about equal at k = 8)
REAL_GEMM_K = 8


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


def startup_seconds() -> float:
    """Predicted seconds before this process's first compiled contraction kernel runs:
    numba imported and the cached machine code loaded (the statevector kernels' prices,
    :data:`~qsimdist.hardware.costs.STARTUP_SECONDS` / ``LOAD_SECONDS``: the same
    library, the same first load); 0 once either family of compiled kernels is loaded."""
    import sys

    from ..hardware import costs

    if _loop is not None or _scatter is not None or not _HAVE_NUMBA:
        return 0.0
    sv = sys.modules.get(__package__ + ".sv_kernels")
    if sv is not None and sv.warm():
        return 0.0
    return costs.LOAD_SECONDS if "numba" in sys.modules else costs.STARTUP_SECONDS


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


def _remember(cache: dict, key, value):
    if len(cache) >= LAYOUT_CACHE:  # plans have at most a few thousand distinct steps
        cache.clear()
    cache[key] = value
    return value


def _small_layout(x_view, y_view, out_view) -> tuple:
    """The compiled loop and its stride tables for one step shape (cached by shape)."""
    key = (tuple(x_view), tuple(y_view), tuple(out_view))
    got = _small_layouts.get(key)
    if got is not None:
        return got
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
    if n in UNROLLED_N and k in UNROLLED_K:
        got = (_compiled_unrolled(n, k), (dims, xs, ys, os, m, k, k, 16384))
    else:
        got = (_compiled_loop(), (dims, xs, ys, os, m, n, k, k, k, 16384))
    return _remember(_small_layouts, key, got)


def small_gemm(x, y, out, x_view, y_view, out_view) -> None:
    """``out[..., i, j] = sum_l x[..., i, l] * y[..., j, l]`` with broadcasting over outer axes.

    Outer axes along which the larger operand is constant are iterated
    innermost, so each of its blocks is reused from cache for every row of
    the smaller operand before moving on.
    """
    run, args = _small_layout(x_view, y_view, out_view)
    run(x.reshape(-1), y.reshape(-1), out.reshape(-1), *args)


# ------------------------------------------------------------------ tiled GEMM + scatter


def _scatter_rows(tmp, out, row0, nrows, bdims, bos, offs):  # pragma: no cover
    """``out[off(row) + offs[c]] = tmp[row - row0, c]`` for rows ``row0..row0+nrows-1``.

    Rows enumerate the large operand's outer axes then its inner rows in C
    order (extents ``bdims``, output strides ``bos``); the innermost axis is
    walked in runs so each column's writes stay sequential.
    """
    nd = bdims.shape[0]
    pos = np.empty(nd, dtype=np.int64)
    rem = row0 * 1
    ob = 0
    for d in range(nd - 1, -1, -1):
        pos[d] = rem % bdims[d]
        rem //= bdims[d]
        ob += pos[d] * bos[d]
    ncol = offs.shape[0]
    inner = bdims[nd - 1]
    step = bos[nd - 1]
    t = 0
    while t < nrows:
        run = min(inner - pos[nd - 1], nrows - t)
        for c in range(ncol):
            oc = ob + offs[c]
            for q in range(run):
                out[oc + q * step] = tmp[t + q, c]
        t += run
        ob += run * step
        pos[nd - 1] += run
        d = nd - 1
        while d > 0 and pos[d] >= bdims[d]:
            ob += bos[d - 1] - bos[d] * bdims[d]
            pos[d] = 0
            pos[d - 1] += 1
            d -= 1


def _scatter_planes(tmp, out, row0, nrows, bdims, bos, offs, by_row):  # pragma: no cover
    """:func:`_scatter_rows` for tiles of whole planes of the two innermost row axes.

    ``row0`` and ``nrows`` are multiples of the plane (``bdims[-2] * bdims[-1]``
    rows), so each plane's two innermost axes are plain nested loops and the
    odometer moves once per plane. ``by_row``: columns innermost (the tile is
    read in order and each output row written as a few short streams), else
    columns outermost (each column's writes follow the innermost axis).
    """
    nd = bdims.shape[0]
    d1 = bdims[nd - 1]
    d2 = bdims[nd - 2]
    s1 = bos[nd - 1]
    s2 = bos[nd - 2]
    plane = d1 * d2
    pos = np.zeros(nd, dtype=np.int64)
    rem = row0 // plane
    ob = 0
    for d in range(nd - 3, -1, -1):
        pos[d] = rem % bdims[d]
        rem //= bdims[d]
        ob += pos[d] * bos[d]
    ncol = offs.shape[0]
    t = 0
    while t < nrows:
        if by_row:
            for a in range(d2):
                oa = ob + a * s2
                ta = t + a * d1
                for q in range(d1):
                    oq = oa + q * s1
                    for c in range(ncol):
                        out[oq + offs[c]] = tmp[ta + q, c]
        else:
            for c in range(ncol):
                oc = ob + offs[c]
                for a in range(d2):
                    oa = oc + a * s2
                    ta = t + a * d1
                    for q in range(d1):
                        out[oa + q * s1] = tmp[ta + q, c]
        t += plane
        d = nd - 3
        while d >= 0:
            pos[d] += 1
            ob += bos[d]
            if pos[d] < bdims[d]:
                break
            ob -= bos[d] * bdims[d]
            pos[d] = 0
            d -= 1


def _compiled_scatter():
    global _scatter, _scatter_p
    if _scatter is None:
        import numba

        _scatter = numba.njit(cache=True, nogil=True)(_scatter_rows)
        _scatter_p = numba.njit(cache=True, nogil=True)(_scatter_planes)
    return _scatter


def _outer_roles(x_view, y_view, out_view):
    """Per outer axis of extent > 1: whether x and y vary along it (both: a batch axis)."""
    outer = out_view[:-2]
    return [(d, x_view[d] != 1, y_view[d] != 1) for d in range(len(outer)) if outer[d] != 1]


def tiled_shape(x_view, y_view, out_view) -> tuple[int, int, int] | None:
    """``(rows, cols, k)`` of :func:`tiled_gemm` for this step, or None where it does not apply.

    It applies when no outer axis is shared by both operands (no batch axis).
    ``cols x k`` is the smaller operand, ``rows x k`` the larger.
    """
    if any(in_x and in_y for _, in_x, in_y in _outer_roles(x_view, y_view, out_view)):
        return None
    k = x_view[-1]
    nx, ny = math.prod(x_view) // max(k, 1), math.prod(y_view) // max(k, 1)
    return (max(nx, ny), min(nx, ny), k)


_blas_local_threads: object = False  # ctypes function, None when unavailable; False: not looked up


def _blas_thread_setter():
    """OpenBLAS's ``openblas_set_num_threads_local`` (per calling thread), or None.

    Each tile's GEMM is tiny: woken OpenBLAS workers cost far more than the
    arithmetic (measured 7x slower with them on a loaded 2-core machine), so
    the tiles run single-threaded BLAS, two tiles at a time on two threads.
    """
    global _blas_local_threads
    if _blas_local_threads is False:
        _blas_local_threads = None
        import ctypes
        import glob

        libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
        for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
            try:
                fn = ctypes.CDLL(path).openblas_set_num_threads_local
            except (OSError, AttributeError):
                continue
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            _blas_local_threads = fn
            break
    return _blas_local_threads


_CPUS = os.cpu_count() or 1  # (os.cpu_count takes ~17 us in a container: read once)


def _threads() -> int:
    if not _HAVE_NUMBA:
        return 1
    import numba

    return max(1, min(_CPUS, numba.get_num_threads()))


def _tiled_layout(x_view, y_view, out_view, tile: int | None, order: str | None) -> tuple:
    """Shape-only part of :func:`tiled_gemm`: roles, scatter tables, tile (cached by shape)."""
    key = (tuple(x_view), tuple(y_view), tuple(out_view), tile, order)
    got = _tiled_layouts.get(key)
    if got is not None:
        return got
    outer = tuple(out_view[:-2])
    m, n = out_view[-2], out_view[-1]
    o_strides = np.zeros(len(outer), dtype=np.int64)
    stride = m * n
    for d in range(len(outer) - 1, -1, -1):
        o_strides[d] = stride
        stride *= outer[d]
    roles = _outer_roles(x_view, y_view, out_view)
    x_is_small = math.prod(x_view) <= math.prod(y_view)
    if x_is_small:  # small rows (x outer..., i), large rows (y outer..., j)
        p, q, p_step, q_step = m, n, n, 1
        s_axes = [d for d, in_x, _ in roles if in_x]
        b_axes = [d for d, in_x, _ in roles if not in_x]
    else:
        p, q, p_step, q_step = n, m, 1, n
        s_axes = [d for d, _, in_y in roles if in_y]
        b_axes = [d for d, _, in_y in roles if not in_y]
    offs = np.zeros(1, dtype=np.int64)
    for d in s_axes:
        offs = (offs[:, None] + np.arange(outer[d], dtype=np.int64) * o_strides[d]).ravel()
    offs = (offs[:, None] + np.arange(p, dtype=np.int64) * p_step).ravel()
    # row axes of the large operand (at least two: a plane needs two; pad with extent 1)
    bdims = np.asarray([1] + [outer[d] for d in b_axes] + [q], dtype=np.int64)
    bos = np.asarray([0] + [o_strides[d] for d in b_axes] + [q_step], dtype=np.int64)
    cols = offs.shape[0]
    tile = tile or max(64, TILE_ELEMENTS // max(cols, 1))
    bdims, bos = _fit_plane(bdims, bos, tile)
    plane = int(bdims[-1] * bdims[-2])
    by_plane = plane <= tile  # whole planes per tile: the plane scatter
    if by_plane:
        tile -= tile % plane
    if order is None:
        # columns outermost where each column's writes run contiguously for a while
        by_row = not (bos[-1] == 1 and bdims[-1] >= 16)
    else:
        by_row = order == "row"
    got = (x_is_small, offs, bdims, bos, tile, by_plane, by_row)
    return _remember(_tiled_layouts, key, got)


def _divisor_at_most(extent: int, limit: int) -> int:
    """The largest divisor of ``extent`` that is at most ``limit`` (at least 1)."""
    limit = max(1, min(extent, limit))
    best = math.gcd(extent, 1 << (limit.bit_length() - 1))  # extents are mostly powers of 2
    if best * 2 > limit:
        return best
    for f in range(limit, best, -1):
        if extent % f == 0:
            return f
    return best


def _fit_plane(bdims, bos, tile: int):
    """Split the two innermost row axes (an axis of extent E and stride S becomes E/f and f,
    strides S*f and S) until a plane of the two innermost fits in a tile where it can."""
    dims, strides = [int(d) for d in bdims], [int(v) for v in bos]
    if dims[-1] * dims[-2] > tile and dims[-1] > tile:
        f = _divisor_at_most(dims[-1], tile)
        e, st = dims.pop(), strides.pop()
        dims += [e // f, f]
        strides += [st * f, st]
    if dims[-1] * dims[-2] > tile:
        g = _divisor_at_most(dims[-2], tile // dims[-1])
        e, st = dims[-2], strides[-2]
        dims[-2:-1] = [e // g, g]
        strides[-2:-1] = [st * g, st]
    return np.asarray(dims, dtype=np.int64), np.asarray(strides, dtype=np.int64)


def _real_form(st):
    """``st`` (k x cols, complex) as the real (2k x 2cols) matrix acting on (re, im) pairs."""
    k, cols = st.shape
    rmat = np.empty((2 * k, 2 * cols), dtype=st.real.dtype)
    rmat[0::2, 0::2] = st.real
    rmat[1::2, 0::2] = -st.imag
    rmat[0::2, 1::2] = st.imag
    rmat[1::2, 1::2] = st.real
    return rmat


def tiled_gemm(x, y, out, x_view, y_view, out_view, tile: int | None = None,
               order: str | None = None) -> None:
    """:func:`small_gemm`'s contraction as row-tiled BLAS GEMMs scattered into place.

    Needs no outer axis shared by ``x`` and ``y`` (see :func:`tiled_shape`),
    C-contiguous ``out``. ``tile``: rows per GEMM (default:
    :data:`TILE_ELEMENTS` output elements per tile). ``order``: ``"row"`` or
    ``"column"`` forces the plane scatter's loop order (default: chosen from
    the innermost row axis; for tests and benchmarks).
    """
    if not out.flags.c_contiguous:
        raise ValueError("tiled_gemm needs a C-contiguous output")
    layout = _tiled_layouts.get((tuple(x_view), tuple(y_view), tuple(out_view), tile, order))
    if layout is None:
        if tiled_shape(x_view, y_view, out_view) is None:
            raise ValueError("tiled_gemm needs operands that share no outer axis")
        if out.size == 0:
            return
        if x_view[-1] == 0:  # an empty sum
            out[...] = 0
            return
        layout = _tiled_layout(x_view, y_view, out_view, tile, order)
    x_is_small, offs, bdims, bos, tile, by_plane, by_row = layout
    k = x_view[-1]
    s, b = (x, y) if x_is_small else (y, x)
    s2 = s.reshape(-1, k)
    b2 = b.reshape(-1, k)
    st = np.ascontiguousarray(s2.T)
    rows, cols = b2.shape[0], s2.shape[0]
    flat = out.reshape(-1)
    scatter = _compiled_scatter()
    scatter_p = _scatter_p
    n_tiles = (rows + tile - 1) // tile
    # thin complex GEMMs run faster as real GEMMs on the interleaved storage: the rows'
    # (re, im) pairs times the small operand's real 2x2-block form (same FLOPs)
    real = (out.dtype.kind == "c" and k <= REAL_GEMM_K and b2.flags.c_contiguous
            and b2.dtype == out.dtype)
    if real:
        rdt = out.real.dtype
        lhs, rhs = b2.view(rdt), _real_form(st.astype(out.dtype, copy=False))
    else:
        lhs, rhs = b2, st

    set_blas_threads = _blas_thread_setter()

    def work(tiles) -> None:
        buf = np.empty((min(tile, rows), cols), dtype=out.dtype)
        dest = buf.view(rdt) if real else buf
        before = set_blas_threads(1) if set_blas_threads is not None else 0
        try:
            for t in tiles:
                r0 = t * tile
                r1 = min(rows, r0 + tile)
                np.matmul(lhs[r0:r1], rhs, out=dest[: r1 - r0])
                part = buf[: r1 - r0]
                if by_plane:
                    scatter_p(part, flat, r0, r1 - r0, bdims, bos, offs, by_row)
                else:
                    scatter(part, flat, r0, r1 - r0, bdims, bos, offs)
        finally:
            if set_blas_threads is not None:
                set_blas_threads(before)

    threads = min(_threads(), n_tiles) if n_tiles > 1 else 1
    if threads <= 1:
        work(range(n_tiles))
        return
    global _workers
    if _workers is None:
        _workers = ThreadPoolExecutor(max_workers=max(2, _CPUS),
                                      thread_name_prefix="qsimdist-tiled")
    # the threads take tiles from one shared iterator (next() on it is atomic under the
    # GIL), so a thread started late or slowed by another process takes fewer
    shared = iter(range(n_tiles))
    futures = [_workers.submit(work, shared) for _ in range(1, threads)]
    work(shared)
    for f in futures:
        f.result()
