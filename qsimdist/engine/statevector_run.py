"""The statevector engine's run: a circuit fused, its SWAPs relabelled, applied to ``|0...0>``.

The router (:mod:`qsimdist.engine.router`) prices the statevector route and
names its engine (qsimdist's kernels or qsim), fusion width and kernel in a
:class:`~qsimdist.engine.router.Route`; :func:`final_state` runs it. The
readers of the state (amplitudes, shots, Pauli terms) take the state from here.
"""

from __future__ import annotations

import numpy as np

from ..frontends import GateCircuit
from .router import CircuitCache, Route


def final_state(gc: GateCircuit, dtype: str, route: Route, progress=None,
                work: dict | None = None, cache: CircuitCache | None = None):
    """The statevector engine's run: ``gc`` fused at the route's width, applied to ``|0...0>``.

    Returns ``(state, fused circuit, seconds spent fusing)``; the state is flat in
    Qiskit's order (:func:`qsimdist.executors.statevector.simulate`, which puts its
    spare buffer in ``work``). ``cache``: the router's, whose block structure at the
    route's width is fused from where the circuit has no SWAP to relabel.
    """
    import time

    from ..executors import run_dtype, simulate
    from ..frontends.fusion import absorb_swaps, diagonal_flags, fuse

    t0 = time.perf_counter()
    if route.engine == "qsim":
        from ..executors import qsim_simulate

        fused = fuse(gc, route.fusion_width or 4, keep_diagonal=False, progress=progress)
        return qsim_simulate(gc.n_qubits, fused.gates, fused.global_phase), fused, \
            time.perf_counter() - t0
    # qsimdist's kernels track which qubit sits on which axis: a SWAP is a relabelling
    sv = gc.statevector_form()  # multi-controlled gates kept whole
    relabelled, logical = absorb_swaps(sv)
    width = route.fusion_width or 4
    blocks = None
    if cache is not None and cache.gc is gc and relabelled is sv:
        blocks = cache.statevector_blocks.get(width)
    fused = fuse(relabelled, width, keep_diagonal=False, progress=progress, blocks=blocks)
    fuse_seconds = time.perf_counter() - t0
    run = run_dtype(gc.n_qubits, dtype)  # small states: complex128 whatever is asked
    state = simulate(gc.n_qubits, fused.gates, fused.global_phase, run,
                     diagonal=diagonal_flags(fused), progress=progress,
                     kernel=route.kernel or "auto", work=work, logical=logical)
    if run != str(np.dtype(dtype)):
        state = state.astype(dtype)
    return state, fused, fuse_seconds


__all__ = ["final_state"]
