"""Many parameter sets of one small circuit in one statevector pass.

A variational algorithm asks for a few terms of a circuit of a few qubits at many
parameter sets. Routed one set at a time, each set pays the route's fixed costs
(pricing, fusing, per-gate calls) that dwarf its arithmetic. Here the sets of a
:class:`~qsimdist.frontends.parametric.ParametricCircuit` run side by side: the
template's fusion blocks are worked out once per call (on the gate structure, which
no set changes), every block's matrix is built for all sets at once (a fixed block
once for all), each block is applied to the stack of states (sets x ``2^n``) with
one batched GEMM (or, diagonal, one product), and every Pauli term is read off all
states together: the terms sharing an X mask from one product of the states with
their flipped copies, times a matrix of Z-mask signs.

:func:`sweep_term_values` takes this route where it is predicted below the
tensor-network floor of one set (the per-set cost of the statevector counts the
batched calls shared by the sets; a set routed alone also pays the engine call's fixed
seconds, ``costs.ROUTED_SET_SECONDS``), otherwise returns ``None`` and the caller routes
each set on its own (:meth:`~qsimdist.engine.expectation.ExpectationEngine.term_values`).
It computes in complex128 (states of at most :data:`SWEEP_MAX_QUBITS` qubits).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..frontends import GateCircuit
from ..frontends.fusion import MAX_DIAGONAL_QUBITS, fusion_blocks
from ..frontends.parametric import BoundGates, ParametricCircuit
from ..hardware import costs
from .pauli_terms import PAULI_ACTION, PauliTerm

#: widest circuit whose parameter sets are batched (4,096 amplitudes per set)
SWEEP_MAX_QUBITS = 12
#: amplitudes held per chunk of sets (complex128: 16 MiB)
SWEEP_CHUNK_ELEMENTS = 1 << 20
#: fusion widths tried for the batched pass
SWEEP_WIDTHS = (1, 2, 3, 4)


@dataclass
class SweepPlan:
    """The batched pass over one template: its fusion blocks and their predicted cost.

    Attributes:
        blocks: ``(gate indices, qubits, diagonal, batched)`` per block in order;
            ``qubits`` sorted (the block matrix is big-endian over them) for a fused
            block, the gate's own for a block of one gate; ``batched``: a slot's matrix
            is in it (one matrix per set).
        width: the fusion width chosen.
        seconds: predicted seconds for ``sets`` sets.
        flops: real FLOPs of applying the blocks to one state.
    """

    blocks: list[tuple[list[int], tuple[int, ...], bool, bool]]
    width: int
    seconds: float
    flops: float
    steps: tuple | None = None  # (made by _steps)
    #: the matrices of blocks no set changes, made at the first call (by block position)
    fixed: dict = field(default_factory=dict)

    @classmethod
    def of(cls, template: ParametricCircuit, sets: int,
           terms: Sequence[PauliTerm]) -> SweepPlan:
        """The cheapest predicted fusion width for ``sets`` sets, and the pass's price with
        reading ``terms`` (:func:`reading_seconds`)."""
        n = template.n_qubits
        varying = _varying(template)
        gates = [k for k, g in enumerate(template.gates) if g.qubits]
        structure = GateCircuit(n, [template.gates[k] for k in gates])
        flags = [template.diagonal[k] for k in gates]
        best = None
        for width, keep_diagonal in ((w, d) for w in SWEEP_WIDTHS for d in (True, False)):
            if width > max(n, 1):
                break
            # diagonal runs kept apart (a product each, cheap on wide states) or fused with
            # their neighbours (fewer calls, which small states are all about)
            raw = fusion_blocks(structure, width, keep_diagonal=keep_diagonal,
                                max_diagonal_qubits=min(max(n, width), MAX_DIAGONAL_QUBITS),
                                diagonal=flags)
            blocks = []
            for b in raw:
                members = [gates[i] for i in b.gates]
                qubits = (template.gates[members[0]].qubits if len(members) == 1
                          else tuple(sorted(b.qubits)))
                blocks.append((members, qubits, b.diagonal, any(varying[k] for k in members)))
            seconds, flops = _price(template, blocks, sets)
            seconds += reading_seconds(n, sets, terms)
            if best is None or seconds < best.seconds:
                best = cls(blocks, width, seconds, flops)
        if best is None:  # no gate at all
            best = cls([], 1, reading_seconds(n, sets, terms), 0.0)
        return best


def reading_seconds(n: int, sets: int, terms: Sequence[PauliTerm]) -> float:
    """Predicted seconds of :func:`terms_on_states` on ``sets`` states of ``n`` qubits: per
    X mask a few calls (the flipped product, the signs, one GEMM) and passes over the
    states, per term one more pass."""
    live = [t for t in terms if t.qubits]
    groups = len({tuple(q for q, op in zip(t.qubits, t.ops) if op in "XY") for t in live})
    return (groups * 2 * costs.SWEEP_CALL_SECONDS
            + sets * 2.0**n * (2 * groups + len(live)) * costs.PAULI_PASS_SECONDS_PER_ELEMENT)


def _varying(template: ParametricCircuit) -> list[bool]:
    """Per gate, whether its matrix changes with the parameter set."""
    out = [False] * len(template.gates)
    for slot in template.slots:
        out[slot.index] = True
    for piece in template.pieces:
        for k in range(piece.start, piece.stop):
            out[k] = True
    return out


def _price(template: ParametricCircuit, blocks, sets: int) -> tuple[float, float]:
    """Predicted seconds of the batched pass and FLOPs per state."""
    n = template.n_qubits
    seconds = flops = 0.0
    elements = 2.0**n
    for members, qubits, diagonal, batched in blocks:
        m = len(qubits)
        if len(members) > 1:  # building the block's matrix (per set where it varies)
            many = sets if batched else 1
            for k in members:
                k_width = len(template.gates[k].qubits)
                seconds += costs.SWEEP_CALL_SECONDS + many * (
                    2.0**m if diagonal else 4.0**m * 2.0**k_width) \
                    * costs.MAC_SECONDS_PER_ELEMENT
        if diagonal:
            seconds += costs.SWEEP_CALL_SECONDS + sets * elements \
                * costs.DIAGONAL_SECONDS_PER_ELEMENT
            flops += 8.0 * elements
        else:
            seconds += costs.SWEEP_CALL_SECONDS + sets * elements * (
                costs.DENSE_SECONDS_PER_ELEMENT + costs.MAC_SECONDS_PER_ELEMENT * 2**m)
            flops += 8.0 * elements * 2**m
    return seconds, flops


def _block_matrices(template: ParametricCircuit, plan: SweepPlan, bound: BoundGates,
                    lo: int, hi: int, fixed: dict) -> list[np.ndarray]:
    """Each block's matrix for sets ``lo:hi``: ``(sets or 1, d, d)``, or for a diagonal
    block its diagonal ``(sets or 1, d)``; fixed blocks made once (kept in ``fixed``)."""
    out = []
    for j, (members, qubits, diagonal, batched) in enumerate(plan.blocks):
        if not batched and j in fixed:
            out.append(fixed[j])
            continue
        mats = [_stacked(bound.matrices[k], lo, hi) for k in members]
        if len(members) == 1:
            u = mats[0]
            made = np.diagonal(u, axis1=1, axis2=2) if diagonal else u
        elif diagonal:
            made = _diagonal_product(template, members, qubits, mats)
        else:
            made = _dense_product(template, members, qubits, mats)
        if not batched:
            fixed[j] = made
        out.append(made)
    return out


def _stacked(matrix: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return matrix[None] if matrix.ndim == 2 else matrix[lo:hi]


def _dense_product(template, members, qubits, mats) -> np.ndarray:
    """The product of the gates ``members`` embedded in the sorted ``qubits``, batched."""
    m = len(qubits)
    pos = {q: i for i, q in enumerate(qubits)}
    dim = 1 << m
    u = np.eye(dim, dtype=complex).reshape((1,) + (2,) * m + (dim,))
    for k, g in zip(members, mats):
        where = [pos[q] for q in template.gates[k].qubits]
        u = _on_axes(u, g, where, m)
    return u.reshape(u.shape[0], dim, dim)


def _on_axes(u: np.ndarray, g: np.ndarray, where: list[int], m: int) -> np.ndarray:
    """``g`` (sets or 1, 2^k, 2^k; big-endian over ``where``) applied to axes ``1 + where``
    of ``u`` (sets or 1, 2 x m, trailing axis)."""
    k = len(where)
    rest = [i for i in range(m) if i not in where]
    x = u.transpose([0, *(1 + i for i in rest), m + 1, *(1 + i for i in where)])
    shape = x.shape
    x = x.reshape(shape[0], -1, 1 << k)
    y = np.matmul(x, g.transpose(0, 2, 1))
    y = y.reshape((y.shape[0],) + shape[1:])
    back = [0] * (m + 2)
    order = [0, *(1 + i for i in rest), m + 1, *(1 + i for i in where)]
    for axis, src in enumerate(order):
        back[src] = axis
    return y.transpose(back)


def _diagonal_product(template, members, qubits, mats) -> np.ndarray:
    """The product of diagonal gates ``members`` on the sorted ``qubits``: its diagonal."""
    m = len(qubits)
    pos = {q: i for i, q in enumerate(qubits)}
    d = np.ones((1,) + (2,) * m, dtype=complex)
    for k, g in zip(members, mats):
        gq = template.gates[k].qubits
        gd = np.diagonal(g, axis1=1, axis2=2).reshape((g.shape[0],) + (2,) * len(gq))
        order = sorted(range(len(gq)), key=lambda i: pos[gq[i]])
        gd = gd.transpose([0, *(1 + i for i in order)])
        shape = [gd.shape[0]] + [1] * m
        for i in order:
            shape[1 + pos[gq[i]]] = 2
        d = d * gd.reshape(shape)
    return d.reshape(d.shape[0], 1 << m)


def _steps(plan: SweepPlan, n: int) -> tuple[list[tuple], tuple[int, ...]]:
    """How each block is applied to the stack of states (sets, 2 x n), worked out once per
    plan: the axes' order changes the same way for every set. A dense block moves its
    qubits to the last axes (``("dense", transpose, width)``); a diagonal block is a
    product with its diagonal laid over the axes its qubits sit on (``("diagonal",
    transpose of the diagonal, its broadcast shape)``). Also the transpose back to
    Qiskit's order at the end."""
    if plan.steps is not None:
        return plan.steps
    order = list(range(n - 1, -1, -1))  # axis 1 + j holds qubit order[j]: Qiskit's order
    steps = []
    for _, qubits, diagonal, _ in plan.blocks:
        pos = [order.index(q) for q in qubits]
        if diagonal:
            ranked = sorted(range(len(qubits)), key=lambda i: pos[i])
            shape = [1] * n
            for i in ranked:
                shape[pos[i]] = 2
            steps.append(("diagonal", (0, *(1 + i for i in ranked)), tuple(shape)))
            continue
        rest = [j for j in range(n) if j not in pos]
        steps.append(("dense", (0, *(1 + j for j in rest), *(1 + j for j in pos)),
                      len(qubits)))
        order = [order[j] for j in rest] + list(qubits)
    final = (0, *(1 + order.index(q) for q in range(n - 1, -1, -1)))
    plan.steps = (steps, final)
    return plan.steps


def _states(template: ParametricCircuit, plan: SweepPlan, bound: BoundGates, lo: int,
            hi: int, fixed: dict) -> np.ndarray:
    """The final states of sets ``lo:hi`` (sets x 2^n, Qiskit's order; global phase
    left out)."""
    n = template.n_qubits
    sets = hi - lo
    state = np.zeros((sets, 1 << n), dtype=complex)
    state[:, 0] = 1.0
    full = (sets,) + (2,) * n
    state = state.reshape(full)
    steps, final = _steps(plan, n)
    for mat, step in zip(_block_matrices(template, plan, bound, lo, hi, fixed), steps):
        if step[0] == "diagonal":
            k = len(step[1]) - 1
            dg = mat.reshape((mat.shape[0],) + (2,) * k).transpose(step[1])
            state *= dg.reshape((mat.shape[0],) + step[2])
            continue
        x = state.transpose(step[1]).reshape(sets, -1, 1 << step[2])
        if mat.shape[0] == 1:  # one matrix for every set: one GEMM
            y = x.reshape(-1, x.shape[-1]) @ mat[0].T
        else:
            y = np.matmul(x, mat.transpose(0, 2, 1))
        state = y.reshape(full)
    return np.ascontiguousarray(state.transpose(final)).reshape(sets, 1 << n)


def terms_on_states(states: np.ndarray, terms: Sequence[PauliTerm]) -> np.ndarray:
    """``Re <s|P|s>`` of every Pauli term on every state (sets x 2^n): sets x terms.

    ``P|i> = i^{#Y} (-1)^{|i & z|} |i ^ x>``, so the terms of one X mask ``x`` are
    ``conj(s[i ^ x]) s[i]`` summed against their Z-mask signs: one product of the states
    with their flipped view (``np.flip`` on the X qubits' axes, no gather) per mask, then
    one real GEMM with the signs for its real and imaginary parts."""
    sets, size = states.shape
    n = size.bit_length() - 1
    idx = np.arange(size)
    out = np.ones((sets, len(terms)))
    groups: dict[int, list[int]] = {}
    masks = []
    for t, term in enumerate(terms):
        x = sum(1 << q for q, op in zip(term.qubits, term.ops) if op in "XY")
        z = sum(1 << q for q, op in zip(term.qubits, term.ops) if op in "ZY")
        masks.append((z, term.ops.count("Y") % 4))
        if term.qubits:
            groups.setdefault(x, []).append(t)
    tensor = states.reshape((sets,) + (2,) * n)  # axis 1 + j holds qubit n-1-j
    for x, members in groups.items():
        signs = 1.0 - 2.0 * (np.bitwise_count(idx[:, None] & np.array(
            [masks[t][0] for t in members])[None, :]) & 1)  # (2^n, terms)
        if x == 0:
            prob = states.real**2 + states.imag**2
            out[:, members] = prob @ signs
            continue
        flipped = np.flip(tensor, axis=[1 + n - 1 - q for q in range(n) if x >> q & 1])
        prod = (np.conj(flipped) * tensor).reshape(sets, size)
        parts = np.matmul(signs.T, prod.view(np.float64).reshape(sets, size, 2))
        for j, t in enumerate(members):  # parts: (sets, terms, real | imaginary)
            re, im = parts[:, j, 0], parts[:, j, 1]
            out[:, t] = (re, -im, -re, im)[masks[t][1]]
    return out


def sweep_route(engine, template: ParametricCircuit, sets: int,
                terms: Sequence[PauliTerm]):
    """``(plan, route)`` where the batched pass is taken for ``sets`` parameter sets of
    ``template`` and these terms, else ``None`` (route each set on its own).

    Taken where the engine's method is ``auto`` or ``statevector``, in one process on
    numpy, for at most :data:`SWEEP_MAX_QUBITS` qubits and Pauli terms, and (``auto``)
    where its predicted seconds per set are below one set's tensor-network floor and a
    circuit without parameters does not go to the stabilizer route.
    """
    from ..executors import executor_kind, statevector_bytes
    from .router import Route, tn_floor
    from .term_networks import cone_gates_at_least

    n = template.n_qubits
    if (engine.method not in ("auto", "statevector") or n > SWEEP_MAX_QUBITS or sets <= 0
            or engine.backend != "numpy" or executor_kind(engine.executor).distributed
            or any(set(t.ops) - set(PAULI_ACTION) for t in terms)):
        return None
    live = [t for t in terms if t.qubits]
    if len(template.memo) > 256:  # many sizes or term sets met: start again
        template.memo.clear()
    key = ("sweep", sets, tuple(live))
    plan = template.memo.get(key)
    if plan is None:
        plan = template.memo[key] = SweepPlan.of(template, sets, live)
    per_set = plan.seconds / sets
    floor = template.memo.get(("floor", tuple(live)))
    if floor is None:
        floor = template.memo[("floor", tuple(live))] = tn_floor(
            cone_gates_at_least(GateCircuit(n, template.gates), live), 1) if live else 0.0
    if engine.method == "auto":
        # a set routed alone pays the tensor network's floor and the call's fixed seconds
        if live and per_set > floor + costs.ROUTED_SET_SECONDS:
            return None
        if not template.parametrised and live and _stabilizer_taken(engine, template, live,
                                                                    per_set):
            return None
    reason = "requested" if engine.method == "statevector" else (
        f"{sets} parameter set(s) in one batched pass, predicted below the tensor-network "
        "floor")
    route = Route("statevector", reason, per_set, floor or None,
                  statevector_bytes(n, "complex128"), plan.width, engine="qsimdist",
                  kernel="batched")
    return plan, route


def sweep_term_values(engine, template: ParametricCircuit, rows: np.ndarray,
                      terms: Sequence[PauliTerm]) -> tuple[np.ndarray, np.ndarray] | None:
    """Every term at every parameter set (``rows``) in one batched statevector pass, where
    :func:`sweep_route` takes it; ``None`` where it does not.

    Returns ``(values, ok)``: values (sets x terms) and, per set, whether it was taken
    from the template (a set that is not, :attr:`BoundGates.ok`, must be routed alone).
    ``engine``: the :class:`~qsimdist.engine.expectation.ExpectationEngine` whose
    options decide and whose statistics and route record it.
    """
    t0 = time.perf_counter()
    sets = len(rows)
    chosen = sweep_route(engine, template, sets, terms)
    if chosen is None:
        return None
    plan, route = chosen
    live = [t for t in terms if t.qubits]
    # (plan_seconds: the route and its plan; execute_seconds: binding, states, reading)
    t1 = time.perf_counter()
    values = np.ones((sets, len(terms)))
    ok = np.ones(sets, dtype=bool)
    # sets per chunk: their states, and their slots' matrices, within SWEEP_CHUNK_ELEMENTS
    varying = sum(template.gates[k].matrix.size for k, v in enumerate(_varying(template)) if v)
    chunk = max(1, min(SWEEP_CHUNK_ELEMENTS >> template.n_qubits,
                       SWEEP_CHUNK_ELEMENTS // max(varying, 1)))
    index = [t for t, term in enumerate(terms) if term.qubits]
    for lo in range(0, sets, chunk):
        hi = min(sets, lo + chunk)
        bound = template.bound_gates(rows[lo:hi])
        ok[lo:hi] = bound.ok
        if live:
            states = _states(template, plan, bound, 0, hi - lo, plan.fixed)
            values[lo:hi, index] = terms_on_states(states, live)
    st = engine.stats
    taken = int(ok.sum())
    st.terms += taken * len(terms)
    st.trivial_terms += taken * (len(terms) - len(live))
    st.statevector_terms += taken * len(live)
    st.z_string_terms += taken * sum(1 for t in live if set(t.ops) == {"Z"})
    st.flops += plan.flops * taken
    st.plan_seconds += t1 - t0
    st.execute_seconds += time.perf_counter() - t1
    engine.route = route.to_dict()
    return values, ok


def sampling_sweep_route(template: ParametricCircuit, sets: int, measured: list[int],
                         shots: int, method: str, executor: str, backend: str):
    """``(plan, route)`` where a sampler's ``sets`` parameter sets of ``template`` are
    better drawn from one batched statevector pass than routed one by one, else ``None``.

    The estimator's rule (:func:`sweep_route`) for a sampler: method ``auto`` or
    ``statevector``, numpy in one process, at most :data:`SWEEP_MAX_QUBITS` qubits, and
    (``auto``) the pass and the draw per set predicted below one routed set's
    tensor-network floor and fixed seconds; a circuit without parameters that is Clifford
    keeps the stabilizer route where that is priced cheaper."""
    from ..executors import executor_kind, statevector_bytes
    from .router import Route, tn_floor
    from .sampling import folded_gates_at_least

    n = template.n_qubits
    if (method not in ("auto", "statevector") or n > SWEEP_MAX_QUBITS or sets <= 0
            or backend != "numpy" or executor_kind(executor).distributed):
        return None
    if len(template.memo) > 256:
        template.memo.clear()
    key = ("sample", sets)
    plan = template.memo.get(key)
    if plan is None:
        plan = template.memo[key] = SweepPlan.of(template, sets, [])
    # the draw (a marginal and the shots) is the same either way: not in the comparison
    read = (costs.MARGINAL_SECONDS_PER_ELEMENT * 2.0**n + costs.DRAW_SECONDS_PER_SHOT * shots)
    per_set = plan.seconds / sets
    floor = template.memo.get(("sample floor",))
    if floor is None:
        floor = template.memo[("sample floor",)] = tn_floor(
            folded_gates_at_least(GateCircuit(n, template.gates)), 1)
    if method == "auto":
        if per_set > floor + costs.ROUTED_SET_SECONDS:
            return None
        if not template.parametrised:
            from . import stabilizer

            gc = template.bind(np.zeros(0))
            choice = None if gc is None else stabilizer.choose_for_sampling(
                gc, measured, shots, method, executor, backend)
            if choice is not None and (choice.route is not None
                                       or choice.seconds <= per_set + read):
                return None
    reason = "requested" if method == "statevector" else (
        f"{sets} parameter set(s) in one batched pass, predicted below the tensor-network "
        "floor")
    route = Route("statevector", reason, per_set + read, floor or None,
                  statevector_bytes(n, "complex128"), plan.width, engine="qsimdist",
                  kernel="batched")
    return plan, route


def sweep_states(template: ParametricCircuit, plan: SweepPlan, rows: np.ndarray):
    """The final states of every parameter set (``rows``) by the batched pass, chunk by
    chunk: ``(first set, states (sets x 2^n, index bit q: qubit q), ok)`` per chunk,
    ``ok`` per set whether it was bound from the template (one that is not must be run on
    its own)."""
    sets = len(rows)
    varying = sum(template.gates[k].matrix.size for k, v in enumerate(_varying(template)) if v)
    chunk = max(1, min(SWEEP_CHUNK_ELEMENTS >> template.n_qubits,
                       SWEEP_CHUNK_ELEMENTS // max(varying, 1)))
    for lo in range(0, sets, chunk):
        hi = min(sets, lo + chunk)
        bound = template.bound_gates(rows[lo:hi])
        yield lo, _states(template, plan, bound, 0, hi - lo, plan.fixed), bound.ok


def _stabilizer_taken(engine, template: ParametricCircuit, live, seconds: float) -> bool:
    """Whether a circuit without parameters is better left to the stabilizer route: a
    Clifford circuit whose stim price is below the other routes' floors or below
    ``seconds``, the batched pass's (as the engine's router would prefer it)."""
    from . import stabilizer

    gc = template.bind(np.zeros(0))
    if gc is None:
        return False
    choice = stabilizer.choose_for_terms(gc, live, engine.method, engine.executor,
                                         engine.backend)
    return choice is not None and (choice.route is not None or choice.seconds <= seconds)


__all__ = ["SWEEP_MAX_QUBITS", "SweepPlan", "sampling_sweep_route", "sweep_route",
           "sweep_states", "sweep_term_values", "terms_on_states"]
