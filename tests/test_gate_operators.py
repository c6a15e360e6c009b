"""Gates applied as their operator (issue 52): ``PauliEvolutionGate`` as ``e^{-iHt}``.

The reference is Qiskit's ``StatevectorEstimator`` / ``Statevector``, which apply a
``PauliEvolutionGate`` through its ``to_matrix`` (the exact exponential), whatever its
synthesis. Qiskit builds that matrix with a sparse ``expm``, which takes minutes past 8
qubits for Hamiltonians whose terms do not commute (18 minutes for a 12-qubit
transverse-field Ising step on two cores): there the reference is
``scipy.sparse.linalg.expm_multiply`` on Qiskit's ``Statevector`` of the rest of the
circuit, exact the same way and independent of qsimdist's eigendecomposition.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit import Parameter
from qiskit.circuit.library import HamiltonianGate, PauliEvolutionGate, UnitaryGate
from qiskit.primitives import StatevectorEstimator
from qiskit.quantum_info import (
    Operator,
    SparsePauliOp,
    Statevector,
    random_hermitian,
    random_pauli_list,
    random_unitary,
)
from qiskit.synthesis import LieTrotter, MatrixExponential, QDrift, SuzukiTrotter

import qsimdist
from qsimdist.frontends import operator_gates
from qsimdist.frontends.operator_gates import (
    OPERATOR_GATE_QUBITS,
    definition_is_operator,
    evolution_matrix,
    terms_commute,
)
from qsimdist.frontends.qiskit_circuit import from_qiskit
from qsimdist.qiskit import EstimatorV2, SamplerV2

ATOL = 1e-12

# scipy's sparse expm (inside Qiskit's PauliEvolutionGate.to_matrix) warns about formats
pytestmark = pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")

SYNTHESES = {
    "lie-1": LieTrotter(reps=1),
    "lie-3": LieTrotter(reps=3),
    "suzuki-2": SuzukiTrotter(order=2, reps=2),
    "suzuki-4": SuzukiTrotter(order=4, reps=1),
    "matrix-exponential": MatrixExponential(),
    "qdrift": QDrift(reps=2, seed=5),
}


def random_hamiltonian(n: int, terms: int, seed: int) -> SparsePauliOp:
    """A random Hermitian Pauli sum (real coefficients), its terms not all commuting."""
    rng = np.random.default_rng(seed)
    paulis = random_pauli_list(n, terms, seed=seed, phase=False)
    return SparsePauliOp(paulis, rng.uniform(-1.5, 1.5, terms))


def tfim(n: int, j: float = 1.0, h: float = 0.7) -> SparsePauliOp:
    zz = [("ZZ", [i, i + 1], -j) for i in range(n - 1)]
    x = [("X", [i], -h) for i in range(n)]
    return SparsePauliOp.from_sparse_list(zz + x, n)


def prepared(n: int, seed: int) -> QuantumCircuit:
    """A random product state with some entanglement, so that no value is trivial."""
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for q in range(n):
        qc.ry(float(rng.uniform(0, np.pi)), q)
        qc.rz(float(rng.uniform(0, 2 * np.pi)), q)
    for q in range(0, n - 1, 2):
        qc.cx(q, q + 1)
    return qc


def observables(h: SparsePauliOp, n: int, seed: int) -> list[SparsePauliOp]:
    extra = random_pauli_list(n, 4, seed=seed + 1, phase=False)
    return [h, *(SparsePauliOp(p) for p in extra)]


def reference_evs(qc: QuantumCircuit, obs: list) -> np.ndarray:
    return np.asarray(StatevectorEstimator().run([(qc, obs)]).result()[0].data.evs,
                      dtype=float)


def qsimdist_evs(qc: QuantumCircuit, obs: list, **options) -> tuple[np.ndarray, dict]:
    result = EstimatorV2(options=options).run([(qc, obs)]).result()[0]
    return np.asarray(result.data.evs, dtype=float), result.metadata


def amplitudes(qc: QuantumCircuit, labels: list[str], **options) -> np.ndarray:
    got = qsimdist.amplitudes(qc, labels, dtype="complex128", **options)
    return np.array([got.get(b) for b in labels])


def test_issue_reproduction_gives_the_exact_value():
    h = SparsePauliOp(["ZZ", "XI", "IX"], [-0.2, -1.1, -1.1])
    qc = QuantumCircuit(2)
    qc.x(0)
    qc.append(PauliEvolutionGate(h, time=0.5), [0, 1])
    evs, metadata = qsimdist_evs(qc, [h])
    assert evs[0] == pytest.approx(0.2, abs=ATOL)  # the product formula gives 0.0412
    assert metadata["gates_by_definition"] == []


@pytest.mark.parametrize("synthesis", sorted(SYNTHESES))
@pytest.mark.parametrize("n,terms,time,seed", [
    (2, 3, 0.5, 1), (3, 5, 1.3, 2), (5, 8, 0.37, 3), (6, 10, 2.1, 4),
])
def test_pauli_evolution_matches_statevector_estimator(synthesis, n, terms, time, seed):
    h = random_hamiltonian(n, terms, seed)
    assert not terms_commute(h)
    qc = prepared(n, seed)
    qc.append(PauliEvolutionGate(h, time=time, synthesis=SYNTHESES[synthesis]), range(n))
    qc.h(0)
    obs = observables(h, n, seed)
    reference = reference_evs(qc, obs)
    for method in ("auto", "statevector", "doubled", "state"):
        evs, metadata = qsimdist_evs(qc, obs, method=method)
        np.testing.assert_allclose(evs, reference, rtol=0, atol=ATOL, err_msg=method)
    assert metadata["gates_by_definition"] == []


def test_pauli_evolution_on_some_qubits_of_a_wider_circuit():
    """An 8-qubit random Hamiltonian inside 10 qubits, twice, with gates around it."""
    n, seed = 10, 11
    h = random_hamiltonian(8, 12, seed)
    qc = prepared(n, seed)
    qc.append(PauliEvolutionGate(h, time=0.8), [1, 3, 4, 5, 6, 7, 8, 9])
    qc.cx(0, 2)
    qc.append(PauliEvolutionGate(h, time=0.8), [9, 8, 7, 6, 5, 4, 3, 1])
    obs = [SparsePauliOp.from_sparse_list([("ZZ", [1, 9], 1.0)], n),
           SparsePauliOp.from_sparse_list([("X", [4], 1.0), ("Y", [0], 0.5)], n)]
    reference = reference_evs(qc, obs)
    for method in ("auto", "doubled"):
        evs, _ = qsimdist_evs(qc, obs, method=method)
        np.testing.assert_allclose(evs, reference, rtol=0, atol=ATOL, err_msg=method)


def test_amplitudes_take_the_operator_on_every_route():
    n, seed = 6, 21
    h = random_hamiltonian(n, 9, seed)
    qc = prepared(n, seed)
    qc.append(PauliEvolutionGate(h, time=0.9, synthesis=LieTrotter(reps=2)), range(n))
    qc.append(PauliEvolutionGate(tfim(3), time=0.4), [0, 2, 4])
    reference = Statevector(qc).data
    labels = [format(i, f"0{n}b") for i in range(2**n)]
    for method in ("statevector", "tensor-network"):
        np.testing.assert_allclose(amplitudes(qc, labels, method=method), reference,
                                   rtol=0, atol=ATOL, err_msg=method)


def test_commuting_terms_follow_the_exact_definition():
    """Pairwise commuting terms (QAOA's cost layer, a Heisenberg pair, an identity term):
    the product formula is e^{-iHt} itself, so its rotations are kept (no dense matrix)."""
    cost = SparsePauliOp.from_sparse_list(
        [("ZZ", [i, (i + 1) % 6], 0.5 + 0.1 * i) for i in range(6)] + [("", [], 0.3)], 6)
    heisenberg = SparsePauliOp(["XX", "YY", "ZZ"], [0.3, 0.4, 0.5])
    assert terms_commute(cost) and terms_commute(heisenberg)
    qc = prepared(6, 31)
    qc.append(PauliEvolutionGate(cost, time=0.7, synthesis=SuzukiTrotter(order=2)), range(6))
    qc.append(PauliEvolutionGate(heisenberg, time=1.1), [2, 5])
    for inst in qc.data[-2:]:
        assert definition_is_operator(inst.operation)
    gc = from_qiskit(qc)
    assert max(len(g.qubits) for g in gc.gates) <= 2  # rotations, no 6-qubit matrix
    np.testing.assert_allclose(amplitudes(qc, ["101100", "000000"]),
                               Statevector(qc).data[[0b101100, 0]], rtol=0, atol=ATOL)
    obs = observables(cost, 6, 31)
    np.testing.assert_allclose(qsimdist_evs(qc, obs)[0], reference_evs(qc, obs),
                               rtol=0, atol=ATOL)


def test_the_exactness_verdict():
    h = tfim(3)
    assert not definition_is_operator(PauliEvolutionGate(h, 0.3))
    assert definition_is_operator(PauliEvolutionGate(h, 0.3, synthesis=MatrixExponential()))
    commuting = SparsePauliOp(["ZZI", "IZZ"], [1.0, 2.0])
    assert definition_is_operator(PauliEvolutionGate(commuting, 0.3))
    # QDrift draws its terms at random; a custom atomic evolution may be anything
    assert not definition_is_operator(PauliEvolutionGate(commuting, 0.3, synthesis=QDrift()))
    custom = LieTrotter(atomic_evolution=lambda circuit, pauli, time: None)
    assert not definition_is_operator(PauliEvolutionGate(commuting, 0.3, synthesis=custom))


def test_evolution_matrix_is_qiskits_operator():
    """Real and complex matrices (terms with Y), a list of operators, and the cache
    giving the same matrix back."""
    cases = [tfim(4), random_hamiltonian(4, 7, 41),
             [SparsePauliOp(["XX"], [0.4]), SparsePauliOp(["ZI", "IY"], [0.3, -0.2])]]
    for h in cases:
        gate = PauliEvolutionGate(h, time=0.61)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = gate.to_matrix()
        got = evolution_matrix(gate)
        np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)
        assert evolution_matrix(gate) is got


def test_hamiltonian_and_unitary_gates():
    n, seed = 6, 51
    qc = prepared(n, seed)
    qc.append(HamiltonianGate(random_hermitian(8, seed=seed), time=0.9), [0, 3, 5])
    qc.append(UnitaryGate(random_unitary(16, seed=seed)), [1, 2, 4, 5])
    qc.append(HamiltonianGate(random_hermitian(4, seed=seed + 1), time=Parameter("t")), [2, 4])
    obs = [SparsePauliOp.from_sparse_list([("ZX", [0, 4], 1.0), ("Y", [2], -0.4)], n),
           SparsePauliOp.from_sparse_list([("ZZZ", [1, 3, 5], 1.0)], n)]
    values = [[0.3], [1.7]]
    reference = StatevectorEstimator().run([(qc, obs, values)]).result()[0].data.evs
    got = EstimatorV2().run([(qc, obs, values)]).result()[0].data.evs
    np.testing.assert_allclose(got, reference, rtol=0, atol=ATOL)
    bound = qc.assign_parameters([0.3])
    labels = [format(i, f"0{n}b") for i in range(0, 2**n, 5)]
    np.testing.assert_allclose(amplitudes(bound, labels),
                               Statevector(bound).data[[int(b, 2) for b in labels]],
                               rtol=0, atol=ATOL)


def test_parameterized_time_bound_per_pub():
    """The time is a parameter: each binding's operator is built after binding, through
    the estimator and through the sampler (whose template is lowered once per pub)."""
    n = 4
    t = Parameter("t")
    h = random_hamiltonian(n, 6, 61)
    qc = prepared(n, 61)
    qc.append(PauliEvolutionGate(h, time=t, synthesis=LieTrotter(reps=2)), range(n))
    qc.append(PauliEvolutionGate(h, time=0.5 * t), range(n))
    obs = observables(h, n, 61)
    times = np.array([[0.1], [0.5], [1.3], [2.9]])
    reference = StatevectorEstimator().run([(qc, [[o] for o in obs], times.T)]).result()
    got = EstimatorV2().run([(qc, [[o] for o in obs], times.T)]).result()
    np.testing.assert_allclose(got[0].data.evs, reference[0].data.evs, rtol=0, atol=ATOL)

    measured = qc.copy()
    measured.measure_all()
    sampler = SamplerV2(seed=3, options={"return_amplitudes": True, "dtype": "complex128"})
    result = sampler.run([(measured, times)], shots=200).result()[0]
    for (index,), amplitudes in result.metadata["amplitudes"].items():
        state = Statevector(qc.assign_parameters(times[index])).data
        assert amplitudes
        for bits, value in amplitudes.items():
            assert abs(value - state[int(bits, 2)]) < ATOL


def test_clifford_operator_takes_the_stabilizer_route():
    """(X + Z)/sqrt(2) at t = pi/2 is -i H: a non-commuting Hamiltonian whose exponential is
    Clifford, so a 60-qubit GHZ circuit starting with it runs on the stabilizer route."""
    pytest.importorskip("stim")
    n = 60
    qc = QuantumCircuit(n)
    qc.append(PauliEvolutionGate(SparsePauliOp(["X", "Z"], [1, 1]) / math.sqrt(2),
                                 time=math.pi / 2), [0])
    for q in range(n - 1):
        qc.cx(q, q + 1)
    obs = ["Z" * n, "X" * n, "I" * (n - 2) + "ZZ", "I" * (n - 1) + "X"]
    evs, metadata = qsimdist_evs(qc, obs)
    np.testing.assert_allclose(evs, [1.0, 1.0, 1.0, 0.0], rtol=0, atol=ATOL)
    assert metadata["route"]["method"] == "stabilizer"
    evs, _ = qsimdist_evs(qc, obs, method="stabilizer")
    np.testing.assert_allclose(evs, [1.0, 1.0, 1.0, 0.0], rtol=0, atol=ATOL)
    # a non-Clifford time: the stabilizer route refuses it, auto takes another, exact
    small = QuantumCircuit(3)
    small.append(PauliEvolutionGate(tfim(3), time=0.3), range(3))
    small.cx(0, 2)
    with pytest.raises(Exception, match="not Clifford"):
        qsimdist_evs(small, ["ZZZ"], method="stabilizer")
    np.testing.assert_allclose(qsimdist_evs(small, ["ZZZ", "XIX"])[0],
                               reference_evs(small, ["ZZZ", "XIX"]), rtol=0, atol=ATOL)


def test_conditioned_evolution_in_a_dynamic_circuit():
    """Inside an ``if_test`` the gate is controlled whole (its operator), not through the
    product formula's rotations: the branch here is certain, so the values are exact."""
    h = random_hamiltonian(3, 6, 71)
    qc = QuantumCircuit(4, 1)
    qc.x(0)
    qc.measure(0, 0)
    qc.ry(0.4, 2)
    with qc.if_test((qc.clbits[0], 1)):
        qc.append(PauliEvolutionGate(h, time=0.9), [1, 2, 3])
    obs = [SparsePauliOp.from_sparse_list([("ZZ", [1, 3], 1.0)], 4),
           SparsePauliOp.from_sparse_list([("X", [2], 1.0)], 4)]
    # the branch is certain (qubit 0 is |1>): the reference applies the gate unconditioned
    # (StatevectorEstimator refuses mid-circuit measurements)
    certain = QuantumCircuit(4)
    certain.x(0)
    certain.ry(0.4, 2)
    certain.append(PauliEvolutionGate(h, time=0.9), [1, 2, 3])
    reference = reference_evs(certain, obs)
    for method in ("auto", "doubled"):
        got = EstimatorV2(seed=1, options={"method": method}).run([(qc, obs)]).result()[0]
        np.testing.assert_allclose(got.data.evs, reference, rtol=0, atol=ATOL,
                                   err_msg=method)


def test_twelve_qubits_commuting_through_statevector_estimator():
    n = OPERATOR_GATE_QUBITS
    rng = np.random.default_rng(81)
    cost = SparsePauliOp.from_sparse_list(
        [("ZZ", [i, j], float(rng.uniform(-1, 1)))
         for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3]
        + [("Z", [i], float(rng.uniform(-1, 1))) for i in range(n)], n)
    qc = QuantumCircuit(n)
    qc.h(range(n))
    qc.append(PauliEvolutionGate(cost, time=0.45), range(n))
    qc.rx(0.6, range(n))
    obs = [cost, SparsePauliOp.from_sparse_list([("XX", [0, 11], 1.0)], n)]
    np.testing.assert_allclose(qsimdist_evs(qc, obs)[0], reference_evs(qc, obs),
                               rtol=0, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("h,name", [
    (tfim(OPERATOR_GATE_QUBITS), "real"),
    # Y terms make the matrix complex: its eigendecomposition takes about 60 s at 12
    # qubits on two cores, 6 s at 11
    (random_hamiltonian(OPERATOR_GATE_QUBITS - 1, 10, 91), "complex"),
])
def test_widest_gates_as_a_dense_operator(h, name):
    """The widest gates applied as their operator (about 14 s at 12 qubits for a real
    ``H``); the reference is expm_multiply (see the module's docstring: Qiskit's own
    to_matrix takes 18 minutes for the 12-qubit one)."""
    from scipy.sparse.linalg import expm_multiply

    n, time = h.num_qubits, 0.35
    qc = prepared(n, 92)
    before = Statevector(qc).data
    qc.append(PauliEvolutionGate(h, time=time, synthesis=SuzukiTrotter()), range(n))
    state = expm_multiply(-1j * time * h.to_matrix(sparse=True), before)
    obs = [h, SparsePauliOp.from_sparse_list([("ZY", [0, 7], 1.0), ("X", [5], 0.5)], n)]
    reference = [float(np.real(np.vdot(state, o.to_matrix(sparse=True) @ state)))
                 for o in obs]
    evs, metadata = qsimdist_evs(qc, obs)
    np.testing.assert_allclose(evs, reference, rtol=0, atol=ATOL, err_msg=name)
    assert metadata["gates_by_definition"] == []
    labels = ["0" * n, "1" * n, ("01" * n)[:n]]
    np.testing.assert_allclose(amplitudes(qc, labels), state[[int(b, 2) for b in labels]],
                               rtol=0, atol=ATOL)


def test_wider_gates_follow_the_definition_and_say_so():
    n = OPERATOR_GATE_QUBITS + 1
    h = tfim(n)
    qc = QuantumCircuit(n)
    qc.h(0)
    qc.append(PauliEvolutionGate(h, time=0.2, synthesis=LieTrotter(reps=2)), range(n))
    # commuting terms: the definition is exact, nothing to report
    qc.append(PauliEvolutionGate(SparsePauliOp.from_sparse_list(
        [("ZZ", [i, i + 1], 0.3) for i in range(n - 1)], n), time=0.5), range(n))
    obs = [SparsePauliOp.from_sparse_list([("Z", [0], 1.0)], n)]
    evs, metadata = qsimdist_evs(qc, obs)
    (note,) = metadata["gates_by_definition"]
    assert note["gate"] == "PauliEvolution" and note["qubits"] == n
    assert f"wider than {OPERATOR_GATE_QUBITS} qubits" in note["why"]
    assert "position 1" in note["where"]
    # the value is the product formula's: Qiskit's Statevector of the definitions
    expanded = QuantumCircuit(n)
    expanded.h(0)
    for inst in qc.data[1:]:
        expanded.compose(inst.operation.definition, inst.qubits, inplace=True)
    expected = Statevector(expanded).expectation_value(obs[0]).real
    assert evs[0] == pytest.approx(expected, abs=ATOL)

    measured = qc.copy()
    measured.measure_all()
    sampled = SamplerV2(seed=1).run([measured], shots=10).result()[0]
    assert [m["qubits"] for m in sampled.metadata["gates_by_definition"]] == [n]
    narrow = QuantumCircuit(3)
    narrow.append(PauliEvolutionGate(tfim(3), time=0.2), range(3))
    narrow.measure_all()
    assert SamplerV2(seed=1).run([narrow], shots=10).result()[0].metadata[
        "gates_by_definition"] == []


def test_operator_cache_is_bounded():
    cache = operator_gates._OperatorCache(max_bytes=3000)
    for k in range(5):
        cache.put(("m", k), np.zeros(64, dtype=complex), 1024)
    assert cache.bytes <= 3000 and cache.get(("m", 0)) is None
    assert cache.get(("m", 4)) is not None
    cache.put(("big",), None, 4000)  # larger than the whole cache: not kept
    assert cache.get(("big",)) is None


def _tutorial_hamiltonian(length: int, j: float, h: float, alpha: float) -> SparsePauliOp:
    """The Ising chain of qiskit-algorithms' TrotterQRTE tutorial: nearest-neighbour ZZ
    coupling ``-j`` and a field ``-h`` tilted by ``alpha`` from X towards Z."""
    terms = [("ZZ", [i, i + 1], -j) for i in range(length - 1)]
    terms += [("Z", [i], -h * math.sin(alpha)) for i in range(length)]
    terms += [("X", [i], -h * math.cos(alpha)) for i in range(length)]
    return SparsePauliOp.from_sparse_list(terms, num_qubits=length).simplify()


@pytest.mark.parametrize("length,steps", [(2, 40), (6, 5)])
def test_trotter_qrte_tutorial_observables(length, steps):
    """qiskit-algorithms' TrotterQRTE tutorial (its 2- and 6-site chains, magnetisation,
    mean magnetisation and nearest-neighbour correlation at every step): qsimdist's
    EstimatorV2 gives the reference's values."""
    qa = pytest.importorskip(
        "qiskit_algorithms",
        reason="qiskit-algorithms is not installed (pip install qiskit-algorithms)")
    hamiltonian = _tutorial_hamiltonian(length, j=0.2, h=1.2, alpha=np.pi / 8)
    initial = QuantumCircuit(length)
    initial.x(range(0, length, 2))
    magnetization = SparsePauliOp.from_sparse_list(
        [("Z", [i], 1.0) for i in range(length)], num_qubits=length)
    correlation = SparsePauliOp.from_sparse_list(
        [("ZZ", [i, i + 1], 1.0) for i in range(length - 1)], num_qubits=length)
    aux = [magnetization, magnetization / length, correlation]

    def observables_with(estimator) -> np.ndarray:
        problem = qa.TimeEvolutionProblem(hamiltonian, initial_state=initial, time=1.6,
                                          aux_operators=aux)
        result = qa.TrotterQRTE(num_timesteps=steps, estimator=estimator).evolve(problem)
        return np.array([[value for value, _ in step] for step in result.observables])

    reference = observables_with(StatevectorEstimator())
    got = observables_with(EstimatorV2())
    assert got.shape == (steps + 1, 3)
    np.testing.assert_allclose(got, reference, rtol=0, atol=ATOL)
    # the product formula's values differ visibly: the test tells the two apart
    formula = StatevectorEstimator().run([(
        initial.compose(PauliEvolutionGate(hamiltonian, 1.6).definition), aux[0])])
    assert abs(float(formula.result()[0].data.evs) - reference[-1, 0]) > 1e-3


def test_operator_of_a_gate_matches_qiskits_operator_class():
    """A 4-qubit gate taken whole: its IR matrix is Qiskit's Operator of the gate."""
    h = random_hamiltonian(4, 6, 101)
    qc = QuantumCircuit(4)
    qc.append(PauliEvolutionGate(h, time=0.7, synthesis=LieTrotter(reps=4)), [3, 0, 2, 1])
    (gate,) = from_qiskit(qc).gates
    reference = Operator(qc).data  # little-endian; the IR is big-endian over gate.qubits
    order = [3 - q for q in gate.qubits]
    perm = np.argsort(order)
    dense = gate.matrix.reshape((2,) * 8).transpose(*perm, *(4 + perm)).reshape(16, 16)
    np.testing.assert_allclose(dense, reference, rtol=0, atol=ATOL)
