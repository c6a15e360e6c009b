"""Exponents through qsimdist: strip_exponent in the quimb hook, tn.exponent on every path.

References are quimb's own results computed without the hook (quimb rescales
each pairwise step itself when asked to strip the exponent), and, for the
values far outside float64's range, a product whose scale is known exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import quimb.tensor as qtn

import qsimdist
import qsimdist.quimb as qq
from qsimdist.errors import InvalidInputError
from qsimdist.executors import local
from qsimdist.frontends import network_from_quimb
from qsimdist.planner.plan import build_plan

RTOL = 1e-10


def same_stripped(got, ref, rtol: float = RTOL) -> bool:
    """Two ``(mantissa, exponent)`` pairs (mantissas scalars or Tensors) give one value."""
    (gm, ge), (rm, re) = got, ref
    gm = np.asarray(gm.data if isinstance(gm, qtn.Tensor) else gm)
    rm = np.asarray(rm.data if isinstance(rm, qtn.Tensor) else rm)
    if gm.shape != rm.shape:
        return False
    # put both on the reference's exponent (their difference is small when they agree)
    if abs(float(ge) - float(re)) > 300:
        return False
    shift = 10.0 ** (float(ge) - float(re))
    return float(np.max(np.abs(gm * shift - rm), initial=0.0)) <= rtol * max(
        float(np.max(np.abs(rm), initial=0.0)), 1e-300)


# ----------------------------------------------------------- the reproducers
def test_small_mps_norm_strip_exponent_equals_quimb():
    psi = qtn.MPS_rand_state(6, 4, seed=42)
    psi.multiply_each_(1e-40)
    tn = psi.make_norm()
    ref = tn.contract(all, strip_exponent=True)  # quimb alone: (1.0, -480.0)
    assert abs(float(ref[1]) + 480.0) < 1e-9
    with qq.use() as hook:
        got = tn.contract(all, strip_exponent=True)
    assert hook.routed == 1 and hook.fallbacks == 0
    assert same_stripped(got, ref)
    assert abs(abs(got[0]) - 1.0) < 1e-12 and abs(float(got[1]) - float(ref[1])) < 1e-9


def test_large_ising_partition_function_strip_exponent_equals_quimb():
    tn = qtn.TN3D_classical_ising_partition_function(3, 3, 3, beta=0.3)
    tn.multiply_each_(1e20)
    ref = tn.contract(all, strip_exponent=True)  # quimb alone: (1.0, 549.34...)
    assert float(ref[1]) > 500
    with qq.use() as hook:
        got = tn.contract(all, strip_exponent=True)
    assert hook.routed == 1
    assert same_stripped(got, ref) and abs(float(got[1]) - float(ref[1])) < 1e-9
    assert math.isfinite(got[0]) and abs(abs(got[0]) - 1.0) < 1e-12


# ------------------------------------------------------------- beyond any float's range
def _ring(n: int, scale: float, seed: int):
    """A ring of ``n`` random 2x2 matrices, each times ``scale``: the trace of their product."""
    rng = np.random.default_rng(seed)
    mats = [rng.normal(size=(2, 2)) + 1.5 * np.eye(2) for _ in range(n)]
    tensors = [qtn.Tensor(scale * m, inds=(f"b{k}", f"b{(k + 1) % n}")) for k, m in enumerate(mats)]
    # reference: the product with a normalisation per step, log10 kept exactly
    acc, log10 = np.eye(2), 0.0
    for m in mats:
        acc = acc @ m
        big = np.abs(acc).max()
        acc, log10 = acc / big, log10 + math.log10(big)
    value = np.trace(acc)
    return qtn.TensorNetwork(tensors), (value / abs(value), log10 + math.log10(abs(value))
                                        + n * math.log10(scale))


@pytest.mark.parametrize("scale", [1e-40, 1e40])
def test_values_far_outside_float64_range(scale):
    tn, (sign, log10) = _ring(200, scale, seed=3)
    assert abs(log10) > 7000  # 10**(+-7000): no float holds it
    with qq.use():
        mantissa, exponent = tn.contract(all, strip_exponent=True)
    assert abs(float(exponent) - log10) < 1e-9 * abs(log10)
    assert abs(mantissa - sign) < 1e-9
    # quimb alone agrees, and so does qsimdist.quimb.contract
    assert same_stripped((mantissa, exponent), tn.contract(all, strip_exponent=True), rtol=1e-8)
    assert same_stripped(qq.contract(tn, strip_exponent=True), (mantissa, exponent))


def test_complex64_plan_rescales_within_its_own_range():
    """complex64 tops out near 3e38: 12 tensors of 1e-30 would underflow to 0 unscaled."""
    tn, (sign, log10) = _ring(12, 1e-30, seed=4)
    tn = tn.astype("complex64")
    plain = qq.contract(tn, output_inds=())
    assert plain == 0  # the unscaled run underflows ...
    mantissa, exponent = qq.contract(tn, strip_exponent=True)  # ... the scaled one does not
    assert abs(float(exponent) - log10) < 1e-4 and abs(mantissa - sign) < 1e-4


def test_tensor_output_mantissa_and_exponent():
    peps = qtn.PEPS.rand(2, 3, bond_dim=2, seed=6, dtype="complex128")
    peps.multiply_each_(1e-60)
    out = (peps.site_ind(0, 0), peps.site_ind(1, 2))
    ref = peps.contract(all, output_inds=out, strip_exponent=True)
    with qq.use():
        got = peps.contract(all, output_inds=out, strip_exponent=True)
    assert isinstance(got[0], qtn.Tensor) and got[0].inds == out
    assert same_stripped(got, ref)
    assert abs(float(np.abs(got[0].data).max()) - 1.0) < 1e-12  # cotengra's convention


def test_sliced_strip_exponent_with_exactly_zero_slices():
    """Slices are summed at a common exponent; exactly zero slices do not set it."""
    peps = qtn.PEPS.rand(3, 3, bond_dim=3, seed=2, dtype="complex128")
    norm = peps.make_norm(layer_tags=None)
    for t in norm:  # every entry with an index at value 0 is zero: slices fixing one are zero
        data = t.data.copy()
        for axis in range(data.ndim):
            index = [slice(None)] * data.ndim
            index[axis] = 0
            data[tuple(index)] = 0.0
        t.modify(data=data)
    norm.multiply_each_(1e-30)
    ref = norm.contract(all, output_inds=(), strip_exponent=True, optimize="auto-hq")
    prepared = qq.prepare([t.data for t in norm], [t.inds for t in norm], (), None)
    (mantissa, exponent), plan = qq.run_network(
        prepared.network, qq.ContractOptions(memory_limit="24KiB"), "complex128",
        strip_exponent=True)
    assert plan.stats.n_slices > 1 and float(ref[1]) < -400
    assert same_stripped((mantissa.item(), exponent), ref)
    with qq.use(memory_limit="24KiB"):
        assert same_stripped(norm.contract(all, output_inds=(), strip_exponent=True), ref)


# ----------------------------------------------------------------------- check_zero
def _zero_network():
    tn = qtn.TN_rand_reg(6, 3, D=2, seed=1, dtype="float64")
    t = tn.tensors[2]
    t.modify(data=np.zeros_like(t.data))
    return tn


def test_check_zero_exact_zero_is_zero_mantissa_and_exponent_zero():
    tn = _zero_network()
    ref = tn.contract(all, strip_exponent=True, check_zero=True)
    assert ref == (0.0, 0.0)  # quimb's convention
    with qq.use():
        assert tn.contract(all, strip_exponent=True, check_zero=True) == (0.0, 0.0)
        # without check_zero quimb divides by zero (nan); qsimdist always checks
        assert tn.contract(all, strip_exponent=True) == (0.0, 0.0)
    # a zero intermediate amid huge values: no 0 * inf on the way
    tn.multiply_each_(1e200)
    with qq.use():
        assert tn.contract(all, strip_exponent=True, check_zero=True) == (0.0, 0.0)
    assert qq.contract(tn, strip_exponent=True) == (0.0, 0.0)


def test_accumulate_scaled_drops_zero_terms_and_keeps_the_larger_exponent():
    pool = local.BufferPool(np, np.complex128)
    r, e = local.accumulate_scaled(None, None, np.zeros(2, complex), None, pool)
    r, e = local.accumulate_scaled(r, e, np.array([0.5, 0.25 + 0j]), -2000, pool)
    assert e == -2000 and np.array_equal(r, [0.5, 0.25])  # the zero slice set nothing
    r, e = local.accumulate_scaled(r, e, np.array([0.5, 0j]), -1999, pool)
    assert e == -1999 and np.array_equal(r, [0.75, 0.125])
    r, e = local.accumulate_scaled(r, e, np.zeros(2, complex), None, pool)
    assert e == -1999 and np.array_equal(r, [0.75, 0.125])
    mantissa, exponent = local.decimal_mantissa(r, e, np)
    assert np.array_equal(mantissa, [1.0, 1 / 6]) or np.allclose(mantissa, [1.0, 1 / 6])
    assert abs(exponent - (-1999 * math.log10(2) + math.log10(0.75))) < 1e-12
    assert local.decimal_mantissa(np.zeros(3), None, np)[1] == 0.0


def test_strip_power_of_two_is_exact_across_the_float_range():
    for big in (5e-324, 1e-310, 1e-30, 1.0, 3.0, 1e300, 1.7e308):
        arr = np.array([big, -big / 3, 0.0])
        before = arr.copy()
        e = local.strip_power_of_two(arr, np)
        assert 0.5 <= np.abs(arr).max() < 1.0
        back = arr.copy()
        local.scale_by_power_of_two(back, e)
        assert np.array_equal(back, before)  # only binary exponents changed
    assert local.strip_power_of_two(np.zeros(4), np) is None


# ------------------------------------------------------------------ tn.exponent
def _scaled_back(seed: int):
    """A network whose contraction alone is ~1e+600 (no float holds it) and whose
    ``exponent`` brings the value back into float64's range."""
    tn, (_, log10) = _ring(30, 1e20, seed=seed)
    tn.exponent = -round(log10)
    return tn


def test_exponent_on_every_path():
    tn = _scaled_back(7)
    raw = tn.copy()
    raw.exponent = 0.0
    m, e = raw.contract(all, strip_exponent=True)
    want = m * 10.0 ** (float(e) + tn.exponent)  # in float64's range
    assert 1e-300 < abs(want) < 1e300 and abs(tn.exponent) > 300
    assert abs(qq.contract(tn) - want) <= RTOL * abs(want)
    assert abs(complex(qsimdist.contract(tn, dtype="complex128")) - want) <= RTOL * abs(want)
    # under the hook quimb applies tn.exponent itself, after the contraction (which
    # overflows here, as in quimb alone); stripped, the exponent is in the returned one
    ref = tn.contract(all, strip_exponent=True)
    assert same_stripped(qq.contract(tn, strip_exponent=True), ref)
    with qq.use():
        assert same_stripped(tn.contract(all, strip_exponent=True), ref)
    # the network's exponent travels with the IR
    assert network_from_quimb(tn).meta["exponent"] == tn.exponent


def test_exponent_on_an_open_output():
    tn = qtn.TN_rand_reg(6, 3, D=2, seed=3, dtype="complex128")
    tn.tensors[0].new_ind("open", size=3)
    tn.exponent = -2.5
    ref = tn.contract(all)
    got = qsimdist.contract(tn, dtype="complex128")
    assert got.shape == (3,) and np.allclose(got, ref.data, rtol=RTOL, atol=0)
    assert np.allclose(qq.contract(tn).data, ref.data, rtol=RTOL, atol=0)
    with qq.use() as hook:
        t = tn.contract(all)
    assert hook.routed == 1 and np.allclose(t.data, ref.data, rtol=RTOL, atol=0)
    bare = tn.copy()
    bare.exponent = 0.0
    assert np.allclose(t.data, bare.contract(all).data * 10**-2.5, rtol=RTOL, atol=0)


def test_bad_network_exponent_is_refused_in_one_line():
    net = network_from_quimb(qtn.TN_rand_reg(4, 3, D=2, seed=0))
    net.meta["exponent"] = "big"
    with pytest.raises(InvalidInputError, match="exponent"):
        qsimdist.contract(net)


# ------------------------------------------------------------------- output order
def _unsorted_outputs():
    a = qtn.Tensor(np.arange(6.0).reshape(2, 3) + 1, inds=("z", "m"))
    b = qtn.Tensor(np.arange(12.0).reshape(3, 4) - 5, inds=("m", "a"))
    c = qtn.Tensor(np.arange(5.0) + 2, inds=("q",))
    return qtn.TensorNetwork([a, b, c])


def test_output_order_is_the_users_not_sorted():
    tn = _unsorted_outputs()
    ref = tn.contract(all)  # quimb's default: z, a, q (first appearance)
    assert ref.inds == ("z", "a", "q")
    net = network_from_quimb(tn)
    assert net.output == ("z", "a", "q")
    got = qsimdist.contract(tn, dtype="complex128")
    assert got.shape == (2, 4, 5) and np.allclose(got, ref.data, rtol=RTOL, atol=0)
    t = qq.contract(tn)
    assert t.inds == ref.inds and np.allclose(t.data, ref.data, rtol=RTOL, atol=0)
    for out in [("q", "a", "z"), ("a", "z", "q")]:
        want = tn.contract(all, output_inds=out).data
        assert network_from_quimb(tn, out).output == out
        assert np.allclose(qsimdist.contract(tn, output_inds=out, dtype="complex128"), want,
                           rtol=RTOL, atol=0)
        with qq.use():
            assert tn.contract(all, output_inds=out).inds == out
    with pytest.raises(InvalidInputError, match="output_inds is for quimb"):
        qsimdist.contract(net, output_inds=("z",))


def test_one_conversion_for_every_path():
    """network_from_quimb and quimb.prepare build the same IR."""
    tn = _unsorted_outputs()
    tn.exponent = 1.25
    net = network_from_quimb(tn)
    prepared = qq.prepare([t.data for t in tn], [t.inds for t in tn], None, exponent=1.25)
    assert net.inputs == prepared.network.inputs and net.output == prepared.network.output
    assert net.meta == prepared.network.meta == {"exponent": 1.25}
    assert prepared.exponent == 1.25


# --------------------------------------------------------------------------- MPI
MPI_SCRIPT = """
import numpy as np
import quimb.tensor as qtn
from mpi4py import MPI

import qsimdist
import qsimdist.quimb as qq
from qsimdist.engine.coordination import distribute, profile_for

comm = MPI.COMM_WORLD
# the issue's reproducers through the hook, distributed
psi = qtn.MPS_rand_state(6, 4, seed=42)
psi.multiply_each_(1e-40)
tn = psi.make_norm()
want = tn.contract(all, strip_exponent=True)
with qq.use(executor="mpi", profile="local-cpu", memory_limit="64KiB") as stats:
    got = tn.contract(all, strip_exponent=True)
assert stats.routed >= 1, stats
assert abs(got[1] - want[1]) < 1e-9 and abs(got[0] - want[0]) < 1e-9 * abs(want[0]), (got, want)

# the executor on a schedule with all-to-alls and sharded steps, every leaf times 2^-100:
# beyond float range unscaled; scaled, value / 2^(-150 * leaves) equals the plain value
base = qsimdist.plan("circuits/rqc_4x5_m12.qasm", bitstrings="01010101010101010101",
                     memory_limit="none")
for log2_memory in range(20, 13, -1):  # the roomiest memory whose schedule redistributes
    plan = distribute(base, profile_for("local-cpu", 1 << log2_memory), comm.Get_size())
    if plan.schedule.predicted.n_redistributions > 0:
        break
assert plan.schedule.predicted.n_redistributions > 0
plain = complex(plan.execute(executor="mpi", comm=comm))
tiny = [np.asarray(a) * 2.0**-100 for a in plan.network.arrays]  # complex64 holds 2^-100
net = plan.network
plan.network = type(net)(net.inputs, net.output, net.size_dict, tiny)
mant, exp = plan.execute(executor="mpi", comm=comm, strip_exponent=True)
shift = -100 * len(tiny) * np.log10(2.0)
assert abs(abs(complex(mant)) - 1.0) < 1e-6, mant
value_exp = exp - shift  # log10 of |plain| recovered from the stripped run
assert abs(value_exp - np.log10(abs(plain))) < 1e-5, (value_exp, np.log10(abs(plain)))
phase = complex(mant) / (plain / abs(plain))
assert abs(phase - 1) < 1e-5, phase
print("ok", comm.Get_rank())
"""


@pytest.mark.mpi
def test_strip_exponent_under_the_mpi_executor(tmp_path):
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("mpiexec") is None:  # pragma: no cover - the test extra installs mpich
        pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'")
    script = tmp_path / "strip.py"
    script.write_text(MPI_SCRIPT)
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))  # this checkout's qsimdist on every rank
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, str(script)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ok") == 2


def test_executor_strip_exponent_on_a_single_leaf_plan():
    tn = qtn.TensorNetwork([qtn.Tensor(np.array([3e-200, -6e-200]), inds=("x",))])
    net = network_from_quimb(tn)
    plan = build_plan(net, [], (), "complex128")
    mantissa, exponent = local.execute(plan, strip_exponent=True)
    assert np.allclose(mantissa, [0.5, -1.0], rtol=1e-15, atol=0)
    assert abs(exponent - math.log10(6e-200)) < 1e-12
