"""SamplerV2 checked on the behaviours the Qiskit and Aer sampler test suites check.

Each test states a behaviour those suites test (result types, the shapes that
parameter values broadcast to, numpy parameters, registers and aliased
registers, shots precedence, job status, seeds, errors for bad pubs) and
checks qsimdist against Qiskit's ``StatevectorSampler`` (shapes, error types
and messages) or against exact probabilities from ``Statevector`` (counts,
by total-variation distance). Composite instructions and wide composite gates
(issue 22) are checked the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
from qiskit.circuit import Parameter
from qiskit.circuit.library import UnitaryGate, real_amplitudes
from qiskit.exceptions import QiskitError
from qiskit.primitives import (
    BitArray,
    DataBin,
    PrimitiveResult,
    SamplerPub,
    SamplerPubResult,
    StatevectorSampler,
)
from qiskit.providers import JobStatus
from qiskit.quantum_info import Statevector

from qsimdist.errors import QsimdistError, UnsupportedInstructionError
from qsimdist.qiskit import SamplerV2

SHOTS = 4000
SEED = 123
TV = 0.05  # total-variation distance allowed between counts of SHOTS and exact probabilities


# ----------------------------------------------------------------- references
def register_probabilities(qc: QuantumCircuit, creg) -> dict[int, float]:
    """Exact distribution of ``creg``'s value for a circuit whose measurements are final."""
    unitary = qc.remove_final_measurements(inplace=False)
    probs = Statevector(unitary).probabilities()
    source: dict[int, int] = {}  # clbit index -> qubit index (the last measurement wins)
    for inst in qc.data:
        if inst.operation.name == "measure":
            source[qc.find_bit(inst.clbits[0]).index] = qc.find_bit(inst.qubits[0]).index
    bits = [qc.find_bit(b).index for b in creg]
    out: dict[int, float] = {}
    for x, p in enumerate(probs):
        if p < 1e-15:
            continue
        value = 0
        for k, clbit in enumerate(bits):
            if clbit in source and (x >> source[clbit]) & 1:
                value |= 1 << k
        out[value] = out.get(value, 0.0) + p
    return out


def tv_distance(counts: dict[int, int], probs: dict[int, float]) -> float:
    shots = sum(counts.values())
    keys = set(counts) | set(probs)
    return 0.5 * sum(abs(counts.get(k, 0) / shots - probs.get(k, 0.0)) for k in keys)


def assert_matches(bitarray: BitArray, qc: QuantumCircuit, creg, tol: float = TV) -> None:
    """Every element of ``bitarray`` is close to ``creg``'s exact distribution."""
    probs = register_probabilities(qc, creg)
    for idx in np.ndindex(bitarray.shape):
        dist = tv_distance(bitarray.get_int_counts(idx), probs)
        assert dist < tol, (idx, dist, bitarray.get_int_counts(idx), probs)


def bell() -> QuantumCircuit:
    qc = QuantumCircuit(2, name="Bell")
    qc.h(0)
    qc.cx(0, 1)
    qc.measure_all()
    return qc


def ansatz(reps: int = 2) -> QuantumCircuit:
    qc = real_amplitudes(2, reps=reps)
    qc.measure_all()
    return qc


# ----------------------------------------------------------------- results and shapes
def test_result_types_and_metadata():
    result = SamplerV2(seed=SEED).run([bell()], shots=100).result()
    assert isinstance(result, PrimitiveResult) and isinstance(result.metadata, dict)
    assert len(result) == 1
    pub = result[0]
    assert isinstance(pub, SamplerPubResult) and isinstance(pub.data, DataBin)
    assert isinstance(pub.data.meas, BitArray)
    assert pub.metadata["shots"] == 100 and pub.data.meas.num_shots == 100


@pytest.mark.parametrize("values", [None, (), [], np.array([]), ((),), ([],), [[]], [()],
                                    np.array([[]]), [(), (), ()]])
def test_unparametrised_value_forms_broadcast_like_the_reference(values):
    qc = bell()
    ours = SamplerV2(seed=SEED).run([(qc, values)], shots=SHOTS).result()[0].data.meas
    ref = StatevectorSampler(seed=SEED).run([(qc, values)], shots=10).result()[0].data.meas
    assert ours.shape == ref.shape
    assert_matches(ours, qc, qc.cregs[0])


@pytest.mark.parametrize("values", [[np.pi], (np.pi,), np.array([np.pi]), [[np.pi]],
                                    ((np.pi,),), np.array([[np.pi]]), {"x": np.pi},
                                    {"x": [np.pi]}, {"x": np.array(np.pi)}])
def test_one_parameter_value_forms(values):
    x = Parameter("x")
    qc = QuantumCircuit(1, 1)
    qc.ry(x, 0)
    qc.measure(0, 0)
    ours = SamplerV2(seed=SEED).run([(qc, values)], shots=50).result()[0].data.c
    ref = StatevectorSampler(seed=SEED).run([(qc, values)], shots=50).result()[0].data.c
    assert ours.shape == ref.shape
    for idx in np.ndindex(ours.shape):
        assert ours.get_int_counts(idx) == {1: 50}  # ry(pi)|0> = |1>


@pytest.mark.parametrize("wrap", [lambda v: v, tuple, np.array, lambda v: (v,), lambda v: [v],
                                  lambda v: np.array([v])])
def test_several_parameter_value_forms(wrap):
    qc = ansatz()
    theta = [1.0] * qc.num_parameters
    values = wrap(theta)
    ours = SamplerV2(seed=SEED).run([(qc, values)], shots=SHOTS).result()[0].data.meas
    ref = StatevectorSampler(seed=SEED).run([(qc, values)], shots=10).result()[0].data.meas
    assert ours.shape == ref.shape
    assert_matches(ours, qc.assign_parameters(theta), qc.cregs[0])


def test_parameter_names_as_keys_broadcast():
    qc = ansatz()
    names = tuple(p.name for p in qc.parameters)
    theta = np.linspace(0.1, 1.3, qc.num_parameters)
    pub = (qc, {names: [theta, theta, theta]})
    ours = SamplerV2(seed=SEED).run([pub], shots=SHOTS).result()[0].data.meas
    assert ours.shape == (3,)
    assert_matches(ours, qc.assign_parameters(theta), qc.cregs[0])


def test_parametrised_pubs_and_multiple_circuits():
    qc2, qc3 = ansatz(2), ansatz(3)
    t2 = [0, 1, 1, 2, 3, 5]
    t3 = [0, 1, 2, 3, 4, 5, 6, 7]
    result = SamplerV2(seed=SEED).run([(qc2, t2), (qc3, t3), bell()], shots=SHOTS).result()
    assert len(result) == 3
    assert_matches(result[0].data.meas, qc2.assign_parameters(t2), qc2.cregs[0])
    assert_matches(result[1].data.meas, qc3.assign_parameters(t3), qc3.cregs[0])
    assert_matches(result[2].data.meas, bell(), bell().cregs[0])


@pytest.mark.parametrize("n", [1, 2])
def test_basis_states_are_drawn_every_shot(n):
    circuits = []
    for value in range(2**n):
        qc = QuantumCircuit(n)
        for q in range(n):
            if (value >> q) & 1:
                qc.x(q)
        qc.measure_all()
        circuits.append(qc)
    result = SamplerV2(seed=SEED).run(circuits, shots=300).result()
    for value, pub in enumerate(result):
        assert pub.data.meas.get_int_counts() == {value: 300}


def test_reverse_measurement_order():
    x, y = Parameter("x"), Parameter("y")
    qc = QuantumCircuit(3, 3)
    qc.rx(x, 0)
    qc.rx(y, 1)
    qc.x(2)
    qc.measure(0, 2)
    qc.measure(1, 1)
    qc.measure(2, 0)
    result = SamplerV2(seed=SEED).run([(qc, [0, 0]), (qc, [np.pi / 2, 0])], shots=SHOTS).result()
    assert result[0].data.c.get_int_counts() == {1: SHOTS}
    assert_matches(result[1].data.c, qc.assign_parameters([np.pi / 2, 0]), qc.cregs[0])
    assert set(result[1].data.c.get_int_counts()) == {1, 5}


def test_empty_parameters_and_unmeasured_bits_read_zero():
    qc = QuantumCircuit(5, 4)
    qc.measure(range(4), range(4))
    result = SamplerV2(seed=SEED).run([qc, qc], shots=200).result()
    for pub in result:
        assert pub.data.c.get_int_counts() == {0: 200}


def test_numpy_parameters_give_the_same_bits_as_lists():
    qc = ansatz()
    k = 5
    array = np.linspace(0, 1, k * qc.num_parameters).reshape((k, qc.num_parameters))
    listed = SamplerV2(seed=SEED).run([(qc, array.tolist())], shots=500).result()[0].data.meas
    arrayed = SamplerV2(seed=SEED).run([(qc, array)], shots=500).result()[0].data.meas
    assert listed.shape == arrayed.shape == (k,)
    np.testing.assert_array_equal(listed.array, arrayed.array)
    split = SamplerV2(seed=SEED).run([(qc, row) for row in array], shots=SHOTS).result()
    assert len(split) == k
    for i, pub in enumerate(split):
        assert pub.data.meas.shape == ()
        assert_matches(pub.data.meas, qc.assign_parameters(array[i]), qc.cregs[0])


# ----------------------------------------------------------------- shots, seeds, jobs
def test_shots_precedence():
    qc = bell()
    assert SamplerV2().default_shots == StatevectorSampler().default_shots
    cases = [
        (SamplerV2(seed=SEED).run([qc], shots=100), [100]),
        (SamplerV2(seed=SEED).run([qc]), [SamplerV2().default_shots]),
        (SamplerV2(default_shots=70, seed=SEED).run([qc]), [70]),
        (SamplerV2(seed=SEED).run([(qc, None, 90)], shots=500), [90]),
        (SamplerV2(seed=SEED).run([SamplerPub(qc, shots=80)]), [80]),
        (SamplerV2(seed=SEED).run([SamplerPub(qc, shots=100), SamplerPub(qc, shots=200), qc],
                                  shots=30), [100, 200, 30]),
    ]
    for job, expected in cases:
        result = job.result()
        for pub, shots in zip(result, expected, strict=True):
            assert pub.data.meas.num_shots == shots
            assert sum(pub.data.meas.get_counts().values()) == shots
            assert pub.metadata["shots"] == shots


def test_ten_qubit_counts_add_up():
    qc = QuantumCircuit(10)
    qc.h(range(10))
    qc.measure_all()
    meas = SamplerV2(seed=SEED).run([qc], shots=2000).result()[0].data.meas
    assert meas.num_shots == 2000 and sum(meas.get_counts().values()) == 2000
    assert len(meas.get_counts()) > 800  # 1024 equally likely outcomes


def test_same_seed_same_bits_and_seed_property():
    qc = bell()
    sampler = SamplerV2(seed=SEED)
    first = sampler.run([qc], shots=500).result()[0].data.meas
    again = sampler.run([qc], shots=500).result()[0].data.meas
    np.testing.assert_array_equal(first.array, again.array)
    other = SamplerV2(seed=SEED + 1).run([qc], shots=500).result()[0].data.meas
    assert not np.array_equal(first.array, other.array)
    assert SamplerV2().seed is None
    assert SamplerV2(seed=SEED).seed == SEED
    assert isinstance(SamplerV2(seed=np.random.default_rng(SEED)).seed, np.random.Generator)


def test_job_status_is_done_after_result():
    job = SamplerV2(seed=SEED).run([bell()], shots=100)
    job.result()
    assert job.status() == JobStatus.DONE
    assert job.done()


# ----------------------------------------------------------------- gates and registers
@pytest.mark.parametrize("matrix, value", [(np.eye(2), 0), ([[0, 1], [1, 0]], 1)])
def test_unitary_gate(matrix, value):
    qc = QuantumCircuit(1)
    qc.append(UnitaryGate(matrix), [0])
    qc.measure_all()
    assert SamplerV2(seed=SEED).run([qc], shots=100).result()[0].data.meas.get_int_counts() \
        == {value: 100}


def _three_registers(sizes, measures):
    regs = [ClassicalRegister(s, name) for s, name in zip(sizes, "abc")]
    qc = QuantumCircuit(QuantumRegister(3), *regs)
    qc.h(range(3))
    if measures:
        qc.measure(*measures)
    return qc


@pytest.mark.parametrize("sizes, measures", [
    ((1, 2, 3), ([0, 1, 2, 2], [0, 2, 4, 5])),
    ((1, 5, 3), ([0, 1, 2, 2], [0, 2, 4, 5])),
    ((1, 2, 3), (1, 5)),
    ((1, 2, 3), ([0, 1, 2], [5, 5, 5])),
    ((1, 2, 3), None),
])
def test_several_registers(sizes, measures):
    qc = _three_registers(sizes, measures)
    data = SamplerV2(seed=SEED).run([qc], shots=SHOTS).result()[0].data
    assert sorted(data.keys()) == ["a", "b", "c"]
    for creg in qc.cregs:
        bits = getattr(data, creg.name)
        assert bits.num_bits == creg.size
        assert_matches(bits, qc, creg)


def test_aliased_registers_with_feedforward():
    """Registers sharing bits with a wider one, written by measurements that condition later
    gates (``if_test``, what ``c_if`` was); the conditioned qubit is measured last."""
    q = QuantumRegister(3, "q")
    c1, c2 = ClassicalRegister(1, "c1"), ClassicalRegister(1, "c2")
    inner = QuantumCircuit(q, c1, c2)
    inner.ry(np.pi / 4, 2)
    inner.cx(2, 1)
    inner.cx(0, 1)
    inner.h(0)
    inner.measure(0, c1)
    inner.measure(1, c2)
    with inner.if_test((c1, 1)):
        inner.z(2)
    with inner.if_test((c2, 1)):
        inner.x(2)
    qc = QuantumCircuit(5, 5)
    qc.compose(inner, [0, 2, 3], [2, 4], inplace=True)
    last = ClassicalRegister(1, "last")
    qc.add_register(last)
    qc.measure(3, last[0])
    data = SamplerV2(seed=SEED).run([qc], shots=SHOTS).result()[0].data
    assert sorted(data.keys()) == sorted(r.name for r in qc.cregs)
    # exact reference: the conditioned x on the last qubit undoes the cx copy of c2, so the
    # last qubit holds the ry(pi/4) bit alone; z changes no probability
    free = QuantumCircuit(3)
    free.ry(np.pi / 4, 2)
    free.cx(2, 1)
    free.cx(0, 1)
    free.h(0)
    p = Statevector(free).probabilities([0, 1, 2])  # index: q0 + 2 q1 + 4 q2
    big = {}
    c_reg = {}
    last_probs = {0: 0.0, 1: 0.0}
    for x, px in enumerate(p):
        m0, m1, m2 = x & 1, (x >> 1) & 1, (x >> 2) & 1
        big[(m0 << 2) | (m1 << 4)] = big.get((m0 << 2) | (m1 << 4), 0.0) + px
        c_reg[m0] = c_reg.get(m0, 0.0) + px
        final = m2 ^ m1  # after the conditioned x
        last_probs[final] += px
    wide, first, second = (getattr(data, r.name) for r in qc.cregs[:3])  # compose renames
    assert tv_distance(wide.get_int_counts(), big) < TV
    assert tv_distance(first.get_int_counts(), c_reg) < TV
    assert tv_distance(data.last.get_int_counts(), last_probs) < TV
    # the aliased registers are clbits 2 and 4 of the wide one, in every shot
    np.testing.assert_array_equal(first.array[:, 0] & 1, (wide.array[:, 0] >> 2) & 1)
    np.testing.assert_array_equal(second.array[:, 0] & 1, (wide.array[:, 0] >> 4) & 1)


def test_no_registers_warns_and_gives_an_empty_result():
    qc = QuantumCircuit(2)
    with pytest.warns(UserWarning):
        result = SamplerV2().run([qc]).result()
    assert len(result) == 1 and len(result[0].data) == 0


# ----------------------------------------------------------------- errors for bad pubs
def _same_error(pubs, **kwargs):
    """Both samplers raise for ``pubs``; ours raises the reference's type (or a subclass)."""
    with pytest.raises(Exception) as ref:
        StatevectorSampler().run(pubs, **kwargs).result()
    with pytest.raises(type(ref.value)) as ours:
        SamplerV2().run(pubs, **kwargs).result()
    return ref.value, ours.value


def test_bad_pubs_raise_the_references_errors():
    plain = QuantumCircuit(1)
    plain.measure_all()
    pqc = real_amplitudes(1, reps=1)
    pqc.measure_all()
    cases = [
        ([(plain, [1e2])], {}),
        ([pqc], {}),
        ([(pqc, [])], {}),
        ([(pqc, None)], {}),
        ([(pqc, [1e2])], {}),
        ([(pqc, [1e2] * 100)], {}),
        ([plain], {"shots": -1}),
        ([(plain, None, -1)], {}),
        ([plain], {"shots": 0}),
        ([(plain, None, 0)], {}),
    ]
    for pubs, kwargs in cases:
        ref, ours = _same_error(pubs, **kwargs)
        assert isinstance(ours, ValueError), (pubs, kwargs)
        assert str(ours) == str(ref)
    for bad in (lambda: SamplerPub(plain, shots=-1), lambda: SamplerPub(plain, shots=0)):
        with pytest.raises(ValueError):
            SamplerV2().run([bad()]).result()


def test_missing_brackets_raise_the_references_message():
    plain = QuantumCircuit(1)
    plain.measure_all()
    pqc = real_amplitudes(1, reps=1)
    pqc.measure_all()
    for pubs in (plain, (pqc, [0, 1])):
        ref, ours = _same_error(pubs)
        assert str(ours) == str(ref)
    assert "An invalid Sampler pub-like was given" in str(_same_error(plain)[1])
    assert "Note that if you want to run a single pub," in str(_same_error((pqc, [0, 1]))[1])


@pytest.mark.parametrize("kind", ["for_loop", "while_loop", "switch"])
def test_unsupported_control_flow_is_a_qiskit_error(kind):
    qc = QuantumCircuit(1, 1)
    if kind == "for_loop":
        with qc.for_loop(range(5)):
            qc.h(0)
    elif kind == "while_loop":
        qc.measure(0, 0)
        with qc.while_loop((qc.clbits[0], 1)):
            qc.x(0)
    else:
        qc.h(0)
        qc.measure(0, 0)
        with qc.switch(qc.clbits[0]) as case:
            with case(0):
                qc.x(0)
            with case(1):
                qc.h(0)
    qc.measure(0, 0)
    with pytest.raises(QiskitError):
        StatevectorSampler().run([qc]).result()  # the reference raises a QiskitError
    with pytest.raises(QiskitError) as info:
        SamplerV2().run([qc]).result()
    err = info.value
    assert isinstance(err, UnsupportedInstructionError) and isinstance(err, QsimdistError)
    assert isinstance(err, NotImplementedError)
    assert f"'{kind}" in str(err) and not str(err).startswith("'")  # unquoted, one line
    assert "\n" not in str(err)


# ----------------------------------------------------------------- composite instructions
def test_composite_instruction_matches_the_reference():
    sub = QuantumCircuit(2, name="bell", global_phase=0.7)
    sub.h(0)
    sub.cx(0, 1)
    qc = QuantumCircuit(2)
    qc.append(sub, [0, 1])  # an Instruction, not a Gate
    assert type(qc.data[0].operation).__name__ == "Instruction"
    qc.measure_all()
    meas = SamplerV2(seed=SEED).run([qc], shots=SHOTS).result()[0].data.meas
    ref = StatevectorSampler(seed=SEED).run([qc], shots=SHOTS).result()[0].data.meas
    assert set(meas.get_int_counts()) == set(ref.get_int_counts()) == {0, 3}
    assert_matches(meas, qc, qc.cregs[0])


def test_nested_parametrised_composite_instruction_with_a_measurement():
    theta = Parameter("t")
    inner = QuantumCircuit(2, name="inner")
    inner.ry(theta, 0)
    inner.cx(0, 1)
    outer = QuantumCircuit(3, 1, name="outer")
    outer.append(inner.to_instruction(), [2, 0])
    outer.h(1)
    outer.measure(1, 0)
    qc = QuantumCircuit(3, 1)
    qc.append(outer.to_instruction(), [0, 1, 2], [0])
    meas_all = ClassicalRegister(3, "all")
    qc.add_register(meas_all)
    qc.measure([0, 1, 2], meas_all)
    values = [0.3, 2.1]
    result = SamplerV2(seed=SEED).run([(qc, [[v] for v in values])], shots=SHOTS).result()[0]
    assert result.data.all.shape == (2,)
    for i, v in enumerate(values):
        flat = QuantumCircuit(3)
        flat.ry(v, 2)
        flat.cx(2, 0)
        flat.h(1)
        probs = dict(enumerate(Statevector(flat).probabilities()))
        assert tv_distance(result.data.all.get_int_counts(i), probs) < TV
        # the inner measurement of qubit 1 and its later measurement agree in every shot
        np.testing.assert_array_equal(result.data.c.array[i, :, 0] & 1,
                                      (result.data.all.array[i, :, 0] >> 1) & 1)


@pytest.mark.parametrize("n", [14, 20])
def test_wide_composite_gate_runs_through_its_definition(n):
    ghz = QuantumCircuit(n, name=f"ghz{n}")
    ghz.h(0)
    for q in range(n - 1):
        ghz.cx(q, q + 1)
    qc = QuantumCircuit(n)
    qc.append(ghz.to_gate(), range(n))
    qc.measure_all()
    counts = SamplerV2(seed=SEED).run([qc], shots=400).result()[0].data.meas.get_int_counts()
    assert set(counts) == {0, 2**n - 1}
    assert abs(counts[0] / 400 - 0.5) < 0.1


def test_instruction_without_definition_is_refused_by_name():
    from qiskit.circuit import Instruction

    from qsimdist.frontends.qiskit_circuit import from_qiskit

    qc = QuantumCircuit(2)
    qc.h(0)
    sub = QuantumCircuit(2, name="wrapper")
    sub.append(Instruction("opaque_box", 2, 0, []), [1, 0])
    qc.append(sub, [0, 1])
    qc.measure_all()
    with pytest.raises(QiskitError):
        StatevectorSampler().run([qc]).result()
    with pytest.raises(QiskitError) as info:
        SamplerV2().run([qc]).result()
    assert isinstance(info.value, UnsupportedInstructionError)
    assert "'opaque_box'" in str(info.value) and "no definition" in str(info.value)
    with pytest.raises(UnsupportedInstructionError) as plain:  # the plain frontend
        from_qiskit(qc)
    assert not isinstance(plain.value, QiskitError)
    assert "'opaque_box' at position 0 on qubits [1, 0] inside 'wrapper' at position 1" \
        in str(plain.value)
