"""Qiskit's estimator interface on qsimdist: a parameter sweep and a 60-qubit local observable.

Run: python examples/example_qiskit_estimator.py
"""

from __future__ import annotations

import numpy as np
from qiskit import QuantumCircuit
from qiskit.circuit import Parameter
from qiskit.primitives import StatevectorEstimator
from qiskit.quantum_info import SparsePauliOp, Statevector

from qsimdist.qiskit import EstimatorV2


def main() -> None:
    # A parametrised circuit, three observables (shape (3, 1)) against 20 parameter
    # sets (shape (20,)): the result has shape (3, 20), as with StatevectorEstimator.
    a, b = Parameter("a"), Parameter("b")
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.cx(0, 1)
    qc.ry(a, 0)
    qc.rz(b, 0)
    qc.cx(1, 2)
    observables = [[SparsePauliOp(["XXI", "IYZ"], [0.5, 0.5])], ["ZZI"], ["IIX"]]
    params = np.stack([np.linspace(-np.pi, np.pi, 20), np.linspace(0, 2 * np.pi, 20)], axis=1)
    pub = (qc, observables, params)
    ours = EstimatorV2().run([pub]).result()[0]
    ref = StatevectorEstimator().run([pub]).result()[0]
    print("shape", ours.data.evs.shape, "max deviation",
          float(np.max(np.abs(ours.data.evs - ref.data.evs))))
    assert ours.data.evs.shape == ref.data.evs.shape == (3, 20)
    assert np.allclose(ours.data.evs, ref.data.evs, atol=1e-10)

    # 60 qubits, depth 3: each <Z_i Z_{i+1}> needs only the gates in its light cone
    # (at most 8 qubits), and translated light cones share one contraction plan.
    n = 60
    wide = QuantumCircuit(n)
    theta = np.random.default_rng(0).uniform(-np.pi, np.pi, (3, n))
    for d in range(3):
        for q in range(n):
            wide.ry(theta[d, q], q)
        for q in range(d % 2, n - 1, 2):
            wide.cz(q, q + 1)
    labels = ["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)]
    estimator = EstimatorV2()
    evs = estimator.run([(wide, labels)]).result()[0].data.evs
    stats = estimator.engine.stats
    print(f"{n - 1} terms, {stats.plans_made} plans made, {stats.plans_reused} reused, "
          f"largest light cone {stats.max_light_cone_qubits} qubits")

    # check <Z_29 Z_30> on the 8 qubits 26..33, which hold its whole light cone
    lo, hi = 26, 33
    sub = QuantumCircuit(hi - lo + 1)
    for inst in wide.data:
        qs = [wide.find_bit(q).index for q in inst.qubits]
        if all(lo <= q <= hi for q in qs):
            sub.append(inst.operation, [q - lo for q in qs])
    local = ["I"] * sub.num_qubits
    local[29 - lo] = local[30 - lo] = "Z"
    exact = Statevector(sub).expectation_value(SparsePauliOp("".join(reversed(local)))).real
    print(f"<Z_29 Z_30> = {evs[29]:.12f} (light-cone state vector: {exact:.12f})")
    assert abs(evs[29] - exact) < 1e-10


def test_example() -> None:
    main()


if __name__ == "__main__":
    main()
