"""The tiled CPU kernel (row tiles through BLAS, scattered into place) and its cost model."""

from __future__ import annotations

import numpy as np
import pytest

from qsimdist.executors import kernels
from qsimdist.hardware.costs import LocalCosts
from qsimdist.planner.lifetime import gemm_step
from qsimdist.planner.path import PathOptions
from qsimdist.planner.plan import make_plan

from .conftest import rel_err
from .test_planner import random_network

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")

# (x view, y view, out view): x (outer..., m, k), y (outer..., n, k), out (outer..., m, n);
# no outer axis of extent > 1 in both operands
SHAPES = [
    ((1, 2, 1, 2, 4), (3, 1, 5, 2, 4), (3, 2, 5, 2, 2)),  # gate modes interleaved with y's
    ((1, 4, 1, 2, 8), (9, 1, 2, 33, 8), (9, 4, 2, 2, 33)),  # large n
    ((17, 1, 4, 1, 12, 8), (1, 2, 1, 2, 2, 8), (17, 2, 4, 2, 12, 2)),  # y is the small one
    ((1, 1, 4), (100, 8, 4), (100, 1, 8)),  # m = 1
    ((3, 4), (5, 4), (3, 5)),  # no outer axes
    ((1, 3, 1, 2, 1), (7, 1, 1, 5, 1), (7, 3, 1, 2, 5)),  # k = 1, an extent-1 outer axis
    ((1, 1, 1, 2, 3), (1, 1, 1, 4, 3), (1, 1, 1, 2, 4)),  # every outer axis of extent 1
    ((2, 1, 1, 1, 3, 2), (1, 3, 1, 4, 5, 2), (2, 3, 1, 4, 3, 5)),  # small operand both sides
]
EMPTY = [
    ((1, 3, 1, 2, 2), (0, 1, 1, 5, 2), (0, 3, 1, 2, 5)),  # empty batch
    ((1, 3, 0), (4, 1, 0), (4, 3, 1)),  # k = 0: an empty sum is zero
]


def _complex(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _reference(x, y):
    """An independent reference: einsum over the broadcast views (not matmul)."""
    return np.einsum("...ik,...jk->...ij", x, y)


@needs_numba
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("tile", [None, 1, 7])
@pytest.mark.parametrize("x_view,y_view,out_view", SHAPES + EMPTY)
def test_tiled_gemm_matches_einsum(x_view, y_view, out_view, tile, dtype):
    rng = np.random.default_rng(len(x_view) + (tile or 0))
    x, y = _complex(rng, x_view, dtype), _complex(rng, y_view, dtype)
    out = np.full(out_view, np.nan, dtype=dtype)
    kernels.tiled_gemm(x, y, out, x_view, y_view, out_view, tile=tile)
    want = _reference(x, y)
    assert not np.isnan(out).any()
    if x_view[-1] == 0 or not want.size:
        assert np.array_equal(out, want)  # empty: nothing written; k = 0: zeros
    else:
        assert rel_err(out, want) < (1e-6 if dtype == "complex64" else 1e-13)


@needs_numba
@pytest.mark.parametrize("order", ["row", "column"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("x_view,y_view,out_view", SHAPES)
def test_tiled_gemm_plane_scatter_orders(x_view, y_view, out_view, dtype, order):
    """Both loop orders of the plane scatter, with tiles of one plane and of several."""
    rng = np.random.default_rng(len(x_view))
    x, y = _complex(rng, x_view, dtype), _complex(rng, y_view, dtype)
    want = _reference(x, y)
    for tile in (None, 64):
        out = np.full(out_view, np.nan, dtype=dtype)
        kernels.tiled_gemm(x, y, out, x_view, y_view, out_view, tile=tile, order=order)
        assert rel_err(out, want) < (1e-6 if dtype == "complex64" else 1e-13)


@needs_numba
def test_tiled_gemm_real_and_complex_gemm_paths_agree():
    """k <= REAL_GEMM_K runs a real GEMM on the interleaved storage; above, a complex one."""
    rng = np.random.default_rng(11)
    for k in (1, 2, kernels.REAL_GEMM_K, kernels.REAL_GEMM_K + 1, 16):
        xv, yv, ov = (1, 2, 1, 2, k), (40, 1, 3, 5, k), (40, 2, 3, 2, 5)
        x, y = _complex(rng, xv, "complex64"), _complex(rng, yv, "complex64")
        out = np.empty(ov, dtype="complex64")
        kernels.tiled_gemm(x, y, out, xv, yv, ov)
        assert rel_err(out, _reference(x, y)) < 1e-6, k


@needs_numba
@pytest.mark.parametrize("seed", range(6))
def test_tiled_gemm_random_interleavings(seed):
    """Random interleavings of the two operands' outer modes, several tiles, both threads."""
    rng = np.random.default_rng(100 + seed)
    n_outer = int(rng.integers(1, 6))
    owner = rng.integers(0, 2, n_outer)  # 0: x varies along the axis, 1: y
    ext = rng.integers(1, 5, n_outer)
    m, n, k = (int(v) for v in rng.integers(1, 5, 3))
    x_view = tuple(int(e) if o == 0 else 1 for e, o in zip(ext, owner)) + (m, k)
    y_view = tuple(int(e) if o == 1 else 1 for e, o in zip(ext, owner)) + (n, k)
    out_view = tuple(int(e) for e in ext) + (m, n)
    dtype = "complex64" if seed % 2 else "complex128"
    x, y = _complex(rng, x_view, dtype), _complex(rng, y_view, dtype)
    for tile in (3, 32, None):  # runs (planes larger than a tile) and whole planes
        out = np.empty(out_view, dtype=dtype)
        kernels.tiled_gemm(x, y, out, x_view, y_view, out_view, tile=tile)
        assert rel_err(out, _reference(x, y)) < (1e-6 if dtype == "complex64" else 1e-13)


@needs_numba
def test_tiled_gemm_reads_non_contiguous_operands():
    """Operands passed as strided views (here every other element over k) are read right."""
    rng = np.random.default_rng(5)
    x = _complex(rng, (1, 2, 1, 8), "complex128")[..., ::2]
    y = _complex(rng, (6, 1, 3, 8), "complex128")[..., ::2]
    xv, yv, ov = (1, 2, 1, 4), (6, 1, 3, 4), (6, 2, 1, 3)
    out = np.empty(ov, dtype="complex128")
    kernels.tiled_gemm(x, y, out, xv, yv, ov)
    assert rel_err(out, _reference(x, y)) < 1e-13


@needs_numba
def test_tiled_gemm_refuses_shared_axes_and_strided_output():
    x = np.ones((3, 2, 4), np.complex64)
    y = np.ones((3, 5, 4), np.complex64)
    out = np.empty((3, 2, 5), np.complex64)
    assert kernels.tiled_shape(x.shape, y.shape, out.shape) is None
    with pytest.raises(ValueError, match="share no outer axis"):
        kernels.tiled_gemm(x, y, out, x.shape, y.shape, out.shape)
    x1 = np.ones((1, 2, 4), np.complex64)
    strided = np.empty((3, 2, 10), np.complex64)[..., ::2]
    with pytest.raises(ValueError, match="C-contiguous"):
        kernels.tiled_gemm(x1, y, strided, x1.shape, y.shape, (3, 2, 5))


def test_tiled_cost_model():
    """The modelled kernel: no small operand over tiled_small; a larger k per row pays off."""
    costs = LocalCosts()
    assert costs.tiled_seconds(10**6, 512, 256, 8) == float("inf")  # 131072 > tiled_small
    assert costs.tiled_seconds(10**6, 64, 128, 8) < float("inf")
    assert costs.tiled_seconds(0, 4, 4, 8) == float("inf")
    t1 = costs.tiled_seconds(2**20, 4, 4, 8)
    t2 = costs.tiled_seconds(2**21, 4, 4, 8)
    assert t2 - costs.tiled_setup == pytest.approx(2 * (t1 - costs.tiled_setup), rel=1e-6)
    # per output element, k = 16 costs less than four times k = 4 (small GEMMs are inefficient)
    assert costs.tiled_seconds(2**20, 4, 16, 8) < 4 * t1


def test_loop_cost_model():
    """Unrolled (n, k) extents run at loop_flop, others at loop_flop_generic; too big: inf."""
    costs = LocalCosts()
    assert costs.loop_seconds(100, 64, 64, 2) == float("inf")  # 8192 > small_inner
    fast = costs.loop_seconds(1000, 2, 4, 4) - costs.loop_setup
    slow = costs.loop_seconds(1000, 2, 5, 4) - costs.loop_setup  # n = 5 is not unrolled
    assert fast == pytest.approx(8.0 * 1000 * 32 * costs.loop_flop)
    assert slow == pytest.approx(8.0 * 1000 * 40 * costs.loop_flop_generic)


def _gate_step(k_extent: int, costs: LocalCosts | None = None):
    """A two-qubit-gate-like x (p q | k) on a large y (a c d | k): outputs interleave."""
    size = {"a": 64, "c": 1024, "d": 2, "p": 2, "q": 2, "k": k_extent}
    la, lb = ("p", "q", "k"), ("a", "c", "d", "k")
    lc = ("a", "p", "c", "q", "d")
    return gemm_step(0, 1, 2, la, lb, lc, size, 8, costs)


def test_kernel_choice_between_loop_and_tiled():
    """The choice follows the modelled times: tiled where its GEMM is worth it, else loop."""
    costs = LocalCosts()
    small_k = _gate_step(4, costs)
    large_k = _gate_step(16, costs)
    for step in (small_k, large_k):
        assert step.kernel == "broadcast" and step.loop
    # the model at these shapes (x: 4 rows of k; y: 64 * 1024 * 2 rows)
    rows = 64 * 1024 * 2
    for step, k in ((small_k, 4), (large_k, 16)):
        t_tiled = costs.tiled_seconds(rows, 4, k, 8)
        t_loop = costs.loop_seconds(step.batch, step.m, step.n, step.k)
        assert step.tiled == (t_tiled < t_loop)
    assert large_k.tiled  # k = 16: one BLAS GEMM per tile beats the scalar loop
    # a slow scatter makes the loop win; a free one the tiled kernel
    assert not _gate_step(16, LocalCosts(tiled_byte=1.0)).tiled
    assert _gate_step(4, LocalCosts(tiled_byte=0.0, tiled_flop=0.0, tiled_setup=0.0)).tiled
    # an outer axis in both operands: never tiled
    size = {"b": 8, "c": 1024, "p": 2, "k": 16}
    step = gemm_step(0, 1, 2, ("b", "p", "k"), ("b", "c", "k"), ("b", "p", "c"), size, 8)
    assert not step.tiled


@needs_numba
@pytest.mark.parametrize("seed", range(3))
def test_plan_with_tiled_steps_matches_einsum(seed):
    """Force the tiled kernel wherever it applies; the contraction must match einsum."""
    net = random_network(seed, n=16, n_out=3)
    forced = LocalCosts(tiled_byte=0.0, tiled_flop=0.0, tiled_setup=0.0, loop_call=1.0,
                        permute_byte=1.0)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=2),
                     costs=forced)
    steps = plan.steps
    assert any(s.tiled for s in steps) or not any(s.loop for s in steps)
    want = np.einsum(net.einsum_equation(), *net.arrays, optimize="greedy")
    assert rel_err(plan.execute(), want) < 1e-10  # a tiny plan: loop steps through matmul
    # with compiled kernels on, the executor runs tiled steps through tiled_gemm
    from qsimdist.executors import local

    calls = []
    original = kernels.tiled_gemm
    try:
        kernels.tiled_gemm = lambda *a, **kw: (calls.append(1), original(*a, **kw))[1]
        pool = local.BufferPool(np, np.complex128)
        root = local.contract_slice(plan, {}, np, pool, np.complex128, compiled=True)
    finally:
        kernels.tiled_gemm = original
    assert len(calls) == sum(1 for s in steps if s.tiled)
    assert rel_err(root.reshape(want.shape), want) < 1e-10


@pytest.mark.parametrize("seed", range(30))  # 13 tiled, 10 plain GEMM, 5 broadcast, 2 loop
def test_kernel_fit_choice_follows_gemm_step(seed):
    """The kernel-fit bench's choice rule (used for its regret numbers) is the planner's."""
    from benchmarks.kernel_fit import choice

    rng = np.random.default_rng(seed)
    # a small operand (gate-like) on a large one, outer modes interleaved, no shared mode
    n_small, n_big = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    small = [f"s{i}" for i in range(n_small)]
    big = [f"b{i}" for i in range(n_big)]
    size = {i: int(rng.choice([2, 4])) for i in small}
    size.update({i: int(rng.choice([2, 8, 64, 1024, 8192])) for i in big})
    size["k"] = int(rng.choice([2, 4, 8, 16, 64]))
    order = list(rng.permutation(small + big))
    la, lb = tuple(small) + ("k",), tuple(big) + ("k",)
    # the bench times the three permutation-free kernels; a margin of infinity keeps the
    # planner among them too
    costs = LocalCosts(transpose_margin=float("inf"))
    step = gemm_step(0, 1, 2, la, lb, tuple(order), size, 8, costs)
    row = {"x": list(step.x_view), "y": list(step.y_view), "out": list(step.out_view)}
    want = ("tiled" if step.tiled else "loop") if step.loop else step.kernel
    want = "broadcast" if want == "gemm" else want  # a plain GEMM: one matmul either way
    assert want in ("loop", "tiled", "broadcast")
    assert choice(row, costs) == want
