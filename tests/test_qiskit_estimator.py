"""Tests of ``qsimdist.qiskit.EstimatorV2``, ``qsimdist.expectation_values``, ``qsimdist expect``.

References are independent of qsimdist: Qiskit's ``StatevectorEstimator``
and ``Statevector`` (values, shapes, noise, error types), a few-line numpy
state-vector simulator for :class:`GateCircuit` (gate fusion), and, for the
50-qubit brickwork circuit, Qiskit's ``Statevector`` of the sub-circuit on a
window of qubits around each term that contains its light cone (a depth-``d``
brickwork cone grows at most one qubit per layer on each side).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit import ParameterVector
from qiskit.circuit import library as lib
from qiskit.primitives import StatevectorEstimator
from qiskit.quantum_info import Pauli, SparsePauliOp, Statevector, random_unitary

from qsimdist import expectation_values
from qsimdist.cli import main
from qsimdist.engine.expectation import ExpectationEngine
from qsimdist.engine.pauli_terms import parse_term
from qsimdist.errors import InvalidInputError, UnsupportedInstructionError
from qsimdist.frontends import GateCircuit, load
from qsimdist.frontends.one_qubit_fusion import fuse_into_neighbours
from qsimdist.qiskit import EstimatorV2

TOL = 1e-6

# (gate class, number of parameters, number of qubits): Qiskit's standard gates
_FIXED = [
    (lib.HGate, 1), (lib.XGate, 1), (lib.YGate, 1), (lib.ZGate, 1), (lib.SGate, 1),
    (lib.SdgGate, 1), (lib.TGate, 1), (lib.TdgGate, 1), (lib.SXGate, 1), (lib.CXGate, 2),
    (lib.CYGate, 2), (lib.CZGate, 2), (lib.SwapGate, 2), (lib.iSwapGate, 2), (lib.ECRGate, 2),
    (lib.CHGate, 2), (lib.CCXGate, 3), (lib.CSwapGate, 3),
]
_PARAMETRIC = [
    (lib.RXGate, 1, 1), (lib.RYGate, 1, 1), (lib.RZGate, 1, 1), (lib.PhaseGate, 1, 1),
    (lib.UGate, 3, 1), (lib.CRXGate, 1, 2), (lib.CRYGate, 1, 2), (lib.CRZGate, 1, 2),
    (lib.CPhaseGate, 1, 2), (lib.RXXGate, 1, 2), (lib.RYYGate, 1, 2), (lib.RZZGate, 1, 2),
    (lib.RZXGate, 1, 2), (lib.CUGate, 4, 2),
]


def random_parametric_circuit(n: int, n_gates: int, seed: int) -> QuantumCircuit:
    """Random circuit of Qiskit's standard gates, about half of them parametrised."""
    rng = np.random.default_rng(seed)
    theta = ParameterVector("t", 6)
    qc = QuantumCircuit(n)
    for _ in range(n_gates):
        if rng.random() < 0.5:
            cls, k = _FIXED[rng.integers(len(_FIXED))]
            if k > n:
                continue
            qc.append(cls(), [int(q) for q in rng.choice(n, k, replace=False)])
        else:
            cls, n_par, k = _PARAMETRIC[rng.integers(len(_PARAMETRIC))]
            if k > n:
                continue
            params = [float(rng.uniform(-1, 1)) * theta[int(rng.integers(6))]
                      + float(rng.uniform(-1, 1)) for _ in range(n_par)]
            qc.append(cls(*params), [int(q) for q in rng.choice(n, k, replace=False)])
    # every parameter used at least once, so the pub's value arrays fit
    for j, t in enumerate(theta):
        qc.rz(t, j % n)
    return qc


def random_labels(n: int, count: int, rng: np.random.Generator, max_weight: int) -> list[str]:
    out = []
    for _ in range(count):
        chars = ["I"] * n
        w = int(rng.integers(1, max_weight + 1))
        for q in rng.choice(n, w, replace=False):
            chars[q] = "XYZ"[int(rng.integers(3))]
        out.append("".join(chars))
    return out


def brickwork(n: int, depth: int, seed: int) -> QuantumCircuit:
    """Brickwork of Haar-random two-qubit unitaries on neighbours (layer d starts at d % 2)."""
    qc = QuantumCircuit(n)
    for d in range(depth):
        for a in range(d % 2, n - 1, 2):
            qc.unitary(random_unitary(4, seed=seed + 1000 * d + a), [a, a + 1])
    return qc


def window_reference(qc: QuantumCircuit, i: int, depth: int) -> float:
    """<Z_i Z_{i+1}> from the Statevector of the gates inside the window [i-depth, i+1+depth].

    The backward light cone of {i, i+1} through ``depth`` brickwork layers lies in
    that window, so gates crossing its edge are outside the cone and dropping them
    leaves the value unchanged.
    """
    lo, hi = max(0, i - depth), min(qc.num_qubits - 1, i + 1 + depth)
    sub = QuantumCircuit(hi - lo + 1)
    for inst in qc.data:
        qs = [qc.find_bit(q).index for q in inst.qubits]
        if all(lo <= q <= hi for q in qs):
            sub.append(inst.operation, [q - lo for q in qs])
    label = ["I"] * sub.num_qubits
    label[i - lo] = label[i + 1 - lo] = "Z"
    return float(Statevector(sub).expectation_value(Pauli("".join(reversed(label)))).real)


def numpy_state(gc: GateCircuit) -> np.ndarray:
    """State vector of a GateCircuit (big-endian gate matrices; axis q is qubit q)."""
    n = gc.n_qubits
    psi = np.zeros((2,) * n, dtype=complex)
    psi[(0,) * n] = 1.0
    for g in gc.gates:
        k = len(g.qubits)
        m = g.matrix.reshape((2,) * (2 * k))
        psi = np.tensordot(m, psi, axes=(list(range(k, 2 * k)), list(g.qubits)))
        psi = np.moveaxis(psi, list(range(k)), list(g.qubits))
    return psi * np.exp(1j * gc.global_phase)


# ------------------------------------------------------------------- estimator
@pytest.mark.parametrize("n, n_gates, seed", [(3, 20, 1), (6, 40, 2), (11, 50, 3), (16, 60, 4)])
def test_estimator_matches_statevector_estimator(n, n_gates, seed):
    qc = random_parametric_circuit(n, n_gates, seed)
    rng = np.random.default_rng(seed)
    labels = random_labels(n, 4, rng, max_weight=min(n, 4))
    obs = [SparsePauliOp(labels[:2], [0.7, -1.3]), labels[2], Pauli(labels[3])]
    values = rng.uniform(-np.pi, np.pi, (2, 1, qc.num_parameters))
    pub = (qc, obs, values)
    ref = StatevectorEstimator().run([pub]).result()[0]
    est = EstimatorV2()
    got = est.run([pub]).result()[0]
    assert got.data.evs.shape == ref.data.evs.shape == (2, 3)
    assert got.data.stds.shape == ref.data.stds.shape
    np.testing.assert_allclose(got.data.evs, ref.data.evs, atol=TOL, rtol=0)
    assert not np.allclose(ref.data.evs, 0.0)  # the comparison means something
    # the second binding reuses the plans the first one made
    stats = got.metadata["qsimdist"]
    assert stats["plans_made"] <= len(labels)
    assert stats["plans_reused"] >= stats["contractions"] - stats["plans_made"]


@pytest.mark.parametrize("param_shape, obs_shape", [
    ((3, 1), (4,)), ((5,), (3, 1)), ((), (2, 2)), ((2, 3), (1, 3)), ((4,), ()),
])
def test_broadcast_shapes_match_reference(param_shape, obs_shape):
    theta = ParameterVector("a", 2)
    qc = QuantumCircuit(3)
    qc.ry(theta[0], 0)
    qc.cx(0, 1)
    qc.rx(theta[1], 2)
    qc.cz(1, 2)
    rng = np.random.default_rng(7)
    pool = ["ZII", "IXZ", "YYI", "XXX", "IZI", "ZZZ"]
    obs = np.empty(obs_shape, dtype=object)
    for k, idx in enumerate(np.ndindex(*obs_shape)):
        obs[idx] = SparsePauliOp([pool[k % 6], pool[(k + 1) % 6]], [1.0, 0.5])
    values = rng.uniform(-2, 2, (*param_shape, 2))
    pub = (qc, obs.tolist() if obs_shape else obs[()], values)
    ref = StatevectorEstimator().run([pub]).result()[0]
    got = EstimatorV2().run([pub]).result()[0]
    assert got.data.evs.shape == ref.data.evs.shape
    assert got.data.shape == ref.data.shape
    np.testing.assert_allclose(got.data.evs, ref.data.evs, atol=TOL, rtol=0)
    np.testing.assert_array_equal(got.data.stds, ref.data.stds)


def test_several_pubs_unparametrised_and_result_types():
    a = QuantumCircuit(2)
    a.h(0)
    a.cx(0, 1)
    b = QuantumCircuit(3)
    b.x(2)
    b.h(1)
    pubs = [(a, ["ZZ", "XX", "YY", "IZ"]), (b, "ZXZ")]
    ref = StatevectorEstimator().run(pubs).result()
    res = EstimatorV2().run(pubs).result()
    assert type(res).__name__ == "PrimitiveResult" and len(res) == 2
    assert res.metadata == ref.metadata
    for r, g in zip(ref, res):
        assert g.data.evs.shape == r.data.evs.shape
        np.testing.assert_allclose(g.data.evs, r.data.evs, atol=TOL, rtol=0)
        assert g.metadata["target_precision"] == r.metadata["target_precision"]


def test_precision_adds_the_reference_noise():
    """A positive precision draws the same Gaussian noise as StatevectorEstimator's seed."""
    qc = random_parametric_circuit(4, 20, 11)
    values = np.random.default_rng(1).uniform(-1, 1, (3, qc.num_parameters))
    pubs = [(qc, ["ZIII", "IXYI"], values[:, None, :]), (qc, "ZZZZ", values, 0.3)]
    ref = StatevectorEstimator(seed=42, default_precision=0.05).run(pubs).result()
    got = EstimatorV2(seed=42, default_precision=0.05).run(pubs).result()
    exact = EstimatorV2().run(pubs).result()
    for r, g, e in zip(ref, got, exact):
        np.testing.assert_allclose(g.data.evs, r.data.evs, atol=TOL, rtol=0)
        assert g.metadata["target_precision"] == r.metadata["target_precision"]
        assert np.max(np.abs(g.data.evs - e.data.evs)) > 1e-4  # noise was added
    other = EstimatorV2(seed=43, default_precision=0.05).run(pubs).result()
    assert not np.allclose(other[0].data.evs, got[0].data.evs)


def test_non_broadcasting_pub_raises_qiskits_error():
    theta = ParameterVector("a", 1)
    qc = QuantumCircuit(2)
    qc.rx(theta[0], 0)
    pub = (qc, ["ZZ", "XX", "IZ", "ZI"], np.zeros((3, 2, 1)))
    with pytest.raises(ValueError) as ref:
        StatevectorEstimator().run([pub])
    with pytest.raises(type(ref.value)) as got:
        EstimatorV2().run([pub])
    assert str(got.value) == str(ref.value)
    assert "broadcastable" in str(got.value)


def test_unsupported_instructions_are_named():
    from qiskit.exceptions import QiskitError

    loop = QuantumCircuit(2, 1)
    loop.h(1)
    loop.measure(1, 0)
    with loop.while_loop((loop.clbits[0], 1)):
        loop.x(1)
    with pytest.raises(UnsupportedInstructionError, match="'while_loop' at position 2") as info:
        EstimatorV2().run([(loop, "ZZ")]).result()
    assert isinstance(info.value, QiskitError)  # what StatevectorEstimator raises
    free = QuantumCircuit(2)
    free.rx(ParameterVector("b", 1)[0], 1)
    with pytest.raises(UnsupportedInstructionError, match="unbound parameters b.*'rx'"):
        expectation_values(free, "ZZ")
    mid = QuantumCircuit(2, 1)
    mid.h(0)
    mid.measure(0, 0)
    mid.x(0)
    # the plain-Python API stays unitary-only (and raises no QiskitError)
    with pytest.raises(UnsupportedInstructionError, match="'x'.*mid-circuit") as info:
        expectation_values(mid, "ZZ")
    assert not isinstance(info.value, QiskitError)


def test_final_measurements_are_ignored():
    qc = QuantumCircuit(3, 3)
    qc.h(0)
    qc.cx(0, 1)
    qc.ry(0.4, 2)
    plain = qc.copy()
    qc.measure(range(3), range(3))
    got = EstimatorV2().run([(qc, ["ZZI", "XXI", "ZII"])]).result()[0].data.evs
    ref = StatevectorEstimator().run([(plain, ["ZZI", "XXI", "ZII"])]).result()[0].data.evs
    np.testing.assert_allclose(got, ref, atol=TOL, rtol=0)


def test_bad_options_raise():
    with pytest.raises(InvalidInputError, match="valid: complex64, complex128"):
        EstimatorV2(options={"dtype": "c32"})
    with pytest.raises(InvalidInputError, match="unknown estimator options colour"):
        EstimatorV2(options={"colour": "blue"})
    with pytest.raises(InvalidInputError, match="valid: auto, statevector, doubled, state"):
        EstimatorV2(options={"method": "fast"})


def test_estimator_method_option():
    qc = random_parametric_circuit(5, 30, 51)
    values = np.random.default_rng(2).uniform(-1, 1, (2, qc.num_parameters))
    pub = (qc, ["ZZIII", "IXIYI", "ZIIIX"], values[:, None, :])
    ref = StatevectorEstimator().run([pub]).result()[0].data.evs
    for method in ("doubled", "state"):
        res = EstimatorV2(options={"method": method}).run([pub]).result()[0]
        np.testing.assert_allclose(res.data.evs, ref, atol=TOL, rtol=0)
        assert res.metadata["qsimdist"][f"{method}_terms"] == 6


# -------------------------------------------------------------- wide circuits
def test_brickwork_50_qubits_nearest_neighbour_zz():
    n, depth = 50, 4
    qc = brickwork(n, depth, seed=5)
    labels = ["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)]
    est = EstimatorV2()
    t0 = time.perf_counter()
    evs = est.run([(qc, labels)]).result()[0].data.evs
    seconds = time.perf_counter() - t0
    ref = np.array([window_reference(qc, i, depth) for i in range(n - 1)])
    np.testing.assert_allclose(evs, ref, atol=TOL, rtol=0)
    assert np.std(ref) > 0.01  # the values differ from term to term
    assert seconds < 30, f"49 terms took {seconds:.1f} s"
    stats = est.engine.stats
    assert stats.max_light_cone_qubits <= 2 + 2 * depth
    assert stats.plans_made < 15 < stats.plans_reused  # translated light cones share plans


def test_light_cone_leaves_out_unreachable_gates():
    gc = GateCircuit(4)
    eye2 = np.eye(2)
    cx = np.eye(4)[[0, 1, 3, 2]]
    gc.append(eye2, [3], "a")  # 0
    gc.append(cx, [0, 1], "b")  # 1
    gc.append(cx, [1, 2], "c")  # 2
    gc.append(cx, [2, 3], "d")  # 3
    assert gc.light_cone([0]).gates == (1,)  # gates 2 and 3 come after qubit 0's last gate
    assert gc.light_cone([1]).gates == (1, 2)  # gate 0 on qubit 3 never reaches qubit 1
    assert gc.light_cone([3]).gates == (0, 1, 2, 3)


# ------------------------------------------------------------ core functions
def test_fusion_keeps_the_state():
    qc = random_parametric_circuit(5, 60, 21).assign_parameters(np.linspace(0.1, 0.6, 6))
    gc = load(qc)
    fused = fuse_into_neighbours(gc)
    assert len(fused.gates) < len(gc.gates)
    ref = numpy_state(gc)
    np.testing.assert_allclose(numpy_state(fused), ref, atol=1e-12)
    sv = Statevector(qc).data.reshape((2,) * 5)  # axis 0 is qubit 4 in Qiskit's order
    np.testing.assert_allclose(ref.transpose(range(4, -1, -1)), sv, atol=1e-12)


def test_projector_labels_and_complex64():
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.ry(0.7, 1)
    qc.cx(1, 2)
    qc.sdg(0)
    sv = Statevector(qc)
    labels = ["II0", "1II", "I+I", "-II", "IIr", "IIl", "01Z"]
    mats = {"I": np.eye(2), "Z": np.diag([1, -1]), "0": np.diag([1, 0]), "1": np.diag([0, 1]),
            "+": np.full((2, 2), 0.5), "-": np.array([[0.5, -0.5], [-0.5, 0.5]]),
            "r": np.array([[0.5, -0.5j], [0.5j, 0.5]]), "l": np.array([[0.5, 0.5j], [-0.5j, 0.5]])}
    ref = []
    for label in labels:
        op = np.array([[1.0]])
        for c in label:  # leftmost character is the most significant qubit
            op = np.kron(op, mats[c])
        ref.append(float(np.real(sv.data.conj() @ op @ sv.data)))
    np.testing.assert_allclose(expectation_values(qc, labels), ref, atol=1e-10)
    np.testing.assert_allclose(expectation_values(qc, labels, dtype="complex64"), ref, atol=1e-5)


def test_parse_term_rejects_bad_labels():
    assert parse_term("ZIX", 3).qubits == (0, 2)
    assert parse_term("ZIX", 3).ops == "XZ"
    with pytest.raises(InvalidInputError, match="has 2 characters; the circuit has 3"):
        parse_term("ZZ", 3)
    with pytest.raises(InvalidInputError, match="invalid characters 'Q'"):
        parse_term("ZQI", 3)


def test_engine_reuses_plans_across_calls():
    qc = brickwork(12, 3, seed=9)
    labels = ["I" * (12 - 2 - i) + "XY" + "I" * i for i in range(11)]
    engine = ExpectationEngine()
    first = expectation_values(qc, labels, engine=engine)
    made = engine.stats.plans_made
    again = expectation_values(brickwork(12, 3, seed=10), labels, engine=engine)
    assert engine.stats.plans_made == made  # same structure, new arrays
    sv = [Statevector(brickwork(12, 3, seed=s)) for s in (9, 10)]
    for vals, state in zip((first, again), sv):
        ref = [state.expectation_value(Pauli(label)).real for label in labels]
        np.testing.assert_allclose(vals, ref, atol=1e-10)


def test_expectation_module_does_not_import_qiskit():
    code = (
        "import sys, numpy as np\n"
        "from qsimdist.frontends import GateCircuit\n"
        "from qsimdist import expectation_values\n"
        "gc = GateCircuit(2); gc.append(np.array([[1, 1], [1, -1]]) / 2 ** 0.5, [0])\n"
        "print(expectation_values(gc, ['IX', 'IZ']).round(12).tolist())\n"
        "print(sorted(m for m in ('qiskit', 'quimb', 'typer') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "[1.0, 0.0]"
    assert out[1] == "[]"


# ------------------------------------------------------------------------ CLI
def _cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_expect_json_and_text(tmp_path, capsys):
    qc = QuantumCircuit(4, 4)
    qc.h(0)
    qc.cx(0, 1)
    qc.ry(0.3, 3)
    qc.cx(3, 2)
    qc.measure(range(4), range(4))
    path = tmp_path / "c.qasm"
    from qiskit import qasm2

    path.write_text(qasm2.dumps(qc))
    qc.remove_final_measurements()
    sv = Statevector(qc)
    labels = ["IIZZ", "IIXX", "ZZII", "XIII"]
    rc, out, err = _cli(capsys, "expect", path, *[a for lb in labels for a in ("-O", lb)],
                        "--dtype", "complex128", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert [e["observable"] for e in data["expectations"]] == labels
    for e in data["expectations"]:
        ref = sv.expectation_value(Pauli(e["observable"])).real
        assert abs(e["value"] - ref) < 1e-10
    rc, out, err = _cli(capsys, "expect", path, "--observable", "ZZII", "--dtype", "complex128")
    assert rc == 0
    label, value = out.split()
    assert label == "ZZII"
    assert abs(float(value) - sv.expectation_value(Pauli("ZZII")).real) < 1e-9


@pytest.mark.parametrize("label, words", [
    ("ZZ", ["has 2 characters", "4 qubits"]),
    ("ZZIW", ["invalid characters 'W'", "valid: I, X, Y, Z"]),
])
def test_cli_expect_bad_label(tmp_path, capsys, label, words):
    path = tmp_path / "c.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[4];\nh q[0];\n')
    rc, out, err = _cli(capsys, "expect", path, "-O", "ZZII", "-O", label)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qsimdist: error: ")
    for w in words:
        assert w in lines[0]


def test_cli_expect_refuses_mid_circuit_measurement(tmp_path, capsys):
    path = tmp_path / "m.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2];\nh q[0];\n'
                    "measure q[0] -> c[0];\nx q[0];\n")
    rc, _, err = _cli(capsys, "expect", path, "-O", "ZZ")
    assert rc == 2
    assert "mid-circuit measurement" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("method", ["doubled", "state"])
def test_both_methods_match_statevector(method):
    qc = random_parametric_circuit(8, 40, 31).assign_parameters(np.linspace(-1, 1, 6))
    labels = random_labels(8, 4, np.random.default_rng(31), max_weight=3)
    engine = ExpectationEngine(method=method)
    got = expectation_values(qc, labels, engine=engine)
    sv = Statevector(qc)
    ref = [sv.expectation_value(Pauli(label)).real for label in labels]
    np.testing.assert_allclose(got, ref, atol=1e-10)
    counts = (engine.stats.doubled_terms, engine.stats.state_terms)
    assert counts == ((4, 0) if method == "doubled" else (0, 4))
    assert engine.stats.contractions == (4 if method == "doubled" else 1)


def test_auto_method_by_predicted_cost():
    """A narrow deep circuit: the full statevector (the router's cheapest), or one light-cone
    state where the statevector may not take the memory; local terms of a wide one: doubled."""
    deep = random_parametric_circuit(10, 80, 41).assign_parameters(np.ones(6))
    terms = ["ZIIIIIIIIZ", "IIIIXXIIII", "YIIIIIIIIY"]
    expected = Statevector(deep)
    engine = ExpectationEngine()
    got = expectation_values(deep, terms, engine=engine)
    assert engine.stats.statevector_terms == 3 and engine.stats.contractions == 0
    assert engine.route["method"] == "statevector" and engine.route["tensor_network_seconds"] > 0
    np.testing.assert_allclose(got, [expected.expectation_value(SparsePauliOp(t)).real
                                     for t in terms], atol=1e-10)
    # the state and its workspace (32 KiB) over a quarter of the limit: a tensor-network method
    tight = ExpectationEngine(memory_limit=96 * 1024)
    again = expectation_values(deep, terms, engine=tight)
    assert tight.stats.state_terms == 3 and tight.stats.contractions == 1
    assert tight.route["method"] == "state"
    assert "does not fit" in tight.route["reason"]
    np.testing.assert_allclose(again, got, atol=1e-10)
    wide = ExpectationEngine()
    expectation_values(brickwork(24, 2, seed=3), ["I" * 22 + "ZZ", "ZZ" + "I" * 22], engine=wide)
    assert wide.stats.doubled_terms == 2 and wide.route["method"] == "doubled"


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found (qsimdist[mpi])")
def test_cli_expect_under_mpiexec_equals_single_process():
    """Two ranks (plans made on rank 0, distributed executor) print what one process prints."""
    root = Path(__file__).resolve().parents[1]
    args = [sys.executable, "-m", "qsimdist", "expect", "circuits/rqc_3x4_m8.qsim",
            "-O", "ZZIIIIIIIIII", "-O", "IIIIIXYIIIII", "-O", "ZIIIIIIIIIIX", "--dtype",
            "complex128", "--json"]
    one = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=240)
    two = subprocess.run(["mpiexec", "-n", "2", *args], capture_output=True, text=True,
                         cwd=root, timeout=240)
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-2000:]
    a, b = json.loads(one.stdout), json.loads(two.stdout)  # rank 0 alone printed
    assert [e["observable"] for e in a["expectations"]] == [e["observable"]
                                                          for e in b["expectations"]]
    for x, y in zip(a["expectations"], b["expectations"]):
        assert abs(x["value"] - y["value"]) <= 1e-12
    gc = load(root / "circuits" / "rqc_3x4_m8.qsim")
    psi = numpy_state(gc)
    for e in a["expectations"]:  # and both equal a plain state vector
        term = parse_term(e["observable"], gc.n_qubits)
        phi = psi
        for q, op in zip(term.qubits, term.ops):
            m = {"X": [[0, 1], [1, 0]], "Y": [[0, -1j], [1j, 0]], "Z": [[1, 0], [0, -1]]}[op]
            phi = np.moveaxis(np.tensordot(np.array(m), phi, axes=([1], [q])), 0, q)
        assert abs(e["value"] - np.vdot(psi, phi).real) <= 1e-10
