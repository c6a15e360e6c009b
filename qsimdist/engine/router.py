"""The router: one cost model prices every engine for what is asked, and picks the cheapest.

Engines:

* ``statevector``: the fused gates applied to the full ``2^n`` state in circuit
  order (one process, numpy), then what is asked is read off the state:
  amplitudes, the measured qubits' marginal to draw shots from (its cost does
  not grow with the shots), Pauli terms' values;
* the tensor-network methods (local), each priced by its own module
  (amplitude batches here; :mod:`qsimdist.engine.network_sampling` and
  :mod:`qsimdist.engine.expectation` for theirs) in the same unit, predicted seconds;
* ``stabilizer``: a Clifford circuit on stim's tableau / frame simulators
  (:mod:`qsimdist.engine.stabilizer`, priced there by ``stabilizer_seconds``:
  polynomial in the width, so it wins nearly always; :func:`route_stabilizer`
  takes it before the others are priced where its price is below their floors,
  :func:`prefer_stabilizer` after);
* the tensor network distributed under MPI (``executor="mpi"``: every rank
  follows rank 0's plans; the statevector route runs in one process and is not
  taken there, except by the amplitude command where the state fits one rank).

The statevector engine is taken only where the state and its workspace fit a
quarter of the memory budget (the reserve a batch qsimdist chooses keeps) and
the array backend is numpy. Every result's metadata carries the
:class:`Route` it took (``to_dict()``), predictions labelled as such.

The router only prices: the statevector route runs in
:mod:`qsimdist.engine.statevector_run`, the readers of the state in the
modules of the request (amplitudes, sampling, expectation values).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError, PlanError
from ..executors import executor_kind
from ..frontends import GateCircuit, amplitude_network
from ..hardware import costs
from ..network import Network
from .batching import BATCH_PLAN_SHARE, batches
from .memory import MemoryBudget
from .route import DynamicRoute, Route

if TYPE_CHECKING:
    from .dynamic_prices import TrajectoryPrices
    from .options import RunOptions

#: widest circuit the statevector route takes (2^40 amplitudes: 16 TiB in complex128)
MAX_STATEVECTOR_QUBITS = 40
#: amplitude routes: ``auto`` picks one by predicted cost
METHODS = ("auto", "statevector", "tensor-network")
#: circuits with more gates than this are fused (width 2, diagonal runs kept diagonal)
#: before their tensor network is built, so simplification sees fewer tensors
TN_FUSE_MIN_GATES = 1000


def tn_floor(n_gates: int, contractions: int) -> float:
    """Seconds the tensor-network route spends at least, whatever its path costs."""
    from ..planner.simplify import CHEAP_MAX_TENSORS

    per_gate = (costs.TN_SECONDS_PER_GATE if n_gates <= CHEAP_MAX_TENSORS
                else costs.TN_SIMPLIFY_SECONDS_PER_GATE)
    return contractions * per_gate * max(n_gates, 1)


def greedy_cost(net: Network) -> float:
    """Multiply-adds of cotengra's greedy path for ``net`` (path only: no ContractionTree).

    The path comes from cotengrust, the Rust greedy cotengra's ``"greedy"`` runs
    (the same path), called directly where installed: importing cotengra itself costs
    about 0.07 s, a tenth of a small circuit's first amplitude when the statevector
    route wins.
    """
    if net.num_tensors < 2:
        return 0.0
    try:
        from cotengrust import optimize_greedy
    except ImportError:
        import cotengra as ctg

        inputs, output, size_dict, _ = net.symbolic()
        path = ctg.array_contract_path(inputs, output, size_dict=size_dict, optimize="greedy")
    else:
        # cotengrust takes one character per index: number them, skipping surrogates
        sym: dict = {}
        for t in (*net.inputs, net.output):
            for i in t:
                if i not in sym:
                    c = 0x100 + len(sym)
                    sym[i] = chr(c if c < 0xD800 else c + 0x800)
        inputs = [[sym[i] for i in t] for t in net.inputs]
        output = [sym[i] for i in net.output]
        size_dict = {sym[i]: d for i, d in net.size_dict.items() if i in sym}
        path = optimize_greedy(inputs, output, size_dict)
    live = [frozenset(t) for t in inputs]
    keep = set(output)
    count: dict[str, int] = {}
    for t in live:
        for i in t:
            count[i] = count.get(i, 0) + 1
    cost = 0.0
    for a, b in path:
        a, b = sorted((a, b))
        x, y = live.pop(b), live.pop(a)
        union = x | y
        cost += math.prod(size_dict[i] for i in union)
        for i in x & y:
            count[i] -= 1
        out = frozenset(i for i in union if i in keep or count[i] > 1)
        for i in union - out:
            count[i] -= 1
        live.append(out)
    return cost


class CircuitCache:
    """What one request works out about its circuit once, shared by routing and running.

    The tensor-network side: the circuit fused for the network
    (:func:`fuse_for_network`) and that fusion's block structure (counted for
    the route's floor before anything is fused), and the contraction price of each
    pattern (:func:`contraction_price`, per bit order). The statevector side: the fusion
    block structures the router priced, per width, which
    :func:`~qsimdist.engine.statevector_run.final_state` fuses from at the chosen width.
    Tied to one circuit (:func:`circuit_cache` makes a fresh one for any other); the
    circuit must not change while it is in use.
    """

    def __init__(self, gc: GateCircuit) -> None:
        self.gc = gc
        self.network_blocks: list | None = None
        self.network_circuit: GateCircuit | None = None
        self.prices: dict[str, object] = {}
        self.statevector_blocks: dict[int, list] = {}


def circuit_cache(gc: GateCircuit, cache: CircuitCache | None) -> CircuitCache:
    """``cache`` where it belongs to ``gc``, else a fresh one."""
    return cache if cache is not None and cache.gc is gc else CircuitCache(gc)


def tn_seconds(gc: GateCircuit, pattern: str, order: str, contractions: int,
               cache: CircuitCache | None = None) -> float:
    """Predicted seconds of the tensor-network route: per contraction, the greedy path's
    multiply-adds at ``TN_RATE`` plus the per-gate floor (one pattern's price: ``cache``'s
    :func:`contraction_price`, where it priced that pattern already)."""
    return contractions * contraction_price(gc, order, cache)(pattern)


def contraction_price(gc: GateCircuit, order: str, cache: CircuitCache | None = None):
    """``price(pattern)``: predicted seconds of one contraction of ``gc``'s amplitudes for
    ``pattern`` (greedy path at :data:`~qsimdist.hardware.costs.TN_RATE` plus the per-gate
    floor), as :func:`tn_seconds` prices them; the batcher weighs batch widths with it.

    With ``cache``, the same function (its prices kept) for every call on one request."""
    cache = circuit_cache(gc, cache)
    found = cache.prices.get(order)
    if found is not None:
        return found
    from ..planner.simplify import CHEAP_COST, CHEAP_MAX_TENSORS

    fused = fuse_for_network(gc, cache)
    floor = tn_floor(len(fused.gates), 1)
    # a network of few tensors is simplified too where it is not cheap as it is (the
    # floor then counts simplification's price, not the cheap one): MQT Bench's 17-qubit
    # cumulative multiplier spent 0.4 s in (then quimb's) simplification priced at 0.02 s
    simplified = (0.0 if len(fused.gates) > CHEAP_MAX_TENSORS else
                  (costs.TN_SIMPLIFY_SECONDS_PER_GATE - costs.TN_SECONDS_PER_GATE)
                  * max(len(fused.gates), 1))
    seen: dict[str, float] = {}

    def price(pattern: str) -> float:
        if pattern not in seen:
            cost = greedy_cost(amplitude_network(fused, pattern, order))
            seen[pattern] = (cost / costs.TN_RATE + floor
                             + (simplified if cost > CHEAP_COST else 0.0))
        return seen[pattern]

    cache.prices[order] = price
    return price


def fuse_for_network(gc: GateCircuit, cache: CircuitCache | None = None) -> GateCircuit:
    """``gc`` fused for the tensor-network route (deep circuits only; see TN_FUSE_MIN_GATES),
    once per ``cache``."""
    if len(gc.gates) <= TN_FUSE_MIN_GATES:
        return gc
    cache = circuit_cache(gc, cache)
    if cache.network_circuit is None:
        from ..frontends.fusion import fuse

        cache.network_circuit = fuse(gc, 2, keep_diagonal=True, blocks=_network_blocks(cache))
    return cache.network_circuit


def _network_blocks(cache: CircuitCache) -> list:
    if cache.network_blocks is None:
        from ..frontends.fusion import MAX_DIAGONAL_QUBITS, fusion_blocks

        cache.network_blocks = fusion_blocks(cache.gc, 2, keep_diagonal=True,
                                             max_diagonal_qubits=MAX_DIAGONAL_QUBITS)
    return cache.network_blocks


def network_gates(gc: GateCircuit, cache: CircuitCache | None = None) -> int:
    """Gates of the network the tensor-network route builds (:func:`fuse_for_network`'s),
    counted on the fusion's block structure (kept in ``cache`` for the fusion itself)."""
    if len(gc.gates) <= TN_FUSE_MIN_GATES:
        return len(gc.gates)
    cache = circuit_cache(gc, cache)
    if cache.network_circuit is not None:
        return len(cache.network_circuit.gates)
    return len(_network_blocks(cache))


def controlled_blocks_at_least(gc: GateCircuit) -> int:
    """A lower bound on the network's gates from the compact form alone: a controlled gate on
    ``k`` qubits expands into gates that touch all ``k``, so into at least ``ceil(k / 2)``
    blocks of the network's width-2 fusion (0 where the circuit has no compact form)."""
    if gc.compact is None:
        return 0
    return sum(-(-len(g.qubits) // 2) for g in gc.compact.gates if getattr(g, "controls", 0))


def network_gates_at_least(gc: GateCircuit, cache: CircuitCache | None = None) -> int:
    """At least as many gates as the network the tensor-network route builds
    (:func:`fuse_for_network`'s): their number where ``cache`` has counted or fused them
    already, else :func:`~qsimdist.frontends.fusion.fused_gates_at_least` (one pass, nothing
    fused)."""
    if len(gc.gates) <= TN_FUSE_MIN_GATES:
        return len(gc.gates)
    if cache is not None and cache.gc is gc and (cache.network_circuit is not None
                                                 or cache.network_blocks is not None):
        return network_gates(gc, cache)
    from ..frontends.fusion import fused_gates_at_least

    return fused_gates_at_least(gc, 2)


def _statevector(gc: GateCircuit, dtype: str, budget: MemoryBudget, method: str,
                 backend: str, tn_method: str, cache: CircuitCache | None = None,
                 ) -> tuple[Route | None, int, int | None, float, tuple | None]:
    """The statevector engine's side: ``(route decided already or None, bytes, width,
    seconds, (engine, kernel))``.

    A route is decided here where the statevector cannot be taken (``method``
    names a tensor-network method, the state does not fit a quarter of the
    budget, the backend is not numpy) or was asked for (then it must fit the
    whole budget, else PlanError). ``engine`` is the faster predicted of
    qsimdist's kernels and qsim (:func:`statevector_engine`); ``kernel``
    qsimdist's, where it runs: the compiled one where predicted faster with
    this process's start-up of numba priced in, else numpy's GEMMs. Both kernels
    are priced on the same fusion block structures (made once, kept in ``cache``).
    """
    from ..executors import compiled_kernel_runs, run_dtype, statevector_bytes
    from ..frontends.fusion import FUSION_WIDTHS, predict_statevector

    n = gc.n_qubits
    need = statevector_bytes(n, dtype) if n <= MAX_STATEVECTOR_QUBITS else math.inf
    if method not in ("auto", "statevector"):
        return (Route(method, "requested", statevector_bytes=_int(need)), need, None, math.inf,
                None)
    if callable(tn_method):  # named only where the statevector cannot be taken
        tn_method = _LazyName(tn_method)
    if method == "statevector":
        if n > MAX_STATEVECTOR_QUBITS:
            raise PlanError(f"the statevector of {n} qubits is too large (at most "
                            f"{MAX_STATEVECTOR_QUBITS} qubits); use a tensor-network method")
        if backend != "numpy":
            raise InvalidInputError(f"method 'statevector' runs on numpy, not backend "
                                    f"{backend!r}; use a tensor-network method with it")
        budget.check(need, f"the statevector of {n} qubits ({dtype})")
    elif n > MAX_STATEVECTOR_QUBITS or (
            budget.bound is not None and need > budget.bound // BATCH_PLAN_SHARE):
        return (Route(str(tn_method), "the statevector does not fit the memory limit",
                      statevector_bytes=_int(need)), need, None, math.inf, None)
    elif backend != "numpy":
        return (Route(str(tn_method), f"backend {backend!r}: the statevector route runs on numpy",
                      statevector_bytes=need), need, None, math.inf, None)
    itemsize = np.dtype(run_dtype(n, dtype)).itemsize
    structures = circuit_cache(gc, cache).statevector_blocks
    sv = gc.statevector_form()  # multi-controlled gates kept whole
    width, seconds = predict_statevector(sv, FUSION_WIDTHS, structures, itemsize=itemsize)
    kernel = "numpy"
    if compiled_kernel_runs(n, max(FUSION_WIDTHS)):
        from ..executors import startup_seconds

        c_width, c_seconds = predict_statevector(sv, FUSION_WIDTHS, structures,
                                                 itemsize=itemsize, compiled=True)
        c_seconds += startup_seconds()
        if c_seconds < seconds:
            kernel, width, seconds = "compiled", c_width, c_seconds
    engine, width, seconds = statevector_engine(gc, dtype, width, seconds)
    kernel = kernel if engine == "qsimdist" else None
    if method == "statevector":
        return (Route("statevector", "requested", seconds, None, need, width, engine=engine,
                      kernel=kernel), need, width, seconds, (engine, kernel))
    return None, need, width, seconds, (engine, kernel)


#: ``QSIMDIST_STATEVECTOR_ENGINE`` values
ENGINES = ("auto", "qsimdist", "qsim")


def _qsim_load_seconds() -> float:
    """Predicted seconds before this process's first qsim run."""
    import sys

    from ..executors import qsim_direct_failed, qsim_loaded

    if qsim_loaded() or "qsimcirq" in sys.modules:
        return 0.0
    return costs.QSIM_IMPORT_SECONDS if qsim_direct_failed() else costs.QSIM_LOAD_SECONDS


@functools.cache
def qsim_installed() -> bool:
    """Whether qsimcirq can be imported: probed once per process (``find_spec`` costs about
    0.2 ms, and the router asks on every complex64 request)."""
    from .._optional import available

    return available("qsimcirq")


def statevector_engine(gc: GateCircuit, dtype: str, width: int, seconds: float,
                       ) -> tuple[str, int, float]:
    """``(engine, fusion width, predicted seconds)`` of the statevector route.

    ``width`` and ``seconds`` are qsimdist's own kernels'. qsim (the ``qsim``
    extra) computes in complex64 only and applies gates of at most 6 qubits;
    where it can run, ``auto`` takes it if predicted faster.
    ``$QSIMDIST_STATEVECTOR_ENGINE`` (``auto``, ``qsimdist``, ``qsim``) chooses
    by hand; asking for qsim where it cannot run is an error.
    """
    import os

    from ..errors import shorten
    from ..executors import FUSED_GATE_QUBITS, MAX_GATE_QUBITS
    from ..frontends.fusion import fusion_blocks

    choice = os.environ.get("QSIMDIST_STATEVECTOR_ENGINE", "auto").strip().lower() or "auto"
    if choice not in ENGINES:
        raise InvalidInputError(f"unknown statevector engine {shorten(choice)} in "
                                f"QSIMDIST_STATEVECTOR_ENGINE; valid: {', '.join(ENGINES)}")
    if choice == "qsimdist":
        return "qsimdist", width, seconds
    why_not = None
    if gc.compact is not None:
        why_not = "qsim has no multi-controlled gates; qsimdist applies them whole"
    elif dtype != "complex64":
        why_not = f"qsim computes in complex64 only, not {dtype}"
    elif max((len(g.qubits) for g in gc.gates), default=0) > MAX_GATE_QUBITS:
        why_not = f"qsim applies gates of at most {MAX_GATE_QUBITS} qubits"
    elif not qsim_installed():
        why_not = "qsimcirq is not installed (pip install 'qsimdist[qsim]')"
    if why_not is not None:
        if choice == "qsim":
            raise InvalidInputError(f"QSIMDIST_STATEVECTOR_ENGINE=qsim: {why_not}; "
                                    "valid: auto, qsimdist")
        return "qsimdist", width, seconds
    blocks = fusion_blocks(gc, FUSED_GATE_QUBITS, keep_diagonal=False)
    qsim = (len(blocks) * (costs.QSIM_SECONDS_PER_GATE
                           + 2.0**gc.n_qubits * costs.QSIM_SECONDS_PER_ELEMENT)
            + _qsim_load_seconds())
    if choice == "qsim" or qsim < seconds:
        return "qsim", FUSED_GATE_QUBITS, qsim
    return "qsimdist", width, seconds


def _int(x: float) -> int | None:
    return None if not math.isfinite(x) else int(x)


def route_amplitudes(gc: GateCircuit, bits: list[str], *, order: str, dtype: str,
                     budget: MemoryBudget, method: str = "auto", executor: str = "local",
                     backend: str = "numpy", contractions: int | None = None,
                     cache: CircuitCache | None = None) -> Route:
    """The route for amplitudes of ``bits`` (patterns allowed) of ``gc``.

    The tensor-network estimate per contraction is the greedy path's
    multiply-adds plus a per-gate floor. Cheap routes are priced first: where the
    statevector's price is below the floor of the fewest contractions the
    bitstrings can need (one per pattern, one for every star-free bitstring
    batched together), nothing of the tensor-network side is priced (neither
    the batches nor a path); otherwise the batches are priced, then the floor of
    their contractions, then the path. ``executor="mpi"`` always takes the
    tensor-network route. ``cache`` (:class:`CircuitCache`) keeps what was
    worked out for the run that follows.
    """
    if method not in METHODS:
        raise InvalidInputError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if executor_kind(executor).distributed:
        if method == "statevector":
            raise InvalidInputError(
                f"method 'statevector' runs in one process; executor {executor!r} takes "
                "method 'tensor-network' or 'auto'"
            )
        return Route("tensor-network", f"executor {executor!r}", executor=executor)
    cache = circuit_cache(gc, cache)
    decided, need, width, sv, engine = _statevector(gc, dtype, budget, method, backend,
                                                    "tensor-network", cache)
    if decided is not None:
        return decided
    fixed = [b for b in bits if "*" not in b]
    least = contractions if contractions is not None else (
        len(bits) - len(fixed) + (1 if fixed else 0))
    # (tn_floor grows with the gates, so a lower bound on them gives one on the floor: first
    # one from the compact form's controlled gates, free; then one pass over the gates;
    # where that is not enough but the gates before fusion would be, the fusion's blocks)
    floor = tn_floor(controlled_blocks_at_least(gc), least)
    if sv <= floor:
        return Route("statevector", "predicted below the tensor-network floor", sv, floor,
                     need, width, engine=engine[0], kernel=engine[1])
    floor = tn_floor(network_gates_at_least(gc, cache), least)
    if floor < sv <= tn_floor(len(gc.gates), least):
        floor = tn_floor(network_gates(gc, cache), least)
    if sv <= floor:
        return Route("statevector", "predicted below the tensor-network floor", sv, floor,
                     need, width, engine=engine[0], kernel=engine[1])
    if contractions is None:
        contractions = len(bits) - len(fixed)
        if len(set(fixed)) > 1:
            contractions += len(batches(gc, fixed, dtype, budget,
                                        price=contraction_price(gc, order, cache)))
        elif fixed:
            contractions += 1
        floor = tn_floor(network_gates(gc, cache), contractions)
        if sv <= floor:
            return Route("statevector", "predicted below the tensor-network floor", sv, floor,
                         need, width, engine=engine[0], kernel=engine[1])
    tn = tn_seconds(gc, bits[0], order, contractions, cache)
    if sv <= tn:
        return Route("statevector", "predicted faster", sv, tn, need, width, engine=engine[0],
                     kernel=engine[1])
    return Route("tensor-network", "predicted faster", sv, tn, need, width)


def route_state_reading(gc: GateCircuit, *, what: str, dtype: str, budget: MemoryBudget,
                        method: str, executor: str, backend: str, tn_method,
                        tn_seconds_predicted, read_seconds: float,
                        tn_floor_seconds: float = 0.0,
                        cache: CircuitCache | None = None) -> Route:
    """The route for a request answered by reading the final state (shots, Pauli terms).

    ``tn_method`` / ``tn_seconds_predicted``: the cheapest tensor-network method
    for the request and its predicted seconds (priced by the caller's module; each
    may be a callable, called only where needed: the name where the route is
    tensor-network, the price where the statevector could be taken and costs more
    than ``tn_floor_seconds``, a lower bound on the tensor network's seconds:
    cheap routes are priced first). ``read_seconds``: predicted seconds to read the
    answer off the full state (drawing the shots, or every term). ``what`` names the
    request in errors. ``cache`` (:class:`CircuitCache`) keeps the fusion block
    structures priced here for the run (:func:`~qsimdist.engine.statevector_run.final_state`
    fuses from them: the blocks are worked out once per call).
    """
    if executor_kind(executor).distributed:
        if method == "statevector":
            raise InvalidInputError(
                f"method 'statevector' runs in one process; executor {executor!r} takes "
                f"a tensor-network method for {what}"
            )
        return Route(str(_LazyName(tn_method)) if callable(tn_method) else tn_method,
                     f"executor {executor!r}", executor=executor)
    decided, need, width, sv, engine = _statevector(gc, dtype, budget, method, backend,
                                                    tn_method, cache)
    if decided is not None:
        return decided
    total = sv + read_seconds
    if total <= tn_floor_seconds:
        # (the floor stands as the tensor network's prediction: a lower bound, not priced)
        return Route("statevector", "predicted below the tensor-network floor", total,
                     _finite(tn_floor_seconds) or None, need, width, engine=engine[0],
                     kernel=engine[1])
    if callable(tn_method):
        tn_method = tn_method()
    if callable(tn_seconds_predicted):
        tn_seconds_predicted = tn_seconds_predicted()
    if total <= tn_seconds_predicted:
        return Route("statevector", "predicted faster", total,
                     _finite(tn_seconds_predicted), need, width, engine=engine[0],
                     kernel=engine[1])
    return Route(tn_method, "predicted faster", total, _finite(tn_seconds_predicted), need,
                 width)


class _LazyName:
    """A tensor-network method's name, worked out (by the caller's callable) when asked."""

    def __init__(self, make) -> None:
        self.make = make

    def __str__(self) -> str:
        return self.make()


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def route_stabilizer(stabilizer_seconds: float, *, method: str, n_qubits: int, n_gates: int,
                     executor: str, backend: str, read_seconds: float) -> Route | None:
    """The stabilizer route for a Clifford circuit where it is asked for, or where its
    price is below the floor of every other route (then nothing else is priced); else
    ``None`` (price the others, then :func:`prefer_stabilizer`).

    The floors: the statevector's ``read_seconds`` (reading the answer off the
    state, without simulating it; none where the statevector cannot be taken) and
    one tensor-network contraction's per-gate floor. Under ``executor="mpi"`` the
    distributed tensor network is kept unless the stabilizer route is asked for.
    """
    if method == "stabilizer":
        return Route("stabilizer", "requested", executor=executor,
                     stabilizer_seconds=stabilizer_seconds)
    if executor_kind(executor).distributed:
        return None
    statevector = (read_seconds if n_qubits <= MAX_STATEVECTOR_QUBITS and backend == "numpy"
                   else math.inf)
    floor = min(statevector, tn_floor(n_gates, 1))
    if stabilizer_seconds <= floor:
        return Route("stabilizer", "predicted below the other routes' floors",
                     statevector_seconds=_finite(statevector),
                     tensor_network_seconds=tn_floor(n_gates, 1), executor=executor,
                     stabilizer_seconds=stabilizer_seconds)
    return None


def prefer_stabilizer(route: Route, stabilizer_seconds: float | None,
                      tn_seconds_predicted=None, tn_extra_seconds: float = 0.0) -> Route:
    """``route`` (priced by the other engines), or the stabilizer route where its price is
    lower. ``tn_seconds_predicted`` (a callable) prices a tensor-network route that was
    chosen without a price (the statevector did not fit); ``tn_extra_seconds``: what a
    tensor-network route pays beyond its contractions' price (drawing the shots, which
    the statevector's price holds already). A route under MPI is kept."""
    if stabilizer_seconds is None or executor_kind(route.executor).distributed:
        return route
    rival = route.statevector_seconds if route.method == "statevector" else (
        route.tensor_network_seconds)
    if rival is None and route.method != "statevector" and tn_seconds_predicted is not None:
        rival = tn_seconds_predicted()
        route = dataclasses.replace(route, tensor_network_seconds=_finite(rival))
    if rival is not None and route.method != "statevector":
        rival += tn_extra_seconds
    if rival is not None and rival <= stabilizer_seconds:
        return dataclasses.replace(route, stabilizer_seconds=stabilizer_seconds)
    return dataclasses.replace(route, method="stabilizer", reason="predicted faster",
                               stabilizer_seconds=stabilizer_seconds, engine=None, kernel=None)


def route_dynamic(prices: TrajectoryPrices | None, *, shots: bool, run: RunOptions,
                  method: str = "auto", is_clifford=None, n_qubits: int | None = None,
                  ) -> DynamicRoute:
    """The route of a dynamic circuit (mid-circuit measurement, reset, classical control),
    for shots (``shots=True``: the sampler's tree) or Pauli terms (the estimator's
    trajectories): ``trajectory`` or ``deferred-measurement``, decided alike for both.

    Trajectories are refused where they cannot run (:func:`~.dynamic_prices.trajectories_refused`:
    backend, method, executor, width, working states within ``run.memory``, the call's
    budget, never resolved again), then priced (:class:`~.dynamic_prices.TrajectoryPrices`;
    ``prices=None``: refused before compiling, ``n_qubits`` wide): taken where one trajectory
    is predicted at most ``TRY_SHARE`` (shots: a tree has up to a leaf per shot) or
    ``TERMS_SHARE`` (terms) of the deferred-measurement circuit's statevector run, and not
    Clifford (``is_clifford()``, asked last: the stabilizer route takes those)."""
    from . import dynamic_prices as dp

    n = prices.n if prices is not None else n_qubits
    bound = run.memory.bound
    known = {"qubits": n, "memory_bound": bound, "executor": run.executor}
    refused = dp.trajectories_refused(run, method, n)
    if refused is None and prices is not None:
        one, deferred = prices.trajectory(shots), prices.deferred(shots)
        known.update(trajectory_seconds=one, statevector_seconds=_finite(deferred),
                     lowered_qubits=prices.lowered_qubits if shots else prices.collapsed_qubits)
        share = dp.TRY_SHARE if shots else dp.TERMS_SHARE
        if one > share * deferred:
            refused = (f"one trajectory predicted above {share:g} of the "
                       "deferred-measurement circuit's statevector run")
        elif is_clifford is not None and is_clifford():
            refused = "a Clifford circuit: the stabilizer route takes its lowered form"
    if refused is not None or prices is None:
        return DynamicRoute("deferred-measurement", refused or "not compiled", **known)
    return DynamicRoute("trajectory", f"one trajectory predicted within {share:g} of the "
                        "deferred-measurement circuit's statevector run", engine="qsimdist",
                        statevector_bytes=dp.working_bytes(n),
                        states_kept=dp.states_kept(n, bound), **known)


__all__ = ["MAX_STATEVECTOR_QUBITS", "CircuitCache", "circuit_cache", "contraction_price",
           "METHODS", "DynamicRoute", "Route", "fuse_for_network", "greedy_cost", "network_gates",
           "network_gates_at_least", "prefer_stabilizer", "route_amplitudes", "route_dynamic",
           "route_stabilizer", "route_state_reading", "tn_floor", "tn_seconds"]
