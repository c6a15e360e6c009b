"""Issue 12 (hardening) for the planner: the path cache, determinism, the first run,
cotengra interoperability and the compiled kernel's dispatch."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
import time
import warnings

import cotengra as ctg
import numpy as np
import pytest

import qsimdist
from qsimdist import Network
from qsimdist.planner import path_cache as cachemod
from qsimdist.planner.path import PathOptions, find_path
from qsimdist.planner.plan import build_plan, make_plan

from .conftest import ROOT, rel_err

GHZ = ROOT / "circuits" / "ghz_n12.qasm"


def random_network(seed: int, n: int = 24, n_out: int = 2) -> Network:
    """Indices with multi-character names (as circuits give them), so cotengra's
    einsum-based ``contract`` cannot take them as they are."""
    inputs, output, _, size_dict = ctg.utils.rand_equation(
        n, 3, n_out=n_out, n_hyper_in=2, n_hyper_out=1 if n_out else 0, d_min=2, d_max=3,
        seed=seed,
    )
    rename = {s: f"ix{k}" for k, s in enumerate(sorted(size_dict))}
    return Network(
        [tuple(rename[i] for i in t) for t in inputs],
        tuple(rename[i] for i in output),
        {rename[i]: d for i, d in size_dict.items()},
    ).with_random_arrays(seed)


def _is_valid_ssa(path, n):
    used = [x for p in path for x in p]
    return (
        len(path) == n - 1
        and all(len(p) == 2 and p[0] != p[1] and all(0 <= x < n + k for x in p)
                for k, p in enumerate(path))
        and len(used) == len(set(used))
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty path cache (disk and memory) for one test."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("QSIMDIST_CACHE_DIR", str(folder))
    monkeypatch.setattr(cachemod, "_MEMORY_CACHE", {})
    monkeypatch.setattr(cachemod, "_WARNED", set(), raising=False)
    return folder


def _entry_file(net, options):
    """Search once to learn the cache file for (net, options), then forget it in memory."""
    res = find_path(net, options)
    files = list(cachemod.cache_dir().glob("*.json"))
    assert len(files) == 1 and not res.from_cache
    cachemod._MEMORY_CACHE.clear()
    return files[0], res


# ---------------------------------------------------------------- 8: the path cache

BAD_ENTRIES = {
    "non_utf8": b"\xff\xfe\x00garbage",
    "a_list": b"[]",
    "sliced_out_of_range": json.dumps({"ssa_path": None, "sliced": [10**6]}).encode(),
    "path_reuses_a_node": None,  # filled in from the good path below
    "path_too_short": None,
    "missing_key": json.dumps({"ssa_path": []}).encode(),
    "bool_indices": None,
}


@pytest.mark.parametrize("kind", sorted(BAD_ENTRIES))
def test_a_bad_cache_entry_is_a_miss_warned_once_and_rewritten(cache, kind):
    net = random_network(1)
    opts = PathOptions(max_repeats=2)
    cfile, good = _entry_file(net, opts)
    good_path = [list(p) for p in good.ssa_path]
    raw = BAD_ENTRIES[kind]
    if kind == "sliced_out_of_range":
        raw = json.dumps({"ssa_path": good_path, "sliced": [10**6]}).encode()
    elif kind == "path_reuses_a_node":
        bad = [list(p) for p in good_path]
        bad[1] = [bad[0][0], bad[1][1]]
        raw = json.dumps({"ssa_path": bad, "sliced": []}).encode()
    elif kind == "path_too_short":
        raw = json.dumps({"ssa_path": good_path[:-1], "sliced": []}).encode()
    elif kind == "bool_indices":
        raw = json.dumps({"ssa_path": [[True, False]] + good_path[1:], "sliced": []}).encode()
    cfile.write_bytes(raw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = find_path(net, opts)
    assert not res.from_cache
    assert _is_valid_ssa(res.ssa_path, net.num_tensors)
    msgs = [str(w.message) for w in caught if "path cache" in str(w.message)]
    assert len(msgs) == 1 and "\n" not in msgs[0], msgs
    # rewritten with a valid entry, which the next run takes from the cache
    entry = json.loads(cfile.read_text())
    assert _is_valid_ssa(entry["ssa_path"], net.num_tensors)
    cachemod._MEMORY_CACHE.clear()
    again = find_path(net, opts)
    assert again.from_cache and again.ssa_path == res.ssa_path
    # and the plan it gives is right
    plan = build_plan(net, again.ssa_path, again.sliced, "complex128")
    ref = np.einsum(net.einsum_equation(), *net.arrays, optimize="greedy")
    assert rel_err(plan.execute(), ref) < 1e-10


def test_a_valid_sliced_entry_is_taken_from_the_cache(cache):
    net = random_network(2)
    opts = PathOptions(max_repeats=2)
    full = find_path(net, PathOptions(max_repeats=2, cache=False))
    target = build_plan(net, full.ssa_path).stats.max_intermediate // 4
    res = find_path(net, opts, target_size=target)
    assert res.sliced and not res.from_cache
    cachemod._MEMORY_CACHE.clear()
    again = find_path(net, opts, target_size=target)
    assert again.from_cache and again.sliced == res.sliced and again.ssa_path == res.ssa_path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_in_the_cache_does_not_block(cache):
    net = random_network(3)
    opts = PathOptions(max_repeats=2)
    cfile, _ = _entry_file(net, opts)
    cfile.unlink()
    os.mkfifo(cfile)
    out: dict = {}

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out["res"] = find_path(net, opts)
            out["warnings"] = [str(w.message) for w in caught]

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():  # release the blocked reader so the test run can go on
        fd = os.open(cfile, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(10)
        pytest.fail("reading a FIFO in the path cache blocked")
    assert _is_valid_ssa(out["res"].ssa_path, net.num_tensors)
    assert any("path cache" in w for w in out["warnings"])
    assert cfile.is_file()  # replaced by a regular file holding a valid entry


def test_an_unwritable_cache_folder_warns_once_and_runs(cache, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cachemod, "atomic_write_text", refuse)
    opts = PathOptions(max_repeats=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in (4, 5):
            net = random_network(seed)
            res = find_path(net, opts)
            assert _is_valid_ssa(res.ssa_path, net.num_tensors)
    msgs = [str(w.message) for w in caught if "path cache" in str(w.message)]
    assert len(msgs) == 1 and "Permission denied" in msgs[0], msgs


def test_a_cache_folder_under_a_regular_file_warns_and_runs(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("QSIMDIST_CACHE_DIR", str(blocker / "sub"))
    monkeypatch.setattr(cachemod, "_MEMORY_CACHE", {})
    monkeypatch.setattr(cachemod, "_WARNED", set(), raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = qsimdist.amplitudes(GHZ, ["111111111111", "000000000000", "101010101010"])
        net = random_network(6)
        found = find_path(net, PathOptions(max_repeats=2))
    assert np.allclose(res.amplitudes, [2**-0.5, 2**-0.5, 0], atol=1e-6)
    assert _is_valid_ssa(found.ssa_path, net.num_tensors)
    msgs = [str(w.message) for w in caught if "path cache" in str(w.message)]
    assert len(msgs) == 1 and str(blocker) in msgs[0], msgs


def test_concurrent_writers_leave_a_valid_entry(cache):
    net = random_network(7)
    opts = PathOptions(max_repeats=2)
    cfile, _ = _entry_file(net, opts)
    errors: list = []

    def writer():
        try:
            for _ in range(20):
                cachemod._MEMORY_CACHE.clear()
                cfile.unlink(missing_ok=True)
                find_path(net, opts)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    entry = json.loads(cfile.read_text())
    assert _is_valid_ssa(entry["ssa_path"], net.num_tensors)
    assert not list(cfile.parent.glob(".*.tmp"))  # no temporary files left behind


# ---------------------------------------------------------------- 12: determinism

def test_two_fresh_searches_give_the_same_path_and_bits():
    from qiskit.circuit.random import random_circuit

    qc = random_circuit(12, 10, max_operands=2, seed=11)
    runs = []
    for _ in range(2):
        plan = qsimdist.plan(qc, bitstrings="0" * 6 + "*" * 6, memory_limit="none",
                             path_options=PathOptions(max_repeats=6, cache=False))
        runs.append((plan.path, plan.execute()))
    assert runs[0][0] == runs[1][0]
    assert runs[0][1].tobytes() == runs[1][1].tobytes()


def test_seed_reaches_the_search_and_is_validated():
    net = random_network(8, n=40)
    a = find_path(net, PathOptions(max_repeats=6, cache=False, seed=1))
    b = find_path(net, PathOptions(max_repeats=6, cache=False, seed=1))
    assert a.ssa_path == b.ssa_path
    assert PathOptions().seed == 0
    with pytest.raises(qsimdist.QsimdistError, match="seed"):
        PathOptions(seed=-1)


def test_a_search_leaves_the_global_random_state_alone():
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    find_path(random_network(9, n=40), PathOptions(max_repeats=4, cache=False))
    assert random.random() == expected



@pytest.fixture
def hyper_calls(monkeypatch) -> list:
    """``max_repeats`` and ``max_time`` of every search a cotengra HyperOptimizer made while
    the test runs (one optimiser may search several times, its sampler's state kept)."""
    calls: list = []

    class Spy(ctg.HyperOptimizer):
        def search(self, *args, **kwargs):
            calls.append({"max_repeats": self.max_repeats, "max_time": self.max_time,
                          "optimiser": id(self)})
            return super().search(*args, **kwargs)

    monkeypatch.setattr(ctg, "HyperOptimizer", Spy)
    return calls

# ---------------------------------------------------------------- 13: first run

def test_planning_a_trivial_network_skips_the_hyper_optimiser(hyper_calls):
    calls = hyper_calls
    # 36 tensors, tiny total cost: greedy is all it needs
    from qsimdist.frontends import amplitude_network, load

    net = amplitude_network(load(GHZ), "111111111111", "qiskit")
    assert net.num_tensors > 12
    res = find_path(net, PathOptions(cache=False))
    assert calls == []
    plan = build_plan(net, res.ssa_path, res.sliced, "complex128")
    assert abs(plan.execute() - 2**-0.5) < 1e-12
    # the API's planning of ghz_n12 too
    res = qsimdist.amplitudes(GHZ, ["111111111111", "011111111111"],
                              path_options=PathOptions(cache=False))
    assert calls == []
    assert np.allclose(res.amplitudes, [2**-0.5, 0], atol=1e-6)


def test_an_expensive_network_still_gets_the_hyper_optimiser(hyper_calls, monkeypatch):
    """A costly network gets trials first (no clock), then a search bounded by time that
    scales with its predicted run, capped by MAX_SCALED_SEARCH_SECONDS (patched small)."""
    from qsimdist.hardware import costs

    monkeypatch.setattr(costs, "MAX_SCALED_SEARCH_SECONDS", 3.0)
    calls = hyper_calls
    inputs, output, _, size_dict = ctg.utils.rand_equation(40, 3, d_min=16, d_max=16, seed=1)
    net = Network(inputs, output, size_dict)
    started = time.perf_counter()
    find_path(net, PathOptions(cache=False))
    assert calls[0]["max_repeats"] >= 1 and calls[0]["max_time"] is None
    timed = [c["max_time"] for c in calls if c["max_time"] is not None]
    assert timed and all(0 < t <= 3.0 for t in timed)
    assert calls[-1]["max_time"] is not None  # the trials came first, the clock after
    assert len({c["optimiser"] for c in calls}) == 1  # the scaled search goes on, not anew
    assert time.perf_counter() - started < 60


def test_a_users_max_time_bounds_the_whole_search(hyper_calls):
    """With max_time given, one hyper-optimiser search under that budget: no trial batches
    (each of which would restart cotengra's clock) and no scaled search after it."""
    calls = hyper_calls
    inputs, output, _, size_dict = ctg.utils.rand_equation(40, 3, d_min=16, d_max=16, seed=1)
    net = Network(inputs, output, size_dict)
    started = time.perf_counter()
    find_path(net, PathOptions(cache=False, max_time=2.0))
    assert len(calls) == 1 and calls[0]["max_time"] == 2.0
    assert time.perf_counter() - started < 30


def test_first_run_of_ghz_loads_neither_quimb_nor_numba(tmp_path):
    """A trivially cheap circuit is contracted as it is: no quimb simplification (whose
    numba compilation took ~30 s on a fresh machine) and no compiled kernel."""
    code = (
        "import sys, qsimdist\n"
        f"r = qsimdist.amplitudes({str(GHZ)!r}, ['111111111111', '000000000000'])\n"
        "print(repr(list(r.amplitudes)))\n"
        "print(sorted(m for m in ('quimb', 'quimb.tensor', 'numba') if m in sys.modules))\n"
    )
    env = dict(os.environ, QSIMDIST_CACHE_DIR=str(tmp_path / "q"),
               NUMBA_CACHE_DIR=str(tmp_path / "n"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300, check=True).stdout.splitlines()
    amps = np.array(eval(out[0]))  # a list of complex literals printed by this test
    assert np.allclose(amps, [2**-0.5, 2**-0.5], atol=1e-6)
    assert out[1] == "[]"


def test_simplification_still_runs_where_it_pays():
    from qiskit.circuit.random import random_circuit

    from qsimdist.frontends import amplitude_network
    from qsimdist.frontends.qiskit_circuit import from_qiskit
    from qsimdist.planner.simplify import simplify

    net = amplitude_network(from_qiskit(random_circuit(16, 12, max_operands=2, seed=2)),
                            "*" * 12 + "0" * 4, "qiskit")
    assert simplify(net).num_tensors < net.num_tensors


# ---------------------------------------------------------------- 14b: the compiled kernel

def test_compiled_kernel_is_not_retyped_on_every_call():
    """The unrolled kernel used numba.literally: every call re-ran numba's type inference
    (~40 ms) before dispatching, which made a 2,486-step plan spend 75 s compiling."""
    from numba.core import dispatcher

    from qsimdist.executors import kernels

    if not kernels.available():
        pytest.skip("numba is not installed")
    x = np.ones((64, 1, 2, 2), np.complex64)
    y = np.ones((1, 8, 2, 2), np.complex64)
    out = np.empty((64, 8, 2, 2), np.complex64)
    kernels.small_gemm(x, y, out, x.shape, y.shape, out.shape)  # compile (or load) once
    calls = []
    original = dispatcher.Dispatcher._compile_for_args

    def spy(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)

    dispatcher.Dispatcher._compile_for_args = spy
    try:
        for _ in range(3):
            kernels.small_gemm(x, y, out, x.shape, y.shape, out.shape)
    finally:
        dispatcher.Dispatcher._compile_for_args = original
    assert calls == []
    assert np.allclose(out, 2.0)


def test_budgeted_search_on_many_tensors_is_bounded(hyper_calls):
    """Thousands of tensors with a cheap contraction: the default search may not spend
    more than the contraction it could save (no reconfiguration trial of ~5 ms per tensor)."""
    calls = hyper_calls
    # a long chain of 2x2 matrices: cheap to contract, many tensors
    rng = np.random.default_rng(0)
    n = 3000
    inputs = [(f"c{k}", f"c{k + 1}") for k in range(n)]
    net = Network(inputs, ("c0", f"c{n}"), {f"c{k}": 2 for k in range(n + 1)},
                  [np.linalg.qr(rng.standard_normal((2, 2)))[0] for _ in range(n)])
    res = find_path(net, PathOptions(cache=False))
    assert calls == []
    assert _is_valid_ssa(res.ssa_path, n)
    plan = build_plan(net, res.ssa_path, res.sliced, "complex128")
    ref = functools.reduce(np.dot, net.arrays)  # (multi_dot's chain-order search is cubic)
    assert rel_err(plan.execute(), ref) < 1e-10


# ---------------------------------------------------------------- 15: cotengra interop

def _readme_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("`plan.network` is the simplified network")
    m = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert m, "README: the cotengra paragraph has no python block"
    return m.group(1)


@pytest.mark.parametrize("sliced", [False, True])
def test_readme_cotengra_snippet_gives_the_plans_value(sliced):
    net = random_network(12, n=20, n_out=2)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4, cache=False))
    if sliced:
        plan = make_plan(net, dtype="complex128", memory_limit=plan.stats.peak_bytes // 3,
                         path_options=PathOptions(max_repeats=4, cache=False))
        assert plan.sliced
    else:
        assert not plan.sliced
    scope = {"plan": plan, "cotengra": ctg, "ctg": ctg}
    exec(_readme_snippet(), scope)  # the README's code, as written
    value = scope["value"]
    expected = plan.execute()
    assert np.asarray(value).shape == expected.shape
    assert rel_err(value, expected) < 1e-10
    tree, arrays = plan.contraction_tree()
    assert len(tree.sliced_inds) == len(plan.sliced)
    assert tree.nslices == plan.stats.n_slices
    assert len(arrays) == plan.network.num_tensors


def test_contraction_tree_of_a_circuit_plan():
    plan = qsimdist.plan(GHZ, bitstrings="1" * 9 + "***", memory_limit="none")
    tree, arrays = plan.contraction_tree()
    assert np.allclose(tree.contract(arrays), plan.execute(), atol=1e-6)


def test_a_users_seed_survives_max_repeats():
    """The path options' coercion once kept every field but the seed when --max-repeats was
    given."""
    from qsimdist.planner.path import PathOptions

    opts = PathOptions.coerce(PathOptions(seed=17, minimize="size"), None, 3)
    assert (opts.seed, opts.minimize, opts.max_repeats) == (17, "size", 3)
    opts = PathOptions.coerce({"seed": 5}, 2.5, None)
    assert (opts.seed, opts.max_time, opts.max_repeats) == (5, 2.5, None)


@pytest.mark.parametrize("bad", [{"seeds": 1}, ["seed"], 3])
def test_path_options_refuse_unknown_keys_and_types_in_one_line(bad):
    from qsimdist.errors import InvalidInputError
    from qsimdist.planner.path import PathOptions

    with pytest.raises(InvalidInputError, match="valid: max_repeats, max_time"):
        PathOptions.coerce(bad)
