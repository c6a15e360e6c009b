"""Amplitudes equal Qiskit's Statevector over the whole standard gate library.

Seeded random circuits of 2-20 qubits with a nonzero global phase, given as a
QuantumCircuit, as OpenQASM 2 and as OpenQASM 3 text. Tolerances follow
ARCHITECTURE.md: relative to the norm of the compared vector, 1e-5 for
complex64 and 1e-10 for complex128.
"""

from __future__ import annotations

import numpy as np
import pytest

from qsimdist import amplitudes
from qsimdist.frontends import expand_bitstring

from .conftest import rel_err

qiskit = pytest.importorskip("qiskit")
from qiskit import QuantumCircuit, qasm2, qasm3  # noqa: E402
from qiskit.circuit.library import get_standard_gate_name_mapping  # noqa: E402
from qiskit.quantum_info import Statevector  # noqa: E402

_SKIP = {"measure", "reset", "delay", "barrier", "global_phase"}
GATES = {
    name: g for name, g in get_standard_gate_name_mapping().items() if name not in _SKIP
}
TOL = {"complex64": 1e-5, "complex128": 1e-10}


def random_circuit(n: int, n_gates: int, seed: int) -> QuantumCircuit:
    """A circuit drawing every gate uniformly from Qiskit's standard library."""
    rng = np.random.default_rng(seed)
    names = sorted(g for g, op in GATES.items() if op.num_qubits <= n)
    qc = QuantumCircuit(n)
    qc.global_phase = float(rng.uniform(0.1, 2 * np.pi))
    for q in range(n):  # spread amplitude over every qubit
        qc.h(q)
    for _ in range(n_gates):
        op = GATES[names[rng.integers(len(names))]]
        params = [float(rng.uniform(-np.pi, np.pi)) for _ in op.params]
        gate = type(op)(*params) if params else op
        qubits = [int(q) for q in rng.choice(n, size=op.num_qubits, replace=False)]
        qc.append(gate, qubits)
    return qc


def check(qc: QuantumCircuit, dtype: str, rng: np.random.Generator, n_open: int = 4) -> None:
    n = qc.num_qubits
    sv = Statevector(qc).data
    k = min(n_open, n)
    chars = list(rng.choice(["0", "1"], size=n))
    for pos in rng.choice(n, size=k, replace=False):
        chars[pos] = "*"
    pattern = "".join(chars)
    single = "".join(rng.choice(["0", "1"], size=n))
    res = amplitudes(qc, [pattern, single], dtype=dtype)
    want = np.array([sv[int(b, 2)] for b in expand_bitstring(pattern) + [single]])
    assert res.bitstrings == expand_bitstring(pattern) + [single]
    assert rel_err(res.amplitudes, want) < TOL[dtype]


def test_every_standard_gate_is_covered():
    qc = random_circuit(4, 600, seed=1)
    used = {inst.operation.name for inst in qc.data}
    missing = {g for g, op in GATES.items() if op.num_qubits <= 4} - used
    assert not missing, f"gates never drawn: {missing}"


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("n,seed", [(2, 0), (3, 1), (5, 2), (8, 3), (12, 4)])
def test_quantumcircuit(n, seed, dtype):
    qc = random_circuit(n, 6 * n, seed)
    check(qc, dtype, np.random.default_rng(seed))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_twenty_qubits(dtype):
    qc = random_circuit(20, 80, seed=20)
    check(qc, dtype, np.random.default_rng(20), n_open=6)


@pytest.mark.parametrize("n,seed", [(3, 10), (6, 11), (10, 12)])
def test_qasm2_roundtrip(tmp_path, n, seed):
    qc = random_circuit(n, 5 * n, seed)
    path = tmp_path / "c.qasm"
    path.write_text(qasm2.dumps(qc))
    loaded = qasm2.load(path, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    sv = Statevector(loaded).data  # QASM 2 has no global phase: compare with the file's circuit
    rng = np.random.default_rng(seed)
    bits = ["".join(rng.choice(["0", "1"], size=n)) for _ in range(3)]
    res = amplitudes(path, bits, dtype="complex128")
    assert rel_err(res.amplitudes, [sv[int(b, 2)] for b in bits]) < 1e-10
    assert np.linalg.norm(sv) == pytest.approx(1.0)


@pytest.mark.parametrize("n,seed", [(3, 20), (6, 21), (10, 22)])
def test_qasm3_roundtrip(tmp_path, n, seed):
    pytest.importorskip("qiskit_qasm3_import")
    qc = random_circuit(n, 5 * n, seed)
    path = tmp_path / "c.qasm3"
    path.write_text(qasm3.dumps(qc))
    loaded = qasm3.load(path)
    sv = Statevector(loaded).data
    rng = np.random.default_rng(seed)
    bits = ["".join(rng.choice(["0", "1"], size=n)) for _ in range(3)]
    for dtype in ("complex64", "complex128"):
        res = amplitudes(path, bits, dtype=dtype)
        assert rel_err(res.amplitudes, [sv[int(b, 2)] for b in bits]) < TOL[dtype]
