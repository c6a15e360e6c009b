"""EstimatorV2 checked on the behaviours the Qiskit and Aer estimator test suites check.

Each test states a behaviour those suites test (values of broadcast pubs,
explicit ``EstimatorPub`` objects, parameter value forms, endianness, errors
for bad pubs, numpy parameters, precision and seed, iterables of pubs,
metadata, resets) and checks qsimdist against Qiskit's
``StatevectorEstimator`` (values, shapes, noise, error types and messages) or
against analytic values. Mid-circuit measurement, ``if_test`` feed-forward,
composite instructions and Aer's option layout (issue 22) are checked the same
way.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit import Parameter
from qiskit.circuit.library import real_amplitudes
from qiskit.exceptions import QiskitError
from qiskit.primitives import StatevectorEstimator
from qiskit.primitives.containers.bindings_array import BindingsArray
from qiskit.primitives.containers.estimator_pub import EstimatorPub
from qiskit.primitives.containers.observables_array import ObservablesArray
from qiskit.quantum_info import SparsePauliOp

from qsimdist.errors import InvalidInputError, UnsupportedInstructionError
from qsimdist.qiskit import EstimatorV2

TOL = 1e-10

H1 = SparsePauliOp.from_list([("II", 1), ("IZ", 2), ("XI", 3)])
H2 = SparsePauliOp.from_list([("IZ", 1)])
H3 = SparsePauliOp.from_list([("ZI", 1), ("ZZ", 1)])
MOLECULE = SparsePauliOp.from_list([("II", -1.052373245772859), ("IZ", 0.39793742484318045),
                                    ("ZI", -0.39793742484318045), ("ZZ", -0.01128010425623538),
                                    ("XX", 0.18093119978423156)])
THETA1 = [0, 1, 1, 2, 3, 5]
THETA2 = [0, 1, 1, 2, 3, 5, 8, 13]
THETA3 = [1, 2, 3, 4, 5, 6]


def psi(reps: int) -> QuantumCircuit:
    """The ansatz appended as one composite instruction, as Qiskit's suite builds it."""
    qc = QuantumCircuit(2)
    qc.append(real_amplitudes(num_qubits=2, reps=reps), [0, 1])
    return qc


def both(pubs, **kwargs):
    """The results of qsimdist and of the reference for the same pubs."""
    ours = EstimatorV2(**kwargs).run(pubs).result()
    ref = StatevectorEstimator(**kwargs).run(pubs).result()
    return ours, ref


def assert_same(ours, ref, atol: float = TOL) -> None:
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.data.evs.shape == b.data.evs.shape
        assert a.data.stds.shape == b.data.stds.shape
        np.testing.assert_allclose(a.data.evs, b.data.evs, atol=atol, rtol=0)


# ----------------------------------------------------------------- values and broadcasting
@pytest.mark.parametrize("pubs", [
    [(psi(2), H1, [THETA1])],
    [(psi(3), H1, THETA2)],
    [(psi(2), [H2, H3], THETA1)],
    [(psi(2), [H1, H3], [THETA1, THETA3]), (psi(3), H2, THETA2)],
    [(psi(2), [[H1], [H2], [H3]], [THETA1, THETA3])],  # (3, 1) x (2,) -> (3, 2)
])
def test_values_match_the_reference(pubs):
    assert_same(*both(pubs))


def test_explicit_estimator_pubs():
    a, b = psi(2), psi(3)
    pub1 = EstimatorPub(a, ObservablesArray.coerce([H1, H3]),
                        BindingsArray.coerce({tuple(a.parameters): [THETA1, THETA3]}))
    pub2 = EstimatorPub(b, ObservablesArray.coerce(H2),
                        BindingsArray.coerce({tuple(b.parameters): THETA2}))
    assert_same(*both([pub1, pub2]))


def test_bound_circuit_without_parameters():
    circuit = psi(2).assign_parameters(THETA1)
    ours, ref = both([(circuit, MOLECULE)])
    assert_same(ours, ref)
    assert ours[0].data.evs.shape == ()


@pytest.mark.parametrize("values", [None, [], [[]], np.array([]), np.array([[]]),
                                    [np.array([])]])
def test_unparametrised_value_forms(values):
    qc = QuantumCircuit(1)
    qc.x(0)
    ours, ref = both([(qc, SparsePauliOp("Z"), values)])
    assert_same(ours, ref)
    np.testing.assert_allclose(ours[0].data.evs, -1.0, atol=TOL)  # <1|Z|1>
    assert ours[0].metadata["target_precision"] == 0


@pytest.mark.parametrize("values", [[np.pi], np.array([np.pi]), {"x": np.pi}])
def test_one_parameter_value_forms(values):
    qc = QuantumCircuit(1)
    qc.ry(Parameter("x"), 0)
    ours, ref = both([(qc, SparsePauliOp("Z"), values)])
    assert_same(ours, ref)
    np.testing.assert_allclose(ours[0].data.evs, -1.0, atol=TOL)  # cos(pi)


@pytest.mark.parametrize("wrap", [lambda v: v, lambda v: [v], np.array, lambda v: np.array([v]),
                                  lambda v: [np.array(v)]])
def test_several_parameter_value_forms(wrap):
    ours, ref = both([(psi(2), H1, wrap(THETA1))])
    assert_same(ours, ref)


@pytest.mark.parametrize("n", [1, 2])
def test_endianness_of_labels(n):
    plain = QuantumCircuit(n)
    flipped = QuantumCircuit(n)
    flipped.x(0)
    for label in ("I" * n, "Z" + "I" * (n - 1), "I" * (n - 1) + "Z"):
        for qc in (plain, flipped):
            ours, ref = both([(qc, SparsePauliOp(label))])
            assert_same(ours, ref)
            expected = -1.0 if (qc is flipped and label[-1] == "Z") else 1.0  # qubit 0 is right
            np.testing.assert_allclose(ours[0].data.evs, expected, atol=TOL)


def test_numpy_parameters():
    qc = psi(2)
    op = SparsePauliOp.from_list([("IZ", 1), ("XI", 2), ("ZY", -1)])
    array = np.random.default_rng(12).random((5, qc.num_parameters))
    target = StatevectorEstimator().run([(qc, op, array.tolist())]).result()[0].data.evs
    for values in (array, list(array), array.tolist()):
        got = EstimatorV2().run([(qc, op, values)]).result()[0].data.evs
        assert got.shape == (5,)
        np.testing.assert_allclose(got, target, atol=TOL, rtol=0)


def test_iterable_of_pubs():
    circuit = psi(2).assign_parameters(THETA1)
    pubs = [(circuit, MOLECULE), (circuit, MOLECULE)]
    ours = EstimatorV2().run(iter(pubs)).result()
    ref = StatevectorEstimator().run(iter(pubs)).result()
    assert_same(ours, ref)


# ----------------------------------------------------------------- precision and seed
def test_precision_and_seed_draw_the_references_noise():
    pub = (psi(2), H1, [THETA1])
    for kwargs in ({"default_precision": 1.0, "seed": 1}, {"default_precision": 0.3, "seed": 9}):
        ours = EstimatorV2(**kwargs)
        ref = StatevectorEstimator(**kwargs)
        first = ours.run([pub]).result()
        assert_same(first, ref.run([pub]).result(), atol=1e-9)
        second = ours.run([pub, pub]).result()  # a fresh generator per pub, as the reference
        np.testing.assert_allclose(second[0].data.evs, first[0].data.evs, atol=1e-12)
        np.testing.assert_allclose(second[1].data.evs, first[0].data.evs, atol=1e-12)
        exact = ours.run([pub], precision=0).result()[0]
        np.testing.assert_allclose(exact.data.evs, ref.run([pub], precision=0).result()[0]
                                   .data.evs, atol=TOL)
        assert exact.metadata["target_precision"] == 0


def test_precision_precedence_pub_over_run_over_default():
    qc = QuantumCircuit(1)
    obs = SparsePauliOp("Z")
    est = EstimatorV2(default_precision=0.5, seed=3)
    ref = StatevectorEstimator(default_precision=0.5, seed=3)
    pubs = [(qc, obs), (qc, obs, None, 0.2)]
    for kwargs in ({}, {"precision": 0.1}):
        got = est.run(pubs, **kwargs).result()
        want = ref.run(pubs, **kwargs).result()
        assert [r.metadata["target_precision"] for r in got] == \
            [r.metadata["target_precision"] for r in want]
        assert_same(got, want, atol=1e-9)


def test_metadata_holds_the_references_keys():
    qc, qc2 = QuantumCircuit(2), QuantumCircuit(2)
    qc2.metadata = {"a": 1}
    ours = EstimatorV2().run([(qc, "ZZ"), (qc2, "ZZ")], precision=0.1).result()
    ref = StatevectorEstimator().run([(qc, "ZZ"), (qc2, "ZZ")], precision=0.1).result()
    assert ours.metadata == ref.metadata == {"version": 2}
    for a, b in zip(ours, ref):
        assert {k: a.metadata[k] for k in b.metadata} == b.metadata  # qsimdist adds keys


# ----------------------------------------------------------------- errors for bad pubs
def test_bad_pubs_raise_the_references_errors():
    qc, qc2 = QuantumCircuit(1), QuantumCircuit(2)
    op, op2 = SparsePauliOp("I"), SparsePauliOp("II")
    cases = [
        ([(qc, op2)], {}),
        ([(qc, op, [[1e4]])], {}),
        ([(qc2, op2, [[1, 2]])], {}),
        ([(qc, [op, op2], [[1]])], {}),
        ([(qc, op)], {"precision": -1}),
        ([(qc, op, None, -1)], {}),
        ([(qc, 1j * op)], {"precision": 0.1}),
        ((qc, op), {}),  # a pub without the list around it
    ]
    for pubs, kwargs in cases:
        with pytest.raises(ValueError) as ref:
            StatevectorEstimator().run(pubs, **kwargs).result()
        with pytest.raises(type(ref.value)) as ours:
            EstimatorV2().run(pubs, **kwargs).result()
        assert str(ours.value) == str(ref.value), pubs
    with pytest.raises(ValueError, match="An invalid Estimator pub-like was given"):
        EstimatorV2().run((qc, op)).result()


@pytest.mark.parametrize("kind", ["for_loop", "while_loop"])
def test_unsupported_control_flow_is_a_qiskit_error(kind):
    qc = QuantumCircuit(1, 1)
    if kind == "for_loop":
        with qc.for_loop(range(3)):
            qc.h(0)
    else:
        qc.h(0)
        qc.measure(0, 0)
        with qc.while_loop((qc.clbits[0], 1)):
            qc.h(0)
            qc.measure(0, 0)
    with pytest.raises(QiskitError):
        StatevectorEstimator().run([(qc, "Z")]).result()
    with pytest.raises(QiskitError) as info:
        EstimatorV2().run([(qc, "Z")]).result()
    assert isinstance(info.value, UnsupportedInstructionError)
    assert f"'{kind}'" in str(info.value)


def test_bad_options_are_qiskit_errors_too():
    with pytest.raises(QiskitError) as info:
        EstimatorV2(options={"dtype": "c32"})
    assert isinstance(info.value, InvalidInputError) and isinstance(info.value, ValueError)
    assert "valid: complex64, complex128" in str(info.value)


# ----------------------------------------------------------------- reset and measurement
def _reset_circuit() -> QuantumCircuit:
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    qc.reset(0)
    return qc


@pytest.mark.parametrize("precision", [0.0, 0.01])
def test_reset_samples_one_branch_per_element(precision):
    qc = _reset_circuit()
    n = 400
    est = EstimatorV2(seed=12)
    first = est.run([(qc, [SparsePauliOp("ZI")] * n)], precision=precision).result()[0].data.evs
    again = est.run([(qc, [SparsePauliOp("ZI")] * n)], precision=precision).result()[0].data.evs
    np.testing.assert_array_equal(first, again)  # same seed, same values
    assert first.shape == (n,)
    # qubit 1 collapses with the reset of its Bell partner: each element is +-1, half each
    np.testing.assert_allclose(np.abs(first), 1.0, atol=5 * precision + 1e-12)
    assert abs(first.mean()) < 0.1
    assert 0.35 < np.mean(first > 0) < 0.65
    other = EstimatorV2(seed=13).run([(qc, [SparsePauliOp("ZI")] * n)],
                                     precision=precision).result()[0].data.evs
    assert not np.array_equal(first, other)
    # the reset qubit itself is |0> on every branch
    reset = est.run([(qc, [SparsePauliOp("IZ")] * 20)]).result()[0].data.evs
    np.testing.assert_allclose(reset, 1.0, atol=TOL)


def test_reset_values_like_the_reference():
    """The reference's values with reset are random too: compare means and the set of values."""
    qc = _reset_circuit()
    n = 400
    ops = [SparsePauliOp("ZI"), SparsePauliOp("XI"), SparsePauliOp("ZZ")]
    ours = EstimatorV2(seed=5).run([(qc, [ops] * n)]).result()[0].data.evs
    ref = StatevectorEstimator(seed=5).run([(qc, [ops] * n)]).result()[0].data.evs
    assert ours.shape == ref.shape == (n, 3)
    for j in range(3):
        assert set(np.round(ours[:, j], 9)) <= {-1.0, 0.0, 1.0}
        assert set(np.round(ours[:, j], 9)) == set(np.round(ref[:, j], 9))
        assert abs(ours[:, j].mean() - ref[:, j].mean()) < 0.15


def test_mid_circuit_measurement_collapses_the_state():
    qc = QuantumCircuit(1, 1)
    qc.h(0)
    qc.measure(0, 0)
    qc.h(0)
    n = 300
    evs = EstimatorV2(seed=4).run([(qc, [["Z", "X"]] * n)]).result()[0].data.evs
    assert evs.shape == (n, 2)
    # after the collapse H gives |+> or |->: <Z> = 0 on every branch, <X> = +-1 at random
    np.testing.assert_allclose(evs[:, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.abs(evs[:, 1]), 1.0, atol=1e-12)
    assert 0.35 < np.mean(evs[:, 1] > 0) < 0.65
    # without the measurement H H = I: the values would be Z = 1, X = 0
    unmeasured = QuantumCircuit(1)
    unmeasured.h(0)
    unmeasured.h(0)
    plain = EstimatorV2().run([(unmeasured, ["Z", "X"])])
    np.testing.assert_allclose(plain.result()[0].data.evs, [1.0, 0.0], atol=1e-12)


def test_feedforward_on_a_measured_bit():
    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.cx(0, 1)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(0)
        qc.x(1)
    evs = EstimatorV2(seed=8).run([(qc, [["IZ", "ZI", "ZZ", "XI"]] * 50)]).result()[0].data.evs
    # both qubits are flipped back to |00> on the branch that measured 1
    np.testing.assert_allclose(evs, np.tile([1.0, 1.0, 1.0, 0.0], (50, 1)), atol=1e-12)


def test_final_measurements_into_unread_bits_change_nothing():
    qc = psi(2).assign_parameters(THETA1)
    measured = qc.measure_all(inplace=False)
    got = EstimatorV2().run([(measured, MOLECULE)]).result()[0].data.evs
    want = StatevectorEstimator().run([(qc, MOLECULE)]).result()[0].data.evs
    np.testing.assert_allclose(got, want, atol=TOL)


def test_reset_in_a_parametrised_circuit_broadcasts():
    t = Parameter("t")
    qc = QuantumCircuit(2)
    qc.ry(t, 0)
    qc.cx(0, 1)
    qc.reset(0)
    qc.h(0)
    values = np.linspace(0, np.pi, 4)
    evs = EstimatorV2(seed=2).run([(qc, [["ZI"], ["XI"], ["IX"]], values[:, None].tolist())])
    evs = evs.result()[0].data.evs
    assert evs.shape == (3, 4)
    np.testing.assert_allclose(evs[2], 1.0, atol=1e-12)  # the reset qubit then H: |+>
    np.testing.assert_allclose(evs[1], 0.0, atol=1e-12)  # the collapsed partner: no coherence
    np.testing.assert_allclose(np.abs(evs[0, [0, 3]]), 1.0, atol=1e-12)  # |0> or |1> exactly
    np.testing.assert_allclose(evs[0, 0], 1.0, atol=1e-12)  # t = 0: the partner stays |0>
    np.testing.assert_allclose(evs[0, 3], -1.0, atol=1e-12)  # t = pi: the partner is |1>


# ----------------------------------------------------------------- composite and wide gates
def test_composite_instruction_matches_the_reference():
    sub = QuantumCircuit(2, name="bell", global_phase=0.4)
    sub.h(0)
    sub.cx(0, 1)
    qc = QuantumCircuit(3)
    qc.append(sub, [2, 0])  # an Instruction, not a Gate
    qc.append(sub.to_gate().control(1), [1, 0, 2])
    assert_same(*both([(qc, ["ZIZ", "XIX", "IZI", "YIY", "ZZZ"])]))


@pytest.mark.parametrize("n", [14, 20])
def test_wide_composite_gate_correlations(n):
    ghz = QuantumCircuit(n, name=f"ghz{n}", global_phase=0.3)
    ghz.h(0)
    for q in range(n - 1):
        ghz.cx(q, q + 1)
    qc = QuantumCircuit(n)
    qc.append(ghz.to_gate(), range(n))
    labels = ["Z" * 2 + "I" * (n - 2), "I" * (n - 1) + "Z", "X" * n, "Y" * 2 + "X" * (n - 2)]
    evs = EstimatorV2().run([(qc, labels)]).result()[0].data.evs
    # GHZ: <Z_i Z_j> = 1, <Z_0> = 0, <X...X> = 1, two Ys and X elsewhere: -1
    np.testing.assert_allclose(evs, [1.0, 0.0, 1.0, -1.0], atol=1e-10)


# ----------------------------------------------------------------- Aer's option layout
def test_aer_option_layout_is_read():
    pub = (psi(2), H1, [THETA1])
    aer_style = EstimatorV2(options={"default_precision": 0.2,
                                     "run_options": {"seed_simulator": 15}})
    assert aer_style.default_precision == 0.2 and aer_style.seed == 15
    ref = StatevectorEstimator(default_precision=0.2, seed=15).run([pub]).result()
    assert_same(aer_style.run([pub]).result(), ref, atol=1e-9)
    with pytest.raises(InvalidInputError, match="unknown run_options shots; valid: seed_simulator"):
        EstimatorV2(options={"run_options": {"shots": 10}})
    with pytest.raises(InvalidInputError, match="given twice"):
        EstimatorV2(default_precision=0.1, options={"default_precision": 0.3})


def test_initialize_after_use_resets_then_prepares():
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    qc.initialize([0, 1], [0])  # a composite instruction: reset, then state preparation
    labels = [["IZ", "ZI"]] * 40
    ours = EstimatorV2(seed=3).run([(qc, labels)]).result()[0].data.evs
    ref = StatevectorEstimator(seed=3).run([(qc, labels)]).result()[0].data.evs
    np.testing.assert_allclose(ours[:, 0], -1.0, atol=1e-12)  # qubit 0 prepared in |1>
    np.testing.assert_allclose(ref[:, 0], -1.0, atol=1e-12)
    assert set(np.round(ours[:, 1], 9)) == set(np.round(ref[:, 1], 9)) == {-1.0, 1.0}


def test_instruction_without_definition_is_refused_by_name():
    from qiskit.circuit import Instruction

    qc = QuantumCircuit(2)
    qc.h(0)
    qc.append(Instruction("opaque_box", 2, 0, []), [0, 1])
    with pytest.raises(QiskitError):
        StatevectorEstimator().run([(qc, "ZZ")]).result()
    with pytest.raises(QiskitError) as info:
        EstimatorV2().run([(qc, "ZZ")]).result()
    assert isinstance(info.value, UnsupportedInstructionError)
    message = str(info.value)
    assert "'opaque_box' at position 1" in message and "no definition" in message
    assert "\n" not in message


_MPI_RESET_SCRIPT = """
import json
from mpi4py import MPI
from qiskit import QuantumCircuit
from qsimdist.qiskit import EstimatorV2
qc = QuantumCircuit(2)
qc.h(0); qc.cx(0, 1); qc.reset(0); qc.h(1)
unseeded = EstimatorV2(options={"executor": "mpi"})
evs = unseeded.run([(qc, [["ZI", "XI", "IZ"]] * 30)]).result()[0].data.evs.tolist()
seeded = EstimatorV2(seed=4, options={"executor": "mpi"})
fixed = seeded.run([(qc, [["XI"]] * 20)]).result()[0].data.evs.tolist()
every = MPI.COMM_WORLD.gather((evs, fixed), root=0)
if MPI.COMM_WORLD.rank == 0:
    print(json.dumps({"ranks": len(every), "same": all(v == every[0] for v in every),
                      "fixed": fixed}))
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_mpi_ranks_draw_the_same_branches(tmp_path):
    """Under mpiexec every rank samples the same branches (rank 0's seed when none is given),
    and a seeded run equals the single-process one."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'")
    script = tmp_path / "mpi_reset.py"
    script.write_text(_MPI_RESET_SCRIPT)
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root),
                                                        os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", str(script)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][0])
    assert got["ranks"] == 2 and got["same"]
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    qc.reset(0)
    qc.h(1)
    local = EstimatorV2(seed=4).run([(qc, [["XI"]] * 20)]).result()[0].data.evs
    np.testing.assert_allclose(got["fixed"], local, atol=1e-12)
