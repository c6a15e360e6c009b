"""Operator Loschmidt echoes: ``f = 2^-n Tr(O W^dag O W)`` as one closed tensor network.

For a unitary ``W`` on ``n`` qubits and a Pauli string ``O``, the trace is a
doubled network closed at both ends: per qubit a *ket* wire through ``W`` and a
*bra* wire through ``conj(W)``; at ``W``'s output the two wires meet through
``O`` (``O[c, d]``, ``c`` the bra's output, ``d`` the ket's), and at its input
through ``O`` again (``O[a, b]``, ``a`` the ket's input, ``b`` the bra's)::

    Tr(O W^dag O W) = sum_{abcd} O[a, b] conj(W[c, b]) O[c, d] W[d, a]

A qubit where ``O`` is the identity joins the two wires (one index); a ``Z``
joins them too and puts its diagonal ``(1, -1)`` on that index. The global
phase cancels between ``W`` and ``conj(W)``.

Before the network is built, ``W`` is reduced by exact identities only
(:func:`echo_cone`), repeated until nothing changes:

1. **Fusion keeping diagonals**
   (:func:`~qsimdist.frontends.one_qubit_fusion.fuse_keeping_diagonals`):
   one-qubit runs folded into neighbours, never into a diagonal gate (``CZ``,
   ``RZZ`` stay hyper-indices); consecutive gates on the same qubits multiplied.
2. **Gates equal to a phase times the identity** (``CZ`` times ``CZ``, a run of
   one-qubit gates that multiplies out to the identity, within ``1e-12``) are
   dropped: their phase cancels against ``conj(W)``.
3. **The backward light cone of O** (diagonal-aware,
   :func:`~qsimdist.engine.doubled.diagonal_light_cone`): a gate of ``W`` that
   commutes with ``W_after^dag O W_after`` cancels with its mirror in ``W^dag``.
4. **The forward light cone of O**: since ``Tr(O W^dag O W) = Tr(O R^dag O R)``
   with ``R = W^dag`` (gates reversed and adjointed), the same walk on ``R``
   drops the gates at the start of ``W`` that commute with ``W_before O W_before^dag``.

Qubits left without a gate and outside ``O`` give ``Tr(I) = 2`` each, which
cancels with their share of ``2^-n``; the network holds the ``m`` qubits left
and a factor ``1/2`` per qubit folded into the first tensor on that qubit, so
contracting it gives ``f`` itself.

:func:`echo_value` simplifies (:func:`qsimdist.planner.simplify.simplify`),
plans and contracts it; :func:`echo_plan` stops before contracting, for costing.
The path is the cheaper of cotengra's hyper-optimiser
(:func:`qsimdist.planner.plan.make_plan`, bounded by ``PathOptions.max_time``) and a
time-ordered sweep (:func:`sweep_path`: the operator evolved gate by gate, whose
largest intermediate is at most ``4^m``). On the tracker's 49-qubit L=3 circuit the
search wins by 16 orders of magnitude; on its L=6 circuits (4,700 tensors) minutes of
search find nothing better than the sweep.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..config import check_dtype, parse_memory
from ..errors import InvalidInputError, shorten
from ..frontends import load
from ..frontends.circuit import Gate, GateCircuit
from ..frontends.one_qubit_fusion import fuse_keeping_diagonals
from ..network import Network
from ..network.matrices import is_diagonal
from .doubled import diagonal_light_cone

#: the one-qubit Pauli matrices an observable may hold
PAULIS: dict[str, np.ndarray] = {
    "X": np.array([[0, 1], [1, 0]], dtype=complex),
    "Y": np.array([[0, -1j], [1j, 0]], dtype=complex),
    "Z": np.array([[1, 0], [0, -1]], dtype=complex),
}
#: a gate within this distance (largest entry) of a phase times the identity is dropped
IDENTITY_ATOL = 1e-12
#: most rounds of fuse / drop / cone before the reduction stops (it converges in a few)
MAX_ROUNDS = 32

_SPARSE_TOKEN = re.compile(r"([IXYZ])\s*([0-9]+)")


def parse_observable(observable, n_qubits: int) -> tuple[tuple[int, ...], str]:
    """``(qubits, ops)`` of a Pauli string, qubits ascending, identities left out.

    Accepted: a mapping ``{qubit: "X" | "Y" | "Z" | "I"}``; a sparse string
    ``"Z52 Z59 Z72"`` (a Pauli letter followed by a qubit number, separated by
    spaces); or a dense label of ``n_qubits`` characters ``I X Y Z`` in Qiskit
    order (rightmost character = qubit 0).
    """
    pairs: list[tuple[int, str]] = []
    if isinstance(observable, Mapping):
        for q, op in observable.items():
            if isinstance(q, bool) or not isinstance(q, (int, np.integer)):
                raise InvalidInputError(f"observable qubit {shorten(q)} is not an integer; "
                                        f"valid: 0..{n_qubits - 1}")
            pairs.append((int(q), str(op).upper()))
    elif isinstance(observable, str):
        text = observable.strip()
        if len(text) == n_qubits and set(text) <= set("IXYZ"):
            pairs = [(n_qubits - 1 - k, c) for k, c in enumerate(text)]
        else:
            tokens = text.replace(",", " ").split()
            for tok in tokens:
                m = _SPARSE_TOKEN.fullmatch(tok.upper())
                if m is None:
                    raise InvalidInputError(
                        f"cannot read observable token {shorten(tok)}; write Pauli letters "
                        f"with qubit numbers such as 'Z52 Z59 Z72', or a label of {n_qubits} "
                        "characters I X Y Z"
                    )
                pairs.append((int(m.group(2)), m.group(1)))
    else:
        raise InvalidInputError(
            f"cannot use an object of type {type(observable).__name__} as an observable; valid: "
            "a dict {qubit: 'X'|'Y'|'Z'}, a string like 'Z52 Z59 Z72', or a dense Pauli label"
        )
    seen: dict[int, str] = {}
    for q, op in pairs:
        if op not in ("I", *PAULIS):
            raise InvalidInputError(f"observable has operator {shorten(op)} on qubit {q}; "
                                    "valid: I, X, Y, Z")
        if not 0 <= q < n_qubits:
            raise InvalidInputError(f"observable acts on qubit {q}; the circuit has qubits "
                                    f"0..{n_qubits - 1}")
        if q in seen:
            raise InvalidInputError(f"observable names qubit {q} twice; give one operator per "
                                    "qubit")
        seen[q] = op
    kept = sorted((q, op) for q, op in seen.items() if op != "I")
    return tuple(q for q, _ in kept), "".join(op for _, op in kept)


def _circuit(source) -> GateCircuit:
    obj = load(source)
    if not isinstance(obj, GateCircuit):
        raise InvalidInputError("an echo needs a circuit (a unitary W), but this input is a "
                                "tensor network; give a circuit file, QuantumCircuit or "
                                "GateCircuit")
    return obj


def _with_gates(circuit: GateCircuit, gates: list[Gate]) -> GateCircuit:
    out = GateCircuit(circuit.n_qubits, global_phase=circuit.global_phase, name=circuit.name)
    out.gates = gates
    return out


def _adjoint(circuit: GateCircuit) -> GateCircuit:
    """``W^dag``: the gates reversed, each conjugate-transposed."""
    return _with_gates(circuit, [Gate(g.matrix.conj().T, g.qubits, g.name)
                                 for g in reversed(circuit.gates)])


def _is_phase_identity(matrix: np.ndarray, atol: float = IDENTITY_ATOL) -> bool:
    """Whether ``matrix`` is ``e^{i phi} I`` within ``atol`` (largest entry)."""
    m = np.asarray(matrix)
    phase = m[0, 0]
    if abs(abs(phase) - 1.0) > atol:
        return False
    return float(np.max(np.abs(m - phase * np.eye(m.shape[0])))) <= atol


def _cone(circuit: GateCircuit, qubits, ops) -> GateCircuit:
    """The gates of ``circuit`` in the diagonal-aware backward light cone of the term."""
    diagonal = [is_diagonal(g.matrix) for g in circuit.gates]
    kept = diagonal_light_cone(circuit, qubits, ops, diagonal).gates
    return _with_gates(circuit, [circuit.gates[k] for k in kept])


@dataclass(frozen=True)
class EchoCone:
    """``W`` reduced for the echo of one observable (see the module docstring).

    Attributes:
        circuit: the reduced unitary (the input's qubit numbers), gates fused.
        qubits: the qubits the network keeps, ascending (the observable's and
            every kept gate's).
        observable_qubits: the observable's qubits, ascending.
        ops: the observable's Pauli letters, one per ``observable_qubits``.
        n_qubits: qubits the input circuit declares.
        gates_in: gates of the input circuit.
        used_qubits: qubits carrying at least one gate in the input circuit.
        rounds: rounds of fuse / drop / cone until nothing changed.
    """

    circuit: GateCircuit
    qubits: tuple[int, ...]
    observable_qubits: tuple[int, ...]
    ops: str
    n_qubits: int
    gates_in: int
    used_qubits: int
    rounds: int

    @property
    def gates(self) -> int:
        return len(self.circuit.gates)

    @property
    def two_qubit_gates(self) -> int:
        """Kept gates on two or more qubits."""
        return sum(1 for g in self.circuit.gates if len(g.qubits) > 1)


def echo_cone(circuit, observable, *, fuse: bool = True) -> EchoCone:
    """``W`` reduced to the gates the echo of ``observable`` needs (exact identities only).

    ``circuit``: anything :func:`qsimdist.frontends.load` reads as a circuit;
    ``observable``: see :func:`parse_observable`. ``fuse=False`` skips the
    fusion (the light cones and identity drops still run).
    """
    gc = _circuit(circuit)
    qubits, ops = parse_observable(observable, gc.n_qubits)
    used = len({q for g in gc.gates for q in g.qubits})
    work = _with_gates(gc, list(gc.gates))
    rounds, previous = 0, None
    while rounds < MAX_ROUNDS:
        rounds += 1
        if fuse:
            work = fuse_keeping_diagonals(work)
        work = _with_gates(work, [g for g in work.gates if not _is_phase_identity(g.matrix)])
        work = _cone(work, qubits, ops)
        work = _adjoint(_cone(_adjoint(work), qubits, ops))
        structure = tuple(g.qubits for g in work.gates)
        if structure == previous:
            break
        previous = structure
    touched = {q for g in work.gates for q in g.qubits} | set(qubits)
    return EchoCone(work, tuple(sorted(touched)), qubits, ops, gc.n_qubits, len(gc.gates),
                    used, rounds)


def cone_network(cone: EchoCone) -> Network:
    """The closed network of ``f`` on the reduced circuit of ``cone`` (see the module
    docstring): scalar output, factor ``1/2`` per kept qubit included."""
    local = {q: j for j, q in enumerate(cone.qubits)}
    n = len(local)
    if n == 0:  # O = I and nothing left: f = 1
        return Network([()], (), {}, [np.ones((), dtype=complex)],
                       meta={"n_qubits": 0, "name": f"{cone.circuit.name}:echo"})
    gates = cone.circuit.gates
    diagonal = [is_diagonal(g.matrix) for g in gates]
    layers = [0] * n
    for g, d in zip(gates, diagonal):
        if not d:
            for q in g.qubits:
                layers[local[q]] += 1
    op_of = {local[q]: PAULIS[c] for q, c in zip(cone.observable_qubits, cone.ops)}
    joined = {j for j in range(n) if j not in op_of or is_diagonal(op_of[j])}

    def ket(j: int, layer: int) -> str:
        return f"k{j}.{layer}"

    def bra(j: int, layer: int) -> str:
        # at either end an identity or a diagonal operator joins the two wires
        if j in joined and layer in (0, layers[j]):
            return ket(j, layer)
        return f"b{j}.{layer}"

    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    first: dict[int, int] = {}  # qubit -> the first tensor on it (takes its factor 1/2)

    def add(inds, array, qs) -> None:
        for j in qs:
            first.setdefault(j, len(inputs))
        inputs.append(tuple(inds))
        arrays.append(np.array(array, dtype=complex))

    for j, m in sorted(op_of.items()):  # O at W's input: O[a, b], a the ket's, b the bra's
        if j in joined:
            add((ket(j, 0),), np.diagonal(m), (j,))
        else:
            add((ket(j, 0), bra(j, 0)), m, (j,))
    at = [0] * n
    for g, d in zip(gates, diagonal):
        qs = [local[q] for q in g.qubits]
        shape = (2,) * len(qs)
        if d:
            values = np.diagonal(g.matrix).reshape(shape)
            add([ket(j, at[j]) for j in qs], values, qs)
            add([bra(j, at[j]) for j in qs], values.conj(), qs)
            continue
        ins = [at[j] for j in qs]
        for j in qs:
            at[j] += 1
        add([*(ket(j, at[j]) for j in qs), *(ket(j, i) for j, i in zip(qs, ins))],
            g.matrix.reshape(shape * 2), qs)
        add([*(bra(j, at[j]) for j in qs), *(bra(j, i) for j, i in zip(qs, ins))],
            g.matrix.conj().reshape(shape * 2), qs)
    for j, m in sorted(op_of.items()):  # O at W's output: O[c, d], c the bra's, d the ket's
        if j in joined:
            add((ket(j, layers[j]),), np.diagonal(m), (j,))
        else:
            add((bra(j, layers[j]), ket(j, layers[j])), m, (j,))
    for t in set(first.values()):
        arrays[t] = arrays[t] * 0.5 ** sum(1 for v in first.values() if v == t)
    size_dict = {i: 2 for t in inputs for i in t}
    return Network(inputs, (), size_dict, arrays,
                   meta={"n_qubits": n, "name": f"{cone.circuit.name}:echo"})


def echo_network(circuit, observable) -> Network:
    """The closed network whose contraction is ``f = 2^-n Tr(O W^dag O W)``.

    ``circuit``: the unitary ``W`` (anything :func:`qsimdist.frontends.load`
    reads as a circuit; its qubit numbers are kept); ``observable``: a Pauli
    string (see :func:`parse_observable`), e.g. ``"Z52 Z59 Z72"``. ``n`` counts
    every qubit ``W`` declares: qubits outside the reduced circuit give
    ``2^-1 Tr(I) = 1``. Not simplified (see :func:`echo_value`).
    """
    return cone_network(echo_cone(circuit, observable))


def _memory(memory_limit) -> int | None:
    return parse_memory(memory_limit)


def layer_times(cone: EchoCone) -> dict[str, int]:
    """Index name -> position in the reduced circuit of the gate that opens it (``-1``:
    the wire's start), for the index names :func:`cone_network` gives."""
    local = {q: j for j, q in enumerate(cone.qubits)}
    at = [0] * len(local)
    times: dict[str, int] = {}
    for p, g in enumerate(cone.circuit.gates):
        if is_diagonal(g.matrix):
            continue
        for q in g.qubits:
            j = local[q]
            at[j] += 1
            times[f"k{j}.{at[j]}"] = times[f"b{j}.{at[j]}"] = p
    return times


def sweep_path(net: Network, cone) -> list[tuple[int, int]]:
    """A time-ordered SSA path: tensors absorbed one by one in the order of the latest
    gate behind their indices (the operator ``W_t O W_t^dag`` evolved gate by gate).

    Its largest intermediate is at most ``4^(qubits in the cone)``; the hyper-optimiser
    does far better on shallow cones but, within minutes, far worse on deep ones (4,700
    tensors), so :func:`echo_plan` keeps whichever is cheaper. Indices whose names are
    not :func:`cone_network`'s count as the start of time (the path stays valid).
    ``cone``: an :class:`EchoCone`, or a dict index name -> time made otherwise.
    """
    times = layer_times(cone) if isinstance(cone, EchoCone) else dict(cone)
    n = net.num_tensors
    if n < 2:
        return []
    order = sorted(range(n), key=lambda t: (max((times.get(i, -1) for i in net.inputs[t]),
                                                default=-1), t))
    path, current = [], order[0]
    for k, t in enumerate(order[1:]):
        path.append((current, t))
        current = n + k
    return path


def _tree_cost(net: Network, ssa_path) -> tuple[float, float]:
    """(multiply-adds, largest intermediate in elements) of ``ssa_path`` on ``net``."""
    import cotengra as ctg

    inputs, output, size_dict, _ = net.symbolic()
    if len(inputs) < 2:
        return 0.0, 1.0
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa_path)
    return float(tree.contraction_cost()), float(tree.max_size())


#: :func:`greedy_slicing` gives up past this many sliced indices (2^256 slices: no
#: machine runs them, and the plan's FLOP count would leave the float range further on)
MAX_SLICED_INDICES = 256


def greedy_slicing(net: Network, ssa_path, target_log2: float,
                   max_indices: int = MAX_SLICED_INDICES) -> list[str]:
    """Indices to slice along ``ssa_path`` so no intermediate exceeds ``2^target_log2``
    elements: each round slices the index whose removal takes the most excess (log2
    elements over the target, summed over the intermediates still too wide) away.

    A coarse, fast slicer for paths that need dozens of sliced indices (a ``2^98``
    intermediate cut to ``2^26``), where cotengra's and qsimdist's cost-aware slicers
    take many minutes on thousands of steps; it looks at sizes only, not at the FLOPs
    the slicing adds (the plan built with it counts those). Output indices are never
    sliced. Raises :class:`~qsimdist.errors.PlanError` if the target cannot be reached,
    or not within ``max_indices`` sliced indices.
    """
    from ..errors import PlanError
    from ..planner.lifetime import death_steps

    legs, _, _ = death_steps(net.inputs, net.output, ssa_path, set())
    names = sorted({i for term in legs for i in term})
    col = {i: k for k, i in enumerate(names)}
    w = np.log2([net.size_dict[i] for i in names]) if names else np.zeros(0)
    pairs = sorted((col[i], r) for r, term in enumerate(legs) for i in term)
    if not pairs:
        return []
    cols = np.array([c for c, _ in pairs])
    rows = np.array([r for _, r in pairs])
    starts = np.searchsorted(cols, np.arange(len(names)))
    ends = np.searchsorted(cols, np.arange(len(names)), side="right")
    widths = np.zeros(len(legs))
    np.add.at(widths, rows, w[cols])
    allowed = np.ones(len(names), dtype=bool)
    for i in net.output:
        if i in col:
            allowed[col[i]] = False
    sliced: list[str] = []
    while widths.max() > target_log2 + 1e-9:
        excess = np.clip(widths - target_log2, 0.0, None)
        score = np.add.reduceat(excess[rows], starts)
        score[ends == starts] = 0.0
        score[~allowed] = -1.0
        x = int(np.argmax(score))
        if score[x] <= 0.0:
            raise PlanError(f"cannot slice this network below 2^{target_log2:.1f} elements "
                            "per intermediate")
        if len(sliced) >= max_indices:
            raise PlanError(f"slicing this path to 2^{target_log2:.1f} elements per "
                            f"intermediate takes more than {max_indices} sliced indices "
                            f"(largest intermediate 2^{widths.max():.1f} after {max_indices})")
        allowed[x] = False
        sliced.append(names[x])
        widths[rows[starts[x]:ends[x]]] -= w[x]
    return sliced


def slice_within(net: Network, ssa_path, memory_limit: int | None, dtype: str):
    """The plan along ``ssa_path`` fitting ``memory_limit`` bytes: qsimdist's own
    :func:`~qsimdist.planner.plan.fit_to_memory` where a few indices do (the unsliced
    largest intermediate within ``2^FEW_SLICES_LOG2`` of the first target), else
    :func:`greedy_slicing`, its target halved until the plan's peak fits."""
    import math

    from ..planner.plan import build_plan, fit_to_memory, slice_target

    plan = build_plan(net, ssa_path, (), dtype)
    if memory_limit is None or plan.stats.peak_bytes <= memory_limit:
        return plan
    itemsize = np.dtype(dtype).itemsize
    target = math.log2(max(1, slice_target(memory_limit, itemsize)))
    if math.log2(max(plan.stats.max_intermediate, 1)) <= target + FEW_SLICES_LOG2:
        return fit_to_memory(net, ssa_path, memory_limit, dtype)
    while True:
        plan = build_plan(net, ssa_path, greedy_slicing(net, ssa_path, target), dtype)
        if plan.stats.peak_bytes <= memory_limit or target <= 0:
            return plan
        target -= 1.0


#: :func:`slice_within` hands paths needing more than this many binary sliced indices
#: (roughly) to :func:`greedy_slicing`
FEW_SLICES_LOG2 = 16


#: how :func:`echo_plan` finds its path
PATH_METHODS = ("best", "search", "sweep")


def echo_plan(circuit, observable, *, dtype: str = "complex128", memory_limit=None,
              path_options=None, simplify_seq: str = "ADCRS", method: str = "best"):
    """``(plan, cone, network)``: the simplified echo network planned within
    ``memory_limit`` bytes (``"4GiB"``; ``None``: unsliced), not contracted.

    ``path_options``: a :class:`~qsimdist.planner.path.PathOptions` or a dict of its
    fields (bound the search with ``max_time``). ``method``: ``search`` (the
    hyper-optimiser, :func:`~qsimdist.planner.plan.make_plan`), ``sweep``
    (:func:`sweep_path`) or ``best`` (both; the one with fewer multiply-adds, then the
    smaller largest intermediate). ``plan.meta["echo_path"]`` says which was taken and
    what each cost. ``circuit`` may be an :class:`EchoCone` already made.
    """
    from ..planner.path import PathOptions
    from ..planner.plan import make_plan
    from ..planner.simplify import simplify

    dtype = check_dtype(dtype)
    if method not in PATH_METHODS:
        raise InvalidInputError(f"unknown path method {shorten(method)}; valid: "
                                f"{', '.join(PATH_METHODS)}")
    limit = _memory(memory_limit)
    cone = circuit if isinstance(circuit, EchoCone) else echo_cone(circuit, observable)
    net = simplify(cone_network(cone), simplify_seq) if simplify_seq else cone_network(cone)
    opts = PathOptions.coerce(path_options)
    candidates: dict[str, tuple] = {}
    if method in ("best", "search"):
        searched = make_plan(net, dtype=dtype, path_options=opts)
        candidates["search"] = (searched.path, _tree_cost(net, searched.path),
                                searched.stats.path_from_cache)
    if method in ("best", "sweep"):
        path = sweep_path(net, cone)
        candidates["sweep"] = (path, _tree_cost(net, path), False)
    taken = min(candidates, key=lambda k: candidates[k][1])
    path, _, cached = candidates[taken]
    plan = slice_within(net, path, limit, dtype)
    plan.stats.path_from_cache = cached
    if limit is not None and plan.stats.peak_bytes > limit:
        from ..config import format_bytes
        from ..errors import PlanError

        raise PlanError(f"memory limit {format_bytes(limit)} is too small: the best sliced "
                        f"plan found still peaks at {format_bytes(plan.stats.peak_bytes)}")
    plan.meta["echo_path"] = {"taken": taken, **{
        k: {"multiply_adds": c[1][0], "largest_elements": c[1][1]}
        for k, c in candidates.items()}}
    return plan, cone, net


def echo_value(circuit, observable, *, dtype: str = "complex128", memory_limit=None,
               path_options=None, backend: str = "numpy", method: str = "best") -> float:
    """``f = 2^-n Tr(O W^dag O W)``, exactly (up to rounding), by contracting the echo network.

    Args:
        circuit: the unitary ``W``: an OpenQASM / .qsim path, a Qiskit
            ``QuantumCircuit``, a :class:`GateCircuit` (anything
            :func:`qsimdist.frontends.load` reads as a circuit).
        observable: the Pauli string ``O`` (see :func:`parse_observable`).
        dtype: ``complex128`` (default) or ``complex64``.
        memory_limit: peak bytes of the contraction (``"4GiB"``, an int; ``None``:
            no slicing).
        path_options: :class:`~qsimdist.planner.path.PathOptions` or a dict.
        backend: the array backend of the contraction.
        method: how the path is found (see :func:`echo_plan`).

    Returns the real part (the value is real for a Hermitian ``O``).
    """
    plan, _, _ = echo_plan(circuit, observable, dtype=dtype, memory_limit=memory_limit,
                           path_options=path_options, method=method)
    value = np.asarray(plan.execute(backend=backend))
    return float(np.real(value.reshape(-1)[0]))


__all__ = [
    "MAX_SLICED_INDICES",
    "PATH_METHODS",
    "PAULIS",
    "EchoCone",
    "cone_network",
    "echo_cone",
    "echo_network",
    "echo_plan",
    "echo_value",
    "greedy_slicing",
    "layer_times",
    "parse_observable",
    "slice_within",
    "sweep_path",
]
