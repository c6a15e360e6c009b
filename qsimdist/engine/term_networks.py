"""The tensor networks of Pauli terms: doubled light-cone networks and light-cone states.

For a term ``P`` acting on the qubits ``S``, the value is the contraction of
the *doubled* network: the circuit ``U`` on ``|0...0>`` (ket), the term's
one-qubit operators on ``S``, and the complex conjugate of ``U`` on
``<0...0|`` (bra). A gate that cannot reach ``S`` (outside the backward light
cone of ``S``) meets its own adjoint and cancels, so only the gates in the
light cone are built, and qubits outside it are left out altogether. Local
observables of wide, shallow circuits are therefore cheap: ``<Z_i Z_{i+1}>``
of a depth-4 brickwork circuit on 50 qubits involves at most 8 qubits.

Before the light cone is taken, one-qubit gates are fused into the
neighbouring multi-qubit gate on their qubit (and consecutive gates on the
same qubits are multiplied together). The doubled route
(:mod:`qsimdist.engine.doubled`) never folds a one-qubit gate into a diagonal
gate: diagonal gates stay diagonal (tensors on hyper-indices), its light cone
drops diagonal gates that commute with the term's Heisenberg-picture operator,
and the ``ADCRS`` simplification runs on networks that are not cheap as
built. Plans are keyed by the network finally contracted.

The network of a term is named by *local* qubit positions (rank within the
light cone), so terms whose light cones are translates of each other (the
interior ``Z_i Z_{i+1}`` of a brickwork circuit) build the same network up
to its arrays and share one :class:`~qsimdist.planner.plan.Plan`: the path
is searched once per structure, and later terms, other parameter values and
other observables reuse it with new arrays (``dataclasses.replace(plan,
network=...)``). An :class:`~qsimdist.engine.expectation.ExpectationEngine` keeps
those plans between calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..frontends import GateCircuit
from ..network import Network
from .pauli_terms import SINGLE_QUBIT_OPERATORS, PauliTerm


def _structure(circuit: GateCircuit, term: PauliTerm, kept: Sequence[int]) -> tuple:
    """The term's network structure in local qubit numbers (rank within the light cone)."""
    cone = set(term.qubits)
    for k in kept:
        cone.update(circuit.gates[k].qubits)
    local = {q: j for j, q in enumerate(sorted(cone))}
    return (
        len(local),
        tuple(local[q] for q in term.qubits),
        tuple(tuple(local[q] for q in circuit.gates[k].qubits) for k in kept),
    )


def expectation_network(circuit: GateCircuit, term: PauliTerm,
                        kept: Sequence[int] | None = None) -> Network:
    """The doubled network whose contraction is ``<0|U^dag P U|0>`` (light cone only).

    Ket indices are ``k{j}.{layer}``, bra indices ``b{j}.{layer}``, with ``j``
    the qubit's rank in the light cone; on a light-cone qubit outside the
    term's support the ket's and the bra's last indices are one index (the
    identity). The global phase cancels and is not built.
    """
    if kept is None:
        kept = circuit.light_cone(term.qubits).gates
    n_local, support, gate_qubits = _structure(circuit, term, kept)
    layers = [0] * n_local
    for qs in gate_qubits:
        for j in qs:
            layers[j] += 1
    in_support = set(support)

    def ket(j: int, layer: int) -> str:
        return f"k{j}.{layer}"

    def bra(j: int, layer: int) -> str:
        if layer == layers[j] and j not in in_support:
            return ket(j, layer)
        return f"b{j}.{layer}"

    zero = np.array([1.0, 0.0], dtype=complex)
    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    for j in range(n_local):
        inputs.append((ket(j, 0),))
        arrays.append(zero)
        inputs.append((bra(j, 0),))
        arrays.append(zero)
    at = [0] * n_local
    for k, qs in zip(kept, gate_qubits):
        g = circuit.gates[k]
        shape = (2,) * (2 * len(qs))
        ins = [at[j] for j in qs]
        for j in qs:
            at[j] += 1
        inputs.append((*(ket(j, at[j]) for j in qs), *(ket(j, i) for j, i in zip(qs, ins))))
        arrays.append(g.matrix.reshape(shape))
        inputs.append((*(bra(j, at[j]) for j in qs), *(bra(j, i) for j, i in zip(qs, ins))))
        arrays.append(g.matrix.conj().reshape(shape))
    for j, op in zip(support, term.ops):
        # <y|P|x>: the bra's index is the row, the ket's the column
        inputs.append((bra(j, layers[j]), ket(j, layers[j])))
        arrays.append(SINGLE_QUBIT_OPERATORS[op])
    size_dict = {i: 2 for term_inds in inputs for i in term_inds}
    return Network(inputs, (), size_dict, arrays,
                   meta={"n_qubits": n_local, "name": f"{circuit.name}:expectation"})


def state_network(circuit: GateCircuit, qubits: Sequence[int],
                  kept: Sequence[int]) -> Network:
    """The single-layer network of ``U|0...0>`` on ``qubits`` (gates ``kept``), all left open.

    ``qubits`` must hold every qubit of the ``kept`` gates. Indices are named by
    local position as in :func:`expectation_network`; output axis ``j`` is
    ``sorted(qubits)[j]``. The global phase is not built (it cancels in every
    expectation value).
    """
    local = {q: j for j, q in enumerate(sorted(qubits))}
    zero = np.array([1.0, 0.0], dtype=complex)
    inputs: list[tuple[str, ...]] = [(f"k{j}.0",) for j in range(len(local))]
    arrays: list[np.ndarray] = [zero] * len(local)
    at = [0] * len(local)
    for k in kept:
        g = circuit.gates[k]
        qs = [local[q] for q in g.qubits]
        ins = [f"k{j}.{at[j]}" for j in qs]
        for j in qs:
            at[j] += 1
        inputs.append((*(f"k{j}.{at[j]}" for j in qs), *ins))
        arrays.append(g.matrix.reshape((2,) * (2 * len(qs))))
    output = tuple(f"k{j}.{at[j]}" for j in range(len(local)))
    size_dict = {i: 2 for term_inds in inputs for i in term_inds}
    return Network(inputs, output, size_dict, arrays,
                   meta={"n_qubits": len(local), "name": f"{circuit.name}:state"})


def state_flops(circuit: GateCircuit, kept: Iterable[int], n_qubits: int) -> float:
    """Predicted FLOPs of applying the gates ``kept`` to a state of ``n_qubits`` qubits."""
    return sum(8.0 * 2.0 ** (n_qubits + len(circuit.gates[k].qubits)) for k in kept)


def cone_gates_at_least(circuit: GateCircuit, terms: Sequence[PauliTerm]) -> int:
    """The router's floor for the tensor-network methods of ``terms``: the multi-qubit
    gates in the plain light cone of the term on the most qubits (every method contracts
    at least one term's cone, and fusing one-qubit gates into neighbours keeps every
    multi-qubit gate; the doubled method's diagonal-aware cone can be smaller, but where
    the statevector costs less than this floor it is cheap either way)."""
    widest = max(terms, key=lambda t: len(t.qubits))
    kept = circuit.light_cone(widest.qubits).gates
    return max(sum(1 for k in kept if len(circuit.gates[k].qubits) > 1), 1)


__all__ = [
    "cone_gates_at_least",
    "expectation_network",
    "state_flops",
    "state_network",
]
