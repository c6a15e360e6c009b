"""Every circuit Qiskit can build (issue 43, item 2): operations without a definition go
through Qiskit's synthesis, a ``PermutationGate`` is a relabelling of wires, and
``if_else`` conditions may be classical expressions.

References are Qiskit's ``Statevector`` (complex128) for unitary circuits; for the
dynamic circuit, an outcome-by-outcome enumeration over ``Statevector`` whose
feed-forward is written out by hand in Python (not read from the expressions), and
Aer's sampler at fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister, transpile
from qiskit.circuit import AnnotatedOperation, ControlModifier, InverseModifier
from qiskit.circuit.classical import expr
from qiskit.circuit.library import PermutationGate, SGate
from qiskit.circuit.random import random_circuit
from qiskit.exceptions import QiskitError
from qiskit.quantum_info import SparsePauliOp, Statevector, random_clifford

import qsimdist
from qsimdist.errors import UnsupportedInstructionError
from qsimdist.frontends import load
from qsimdist.frontends.lowering import lower_circuit
from qsimdist.qiskit import EstimatorV2, SamplerV2

TOL = 1e-10


# ----------------------------------------------------------------- PermutationGate, synthesis
def _permuted_circuit(seed: int, extra: bool = True) -> QuantumCircuit:
    """Random gates, a PermutationGate on 5 of 7 qubits, random gates; with ``extra`` also
    a Clifford and an AnnotatedOperation (operations with no definition attribute)."""
    qc = random_circuit(7, 4, max_operands=2, seed=seed)
    qc.remove_final_measurements()
    qc.append(PermutationGate([3, 0, 4, 1, 2]), [6, 1, 3, 0, 5])
    qc.compose(random_circuit(7, 4, max_operands=2, seed=seed + 100), inplace=True)
    if extra:
        qc.append(random_clifford(3, seed=seed), [0, 3, 5])
        qc.append(AnnotatedOperation(SGate(), [InverseModifier(), ControlModifier(1)]), [4, 1])
    qc.append(PermutationGate([1, 2, 0]), [2, 4, 6])
    qc.h(0)
    qc.cx(6, 2)
    return qc


def test_permutation_is_a_relabelling_not_a_gate():
    qc = _permuted_circuit(1, extra=False)
    plain = QuantumCircuit(7)
    for inst in qc.data:
        if inst.operation.name != "permutation":
            plain.append(inst)
    gc = load(qc)
    assert len(gc.gates) == len(load(plain).gates)  # no gate for either permutation
    assert all(len(g.qubits) <= 2 for g in gc.gates)


@pytest.mark.parametrize("seed", [1, 2])
def test_permutation_and_synthesized_operations_match_statevector(seed):
    qc = _permuted_circuit(seed)
    ref = Statevector(qc).data
    for method in ("statevector", "tensor-network"):
        res = qsimdist.amplitudes(qc, "*" * 7, dtype="complex128", method=method)
        assert np.abs(res.values[0] - ref).max() < TOL, method
    # SamplerV2: the amplitude of every drawn bitstring
    measured = qc.measure_all(inplace=False)
    sampler = SamplerV2(seed=3, options={"dtype": "complex128", "return_amplitudes": True})
    result = sampler.run([measured], shots=300).result()[0]
    amps = result.metadata["amplitudes"]
    assert amps and set(amps) == set(result.data.meas.get_counts())
    for bits, amp in amps.items():
        assert abs(amp - ref[int(bits, 2)]) < TOL
    # EstimatorV2: Pauli expectation values
    labels = ["ZIIIIIZ", "IXIIXII", "YIZIIXI", "IIIZIII", "XXXXXXX"]
    evs = EstimatorV2(options={"dtype": "complex128"}).run(
        [(qc, [SparsePauliOp(lb) for lb in labels])]).result()[0].data.evs
    want = [Statevector(ref).expectation_value(SparsePauliOp(lb)).real for lb in labels]
    np.testing.assert_allclose(evs, want, atol=TOL, rtol=0)


def test_wide_permutation_converts_without_a_matrix():
    """MQT Bench's amplitude estimation failed on a 17-qubit PermutationGate (no definition,
    too wide for a matrix); it is now a relabelling. Reference: Qiskit's own SWAP synthesis."""
    pattern = [(5 * k + 3) % 17 for k in range(17)]
    qc = QuantumCircuit(17)
    qc.h([0, 1, 2])
    qc.cx(0, 7)
    qc.t(1)
    qc.append(PermutationGate(pattern), range(17))
    qc.cx(3, 16)
    qc.h(5)
    swaps = transpile(qc, basis_gates=["h", "cx", "t", "swap"], optimization_level=0)
    assert "permutation" not in swaps.count_ops()
    ref = Statevector(swaps).data
    assert len(load(qc).gates) == 7
    top = [format(int(i), "017b") for i in np.argsort(-np.abs(ref))[:4]]
    res = qsimdist.amplitudes(qc, top + ["0" * 17], dtype="complex128")
    np.testing.assert_allclose(res.amplitudes, ref[[int(b, 2) for b in top + ["0" * 17]]],
                               atol=TOL, rtol=0)


def test_operation_without_definition_goes_through_qiskits_synthesis():
    cliff = random_clifford(3, seed=9)
    assert not hasattr(cliff, "definition")  # nothing to expand but Qiskit's synthesis
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.append(cliff, [2, 0, 1])
    gc = load(qc)
    assert len(gc.gates) > 2 and all(len(g.qubits) <= 2 for g in gc.gates)
    res = qsimdist.amplitudes(qc, "***", dtype="complex128")
    assert np.abs(res.values[0] - Statevector(qc).data).max() < TOL


def test_an_operation_qiskit_cannot_synthesize_is_named():
    from qiskit.circuit import Instruction

    qc = QuantumCircuit(2)
    qc.append(Instruction("opaque_box", 2, 0, []), [0, 1])
    with pytest.raises(UnsupportedInstructionError) as info:
        load(qc)
    message = str(info.value)
    assert "'opaque_box' at position 0" in message and "no definition" in message
    assert "Qiskit cannot synthesize it" in message and "\n" not in message


# ----------------------------------------------------------------- expression conditions
def _dynamic(theta: tuple[float, float, float], permute: bool) -> QuantumCircuit:
    """Parity checks of three data qubits (0-2) on two ancillas (3, 4) measured mid-circuit,
    then feed-forward on classical expressions (a GHZ-style correction, as MQT Bench's
    ``ghz_dynamic``), ancillas 3, 4 reset by expression conditions, qubit 5 flipped by an
    if/else on ``m[0] or m[1]``; with ``permute`` a PermutationGate under a condition."""
    d, m, out = QuantumRegister(6, "q"), ClassicalRegister(2, "m"), ClassicalRegister(6, "out")
    qc = QuantumCircuit(d, m, out)
    for q, t in enumerate(theta):
        qc.ry(t, q)
    qc.cx(0, 3)
    qc.cx(1, 3)
    qc.cx(1, 4)
    qc.cx(2, 4)
    qc.measure(3, m[0])
    qc.measure(4, m[1])
    with qc.if_test(expr.lift(m[0])):
        qc.x(1)
    with qc.if_test(expr.bit_xor(m[0], m[1])):
        qc.x(2)
    with qc.if_test(expr.equal(m, 3)):
        qc.x(3)
        qc.x(4)
    with qc.if_test(expr.logic_and(m[0], expr.bit_not(m[1]))):
        qc.x(3)
    with qc.if_test(expr.logic_and(expr.logic_not(m[0]), expr.equal(m[1], True))):
        qc.x(4)
    with qc.if_test(expr.logic_or(m[0], m[1])) as orelse:
        qc.x(5)
    with orelse:
        qc.x(5) if not permute else qc.h(5)
    if permute:
        with qc.if_test(expr.not_equal(m, 0)):
            qc.append(PermutationGate([2, 0, 1]), [0, 5, 3])
    qc.measure(d, out)
    return qc


def _feed_forward(m0: int, m1: int, permute: bool) -> QuantumCircuit:
    """What ``_dynamic``'s conditions do on the outcome (m0, m1), written out by hand."""
    c = QuantumCircuit(6)
    if m0:
        c.x(1)
    if m0 != m1:
        c.x(2)
    if m0 and m1:
        c.x([3, 4])
    if m0 and not m1:
        c.x(3)
    if not m0 and m1:
        c.x(4)
    if m0 or m1 or not permute:
        c.x(5)
    else:
        c.h(5)
    if permute and (m0 or m1):
        c.append(PermutationGate([2, 0, 1]), [0, 5, 3])
    return c


def _exact(theta, permute: bool) -> dict[tuple[str, str], float]:
    """{(m bits, out bits): probability} by enumerating the two mid-circuit outcomes."""
    prefix = QuantumCircuit(6)
    for q, t in enumerate(theta):
        prefix.ry(t, q)
    for a, b in ((0, 3), (1, 3), (1, 4), (2, 4)):
        prefix.cx(a, b)
    state = Statevector(prefix).data
    idx = np.arange(state.size)
    dist: dict[tuple[str, str], float] = {}
    for m0 in (0, 1):
        for m1 in (0, 1):
            keep = (((idx >> 3) & 1) == m0) & (((idx >> 4) & 1) == m1)
            branch = np.where(keep, state, 0)
            p = float(np.vdot(branch, branch).real)
            if p < 1e-14:
                continue
            after = Statevector(branch / np.sqrt(p)).evolve(_feed_forward(m0, m1, permute))
            for k, q in enumerate(after.probabilities()):
                if q > 1e-14:
                    key = (f"{m1}{m0}", format(k, "06b"))
                    dist[key] = dist.get(key, 0.0) + p * q
    return dist


def _counts(data) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for key in zip(data.m.get_bitstrings(), data.out.get_bitstrings()):
        counts[key] = counts.get(key, 0) + 1
    return counts


def _tvd(counts: dict, probs: dict, shots: int) -> float:
    keys = set(counts) | set(probs)
    return 0.5 * sum(abs(counts.get(k, 0) / shots - probs.get(k, 0.0)) for k in keys)


THETA = (1.1, 0.7, 2.3)


def test_expression_conditions_lower_to_the_exact_distribution():
    """The deferred-measurement rewriting of the expressions gives exactly the enumerated
    distribution (Statevector of the lowered circuit, marginal on the clbits' qubits)."""
    for permute in (False, True):
        qc = _dynamic(THETA, permute)
        lowered = lower_circuit(qc)
        assert lowered.dynamic and None not in lowered.clbit_sources
        probs = Statevector(lowered.circuit).probabilities(lowered.clbit_sources)
        got = {}
        for k, p in enumerate(probs):
            if p > 1e-14:
                bits = format(k, f"0{qc.num_clbits}b")  # clbit 0 rightmost: m first, out last
                got[(bits[-2:], bits[:-2])] = float(p)
        want = _exact(THETA, permute)
        assert set(got) == set(want)
        assert max(abs(got[k] - want[k]) for k in want) < TOL


def test_sampler_on_expression_conditions_against_exact_and_aer():
    from qiskit_aer import AerSimulator
    from qiskit_aer.primitives import SamplerV2 as AerSampler

    shots = 20_000
    for permute in (False, True):
        qc = _dynamic(THETA, permute)
        want = _exact(THETA, permute)
        ours = _counts(SamplerV2(seed=11, options={"dtype": "complex128"})
                       .run([qc], shots=shots).result()[0].data)
        aer_qc = transpile(qc, AerSimulator(), optimization_level=0)
        aer = _counts(AerSampler(seed=11).run([aer_qc], shots=shots).result()[0].data)
        for counts in (ours, aer):
            assert set(counts) <= set(want), set(counts) - set(want)  # nothing impossible
            # expected TVD at 20,000 shots over these ~20 outcomes: about 0.01
            assert _tvd(counts, want, shots) < 0.03


def test_estimator_on_expression_conditions_is_exact_on_every_branch():
    """With |+> data qubits the feed-forward leaves a GHZ state and reset ancillas on every
    branch: each element's value (one drawn branch) is the analytic one."""
    qc = _dynamic((np.pi / 2,) * 3, permute=False)
    qc.remove_final_measurements()
    labels = {"IIIXXX": 1.0, "IIIZZI": 1.0, "IIIIZZ": 1.0, "IIIIIZ": 0.0, "IIZIII": 1.0,
              "IZIIII": 1.0, "ZIIIII": -1.0, "ZZZIII": -1.0}
    obs = [SparsePauliOp(lb) for lb in labels]
    evs = EstimatorV2(seed=5, options={"dtype": "complex128"}).run(
        [(qc, [obs] * 40)]).result()[0].data.evs
    np.testing.assert_allclose(evs, np.tile(list(labels.values()), (40, 1)), atol=TOL, rtol=0)


def test_unsupported_expression_node_is_named():
    m = ClassicalRegister(2, "m")
    qc = QuantumCircuit(QuantumRegister(2, "q"), m)
    qc.h(0)
    qc.measure(0, m[0])
    with qc.if_test(expr.equal(expr.add(m, 1), 2)):
        qc.x(1)
    qc.measure(1, m[1])
    for run in (lambda: SamplerV2(seed=1).run([qc], shots=10).result(),
                lambda: EstimatorV2().run([(qc.remove_final_measurements(inplace=False),
                                            "ZZ")]).result()):
        with pytest.raises(QiskitError) as info:
            run()
        assert isinstance(info.value, UnsupportedInstructionError)
        message = str(info.value)
        assert "node Binary.ADD" in message and "supported: Var" in message
        assert "'if_else' at position" in message and "\n" not in message


# ------------------------------------------------ expression truth tables, array and scalar
def _truth_cases(m):
    """(expression, its value for the register value ``a``, written out in Python)."""
    return [
        (expr.lift(m[0]), lambda a: bool(a & 1)),
        (expr.bit_xor(m[0], m[1]), lambda a: bool((a ^ (a >> 1)) & 1)),
        (expr.equal(m, 3), lambda a: a == 3),
        (expr.logic_and(m[0], expr.bit_not(m[1])), lambda a: bool(a & 1) and not a & 2),
        (expr.logic_or(expr.logic_not(m[2]), m[1]), lambda a: not a & 4 or bool(a & 2)),
        (expr.less(m, 5), lambda a: a < 5),
        (expr.greater_equal(m, 2), lambda a: a >= 2),
        (expr.not_equal(expr.bit_and(m, 5), 0), lambda a: (a & 5) != 0),
        (expr.equal(expr.bit_or(m, 1), 7), lambda a: (a | 1) == 7),
        (expr.equal(expr.bit_not(m), 2), lambda a: (~a & 7) == 2),
        (expr.equal(expr.shift_left(m, 2), 4), lambda a: ((a << 2) & 7) == 4),
        (expr.equal(expr.shift_right(m, 1), 1), lambda a: (a >> 1) == 1),
        (expr.equal(expr.shift_left(m, 70), 0), lambda a: True),
        (expr.index(m, 2), lambda a: bool(a >> 2 & 1)),
        (expr.equal(m[1], True), lambda a: bool(a & 2)),
    ]


@pytest.mark.parametrize("scalar", [False, True], ids=["arrays", "python-ints"])
def test_expression_truth_tables_match_python(monkeypatch, scalar):
    """Every supported node's truth table over all assignments, on int64 arrays (the
    default) and on Python integers (what a register wider than 62 bits takes), against
    the same expression written out in Python."""
    from qsimdist.frontends import classical

    if scalar:
        monkeypatch.setattr(classical, "_ARRAY_BITS", 0)
    m = ClassicalRegister(3, "m")
    wires = [10, 11, 12]
    for e, want in _truth_cases(m):
        got = classical.expression_truth(e, list(m), wires, wires, "a test")
        assert got == [want(a) for a in range(8)], e
    # a bit never written reads 0: m[2] fixed at 0, wires for m[0], m[1]
    for e, want in _truth_cases(m):
        got = classical.expression_truth(e, list(m), [10, 11, None], [10, 11], "a test")
        assert got == [want(a) for a in range(4)], e


def test_wide_register_expressions_use_python_integers():
    """A 70-bit register's value passes int64: its expression is evaluated on Python
    integers and still exact."""
    from qsimdist.frontends import classical

    wide = ClassicalRegister(70, "w")
    e = expr.equal(wide, (1 << 69) | 1)
    assert classical._widest(e) == 70
    sources = [0] + [None] * 68 + [1]  # bit 0 reads wire 0, bit 69 wire 1
    assert classical.expression_truth(e, list(wide), sources, [0, 1], "a test") == [
        False, False, False, True]
