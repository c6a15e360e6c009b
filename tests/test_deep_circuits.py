"""The statevector route for narrow circuits, the route choice, and fresh-qubit resets."""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import Statevector

import qsimdist
from qsimdist.api import choose_route
from qsimdist.errors import InvalidInputError, UnsupportedInstructionError
from qsimdist.frontends import GateCircuit, load


def _random(n: int, depth: int, seed: int) -> QuantumCircuit:
    qc = random_circuit(n, depth, max_operands=2, seed=seed)
    qc.remove_final_measurements()
    qc.global_phase = 0.25 + seed
    return qc


def _deep(n: int, gates: int, seed: int = 0) -> GateCircuit:
    """A seeded random circuit of H, T and CX gates (the RevLib gate set)."""
    rng = np.random.default_rng(seed)
    h = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
    t = np.diag([1, np.exp(1j * np.pi / 4)])
    cx = np.eye(4)[[0, 1, 3, 2]]
    gc = GateCircuit(n)
    for _ in range(gates):
        r = rng.random()
        if r < 0.4:
            a, b = rng.choice(n, 2, replace=False)
            gc.append(cx, (int(a), int(b)), "cx")
        else:
            gc.append(h if r < 0.6 else t, (int(rng.integers(n)),), "g")
    return gc


@pytest.mark.parametrize("seed", range(3))
def test_statevector_route_equals_tensor_network_and_qiskit(seed):
    qc = _random(7, 8, seed)
    ref = Statevector(qc).data
    bits = ["0000000", "1011001", "01*1*0*", "*******", "1110001"]
    for order in ("qiskit", "natural"):
        def index(b, order=order):
            return int(b if order == "qiskit" else b[::-1], 2)

        sv = qsimdist.amplitudes(qc, bits, order=order, dtype="complex128", method="statevector")
        tn = qsimdist.amplitudes(qc, bits, order=order, dtype="complex128",
                                 method="tensor-network")
        assert sv.stats["method"] == "statevector" and tn.stats["method"] == "tensor-network"
        for b in ("0000000", "1011001", "1110001"):
            assert abs(sv.get(b) - ref[index(b)]) < 1e-10
            assert abs(sv.get(b) - tn.get(b)) < 1e-10
        for k in (2, 3):
            assert np.abs(sv.values[k] - tn.values[k]).max() < 1e-10
        assert np.abs(sv.values[3] - [ref[index(format(i, "07b"))] for i in range(128)]
                      ).max() < 1e-10


def test_statevector_route_complex64():
    qc = _random(6, 6, 5)
    ref = Statevector(qc).data
    res = qsimdist.amplitudes(qc, "******", method="statevector")
    assert res.values[0].dtype == np.complex64
    assert np.abs(res.values[0] - ref).max() / np.linalg.norm(ref) < 1e-5


def test_many_bitstrings_use_one_state():
    gc = _deep(9, 400, seed=1)
    rng = np.random.default_rng(0)
    bits = [format(int(i), "09b") for i in rng.integers(0, 512, 300)]
    res = qsimdist.amplitudes(gc, bits, dtype="complex128")
    assert res.stats["method"] == "statevector" and res.stats["contractions"] == 1
    one = qsimdist.amplitudes(gc, "*" * 9, dtype="complex128", method="tensor-network")
    assert np.abs(res.amplitudes - one.values[0][[int(b, 2) for b in bits]]).max() < 1e-10


def test_route_narrow_deep_is_statevector():
    gc = _deep(12, 3000)
    route = choose_route(gc, ["0" * 12], dtype="complex128", memory_limit="1GiB")
    assert route.method == "statevector"
    assert route.fusion_width in (2, 3, 4, 5)
    assert route.statevector_seconds < route.tensor_network_seconds


def test_route_wide_shallow_is_tensor_network():
    n = 24  # the state fits 4 GiB, but one amplitude of a depth-2 circuit is far cheaper by TN
    gc = GateCircuit(n)
    h = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
    cz = np.diag([1, 1, 1, -1])
    for q in range(n):
        gc.append(h, (q,), "h")
    for q in range(0, n - 1, 2):
        gc.append(cz, (q, q + 1), "cz")
    route = choose_route(gc, ["0" * n], dtype="complex64", memory_limit="4GiB")
    assert route.method == "tensor-network" and route.reason == "predicted faster"
    assert route.tensor_network_seconds < route.statevector_seconds
    # too wide for any state: tensor network without estimating the statevector
    wide = GateCircuit(40)
    wide.append(h, (0,), "h")
    route = choose_route(wide, ["0" * 40], memory_limit="8GiB")
    assert route.method == "tensor-network" and "does not fit" in route.reason
    res = qsimdist.amplitudes(wide, ["1" + "0" * 39, "0" * 40], memory_limit="8GiB")
    assert res.stats["method"] == "tensor-network"
    assert np.allclose(res.amplitudes, [0, 2**-0.5], atol=1e-6)


def test_method_errors():
    qc = _random(3, 3, 0)
    with pytest.raises(InvalidInputError, match="unknown method 'fast'; valid: auto"):
        qsimdist.amplitudes(qc, "000", method="fast")
    with pytest.raises(InvalidInputError, match="executor 'mpi'"):
        choose_route(qc, "000", method="statevector", executor="mpi")
    with pytest.raises(qsimdist.QsimdistError, match="statevector of 40 qubits"):
        qsimdist.amplitudes(GateCircuit(40), "0" * 40, method="statevector",
                            memory_limit="1GiB")


def test_small_warm_call_takes_the_cheap_path(monkeypatch):
    """A second call on a 16-qubit circuit: statevector route, no path search, no plan."""
    import cotengra as ctg

    searches = []

    class Spy(ctg.HyperOptimizer):
        def __init__(self, *args, **kwargs):
            searches.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ctg, "HyperOptimizer", Spy)
    gc = _deep(16, 600, seed=3)
    bits = ["0" * 16, "1" * 16, "0101" * 4]
    first = qsimdist.amplitudes(gc, bits, dtype="complex128")
    warm = qsimdist.amplitudes(gc, bits, dtype="complex128")
    for res in (first, warm):
        assert res.stats["method"] == "statevector"
        assert res.stats["route"]["method"] == "statevector"
        assert res.stats["fusion"]["gates_after"] < res.stats["fusion"]["gates_before"]
    assert searches == []
    assert np.array_equal(first.amplitudes, warm.amplitudes)
    qc = QuantumCircuit(16)
    for g in gc.gates:  # our matrices are big-endian over g.qubits, Qiskit's little-endian
        qc.unitary(g.matrix, list(reversed(g.qubits)))
    ref = Statevector(qc).data
    assert np.abs(warm.amplitudes - ref[[int(b, 2) for b in bits]]).max() < 1e-10


def test_reset_on_fresh_qubits_is_accepted(tmp_path):
    qc = QuantumCircuit(3)
    qc.reset(2)
    qc.h(0)
    qc.reset(1)  # qubit 1 untouched so far
    qc.cx(0, 1)
    qc.cx(1, 2)
    plain = QuantumCircuit(3)
    plain.h(0)
    plain.cx(0, 1)
    plain.cx(1, 2)
    ref = Statevector(plain).data
    res = qsimdist.amplitudes(qc, "***", dtype="complex128")
    assert np.abs(res.values[0] - ref).max() < 1e-10
    assert len(load(qc).gates) == 3
    path = tmp_path / "fresh_reset.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nreset q;\n'
                    "h q[0];\ncx q[0],q[1];\ncx q[1],q[2];\n")
    res = qsimdist.amplitudes(str(path), "***", dtype="complex128")
    assert np.abs(res.values[0] - ref).max() < 1e-10


@pytest.mark.parametrize("text", [
    "h q[0];\nreset q[0];\n",  # reset after a gate
    "h q[0];\ncx q[0],q[1];\nreset q[1];\n",  # after a two-qubit gate
])
def test_reset_after_use_is_refused(tmp_path, text):
    path = tmp_path / "used_reset.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\n' + text)
    with pytest.raises(UnsupportedInstructionError, match="'reset' at position"):
        qsimdist.amplitudes(str(path), "00")
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.reset(0)
    with pytest.raises(UnsupportedInstructionError, match="non-unitary instruction 'reset'"):
        load(qc)


@pytest.mark.slow
def test_revlib_square_root_7_against_qiskit(shared_data):
    """Four amplitudes (two largest, two seeded random) of a 7,630-gate RevLib circuit."""
    import qiskit.qasm2 as qasm2

    path = shared_data / "circuits" / "revlib" / "square_root_7.qasm"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    qc = qasm2.load(str(path), custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    qc.remove_final_measurements()
    ref = Statevector(qc).data
    top = [int(i) for i in np.argsort(-np.abs(ref), kind="stable")[:2]]
    rest = [int(i) for i in np.random.default_rng(0).choice(ref.size, 2, replace=False)]
    bits = [format(i, "016b") for i in top + rest]
    res = qsimdist.amplitudes(str(path), bits, dtype="complex128")
    assert res.stats["method"] == "statevector"
    assert np.abs(res.amplitudes - ref[top + rest]).max() < 1e-10
    assert abs(res.amplitudes[0]) > 1e-3  # the largest amplitude is not a zero


def _deep_qiskit(n: int, gates: int, seed: int) -> QuantumCircuit:
    """A seeded random Qiskit circuit of CX, CZ, H, T, Tdg, SX and RZ gates."""
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for _ in range(gates):
        r = rng.random()
        if r < 0.4:
            a, b = (int(x) for x in rng.choice(n, 2, replace=False))
            (qc.cx if r < 0.32 else qc.cz)(a, b)
        elif r < 0.9:
            q = int(rng.integers(n))
            (qc.h, qc.t, qc.tdg, qc.sx)[int((r - 0.4) / 0.125)](q)
        else:
            qc.rz(float(rng.uniform(-3, 3)), int(rng.integers(n)))
    return qc


def test_statevector_win_prices_no_batch_and_fuses_once(monkeypatch):
    """Where the statevector route wins outright, neither the batches nor a contraction
    path are priced, and the circuit is fused once per call (issue 43, item 3)."""
    from qsimdist.engine import batching, router
    from qsimdist.engine.memory import MemoryBudget
    from qsimdist.frontends import fusion

    qc = _deep_qiskit(10, 2000, seed=7)
    rng = np.random.default_rng(1)
    bits = [format(int(i), "010b") for i in rng.choice(1024, 4, replace=False)]

    def pricer(*args, **kwargs):
        raise AssertionError("the batch pricer ran")

    monkeypatch.setattr(batching, "_priced_width", pricer)
    # the patched pricer is the one these bitstrings reach when the batches are priced
    with pytest.raises(AssertionError, match="batch pricer ran"):
        batching.batches(load(qc), bits, "complex128", MemoryBudget.resolve(None),
                         price=lambda pattern: 1.0)

    def no_path(net):
        raise AssertionError("a contraction path was priced")

    monkeypatch.setattr(router, "greedy_cost", no_path)
    fusions = []
    real_fuse = fusion.fuse

    def counting_fuse(*args, **kwargs):
        fusions.append(args[1] if len(args) > 1 else kwargs.get("max_qubits"))
        return real_fuse(*args, **kwargs)

    monkeypatch.setattr(fusion, "fuse", counting_fuse)
    ref = Statevector(qc).data
    for _ in range(2):
        fusions.clear()
        res = qsimdist.amplitudes(qc, bits + ["1*0*******"], dtype="complex128")
        assert res.stats["method"] == "statevector"
        assert res.stats["route"]["reason"] == "predicted below the tensor-network floor"
        assert len(fusions) == 1, fusions
        assert np.abs(res.amplitudes[:4] - ref[[int(b, 2) for b in bits]]).max() < 1e-10
        pattern = [int("1" + a + "0" + rest, 2) for a in "01" for rest in
                   (format(i, "07b") for i in range(128))]
        assert np.abs(res.values[4] - ref[pattern]).max() < 1e-10


def test_tensor_network_route_fuses_once(monkeypatch):
    """The tensor-network route of a deep circuit fuses it for the network once, though
    batching, pricing and building the networks each ask for it."""
    from qsimdist.frontends import fusion

    qc = _deep_qiskit(8, 1100, seed=3)
    bits = ["00000000", "10110011", "01100110", "10110010"]
    fusions = []
    real_fuse = fusion.fuse
    monkeypatch.setattr(fusion, "fuse", lambda *a, **k: fusions.append(1) or real_fuse(*a, **k))
    res = qsimdist.amplitudes(qc, bits, dtype="complex128", method="tensor-network")
    assert res.stats["method"] == "tensor-network" and res.stats["contractions"] >= 1
    assert len(fusions) == 1
    ref = Statevector(qc).data
    assert np.abs(res.amplitudes - ref[[int(b, 2) for b in bits]]).max() < 1e-10
