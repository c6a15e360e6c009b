"""Amplitudes on either route: the work behind :func:`qsimdist.amplitudes`.

The entry points (:mod:`qsimdist.api`, the CLI, the Qiskit primitives) resolve
their options and call in here:

* :func:`amplitude_inputs` — the circuit and validated bitstrings, a pattern
  whose output cannot fit refused before anything is built;
* :func:`statevector_amplitudes` — every amplitude read from one full state;
* :func:`network_amplitudes` — one contraction per pattern or chosen batch of
  bitstrings, plans shared through :data:`qsimdist.engine.cache.PLANS`;
* :func:`distributed_amplitudes` — the same under ``mpiexec``: rank 0 routes
  and plans, every rank runs;
* :func:`check_output`: a pattern whose output alone cannot fit is refused
  (through the memory guard every door shares, :mod:`qsimdist.engine.memory`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..errors import BitstringError, InvalidInputError, shorten
from ..frontends import GateCircuit, amplitude_network, load, parse_bitstring
from ..network import Network
from ..planner.path import PathOptions
from ..planner.plan import Plan, make_plan
from ..planner.simplify import DEFAULT_SEQUENCE, simplify_within
from .batching import MAX_STARS, batches, plan_batch
from .cache import PLANS
from .memory import MemoryBudget, check_fits
from .options import RunOptions
from .results import AmplitudeResult
from .router import (
    CircuitCache,
    Route,
    circuit_cache,
    contraction_price,
    fuse_for_network,
    route_amplitudes,
)


def load_circuit(source) -> GateCircuit:
    obj = load(source)
    if isinstance(obj, Network):
        raise InvalidInputError(
            "amplitudes need a circuit, but this input is a tensor network; use contract() "
            "(CLI: 'qsimdist plan NETWORK.json' / 'qsimdist run')"
        )
    return obj


def bitstring_list(bitstrings) -> list[str]:
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


def check_bitstrings(bitstrings: list[str], n_qubits: int, order: str) -> None:
    """Validate many bitstrings at once (the first bad one raises its own message)."""
    if all(len(b) == n_qubits for b in bitstrings) and set("".join(bitstrings)) <= set("01*"):
        return
    for b in bitstrings:
        parse_bitstring(b, n_qubits, order)


def covering_pattern(bitstrings: str | Sequence[str]) -> str:
    """One pattern with ``*`` wherever the given bitstrings differ."""
    bitstrings = bitstring_list(bitstrings)
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


def check_output(n_open: int, dtype: str, memory_limit, bounded_none: bool = True) -> None:
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


def statevector_amplitudes(gc: GateCircuit, bitstrings: list[str], order: str, dtype: str,
                            route: Route, progress,
                            cache: CircuitCache | None = None) -> AmplitudeResult:
    """Every requested amplitude read from the full state (fused gates applied in order;
    ``cache``: the router's, whose fusion structure is reused)."""
    from ..executors import bitstring_amplitudes, pattern_amplitudes
    from ..frontends import open_qubits
    from ..frontends.fusion import fusion_info, statevector_flops
    from .statevector_run import final_state

    t0 = time.perf_counter()
    width = route.fusion_width or 4
    state, fused, fuse_seconds = final_state(gc, dtype, route, progress, cache=cache)
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


def amplitude_inputs(circuit, bitstrings, dtype: str, order: str,
                      memory_limit) -> tuple[GateCircuit, list[str]]:
    """The circuit and validated bitstrings; a pattern whose output cannot fit is refused."""
    bitstrings = bitstring_list(bitstrings)
    if not bitstrings:
        raise BitstringError("no bitstrings given")
    gc = load_circuit(circuit)
    check_bitstrings(bitstrings, gc.n_qubits, order)
    for b in bitstrings:
        if "*" in b:
            check_output(b.count("*"), dtype, memory_limit)
    return gc, bitstrings


def network_amplitudes(gc: GateCircuit, bitstrings: list[str], route: Route,
                        budget: MemoryBudget, make: Callable[[Network, bool], Plan],
                        run: Callable[[Plan], object], *, order: str, dtype: str,
                        simplify_sequence: str, opts: PathOptions, progress, batch: bool,
                        method: str, variant: tuple = ("local",),
                        cache: CircuitCache | None = None) -> AmplitudeResult:
    """The tensor-network route: one contraction per pattern or batch of bitstrings.

    ``make(network, chosen)`` plans a contraction (``chosen``: a batch qsimdist
    chose itself) and ``run(plan)`` executes it; contractions with the same
    network structure reuse one plan from the process's plan cache
    (:data:`qsimdist.engine.cache.PLANS`, keyed with ``variant``: what else
    changes the plan ``make`` builds). ``cache``: the router's (the circuit fused for the
    network and the batch prices, worked out once).
    """
    cache = circuit_cache(gc, cache)
    gc_net = fuse_for_network(gc, cache)
    # work items: (pattern, [(slot in the result, offsets in its array or None for all)])
    fixed = [i for i, b in enumerate(bitstrings) if "*" not in b]
    work: list[tuple[str, list[int], list[int] | None]] = [
        (b, [i], None) for i, b in enumerate(bitstrings) if "*" in b
    ]
    grouping: dict = {}
    if fixed and batch:
        price = contraction_price(gc, order, cache)
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
        net = simplify_within(amplitude_network(gc_net, pattern, order), simplify_sequence,
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
        v = np.asarray(to_numpy(run(p))).reshape(-1)
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
                           method: str = "auto", collectives: str = "auto") -> AmplitudeResult:
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
    ``collectives``: how the ranks exchange arrays (``"auto"``, ``"mpi"``,
    ``"nccl"``; see :func:`qsimdist.executors.comm.choose_collectives`); the
    choice made is ``stats["comm"]`` (and each rank's ``"comm"``).
    """
    from ..executors import (
        RunStats,
        agreed_fault,
        check_comm_choice,
        check_nccl_backend,
        fault_point,
    )
    from .coordination import Coordinator, distribute, profile_for, world

    check_comm_choice(collectives)  # alike on every rank, before any collective
    check_nccl_backend(collectives, backend)
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
                          stats=stats, gemm=gemm, collectives=collectives)
        merge_rank_stats(per_rank, comm.allgather(stats.to_dict()), p)
        return value

    coordinator = Coordinator(comm, run)
    if comm.Get_rank() != 0:
        return coordinator.follow()

    def body(execute) -> AmplitudeResult:
        prof = profile_for(profile or "local-cpu", limit)
        gc = load_circuit(circuit)
        bits = bitstrings(gc.n_qubits) if callable(bitstrings) else bitstrings
        gc, bits = amplitude_inputs(gc, bits, dtype, order, budget)
        cache = CircuitCache(gc)
        route = route_amplitudes(gc, bits, order=order, dtype=dtype, budget=budget,
                                 method=method, backend=backend, cache=cache)
        if route.method == "statevector":
            res = statevector_amplitudes(gc, bits, order, dtype, route, progress, cache)
            res.stats["route"]["reason"] += " (rank 0 alone)"
            return res

        def make(net: Network, chosen: bool) -> Plan:
            one = make_plan(net, dtype=dtype, memory_limit=None, path_options=opts)
            return distribute(one, prof, comm.Get_size())

        res = network_amplitudes(gc, bits, route, budget, make, execute, order=order,
                                  dtype=dtype, simplify_sequence=simplify_sequence, opts=opts,
                                  progress=progress, batch=batch, method=method,
                                  variant=("mpi", prof.name, prof.memory_bytes,
                                           comm.Get_size()), cache=cache)
        res.stats["ranks"] = [per_rank[r] for r in sorted(per_rank)]
        if per_rank:  # the collectives the contractions ran with (one choice per run)
            res.stats["comm"] = per_rank[min(per_rank)]["comm"]
        return res

    return coordinator.lead(body)


def merge_rank_stats(per_rank: dict, gathered: list[dict], plan: Plan) -> None:
    """Fold each rank's measured bytes and peak into ``per_rank`` (one contraction's worth)."""
    sched = plan.schedule
    for st in gathered:
        row = per_rank.setdefault(st["rank"], {
            "rank": st["rank"], "measured_peak_bytes": 0, "predicted_peak_bytes": 0,
            "guarded_bytes": 0, "array_peak_bytes": 0, "rss_growth_bytes": 0,
            "traced_peak_bytes": -1, "traced_array_bytes": -1, "rss_before_bytes": 0,
            "sent_bytes": 0, "recv_bytes": 0, "redistributions": 0, "seconds": 0.0,
            "slices": 0, "step_runs": 0, "step_runs_without_reuse": 0, "kept_outputs": 0,
            "blas_threads": 0, "comm": st.get("comm", "mpi")})
        row["measured_peak_bytes"] = max(row["measured_peak_bytes"], st["peak_bytes"])
        row["predicted_peak_bytes"] = max(row["predicted_peak_bytes"],
                                          sched.predicted.peak_bytes_per_device if sched else 0)
        for key in ("guarded_bytes", "array_peak_bytes", "rss_growth_bytes",
                    "traced_peak_bytes", "traced_array_bytes", "rss_before_bytes",
                    "blas_threads"):
            row[key] = max(row[key], st.get(key, -1))
        for key in ("sent_bytes", "recv_bytes", "redistributions", "seconds", "slices"):
            row[key] += st[key]
        # steps run, against one run of every step per slice: kept outputs reused make it less
        row["step_runs"] += sum(st["step_runs"])
        row["step_runs_without_reuse"] += st["slices"] * len(plan.steps)
        row["kept_outputs"] = max(row["kept_outputs"], len(sched.kept) if sched else 0)


def to_numpy(a):
    return a.get() if hasattr(a, "get") else a


def run_amplitudes(circuit, bitstrings, run: RunOptions, *, order: str = "qiskit",
                   simplify_sequence: str = DEFAULT_SEQUENCE, opts: PathOptions | None = None,
                   progress=None, batch: bool = True, method: str = "auto") -> AmplitudeResult:
    """:func:`qsimdist.amplitudes` once its options are resolved (``run``): routed, planned,
    executed here or, on a distributed executor (``run.distributed``), on every rank of
    ``run.comm``."""
    opts = opts if opts is not None else PathOptions()
    dtype = run.dtype
    common = dict(order=order, dtype=dtype, simplify_sequence=simplify_sequence, opts=opts,
                  progress=progress, batch=batch, method=method)
    if run.distributed:
        return distributed_amplitudes(circuit, bitstrings, memory_limit=run.memory,
                                      backend=run.backend, comm=run.comm, profile=run.profile,
                                      gemm=run.gemm, collectives=run.collectives, **common)
    budget = run.memory
    gc, bitstrings = amplitude_inputs(circuit, bitstrings, dtype, order, budget)
    cache = CircuitCache(gc)  # routing's work (fusion structures, prices) kept for the run
    route = route_amplitudes(gc, bitstrings, order=order, dtype=dtype, budget=budget,
                             method=method, backend=run.backend, cache=cache)
    if route.method == "statevector":
        return statevector_amplitudes(gc, bitstrings, order, dtype, route, progress, cache)

    def make(net: Network, chosen: bool) -> Plan:
        p = plan_batch(net, dtype, budget.limit, opts, chosen=chosen)
        # the bound fixed at the start: a default re-read mid-run would shrink with our arrays
        budget.check_plan(p)
        return p

    def execute(p: Plan):
        return p.execute(backend=run.backend, gemm=run.gemm)

    return network_amplitudes(gc, bitstrings, route, budget, make, execute, cache=cache,
                              **common)
