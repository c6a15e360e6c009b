"""Gate fusion and the statevector kernel against Qiskit's Operator and Statevector."""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import Operator, Statevector

from qsimdist.errors import InvalidInputError
from qsimdist.executors import statevector as sv
from qsimdist.frontends import load
from qsimdist.frontends.fusion import (
    choose_fusion,
    diagonal_flags,
    fuse,
    fusion_blocks,
    predict_statevector,
)
from qsimdist.network.matrices import is_diagonal


def _to_qiskit(gc) -> QuantumCircuit:
    """A GateCircuit back as a Qiskit circuit of unitaries (our matrices are big-endian)."""
    qc = QuantumCircuit(gc.n_qubits, global_phase=gc.global_phase)
    for g in gc.gates:
        qc.unitary(g.matrix, list(reversed(g.qubits)))
    return qc


def _circuit(seed: int, n: int = 5) -> QuantumCircuit:
    """A random circuit with diagonal runs (T, RZ, CZ, CP, RZZ) and a global phase."""
    qc = random_circuit(n, 8, max_operands=3, seed=seed)
    qc.remove_final_measurements()
    rng = np.random.default_rng(seed)
    for q in range(n):
        qc.t(q)
        qc.rz(float(rng.uniform(-3, 3)), q)
    qc.cz(0, 1)
    qc.cp(float(rng.uniform(-3, 3)), 1, 2)
    qc.rzz(float(rng.uniform(-3, 3)), 2, n - 1)
    qc.h(2)
    qc.cz(1, 2)
    qc.s(0)
    qc.global_phase = float(rng.uniform(-3, 3))
    return qc


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("keep_diagonal", [True, False])
def test_fusion_preserves_the_unitary(seed, keep_diagonal):
    qc = _circuit(seed)
    gc = load(qc)
    ref = Operator(qc).data
    sizes = []
    for k in (1, 2, 3, 4, 5):
        fused = fuse(gc, k, keep_diagonal=keep_diagonal)
        for g, diag in zip(fused.gates, diagonal_flags(fused)):
            assert len(g.qubits) <= (6 if diag else max(k, 3))  # random_circuit has 3-qubit gates
        assert fused.global_phase == gc.global_phase
        assert np.abs(Operator(_to_qiskit(fused)).data - ref).max() < 1e-10
        sizes.append(len(fused.gates))
    assert sizes[-1] < len(gc.gates)  # fusion does merge


def test_diagonal_runs_stay_diagonal():
    qc = QuantumCircuit(4)
    for q in range(4):
        qc.t(q)
    qc.cz(0, 1)
    qc.cp(0.3, 2, 3)
    qc.rzz(0.7, 1, 2)
    qc.rz(0.2, 3)
    qc.h(0)  # not diagonal: a block of its own with keep_diagonal
    qc.tdg(0)
    gc = load(qc)
    fused = fuse(gc, 2, keep_diagonal=True)
    flags = diagonal_flags(fused)
    assert [g.name for g in fused.gates[:1]] == ["fused_diagonal"]
    assert len(fused.gates) == 3 and flags == [True, False, True]
    assert fused.gates[0].qubits == (0, 1, 2, 3)
    assert np.abs(Operator(_to_qiskit(fused)).data - Operator(qc).data).max() < 1e-12
    # without keep_diagonal the H and the T after it join the diagonal block's qubit 0
    mixed = fuse(gc, 2, keep_diagonal=False)
    assert np.abs(Operator(_to_qiskit(mixed)).data - Operator(qc).data).max() < 1e-12


def test_diagonal_fused_gate_becomes_hyper_indices():
    """A fused diagonal gate still simplifies to hyper-indices in the network (quimb's D)."""
    from qsimdist.frontends import amplitude_network
    from qsimdist.planner.simplify import simplify

    qc = QuantumCircuit(3)
    qc.h([0, 1, 2])
    qc.cz(0, 1)
    qc.cp(0.4, 1, 2)
    qc.t(0)
    qc.h([0, 1, 2])
    fused = fuse(load(qc), 2, keep_diagonal=True)
    assert any(g.name == "fused_diagonal" for g in fused.gates)
    net = simplify(amplitude_network(fused, "***"), "D", skip_cheap=False)
    counts: dict = {}
    for term in net.inputs:
        for i in term:
            counts[i] = counts.get(i, 0) + 1
    assert max(counts.values()) >= 3  # an index shared by three or more tensors
    import qsimdist

    res = qsimdist.amplitudes(fused, "***", dtype="complex128", method="tensor-network")
    assert np.abs(res.values[0] - Statevector(qc).data).max() < 1e-10


def test_invalid_width_is_refused():
    gc = load(_circuit(0))
    with pytest.raises(InvalidInputError, match="max_qubits"):
        fuse(gc, 0)
    with pytest.raises(InvalidInputError, match="max_qubits"):
        fusion_blocks(gc, 13)


def test_blocks_respect_qubit_order():
    """Every qubit's gates appear in the fused blocks in circuit order."""
    gc = load(_circuit(3, n=6))
    for k in (2, 3, 4):
        blocks = fusion_blocks(gc, k, keep_diagonal=False)
        seen = sorted(i for b in blocks for i in b.gates)
        assert seen == list(range(len(gc.gates)))
        last = {q: -1 for q in range(gc.n_qubits)}
        for b in blocks:
            for i in sorted(b.gates):
                for q in gc.gates[i].qubits:
                    assert i > last[q]
            for i in b.gates:
                for q in gc.gates[i].qubits:
                    last[q] = max(last[q], i)


def test_choose_fusion_predicts_and_fuses():
    gc = load(_circuit(1, n=6))
    width, seconds = predict_statevector(gc)
    fused, info, predicted = choose_fusion(gc)
    assert width in (2, 3, 4, 5) and info.max_qubits == width and predicted == seconds > 0
    assert info.gates_before == len(gc.gates) and info.gates_after == len(fused.gates)
    state = sv.simulate(6, fused.gates, fused.global_phase, "complex128")
    assert np.abs(state - Statevector(_circuit(1, n=6)).data).max() < 1e-10


@pytest.mark.parametrize("dtype,tol", [("complex128", 1e-10), ("complex64", 1e-5)])
def test_statevector_kernel_matches_qiskit(dtype, tol):
    for seed in range(3):
        qc = _circuit(seed, n=6)
        gc = load(qc)
        ref = Statevector(qc).data
        for k in (1, 3, 5):
            fused = fuse(gc, k, keep_diagonal=False)
            state = sv.simulate(6, fused.gates, fused.global_phase, dtype)
            assert state.dtype == np.dtype(dtype)
            assert np.abs(state - ref).max() / np.linalg.norm(ref) < tol


def test_reading_amplitudes_from_the_state():
    qc = _circuit(2, n=5)
    ref = Statevector(qc).data
    state = sv.simulate(5, load(qc).gates, qc.global_phase)
    bits = ["00000", "10110", "11111", "01001"]
    assert np.allclose(sv.bitstring_amplitudes(state, bits, "qiskit"),
                       [ref[int(b, 2)] for b in bits], atol=1e-12)
    assert np.allclose(sv.bitstring_amplitudes(state, bits, "natural"),
                       [ref[int(b[::-1], 2)] for b in bits], atol=1e-12)
    # pattern "1*0*1" in Qiskit order: qubits 3 and 1 open, qubit 3 the most significant
    per_qubit = list(reversed("1*0*1"))
    got = sv.pattern_amplitudes(state, per_qubit, [3, 1])
    want = [ref[int(f"1{a}0{b}1", 2)] for a in "01" for b in "01"]
    assert np.allclose(got, want, atol=1e-12)


def test_is_diagonal():
    assert is_diagonal(np.diag([1, 1j]))
    assert not is_diagonal(np.array([[1, 1e-300], [0, 1]]))


@pytest.mark.parametrize("seed", range(3))
def test_axis_tracking_statevector_every_branch(seed, monkeypatch):
    """Dense gates of 1-5 qubits anywhere on 10 qubits, diagonal ones between them: the state
    (whose axis order is tracked, never restored between gates) equals Qiskit's, and the
    gates took every branch: no copy (adjacent axes, one GEMM or a batched one), a copy to
    the front and a copy to the end."""
    from qiskit.quantum_info import random_unitary

    n = 10
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n, global_phase=0.7)
    for j in range(60):
        k = int(rng.integers(1, 6))
        qubits = [int(q) for q in rng.choice(n, k, replace=False)]
        if j % 7 == 3:  # a run of neighbours, so adjacent axes occur in both orders
            start = int(rng.integers(0, n - k + 1))
            qubits = list(range(start, start + k))[:: 1 if j % 2 else -1]
        if j % 5 == 4:
            qc.append(QuantumCircuit(k).to_gate(label="id"), qubits)  # decomposes to nothing
            qc.cp(float(rng.uniform(-3, 3)), qubits[0], (qubits[0] + 1) % n)
        else:
            qc.unitary(random_unitary(2**k, seed=int(rng.integers(1 << 30))), qubits)
    moves: list[int] = []
    original = sv._State._move

    def counting(self, qubits):
        first = original(self, qubits)
        moves.append(first)
        return first

    monkeypatch.setattr(sv._State, "_move", counting)
    gc = load(qc)
    dense = sum(1 for g in gc.gates if not is_diagonal(np.asarray(g.matrix)))
    state = sv.simulate(n, gc.gates, gc.global_phase, "complex128")
    ref = Statevector(qc).data
    assert np.abs(state - ref).max() < 1e-10
    assert 0 in moves and any(m > 0 for m in moves)  # to the front and to the end
    assert len(moves) < dense  # some gates needed no copy


def _random_gate_circuit(n: int, n_gates: int, seed: int, max_width: int = 5):
    """A GateCircuit of random dense gates (1..max_width qubits) and diagonal phases."""
    from qiskit.quantum_info import random_unitary

    from qsimdist.frontends.circuit import Gate, GateCircuit

    rng = np.random.default_rng(seed)
    gates = []
    for _ in range(n_gates):
        k = int(rng.integers(1, max_width + 1))
        qubits = tuple(int(q) for q in rng.choice(n, k, replace=False))
        if rng.random() < 0.2:
            m = np.diag(np.exp(1j * rng.uniform(-3, 3, size=1 << k)))
        else:
            m = random_unitary(2**k, seed=int(rng.integers(1 << 30))).data
        gates.append(Gate(m, qubits))
    return GateCircuit(n, gates, global_phase=0.4)


@pytest.mark.parametrize("n,dtype,tol", [(9, "complex128", 1e-12), (12, "complex64", 2e-6),
                                         (15, "complex128", 1e-12)])
def test_compiled_in_place_kernel_equals_the_gemm_kernel(n, dtype, tol, monkeypatch):
    """The in-place compiled kernel (gates on any bits, swaps off the low bits) gives the
    GEMM kernel's state, and the circuit made it swap (gates landed on low bits)."""
    gc = _random_gate_circuit(n, 80, seed=n)
    swaps: list[int] = []
    original = sv._InPlaceState._clear_low

    def counting(self, qubits):
        swaps.append(len(qubits))
        return original(self, qubits)

    monkeypatch.setattr(sv._InPlaceState, "_clear_low", counting)
    want = sv.simulate(n, gc.gates, gc.global_phase, dtype, kernel="numpy")
    got = sv.simulate(n, gc.gates, gc.global_phase, dtype, kernel="compiled")
    assert got.dtype == np.dtype(dtype)
    assert np.abs(got - want).max() < tol
    assert swaps  # the low-bit branch ran


def test_swap_bits_is_the_bit_exchange():
    """swap_bits exchanges index bits in place: the same as transposing the state's axes."""
    from qsimdist.executors import sv_kernels

    n = 11
    rng = np.random.default_rng(3)
    state = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    for lows, highs in [([0], [7]), ([3, 1], [4, 10]), ([0, 1, 2, 3], [9, 5, 6, 8])]:
        got = state.copy()
        sv_kernels.swap_bits(got, lows, highs, chunks=3)
        axes = list(range(n))  # axis a of the C-ordered tensor holds bit n-1-a
        for lo, hi in zip(lows, highs):
            axes[n - 1 - lo], axes[n - 1 - hi] = axes[n - 1 - hi], axes[n - 1 - lo]
        want = state.reshape((2,) * n).transpose(axes).reshape(-1)
        assert np.array_equal(got, want)


def test_kernel_choice_is_checked():
    gc = _random_gate_circuit(6, 5, seed=1, max_width=3)
    with pytest.raises(InvalidInputError, match="valid: auto, compiled, numpy"):
        sv.simulate(6, gc.gates, kernel="fast")
    with pytest.raises(InvalidInputError, match="needs 4 qubits beside the widest gate"):
        sv.simulate(6, gc.gates, kernel="compiled")
    auto = sv.simulate(6, gc.gates, kernel="auto")  # too small for the compiled kernel
    assert np.abs(auto - sv.simulate(6, gc.gates, kernel="numpy")).max() < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_fused_gates_at_least_bounds_the_blocks(seed):
    """The one-pass lower bound the router's floor uses never exceeds the blocks that
    fusion_blocks(keep_diagonal=True) makes, whatever the widths, gates wider than the
    width (CCX, CCZ, 4-qubit diagonals) included, and is not vacuous on a deep circuit."""
    from qsimdist.frontends.fusion import fused_gates_at_least

    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(7)
    for _ in range(600):
        r = rng.random()
        qs = [int(q) for q in rng.choice(7, 4, replace=False)]
        if r < 0.3:
            qc.cx(qs[0], qs[1])
        elif r < 0.4:
            qc.cz(qs[0], qs[1])
        elif r < 0.45:
            qc.ccx(qs[0], qs[1], qs[2])
        elif r < 0.5:
            qc.ccz(qs[0], qs[1], qs[2])
        elif r < 0.52:
            qc.mcp(float(rng.uniform(-3, 3)), qs[:3], qs[3])
        else:
            (qc.h, qc.t, qc.sx, qc.s)[int(rng.integers(4))](qs[0])
    gc = load(qc)
    flags = diagonal_flags(gc)
    for k in (1, 2, 3, 4):
        for max_diag in (None, 2, 6):
            bound = fused_gates_at_least(gc, k, max_diagonal_qubits=max_diag)
            blocks = fusion_blocks(gc, k, keep_diagonal=True, max_diagonal_qubits=max_diag,
                                   diagonal=flags)
            assert 0 < bound <= len(blocks), (k, max_diag, bound, len(blocks))
            if k == 2:
                assert bound >= len(blocks) // 3


def test_wide_and_repeated_blocks_preserve_the_unitary():
    """Blocks wider than the embedding limit (gates applied to the block's legs) and blocks
    of one shared matrix on repeated positions (embeddings reused) fuse exactly."""
    from qsimdist.frontends.fusion import EMBED_MAX_QUBITS

    qc = _circuit(11, n=EMBED_MAX_QUBITS + 1)
    for q in range(qc.num_qubits - 1):
        qc.cx(q, q + 1)
        qc.h(q)
        qc.cx(q, q + 1)
    gc = load(qc)
    ref = Operator(qc).data
    for k in (2, EMBED_MAX_QUBITS, EMBED_MAX_QUBITS + 1):
        fused = fuse(gc, k, keep_diagonal=False)
        assert np.abs(Operator(_to_qiskit(fused)).data - ref).max() < 1e-10
    widest = max(len(g.qubits) for g, d in zip(fused.gates, diagonal_flags(fused)) if not d)
    assert widest > EMBED_MAX_QUBITS  # the legs branch ran
