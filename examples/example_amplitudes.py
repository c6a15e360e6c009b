"""Amplitudes of a Qiskit circuit through qsimdist, checked against Qiskit's Statevector.

Run: python examples/example_amplitudes.py
"""

from __future__ import annotations

import numpy as np
from qiskit import QuantumCircuit
from qiskit.quantum_info import Statevector

import qsimdist


def main() -> None:
    qc = QuantumCircuit(5)
    qc.h(0)
    for q in range(4):
        qc.cx(q, q + 1)
    qc.rz(0.3, 2)
    qc.global_phase = 0.5

    # One batched contraction: '*' leaves qubits open (rightmost character = qubit 0).
    res = qsimdist.amplitudes(qc, ["1*1*1", "00000"], dtype="complex128")
    sv = Statevector(qc).data
    for bitstring, amp in res.items():
        print(f"{bitstring}  {amp:.6f}")
        assert abs(amp - sv[int(bitstring, 2)]) < 1e-12

    # A plan is plain data: inspect it, save it, run it later.
    plan = qsimdist.plan(qc, bitstrings="*****", dtype="complex128")
    print(plan.summary())
    assert np.allclose(plan.execute().reshape(-1), sv, atol=1e-12)


def test_example() -> None:
    main()


if __name__ == "__main__":
    main()
