"""The Python entry points: ``plan``, ``amplitudes``, ``amplitude``, ``contract``.

Each goes frontend -> Network -> simplification -> path (cached) -> lifetime
ordering -> Plan -> executor.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .config import check_dtype, check_gemm, check_order, format_bytes
from .engine.batching import (
    BATCH_PLAN_SHARE,
    MAX_STARS,
    batches,
    open_positions,  # noqa: F401  (public: the batcher's grouping)
)
from .engine.cache import PLANS
from .engine.memory import (
    MemoryBudget,
    machine_memory,  # noqa: F401  (public since 0.1)
)
from .engine.options import RunOptions
from .engine.router import (
    MAX_STATEVECTOR_QUBITS,  # noqa: F401  (public since 0.1)
    METHODS,
    Route,
    contraction_price,
    fuse_for_network,
    route_amplitudes,
)
from .errors import BitstringError, InvalidInputError, PlanError, shorten
from .frontends import (
    MAX_EXPANDED,
    GateCircuit,
    amplitude_network,
    bitstring_at,
    bitstring_chunks,
    load,
    parse_bitstring,
)
from .network import Network
from .planner.path import PathOptions
from .planner.plan import Plan, make_plan
from .planner.simplify import DEFAULT_SEQUENCE, simplify

#: the route's record (kept under its first name for callers of 0.1)
RouteChoice = Route


def choose_route(circuit, bitstrings: str | Sequence[str], *, order: str = "qiskit",
                 dtype: str = "complex64", memory_limit: str | int | None = None,
                 method: str = "auto", executor: str = "local", backend: str = "numpy",
                 contractions: int | None = None) -> Route:
    """The route :func:`amplitudes` takes for these arguments (nothing is contracted).

    ``statevector`` where the state (and its workspace) fits a quarter of the
    memory limit and its predicted time is below the tensor-network route's;
    see :func:`qsimdist.engine.router.route_amplitudes`.
    """
    return route_amplitudes(_circuit(circuit), _bitstring_list(bitstrings), order=order,
                            dtype=check_dtype(dtype), budget=MemoryBudget.resolve(memory_limit),
                            method=method, executor=executor, backend=backend,
                            contractions=contractions)


def _statevector_amplitudes(gc: GateCircuit, bitstrings: list[str], order: str, dtype: str,
                            route: Route, progress) -> AmplitudeResult:
    """Every requested amplitude read from the full state (fused gates applied in order)."""
    from .engine.router import final_state
    from .executors.statevector import bitstring_amplitudes, pattern_amplitudes
    from .frontends import open_qubits
    from .frontends.fusion import fusion_info, statevector_flops

    t0 = time.perf_counter()
    width = route.fusion_width or 4
    state, fused, fuse_seconds = final_state(gc, dtype, route, progress)
    t1 = t0 + fuse_seconds
    fixed = [i for i, b in enumerate(bitstrings) if "*" not in b]
    values: list[np.ndarray | None] = [None] * len(bitstrings)
    picked = bitstring_amplitudes(state, [bitstrings[i] for i in fixed], order)
    for k, i in enumerate(fixed):
        values[i] = picked[k:k + 1].copy()
    for i, b in enumerate(bitstrings):
        if "*" in b:
            values[i] = pattern_amplitudes(state, parse_bitstring(b, gc.n_qubits, order),
                                           open_qubits(b, order))
    t2 = time.perf_counter()
    stats = {"method": "statevector", "flops": statevector_flops(fused),
             "plan_seconds": t1 - t0, "execute_seconds": t2 - t1,
             "peak_bytes": route.statevector_bytes or state.nbytes, "transposed_bytes": 0,
             "n_slices": 0, "path_cache_hits": 0, "contractions": 1, "plans_reused": 0,
             "fusion": fusion_info(gc, fused, width).to_dict(), "route": route.to_dict()}
    if progress is not None:
        progress("amplitudes", 1, 1)
    return AmplitudeResult(bitstrings, values, gc.n_qubits, dtype, order, stats)


def _circuit(source) -> GateCircuit:
    obj = load(source)
    if isinstance(obj, Network):
        raise InvalidInputError(
            "amplitudes need a circuit, but this input is a tensor network; use contract() "
            "(CLI: 'qsimdist plan NETWORK.json' / 'qsimdist run')"
        )
    return obj


def _bitstring_list(bitstrings) -> list[str]:
    """A string or an iterable of strings as a list; anything else is a BitstringError."""
    if isinstance(bitstrings, str):
        return [bitstrings]
    if isinstance(bitstrings, (bytes, bytearray)) or not isinstance(bitstrings, Iterable):
        raise BitstringError(
            f"bitstrings must be a string of 0, 1 and * or a list of such strings, got "
            f"{shorten(bitstrings)} ({type(bitstrings).__name__})"
        )
    out = list(bitstrings)
    for b in out:
        if not isinstance(b, str):
            raise BitstringError(
                f"each bitstring must be a string of 0, 1 and *, got {shorten(b)} "
                f"({type(b).__name__})"
            )
    return out


def _check_bitstrings(bitstrings: list[str], n_qubits: int, order: str) -> None:
    """Validate many bitstrings at once (the first bad one raises its own message)."""
    if all(len(b) == n_qubits for b in bitstrings) and set("".join(bitstrings)) <= set("01*"):
        return
    for b in bitstrings:
        parse_bitstring(b, n_qubits, order)


def covering_pattern(bitstrings: str | Sequence[str]) -> str:
    """One pattern with ``*`` wherever the given bitstrings differ."""
    bitstrings = _bitstring_list(bitstrings)
    if len(bitstrings) == 1:
        return bitstrings[0]
    if not bitstrings:
        raise BitstringError("no bitstrings given")
    first = bitstrings[0]
    lengths = {len(b) for b in bitstrings}
    if len(lengths) != 1:
        raise BitstringError(f"bitstrings have different lengths {sorted(lengths)}")
    chars = [
        "*" if any(b[k] != first[k] for b in bitstrings) else first[k] for k in range(len(first))
    ]
    return "".join(chars)


def check_fits(need: int, memory_limit, what: str) -> None:
    """Refuse (PlanError) when ``need`` bytes exceed the budget (``none``: the machine's memory)."""
    MemoryBudget.resolve(memory_limit).check(need, what)


def check_plan_fits(plan: Plan, memory_limit=None) -> None:
    """Refuse to execute ``plan`` when its peak exceeds what this machine may give it.

    ``memory_limit``: an explicit size, ``None`` for the default (a share of
    the memory available now), or ``"none"`` (physical memory + swap).
    """
    check_fits(plan.stats.peak_bytes, memory_limit,
               f"executing this plan (peak memory {format_bytes(plan.stats.peak_bytes)})")


def _check_output(n_open: int, dtype: str, memory_limit, bounded_none: bool = True) -> None:
    """Refuse a pattern whose output alone does not fit, before anything is built.

    ``bounded_none=False`` (planning only, e.g. for many devices): ``none`` means no bound.
    """
    if n_open > MAX_STARS:
        raise BitstringError(
            f"{n_open} open qubits would batch 2^{n_open} amplitudes; at most {MAX_STARS} '*' "
            "are allowed"
        )
    if not bounded_none and MemoryBudget.resolve(memory_limit).unbounded:
        return
    need = (1 << n_open) * np.dtype(dtype).itemsize
    check_fits(need, memory_limit, f"the output of {n_open} open qubits alone ({dtype})")


def _simplify(net: Network, seq: str, limit: int | None, dtype: str) -> Network:
    """Simplify ``net``; a cheap network is left as it is only when memory is no concern.

    Simplification also shrinks the leaves every slice loads, so under a
    memory limit that the unsimplified leaves would crowd, it always runs.
    """
    from .planner.simplify import CHEAP_SIZE

    itemsize = np.dtype(dtype).itemsize
    leaves = sum(math.prod(net.size_dict[i] for i in t) for t in net.inputs) * itemsize
    roomy = limit is None or 4 * (leaves + CHEAP_SIZE * itemsize) <= limit
    return simplify(net, seq, skip_cheap=roomy)


def _path_options(path_options, max_time, max_repeats) -> PathOptions:
    if isinstance(path_options, dict):
        path_options = PathOptions(**path_options)
    opts = path_options or PathOptions()
    if max_time is not None or max_repeats is not None:
        opts = dataclasses.replace(
            opts,
            max_repeats=max_repeats if max_repeats is not None else opts.max_repeats,
            max_time=max_time if max_time is not None else opts.max_time,
        )
    return opts


def plan(
    circuit,
    *,
    bitstrings: str | Sequence[str] | None = None,
    order: str = "qiskit",
    memory_limit: str | int | None = None,
    dtype: str = "complex64",
    simplify_sequence: str = DEFAULT_SEQUENCE,
    path_options: PathOptions | dict | None = None,
    max_time: float | None = None,
    max_repeats: int | None = None,
    progbar: bool = False,
    tree: str | os.PathLike | None = None,
) -> Plan:
    """Plan the contraction for ``circuit``'s amplitudes (or for a tensor network).

    Args:
        circuit: anything :func:`qsimdist.frontends.load` accepts.
        bitstrings: one bitstring (``*`` leaves a qubit open) or several, merged
            into one batched pattern with ``*`` where they differ. Default: all zeros.
        order: ``qiskit`` (rightmost character is qubit 0) or ``natural``.
        memory_limit: peak bytes allowed (``"8GiB"``, ``2e9``); slicing is added to fit.
        dtype: ``complex64`` or ``complex128``.
        simplify_sequence: quimb simplification letters ("" to skip).
        max_time, max_repeats: path-search budget (see :class:`PathOptions`).
        tree: a saved tree or path to plan along instead of searching (see
            :func:`qsimdist.planner.trees.load_tree`: a qsimdist tree or plan, an
            SSA or linear path, a pickled cotengra ``ContractionTree``); re-sliced
            along the same path where its slicing does not fit ``memory_limit``.
    """
    dtype = check_dtype(dtype)
    limit = MemoryBudget.resolve(memory_limit).limit
    opts = _path_options(path_options, max_time, max_repeats)
    net = plan_network(circuit, bitstrings=bitstrings, order=order, memory_limit=memory_limit,
                       dtype=dtype, simplify_sequence=simplify_sequence)
    if tree is None:
        return make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts,
                         progbar=progbar)
    from .planner.plan import build_plan, fit_to_memory
    from .planner.trees import load_tree

    given = load_tree(tree, net)
    meta = dict(net.meta, search_sliced=list(given.sliced), tree=str(tree))
    p = build_plan(net, given.ssa_path, given.sliced, dtype, meta=meta)
    if limit is not None and p.stats.peak_bytes > limit:
        p = fit_to_memory(net, given.ssa_path, limit, dtype, sliced=given.sliced)
        p.meta.update(meta)
        if p.stats.peak_bytes > limit:
            raise PlanError(
                f"memory limit {format_bytes(limit)} is too small for the tree in {tree}: "
                f"sliced along its path it still peaks at {format_bytes(p.stats.peak_bytes)}")
    return p


def plan_network(
    circuit,
    *,
    bitstrings: str | Sequence[str] | None = None,
    order: str = "qiskit",
    memory_limit: str | int | None = None,
    dtype: str = "complex64",
    simplify_sequence: str = DEFAULT_SEQUENCE,
) -> Network:
    """The (simplified) network :func:`plan` plans for ``circuit``'s amplitudes.

    Trees saved for it (``qsimdist search``) apply to every call that builds
    the same network: the same circuit, pattern, ``order`` and simplification.
    """
    dtype = check_dtype(dtype)
    check_order(order)
    limit = MemoryBudget.resolve(memory_limit).limit
    obj = load(circuit)
    if isinstance(obj, Network):
        if bitstrings is not None:
            raise InvalidInputError("bitstrings apply to circuits, not to a tensor network")
        net = obj
    else:
        pattern = covering_pattern(bitstrings if bitstrings is not None else "0" * obj.n_qubits)
        parse_bitstring(pattern, obj.n_qubits, order)
        _check_output(pattern.count("*"), dtype, memory_limit, bounded_none=False)
        net = amplitude_network(obj, pattern, order)
    if net.arrays is not None:
        net = _simplify(net, simplify_sequence, limit, dtype)
    return net


@dataclass
class AmplitudeResult:
    """Amplitudes of one or more bitstring patterns, kept as arrays.

    Entry ``i`` is the requested pattern ``patterns[i]`` with its
    ``2^k`` amplitudes ``values[i]`` (``k`` = its number of ``*``), in the
    order of :func:`~qsimdist.frontends.iter_bitstrings` (the leftmost ``*``
    is the most significant bit). Bitstrings are made on demand: look one up
    with :meth:`get`, name the ``j``-th with :meth:`bitstring`, or walk all of
    them in bounded memory with :meth:`items` or :meth:`chunks`.
    """

    patterns: list[str]
    values: list[np.ndarray]
    n_qubits: int
    dtype: str
    order: str
    stats: dict = field(default_factory=dict)
    _index: dict | None = field(default=None, init=False, repr=False, compare=False)
    _offsets: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def amplitudes(self) -> np.ndarray:
        """All amplitudes, pattern after pattern."""
        return np.concatenate(self.values) if self.values else np.zeros(0, complex)

    @property
    def bitstrings(self) -> list[str]:
        """The bitstring of every amplitude (refused over ``MAX_EXPANDED``; see :meth:`chunks`)."""
        if len(self) > MAX_EXPANDED:
            raise BitstringError(
                f"{len(self)} bitstrings are too many to list (at most {MAX_EXPANDED}); "
                "use items(), chunks() or bitstring(index)"
            )
        return [b for labels, _ in self.chunks() for b in labels]

    def __len__(self) -> int:
        return sum(v.size for v in self.values)

    def _starts(self) -> np.ndarray:
        if self._offsets is None:
            self._offsets = np.cumsum([0] + [v.size for v in self.values])
        return self._offsets

    def bitstring(self, index: int) -> str:
        """The bitstring of amplitude ``index`` (as in :attr:`amplitudes`), made on demand."""
        starts = self._starts()
        if not 0 <= index < starts[-1]:
            raise IndexError(f"index {index} is outside 0..{starts[-1] - 1}")
        entry = int(np.searchsorted(starts, index, side="right")) - 1
        return bitstring_at(self.patterns[entry], int(index - starts[entry]))

    def get(self, bitstring: str) -> complex:
        """The amplitude of ``bitstring`` from the first pattern that covers it."""
        if self._index is None:
            index: dict = {}
            for k, p in enumerate(self.patterns):
                if "*" not in p:
                    index.setdefault(p, k)
            self._index = index
        k = self._index.get(bitstring)
        if k is not None:
            return complex(self.values[k][0])
        for pattern, vals in zip(self.patterns, self.values):
            if "*" in pattern and len(pattern) == len(bitstring) and all(
                p == "*" or p == c for p, c in zip(pattern, bitstring)
            ):
                index = 0
                for p, c in zip(pattern, bitstring):
                    if p == "*":
                        index = 2 * index + (c == "1")
                return complex(vals[index])
        raise KeyError(f"{bitstring!r} is not covered by the computed patterns")

    __getitem__ = get

    def chunks(self, size: int = 1 << 12) -> Iterator[tuple[list[str], np.ndarray]]:
        """(bitstrings, amplitudes) in blocks of at most ``size``; memory bounded by one block."""
        run: list[int] = []

        def flush():
            vals = np.concatenate([self.values[k] for k in run])
            return [self.patterns[k] for k in run], vals

        for k, (pattern, vals) in enumerate(zip(self.patterns, self.values)):
            if "*" not in pattern and vals.size == 1:
                run.append(k)
                if len(run) == size:
                    yield flush()
                    run = []
                continue
            if run:
                yield flush()
                run = []
            start = 0
            for labels in bitstring_chunks(pattern, chunk=size):
                yield labels, vals[start:start + len(labels)]
                start += len(labels)
        if run:
            yield flush()

    def items(self) -> Iterator[tuple[str, complex]]:
        """Pairs (bitstring, amplitude), made lazily block by block."""
        for labels, vals in self.chunks():
            yield from zip(labels, vals)

    def to_dict(self) -> dict:
        """Plain data (refused over ``MAX_EXPANDED`` amplitudes: stream with :meth:`chunks`)."""
        if len(self) > MAX_EXPANDED:
            raise InvalidInputError(
                f"{len(self)} amplitudes are too many for one dict (at most {MAX_EXPANDED}); "
                "write them block by block with chunks()"
            )
        return {
            "n_qubits": self.n_qubits,
            "dtype": self.dtype,
            "order": self.order,
            "amplitudes": [
                {"bitstring": b, "re": float(a.real), "im": float(a.imag)} for b, a in self.items()
            ],
            "stats": self.stats,
        }


def _plan_batch(net: Network, dtype: str, limit: int | None, opts: PathOptions,
                chosen: bool) -> Plan:
    """Plan one contraction; a batch qsimdist chose itself must peak within a quarter of the limit.

    The local executor keeps up to twice the plan's peak in free buffers beside
    the live peak (executors/local.py BufferPool), and the arrays already held
    need room too; a batch's width is ours to choose, not the user's. The plan
    made against the whole limit is kept when its own peak is that small
    (planning against a quarter can pick a costlier path: 1.3x the FLOPs and
    8.7 GB of transposes on the n30 reference batches); otherwise the batch is
    re-planned within the quarter (the path search is cached by structure).
    """
    full = make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts)
    if not chosen or limit is None or BATCH_PLAN_SHARE * full.stats.peak_bytes <= limit:
        return full
    try:
        return make_plan(net, dtype=dtype, memory_limit=limit // BATCH_PLAN_SHARE,
                         path_options=opts)
    except PlanError:
        return full


def amplitudes(
    circuit,
    bitstrings: str | Sequence[str],
    *,
    order: str = "qiskit",
    dtype: str = "complex64",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    simplify_sequence: str = DEFAULT_SEQUENCE,
    path_options: PathOptions | dict | None = None,
    max_time: float | None = None,
    max_repeats: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    batch: bool = True,
    executor: str = "local",
    profile=None,
    comm=None,
    method: str = "auto",
    gemm: str = "complex",
) -> AmplitudeResult:
    """Amplitudes ``<b|U|0>`` for each bitstring; ``*`` characters expand to all values.

    Each pattern with ``*`` is one contraction whose result stays an array.
    Bitstrings without ``*`` are batched (``batch=True``): those that agree
    on most characters share one contraction with the differing characters
    open, and their amplitudes are picked out of its array. The width of the
    batches is chosen by a cost model (:func:`open_positions` groups, each
    contraction's fixed cost against ``2^k`` outputs) within the memory
    limit. Contractions with the same network structure reuse one plan.
    ``progress(stage, done, total)`` reports contractions done.

    Before anything is built, a pattern whose output alone exceeds the memory
    limit is refused; before executing, a plan whose peak exceeds it is refused
    (``memory_limit="none"``: this machine's physical memory + swap).

    ``executor="mpi"`` (run every rank of ``mpiexec`` through this same call)
    plans each contraction once on rank 0 for the ranks of ``comm`` (default
    ``MPI.COMM_WORLD``) with hardware ``profile`` (default ``"local-cpu"``),
    ``memory_limit`` being the limit *per rank*; the plan is broadcast and
    its distributed schedule run on every rank, which all return the result.

    ``method``: ``"auto"`` (default) takes the route :func:`choose_route`
    predicts cheaper: ``"statevector"`` (fused gates applied to the full
    state in circuit order, where the state fits the memory limit; every
    requested amplitude is read from that one state) or ``"tensor-network"``
    (the contractions above). ``stats["method"]`` names the route taken and
    ``stats["route"]`` the predictions behind it.

    ``gemm``: how the tensor-network route's BLAS steps multiply (``"complex"``,
    ``"3m"``; ``"tf32"`` and ``"3m-tf32"`` with ``backend="cupy"``), see
    :func:`qsimdist.executors.local.execute`; the statevector route ignores it.
    """
    if method not in METHODS:
        raise InvalidInputError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    check_order(order)
    run_options = RunOptions.resolve(dtype=dtype, memory_limit=memory_limit, backend=backend,
                                     executor=executor, comm=comm, gemm=gemm)
    dtype = run_options.dtype
    opts = _path_options(path_options, max_time, max_repeats)
    common = dict(order=order, dtype=dtype, simplify_sequence=simplify_sequence, opts=opts,
                  progress=progress, batch=batch, method=method)
    if executor == "mpi":
        return distributed_amplitudes(circuit, bitstrings, memory_limit=run_options.memory,
                                      backend=backend, comm=run_options.comm, profile=profile,
                                      gemm=gemm, **common)
    budget = run_options.memory
    gc, bitstrings = _amplitude_inputs(circuit, bitstrings, dtype, order, budget)
    route = route_amplitudes(gc, bitstrings, order=order, dtype=dtype, budget=budget,
                             method=method, backend=backend)
    if route.method == "statevector":
        return _statevector_amplitudes(gc, bitstrings, order, dtype, route, progress)

    def make(net: Network, chosen: bool) -> Plan:
        p = _plan_batch(net, dtype, budget.limit, opts, chosen=chosen)
        # the bound fixed at the start: a default re-read mid-run would shrink with our arrays
        check_plan_fits(p, budget)
        return p

    def run(p: Plan):
        return p.execute(backend=backend, gemm=gemm)

    return _network_amplitudes(gc, bitstrings, route, budget, make, run, **common)


def _amplitude_inputs(circuit, bitstrings, dtype: str, order: str,
                      memory_limit) -> tuple[GateCircuit, list[str]]:
    """The circuit and validated bitstrings; a pattern whose output cannot fit is refused."""
    bitstrings = _bitstring_list(bitstrings)
    if not bitstrings:
        raise BitstringError("no bitstrings given")
    gc = _circuit(circuit)
    _check_bitstrings(bitstrings, gc.n_qubits, order)
    for b in bitstrings:
        if "*" in b:
            _check_output(b.count("*"), dtype, memory_limit)
    return gc, bitstrings


def _network_amplitudes(gc: GateCircuit, bitstrings: list[str], route: Route,
                        budget: MemoryBudget, make: Callable[[Network, bool], Plan],
                        run: Callable[[Plan], object], *, order: str, dtype: str,
                        simplify_sequence: str, opts: PathOptions, progress, batch: bool,
                        method: str, variant: tuple = ("local",)) -> AmplitudeResult:
    """The tensor-network route: one contraction per pattern or batch of bitstrings.

    ``make(network, chosen)`` plans a contraction (``chosen``: a batch qsimdist
    chose itself) and ``run(plan)`` executes it; contractions with the same
    network structure reuse one plan from the process's plan cache
    (:data:`qsimdist.engine.cache.PLANS`, keyed with ``variant``: what else
    changes the plan ``make`` builds).
    """
    gc_net = fuse_for_network(gc)
    # work items: (pattern, [(slot in the result, offsets in its array or None for all)])
    fixed = [i for i, b in enumerate(bitstrings) if "*" not in b]
    work: list[tuple[str, list[int], list[int] | None]] = [
        (b, [i], None) for i, b in enumerate(bitstrings) if "*" in b
    ]
    grouping: dict = {}
    if fixed and batch:
        price = contraction_price(gc, order)
        for pattern, idx, offs in batches(gc, [bitstrings[i] for i in fixed], dtype, budget,
                                          price=price, report=grouping):
            work.append((pattern, [fixed[i] for i in idx], offs))
    elif fixed:
        work.extend((bitstrings[i], [i], [0]) for i in fixed)

    values: list[np.ndarray | None] = [None] * len(bitstrings)
    picked = np.zeros(len(fixed), dtype=dtype)
    slot_of = {i: k for k, i in enumerate(fixed)}
    totals = {"method": "tensor-network", "route": route.to_dict(), "flops": 0.0,
              "plan_seconds": 0.0, "execute_seconds": 0.0, "peak_bytes": 0,
              "transposed_bytes": 0, "n_slices": 0, "path_cache_hits": 0, "contractions": 0,
              "plans_reused": 0}
    if grouping:
        totals["batching"] = grouping
    for done, (pattern, slots, offs) in enumerate(work, start=1):
        t0 = time.perf_counter()
        net = _simplify(amplitude_network(gc_net, pattern, order), simplify_sequence,
                        budget.limit, dtype)
        chosen = offs is not None and "*" in pattern
        p, reused = PLANS.get(net, dtype=dtype, limit=budget.limit, path_options=opts,
                              variant=(variant, chosen),
                              build=lambda net=net, chosen=chosen: make(net, chosen))
        if reused:
            totals["plans_reused"] += 1
        else:
            totals["path_cache_hits"] += int(p.stats.path_from_cache)
        t1 = time.perf_counter()
        v = np.asarray(_to_numpy(run(p))).reshape(-1)
        t2 = time.perf_counter()
        if offs is None:
            values[slots[0]] = v
        else:
            picked[[slot_of[i] for i in slots]] = v[np.asarray(offs, dtype=np.int64)]
        totals["flops"] += p.stats.flops
        totals["plan_seconds"] += t1 - t0
        totals["execute_seconds"] += t2 - t1
        totals["peak_bytes"] = max(totals["peak_bytes"], p.stats.peak_bytes)
        totals["transposed_bytes"] += p.stats.transposed_bytes
        totals["n_slices"] += p.stats.n_slices
        totals["contractions"] += 1
        if progress is not None:
            progress("amplitudes", done, len(work))
    for k, i in enumerate(fixed):
        values[i] = picked[k:k + 1]
    return AmplitudeResult(bitstrings, values, gc.n_qubits, dtype, order, totals)


def distributed_amplitudes(circuit, bitstrings, *, memory_limit=None, backend: str = "numpy",
                           comm=None, profile=None, gemm: str = "complex", order: str = "qiskit",
                           dtype: str = "complex64", simplify_sequence: str = DEFAULT_SEQUENCE,
                           opts: PathOptions | None = None, progress=None, batch: bool = True,
                           method: str = "auto") -> AmplitudeResult:
    """:func:`amplitudes` on every rank of ``comm``; rank 0 leads, the others follow.

    Only rank 0 reads ``circuit`` and ``bitstrings`` (the other ranks may pass
    ``None``); ``bitstrings`` may also be a callable ``f(n_qubits) -> list`` run
    on rank 0. Rank 0 validates, routes and plans; each contraction's plan
    (with its distributed schedule for the ranks of ``comm`` on ``profile``,
    default ``"local-cpu"``) is sent to every rank and executed together.
    Where the statevector route fits one rank's memory limit and is predicted
    faster, rank 0 takes it alone. ``memory_limit`` is per rank (default: the
    host's available memory shared by its ranks, see
    :class:`qsimdist.engine.MemoryBudget`). Every rank returns the
    result; ``stats["ranks"]`` holds each rank's measured bytes and memory.
    """
    from .engine.distributed import Coordinator, distribute, profile_for, world
    from .executors.mpi import RunStats, agreed_fault, fault_point

    comm = comm if comm is not None else world()
    opts = opts if opts is not None else PathOptions()
    agreed_fault(comm)
    fault_point("start", comm)
    budget = MemoryBudget.resolve(memory_limit, comm)
    mine = budget.limit
    known = [lim for lim in comm.allgather(mine) if lim is not None]
    limit = min(known) if known else None  # rank 0 plans for the tightest rank
    if limit is not None and limit != mine:
        budget = dataclasses.replace(budget, limit=limit, bound=limit)
    per_rank: dict = {}

    def run(p: Plan):
        stats = RunStats()
        value = p.execute(backend=backend, executor="mpi", comm=comm, memory_limit=mine,
                          stats=stats, gemm=gemm)
        _merge_rank_stats(per_rank, comm.allgather(stats.to_dict()), p)
        return value

    coordinator = Coordinator(comm, run)
    if comm.Get_rank() != 0:
        return coordinator.follow()

    def body(execute) -> AmplitudeResult:
        prof = profile_for(profile or "local-cpu", limit)
        gc = _circuit(circuit)
        bits = bitstrings(gc.n_qubits) if callable(bitstrings) else bitstrings
        gc, bits = _amplitude_inputs(gc, bits, dtype, order, budget)
        route = route_amplitudes(gc, bits, order=order, dtype=dtype, budget=budget,
                                 method=method, backend=backend)
        if route.method == "statevector":
            res = _statevector_amplitudes(gc, bits, order, dtype, route, progress)
            res.stats["route"]["reason"] += " (rank 0 alone)"
            return res

        def make(net: Network, chosen: bool) -> Plan:
            one = make_plan(net, dtype=dtype, memory_limit=None, path_options=opts)
            return distribute(one, prof, comm.Get_size())

        res = _network_amplitudes(gc, bits, route, budget, make, execute, order=order,
                                  dtype=dtype, simplify_sequence=simplify_sequence, opts=opts,
                                  progress=progress, batch=batch, method=method,
                                  variant=("mpi", prof.name, prof.memory_bytes,
                                           comm.Get_size()))
        res.stats["ranks"] = [per_rank[r] for r in sorted(per_rank)]
        return res

    return coordinator.lead(body)


def _merge_rank_stats(per_rank: dict, gathered: list[dict], plan: Plan) -> None:
    """Fold each rank's measured bytes and peak into ``per_rank`` (one contraction's worth)."""
    sched = plan.schedule
    for st in gathered:
        row = per_rank.setdefault(st["rank"], {
            "rank": st["rank"], "measured_peak_bytes": 0, "predicted_peak_bytes": 0,
            "guarded_bytes": 0, "array_peak_bytes": 0, "rss_growth_bytes": 0,
            "traced_peak_bytes": -1, "traced_array_bytes": -1, "rss_before_bytes": 0,
            "sent_bytes": 0, "recv_bytes": 0, "redistributions": 0, "seconds": 0.0})
        row["measured_peak_bytes"] = max(row["measured_peak_bytes"], st["peak_bytes"])
        row["predicted_peak_bytes"] = max(row["predicted_peak_bytes"],
                                          sched.predicted.peak_bytes_per_device if sched else 0)
        for key in ("guarded_bytes", "array_peak_bytes", "rss_growth_bytes",
                    "traced_peak_bytes", "traced_array_bytes", "rss_before_bytes"):
            row[key] = max(row[key], st.get(key, -1))
        for key in ("sent_bytes", "recv_bytes", "redistributions", "seconds"):
            row[key] += st[key]


def amplitude(circuit, bitstring: str, **kwargs) -> complex:
    """One amplitude ``<bitstring|U|0>`` (no ``*``); keywords as :func:`amplitudes`."""
    if not isinstance(bitstring, str):
        raise BitstringError(
            f"bitstring must be a string of 0 and 1, got {shorten(bitstring)} "
            f"({type(bitstring).__name__})"
        )
    if "*" in bitstring:
        raise BitstringError(f"amplitude() takes a bitstring without '*', got {bitstring!r}")
    return complex(amplitudes(circuit, [bitstring], **kwargs).amplitudes[0])


def contract(
    network,
    *,
    output_inds=None,
    dtype: str = "complex64",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    simplify_sequence: str = "",
    path_options: PathOptions | dict | None = None,
    gemm: str = "complex",
):
    """Contract a tensor network (a :class:`Network`, cotengra JSON path, or quimb network).

    A quimb ``TensorNetwork`` is converted by
    :func:`~qsimdist.frontends.network_from_quimb`, as :func:`qsimdist.quimb.contract`
    converts it: the result's axes follow ``output_inds`` (quimb networks
    only) in the order given, by default quimb's output (indices on exactly
    one tensor, in order of first appearance). The network's ``exponent``
    (kept as ``meta["exponent"]``, log10; a :class:`Network` may carry one
    too) multiplies the result by ``10**exponent``; the plan then runs with
    its intermediates rescaled, so the value is right even where the
    contraction without the exponent would overflow or underflow.

    ``gemm``: the executor's GEMM mode (see :func:`qsimdist.executors.local.execute`).
    """
    from .frontends.quimb_network import EXPONENT_KEY, times_ten_to

    dtype = check_dtype(dtype)
    check_gemm(gemm, backend, dtype)
    if output_inds is not None:
        if not (type(network).__module__ or "").startswith("quimb"):
            raise InvalidInputError(
                "output_inds is for quimb networks; a Network or network file carries its own "
                "output"
            )
        from .frontends import network_from_quimb

        obj = network_from_quimb(network, output_inds)
    else:
        obj = load(network)
    if not isinstance(obj, Network):
        raise InvalidInputError("contract() takes a tensor network; for circuits use amplitudes()")
    exponent = obj.meta.get(EXPONENT_KEY) or 0.0
    real = (int, float, np.integer, np.floating)
    if isinstance(exponent, bool) or not isinstance(exponent, real) or not math.isfinite(exponent):
        raise InvalidInputError(
            f"meta['{EXPONENT_KEY}'] is {shorten(exponent)}; it must be a finite number (log10)"
        )
    p = plan(obj, memory_limit=memory_limit, dtype=dtype, simplify_sequence=simplify_sequence,
             path_options=path_options)
    check_plan_fits(p, memory_limit)
    if not exponent:
        return p.execute(backend=backend, gemm=gemm)
    mantissa, found = p.execute(backend=backend, gemm=gemm, strip_exponent=True)
    return times_ten_to(mantissa, found + float(exponent))


def _to_numpy(a):
    return a.get() if hasattr(a, "get") else a
