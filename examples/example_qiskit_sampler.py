"""Qiskit's sampler interface on qsimdist: a 40-qubit GHZ state and a circuit with feed-forward.

Run: python examples/example_qiskit_sampler.py
"""

from __future__ import annotations

import numpy as np
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister, transpile

from qsimdist.qiskit import QsimdistBackend, SamplerV2


def main() -> None:
    # 40 qubits: far beyond a state vector; sampled by a chain of conditional marginals
    n = 40
    ghz = QuantumCircuit(n)
    ghz.h(0)
    for q in range(n - 1):
        ghz.cx(q, q + 1)
    ghz.measure_all()
    sampler = SamplerV2(seed=1)
    result = sampler.run([ghz], shots=1000).result()[0]
    counts = result.data.meas.get_counts()
    print(counts, result.metadata["sampling"]["method"])
    assert set(counts) <= {"0" * n, "1" * n} and abs(counts["0" * n] - 500) < 60

    # Feed-forward: measure, then flip qubit 1 when the outcome was 1, reset and reuse qubit 0
    q, m, out = QuantumRegister(2, "q"), ClassicalRegister(1, "m"), ClassicalRegister(2, "out")
    qc = QuantumCircuit(q, m, out)
    qc.ry(2 * np.arcsin(np.sqrt(0.3)), 0)  # P(1) = 0.3
    qc.measure(0, m[0])
    with qc.if_test((m[0], 1)):
        qc.x(1)
    qc.reset(0)
    qc.measure([0, 1], out)
    res = SamplerV2(seed=2).run([qc], shots=4000).result()[0]
    joined = res.data.out.get_counts()
    print(res.data.m.get_counts(), joined)
    assert set(joined) <= {"00", "10"}  # qubit 0 was reset; qubit 1 copies the outcome
    assert abs(joined.get("10", 0) / 4000 - 0.3) < 0.04

    # The same circuit through the BackendV2 interface
    backend = QsimdistBackend()
    counts = backend.run(transpile(qc, backend), shots=1000, seed_simulator=3).result().get_counts()
    print(counts)
    assert set(counts) <= {"00 0", "10 1"}


def test_example() -> None:
    main()


if __name__ == "__main__":
    main()
