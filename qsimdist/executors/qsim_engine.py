"""The statevector route on Google's qsim (``qsimcirq``, the optional ``qsim`` extra).

qsim applies fused gates with hand-vectorised kernels on every core; on
qsim's own ``circuit_q24`` it ran 4x faster than qsimdist's compiled kernel
(BENCHMARKS.md section 22). It computes in single precision only, so the
router takes it for ``complex64`` requests where it is installed and
predicted faster (``QSIMDIST_STATEVECTOR_ENGINE`` chooses by hand).

The gates (already fused by :func:`qsimdist.frontends.fusion.fuse`) are
handed over as ``cirq.MatrixGate`` operations. Qubit ``q`` becomes
``cirq.LineQubit(n - 1 - q)``: cirq's state index is big-endian over its
sorted qubits, so the returned vector is in Qiskit's order (bit ``q`` of the
index is qubit ``q``) with no copy. Gates are taken by duck typing
(``.matrix`` big-endian over ``.qubits``), as in :mod:`.statevector`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from .._optional import require

#: the widest gate qsim applies (wider gates keep qsimdist's own kernel)
MAX_GATE_QUBITS = 6
#: qsim's own fusion width on top of qsimdist's (3 ran fastest on circuit_q24: 1.9 s,
#: against 3.1 s at 2 and 2.3 s at 4)
FUSED_GATE_QUBITS = 3


def threads() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def simulate(n_qubits: int, gates: Iterable, global_phase: float = 0.0) -> np.ndarray:
    """The state ``U|0...0>`` (complex64, flat, Qiskit's order, global phase included)."""
    cirq = require("cirq")
    qsimcirq = require("qsimcirq")
    line = [cirq.LineQubit(n_qubits - 1 - q) for q in range(n_qubits)]
    ops = []
    for g in gates:
        qubits = [line[int(q)] for q in g.qubits]
        ops.append(cirq.MatrixGate(np.asarray(g.matrix, dtype=np.complex128),
                                   qid_shape=(2,) * len(qubits)).on(*qubits))
    circuit = cirq.Circuit(ops, strategy=cirq.InsertStrategy.EARLIEST)
    options = qsimcirq.QSimOptions(cpu_threads=threads(), max_fused_gate_size=FUSED_GATE_QUBITS)
    # (params, state, qubit order); the state is qsim's own buffer, not a copy of it
    _, state, _ = qsimcirq.QSimSimulator(options).simulate_into_1d_array(
        circuit, qubit_order=cirq.LineQubit.range(n_qubits))
    state = np.asarray(state).reshape(-1)
    if state.dtype != np.complex64:
        state = state.astype(np.complex64)
    if global_phase:
        state *= np.complex64(np.exp(1j * global_phase))
    return state
