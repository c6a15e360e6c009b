"""What the router weighs for a dynamic circuit: its trajectories' price, the deferred-
measurement circuit's, and the memory the trajectories hold.

:func:`~qsimdist.engine.router.route_dynamic` decides between the two routes of a circuit
with mid-circuit measurements, resets or classical control, for the sampler (shots, the
tree of :mod:`qsimdist.engine.tree_sampling`) and the estimator (Pauli terms,
:mod:`qsimdist.engine.trajectory_values`) alike:

- **trajectory**: the circuit's own ``n``-qubit state, branch by branch
  (:mod:`qsimdist.engine.trajectory`);
- **deferred-measurement**: the lowered circuit
  (:func:`~qsimdist.frontends.lowering.lower_circuit`, one more qubit per branch
  point), routed then as any circuit (statevector, tensor network, stabilizer).

Both are priced here by the statevector cost model's constants
(:mod:`qsimdist.hardware.costs`), predicted (:class:`TrajectoryPrices`). The
thresholds below are this route's behaviour, kept beside its prices; the memory is
the call's budget (:attr:`RunOptions.memory <qsimdist.engine.options.RunOptions.memory>`),
resolved once when the door was built and never read again mid-run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..frontends.dynamic import GATE, MEASURE, RESET
from ..hardware import costs

if TYPE_CHECKING:
    from .options import RunOptions
    from .trajectory import TrajectoryProgram

#: set False to run every dynamic circuit on its lowered (deferred-measurement) form
ENABLED = True
#: widest circuit taken as trajectories (wider ones keep the lowered circuit's routes)
MAX_QUBITS = 24
#: the states a trajectory run may hold at once beside its cache (current state, the
#: copy it came from, a reader's buffers)
WORK_STATES = 4
#: most bytes of states kept between branch prefixes
CACHE_BYTES = 512 << 20
#: shots: the tree is tried where one trajectory is predicted at most this share of the
#: deferred-measurement circuit's run (a tree has up to one leaf per shot)
TRY_SHARE = 0.25
#: shots: the tree is abandoned once its predicted work passes this share of that run
ABANDON_SHARE = 1.0
#: terms: trajectories are taken where one is predicted at most this share of the
#: deferred-measurement circuit's run (each element follows one trajectory, a branch
#: prefix met before is read from the cache)
TERMS_SHARE = 1.0
#: the widest lowered circuit priced as a statevector (wider: the lowered route is a tensor
#: network, priced as unbounded here)
LOWERED_STATEVECTOR_QUBITS = 32
#: bytes per amplitude of a trajectory's state (complex128)
STATE_ITEMSIZE = 16


class TrajectoryPrices:
    """Predicted seconds of a program's trajectories and of its deferred-measurement
    circuit (the statevector cost model's constants), the state halving after each
    measurement that drops its qubit.

    Attributes:
        n: the circuit's qubits.
        cum: ``cum[i]``: ops ``[:i]`` of the program, their gates and branch points.
        leaf: reading the measured qubits' marginal off a finished trajectory.
        one: one trajectory from start to leaf.
        lowered_qubits: the sampler's deferred-measurement circuit's qubits; for the
            estimator's (every branch point a qubit) ``collapsed_qubits``.
    """

    def __init__(self, program: TrajectoryProgram) -> None:
        over = costs.GATE_OVERHEAD_SECONDS
        self.program = program
        self.n = width = program.n
        self.lowered_qubits = program.lowered_qubits
        self.collapsed_qubits = program.collapsed_qubits
        self.cum = [0.0]
        for op in program.ops:
            size = float(1 << width)
            step = 0.0
            if op[0] == GATE:  # a segment
                dense = over + costs.DENSE_SECONDS_PER_ELEMENT * size
                diagonal = over + costs.DIAGONAL_SECONDS_PER_ELEMENT * size
                step = sum(diagonal if g[0] == "diagonal" else dense
                           for g in program.segments[op[2]])
            elif op[0] in (MEASURE, RESET):  # reading p0 and projecting: two passes
                step = over + 2 * costs.MARGINAL_SECONDS_PER_ELEMENT * size
                if op[0] == MEASURE and op[5] and width > 1:
                    width -= 1
            self.cum.append(self.cum[-1] + step)
        self.leaf = over + costs.MARGINAL_SECONDS_PER_ELEMENT * float(1 << width)
        self.one = self.cum[-1] + self.leaf

    def between(self, start: int, end: int) -> float:
        """The ops ``start`` (a branch point) to ``end`` (the next one or the end)."""
        return self.cum[end] - self.cum[start]

    @staticmethod
    def copy(node) -> float:
        """Copying a trajectory's state (to take a branch's second outcome later)."""
        return costs.MARGINAL_SECONDS_PER_ELEMENT * float(node.state.size)

    def trajectory(self, shots: bool) -> float:
        """One trajectory: to its leaf's marginal for shots, to its final state for terms
        (both routes read the terms off a final state)."""
        return self.one if shots else self.cum[-1]

    def deferred(self, shots: bool) -> float:
        """The deferred-measurement circuit's statevector run: every gate and two per
        branch point (a copy, a control) on its state; unbounded where that state is wider
        than :data:`LOWERED_STATEVECTOR_QUBITS`."""
        nl = self.lowered_qubits if shots else self.collapsed_qubits
        if nl > LOWERED_STATEVECTOR_QUBITS:
            return math.inf
        program = self.program
        gates = sum(len(seg) for seg in program.segments) + 2 * program.branches
        return gates * (costs.GATE_OVERHEAD_SECONDS
                        + costs.DENSE_SECONDS_PER_ELEMENT * float(1 << nl))


def trajectories_refused(run: RunOptions, method: str, n: int) -> str | None:
    """Why a trajectory route cannot run at all (``None``: it may): the switch, numpy,
    method ``auto`` (a method asked for by name runs on the lowered circuit), one
    process, ``1 <= n <=`` :data:`MAX_QUBITS`, and its working states within the call's
    memory bound. Cheap: asked before a program is compiled."""
    if not ENABLED:
        return "trajectories are switched off (qsimdist.engine.dynamic_prices.ENABLED)"
    if run.backend != "numpy":
        return f"backend {run.backend!r}: trajectories run on numpy"
    if method != "auto":
        return f"method {method!r} asked for: it runs on the deferred-measurement circuit"
    if run.distributed:
        return f"executor {run.executor!r}: trajectories run in one process"
    if not 1 <= n <= MAX_QUBITS:
        return f"{n} qubits: trajectories take 1 to {MAX_QUBITS}"
    if cache_room(n, run.memory.bound) is None:
        from ..config import format_bytes

        return (f"the trajectories' {WORK_STATES} working states "
                f"({format_bytes(working_bytes(n))}) do not fit the memory bound "
                f"({format_bytes(run.memory.bound)})")
    return None


def working_bytes(n: int) -> int:
    """Bytes of the :data:`WORK_STATES` states of ``n`` qubits a trajectory run holds."""
    return WORK_STATES * (STATE_ITEMSIZE << n)


def cache_room(n: int, bound: int | None) -> int | None:
    """Bytes a trajectory route may keep in states beside its :data:`WORK_STATES`
    working ones under a memory bound (``None``: unbounded), at most
    :data:`CACHE_BYTES`; ``None`` where not even the working states fit."""
    need = working_bytes(n)
    if bound is None:
        return CACHE_BYTES
    if need > bound:
        return None
    return min(CACHE_BYTES, bound - need)


def states_kept(n: int, bound: int | None) -> int:
    """How many states of ``n`` qubits may be kept beside the working ones (at least 0)."""
    room = cache_room(n, bound)
    return 0 if room is None else room // (STATE_ITEMSIZE << n)


__all__ = ["ABANDON_SHARE", "CACHE_BYTES", "ENABLED", "LOWERED_STATEVECTOR_QUBITS", "MAX_QUBITS",
           "TERMS_SHARE", "TRY_SHARE", "WORK_STATES", "TrajectoryPrices", "cache_room",
           "states_kept", "trajectories_refused", "working_bytes"]
