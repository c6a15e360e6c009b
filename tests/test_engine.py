"""The engine layer: one memory budget, options resolved once, one router behind every door.

The spec is issue 23's: every entry point (``qsimdist.amplitudes``,
``SamplerV2``, ``EstimatorV2``, ``qsimdist amplitude / sample / expect``)
takes the route the router prices cheapest and says which; every option is
honoured or refused the same way on the statevector and the tensor-network
routes; a result that cannot fit is refused before anything is allocated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import SparsePauliOp, Statevector

import qsimdist
import qsimdist.engine.memory
from qsimdist import expectation_values
from qsimdist.cli import main
from qsimdist.engine import MemoryBudget, RunOptions
from qsimdist.engine.contractor import Contractor
from qsimdist.engine.expectation import ExpectationEngine
from qsimdist.engine.sampling import sample_bits
from qsimdist.errors import InvalidInputError, MissingDependencyError, PlanError, ProfileError
from qsimdist.qiskit import EstimatorV2, SamplerV2


def brick(n: int, depth: int, seed: int) -> QuantumCircuit:
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for layer in range(depth):
        for q in range(n):
            qc.rx(float(rng.uniform(0, np.pi)), q)
            qc.rz(float(rng.uniform(0, np.pi)), q)
        for q in range(layer % 2, n - 1, 2):
            qc.cz(q, q + 1)
    return qc


@pytest.fixture
def cli(capsys):
    """``qsimdist ARGS`` in this process: (exit code, stdout, stderr)."""

    def run(*args: str):
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


# ----------------------------------------------------------------------- memory budget
def test_memory_budget_words_mean_the_same_everywhere(monkeypatch):
    monkeypatch.delenv("QSIMDIST_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(qsimdist.engine.memory, "machine_memory", lambda: 64 << 30)
    # the default is 80% of the memory available now: 8 GiB of 10
    monkeypatch.setattr("qsimdist.memory_limit.available_memory", lambda *a: 10 << 30)
    explicit = MemoryBudget.resolve("2GiB")
    assert (explicit.limit, explicit.bound, explicit.source) == (2 << 30, 2 << 30, "explicit")
    default = MemoryBudget.resolve(None)
    assert (default.limit, default.bound, default.source) == (8 << 30, 8 << 30, "default")
    none = MemoryBudget.resolve("None ")
    assert none.limit is None and none.bound == 64 << 30 and none.unbounded
    assert MemoryBudget.resolve(none) is none
    monkeypatch.setenv("QSIMDIST_MEMORY_LIMIT", "3GiB")
    env = MemoryBudget.resolve(None)
    assert (env.limit, env.source) == (3 << 30, "environment")
    monkeypatch.setenv("QSIMDIST_MEMORY_LIMIT", "unlimited")
    assert MemoryBudget.resolve(None).limit is None
    with pytest.raises(InvalidInputError, match="cannot read memory size"):
        MemoryBudget.resolve("lots")


def test_memory_budget_shares_the_host_between_its_ranks(monkeypatch):
    """Default and 'none' divide the host by the ranks on it; an explicit limit is per rank."""

    class TwoRanks:
        def Get_size(self):
            return 2

    monkeypatch.delenv("QSIMDIST_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(qsimdist.engine.memory, "machine_memory", lambda: 64 << 30)
    # the default is 80% of the memory available now: 8 GiB of 10
    monkeypatch.setattr("qsimdist.memory_limit.available_memory", lambda *a: 10 << 30)
    monkeypatch.setattr("qsimdist.executors.rank_checks.ranks_on_host", lambda comm: 2)
    assert MemoryBudget.resolve(None, TwoRanks()).limit == 4 << 30
    none = MemoryBudget.resolve("none", TwoRanks())
    assert none.limit is None and none.bound == 32 << 30 and none.ranks_on_host == 2
    assert MemoryBudget.resolve("1GiB", TwoRanks()).limit == 1 << 30


def test_a_limit_above_the_host_does_not_make_room(monkeypatch, cli):
    """An explicit limit larger than the host refuses a need the host cannot hold, up front."""
    monkeypatch.setattr(qsimdist.engine.memory, "machine_memory", lambda: 1 << 20)
    with pytest.raises(PlanError, match="more than this host's physical memory"):
        qsimdist.amplitudes(brick(18, 1, 0), "*" * 18, dtype="complex128",
                            memory_limit="1GiB")
    rc, out, err = cli("amplitude", "circuits/ghz_n12.qasm", "*" * 12, "--dtype", "complex128",
                       "--memory-limit", "1GiB")
    assert rc == 0  # 64 KiB fits the real host


# ----------------------------------------------------------------------- options
@pytest.mark.parametrize("route", ["statevector", "tensor-network"])
@pytest.mark.parametrize("backend,error,match", [
    ("torch", InvalidInputError, "valid: numpy, cupy"),
    ("cupy", MissingDependencyError, "needs cupy"),
])
def test_backend_refused_alike_on_every_route_and_entry_point(route, backend, error, match,
                                                             cli):
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        if backend == "cupy":
            pytest.skip("cupy is installed here: the backend is valid")
    qc = brick(6, 3, 1)
    with pytest.raises(error, match=match):
        qsimdist.amplitudes(qc, "000000", backend=backend, method=route)
    sampler_method = "statevector" if route == "statevector" else "marginal"
    measured = qc.measure_all(inplace=False)
    with pytest.raises(error, match=match):
        SamplerV2(options={"backend": backend, "method": sampler_method}).run([measured]).result()
    estimator_method = "statevector" if route == "statevector" else "doubled"
    with pytest.raises(error, match=match):
        EstimatorV2(options={"backend": backend, "method": estimator_method}).run(
            [(qc, "ZIIIIZ")]).result()
    with pytest.raises(error, match=match):
        expectation_values(qc, ["ZZIIII"], backend=backend)
    for command in (["amplitude", "circuits/ghz_n5.qasm", "00000"],
                    ["sample", "circuits/ghz_n5.qasm", "--shots", "10"],
                    ["expect", "circuits/ghz_n5.qasm", "-O", "ZZIII"]):
        rc, out, err = cli(*command, "--backend", backend)
        assert rc == 2 and "Traceback" not in out + err
        assert err.startswith("qsimdist: error:") and len(err.splitlines()) == 1
        assert match.split()[-1] in err


@pytest.mark.parametrize("option,value,match", [
    ("dtype", "complex32", "valid: complex64, complex128"),
    ("memory_limit", "lots", "cannot read memory size"),
    ("gemm", "tf32", "tf32"),
])
def test_bad_options_refused_before_routing(option, value, match):
    """The same refusal whichever route the call would take (small: statevector; forced TN)."""
    qc = brick(6, 3, 2)
    for method in ("auto", "statevector", "tensor-network"):
        with pytest.raises(InvalidInputError, match=match):
            qsimdist.amplitudes(qc, "000000", method=method, **{option: value})
    if option != "gemm":
        with pytest.raises(InvalidInputError, match=match):
            Contractor(**{option: value})
        with pytest.raises(InvalidInputError, match=match):
            ExpectationEngine(**{option: value})


def test_run_options_resolve_the_memory_limit_once(monkeypatch):
    """The memory available now is read once per call, never again mid-run."""
    import qsimdist.memory_limit

    calls = []
    real = qsimdist.memory_limit.available_memory

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.delenv("QSIMDIST_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(qsimdist.memory_limit, "available_memory", counting)
    opts = RunOptions.resolve()
    assert len(calls) == 1 and opts.limit == opts.memory.limit
    qsimdist.amplitudes(brick(8, 4, 3), ["00000000", "11111111", "0101010*"],
                        method="tensor-network")
    assert len(calls) == 2  # once for the call above, never again mid-run


def test_device_counts_beyond_any_machine_are_refused_at_once(cli):
    for p in (1 << 40, 1 << 70):
        rc, out, err = cli("plan", "circuits/ghz_n5.qasm", "--profile", "h100-ib",
                           "--devices", str(p))
        assert rc == 2 and "at most 2^24" in out + err
    from qsimdist.hardware import load_profile

    with pytest.raises(ProfileError, match="at most 2"):
        load_profile("h100-ib").check_devices(1 << 25)


# ----------------------------------------------------------------------- sampling routes
def test_sampler_statevector_route_draws_the_marginal_exactly():
    """Same seed, same uniforms: the statevector and the marginal method draw the same shots."""
    from qsimdist.frontends import load

    qc = brick(9, 5, 4)
    gc = load(qc)
    measured = [7, 1, 4]
    c = Contractor(dtype="complex128")
    sv, info, probs = sample_bits(gc, measured, 4000, np.random.default_rng(11), c,
                                  "statevector")
    tn, info_tn, _ = sample_bits(gc, measured, 4000, np.random.default_rng(11), c, "marginal")
    assert info.method == "statevector" and info_tn.method == "marginal"
    assert info.contractions == 0 and info.extra["route"]["method"] == "statevector"
    np.testing.assert_array_equal(sv, tn)
    exact = Statevector(qc).probabilities(measured[::-1])  # Qiskit: first qubit least significant
    for row, p in probs.items():
        index = int("".join(map(str, row)), 2)
        assert p == pytest.approx(exact[index], abs=1e-12)
    freq = np.bincount(sv @ (1 << np.arange(len(measured) - 1, -1, -1)), minlength=8) / 4000
    assert 0.5 * np.abs(freq - exact).sum() < 0.05


def test_every_door_says_its_route():
    """A narrow deep circuit: statevector through every door; a wide shallow one: not."""
    deep = brick(14, 30, 5)
    measured = deep.measure_all(inplace=False)
    res = SamplerV2(seed=1).run([measured], shots=500).result()[0]
    route = res.metadata["sampling"]["route"]
    assert route["method"] == "statevector"
    assert route["statevector_seconds"] < route["tensor_network_seconds"]
    assert sum(res.data.meas.get_counts().values()) == 500
    obs = SparsePauliOp(["Z" + "I" * 12 + "Z", "XX" + "I" * 12])
    est = EstimatorV2().run([(deep, obs)]).result()[0]
    assert est.metadata["route"]["method"] == "statevector"
    assert float(est.data.evs) == pytest.approx(Statevector(deep).expectation_value(obs).real,
                                                abs=1e-9)
    amp = qsimdist.amplitudes(deep, "0" * 14)
    assert amp.stats["method"] == "statevector" and amp.stats["route"]["statevector_seconds"]
    wide = brick(40, 2, 6)
    est = EstimatorV2().run([(wide, "Z" + "I" * 39)]).result()[0]
    assert est.metadata["route"]["method"] in ("state", "doubled")
    assert "does not fit" in est.metadata["route"]["reason"]


def test_cli_sample_and_expect_report_the_route(tmp_path, cli):
    from qiskit import qasm2

    path = tmp_path / "deep.qasm"
    path.write_text(qasm2.dumps(brick(14, 30, 7)))
    rc, out, _ = cli("sample", str(path), "--shots", "200", "--seed", "3", "--json")
    assert rc == 0
    obj = json.loads(out)
    assert obj["method"] == "statevector" and obj["route"]["reason"] in (
        "predicted faster", "predicted below the tensor-network floor")
    assert sum(obj["counts"].values()) == 200
    rc, out, _ = cli("expect", str(path), "-O", "Z" + "I" * 12 + "Z", "--json")
    assert rc == 0 and json.loads(out)["route"]["method"] == "statevector"
    rc, out, _ = cli("expect", str(path), "-O", "Z" + "I" * 12 + "Z", "--method", "doubled",
                     "--json")
    obj = json.loads(out)
    assert rc == 0 and obj["route"]["method"] == "doubled" and obj["stats"]["doubled_terms"] == 1


# ----------------------------------------------------------------------- plan cache
def test_one_plan_cache_serves_every_entry_point():
    """Amplitudes, the sampler's contractor and the estimator's engine share one cache."""
    from qsimdist.engine.cache import PLANS
    from qsimdist.frontends import amplitude_network, load

    qc = brick(8, 6, 9)
    first = qsimdist.amplitudes(qc, ["0" * 8, "1" * 8], method="tensor-network")
    again = qsimdist.amplitudes(qc, ["0" * 8, "1" * 8], method="tensor-network")
    assert again.stats["contractions"] >= 1
    assert again.stats["plans_reused"] == again.stats["contractions"]
    np.testing.assert_allclose(again.values[0], first.values[0])
    # the sampler's contractor finds a plan another contractor made
    net = amplitude_network(load(qc), "*" * 8)
    one, two = Contractor(dtype="complex128"), Contractor(dtype="complex128")
    a = one.contract(net, simplify_network=False)
    b = two.contract(net, simplify_network=False)
    assert one.stats.plans_made + one.stats.plans_reused == 1
    assert two.stats.plans_reused == 1
    np.testing.assert_allclose(a, b)
    # axis j of the open network is qubit 7-j: the flat result is Qiskit's statevector
    np.testing.assert_allclose(a.reshape(-1), Statevector(qc).data, atol=1e-6)
    assert len(PLANS) >= 1


def test_plan_cache_reuse_rule():
    """A kept plan serves while its peak fits the limit; a sliced one only under its own limit."""
    from qsimdist.engine.cache import PlanCache
    from qsimdist.network import Network

    rng = np.random.default_rng(0)
    inputs = [("a", "b", "c", "d"), ("c", "d", "e", "f"), ("e", "f", "a", "b")]
    net = Network(inputs, (), {k: 16 for k in "abcdef"},
                  [rng.random((16,) * 4) + 0j for _ in inputs])
    cache = PlanCache()
    big, reused = cache.get(net, dtype="complex64", limit=None)
    assert not reused and big.stats.n_slices == 1
    again, reused = cache.get(net, dtype="complex64", limit=None)
    assert reused and again.stats.flops == big.stats.flops
    small_limit = big.stats.peak_bytes // 2
    small, reused = cache.get(net, dtype="complex64", limit=small_limit)
    assert not reused and small.stats.peak_bytes <= small_limit and small.stats.n_slices > 1
    _, reused = cache.get(net, dtype="complex64", limit=small_limit)
    assert reused
    _, reused = cache.get(net, dtype="complex64", limit=small_limit // 2)
    assert not reused  # sliced under another limit: planned again
    _, reused = cache.get(net, dtype="complex128", limit=None)
    assert not reused  # the dtype is part of the key
    assert cache.made == 4 and cache.reused == 2


# ----------------------------------------------------------------------- terms on a state
@pytest.mark.parametrize("n", [1, 3, 7, 11])
def test_pauli_terms_read_off_a_state_equal_the_operator_applied(n):
    """The merged-run, buffer-reusing reader equals applying each operator to the state."""
    from qsimdist.engine.term_readers import pauli_on_state, term_on_state

    rng = np.random.default_rng(n)
    state = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
    state = (state / np.linalg.norm(state)).reshape((2,) * n)
    conj, probs, work = state.conj(), (state * state.conj()).real, {}
    for _ in range(40):
        k = int(rng.integers(1, n + 1))
        axes = [int(a) for a in rng.choice(n, k, replace=False)]
        ops = "".join(rng.choice(list("XYZ"), k))
        want = term_on_state(state, axes, ops)
        assert pauli_on_state(state, conj, axes, ops, None, work) == pytest.approx(want, abs=1e-12)
        if set(ops) == {"Z"}:
            got = pauli_on_state(state, conj, axes, ops, probs, work)
            assert got == pytest.approx(want, abs=1e-12)


def test_qubit_wise_commuting_groups_are_read_together_exactly():
    """Greedy QWC groups: every pair of a group's terms agrees on each shared qubit, every
    term lands in one group, and each group's values (one change of basis, one marginal,
    its Z strings read by one GEMM with their sign vectors) equal Qiskit's
    Statevector.expectation_value for X, Y and Z strings."""
    from qsimdist.engine.pauli_terms import parse_term, qwc_groups
    from qsimdist.engine.term_readers import group_values

    n = 9
    sv = Statevector(random_circuit(n, 6, max_operands=2, seed=4))
    state = np.asarray(sv.data).reshape((2,) * n)
    rng = np.random.default_rng(5)
    labels = []
    for _ in range(50):
        s = ["I"] * n
        for q in rng.choice(n, int(rng.integers(1, 6)), replace=False):
            s[q] = "XYZ"[int(rng.integers(3))]
        labels.append("".join(reversed(s)))
    labels += ["Z" * n, "X" * n, "Y" * n]
    terms = [parse_term(lb, n) for lb in labels]
    groups = qwc_groups(terms)
    assert sorted(i for members, _ in groups for i in members) == list(range(len(terms)))
    assert len(groups) < len(terms) // 2
    for members, basis in groups:
        for i in members:
            assert all(basis[q] == op for q, op in zip(terms[i].qubits, terms[i].ops))
        got = group_values(state, terms, members, basis)
        for i in members:
            want = sv.expectation_value(SparsePauliOp(labels[i])).real
            assert got[i] == pytest.approx(want, abs=1e-12), labels[i]


def test_estimator_groups_terms_where_priced_cheaper(monkeypatch):
    """On numpy's reader, 40 terms of which 20 are X on distinct qubits and 10 ZZ: those
    are read in groups (the stats count them), the values equal StatevectorEstimator's."""
    from qiskit.primitives import StatevectorEstimator
    from qiskit.quantum_info import SparsePauliOp

    from qsimdist.engine import expectation
    from qsimdist.qiskit import EstimatorV2

    monkeypatch.setattr(expectation, "one_pass_pays", lambda n, terms: False)
    n = 14
    qc = random_circuit(n, 5, max_operands=2, seed=9)
    labels = []
    for i in range(n):
        x = ["I"] * n
        x[i] = "X"
        labels.append("".join(reversed(x)))
    for i in range(n - 1):
        zz = ["I"] * n
        zz[i] = zz[i + 1] = "Z"
        labels.append("".join(reversed(zz)))
    rng = np.random.default_rng(1)
    labels += ["".join(rng.choice(list("IXYZ"), n)) for _ in range(13)]
    obs = SparsePauliOp(labels, coeffs=rng.normal(size=len(labels)))
    ours = EstimatorV2(options={"method": "statevector", "dtype": "complex128"}).run(
        [(qc, obs)]).result()[0]
    ref = StatevectorEstimator().run([(qc, obs)]).result()[0]
    assert ours.metadata["route"]["method"] == "statevector"
    spent = ours.metadata["qsimdist"]
    assert spent["grouped_terms"] >= 2 * n - 1 and spent["qwc_groups"] >= 2
    assert abs(float(ours.data.evs) - float(ref.data.evs)) < 1e-10


# ----------------------------------------------------------------------- priced batches
def test_batcher_does_not_open_what_separate_contractions_do_cheaper():
    """Priced widths: two bitstrings differing in 15 characters stay two contractions when a
    15-open contraction is priced above two single ones; 64 sharing a prefix still share one."""
    from qsimdist.engine.batching import batches
    from qsimdist.frontends import load

    gc = load(brick(20, 2, 12))
    budget = MemoryBudget.resolve("1GiB")

    def price(pattern: str) -> float:  # a contraction's cost grows with its open qubits
        return 1.0 + 0.5 * 2.0 ** pattern.count("*")

    two = ["0" * 20, "0" * 5 + "1" * 15]
    assert len(batches(gc, two, "complex64", budget)) == 1  # the model alone opens all 15
    assert len(batches(gc, two, "complex64", budget, price=price)) == 2
    shared = ["0" * 14 + format(i, "06b") for i in range(64)]
    assert len(batches(gc, shared, "complex64", budget, price=price)) == 1


def test_batcher_opens_qubits_only_for_a_saving_beyond_the_prices_error():
    """A grouping priced only a little below one by one (within BATCH_MIN_SAVING) stays one
    by one; one priced well below is taken. The report keeps both prices."""
    from qsimdist.engine import batching
    from qsimdist.frontends import load

    gc = load(brick(20, 2, 12))
    budget = MemoryBudget.resolve("1GiB")
    pair = ["0" * 20, "0" * 19 + "1"]  # one open qubit serves both

    for open_price, want in ((1.9, 2), (1.0, 1)):  # one by one costs 2 x 1.0
        def price(pattern: str, p=open_price) -> float:
            return p if "*" in pattern else 1.0

        report: dict = {}
        out = batching.batches(gc, pair, "complex64", budget, price=price, report=report)
        assert len(out) == want, open_price
        assert report["one_by_one_predicted_seconds"] == 2.0
        assert report["predicted_seconds"] == (2.0 if want == 2 else open_price)


N30 = Path(os.environ.get("QSIMDIST_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared"
                          / "data")) / "circuits" / "circuit_n30_m14_s0_e0_pEFGH.qsim"


@pytest.mark.skipif(not N30.exists(), reason="needs ../shared/data (Google's n30 circuit)")
def test_n30_two_distant_bitstrings_are_two_contractions():
    """Issue 24's case: they were one contraction with 15 qubits open (1.2e11 FLOPs, 13.7 s;
    no result in 600 s at 8 MiB); two single amplitudes take 9e9."""
    bits = ["0" * 30, "101100111000111100001111000011"]
    res = qsimdist.amplitudes(str(N30), bits, order="natural", memory_limit="1GiB")
    assert res.stats["contractions"] == 2 and res.stats["flops"] < 2e10
    one = qsimdist.amplitudes(str(N30), bits[1], order="natural", memory_limit="1GiB")
    np.testing.assert_allclose(res.values[1], one.values[0], rtol=1e-4)


def test_amplitude_stats_record_the_grouping_and_its_price():
    """The tensor-network route's stats say how the bitstrings were grouped: the model's
    width, the chosen one, the contractions, and the predicted seconds of that grouping
    and of one contraction per bitstring (the chosen one no dearer)."""
    import qsimdist

    bits = ["000000000000", "000000000011", "000000000001", "110000000000", "000000000010"]
    res = qsimdist.amplitudes("circuits/rqc_3x4_m8.qasm", bits, method="tensor-network")
    g = res.stats["batching"]
    assert g["bitstrings"] == 5 and g["open_qubits"] <= g["model_open_qubits"]
    assert g["contractions"] == res.stats["contractions"]
    if g["model_open_qubits"] > 0:  # priced
        assert g["predicted_seconds"] <= g["one_by_one_predicted_seconds"]
    single = qsimdist.amplitudes("circuits/rqc_3x4_m8.qasm", bits, method="tensor-network",
                                 batch=False)
    assert "batching" not in single.stats
    for b in bits:
        assert abs(res[b] - single[b]) < 1e-6


def test_a_group_of_one_bitstring_is_contracted_closed():
    """Where opening positions merges only some bitstrings, the others stay closed (their
    own bitstring, no stars): only groups of several distinct strings pay for open qubits."""
    from qsimdist.engine.batching import batches
    from qsimdist.engine.memory import MemoryBudget
    from qsimdist.frontends import load

    gc = load("circuits/rqc_3x4_m8.qasm")
    bits = ["000000000000", "000000000001", "111111000000", "101010101010"]
    out = batches(gc, bits, "complex64", MemoryBudget.resolve(None))
    for pattern, idx, offs in out:
        if len(idx) == 1:
            assert pattern == bits[idx[0]] and offs == [0]
    covered = sorted(i for _, idx, _ in out for i in idx)
    assert covered == [0, 1, 2, 3]


@pytest.mark.parametrize("u", [0, 1, 2, 5, 8])
def test_z_string_values_equal_the_signed_sums(u):
    """Each Z string's value on a marginal, from the split sign vectors, equals the signed
    sum written out over every entry (odd and even widths, the empty string, every axis)."""
    from qsimdist.engine.term_readers import z_string_values

    rng = np.random.default_rng(u)
    marginal = rng.random((2,) * u)
    axes_lists = [[], list(range(u))] + [
        sorted(rng.choice(u, int(rng.integers(1, u + 1)), replace=False).tolist())
        for _ in range(6)] if u else [[]]
    got = z_string_values(marginal, axes_lists)
    flat = marginal.reshape(-1)
    for axes, value in zip(axes_lists, got):
        want = sum(flat[k] * (-1) ** sum((k >> (u - 1 - a)) & 1 for a in axes)
                   for k in range(flat.size))
        assert value == pytest.approx(want, abs=1e-12), axes


def test_grouping_search_covers_every_term_once_and_never_prices_above_the_greedy():
    """The reading plan tries shuffled greedy groupings beside the heaviest-first one: each
    term is read exactly once, every group is qubit-wise commuting, and the plan's
    predicted seconds are at most the heaviest-first grouping's."""
    from qsimdist.engine import pauli_terms as E
    from qsimdist.hardware.costs import TERM_SECONDS_PER_ELEMENT

    n = 22
    rng = np.random.default_rng(3)
    labels = []
    for _ in range(40):
        s = ["I"] * n
        for q in rng.choice(n, int(rng.integers(1, 5)), replace=False):
            s[q] = "XYZ"[int(rng.integers(3))]
        labels.append("".join(reversed(s)))
    terms = [E.parse_term(lb, n) for lb in labels]
    plan = E.numpy_reading_plan(n, terms)
    assert sorted(i for members, _, _ in plan for i in members) == list(range(len(terms)))
    for members, basis, _ in plan:
        if basis is not None:
            for i in members:
                assert all(basis[q] == op for q, op in zip(terms[i].qubits, terms[i].ops))
    greedy = sum(min(E._group_seconds(n, b, len(m)),
                     sum(TERM_SECONDS_PER_ELEMENT * 2.0**n * (terms[i].weight + 1) for i in m))
                 for m, b in E.qwc_groups(terms))
    assert sum(s for *_, s in plan) <= greedy * (1 + 1e-12)
    # handed-out copies: changing one does not change the next answer
    plan[0][0].append(999)
    assert 999 not in E.numpy_reading_plan(n, terms)[0][0]


@pytest.mark.parametrize("size,dtype", [(1 << 10, "complex128"), (1 << 19, "complex128"),
                                        (1 << 20, "complex64")])
def test_state_buffer_is_a_plain_writable_array(size, dtype):
    """state_buffer: the size and dtype asked for, zero where asked, writable, and
    independent buffers from independent calls (mapped or from numpy's allocator)."""
    from qsimdist.executors.statevector import state_buffer

    a = state_buffer(size, dtype, zeroed=True)
    b = state_buffer(size, dtype)
    assert a.shape == (size,) and a.dtype == np.dtype(dtype) and a.flags.writeable
    assert not np.any(a)
    a[:] = 1.5
    b[:] = 2.0
    assert np.all(a == 1.5) and not np.shares_memory(a, b)
    assert np.all(a.reshape((2,) * (size.bit_length() - 1)).transpose()[..., 0] == 1.5)


def test_chain_prices_its_plan_searches_until_its_structure_has_run(tmp_path, monkeypatch):
    """With an empty cache, the chain's predicted seconds include a plan search per structure
    it will plan; once a chain of the same structure has run (its paths cached), they do not,
    and the record is the structure's: another circuit's chain is still priced cold."""
    from qiskit.circuit.random import random_circuit

    from qsimdist.engine import network_sampling, sampling
    from qsimdist.frontends.qiskit_circuit import from_qiskit
    from qsimdist.hardware import costs

    monkeypatch.setenv("QSIMDIST_CACHE_DIR", str(tmp_path))

    def lowered(seed):
        gc = from_qiskit(random_circuit(10, 3, max_operands=2, seed=seed))
        return sampling.fuse_single_qubit_gates(gc[0] if isinstance(gc, tuple) else gc)

    gc, other = lowered(1), lowered(2)
    measured = list(range(10))
    notes: dict = {}
    cold = network_sampling.tn_sampling_seconds(gc, measured, 500, "chain", notes)
    structures = notes["chain_plans_priced"]
    assert structures >= 2 and not network_sampling.chain_planned(gc, measured)
    contractor = Contractor(dtype="complex128")
    bits, info, _ = sampling.sample_bits(gc, measured, 500, np.random.default_rng(0),
                                         contractor, method="chain")
    assert bits.shape == (500, 10) and info.method == "chain"
    assert network_sampling.chain_planned(gc, measured)
    warm_notes: dict = {}
    warm = network_sampling.tn_sampling_seconds(gc, measured, 500, "chain", warm_notes)
    assert "chain_plans_priced" not in warm_notes
    assert cold - warm == pytest.approx(structures * costs.CHAIN_PLAN_SECONDS)
    assert not network_sampling.chain_planned(other, measured)
    other_notes: dict = {}
    network_sampling.tn_sampling_seconds(other, measured, 500, "chain", other_notes)
    assert other_notes["chain_plans_priced"] >= 2


@pytest.mark.parametrize("n,dtype", [(1, "complex128"), (7, "complex128"), (13, "complex64")])
def test_z_strings_on_state_equal_qiskit_in_one_pass(n, dtype, monkeypatch):
    """Every Z string at once from |s|^2 (odd and even widths, blocks smaller than the
    state, complex64 summed in float64) equals Qiskit's Statevector.expectation_value."""
    from qsimdist.engine import term_readers

    monkeypatch.setattr(term_readers, "Z_STRING_BLOCK", 1 << 4)
    sv = Statevector(random_circuit(n, 4, max_operands=2, seed=n))
    rng = np.random.default_rng(n)
    qubit_lists = [list(range(n))] + [
        sorted(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        for _ in range(8)]
    state = np.asarray(sv.data).astype(dtype)
    got = term_readers.z_strings_on_state(state, qubit_lists)
    for qs, value in zip(qubit_lists, got):
        label = "".join("Z" if q in qs else "I" for q in reversed(range(n)))
        want = sv.expectation_value(SparsePauliOp(label)).real
        assert value == pytest.approx(want, abs=1e-12 if dtype == "complex128" else 1e-6)


@pytest.mark.parametrize("n", [1, 6, 9])
def test_diagonal_terms_on_state_equal_projector_sums(n, monkeypatch):
    """Terms of Z and the projectors 0 and 1 (a dynamic circuit's branch probabilities and
    its terms on one branch) in one pass equal the sum of |s|^2 over the basis states,
    each weighted by its signs and projections."""
    from qsimdist.engine import term_readers
    from qsimdist.engine.pauli_terms import PauliTerm

    monkeypatch.setattr(term_readers, "Z_STRING_BLOCK", 1 << 3)
    state = np.asarray(Statevector(random_circuit(n, 4, max_operands=2, seed=n + 20)).data)
    p = np.abs(state) ** 2
    rng = np.random.default_rng(n)
    terms = []
    for _ in range(10):
        qubits = sorted(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        terms.append(PauliTerm(tuple(qubits), "".join(rng.choice(list("Z01"), len(qubits)))))
    got = term_readers.diagonal_terms_on_state(state, terms)
    for term, value in zip(terms, got):
        want = 0.0
        for k in range(1 << n):
            w = 1.0
            for q, op in zip(term.qubits, term.ops):
                bit = k >> q & 1
                w *= {"Z": 1 - 2 * bit, "0": 1 - bit, "1": bit}[op]
            want += w * p[k]
        assert value == pytest.approx(want, abs=1e-12)


def test_dynamic_estimator_reads_one_state_per_binding():
    """A dynamic circuit's branch probabilities and terms are read off one final state held
    for the call (it was simulated once per branch read before: 5-11 s where Aer took
    0.5-0.8 s on MQT Bench's dynamic_qft), and the values are unchanged."""
    from qiskit import QuantumCircuit

    from qsimdist.qiskit import EstimatorV2

    qc = QuantumCircuit(4, 4)
    qc.h(range(4))
    qc.cx(0, 1)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(2)
    qc.ry(0.3, 3)
    qc.measure(1, 1)
    with qc.if_test((qc.clbits[1], 0)):
        qc.rz(0.7, 2)
        qc.h(3)
    obs = [SparsePauliOp(label) for label in ("ZIII", "IZII", "ZZII", "XIII", "IIIZ")]
    calls = []
    from qsimdist.engine import statevector_run

    real = statevector_run.final_state

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    import unittest.mock as mock

    with mock.patch.object(statevector_run, "final_state", counting):
        res = EstimatorV2(seed=5, options={"method": "statevector"}).run(
            [(qc, obs)]).result()[0]
    assert len(calls) == 1
    # the same values as without the held state (the seed draws the same branches)
    res2 = EstimatorV2(seed=5, options={"method": "statevector"}).run([(qc, obs)]).result()[0]
    np.testing.assert_allclose(res.data.evs, res2.data.evs, atol=1e-12)
    assert np.all(np.abs(res.data.evs) <= 1 + 1e-12)


def test_estimator_reads_z_strings_together_on_both_readers(monkeypatch):
    """Z strings are taken out before either Pauli reader (compiled one-pass or numpy
    groups): the stats count them, and every value equals StatevectorEstimator's."""
    from qiskit.primitives import StatevectorEstimator

    from qsimdist.engine import expectation
    from qsimdist.qiskit import EstimatorV2

    n = 14
    qc = random_circuit(n, 5, max_operands=2, seed=21)
    labels = ["".join(reversed(["Z" if q in (i, i + 1) else "I" for q in range(n)]))
              for i in range(n - 1)]
    labels += ["X" + "I" * (n - 2) + "Y", "Z" * n, "I" * (n - 3) + "XZZ"]
    obs = [SparsePauliOp(lb) for lb in labels]
    want = StatevectorEstimator().run([(qc, obs)]).result()[0].data.evs
    for one_pass in (True, False):
        monkeypatch.setattr(expectation, "one_pass_pays", lambda n, terms: one_pass)
        est = EstimatorV2(options={"method": "statevector"})
        res = est.run([(qc, obs)]).result()[0]
        assert np.allclose(res.data.evs, want, atol=1e-10), one_pass
        assert res.metadata["qsimdist"]["z_string_terms"] == n
