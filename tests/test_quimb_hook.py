"""qsimdist.quimb: contract(), the use() hook, PEPS helpers and 'qsimdist contract'.

Every value is compared with quimb's own contraction of the same network
(cotengra underneath, a path qsimdist did not choose) or with numpy.einsum;
complex128, rtol 1e-10 relative to the reference's norm.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import quimb.tensor as qtn
import quimb.tensor.tensor_core as quimb_core

import qsimdist.quimb as qq
from qsimdist.errors import InvalidInputError, PlanError
from qsimdist.network import Network, save_network

RTOL = 1e-10
Z = np.diag([1.0, -1.0])


def close(a, b, rtol: float = RTOL) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and float(np.max(np.abs(a - b), initial=0.0)) <= rtol * max(
        float(np.linalg.norm(b)), 1e-300)


def hyper_tn(seed: int, dtype: str = "complex128"):
    """A random quimb network with hyper-indices (some of them kept as outputs)."""
    return qtn.HTN_rand(10, 3, n_out=2, n_hyper_in=3, n_hyper_out=1, seed=seed, dtype=dtype)


def counts(tn) -> dict:
    c: dict = {}
    for t in tn:
        for ix in t.inds:
            c[ix] = c.get(ix, 0) + 1
    return c


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hyper_networks_equal_quimb(seed):
    tn = hyper_tn(seed)
    c = counts(tn)
    assert max(c.values()) >= 3  # the network really has hyper-indices
    ks = sorted(ix for ix in c if ix.startswith("k") and ix[1:].isdigit())
    assert max(c[k] for k in ks) >= 3  # ... one of them among the open indices
    inner_hyper = next(ix for ix, n in c.items() if n >= 3 and ix not in ks)
    for out in [(), (ks[0],), tuple(reversed(ks)), (ks[1], inner_hyper)]:
        got = qq.contract(tn, output_inds=out, memory_limit="256MiB")
        ref = tn.contract(all, output_inds=out, optimize="greedy")
        if out:
            assert isinstance(got, qtn.Tensor) and got.inds == out
            assert got.tags == ref.tags
            assert close(got.data, ref.data)
        else:
            assert isinstance(got, complex) and close(got, ref)


def test_open_output_index_is_a_tensor_in_the_order_asked():
    tn = qtn.TN_rand_reg(8, 3, D=3, seed=5, dtype="complex128")
    t = tn.tensors[0]
    t.new_ind("open_x", size=4, axis=1)
    tn2 = qtn.TensorNetwork(tn.tensors)
    tn2.tensors[3].new_ind("open_y", size=2)
    for out in [("open_x", "open_y"), ("open_y", "open_x")]:
        got = qq.contract(tn2, output_inds=out)
        ref = tn2.contract(all, output_inds=out, optimize="greedy")
        assert isinstance(got, qtn.Tensor) and got.inds == out and got.shape == ref.shape
        assert close(got.data, ref.data)
    # default output: quimb's (indices on one tensor, in order of appearance)
    got, ref = qq.contract(tn2), tn2.contract(all, optimize="greedy")
    assert got.inds == ref.inds and close(got.data, ref.data)


def test_preserve_tensor_and_exponent():
    tn = qtn.TN_rand_reg(6, 3, D=2, seed=1, dtype="complex128")
    tn.exponent = 2.5  # quimb folds a stripped exponent into the result
    ref = tn.contract(all, optimize="greedy")
    got = qq.contract(tn)
    assert close(got, ref)
    t = qq.contract(tn, preserve_tensor=True)
    assert isinstance(t, qtn.Tensor) and t.inds == () and close(t.data, ref)


def test_real_networks_return_real_values():
    tn = hyper_tn(3, dtype="float64")
    got = qq.contract(tn, output_inds=())
    ref = tn.contract(all, output_inds=(), optimize="greedy")
    assert isinstance(got, float) and close(got, ref)
    t = qq.contract(tn, output_inds=("k0",))
    assert t.data.dtype == np.float64 and close(t.data, tn.contract(all, output_inds=("k0",)).data)
    t32 = qq.contract(tn.astype("float32"), output_inds=("k0",))
    assert t32.data.dtype == np.float32
    assert np.allclose(t32.data, t.data, rtol=1e-4, atol=1e-4 * np.abs(t.data).max())
    c = qq.contract(tn, output_inds=("k0",), dtype="complex128")
    assert c.data.dtype == np.complex128 and close(c.data, t.data)


def test_repeated_index_on_one_tensor_is_its_diagonal():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 3, 4)), rng.normal(size=(4, 3))
    got = qq.contract_arrays([a, b], [("i", "i", "j"), ("j", "i")], ("i",))
    assert close(got, np.einsum("iij,ji->i", a, b))


def test_sliced_plan_equals_quimb():
    """A memory limit far below the unsliced peak makes the plan slice; the value is unchanged."""
    peps = qtn.PEPS.rand(3, 3, bond_dim=3, seed=2, dtype="complex128")
    norm = peps.make_norm(layer_tags=None)
    prepared = qq.prepare([t.data for t in norm], [t.inds for t in norm], (), None)
    _, plan = qq.run_network(prepared.network, qq.ContractOptions(memory_limit="24KiB"),
                             "complex128")
    assert plan.stats.n_slices > 1
    assert close(qq.contract(norm, output_inds=(), memory_limit="24KiB"),
                 norm.contract(all, output_inds=(), optimize="auto-hq"))


def test_two_tensors_take_the_forced_path_within_the_memory_limit():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(64, 64)), rng.normal(size=(64, 64))
    prepared = qq.prepare([a, b], [("i", "j"), ("j", "k")], ("k", "i"))
    values, plan = qq.run_network(prepared.network, qq.ContractOptions(memory_limit="1GiB"),
                                  "complex128")
    assert plan.stats.n_slices == 1 and plan.path == [(0, 1)]
    assert close(values, (a @ b).T)
    # over the limit, the forced plan is not taken: the planner slices or refuses in one line
    tight = qq.ContractOptions(memory_limit=plan.stats.peak_bytes // 2)
    with pytest.raises(PlanError, match="memory limit .* is too small"):
        qq.run_network(prepared.network, tight, "complex128")


def test_plans_are_reused_for_the_same_structure():
    qq.clear_plan_cache()
    tn = qtn.TN_rand_reg(10, 3, D=2, seed=8, dtype="complex128")
    prepared = qq.prepare([t.data for t in tn], [t.inds for t in tn], (), None)
    opts = qq.ContractOptions(memory_limit="1GiB")
    v1, p1 = qq.run_network(prepared.network, opts, "complex128")
    tn2 = tn.copy()
    tn2.randomize_(seed=9)  # same structure, other values: the plan is reused, not the values
    prepared2 = qq.prepare([t.data for t in tn2], [t.inds for t in tn2], (), None)
    v2, p2 = qq.run_network(prepared2.network, opts, "complex128")
    assert p2.steps is p1.steps and p2.network is prepared2.network
    assert close(v2, tn2.contract(all, optimize="greedy")) and not close(v2, v1)
    # a limit the kept plan does not fit makes a new (sliced) plan
    tight = qq.ContractOptions(memory_limit=p1.stats.peak_bytes // 2)
    v3, p3 = qq.run_network(prepared2.network, tight, "complex128")
    assert p3.steps is not p1.steps and p3.stats.n_slices > 1 and close(v3, v2)


def test_executor_follows_the_launch(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE",
                "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert qq.ContractOptions(profile="local-cpu").resolved_executor() == "local"
    assert qq.ContractOptions().resolved_executor() == "local"
    monkeypatch.setenv("PMI_SIZE", "2")
    assert qq.ContractOptions(profile="local-cpu").resolved_executor() == "mpi"
    assert qq.ContractOptions().resolved_executor() == "local"
    assert qq.ContractOptions(profile="local-cpu", executor="local").resolved_executor() == "local"


def test_errors_are_one_line_qsimdist_errors():
    tn = hyper_tn(0)
    with pytest.raises(InvalidInputError, match="hyper-index.*output_inds"):
        qq.contract(tn)
    with pytest.raises(InvalidInputError, match="is on no tensor"):
        qq.contract(tn, output_inds=("nope",))
    with pytest.raises(InvalidInputError, match="unknown option 'optimise'; valid: dtype"):
        qq.contract(tn, output_inds=(), optimise="greedy")
    with pytest.raises(InvalidInputError, match="unknown dtype 'c32'"):
        qq.contract(tn, output_inds=(), dtype="c32")
    with pytest.raises(InvalidInputError, match="complex arrays"):
        qq.contract(tn, output_inds=(), dtype="float64")
    a, b = qtn.Tensor(np.ones((2, 3)), ("i", "j")), qtn.Tensor(np.ones((4,)), ("j",))
    with pytest.raises(InvalidInputError, match="index 'j' has size 3 on tensor 0 but 4 on"):
        qq.contract([a, b])
    with pytest.raises(InvalidInputError, match="TensorNetwork"):
        qq.contract("not a network")
    with pytest.raises(InvalidInputError, match="no tensors"):
        qq.contract(qtn.TensorNetwork([]))


# ---------------------------------------------------------------- circuits
def quimb_circuit(n: int = 6, depth: int = 4, seed: int = 11):
    rng = np.random.default_rng(seed)
    circ = qtn.Circuit(n)
    for layer in range(depth):
        for q in range(n):
            circ.apply_gate("U3", *rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, n - 1, 2):
            circ.apply_gate("CZ" if layer % 3 else "CX", q, q + 1)
        circ.apply_gate("RZZ", rng.uniform(0, np.pi), 0, n - 1)
    return circ


def test_circuit_networks_equal_quimb():
    circ = quimb_circuit()
    psi = circ.psi
    out = tuple(f"k{q}" for q in range(circ.N))
    got = qq.contract(psi, output_inds=out)
    ref = psi.contract(all, output_inds=out, optimize="greedy")
    assert isinstance(got, qtn.Tensor) and got.inds == out and close(got.data, ref.data)
    assert close(got.data.reshape(-1), circ.to_dense().reshape(-1))
    amp_tn = circ.amplitude_tn("011010")
    assert close(qq.contract(amp_tn, output_inds=()), circ.amplitude("011010", optimize="greedy"))


# -------------------------------------------------------------------- PEPS
@pytest.fixture(scope="module")
def peps44():
    return qtn.PEPS.rand(4, 4, bond_dim=3, seed=1, dtype="complex128")


@pytest.fixture(scope="module")
def peps44_norm2(peps44):
    """<psi|psi> contracted by quimb (cotengra's auto-hq path)."""
    return peps44.make_norm(layer_tags=None).contract(all, output_inds=(), optimize="auto-hq")


def test_peps_norm_4x4_d3(peps44, peps44_norm2):
    ref = peps44_norm2
    assert abs(np.imag(ref)) <= 1e-12 * abs(ref)
    assert close(qq.peps_norm(peps44, squared=True), np.real(ref))
    assert close(qq.peps_norm(peps44), np.sqrt(np.real(ref)))


def test_peps_local_z_4x4_d3(peps44):
    got = qq.peps_local_expectation(peps44, Z, (1, 2))
    ref = peps44.local_expectation_exact(Z, (1, 2), optimize="auto-hq")
    assert isinstance(got, float) and abs(got - ref) <= RTOL * max(abs(ref), 1.0)
    zz = np.kron(Z, Z)
    got = qq.peps_local_expectation(peps44, zz, [(2, 1), (2, 2)])
    ref = peps44.local_expectation_exact(zz, [(2, 1), (2, 2)], optimize="auto-hq")
    assert abs(got - ref) <= RTOL * max(abs(ref), 1.0)


def test_peps_errors(peps44):
    with pytest.raises(InvalidInputError, match="site"):
        qq.peps_local_expectation(peps44, Z, (7, 7))
    with pytest.raises(InvalidInputError, match=r"need a \(2, 2\) matrix"):
        qq.peps_local_expectation(peps44, np.eye(4), (0, 1))
    with pytest.raises(InvalidInputError, match="PEPS"):
        qq.peps_norm(qtn.Tensor(np.ones(2), ("a",)))


# -------------------------------------------------------------------- hook
def test_use_routes_quimb_contractions_and_restores(peps44, peps44_norm2):
    original = quimb_core.array_contract
    tn = hyper_tn(4)
    out = ("k0", "k1")
    ref = tn.contract(all, output_inds=out, optimize="greedy")
    ref_norm = peps44_norm2
    with qq.use(memory_limit="256MiB") as hook:
        assert qq.hook_active() and quimb_core.array_contract is not original
        got = tn.contract(all, output_inds=out)
        got_norm = peps44.make_norm(layer_tags=None) ^ all
        got_tc = qtn.tensor_contract(*tn, output_inds=out)
    assert quimb_core.array_contract is original and not qq.hook_active()
    assert hook.routed == 3 and hook.fallbacks == 0
    assert got.inds == out and close(got.data, ref.data) and close(got_tc.data, ref.data)
    assert close(got_norm, ref_norm)


def test_use_restores_on_exception_and_nests():
    original = quimb_core.array_contract
    with pytest.raises(RuntimeError, match="boom"):
        with qq.use():
            raise RuntimeError("boom")
    assert quimb_core.array_contract is original
    tn = hyper_tn(5)
    ref = tn.contract(all, output_inds=("k0",), optimize="greedy")
    with qq.use() as outer:
        with qq.use(dtype="complex64") as inner:
            low = tn.contract(all, output_inds=("k0",))
        high = tn.contract(all, output_inds=("k0",))
        assert quimb_core.array_contract is not original
    assert quimb_core.array_contract is original
    assert inner.routed == 1 and outer.routed == 1
    assert low.data.dtype == np.complex64 and high.data.dtype == np.complex128
    assert close(high.data, ref.data) and close(low.data, ref.data, rtol=1e-5)


def test_use_strip_exponent_and_quimb_circuit_calls():
    tn = hyper_tn(7)
    ref = tn.contract(all, output_inds=(), optimize="greedy")
    circ = quimb_circuit(n=5, depth=3, seed=2)
    dense = circ.to_dense().reshape(-1)
    with qq.use() as hook:
        mantissa, exponent = tn.contract(all, output_inds=(), strip_exponent=True)
        amp = circ.amplitude("01101")  # quimb simplifies, then contracts: every step routed
    assert hook.routed >= 2
    assert close(mantissa * 10**exponent, ref) and abs(abs(mantissa) - 1.0) < 1e-12
    assert close(amp, dense[int("01101", 2)])


def test_use_leaves_what_it_cannot_take_to_quimb():
    tn = hyper_tn(6)
    ref = tn.contract(all, output_inds=("k0",), optimize="greedy")
    with qq.use() as hook:
        got = tn.contract(all, output_inds=("k0",), implementation="autoray")
    assert hook.routed == 0 and hook.fallbacks == 1
    assert close(got.data, ref.data)
    with pytest.raises(InvalidInputError, match="unknown option"):
        with qq.use(optimize="greedy"):
            pass


# --------------------------------------------------------------------- CLI
def test_cli_contract(tmp_path, capsys):
    from qsimdist.cli import main

    rng = np.random.default_rng(3)
    inputs = [("a", "b"), ("b", "c", "h"), ("c", "a", "h"), ("h", "d")]
    size = {"a": 2, "b": 3, "c": 2, "h": 2, "d": 3}
    arrays = [rng.normal(size=[size[i] for i in t]) + 1j * rng.normal(size=[size[i] for i in t])
              for t in inputs]
    save_network(Network(inputs, ("d", "a"), size, arrays), tmp_path / "net.json")
    ref = np.einsum("ab,bch,cah,hd->da", *arrays)
    rc = main(["contract", str(tmp_path / "net.json"), "--json", "-o", str(tmp_path / "r.npy")])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["shape"] == [3, 2] and res["output"] == ["d", "a"]
    assert close(np.load(tmp_path / "r.npy"), ref)
    assert abs(res["norm"] - np.linalg.norm(ref)) <= RTOL * np.linalg.norm(ref)
    save_network(Network(inputs, (), size, arrays), tmp_path / "s.json")
    rc = main(["contract", str(tmp_path / "s.json")])
    out = capsys.readouterr().out.split()
    assert rc == 0 and out[0] == "value"
    assert close(complex(float(out[1]), float(out[2].rstrip("j"))),
                 np.einsum("ab,bch,cah,hd->", *arrays))
    # structure only: refused, unless random arrays are asked for (seeded: same value twice)
    save_network(Network(inputs, (), size), tmp_path / "st.json")
    assert main(["contract", str(tmp_path / "st.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--random-arrays SEED" in err
    vals = []
    for _ in range(2):
        assert main(["contract", str(tmp_path / "st.json"), "--random-arrays", "7", "--json"]) == 0
        vals.append(json.loads(capsys.readouterr().out)["value"])
    assert vals[0] == vals[1]


@pytest.mark.parametrize("case, words", [
    ("bad_sizes", "has shape"),
    ("bad_json", "not valid JSON"),
    ("missing_arrays", "no such file"),
    ("missing_network", "no such network file"),
    ("bad_dtype", "'c32' is not one of 'complex64', 'complex128', 'float32', 'float64'"),
    ("bad_output", ".npy"),
])
def test_cli_contract_errors(tmp_path, capsys, case, words):
    from qsimdist.cli import main

    inputs = [("a", "b"), ("b", "a")]
    save_network(Network(inputs, (), {"a": 2, "b": 3}, [np.ones((2, 3)), np.ones((3, 2))]),
                 tmp_path / "n.json")
    np.savez(tmp_path / "bad.npz", np.ones((2, 2)), np.ones((2, 2)))
    (tmp_path / "broken.json").write_text('{"inputs": [["a"]], ')
    args = {
        "bad_sizes": ["n.json", "--arrays", "bad.npz"],
        "bad_json": ["broken.json"],
        "missing_arrays": ["n.json", "--arrays", "gone.npz"],
        "missing_network": ["gone.json"],
        "bad_dtype": ["n.json", "--dtype", "c32"],
        "bad_output": ["n.json", "-o", "r.txt"],
    }[case]
    args = [str(tmp_path / a) if a.endswith((".json", ".npz", ".txt")) else a for a in args]
    rc = main(["contract", *args])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith("qsimdist: error:") and words in err


# --------------------------------------------------------------------- MPI
@pytest.mark.mpi
def test_under_mpiexec_two_ranks_equal_quimb():
    """contract(), the PEPS helpers and the hook with executor="mpi" on 2 ranks (one launch)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("mpiexec") is None:  # pragma: no cover - the test extra installs mpich
        pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'")
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(here.parent), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py",
         str(here / "mpi_quimb_cases.py"), "local-cpu"],
        capture_output=True, text=True, timeout=300, cwd=here.parent, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout  # rank 0 prints, the other rank prints nothing
    res = json.loads(lines[0])
    assert res["ranks"] == 2 and len(res["per_rank"]) == 2
    for rank in res["per_rank"]:  # every rank holds the whole result
        assert set(rank["errors"]) >= {"hyper_tensor", "hyper_scalar", "peps_norm", "peps_z",
                                       "circuit_psi", "circuit_sharded", "hook", "two_tensors"}
        for name, err in rank["errors"].items():
            assert err <= RTOL, (name, err)
        assert rank["routed"] == 1
    # the work was really spread: slices shared by the two ranks, or the output sharded
    assert res["schedules"]["peps_norm"]["n_slices"] >= 2
    # the 16 KiB state under 24 KiB per rank: since the planner starts each group at its
    # whole memory, one rank holds it unsliced and the dp prefers that to sharding (no limit
    # between makes sharding both needed and possible here): sharded, or one unsliced run
    sharded = res["schedules"]["circuit_sharded"]
    assert sharded["group_size"] == 2 or sharded["n_slices"] == 1, sharded


def test_gemm_mode_through_the_hook(monkeypatch):
    """ContractOptions(gemm="3m") reaches the executor (3M forced onto every BLAS step here);
    TF32 on numpy is refused before anything runs."""
    from qsimdist.executors import local

    calls = []
    real = local.gauss_matmul
    monkeypatch.setattr(local, "GAUSS_MIN_EXTENT", 1)
    monkeypatch.setattr(local, "gauss_matmul", lambda *a: calls.append(1) or real(*a))
    tn = qtn.TN2D_rand(3, 3, D=3, seed=2, dtype="complex128")
    want = complex(tn.contract(all, optimize="greedy"))
    got = complex(qq.contract(tn, gemm="3m"))
    assert calls and abs(got - want) / abs(want) < 1e-12
    with pytest.raises(InvalidInputError, match="needs backend 'cupy'"):
        qq.contract(tn, gemm="tf32")
