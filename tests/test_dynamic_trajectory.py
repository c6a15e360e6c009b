"""The estimator's trajectory route for dynamic circuits (:mod:`qsimdist.engine.trajectory_values`).

The reference is the estimator's other route for the same circuits: the lowered
(deferred-measurement) circuit, whose branch wires are fixed to sampled outcomes.
Both draw one branch per element from the same generator in the same way, so with
one seed they must give the same values (to rounding), noise included. Aer's
estimator, independent of qsimdist, checks the mean over many elements.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
from qiskit.circuit import Parameter
from qiskit.circuit.classical import expr
from qiskit.quantum_info import SparsePauliOp

import qsimdist.engine.dynamic_prices as trajectory
from qsimdist.errors import QsimdistError, UnsupportedInstructionError
from qsimdist.qiskit import EstimatorV2


def clbit_and_reset() -> QuantumCircuit:
    """A mid-circuit measurement, if_test on its clbit, a reset in the middle, if/else."""
    qc = QuantumCircuit(3, 2)
    qc.h(0)
    qc.ry(0.7, 1)
    qc.cx(0, 2)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(1)
        qc.rz(0.3, 2)
    qc.h(0)
    qc.cx(1, 0)
    qc.reset(2)
    qc.ry(0.4, 2)
    qc.cx(2, 1)
    qc.measure(1, 1)
    with qc.if_test((qc.clbits[1], 0)) as else_:
        qc.ry(0.9, 0)
    with else_:
        qc.rx(0.2, 2)
    return qc


def register_and_expressions() -> QuantumCircuit:
    """A register value, expression conditions (a sub-cube, a parity, an or), a
    measurement and a reset inside conditional blocks, a reset of a fresh qubit."""
    qr, cr = QuantumRegister(4), ClassicalRegister(3, "c")
    qc = QuantumCircuit(qr, cr)
    qc.reset(3)  # nothing touched qubit 3 yet: the identity, no branch
    for q in range(4):
        qc.ry(0.3 + 0.4 * q, q)
    qc.cx(0, 1)
    qc.cx(2, 3)
    qc.measure(0, 0)
    qc.measure(1, 1)
    qc.measure(2, 2)
    with qc.if_test((cr, 5)):
        qc.x(3)
        qc.t(0)
    with qc.if_test(expr.logic_or(expr.equal(cr, 3), expr.bit_and(cr[0], cr[2]))):
        qc.h(1)
        qc.measure(1, 1)
    with qc.if_test(expr.bit_xor(cr[0], cr[1])):
        qc.reset(0)
        qc.h(0)
    with qc.if_test(expr.logic_and(expr.equal(cr[2], True), expr.less(cr, 6))):
        qc.sx(2)
    qc.cx(3, 0)
    qc.ry(0.5, 2)
    return qc


def nested_conditions() -> QuantumCircuit:
    """An if_test inside an if_test, a measurement read only by a later condition."""
    qc = QuantumCircuit(3, 3)
    qc.h(0)
    qc.ry(1.1, 1)
    qc.measure(0, 0)
    qc.cx(1, 2)
    qc.measure(1, 1)  # qubit 1 is never used again, but bit 1 is read below: a branch
    with qc.if_test((qc.clbits[0], 1)):
        qc.h(2)
        with qc.if_test((qc.clbits[1], 1)):
            qc.z(2)
            qc.measure(2, 2)
    with qc.if_test((qc.clbits[2], 1)):
        qc.x(0)
    qc.ry(0.3, 0)
    return qc


def measured_for_good() -> QuantumCircuit:
    """Qubits 0 and 1 measured and never used again (they leave the trajectory's state),
    qubit 0 measured again into a bit a condition reads (the same outcome, for certain)."""
    qc = QuantumCircuit(4, 3)
    qc.h(0)
    qc.ry(0.8, 1)
    qc.cx(0, 1)
    qc.ry(1.3, 2)
    qc.cx(1, 2)
    qc.t(2)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.ry(0.4, 3)
        qc.h(1)
    qc.measure(1, 1)
    with qc.if_test((qc.clbits[1], 0)):
        qc.rx(0.7, 2)
    qc.measure(0, 2)
    with qc.if_test((qc.clbits[2], 1)):
        qc.x(3)
    qc.cx(2, 3)
    qc.ry(0.2, 3)
    return qc


CIRCUITS = {"clbit_and_reset": clbit_and_reset,
            "measured_for_good": measured_for_good,
            "register_and_expressions": register_and_expressions,
            "nested_conditions": nested_conditions}


def labels(n: int) -> list[str]:
    out = ["Z" * n, "X" * n, "I" * (n - 1) + "Y", "Z" + "I" * (n - 1)]
    out.append("".join("XYZ"[k % 3] for k in range(n)))
    return out


def run(qc, obs, seed=3, precision=0.0, enabled=True, monkeypatch=None, **options):
    monkeypatch.setattr(trajectory, "ENABLED", enabled)
    est = EstimatorV2(seed=seed, options=options or None)
    return est.run([(qc, obs)], precision=precision).result()[0]


@pytest.mark.parametrize("name", sorted(CIRCUITS))
@pytest.mark.parametrize("precision", [0.0, 0.05])
def test_trajectories_equal_the_lowered_circuit(name, precision, monkeypatch):
    qc = CIRCUITS[name]()
    obs = [labels(qc.num_qubits)] * 12
    ours = run(qc, obs, precision=precision, monkeypatch=monkeypatch)
    other = run(qc, obs, precision=precision, enabled=False, monkeypatch=monkeypatch)
    assert ours.metadata["route"]["method"] == "trajectory"
    assert other.metadata["route"]["method"] != "trajectory"
    assert ours.data.evs.shape == (12, 5)
    np.testing.assert_allclose(ours.data.evs, other.data.evs, atol=1e-8, rtol=0)
    # the elements drew several branches (else the test would show little)
    assert len({tuple(np.round(row, 6)) for row in ours.data.evs}) > 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_other_seeds_and_complex64(seed, monkeypatch):
    qc = register_and_expressions()
    obs = [labels(4)] * 6
    for dtype in ("complex128", "complex64"):
        ours = run(qc, obs, seed=seed, monkeypatch=monkeypatch, dtype=dtype)
        other = run(qc, obs, seed=seed, enabled=False, monkeypatch=monkeypatch, dtype=dtype)
        assert ours.metadata["route"]["method"] == "trajectory"
        atol = 1e-8 if dtype == "complex128" else 1e-5
        np.testing.assert_allclose(ours.data.evs, other.data.evs, atol=atol, rtol=0)


def parametrized() -> QuantumCircuit:
    a, b = Parameter("a"), Parameter("b")
    qc = QuantumCircuit(3, 2)
    qc.ry(a, 0)
    qc.rx(b, 1)
    qc.cx(0, 2)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.ry(b, 2)
    qc.reset(0)
    qc.rz(a, 0)
    qc.h(0)
    qc.measure(2, 1)
    with qc.if_test(expr.bit_or(qc.clbits[0], qc.clbits[1])):
        qc.cry(a, 1, 0)
    return qc


def test_parameter_bindings_broadcast_against_observables(monkeypatch):
    qc = parametrized()
    values = np.array([[0.3, 1.2], [1.7, 0.4], [2.5, 2.9]]).reshape(3, 1, 2)
    obs = [SparsePauliOp(["ZZI", "XIX"], [0.5, -1.2]),
           SparsePauliOp(["III", "IYZ"], [0.25, 2.0]), "ZII", "IIX"]
    pub_obs = np.array(obs, dtype=object).reshape(1, 4)
    ours = EstimatorV2(seed=9)
    monkeypatch.setattr(trajectory, "ENABLED", True)
    got = ours.run([(qc, list(list(r) for r in pub_obs), values)]).result()[0]
    assert got.metadata["route"]["method"] == "trajectory"
    monkeypatch.setattr(trajectory, "ENABLED", False)
    ref = EstimatorV2(seed=9).run([(qc, list(list(r) for r in pub_obs), values)]).result()[0]
    assert got.data.evs.shape == (3, 4)
    np.testing.assert_allclose(got.data.evs, ref.data.evs, atol=1e-8, rtol=0)
    # a second run on the same estimator: the same values (a fresh generator per pub)
    monkeypatch.setattr(trajectory, "ENABLED", True)
    again = ours.run([(qc, list(list(r) for r in pub_obs), values)]).result()[0]
    np.testing.assert_array_equal(again.data.evs, got.data.evs)


def test_mean_over_elements_approaches_aer(monkeypatch):
    aer = pytest.importorskip("qiskit_aer.primitives")
    qc = clbit_and_reset()
    obs = ["ZZZ", "IXI", "ZIY"]
    many = 600
    ours = run(qc, [obs] * many, seed=5, monkeypatch=monkeypatch)
    assert ours.metadata["route"]["method"] == "trajectory"
    theirs = aer.EstimatorV2(options={"default_precision": 0.0, "run_options": {"shots": None}})
    try:
        exact = theirs.run([(qc, obs)]).result()[0].data.evs
    except Exception:  # noqa: BLE001 - an Aer without exact dynamic estimates
        pytest.skip("Aer's estimator does not take this circuit exactly")
    # each element is one branch's value: the mean is within a few standard errors
    mean = ours.data.evs.mean(axis=0)
    assert np.all(np.abs(mean - exact) < 5 / np.sqrt(many) + 1e-9)


def test_repeated_branches_are_simulated_once(monkeypatch):
    """A circuit whose measurements are certain: every element takes one branch, whose
    branch points are simulated once however many elements there are."""
    qc = QuantumCircuit(3, 2)
    qc.x(0)
    qc.cx(0, 1)
    qc.measure(0, 0)
    qc.measure(1, 1)
    with qc.if_test((qc.cregs[0], 3)):
        qc.ry(0.4, 2)
    qc.cx(2, 0)
    qc.t(0)
    qc.h(0)
    obs = [["IIZ", "ZII", "XIZ", "YYY"]] * 50
    res = run(qc, obs, monkeypatch=monkeypatch)
    route = res.metadata["route"]
    assert route["method"] == "trajectory" and route["branch_points_simulated"] == 2
    ref = run(qc, obs, enabled=False, monkeypatch=monkeypatch)
    np.testing.assert_allclose(res.data.evs, ref.data.evs, atol=1e-8, rtol=0)


def test_a_clifford_dynamic_circuit_keeps_the_stabilizer_route(monkeypatch):
    qc = QuantumCircuit(3, 2)
    qc.h(0)
    qc.cx(0, 1)
    qc.measure(0, 0)
    qc.reset(0)
    qc.h(0)
    qc.s(0)
    qc.cx(0, 2)
    qc.measure(1, 1)
    with qc.if_test((qc.clbits[1], 1)):
        qc.x(2)
    qc.h(2)
    res = run(qc, [["ZZZ", "XIX", "IYZ"]] * 8, monkeypatch=monkeypatch)
    assert res.metadata["route"]["method"] == "stabilizer"
    # the same circuit with one T gate is not Clifford: trajectories
    qc.t(2)
    res = run(qc, [["ZZZ", "XIX", "IYZ"]] * 8, monkeypatch=monkeypatch)
    assert res.metadata["route"]["method"] == "trajectory"


def test_outside_its_limits_the_lowered_circuit_runs(monkeypatch):
    qc = clbit_and_reset()
    obs = [labels(3)] * 4
    ref = run(qc, obs, enabled=False, monkeypatch=monkeypatch)
    monkeypatch.setattr(trajectory, "MAX_QUBITS", 2)
    narrow = run(qc, obs, monkeypatch=monkeypatch)
    monkeypatch.undo()
    doubled = run(qc, obs, monkeypatch=monkeypatch, method="doubled")
    monkeypatch.setattr(trajectory, "WORK_STATES", 1 << 20)  # 128 MiB for 3 qubits
    tiny = run(qc, obs, monkeypatch=monkeypatch, memory_limit="1MiB")
    for res in (narrow, doubled, tiny):
        assert res.metadata["route"]["method"] != "trajectory"
        np.testing.assert_allclose(res.data.evs, ref.data.evs, atol=1e-8, rtol=0)


def test_unsupported_control_flow_is_refused_as_before(monkeypatch):
    """A while loop: the trajectory route passes it on, and the lowered path refuses it
    with the same error as without the route."""
    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.measure(0, 0)
    with qc.while_loop((qc.clbits[0], 1)):
        qc.h(0)
        qc.measure(0, 0)
    qc.cx(0, 1)
    errors = []
    for enabled in (True, False):
        with pytest.raises(QsimdistError) as info:
            run(qc, ["ZZ"], enabled=enabled, monkeypatch=monkeypatch)
        assert isinstance(info.value, UnsupportedInstructionError)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_box_and_composite_instructions(monkeypatch):
    """A measurement inside a box and inside a composite instruction are branches."""
    from qiskit.circuit import BoxOp

    sub = QuantumCircuit(2, 1, name="sub")
    sub.h(0)
    sub.cx(0, 1)
    sub.measure(0, 0)
    qc = QuantumCircuit(3, 2)
    qc.ry(0.8, 2)
    qc.append(sub.to_instruction(), [0, 1], [0])
    body = QuantumCircuit(1, 1)
    body.ry(0.4, 0)
    body.measure(0, 0)
    qc.append(BoxOp(body), [qc.qubits[2]], [qc.clbits[1]])
    with qc.if_test(expr.logic_not(qc.clbits[1])):
        qc.h(1)
    qc.cx(1, 2)
    obs = [["ZZZ", "XXI", "IZX"]] * 10
    ours = run(qc, obs, monkeypatch=monkeypatch)
    ref = run(qc, obs, enabled=False, monkeypatch=monkeypatch)
    assert ours.metadata["route"]["method"] == "trajectory"
    np.testing.assert_allclose(ours.data.evs, ref.data.evs, atol=1e-8, rtol=0)


@pytest.mark.parametrize("outer", [0, 1])
@pytest.mark.parametrize("enabled", [True, False])
def test_an_else_nested_in_a_failed_condition_does_not_run(outer, enabled, monkeypatch):
    """if c0 == 1: (if c1 == 1: x(0) else: x(0)). Where c0 is 0 neither branch runs: the
    else body once ran on the negated flag alone, outer condition ignored (<Z0> -1, Aer
    +1), on both routes."""
    monkeypatch.setattr(trajectory, "ENABLED", enabled)
    qc = QuantumCircuit(2, 2)
    if outer:
        qc.x(1)
    qc.measure(1, 0)
    qc.h(1)
    qc.t(1)
    qc.measure(1, 1)  # c1: either value
    with qc.if_test((qc.clbits[0], 1)):
        with qc.if_test((qc.clbits[1], 1)) as else_:
            qc.x(0)
        with else_:
            qc.x(0)
    qc.ry(0.3, 1)
    evs = EstimatorV2(seed=3).run([(qc, [["IZ"]] * 20)]).result()[0].data.evs
    np.testing.assert_allclose(evs, -1.0 if outer else 1.0, atol=1e-12)
