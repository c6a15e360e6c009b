"""The doubled network ``<0|U^dag P U|0>`` of one Pauli term, built for diagonal-gate circuits.

Trotter circuits of Ising-type models (kicked Ising, QAOA) are one-qubit
rotations between layers of diagonal two-qubit gates (``RZZ``, ``CZ``,
``CP``). Three things keep their doubled networks small, and this module
does all three:

1. **Diagonal gates stay diagonal.** One-qubit gates are never folded into a
   diagonal multi-qubit gate
   (:func:`~qsimdist.frontends.one_qubit_fusion.fuse_keeping_diagonals`), and a diagonal
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
3. **Simplification** (:func:`qsimdist.planner.simplify.simplify_within`, the
   :data:`SIMPLIFY_SEQUENCE`, on qsimdist's own passes) then folds what is left, and index
   names are made canonical afterwards, so that networks of the same structure share one
   plan.

The route is priced on what it contracts (:func:`doubled_price`: each term's diagonal
cone of the circuit :func:`doubled_circuit` prepares) and each network planned by
:func:`doubled_plan`; :class:`~qsimdist.engine.expectation.ExpectationEngine` chooses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..frontends.circuit import GateCircuit
from ..frontends.one_qubit_fusion import fuse_keeping_diagonals
from ..hardware import costs
from ..network import Network
from ..network.matrices import is_diagonal
from ..planner.path import PathOptions
from ..planner.plan import Plan, make_plan
from ..planner.simplify import simplify_within
from .batching import plan_batch
from .pauli_terms import PauliTerm
from .router import tn_floor
from .term_networks import state_flops

#: a one-qubit operator is diagonal in this sense (``I`` is never part of a term)
DIAGONAL_OPS = frozenset("IZ01")


def has_diagonal_entanglers(circuit: GateCircuit) -> bool:
    """Whether any multi-qubit gate of ``circuit`` is diagonal."""
    return any(len(g.qubits) > 1 and is_diagonal(g.matrix) for g in circuit.gates)


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
                   limit: int | None, dtype: str, seq: str = SIMPLIFY_SEQUENCE,
                   cone: DiagonalCone | None = None) -> Network:
        """The term's doubled network after the ``seq`` simplification (skipped for a
        network that is cheap as it is and roomy under ``limit``), indices canonical;
        ``cone``: the term's cone where already taken (:meth:`cone`)."""
        net = self.network(qubits, ops, operators, cone)
        simplified = simplify_within(net, seq, limit, dtype)
        return net if simplified is net else canonical_names(simplified)



def doubled_circuit(circuit: GateCircuit, fuse: bool = True,
                    fused: GateCircuit | None = None) -> DoubledCircuit:
    """The circuit the doubled route contracts, prepared once for all terms: ``fused``
    (``circuit`` fused into neighbours, where the caller made it) as it is where no
    entangler of ``circuit`` is diagonal, else ``circuit`` fused keeping diagonals
    (``fuse``) or as it is."""
    if fused is not None and fuse and not has_diagonal_entanglers(circuit):
        return DoubledCircuit.of(fused, False)
    return DoubledCircuit.of(circuit, fuse=fuse)


@dataclass(frozen=True)
class DoubledPrice:
    """The doubled route's price for some terms, made on what it then contracts: each
    term's diagonal cone (:meth:`DoubledCircuit.cone`) of the prepared circuit.

    ``flops``: a state of the cone's qubits through its gates, ket and bra, and the term
    read off it; ``seconds``: those at the tensor-network rate plus the route's floor (the
    router's unit)."""

    cones: tuple[DiagonalCone, ...]
    flops: float
    seconds: float


def doubled_price(prepared: DoubledCircuit, terms: Sequence[PauliTerm]) -> DoubledPrice:
    """The doubled route's :class:`DoubledPrice` for ``terms`` (each with qubits) on
    ``prepared``; the cones are kept for the run."""
    circuit = prepared.circuit
    cones = tuple(prepared.cone(t.qubits, t.ops) for t in terms)
    flops = sum(2 * state_flops(circuit, c.gates, len(c.qubits)) + 8.0 * 2.0 ** len(c.qubits)
                * t.weight for t, c in zip(terms, cones))
    seconds = flops / (8.0 * costs.TN_RATE) + tn_floor(2 * len(circuit.gates), len(terms))
    return DoubledPrice(cones, flops, seconds)


def doubled_plan(net: Network, dtype: str, limit: int | None, opts: PathOptions) -> Plan:
    """The plan of one term's doubled network under ``limit`` (bytes; ``None``: none):
    within a quarter of the limit (:func:`~qsimdist.engine.batching.plan_batch`, so the
    executor's free buffers beside the peak stay within the limit too) where that costs at
    most twice the work; unsliced or costly plans against the whole limit (more slices of
    small networks cost Python time per slice, a costly one's slices cost none)."""
    full = make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts)
    if limit is None or (full.stats.flops / 8 / costs.SEARCH_RATE
                         >= costs.SLICED_RESEARCH_SECONDS):
        return full
    quarter = plan_batch(net, dtype, limit, opts, True)
    return quarter if quarter.stats.flops <= 2 * full.stats.flops else full


__all__ = [
    "DIAGONAL_OPS",
    "SIMPLIFY_SEQUENCE",
    "DoubledCircuit",
    "DiagonalCone",
    "canonical_names",
    "diagonal_doubled_network",
    "DoubledPrice",
    "diagonal_light_cone",
    "doubled_circuit",
    "doubled_plan",
    "doubled_price",
    "has_diagonal_entanglers",
]
