"""The statevector route's engines: qsimdist's compiled kernel and qsim (the ``qsim`` extra).

qsim's tests need ``qsimcirq`` (in the ``test`` extra); they skip, saying so, where
it is absent.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import Statevector

import qsimdist
from qsimdist.cli import main
from qsimdist.errors import InvalidInputError

try:
    import qsimcirq  # noqa: F401
    HAVE_QSIM = True
except ImportError:
    HAVE_QSIM = False
needs_qsim = pytest.mark.skipif(not HAVE_QSIM, reason="qsimcirq is not installed "
                                "(pip install 'qsimdist[qsim]')")


def _circuit(n: int, seed: int) -> QuantumCircuit:
    """A random circuit with an X on qubit 0 first (so a bit-order mistake shows)."""
    qc = QuantumCircuit(n, global_phase=0.3)
    qc.x(0)
    qc.compose(random_circuit(n, 6, max_operands=2, seed=seed), inplace=True)
    return qc


def _bits(n: int, count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join("1" if b else "0" for b in rng.integers(0, 2, n)) for _ in range(count)]


@needs_qsim
@pytest.mark.parametrize("engine", ["qsim", "qsimdist"])
def test_each_engine_gives_qiskits_amplitudes(engine, monkeypatch):
    """Both engines, asked by name, agree with Qiskit's Statevector (bitstrings in Qiskit's
    order, global phase included) and say which ran."""
    monkeypatch.setenv("QSIMDIST_STATEVECTOR_ENGINE", engine)
    n = 15
    qc = _circuit(n, seed=4)
    ref = Statevector(qc).data
    bits = _bits(n, 6, seed=1) + ["0" * (n - 1) + "1"]
    res = qsimdist.amplitudes(qc, bits, dtype="complex64", method="statevector")
    assert res.stats["route"]["engine"] == engine
    got = np.array([res[b] for b in bits])
    want = np.array([ref[int(b, 2)] for b in bits])
    assert np.abs(got - want).max() < 1e-5


@needs_qsim
def test_auto_takes_qsim_where_predicted_faster_and_samples_from_it(monkeypatch):
    """auto: a 20-qubit complex64 request goes to qsim (predicted faster than the compiled
    kernel once qsimcirq is imported, as this module does), a complex128 one to qsimdist;
    the sampler's marginals from qsim's state match the exact probabilities."""
    monkeypatch.delenv("QSIMDIST_STATEVECTOR_ENGINE", raising=False)
    n = 20
    qc = random_circuit(n, 14, max_operands=2, seed=9)
    bit = "0" * n
    import sys

    assert "qsimcirq" in sys.modules  # the router prices no import
    fast = qsimdist.amplitudes(qc, [bit], dtype="complex64", method="statevector")
    exact = qsimdist.amplitudes(qc, [bit], dtype="complex128", method="statevector")
    assert fast.stats["route"]["engine"] == "qsim"
    assert exact.stats["route"]["engine"] == "qsimdist"
    assert abs(fast[bit] - exact[bit]) < 1e-5 * max(1.0, abs(exact[bit]))

    # the sampler on qsim's state: each qubit's marginal within 5 sigma of the exact one
    from qsimdist.qiskit import SamplerV2

    small = _circuit(16, seed=2)
    exact_probs = np.abs(Statevector(small).data) ** 2
    small.measure_all()
    monkeypatch.setenv("QSIMDIST_STATEVECTOR_ENGINE", "qsim")
    shots = 4000
    res = SamplerV2(seed=5, options={"method": "statevector"}).run([small], shots=shots).result()
    assert res[0].metadata["sampling"]["route"]["engine"] == "qsim"
    bits = res[0].data.meas.to_bool_array(order="little")  # column q is qubit q
    for q in range(16):
        p1 = exact_probs.reshape(-1, 2 << q, )[:, 1 << q:].sum()
        sigma = np.sqrt(max(p1 * (1 - p1), 1e-4) / shots)
        assert abs(bits[:, q].mean() - p1) <= 5 * sigma, q


def test_engine_choice_is_checked(monkeypatch, capsys):
    qc = _circuit(15, seed=3)
    monkeypatch.setenv("QSIMDIST_STATEVECTOR_ENGINE", "fastest")
    with pytest.raises(InvalidInputError, match="valid: auto, qsimdist, qsim"):
        qsimdist.amplitudes(qc, ["0" * 15], method="statevector")
    monkeypatch.setenv("QSIMDIST_STATEVECTOR_ENGINE", "qsim")
    with pytest.raises(InvalidInputError, match="complex64 only, not complex128"):
        qsimdist.amplitudes(qc, ["0" * 15], dtype="complex128", method="statevector")
    rc = main(["amplitude", "circuits/ghz_n12.qasm", "0" * 12, "--dtype", "complex128"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "complex64 only" in err
    monkeypatch.setenv("QSIMDIST_STATEVECTOR_ENGINE", "qsimdist")
    res = qsimdist.amplitudes(qc, ["0" * 15], dtype="complex64", method="statevector")
    assert res.stats["route"]["engine"] == "qsimdist"


@pytest.mark.parametrize("n", [6, 10, 14])
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_blocked_pauli_reader_matches_qiskit(n, dtype):
    """The blocked reader of many Pauli strings in one pass equals Qiskit's expectation
    values, below, at and above its block's 2^10 elements: strings flipping only low bits,
    only high bits, both, none (Z strings), with Y's phase; complex64 within its precision."""
    from qiskit.quantum_info import Pauli, random_statevector

    from qsimdist.executors import sv_kernels

    psi = random_statevector(2**n, seed=n)
    state = np.ascontiguousarray(psi.data.astype(dtype))
    rng = np.random.default_rng(n)
    labels = ["".join(rng.choice(list("IXYZ"), n)) for _ in range(12)]
    labels += ["I" * (n - 1) + "X", "Y" + "I" * (n - 1), "Z" * n, "X" * n,
               "I" * (n - 3) + "YZX", "XZ" + "I" * (n - 2)]
    masks = []
    for label in labels:
        masks.append((sum(1 << q for q, c in enumerate(reversed(label)) if c in "XY"),
                      sum(1 << q for q, c in enumerate(reversed(label)) if c in "ZY"),
                      label.count("Y")))
    got = sv_kernels.pauli_expectations(state, masks, chunks=3)
    want = [float(np.real(psi.expectation_value(Pauli(label)))) for label in labels]
    tol = 1e-12 if dtype == "complex128" else 2e-6
    assert len(got) == len(labels)
    for g, w, label in zip(got, want, labels):
        assert abs(g - w) < tol, label
    assert sv_kernels.pauli_expectations(state, [], chunks=3) == []


@pytest.mark.parametrize("one_pass", [True, False])
def test_estimator_reads_terms_with_either_reader(one_pass, monkeypatch):
    """EstimatorV2 on the statevector route (16 qubits) gives StatevectorEstimator's values
    within 1e-10 with the compiled one-pass reader and with numpy's (random X/Y/Z strings,
    all-Z, a weight-2 one)."""
    from qiskit.primitives import StatevectorEstimator
    from qiskit.quantum_info import SparsePauliOp

    from qsimdist.engine import expectation
    from qsimdist.qiskit import EstimatorV2

    monkeypatch.setattr(expectation, "one_pass_pays", lambda n, terms: one_pass)
    n = 16
    qc = random_circuit(n, 5, max_operands=2, seed=8)
    rng = np.random.default_rng(2)
    obs = SparsePauliOp(["".join(rng.choice(list("IXYZ"), n)) for _ in range(12)]
                        + ["Z" * n, "I" * (n - 2) + "XY"])
    ours = EstimatorV2(options={"method": "statevector", "dtype": "complex128"}).run(
        [(qc, obs)]).result()[0]
    ref = StatevectorEstimator().run([(qc, obs)]).result()[0]
    assert ours.metadata["route"]["method"] == "statevector"
    assert abs(float(ours.data.evs) - float(ref.data.evs)) < 1e-10


@needs_qsim
def test_router_prices_qsims_import(monkeypatch):
    """Before qsimcirq is imported its import is priced: a small state stays on qsimdist's
    kernel, a request whose own-kernel time is predicted long goes to qsim (width 3)."""
    import sys

    from qsimdist.engine.router import statevector_engine
    from qsimdist.executors import qsim_engine
    from qsimdist.frontends import load
    from qsimdist.hardware.costs import QSIM_IMPORT_SECONDS, QSIM_LOAD_SECONDS

    monkeypatch.delenv("QSIMDIST_STATEVECTOR_ENGINE", raising=False)
    monkeypatch.delitem(sys.modules, "qsimcirq", raising=False)
    monkeypatch.setattr(qsim_engine, "_direct", None)  # not loaded yet: its load is priced
    gc = load(random_circuit(16, 6, max_operands=2, seed=1))
    assert statevector_engine(gc, "complex64", 4, 0.05) == ("qsimdist", 4, 0.05)
    engine, width, seconds = statevector_engine(gc, "complex64", 4, 100.0)
    assert (engine, width) == ("qsim", 3) and QSIM_LOAD_SECONDS < seconds < 100.0
    assert statevector_engine(gc, "complex128", 4, 100.0)[0] == "qsimdist"
    # where the compiled module cannot be loaded directly, cirq's import is priced instead
    monkeypatch.setattr(qsim_engine, "_direct", False)
    engine, _, through_cirq = statevector_engine(gc, "complex64", 4, 100.0)
    assert engine == "qsim" and through_cirq - seconds == pytest.approx(
        QSIM_IMPORT_SECONDS - QSIM_LOAD_SECONDS)


@needs_qsim
def test_qsim_runs_without_importing_cirq():
    """qsim's compiled module is loaded from qsimcirq's folder without qsimcirq's __init__ (no
    cirq import in a fresh process), and its state equals the one qsim gives through cirq,
    bit for bit, and Qiskit's within single precision."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from qiskit.circuit.random import random_circuit\n"
        "from qiskit.quantum_info import Statevector\n"
        "from qsimdist.frontends import load\n"
        "from qsimdist.frontends.fusion import fuse\n"
        "from qsimdist.executors import qsim_engine as Q\n"
        "qc = random_circuit(9, 8, max_operands=3, seed=4)\n"
        "f = fuse(load(qc), 3, keep_diagonal=False)\n"
        "a = Q.simulate(9, f.gates, f.global_phase)\n"
        "assert Q.loaded() and 'cirq' not in sys.modules, sorted(sys.modules)[:5]\n"
        "b = Q._through_cirq(9, f.gates) * np.complex64(np.exp(1j * f.global_phase))\n"
        "assert np.array_equal(a, b)\n"
        "assert np.abs(a - Statevector(qc).data).max() < 1e-5\n"
        "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_draw_indices_is_searchsorted_on_the_cumulative_sum():
    """The two-pass compiled draw picks, for every uniform, the index numpy's cumulative sum
    and searchsorted pick (chunk boundaries included), in the uniforms' order."""
    from qsimdist.executors import sv_kernels

    rng = np.random.default_rng(0)
    n = 15
    state = (rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)).astype(np.complex64)
    state[100:5000] = 0  # a run of zero probability no draw may land in
    p = np.abs(state.astype(np.complex128)) ** 2
    cdf = np.cumsum(p)
    for chunks in (1, 7, 64):
        u = rng.random(3000)
        got, total = sv_kernels.draw_indices(state, u, chunks)
        want = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), p.size - 1)
        assert abs(total - cdf[-1]) < 1e-9 * cdf[-1]
        assert np.array_equal(got, want)
        assert not np.any((got >= 100) & (got < 5000))


def test_gather_bits_relabels_the_index():
    from qsimdist.executors import sv_kernels

    rng = np.random.default_rng(1)
    n = 13
    src = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    source_bit = [int(b) for b in rng.permutation(n)]
    dest = np.empty_like(src)
    sv_kernels.gather_bits(src, dest, source_bit, chunks=3)
    j = np.arange(1 << n)
    i = np.zeros_like(j)
    for q, b in enumerate(source_bit):
        i |= ((j >> q) & 1) << b
    assert np.array_equal(dest, src[i])


def test_router_prices_numbas_start_for_small_states(monkeypatch):
    """In a process whose compiled kernels are not loaded, a small state runs numpy's GEMM
    kernel (numba's start-up would cost more than it saves); the route says which."""
    from qsimdist.engine import router
    from qsimdist.engine.memory import MemoryBudget
    from qsimdist.executors import sv_kernels
    from qsimdist.frontends import load

    monkeypatch.setenv("QSIMDIST_STATEVECTOR_ENGINE", "qsimdist")
    monkeypatch.setattr(sv_kernels, "_apply", None)  # as in a fresh process
    budget = MemoryBudget.resolve(None)
    small = load(random_circuit(16, 6, max_operands=2, seed=3))
    route = router.route_amplitudes(small, ["0" * 16], order="qiskit", dtype="complex64",
                                    budget=budget, method="statevector")
    assert route.kernel == "numpy"
    deep = load(random_circuit(22, 40, max_operands=2, seed=3))
    route = router.route_amplitudes(deep, ["0" * 22], order="qiskit", dtype="complex64",
                                    budget=budget, method="statevector")
    assert route.kernel == "compiled"


@needs_qsim
def test_statevector_bench_runs_side_by_side(tmp_path):
    """benchmarks.statevector on a small qsim-format circuit: qsimdist and qsimcirq
    each in a process, the same amplitude, the table rendered."""
    from benchmarks import statevector as bench

    folder = tmp_path / "circuits" / "qsim"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines = ["10"] + [f"0 h {q}" for q in range(10)]
    for m in range(1, 13):  # a layer of cz, then a moment of one-qubit gates
        for q in range(m % 2, 9, 2):
            lines.append(f"{2 * m - 1} cz {q} {q + 1}")
        for q in range(10):
            lines.append(f"{2 * m} {rng.choice(['t', 'x_1_2', 'y_1_2'])} {q}")
    (folder / "circuit_t10.qsim").write_text("\n".join(lines) + "\n")
    out = tmp_path / "report.json"
    assert bench.main(["--data", str(tmp_path), "--circuits", "t10", "--contenders",
                       "qsimdist (own kernel, complex128)", "qsimcirq", "--json", str(out)]) == 0
    import json

    rows = json.loads(out.read_text())["rows"]
    assert [r["contender"] for r in rows] == ["qsimdist (own kernel, complex128)", "qsimcirq"]
    assert all("error" not in r for r in rows), rows
    assert rows[1]["rel_diff_to_complex128"] < 1e-4
    assert "| t10 | qsimcirq |" in bench._table(rows)


@pytest.mark.parametrize("kernel", ["numpy", "compiled"])
def test_swaps_taken_out_as_relabellings_give_the_same_state(kernel):
    """SWAPs (mid-circuit, chained, on overlapping pairs, and at the end as in a QFT) are
    relabellings on the statevector route: fewer gates, and the state equals Qiskit's."""
    from qiskit.circuit.random import random_circuit
    from qiskit.quantum_info import Statevector

    from qsimdist.engine.router import Route
    from qsimdist.engine.statevector_run import final_state
    from qsimdist.frontends.fusion import absorb_swaps
    from qsimdist.frontends.qiskit_circuit import from_qiskit

    n = 15
    qc = random_circuit(n, 4, max_operands=2, seed=8)
    qc.swap(0, 5)
    qc.swap(5, 9)
    qc.cx(9, 2)
    qc.swap(2, 9)
    qc.h(5)
    for q in range(n // 2):
        qc.swap(q, n - 1 - q)
    want = Statevector(qc).data
    gc = from_qiskit(qc)
    gc = gc[0] if isinstance(gc, tuple) else gc
    relabelled, logical = absorb_swaps(gc)
    assert logical is not None and sorted(logical) == list(range(n))
    assert len(relabelled.gates) == len(gc.gates) - sum(g.name == "swap" for g in gc.gates)
    route = Route("statevector", "test", fusion_width=3, engine="qsimdist", kernel=kernel)
    got, _, _ = final_state(gc, "complex128", route)
    assert np.allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("outer, rows, inner", [(1, 4, 1 << 16), (1 << 14, 8, 1), (64, 2, 1024),
                                                (2, 16, 1 << 12), (1, 2, 8)])
def test_matmul_in_parts_equals_one_matmul(outer, rows, inner, monkeypatch):
    """The state's GEMM split over threads (along the outer axis, or along the inner one
    where the outer axis is too short) writes what one matmul writes, with 1-4 threads."""
    from qsimdist.executors import statevector

    rng = np.random.default_rng(rows)
    mat = rng.normal(size=(rows, rows)) + 1j * rng.normal(size=(rows, rows))
    src = rng.normal(size=outer * rows * inner) + 1j * rng.normal(size=outer * rows * inner)
    want = np.matmul(mat, src.reshape(outer, rows, inner)).reshape(-1)
    for threads in (1, 2, 3, 4):
        monkeypatch.setattr(statevector, "pass_threads", lambda t=threads: t)
        dest = np.full_like(src, np.nan)
        with statevector.blas_threads(1):
            statevector.matmul_in_parts(mat, src, dest, outer, rows, inner)
        np.testing.assert_allclose(dest, want, rtol=1e-12, atol=1e-12)


def test_in_parts_splits_broadcast_products_and_copies(monkeypatch):
    """A diagonal product and an axis-permuting copy split over three threads equal numpy's
    whole-array results; a pass below PARALLEL_MIN_ELEMENTS stays on the calling thread."""
    import threading

    from qsimdist.executors import statevector

    monkeypatch.setattr(statevector, "pass_threads", lambda: 3)
    rng = np.random.default_rng(0)
    n = 18
    state = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    want = state.reshape(8, 1 << (n - 3)) * np.exp(1j * np.arange(8))[:, None]
    got = state.copy().reshape(8, 1 << (n - 3))
    statevector.in_parts(np.multiply, got, np.exp(1j * np.arange(8))[:, None], got)
    np.testing.assert_array_equal(got, want)
    perm = [5, 0, 17, 3, 1, 2, 4] + list(range(6, 17))
    dest = np.empty_like(state)
    statevector.permute_axes(state, dest, perm)
    np.testing.assert_array_equal(dest, state.reshape((2,) * n).transpose(perm).reshape(-1))
    seen = set()
    statevector.in_parts(lambda a: seen.add(threading.get_ident()), np.zeros((4, 16)))
    assert seen == {threading.get_ident()}


def test_blas_runs_on_one_thread_inside_the_statevector_passes():
    from threadpoolctl import threadpool_info

    from qsimdist.executors.statevector import blas_threads

    with blas_threads(1):
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_splits_passes_on_threads_of_its_own(monkeypatch):
    """After a fork the child starts its own pool (the parent's threads do not exist there):
    a split pass in the child completes instead of waiting on them for ever."""
    import os

    from qsimdist.executors import statevector

    monkeypatch.setattr(statevector, "pass_threads", lambda: 2)
    big = np.zeros((4, 1 << 15))
    one = np.ones((1, 1))
    statevector.in_parts(np.add, big, one, big)  # the parent's pool exists now
    assert statevector._pool is not None
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            statevector.in_parts(np.add, big, one, big)
            os._exit(0 if big.min() == 2.0 else 1)
        except BaseException:
            os._exit(3)
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on its parent's pool")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
