"""The record of a route: what a request took and the predictions it was chosen on.

:class:`Route` goes into every result's metadata (``to_dict()``); the router
(:mod:`qsimdist.engine.router`) makes it. :class:`DynamicRoute` is a dynamic circuit's
(:func:`~qsimdist.engine.router.route_dynamic`): trajectories or the deferred-measurement
circuit, with the widths and the memory bound it was decided under.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """The route a request takes and the predictions it was chosen on.

    ``method`` is ``"statevector"`` (apply the fused gates to the full state in
    circuit order, then read what is asked from the state) or a tensor-network
    method: ``"tensor-network"`` for amplitudes; for sampling and expectation
    values the tensor-network method's own name (``marginal``, ``chain``,
    ``doubled``, ...). ``executor`` is ``local`` or ``mpi``. Predicted seconds
    use the cost model's constants, not a clock (labelled predicted wherever
    shown); ``None`` where not estimated.
    """

    method: str
    reason: str
    statevector_seconds: float | None = None
    tensor_network_seconds: float | None = None
    statevector_bytes: int | None = None
    fusion_width: int | None = None
    executor: str = "local"
    #: what runs a statevector route: ``qsimdist`` (its own kernels) or ``qsim``
    engine: str | None = None
    #: qsimdist's kernel: ``compiled`` (in place, numba) or ``numpy`` (a GEMM per gate)
    kernel: str | None = None
    #: predicted seconds of the stabilizer route (Clifford circuits with stim; ``None``:
    #: not a Clifford circuit, or not priced)
    stabilizer_seconds: float | None = None

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # scalars


@dataclass(frozen=True)
class DynamicRoute(Route):
    """A dynamic circuit's route (:func:`~qsimdist.engine.router.route_dynamic`).

    ``method`` is ``"trajectory"`` (the circuit's own qubits' state, branch by branch) or
    ``"deferred-measurement"`` (the lowered circuit, whose own route is then priced as any
    circuit's). ``statevector_seconds`` prices the deferred-measurement circuit's
    statevector run (``None``: wider than a statevector is priced), ``statevector_bytes``
    the trajectories' working states.
    """

    #: predicted seconds of one trajectory
    trajectory_seconds: float | None = None
    #: the circuit's qubits and the deferred-measurement circuit's
    qubits: int | None = None
    lowered_qubits: int | None = None
    #: the call's memory bound the route was decided under (``None``: unbounded)
    memory_bound: int | None = None
    #: states the trajectories may keep beside their working ones within that bound
    states_kept: int | None = None


__all__ = ["DynamicRoute", "Route"]
