"""Multi-controlled gates kept whole on the statevector route (issue 43: Grover, qwalk).

Qiskit's ``MCXGate`` / ``MCPhaseGate`` on many qubits expand into hundreds of gates; the
conversion keeps, beside that expansion (for the tensor-network routes), a compact form
of the circuit where each is one :class:`~qsimdist.frontends.circuit.ControlledGate`
applied to the amplitudes its controls select. Every check here compares against
Qiskit's own ``Statevector`` / ``Operator``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qiskit")

from qiskit import QuantumCircuit  # noqa: E402
from qiskit.circuit.library import (  # noqa: E402
    C3XGate,
    C4XGate,
    CZGate,
    MCPhaseGate,
    MCXGate,
    PermutationGate,
    RYGate,
)
from qiskit.quantum_info import Operator, SparsePauliOp, Statevector  # noqa: E402

from qsimdist.executors.statevector import simulate  # noqa: E402
from qsimdist.frontends.circuit import ControlledGate, is_controlled  # noqa: E402
from qsimdist.frontends.fusion import (  # noqa: E402
    controlled_seconds,
    fuse,
    fusion_blocks,
    gate_seconds,
    predict_statevector,
)
from qsimdist.frontends.qiskit_circuit import EXPANSIONS, from_qiskit  # noqa: E402


def _mixed(n: int, seed: int) -> QuantumCircuit:
    """Random rotations, then multi-controlled gates with open and closed controls, a
    SWAP and a permutation between them, and a controlled two-qubit base gate."""
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for q in range(n):
        qc.rx(rng.uniform(0, 3), q)
        qc.rz(rng.uniform(0, 3), q)
    order = [int(q) for q in rng.permutation(n)]
    qc.append(MCXGate(5, ctrl_state=0b10110), order[:6])
    qc.append(MCPhaseGate(0.7, n - 2), order[::-1][: n - 1])
    qc.cx(order[0], order[1])
    qc.append(C3XGate(), order[2:6])
    qc.swap(order[1], order[4])
    qc.append(PermutationGate([2, 0, 1]), order[3:6])
    qc.append(C4XGate(), order[1:6])
    qc.append(RYGate(0.4).control(4, ctrl_state=0b0101, annotated=False), order[:5])
    qc.append(MCXGate(n - 1), list(range(n)))
    qc.append(CZGate().control(3, ctrl_state=0b011, annotated=False), order[:5])
    for q in range(n):
        qc.ry(rng.uniform(0, 3), q)
    return qc


@pytest.mark.parametrize("n,seed", [(7, 1), (9, 2), (11, 3)])
def test_compact_form_gives_qiskits_state(n, seed):
    qc = _mixed(n, seed)
    gc = from_qiskit(qc)
    assert gc.compact is not None
    controlled = [g for g in gc.compact.gates if is_controlled(g)]
    assert len(controlled) >= 4  # MCX, MCPhase, C4X, controlled RY, MCX(n-1), controlled CZ
    assert len(gc.compact.gates) < len(gc.gates)
    ref = Statevector(qc).data
    full = simulate(n, gc.gates, gc.global_phase)
    compact = simulate(n, gc.compact.gates, gc.compact.global_phase)
    np.testing.assert_allclose(full, ref, atol=1e-12)
    np.testing.assert_allclose(compact, ref, atol=1e-12)


def test_compiled_kernel_state_with_controlled_gates():
    """From 14 qubits the in-place compiled kernel runs the dense gates; the controlled
    gates read the same tracked layout."""
    from qsimdist.executors import kernels

    if not kernels.available():
        pytest.skip("numba is not installed: the compiled statevector kernel cannot run")
    qc = _mixed(15, 4)
    gc = from_qiskit(qc)
    ref = Statevector(qc).data
    got = simulate(15, gc.compact.gates, gc.compact.global_phase, kernel="compiled")
    np.testing.assert_allclose(got, ref, atol=1e-11)


@pytest.mark.parametrize("gate,qubits", [
    (MCXGate(4, ctrl_state=0b0110), (4, 0, 2, 1, 3)),
    (MCPhaseGate(1.1, 4), (0, 1, 2, 3, 4)),
    (RYGate(0.3).control(4, ctrl_state=0b1001, annotated=False), (2, 4, 0, 3, 1)),
])
def test_dense_matrix_of_a_controlled_gate(gate, qubits):
    qc = QuantumCircuit(5)
    qc.append(gate, list(qubits))
    gc = from_qiskit(qc)
    (cg,) = gc.compact.gates
    assert isinstance(cg, ControlledGate)
    # the dense matrix, big-endian over cg.qubits, against Qiskit's (little-endian) operator
    want = Operator(qc).data.reshape((2,) * 10)
    k = 5
    axes = [k - 1 - q for q in cg.qubits]  # Qiskit's tensor axis of each qubit, big-endian
    want = want.transpose(axes + [k + a for a in axes]).reshape(32, 32)
    np.testing.assert_allclose(cg.matrix, want, atol=1e-12)


def test_cached_expansions_keep_their_compact_gates():
    """A composite gate holding multi-controlled gates (Grover's operator) is expanded once
    into the cache; later conversions splice it, compact gates included."""
    from qiskit.circuit.library import grover_operator

    oracle = QuantumCircuit(6)
    oracle.append(MCPhaseGate(np.pi, 5), range(6))
    grover = grover_operator(oracle).to_gate()
    qc = QuantumCircuit(6)
    qc.h(range(6))
    for _ in range(3):
        qc.append(grover, range(6))
    EXPANSIONS.clear()
    first = from_qiskit(qc)
    reused = EXPANSIONS.reused
    second = from_qiskit(qc)
    assert EXPANSIONS.reused > reused
    ref = Statevector(qc).data
    for gc in (first, second):
        assert gc.compact is not None
        assert sum(is_controlled(g) for g in gc.compact.gates) >= 3
        np.testing.assert_allclose(simulate(6, gc.compact.gates, gc.compact.global_phase),
                                   ref, atol=1e-12)


def test_fusion_keeps_controlled_gates_whole_and_prices_them_on_their_subspace():
    gc = from_qiskit(_mixed(12, 5)).compact
    for width in (2, 3, 4, 5):
        blocks = fusion_blocks(gc, width, keep_diagonal=False)
        for b in blocks:
            if any(is_controlled(gc.gates[i]) for i in b.gates):
                assert len(b.gates) == 1 and b.controls == gc.gates[b.gates[0]].controls
        fused = fuse(gc, width, keep_diagonal=False, blocks=blocks)
        assert [g for g in fused.gates if is_controlled(g)] == \
            [g for g in gc.gates if is_controlled(g)]
        np.testing.assert_allclose(simulate(12, fused.gates, fused.global_phase),
                                   simulate(12, gc.gates, gc.global_phase), atol=1e-11)
    # an 11-control X on 12 qubits costs a 1-qubit gate on 2 amplitudes, not a 12-qubit one
    assert controlled_seconds(12, 12, 11, False) == gate_seconds(1, 1, False)
    assert controlled_seconds(12, 12, 11, False) < gate_seconds(12, 12, False) / 100
    width, seconds = predict_statevector(gc)
    assert seconds < predict_statevector(from_qiskit(_mixed(12, 5)))[1]


def test_primitives_and_amplitudes_on_a_grover_circuit():
    """Grover's search on 9 qubits (Qiskit's operator: MCX and MCPhase on 8-9 qubits):
    amplitudes, sampler and estimator through the compact statevector, exact."""
    from qiskit.circuit.library import grover_operator

    import qsimdist
    from qsimdist.qiskit import EstimatorV2, SamplerV2

    n = 9
    oracle = QuantumCircuit(n)
    oracle.x([1, 4])
    oracle.append(MCPhaseGate(np.pi, n - 1), range(n))
    oracle.x([1, 4])
    qc = QuantumCircuit(n)
    qc.h(range(n))
    qc.compose(grover_operator(oracle).power(6), inplace=True)
    ref = Statevector(qc)
    bits = ["111101101", "000000000", "101010101"]
    amps = qsimdist.amplitudes(qc, bits, dtype="complex128")
    want = [ref.data[int(b, 2)] for b in bits]
    assert amps.stats["route"]["method"] == "statevector"
    np.testing.assert_allclose(np.concatenate(amps.values), want, atol=1e-10)
    obs = SparsePauliOp.from_list([("Z" * n, 1.0), ("IIIIXXIII", 0.5), ("ZIIIIIIIZ", -0.3)])
    ev = EstimatorV2().run([(qc, obs)]).result()[0]
    assert abs(float(ev.data.evs) - ref.expectation_value(obs).real) < 1e-10
    measured = qc.copy()
    measured.measure_all()
    counts = SamplerV2(seed=7).run([measured], shots=2000).result()[0].data.meas.get_counts()
    top = max(counts, key=counts.get)
    assert top == "111101101"  # the marked state, amplified
    p = ref.probabilities_dict()
    assert abs(counts[top] / 2000 - p[top]) < 0.05


def test_small_complex64_states_are_computed_in_double_precision(monkeypatch):
    """A deep circuit on a small state asked for in complex64 is computed in complex128 and
    cast at the end: single precision drifts about 6e-8 per gate (MQT Bench's 16-qubit
    Grover search ended 6.9e-5 off, over the 5e-5 a complex64 amplitude is checked to)."""
    from qiskit.circuit.library import grover_operator

    import qsimdist
    from qsimdist.executors import statevector

    n = 10
    oracle = QuantumCircuit(n)
    oracle.append(MCPhaseGate(np.pi, n - 1), range(n))
    qc = QuantumCircuit(n)
    qc.h(range(n))
    for _ in range(4):  # about 4 x 25 Grover iterations, past the peak and around again
        qc.compose(grover_operator(oracle).power(25), inplace=True)
    for q in range(n):
        qc.rx(0.1 * (q + 1), q)
    ref = Statevector(qc).data
    bits = [format(int(i), f"0{n}b") for i in np.argsort(-np.abs(ref))[:4]]
    want = np.array([ref[int(b, 2)] for b in bits])

    def error() -> float:
        got = qsimdist.amplitudes(qc, bits, dtype="complex64", method="statevector")
        assert np.concatenate(got.values).dtype == np.complex64
        return float(np.abs(np.concatenate(got.values) - want).max())

    precise = error()
    monkeypatch.setattr(statevector, "PRECISE_MAX_QUBITS", 0)
    single = error()
    assert precise < 1e-6 < single
