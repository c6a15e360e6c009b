"""The CuPy path checked without a device (issue 45): every place that picks an array module
takes it from the run's options, and the local executor runs through an array-module
stand-in (``tests/array_standin.py``) so that a NumPy call slipping into a CuPy run fails
here, without a GPU.

``backend="cupy"`` resolves, through :func:`qsimdist.executors.local.array_module`, to
whatever ``import cupy`` finds: here the stand-in. Its arrays (``DeviceArray``) refuse to
meet host arrays, as CuPy's do, and every step of the contraction is checked to take and
give device arrays. Nothing here is a GPU result.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import qsimdist
from qsimdist.bundled import bundled_circuit
from qsimdist.executors import local

from . import array_standin
from .array_standin import DeviceArray, HostArrayError

PACKAGE = Path(qsimdist.__file__).resolve().parent

CASES = [  # (bundled circuit, pattern, order, dtype, memory limit)
    ("rqc_3x4_m8.qsim", "****" + "0" * 8, "natural", "complex128", "none"),
    ("rqc_3x4_m12.qsim", "0" * 12, "natural", "complex64", "16KiB"),  # sliced
    ("qft_n6.qasm", "******", "qiskit", "complex128", "none"),
    ("ghz_n12.qasm", "1" * 12, "qiskit", "complex64", "none"),
]


@pytest.fixture
def standin(monkeypatch):
    return array_standin.install_into(monkeypatch, nccl=False)


@pytest.fixture
def checked_steps(monkeypatch):
    """Every leaf and step of a run is checked to be a device array; returns the counts."""
    seen = {"leaves": 0, "steps": 0}
    load_leaf, run_step = local.load_leaf, local.run_step

    def checked_leaf(*args, **kwargs):
        leaf = load_leaf(*args, **kwargs)
        if args[3] is not np:  # the run's array module
            assert type(leaf) is DeviceArray, type(leaf)
            seen["leaves"] += 1
        return leaf

    def checked_step(step, a, b, xp, *args, **kwargs):
        out = run_step(step, a, b, xp, *args, **kwargs)
        if xp is not np:
            for name, arr in (("lhs", a), ("rhs", b), ("out", out)):
                assert type(arr) is DeviceArray, f"step {step}: {name} is {type(arr).__name__}"
            seen["steps"] += 1
        return out

    monkeypatch.setattr(local, "load_leaf", checked_leaf)
    monkeypatch.setattr(local, "run_step", checked_step)
    return seen


def _plan(name, pattern, order, dtype, limit):
    return qsimdist.plan(str(bundled_circuit(name)), bitstrings=pattern, order=order,
                         dtype=dtype, memory_limit=limit, max_repeats=4)


def _close(got, ref, dtype) -> None:
    rtol = 1e-12 if dtype == "complex128" else 1e-5
    ref = np.asarray(ref)
    assert np.max(np.abs(got - ref)) <= rtol * max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("name, pattern, order, dtype, limit", CASES,
                         ids=[c[0] + (" sliced" if c[4] != "none" else "") for c in CASES])
def test_local_executor_on_the_standin_equals_numpy(standin, checked_steps, name, pattern,
                                                    order, dtype, limit):
    plan = _plan(name, pattern, order, dtype, limit)
    if limit != "none":
        assert plan.stats.n_slices > 1  # the slices' sum runs on device arrays too
    ref = plan.execute()  # numpy
    assert checked_steps == {"leaves": 0, "steps": 0}
    assert local.array_module("cupy") is standin
    got = plan.execute(backend="cupy")
    assert type(got) is DeviceArray  # the result stays on the "device"
    _close(got.get(), ref, dtype)
    # every step ran at least once (a sliced plan's kept outputs skip some in later slices)
    assert checked_steps["steps"] >= len(plan.steps) > 0 and checked_steps["leaves"] > 0
    # with exponent tracking: every intermediate rescaled on the device
    mantissa, exponent = plan.execute(backend="cupy", strip_exponent=True)
    assert type(mantissa) is DeviceArray
    _close(mantissa.get() * 10.0 ** exponent, ref, dtype)


def test_three_real_gemms_run_on_the_standin(standin, checked_steps, monkeypatch):
    """``gemm="3m"`` (real planes, three GEMMs, written into the output's parts) on every
    step, the minimum extent lowered so that small steps take it."""
    monkeypatch.setattr(local, "GAUSS_MIN_EXTENT", 1)
    plan = _plan(*CASES[0])
    assert any(local.gauss_applies(s) for s in plan.steps)
    ref = plan.execute()
    got = plan.execute(backend="cupy", gemm="3m")
    assert type(got) is DeviceArray
    _close(got.get(), ref, "complex128")


def test_tf32_is_refused_where_the_array_module_cannot_switch(standin):
    plan = _plan(*CASES[3])
    with pytest.raises(qsimdist.MissingDependencyError, match="TF32"):
        plan.execute(backend="cupy", gemm="tf32")


def test_the_standin_catches_a_numpy_array_in_a_device_run(standin, monkeypatch):
    """The harness can fail: a buffer pool that allocates with NumPy instead of the run's
    module (the slip this test exists to catch) makes the device run fail."""
    plan = _plan(*CASES[0])

    def host_get(self, shape):  # BufferPool.get with a NumPy allocation slipped in
        return np.empty(shape, dtype=self.dtype)

    monkeypatch.setattr(local.BufferPool, "get", host_get)
    with pytest.raises(HostArrayError, match="NumPy array"):
        plan.execute(backend="cupy")
    plan.execute()  # numpy runs are unaffected


def test_a_host_leaf_is_caught(standin, monkeypatch):
    plan = _plan(*CASES[2])
    load_leaf = local.load_leaf

    def host_leaf(plan, k, assignment, xp, dtype):  # a leaf left in host memory
        return np.asarray(load_leaf(plan, k, assignment, np, dtype))

    monkeypatch.setattr(local, "load_leaf", host_leaf)
    with pytest.raises(HostArrayError):
        plan.execute(backend="cupy")


def test_the_standin_refuses_as_cupy_does(standin):
    dev = standin.asarray(np.arange(4.0))
    host = np.arange(4.0)
    assert type(dev) is DeviceArray and type(standin.zeros(3)) is DeviceArray
    for slip in (lambda: dev + host, lambda: standin.matmul(host, host),
                 lambda: np.multiply(dev, host), lambda: dev.__setitem__(slice(None), host),
                 lambda: np.concatenate([dev, host])):
        with pytest.raises(HostArrayError):
            slip()
    assert type(dev + dev) is DeviceArray and type(np.sqrt(dev)) is DeviceArray
    assert type(standin.asnumpy(dev)) is np.ndarray and float(standin.max(dev)) == 3.0


def test_only_the_array_module_resolver_imports_cupy():
    """Every place that picks an array module takes it from the run's options
    (``backend`` -> :func:`~qsimdist.executors.local.array_module`): no other module of
    the package imports CuPy as its array module."""
    allowed = {
        ("executors/local.py", "import cupy"),  # array_module: the one resolver
        ("executors/local.py", "from cupy._core import _routines_linalg as rl"),  # TF32 switch
        ("executors/comm.py", "from cupy.cuda import nccl"),  # NCCL, not an array module
    }
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            text = line.strip()
            if re.match(r"(import cupy\b|from cupy(\.[\w.]+)? import )", text):
                found.add((path.relative_to(PACKAGE).as_posix(), text))
    assert found <= allowed, sorted(found - allowed)
    assert ("executors/local.py", "import cupy") in found
