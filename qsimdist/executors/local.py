"""Single-process executor: runs a Plan with numpy, or cupy on a GPU.

Each step is one ``matmul`` on reshaped views of the operands, writing into
a buffer taken from a pool of freed buffers (no allocation churn, no runtime
transpose: the plan's lifetime ordering already put every mode in place).
Leaves are sliced, summed and permuted once when loaded. Slices are
accumulated into the output.
"""

from __future__ import annotations

import bisect
import itertools
import math
from contextlib import contextmanager

import numpy as np

from ..config import check_gemm
from ..errors import InvalidInputError, MissingDependencyError
from ..planner.lifetime import Step
from ..planner.plan import Plan
from ..progress import Progress
from . import kernels

BACKENDS = ("numpy", "cupy")
#: the 3M product runs on a step only where its GEMM's m, n and k all reach this: below, the
#: plane copies and additions cost more than the fourth real GEMM it saves
GAUSS_MIN_EXTENT = 64



def array_module(backend: str):
    """The array module for ``backend`` (``numpy`` or ``cupy``)."""
    if backend == "numpy":
        return np
    if backend == "cupy":
        try:
            import cupy
        except ImportError as exc:
            raise MissingDependencyError(
                f"backend 'cupy' needs cupy ({exc}); install it with: pip install 'qsimdist[gpu]'"
            ) from None
        return cupy
    raise InvalidInputError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")


class BufferPool:
    """Free buffers kept by element count and reused for later outputs.

    A request takes the smallest free buffer holding at least as many
    elements and at most ``slack`` times as many (best fit; its leading part
    is used), so fresh allocations, whose first touch page-faults, are rare.
    At most ``limit`` bytes of free buffers are held; beyond that they are
    released, so a long contraction cannot hoard memory.

    ``cap`` bounds the bytes the pool manages in all: buffers handed out (their
    whole size, best-fit slack included) plus free ones, plus ``external``
    (bytes the caller holds in arrays the pool did not make, e.g. loaded leaves). Before a fresh
    allocation would pass it, free buffers are released, largest first, and a
    buffer given back is dropped rather than kept when keeping it would pass
    it. The MPI executor sets ``cap`` to the schedule's guarded peak, so the
    free buffers never add to what the guard allowed.
    """

    def __init__(self, xp, dtype, limit: int | None = None, slack: float = 2.0,
                 cap: int | None = None) -> None:
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self.free: dict[int, list] = {}
        self.sizes: list[int] = []  # sorted keys of ``free`` with a non-empty stack
        self.limit = limit
        self.slack = slack
        self.held = 0
        self.cap = cap
        self.lent: dict[int, int] = {}  # id of each buffer handed out -> its bytes (with a cap)
        self.out = 0  # bytes of the buffers in ``lent``
        self.external = 0  # bytes the caller holds outside the pool, counted against ``cap``

    def _lend(self, base) -> None:
        if self.cap is not None:
            nbytes = base.size * self.dtype.itemsize
            self.lent[id(base)] = nbytes
            self.out += nbytes

    def _make_room(self, nbytes: int) -> None:
        """Release free buffers, largest first, until ``nbytes`` more stay within ``cap``."""
        while self.sizes and self.out + self.held + self.external + nbytes > self.cap:
            have = self.sizes[-1]
            stack = self.free[have]
            stack.pop()
            if not stack:
                del self.free[have]
                self.sizes.pop()
            self.held -= have * self.dtype.itemsize

    def get(self, shape: tuple[int, ...]):
        size = math.prod(shape)
        j = bisect.bisect_left(self.sizes, size)
        if j < len(self.sizes) and self.sizes[j] <= self.slack * size:
            have = self.sizes[j]
            stack = self.free[have]
            base = stack.pop()
            if not stack:
                del self.free[have]
                self.sizes.pop(j)
            self.held -= have * self.dtype.itemsize
            self._lend(base)
            return base[:size].reshape(shape)
        if self.cap is not None:
            self._make_room(size * self.dtype.itemsize)
        base = self.xp.empty(size, dtype=self.dtype)
        self._lend(base)
        return base.reshape(shape)

    def put(self, arr) -> None:
        base = arr.base if arr.base is not None else arr
        if base.ndim != 1 or not base.flags.c_contiguous:
            return
        nbytes = base.size * self.dtype.itemsize
        if self.cap is not None:
            self.out -= self.lent.pop(id(base), 0)
            if self.out + self.held + self.external + nbytes > self.cap:
                return
        if self.limit is not None and self.held + nbytes > self.limit:
            return
        if base.size not in self.free:
            self.free[base.size] = []
            bisect.insort(self.sizes, base.size)
        self.free[base.size].append(base)
        self.held += nbytes


def check_gemm_mode(gemm: str, xp, dtype) -> None:
    """Refuse a GEMM mode this array module or dtype cannot run, in one line."""
    check_gemm(gemm, "numpy" if xp is np else "cupy", dtype)
    if "tf32" in gemm and tf32_setter(xp) is None:
        raise MissingDependencyError("this CuPy cannot switch cuBLAS to TF32 "
                                     "(no cupy._core._routines_linalg.set_compute_type)")


def tf32_setter(xp):
    """``(enable, restore)`` switching CuPy's complex64/float32 GEMMs to TF32, or None.

    CuPy keeps cuBLAS's compute type per dtype in ``cupy._core._routines_linalg``
    (``CUPY_TF32=1`` sets the same at import); not every CuPy exposes it.
    """
    try:
        from cupy._core import _routines_linalg as rl

        fast, get, put = rl.COMPUTE_TYPE_TF32, rl.get_compute_type, rl.set_compute_type
    except (ImportError, AttributeError):
        return None
    kinds = (np.dtype(np.complex64), np.dtype(np.float32))

    def enable():
        before = {d: get(d) for d in kinds}
        for d in kinds:
            put(d, fast)
        return before

    def restore(before) -> None:
        for d, value in before.items():
            put(d, value)

    return enable, restore


@contextmanager
def gemm_context(gemm: str, xp):
    """Switch CuPy's GEMMs to TF32 for the block when ``gemm`` asks for it; restore after."""
    if "tf32" not in gemm:
        yield
        return
    enable, restore = tf32_setter(xp)
    before = enable()
    try:
        yield
    finally:
        restore(before)


def gauss_matmul(a, b, out, xp):
    """``out[...] = a @ b`` for complex ``a``, ``b`` from three real GEMMs (the 3M method).

    With ``a = ar + i ai`` and ``b = br + i bi``: ``t1 = ar br``, ``t2 = ai bi``,
    ``t3 = (ar + ai)(br + bi)``; the product is ``(t1 - t2) + i (t3 - t1 - t2)``.
    One real GEMM fewer than the schoolbook product's four, at the price of
    plane copies, additions and a larger rounding error in the imaginary part
    (cancellation in ``t3 - t1 - t2``). Batch axes broadcast as in ``matmul``.
    Workspace beyond ``out``: the real planes of ``a`` and ``b`` and their sums
    (1.5x the bytes of ``a`` and ``b``) and three real products (1.5x ``out``).
    """
    ar, ai = xp.ascontiguousarray(a.real), xp.ascontiguousarray(a.imag)
    br, bi = xp.ascontiguousarray(b.real), xp.ascontiguousarray(b.imag)
    t1 = xp.matmul(ar, br)
    t2 = xp.matmul(ai, bi)
    ar += ai
    br += bi
    t3 = xp.matmul(ar, br)
    t3 -= t1
    t3 -= t2
    t1 -= t2
    out.real[...] = t1  # views of ``out`` in numpy and cupy alike
    out.imag[...] = t3
    return out


def gauss_applies(step: Step) -> bool:
    """Whether ``gemm="3m"`` runs ``step`` as three real GEMMs (BLAS steps with m, n, k all
    at least ``GAUSS_MIN_EXTENT``; the compiled loop and tiled steps never)."""
    return min(step.m, step.n, step.k) >= GAUSS_MIN_EXTENT


def _gemm(xp, a, b, out, gemm: str, step: Step) -> None:
    """``out = a @ b`` by the run's GEMM mode (3M only on steps large enough for it)."""
    if gemm.startswith("3m") and gauss_applies(step) and out.dtype.kind == "c":
        gauss_matmul(a, b, out, xp)
    else:
        xp.matmul(a, b, out=out)


def load_leaf(plan: Plan, k: int, assignment: dict[str, int], xp, dtype):
    net = plan.network
    term = net.inputs[k]
    arr = np.asarray(net.arrays[k])
    index = tuple(assignment.get(i, slice(None)) for i in term)
    arr = arr[index]
    modes = [i for i in term if i not in assignment]
    if plan.leaf_sum[k]:
        axes = tuple(modes.index(i) for i in plan.leaf_sum[k])
        arr = arr.sum(axis=axes)
        modes = [i for i in modes if i not in plan.leaf_sum[k]]
    perm = [modes.index(i) for i in plan.leaf_modes[k]]
    # Always a fresh copy: the buffer pool may later reuse it for outputs.
    arr = np.array(np.transpose(arr, perm), dtype=dtype, order="C", copy=True)
    return xp.asarray(arr)


def _permuted(t, dims, perm, pool: BufferPool):
    """``t`` (stored modes of extents ``dims``) permuted by ``perm`` into a pool buffer."""
    if perm == tuple(range(len(perm))):
        return t
    out = pool.get(tuple(dims[i] for i in perm))
    out[...] = t.reshape(dims).transpose(perm)
    return out


def run_step(step: Step, a, b, xp, pool: BufferPool, compiled: bool | None = None,
             gemm: str = "complex"):
    """One pairwise contraction as the plan describes it; returns the output buffer.

    ``compiled``: run loop steps in the compiled kernel (default: where numba is
    installed); otherwise they go through ``matmul``. ``gemm``: ``"3m"`` (or
    ``"3m-tf32"``) runs the BLAS steps whose m, n, k all reach
    ``GAUSS_MIN_EXTENT`` as three real GEMMs (:func:`gauss_matmul`).
    """
    if compiled is None:
        compiled = kernels.available()
    x, y = (a, b) if step.x == "lhs" else (b, a)
    if step.kernel == "transpose":
        xt = _permuted(x, step.x_dims, step.x_perm, pool)
        yt = _permuted(y, step.y_dims, step.y_perm, pool)
        nb, m, n = step.tmp_shape
        tmp = pool.get((nb, m, n))
        _gemm(xp, xt.reshape(nb, m, -1), yt.reshape(nb, n, -1).swapaxes(-1, -2), tmp, gemm,
              step)
        for t, src in ((xt, x), (yt, y)):
            if t is not src:
                pool.put(t)
        out = pool.get(step.out_view)
        dims = step.tmp_dims
        out.reshape(tuple(dims[i] for i in step.out_perm))[...] = tmp.reshape(dims).transpose(
            step.out_perm
        )
        pool.put(tmp)
        return out
    xv = x.reshape(step.x_view)
    yv = y.reshape(step.y_view)
    if step.loop and xp is np and compiled:
        out = pool.get(step.out_view)
        if step.tiled:
            kernels.tiled_gemm(xv, yv, out, step.x_view, step.y_view, step.out_view)
        else:
            kernels.small_gemm(xv, yv, out, step.x_view, step.y_view, step.out_view)
        return out
    expand = step.expand
    if step.loop and not expand:  # no compiled kernel here: BLAS needs one operand expanded
        x_b = any(d == 1 < o for d, o in zip(step.x_view[:-2], step.out_view[:-2]))
        y_b = any(d == 1 < o for d, o in zip(step.y_view[:-2], step.out_view[:-2]))
        expand = ("x" if step.m <= step.n else "y") if x_b and y_b else ""
    if expand == "x":
        full = pool.get(step.out_view[:-2] + step.x_view[-2:])
        full[...] = xv
        xv = full
    elif expand == "y":
        full = pool.get(step.out_view[:-2] + step.y_view[-2:])
        full[...] = yv
        yv = full
    out = pool.get(step.out_view)
    _gemm(xp, xv, yv.swapaxes(-1, -2), out, gemm, step)
    if expand:
        pool.put(full)
    return out


def accumulate(result, root, pool: BufferPool):
    """``result + root`` for the slices' sum: the first root becomes the result, later
    ones are added in place and their buffers go back to ``pool``."""
    if result is None:
        return root
    result += root
    pool.put(root)
    return result


def contract_slice(plan: Plan, assignment: dict[str, int], xp, pool: BufferPool, dtype,
                   compiled: bool | None = None, gemm: str = "complex", carry=None,
                   s: int = 0):
    """Contract one slice (``assignment`` fixes each sliced index); returns the root tensor.

    ``carry`` (an :class:`~qsimdist.executors.carry.Carry`): slice number ``s``
    computes only what its kept outputs do not already hold, and keeps the
    kept outputs it makes (their buffers stay out of ``pool``).
    """
    n = plan.network.num_tensors
    need = carry.needed(plan, s) if carry is not None else None
    kept = carry.kept if carry is not None else frozenset()
    nodes: dict[int, object] = {}
    for k in range(n):
        if need is None or k in need:
            nodes[k] = load_leaf(plan, k, assignment, xp, dtype)
    for step in plan.steps:
        if need is not None and step.out not in need:
            continue
        a = nodes.pop(step.lhs) if step.lhs in nodes else carry.get(step.lhs)
        b = nodes.pop(step.rhs) if step.rhs in nodes else carry.get(step.rhs)
        out = run_step(step, a, b, xp, pool, compiled, gemm)
        if step.lhs not in kept:
            pool.put(a)
        if step.rhs not in kept:
            pool.put(b)
        if step.out in kept:
            old = carry.put(step.out, s, out, out.nbytes)
            if old is not None:
                pool.put(old)
        nodes[step.out] = out
    (root,) = nodes.values()
    return root


# ------------------------------------------------------------ exponent tracking
#: ``log10(2)``: a binary exponent ``e`` is the decimal exponent ``e * LOG10_2``
LOG10_2 = math.log10(2.0)
#: the widest power of two one multiplication applies (``2.0**1022`` is normal, so exact)
_MAX_STEP = 1022


def scale_by_power_of_two(arr, e: int) -> None:
    """``arr *= 2**e`` in place, exactly (barring underflow of its smallest entries).

    Powers beyond a float's range (``|e| > 1022``, met when a leaf's largest
    entry is subnormal or near the largest float) are applied in parts.
    """
    while e:
        part = max(-_MAX_STEP, min(_MAX_STEP, e))
        arr *= 2.0 ** part
        e -= part


def _largest_magnitude(arr, xp) -> float:
    """``max |re|, |im|`` over ``arr`` (within a factor sqrt(2) of ``max |arr|``): reductions
    over views only, so no temporary the size of ``arr`` is made. NaN if ``arr`` holds one."""
    if arr.size == 0:
        return 0.0
    parts = (arr.real, arr.imag) if arr.dtype.kind == "c" else (arr,)
    big = 0.0
    for part in parts:
        hi, lo = float(xp.max(part)), float(xp.min(part))
        if hi != hi or lo != lo:  # NaN
            return math.nan
        big = max(big, hi, -lo)
    return big


def strip_power_of_two(arr, xp) -> int | None:
    """Divide ``arr`` in place by a power of two ``2**e`` that brings its largest magnitude
    into ``[0.5, 1.5)`` and return ``e`` (exact: only the binary exponents change).

    Returns ``None`` for an exactly zero ``arr`` (left as it is), and ``0``
    (``arr`` unchanged) when ``arr`` holds an infinity or NaN.
    """
    big = _largest_magnitude(arr, xp)
    if big == 0.0:
        return None
    if not math.isfinite(big):
        return 0
    e = math.frexp(big)[1]
    scale_by_power_of_two(arr, -e)
    return e


def contract_slice_scaled(plan: Plan, assignment: dict[str, int], xp, pool: BufferPool, dtype,
                          compiled: bool | None = None, gemm: str = "complex"):
    """:func:`contract_slice` tracking exponents: ``(root, e)`` with the slice's value
    ``root * 2**e``; ``e`` is ``None`` when the slice is exactly zero.

    Every leaf and every step's output is divided by a power of two near its
    largest magnitude (:func:`strip_power_of_two`) and the powers are added up
    along the tree, so no intermediate overflows or underflows as a whole,
    whatever the magnitude of the value. An exactly zero node makes every
    node above it zero (its exponent ``None``); the other branches are still
    rescaled, so a zero never meets an infinity.
    """
    n = plan.network.num_tensors
    nodes: dict[int, object] = {}
    exps: dict[int, int | None] = {}
    for k in range(n):
        leaf = load_leaf(plan, k, assignment, xp, dtype)
        nodes[k], exps[k] = leaf, strip_power_of_two(leaf, xp)
    for step in plan.steps:
        a, b = nodes.pop(step.lhs), nodes.pop(step.rhs)
        ea, eb = exps.pop(step.lhs), exps.pop(step.rhs)
        out = run_step(step, a, b, xp, pool, compiled, gemm)
        pool.put(a)
        pool.put(b)
        e = strip_power_of_two(out, xp)
        nodes[step.out] = out
        exps[step.out] = None if e is None or ea is None or eb is None else ea + eb + e
    ((key, root),) = nodes.items()
    return root, exps[key]


def accumulate_scaled(result, result_exp: int | None, root, root_exp: int | None,
                      pool: BufferPool):
    """The slices' sum with exponents: ``(result, result_exp)`` plus ``(root, root_exp)``
    (values ``array * 2**exp``; exponent ``None``: exactly zero) as one ``(array, exp)``.

    The common exponent is the larger one; the other term is scaled down to it
    before the in-place addition, and an exactly zero term is dropped (it does
    not set the exponent). ``result`` ``None`` starts the sum. Buffers no
    longer needed go back to ``pool``.
    """
    if result is None:
        return root, root_exp
    if root_exp is None:
        pool.put(root)
        return result, result_exp
    if result_exp is None:
        pool.put(result)
        return root, root_exp
    e = max(result_exp, root_exp)
    scale_by_power_of_two(result, result_exp - e)
    scale_by_power_of_two(root, root_exp - e)
    result += root
    pool.put(root)
    return result, e


def decimal_mantissa(result, exp: int | None, xp):
    """``(mantissa, exponent)`` in quimb's and cotengra's convention from ``result * 2**exp``.

    The value is ``mantissa * 10**exponent`` with ``exponent`` a float (log10)
    and ``mantissa`` scaled in place so that its largest magnitude is 1. An
    exactly zero value (``exp`` ``None``, or slices that cancelled exactly)
    gives ``(zeros, 0.0)``; one holding an infinity or NaN keeps it in the
    mantissa (exponent ``exp * log10(2)``).
    """
    if exp is None:
        return result, 0.0
    big = float(xp.max(xp.abs(result))) if result.size else 0.0
    if big == 0.0:
        return result, 0.0
    if not math.isfinite(big):
        return result, exp * LOG10_2
    result /= big
    return result, exp * LOG10_2 + math.log10(big)


#: a plan keeps its free buffers between runs when they total at most this many bytes
RETAIN_BYTES = 256 * 2**20


def _take_workspace(plan: Plan, xp, dtype, reuse: bool) -> BufferPool:
    """The buffer pool a run of ``plan`` uses: the one its last run left, or a new one.

    The pool is taken *out* of ``plan.workspace`` (``dict.pop`` is atomic), so
    two threads running one plan at once never share buffers.
    """
    if reuse and xp is np:
        pool = plan.workspace.pop((xp.__name__, dtype.str), None)
        if pool is not None:
            return pool
    # freed buffers up to twice the plan's peak are kept: reusing them avoids the page
    # faults of fresh allocations, which cost more than the arithmetic here
    return BufferPool(xp, dtype, limit=2 * plan.stats.peak_bytes)


def _leave_workspace(plan: Plan, pool: BufferPool, reuse: bool) -> None:
    """Keep ``pool`` on the plan for its next run (numpy only, at most RETAIN_BYTES held).

    On a small plan the first touch of fresh memory is a large share of a run
    (rqc_4x5_m12: 0.066 s with a new pool, 0.048 s with a kept one, medians of
    9; docs/benchmarks/history.md, "Buffers kept between runs"). CuPy keeps its
    own memory pool, so nothing is kept for it here.
    """
    if reuse and pool.xp is np and pool.held <= RETAIN_BYTES:
        plan.workspace[(pool.xp.__name__, pool.dtype.str)] = pool


def execute(
    plan: Plan,
    backend: str = "numpy",
    progress: Progress | None = None,
    reuse_workspace: bool = True,
    gemm: str = "complex",
    strip_exponent: bool = False,
):
    """Run ``plan``; returns an array (numpy, or cupy for ``backend='cupy'``) in output order.

    ``progress("slices", done, total)`` is called after each slice
    (:mod:`qsimdist.progress`).

    ``reuse_workspace``: with numpy, take the free buffers a previous run of
    this plan left and leave this run's for the next (up to ``RETAIN_BYTES``;
    :meth:`Plan.release_workspace` drops them). Repeated runs of one plan
    (batches of amplitudes, samples) then skip the page faults of fresh
    memory. ``False``: a new pool, dropped at the end.

    ``gemm`` (how the BLAS steps multiply; the compiled loop and tiled steps
    are unaffected): ``"complex"`` (default) the dtype's own complex GEMM;
    ``"3m"`` three real GEMMs instead of four on steps whose m, n, k all reach
    ``GAUSS_MIN_EXTENT`` (:func:`gauss_matmul`; its workspace is beyond the
    plan's reported peak); ``"tf32"`` (CuPy, complex64) cuBLAS's TF32 compute
    type for the whole run; ``"3m-tf32"`` both. Both trade accuracy for
    speed: docs/benchmarks/history.md ("GEMM modes: 3M and TF32") has 3M's measured
    error on this CPU; TF32's is not measured yet (no GPU run).

    ``strip_exponent=True`` returns ``(mantissa, exponent)`` instead, the value
    being ``mantissa * 10**exponent`` (``exponent`` a Python float, log10;
    ``max |mantissa| == 1``; an exactly zero value is ``(zeros, 0.0)``), as
    cotengra's and quimb's ``strip_exponent`` do. Every leaf and step output
    is divided by a power of two as the plan runs (:func:`contract_slice_scaled`)
    and the slices are summed at a common exponent (:func:`accumulate_scaled`),
    so values far outside the dtype's range (1e-5000, 1e+800) come out right.
    It costs a max/min pass over each intermediate.
    """
    if plan.network.arrays is None:
        raise InvalidInputError("this plan's network has no arrays; nothing to contract")
    xp = array_module(backend)
    dtype = np.dtype(plan.dtype)
    check_gemm_mode(gemm, xp, dtype)
    with gemm_context(gemm, xp):
        if strip_exponent:
            return _run_scaled(plan, xp, dtype, progress, reuse_workspace, gemm)
        return _run(plan, xp, dtype, progress, reuse_workspace, gemm)


def _run(plan: Plan, xp, dtype, progress, reuse_workspace: bool, gemm: str):
    from .carry import Carry, slice_assignment

    pool = _take_workspace(plan, xp, dtype, reuse_workspace)
    out_shape = tuple(plan.network.size_dict[i] for i in plan.network.output)
    # a tiny plan runs its loop steps through matmul: compiling the loop kernel on a
    # fresh machine takes seconds, the whole plan milliseconds
    compiled = xp is np and kernels.worthwhile(plan.stats.flops)
    result = None
    total = plan.stats.n_slices
    # the schedule's kept outputs, reused while their sliced indices are unchanged
    carry = Carry.of(plan)
    for s in range(total):
        root = contract_slice(plan, slice_assignment(plan, s), xp, pool, dtype, compiled,
                              gemm, carry, s)
        result = accumulate(result, root.reshape(out_shape), pool)
        if progress is not None:
            progress("slices", s + 1, total)
    if carry is not None:
        for arr in carry.values():
            pool.put(arr)
    _leave_workspace(plan, pool, reuse_workspace)
    return result


def _run_scaled(plan: Plan, xp, dtype, progress, reuse_workspace: bool, gemm: str):
    """:func:`_run` with exponent tracking: ``(mantissa, exponent)`` (see :func:`execute`)."""
    pool = _take_workspace(plan, xp, dtype, reuse_workspace)
    out_shape = tuple(plan.network.size_dict[i] for i in plan.network.output)
    compiled = xp is np and kernels.worthwhile(plan.stats.flops)
    result, exp = None, None
    ranges = [range(plan.network.size_dict[i]) for i in plan.sliced]
    total = plan.stats.n_slices
    for done, values in enumerate(itertools.product(*ranges), start=1):
        root, root_exp = contract_slice_scaled(plan, dict(zip(plan.sliced, values)), xp, pool,
                                               dtype, compiled, gemm)
        result, exp = accumulate_scaled(result, exp, root.reshape(out_shape), root_exp, pool)
        if progress is not None:
            progress("slices", done, total)
    _leave_workspace(plan, pool, reuse_workspace)
    return decimal_mantissa(result, exp, xp)
