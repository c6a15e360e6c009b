"""The doubled network ``<0|U^dag P U|0>`` of one Pauli term, built for diagonal-gate circuits.

Trotter circuits of Ising-type models (kicked Ising, QAOA) are one-qubit
rotations between layers of diagonal two-qubit gates (``RZZ``, ``CZ``,
``CP``). Three things keep their doubled networks small, and this module
does all three:

1. **Diagonal gates stay diagonal.** One-qubit gates are never folded into a
   diagonal multi-qubit gate (:func:`fuse_keeping_diagonals`), and a diagonal
   gate is built as a tensor on the *current* index of each of its qubits
   (a hyper-index joins the gates before and after it), not as a dense
   ``2^k x 2^k`` block.
2. **A light cone that knows diagonal gates commute** (:func:`diagonal_light_cone`).
   Walking the gates backwards, the Heisenberg-picture operator is tracked
   with the set ``D`` of qubits on which it is block-diagonal in the
   computational basis. A diagonal gate whose qubits all lie in ``D`` or
   outside the cone commutes with that operator and cancels against its
   adjoint, even when it touches the cone. The plain light cone keeps every
   gate touching the cone, so it keeps the last ``RZZ`` layer around a ``Z``
   and, within one commuting layer, gates that only reach the cone through
   gates listed after them.
3. **Simplification** (:func:`qsimdist.planner.simplify.simplify`, the ``ADCRS``
   sequence, on qsimdist's own passes) then folds what is left, and index names are made
   canonical afterwards, so that networks of the same structure share one plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..frontends.circuit import Gate, GateCircuit
from ..frontends.one_qubit_fusion import apply_one_qubit, matrix_over
from ..network import Network
from ..network.matrices import is_diagonal

#: a one-qubit operator is diagonal in this sense (``I`` is never part of a term)
DIAGONAL_OPS = frozenset("IZ01")


def has_diagonal_entanglers(circuit: GateCircuit) -> bool:
    """Whether any multi-qubit gate of ``circuit`` is diagonal."""
    return any(len(g.qubits) > 1 and is_diagonal(g.matrix) for g in circuit.gates)


def fuse_keeping_diagonals(circuit: GateCircuit) -> GateCircuit:
    """An equal circuit with one-qubit gates folded into their neighbours, diagonals kept.

    Like :func:`~qsimdist.frontends.one_qubit_fusion.fuse_into_neighbours`, a run of
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


@dataclass(frozen=True)
class DiagonalCone:
    """The gates (ascending positions) a term's doubled network needs, and which are diagonal."""

    gates: tuple[int, ...]
    diagonal: tuple[bool, ...]
    qubits: tuple[int, ...]


def diagonal_light_cone(circuit: GateCircuit, qubits: Sequence[int], ops: str,
                        diagonal: Sequence[bool] | None = None) -> DiagonalCone:
    """The backward light cone of a term (``ops[j]`` on ``qubits[j]``) that drops commuting
    diagonal gates (see the module docstring).

    ``diagonal[k]``: whether gate ``k`` is diagonal (computed when not given).
    Invariant, walking back from the end: the operator ``U_after^dag P U_after`` acts
    as the identity outside ``cone`` and is block-diagonal in the computational basis of
    the qubits in ``diag``. A diagonal gate on qubits within ``diag`` or outside ``cone``
    commutes with it and cancels; a kept diagonal gate adds its new qubits to ``diag``;
    a kept non-diagonal gate takes its qubits out of ``diag``.
    """
    if diagonal is None:
        diagonal = [is_diagonal(g.matrix) for g in circuit.gates]
    cone = {int(q) for q in qubits}
    diag = {int(q) for q, op in zip(qubits, ops) if op in DIAGONAL_OPS}
    kept: list[int] = []
    for k in range(len(circuit.gates) - 1, -1, -1):
        qs = circuit.gates[k].qubits
        if cone.isdisjoint(qs):
            continue
        if diagonal[k]:
            if all(q in diag or q not in cone for q in qs):
                continue
            diag.update(q for q in qs if q not in cone)
        else:
            diag.difference_update(qs)
        cone.update(qs)
        kept.append(k)
    kept.reverse()
    return DiagonalCone(tuple(kept), tuple(bool(diagonal[k]) for k in kept),
                        tuple(sorted(cone)))


def doubled_structure(circuit: GateCircuit, qubits: Sequence[int], cone: DiagonalCone) -> tuple:
    """The network's structure in local qubit numbers: what a plan depends on before
    simplification (simplification may still depend on the values)."""
    local = {q: j for j, q in enumerate(cone.qubits)}
    return (len(local), tuple(local[q] for q in qubits),
            tuple((tuple(local[q] for q in circuit.gates[k].qubits), d)
                  for k, d in zip(cone.gates, cone.diagonal)))


def diagonal_doubled_network(circuit: GateCircuit, qubits: Sequence[int], ops: str,
                             cone: DiagonalCone, operators: dict[str, np.ndarray]) -> Network:
    """The doubled network of the term on the gates of ``cone``, diagonal gates as tensors
    on their qubits' current indices (hyper-indices); ``operators[c]``: the 2x2 matrix of
    label character ``c``.

    Ket indices are ``k{j}.{layer}``, bra indices ``b{j}.{layer}`` (``j``: rank in the
    cone); a diagonal gate does not start a new layer. On a cone qubit outside the term's
    support the ket's and the bra's last indices are one index. A diagonal operator of the
    term joins its qubit's ket and bra last indices too (as a vector on that one index).
    """
    local = {q: j for j, q in enumerate(cone.qubits)}
    n = len(local)
    layers = [0] * n
    for k, d in zip(cone.gates, cone.diagonal):
        if not d:
            for q in circuit.gates[k].qubits:
                layers[local[q]] += 1
    op_of = {local[q]: c for q, c in zip(qubits, ops)}

    def ket(j: int, layer: int) -> str:
        return f"k{j}.{layer}"

    def bra(j: int, layer: int) -> str:
        if layer == layers[j] and (j not in op_of or is_diagonal(operators[op_of[j]])):
            return ket(j, layer)
        return f"b{j}.{layer}"

    zero = np.array([1.0, 0.0], dtype=complex)
    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    for j in range(n):
        inputs += [(ket(j, 0),), (bra(j, 0),)]
        arrays += [zero, zero]
    at = [0] * n
    for k, d in zip(cone.gates, cone.diagonal):
        g = circuit.gates[k]
        qs = [local[q] for q in g.qubits]
        shape = (2,) * len(qs)
        if d:
            values = np.diagonal(g.matrix).reshape(shape)
            inputs.append(tuple(ket(j, at[j]) for j in qs))
            arrays.append(values)
            inputs.append(tuple(bra(j, at[j]) for j in qs))
            arrays.append(values.conj())
            continue
        ins = [at[j] for j in qs]
        for j in qs:
            at[j] += 1
        shape = shape * 2
        inputs.append((*(ket(j, at[j]) for j in qs), *(ket(j, i) for j, i in zip(qs, ins))))
        arrays.append(g.matrix.reshape(shape))
        inputs.append((*(bra(j, at[j]) for j in qs), *(bra(j, i) for j, i in zip(qs, ins))))
        arrays.append(g.matrix.conj().reshape(shape))
    for j, c in op_of.items():
        m = operators[c]
        if is_diagonal(m):
            inputs.append((ket(j, layers[j]),))
            arrays.append(np.diagonal(m).copy())
        else:  # <y|P|x>: the bra's index is the row, the ket's the column
            inputs.append((bra(j, layers[j]), ket(j, layers[j])))
            arrays.append(m)
    size_dict = {i: 2 for t in inputs for i in t}
    # built here index by index, each array shaped by its indices: not checked again
    return Network.unchecked(inputs, (), size_dict, arrays,
                             meta={"n_qubits": n, "name": f"{circuit.name}:expectation"})


def canonical_names(net: Network) -> Network:
    """``net`` with its indices renamed ``i0, i1, ...`` in order of first appearance, so
    that equal structures reached by different routes (quimb's random names) are equal."""
    names: dict[str, str] = {}
    for t in net.inputs:
        for i in t:
            if i not in names:
                names[i] = f"i{len(names)}"
    inputs = [tuple(names[i] for i in t) for t in net.inputs]
    output = tuple(names[i] for i in net.output)
    size_dict = {names[i]: s for i, s in net.size_dict.items() if i in names}
    # a renaming of a valid network is valid: not checked again
    return Network.unchecked(inputs, output, size_dict, net.arrays, dict(net.meta))


#: the simplification sequence for doubled networks (quimb's letters; the sequence
#: quimb's own ``Circuit.local_expectation`` uses)
SIMPLIFY_SEQUENCE = "ADCRSE"


@dataclass(frozen=True)
class DoubledCircuit:
    """A circuit prepared once for many terms: fused keeping diagonals, each gate's diagonality."""

    circuit: GateCircuit
    diagonal: tuple[bool, ...]

    @classmethod
    def of(cls, circuit: GateCircuit, fuse: bool = True) -> DoubledCircuit:
        fused = fuse_keeping_diagonals(circuit) if fuse else circuit
        return cls(fused, tuple(is_diagonal(g.matrix) for g in fused.gates))

    def cone(self, qubits: Sequence[int], ops: str) -> DiagonalCone:
        return diagonal_light_cone(self.circuit, qubits, ops, self.diagonal)

    def network(self, qubits: Sequence[int], ops: str, operators: dict[str, np.ndarray],
                cone: DiagonalCone | None = None) -> Network:
        """The term's doubled network as built (not simplified), indices named canonically."""
        cone = cone or self.cone(qubits, ops)
        net = diagonal_doubled_network(self.circuit, qubits, ops, cone, operators)
        return canonical_names(net)

    def simplified(self, qubits: Sequence[int], ops: str, operators: dict[str, np.ndarray], *,
                   limit: int | None, dtype: str, seq: str = SIMPLIFY_SEQUENCE) -> Network:
        """The term's doubled network after the ``seq`` simplification (skipped for a
        network that is cheap as it is and roomy under ``limit``), indices canonical."""
        from .amplitudes import simplify_within

        net = self.network(qubits, ops, operators)
        simplified = simplify_within(net, seq, limit, dtype)
        return net if simplified is net else canonical_names(simplified)


__all__ = [
    "DIAGONAL_OPS",
    "SIMPLIFY_SEQUENCE",
    "DoubledCircuit",
    "DiagonalCone",
    "canonical_names",
    "diagonal_doubled_network",
    "diagonal_light_cone",
    "doubled_structure",
    "fuse_keeping_diagonals",
    "has_diagonal_entanglers",
]
