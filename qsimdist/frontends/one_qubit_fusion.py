"""One-qubit folding for the tensor-network routes: no gate is widened beyond its own
qubits (a wider gate is a bigger tensor), so the light cone is unchanged.

:func:`fuse_single_qubit_gates` (sampling) folds each run of one-qubit gates into the
next multi-qubit gate on its wire and leaves what trails a wire as one product gate;
:func:`fuse_into_neighbours` (expectation values) also folds trailing runs into the
previous multi-qubit gate and multiplies a multi-qubit gate into the one directly
before it on the same qubits; :func:`fuse_keeping_diagonals` (the doubled route) does
the same but never folds a non-diagonal run into a diagonal gate, so diagonal gates
stay diagonal. The statevector route's block fusion is :mod:`qsimdist.frontends.fusion`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..network.matrices import is_diagonal
from .circuit import Gate, GateCircuit


def fuse_single_qubit_gates(circuit: GateCircuit) -> GateCircuit:
    """The same unitary with every run of one-qubit gates folded into a neighbouring gate.

    One-qubit gates before a multi-qubit gate on their wire are multiplied into
    it; what remains at the end of a wire stays one (product) gate, appended
    after the multi-qubit gates. No gate acts on more qubits than before, so
    the light cone is unchanged. Every multi-qubit gate is named ``fused``.
    """
    pending: dict[int, np.ndarray] = {}
    out = GateCircuit(circuit.n_qubits, global_phase=circuit.global_phase, name=circuit.name)
    for g in circuit.gates:
        if len(g.qubits) == 1:
            q = g.qubits[0]
            pending[q] = g.matrix @ pending[q] if q in pending else g.matrix
            continue
        folded = None
        for q in g.qubits:  # each waiting one-qubit gate by one broadcast 2x2 product
            b = pending.pop(q, None)
            if b is not None:
                folded = apply_one_qubit(folded or Gate(g.matrix, g.qubits), q, b, before=True)
        m = g.matrix if folded is None else folded.matrix
        out.gates.append(dataclasses.replace(g, matrix=m, name="fused"))
    for q, m in pending.items():
        out.gates.append(dataclasses.replace(circuit.gates[0], matrix=m, qubits=(q,),
                                             name="fused"))
    return out


def apply_one_qubit(gate: Gate, qubit: int, matrix: np.ndarray, before: bool,
                    name: str | None = None) -> Gate:
    """``gate`` with the one-qubit ``matrix`` on ``qubit`` applied before (or after) it
    (named ``name``, default the gate's own), by one broadcast 2x2 product."""
    k = len(gate.qubits)
    pos = gate.qubits.index(qubit)
    d, left = 1 << k, 1 << pos
    right = d // (2 * left)
    g = gate.matrix
    if before:  # G @ (1 x m x 1): the columns' bit ``pos`` is mixed by m's transpose
        out = np.matmul(matrix.T, g.reshape(d * left, 2, right))
    else:  # (1 x m x 1) @ G: the rows' bit ``pos`` is mixed by m
        out = np.matmul(matrix, g.reshape(left, 2, right * d))
    return Gate(out.reshape(d, d), gate.qubits, gate.name if name is None else name)


def matrix_over(gate: Gate, qubits: tuple[int, ...]) -> np.ndarray:
    """``gate``'s matrix over the same qubits listed in the order ``qubits``."""
    k = len(qubits)
    perm = [gate.qubits.index(q) for q in qubits]
    t = gate.matrix.reshape((2,) * (2 * k)).transpose(perm + [k + p for p in perm])
    return t.reshape(2**k, 2**k)


def fuse_into_neighbours(circuit: GateCircuit) -> GateCircuit:
    """An equal circuit with one-qubit gates folded into multi-qubit neighbours.

    Each one-qubit gate joins the next multi-qubit gate on its qubit (or, after
    the last one, the previous); a multi-qubit gate directly following another
    on the same set of qubits is multiplied into it. Which gates merge depends
    on the qubits only, never on the matrices, so every binding of a
    parametrised circuit fuses to the same structure. Merged multi-qubit
    gates are named ``fused``; the others keep their names.
    """
    pending: dict[int, np.ndarray] = {}  # one-qubit product waiting on each qubit
    out: list[Gate | None] = []
    last: dict[int, int] = {}  # qubit -> position in ``out`` of its latest gate
    for g in circuit.gates:
        if len(g.qubits) == 1:
            q = g.qubits[0]
            pending[q] = g.matrix @ pending[q] if q in pending else g.matrix
            continue
        gate = g
        for q in g.qubits:
            m = pending.pop(q, None)
            if m is not None:
                gate = apply_one_qubit(gate, q, m, before=True)
        prev = {last.get(q) for q in g.qubits}
        if len(prev) == 1 and None not in prev:
            j = prev.pop()
            earlier = out[j]
            if earlier is not None and set(earlier.qubits) == set(g.qubits):
                out[j] = Gate(gate.matrix @ matrix_over(earlier, gate.qubits), gate.qubits,
                              "fused")
                continue
        out.append(gate)
        for q in g.qubits:
            last[q] = len(out) - 1
    for q, m in pending.items():
        j = last.get(q)
        if j is None:
            out.append(Gate(m, (q,), "fused"))
        else:
            out[j] = apply_one_qubit(out[j], q, m, before=False)
    fused = GateCircuit(circuit.n_qubits, global_phase=circuit.global_phase, name=circuit.name)
    fused.gates = [g for g in out if g is not None]
    return fused


def fuse_keeping_diagonals(circuit: GateCircuit) -> GateCircuit:
    """An equal circuit with one-qubit gates folded into their neighbours, diagonals kept.

    Like :func:`fuse_into_neighbours`, a run of
    one-qubit gates joins the next multi-qubit gate on its qubit (after the last
    one, the previous), but never a diagonal multi-qubit gate unless the run is
    diagonal too: there it stays a one-qubit gate, so the diagonal gate remains
    diagonal (a hyper-index in the network). Consecutive multi-qubit gates on the
    same qubits are multiplied together when both are diagonal or both are not.
    """
    pending: dict[int, np.ndarray] = {}
    out: list[Gate] = []
    diag: list[bool] = []
    last: dict[int, int] = {}

    def emit(gate: Gate, is_diag: bool) -> None:
        out.append(gate)
        diag.append(is_diag)
        for q in gate.qubits:
            last[q] = len(out) - 1

    for g in circuit.gates:
        if len(g.qubits) == 1:
            q = g.qubits[0]
            pending[q] = g.matrix @ pending[q] if q in pending else g.matrix
            continue
        gate, g_diag = g, is_diagonal(g.matrix)
        for q in g.qubits:
            m = pending.pop(q, None)
            if m is None:
                continue
            if not g_diag or is_diagonal(m):
                gate = apply_one_qubit(gate, q, m, before=True, name="fused")
            else:
                emit(Gate(m, (q,), "fused"), False)
        prev = {last.get(q) for q in g.qubits}
        if len(prev) == 1 and None not in prev:
            j = prev.pop()
            earlier = out[j]
            if set(earlier.qubits) == set(g.qubits) and diag[j] == g_diag:
                out[j] = Gate(gate.matrix @ matrix_over(earlier, gate.qubits), gate.qubits,
                              "fused")
                continue
        emit(gate, g_diag)
    for q, m in pending.items():
        j = last.get(q)
        if j is None or (diag[j] and not is_diagonal(m)):
            emit(Gate(m, (q,), "fused"), is_diagonal(m))
        else:
            out[j] = apply_one_qubit(out[j], q, m, before=False, name="fused")
    fused = GateCircuit(circuit.n_qubits, global_phase=circuit.global_phase, name=circuit.name)
    fused.gates = out
    return fused
