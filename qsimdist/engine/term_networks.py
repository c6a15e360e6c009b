"""The light-cone state of Pauli terms, and what the expectation routes price it by.

For a term ``P`` acting on the qubits ``S``, a gate that cannot reach ``S`` (outside
the backward light cone of ``S``) meets its own adjoint and cancels, so only the gates
in the light cone matter, and qubits outside it are left out altogether. Local
observables of wide, shallow circuits are therefore cheap: ``<Z_i Z_{i+1}>`` of a
depth-4 brickwork circuit on 50 qubits involves at most 8 qubits. The ``state`` method
contracts the union light cone's state once (:func:`state_network`) and reads every
term off it; the doubled network of each term, ``<0|U^dag P U|0>``, is built by
:mod:`qsimdist.engine.doubled`, which keeps diagonal gates diagonal, drops diagonal
gates that commute with the term's Heisenberg-picture operator, and simplifies
networks that are not cheap as built. Plans are keyed by the network finally
contracted.

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
from .pauli_terms import PauliTerm


def state_network(circuit: GateCircuit, qubits: Sequence[int],
                  kept: Sequence[int]) -> Network:
    """The single-layer network of ``U|0...0>`` on ``qubits`` (gates ``kept``), all left open.

    ``qubits`` must hold every qubit of the ``kept`` gates. Indices are named by
    local position (ket index ``k{j}.{layer}``, ``j`` the qubit's rank in ``qubits``);
    output axis ``j`` is ``sorted(qubits)[j]``. The global phase is not built (it cancels in every
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
    "state_flops",
    "state_network",
]
