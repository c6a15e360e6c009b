"""The Python entry points: ``plan``, ``amplitudes``, ``amplitude``, ``contract``, ``run_plan``.

Each resolves its options once (:class:`~qsimdist.engine.RunOptions`) and
calls the engine: the router picks the statevector or the tensor-network
route (:mod:`qsimdist.engine.router`), and :mod:`qsimdist.engine.amplitudes`
does the work: frontend -> Network -> simplification -> path (cached) ->
lifetime ordering -> Plan -> executor.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence

import numpy as np

from .config import check_dtype, check_gemm, check_order, format_bytes
from .engine import Engine
from .engine.amplitudes import (
    bitstring_list,
    check_output,
    covering_pattern,
    distributed_amplitudes,
    load_circuit,
)
from .engine.batching import open_positions  # noqa: F401  (public: the batcher's grouping)
from .engine.memory import (
    MemoryBudget,
    check_fits,  # noqa: F401  (public: the memory guard's check)
    check_plan_fits,
    machine_memory,  # noqa: F401  (public since 0.1)
)
from .engine.options import RunOptions
from .engine.results import AmplitudeResult, PlanRun
from .engine.router import (
    MAX_STATEVECTOR_QUBITS,  # noqa: F401  (public since 0.1)
    METHODS,
    Route,
    route_amplitudes,
)
from .errors import BitstringError, InvalidInputError, PlanError, PlanFormatError, shorten
from .frontends import amplitude_network, load, parse_bitstring
from .network import Network
from .planner.path import PathOptions
from .planner.plan import Plan, make_plan
from .planner.simplify import DEFAULT_SEQUENCE, simplify_within
from .progress import Progress

#: the route's record (kept under its first name for callers of 0.1)
RouteChoice = Route

logger = logging.getLogger(__name__)

__all__ = ["AmplitudeResult", "PlanRun", "RouteChoice", "amplitude", "amplitudes", "check_fits",
           "check_plan_fits", "choose_route", "contract", "covering_pattern",
           "distributed_amplitudes", "plan", "run_plan", "simplified_network"]


def choose_route(circuit, bitstrings: str | Sequence[str], *, order: str = "qiskit",
                 dtype: str = "complex64", memory_limit: str | int | None = None,
                 method: str = "auto", executor: str = "local", backend: str = "numpy",
                 contractions: int | None = None) -> Route:
    """The route :func:`amplitudes` takes for these arguments (nothing is contracted).

    ``statevector`` where the state (and its workspace) fits a quarter of the
    memory limit and its predicted time is below the tensor-network route's;
    see :func:`qsimdist.engine.router.route_amplitudes`.
    """
    return route_amplitudes(load_circuit(circuit), bitstring_list(bitstrings), order=order,
                            dtype=check_dtype(dtype), budget=MemoryBudget.resolve(memory_limit),
                            method=method, executor=executor, backend=backend,
                            contractions=contractions)


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

    Parameters
    ----------
    circuit : str, os.PathLike, QuantumCircuit, GateCircuit or Network
        Anything :func:`qsimdist.frontends.load` accepts (a circuit or network file, a bundled
        circuit's name, a Qiskit or quimb circuit, a network).
    bitstrings : str or sequence of str, optional
        One bitstring (``*`` leaves a qubit open) or several, merged into one batched pattern with
        ``*`` where they differ. Default: all zeros.
    order : {"qiskit", "natural"}
        ``qiskit`` (default: the rightmost character is qubit 0) or ``natural``.
    memory_limit : str, int or MemoryBudget, optional
        Peak bytes allowed (``"8GiB"``, ``2e9``, or a resolved
        :class:`~qsimdist.engine.MemoryBudget`); slicing is added to fit.
    dtype : {"complex64", "complex128"}
        The dtype the plan runs in.
    simplify_sequence : str, default "ADCRS"
        Simplification letters, quimb's names (``""`` to skip).
    path_options : PathOptions or dict, optional
        The path search's options.
    max_time : float, optional
        Path-search budget in seconds (overrides ``path_options``).
    max_repeats : int, optional
        Path-search trials (overrides ``path_options``).
    progbar : bool, default False
        Show cotengra's progress bar during the path search.
    tree : str or os.PathLike, optional
        A saved tree or path to plan along instead of searching (see
        :func:`qsimdist.planner.trees.load_tree`: a qsimdist tree or plan, an SSA or linear path, a
        pickled cotengra ``ContractionTree``); re-sliced along the same path where its slicing does
        not fit ``memory_limit``. The network is simplified as the tree file records (see
        :func:`tree_network`), which takes precedence over ``simplify_sequence``.

    Returns
    -------
    Plan

    Raises
    ------
    InvalidInputError
        A bad option or bitstring, or bitstrings given for a tensor network.
    PlanError
        The memory limit is too small for any plan found (or for the tree's path).
    """
    dtype = check_dtype(dtype)
    budget = MemoryBudget.resolve(memory_limit)  # once: the steps below share it
    limit = budget.limit
    opts = PathOptions.coerce(path_options, max_time, max_repeats)
    if tree is None:
        net = simplified_network(circuit, bitstrings=bitstrings, order=order,
                                 memory_limit=budget, dtype=dtype,
                                 simplify_sequence=simplify_sequence)
        return make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts,
                         progbar=progbar)
    from .planner.plan import build_plan, fit_to_memory
    from .planner.trees import read_tree_file

    found = read_tree_file(tree)
    net, _ = tree_network(circuit, found, bitstrings=bitstrings, order=order,
                          memory_limit=budget, dtype=dtype, simplify_sequence=simplify_sequence)
    given = found.tree_for(net)
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


def simplified_network(
    circuit,
    *,
    bitstrings: str | Sequence[str] | None = None,
    order: str = "qiskit",
    memory_limit: str | int | None = None,
    dtype: str = "complex64",
    simplify_sequence: str = DEFAULT_SEQUENCE,
    simplify_engine: str = "qsimdist",
) -> Network:
    """The (simplified) network :func:`plan` plans for ``circuit``'s amplitudes.

    Trees saved for it (``qsimdist search``) apply to every call that builds
    the same network: the same circuit, pattern, ``order`` and simplification.
    ``simplify_engine="quimb"`` simplifies with quimb's passes (see
    :func:`qsimdist.planner.simplify.simplify`): an equal network of another
    structure, the one the trees shipped before qsimdist had its own passes were
    searched on.
    """
    from .planner.trees import SIMPLIFY_ENGINES

    if simplify_engine not in SIMPLIFY_ENGINES:
        raise InvalidInputError(f"unknown simplification engine {shorten(simplify_engine)}; "
                                f"valid: {', '.join(SIMPLIFY_ENGINES)}")
    dtype = check_dtype(dtype)
    check_order(order)
    budget = MemoryBudget.resolve(memory_limit)
    limit = budget.limit
    obj = load(circuit)
    if isinstance(obj, Network):
        if bitstrings is not None:
            raise InvalidInputError("bitstrings apply to circuits, not to a tensor network")
        net = obj
    else:
        pattern = covering_pattern(bitstrings if bitstrings is not None else "0" * obj.n_qubits)
        parse_bitstring(pattern, obj.n_qubits, order)
        check_output(pattern.count("*"), dtype, budget, bounded_none=False)
        net = amplitude_network(obj, pattern, order)
    if net.arrays is not None:
        net = simplify_within(net, simplify_sequence, limit, dtype, engine=simplify_engine)
    return net


def tree_network(
    circuit,
    tree,
    *,
    bitstrings: str | Sequence[str] | None = None,
    order: str = "qiskit",
    memory_limit: str | int | None = None,
    dtype: str = "complex64",
    simplify_sequence: str = DEFAULT_SEQUENCE,
):
    """(network, :class:`~qsimdist.planner.trees.Simplification`) that ``tree`` was made for.

    ``tree`` is a tree file's path or its :class:`~qsimdist.planner.trees.TreeFile`.
    A file that records its simplification (``network.simplify``, written by
    ``qsimdist search``) is planned on the network simplified that way. A qsimdist
    tree file without the record (those searched before it was kept) whose
    structure hash the default simplification (qsimdist's passes) does not match is
    tried on the network quimb's passes make (logged at INFO when that one matches);
    matching neither is one :class:`~qsimdist.planner.trees.TreeNetworkError` line
    naming every hash tried. Other formats (paths, plans, cotengra trees) record no
    network hash: they get the default network, and :meth:`TreeFile.tree_for` checks
    them.
    """
    from .planner.trees import Simplification, TreeFile, TreeNetworkError, read_tree_file

    found = tree if isinstance(tree, TreeFile) else read_tree_file(tree)
    budget = MemoryBudget.resolve(memory_limit)

    def build(how: Simplification) -> Network:
        return simplified_network(circuit, bitstrings=bitstrings, order=order,
                                  memory_limit=budget, dtype=dtype,
                                  simplify_sequence=how.sequence, simplify_engine=how.engine)

    recorded = found.simplification
    if recorded is not None:
        if recorded.sequence != simplify_sequence:
            logger.info("%s was made for the network simplified with %r (%s's passes); "
                        "planning on that network", found.source, recorded.sequence,
                        recorded.engine)
        # tree_for refuses it (one line) should this circuit's network still differ
        return build(recorded), recorded
    default = Simplification("qsimdist", simplify_sequence)
    net = build(default)
    want = found.structure_hash
    if want is None or net.structure_hash() == want or not simplify_sequence:
        return net, default
    by_quimb = Simplification("quimb", simplify_sequence)
    other = build(by_quimb)
    if other.structure_hash() == want:
        logger.info("%s records no simplification and was made for the network quimb's passes "
                    "make (engine='quimb', %r): planning on that network", found.source,
                    simplify_sequence)
        return other, by_quimb
    raise TreeNetworkError(
        f"{found.source}: the tree was made for another network (structure hash {want[:12]}...; "
        f"this network's is {net.structure_hash()[:12]}... simplified by qsimdist's passes, "
        f"{other.structure_hash()[:12]}... by quimb's); plan with the same circuit, bitstring "
        "pattern, --order and simplification")


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
    progress: Progress | None = None,
    batch: bool = True,
    executor: str = "local",
    profile=None,
    comm=None,
    method: str = "auto",
    gemm: str = "complex",
    collectives: str = "auto",
) -> AmplitudeResult:
    """Amplitudes ``<b|U|0>`` for each bitstring; ``*`` characters expand to all values.

    Each pattern with ``*`` is one contraction whose result stays an array.
    Bitstrings without ``*`` are batched (``batch=True``): those that agree
    on most characters share one contraction with the differing characters
    open, and their amplitudes are picked out of its array. The width of the
    batches is chosen by a cost model (:func:`open_positions` groups, each
    contraction's fixed cost against ``2^k`` outputs) within the memory
    limit. Contractions with the same network structure reuse one plan.
    Before anything is built, a pattern whose output alone exceeds the memory
    limit is refused; before executing, a plan whose peak exceeds it is refused.

    Parameters
    ----------
    circuit : str, os.PathLike, QuantumCircuit or GateCircuit
        Anything :func:`qsimdist.frontends.load` accepts that is a circuit.
    bitstrings : str or sequence of str
        One bitstring pattern or several (``*`` expands to both values).
    order : {"qiskit", "natural"}
        ``qiskit`` (default: the rightmost character is qubit 0) or ``natural``.
    dtype : {"complex64", "complex128"}
        The dtype amplitudes are computed in.
    memory_limit : str, int or None
        Peak bytes (``"8GiB"``, an int; per rank under MPI); ``None``: the default limit;
        ``"none"``: this machine's physical memory + swap.
    backend : {"numpy", "cupy"}
        The array library.
    simplify_sequence : str, default "ADCRS"
        Simplification letters, quimb's names (``""`` to skip).
    path_options : PathOptions or dict, optional
        The path search's options.
    max_time : float, optional
        Path-search budget in seconds (overrides ``path_options``).
    max_repeats : int, optional
        Path-search trials (overrides ``path_options``).
    progress : callable, optional
        ``progress(stage, done, total)``, reporting contractions done.
    batch : bool, default True
        Batch bitstrings without ``*`` into shared contractions (see above).
    executor : {"local", "mpi", "auto"}
        ``"mpi"`` (run every rank of ``mpiexec`` through this same call) plans each contraction
        once on rank 0 for the ranks of ``comm`` with hardware ``profile``, ``memory_limit`` being
        the limit *per rank*; the plan is broadcast and its distributed schedule run on every rank,
        which all return the result.
    profile : str or HardwareProfile, optional
        Distributed: the hardware profile (default ``"local-cpu"``).
    comm : MPI communicator, optional
        Distributed: the ranks (default ``MPI.COMM_WORLD``).
    method : {"auto", "statevector", "tensor-network"}
        ``"auto"`` (default) takes the route :func:`choose_route` predicts cheaper:
        ``"statevector"`` (fused gates applied to the full state in circuit order, where the state
        fits the memory limit; every requested amplitude is read from that one state) or
        ``"tensor-network"`` (the contractions above). ``stats["method"]`` names the route taken
        and ``stats["route"]`` the predictions behind it.
    gemm : str, default "complex"
        How the tensor-network route's BLAS steps multiply (``"complex"``, ``"3m"``; ``"tf32"`` and
        ``"3m-tf32"`` with ``backend="cupy"``), see :func:`qsimdist.executors.local.execute`; the
        statevector route ignores it.
    collectives : {"auto", "mpi", "nccl"}
        How the ranks exchange arrays (the CLI's ``--comm``): NCCL between GPUs
        (``backend="cupy"``, one GPU per rank; not yet run on a GPU) or MPI; ``stats["comm"]``
        names the choice (see :func:`qsimdist.executors.comm.choose_collectives`).

    Returns
    -------
    AmplitudeResult

    Raises
    ------
    InvalidInputError
        An unknown method, order, dtype, backend, executor or GEMM mode, a bad bitstring, or a
        tensor network given as ``circuit``.
    PlanError
        A pattern's output or a plan's peak exceeds the memory limit.
    """
    if method not in METHODS:
        raise InvalidInputError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    check_order(order)
    run = RunOptions.resolve(dtype=dtype, memory_limit=memory_limit, backend=backend,
                             executor=executor, profile=profile, comm=comm, gemm=gemm,
                             collectives=collectives,
                             path_options=PathOptions.coerce(path_options, max_time,
                                                             max_repeats))
    return Engine(run).amplitudes(circuit, bitstrings, order=order,
                                  simplify_sequence=simplify_sequence, progress=progress,
                                  batch=batch, method=method)


def amplitude(circuit, bitstring: str, **kwargs) -> complex:
    """One amplitude ``<bitstring|U|0>`` (no ``*``).

    Parameters
    ----------
    circuit : str, os.PathLike, QuantumCircuit or GateCircuit
        As for :func:`amplitudes`.
    bitstring : str
        A bitstring of 0 and 1, one character per qubit.
    **kwargs
        Keywords as for :func:`amplitudes`.

    Raises
    ------
    BitstringError
        ``bitstring`` is not a string, or holds ``*``.
    """
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

    A quimb ``TensorNetwork`` is converted as :func:`qsimdist.quimb.contract` converts it
    (:func:`~qsimdist.frontends.network_from_quimb`). The network's ``exponent`` (kept as
    ``meta["exponent"]``, log10; a :class:`Network` may carry one too) multiplies the
    result by ``10**exponent``; the plan then runs with its intermediates rescaled, so
    the value is right where the contraction without it would overflow or underflow.

    Parameters
    ----------
    network : Network, str, os.PathLike or quimb TensorNetwork
        The network.
    output_inds : sequence of str, optional
        quimb networks only: the result's axes, in the order given; by default quimb's output
        (indices on exactly one tensor, in order of first appearance).
    dtype : {"complex64", "complex128"}
        The dtype the contraction runs in.
    memory_limit : str, int or None
        Peak bytes (``"8GiB"``, an int); ``None``: the default; ``"none"``: no limit.
    backend : {"numpy", "cupy"}
        The array library.
    simplify_sequence : str, default ""
        Simplification letters, quimb's names (``""``: none).
    path_options : PathOptions or dict, optional
        The path search's options.
    gemm : str, default "complex"
        The executor's GEMM mode (see :func:`qsimdist.executors.local.execute`).

    Raises
    ------
    InvalidInputError
        A circuit instead of a network, ``output_inds`` for a network that is not quimb's, a
        non-finite exponent, or a bad option.
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
    # resolved once, for planning and the guard; the plan comes from the process's cache
    engine = Engine(RunOptions.resolve(dtype=dtype, memory_limit=memory_limit, backend=backend,
                                       gemm=gemm, path_options=path_options))
    if not exponent:
        return engine.contract(obj, simplify_sequence=simplify_sequence)
    mantissa, found = engine.contract(obj, simplify_sequence=simplify_sequence,
                                      strip_exponent=True)
    return times_ten_to(mantissa, found + float(exponent))


def run_plan(
    plan: Plan | str | os.PathLike | None,
    *,
    backend: str = "numpy",
    memory_limit: str | int | None = None,
    executor: str = "auto",
    comm=None,
    gemm: str = "complex",
    collectives: str = "auto",
    progress: Progress | None = None,
    trace: str | os.PathLike | None = None,
) -> PlanRun:
    """Execute a saved plan: the Python twin of ``qsimdist run``.

    Under MPI every rank calls this with the same arguments: rank 0 reads the
    plan and sends it to every rank, which validate it and run its distributed
    schedule (made for that many ranks, ``qsimdist plan --profile NAME
    --devices P``); every rank returns the values, and rank 0's ``stats`` hold
    each rank's measurements.

    Parameters
    ----------
    plan : Plan, str, os.PathLike or None
        A :class:`Plan`, or the path of a plan file (``qsimdist plan -o``, :meth:`Plan.save`).
        Under a distributed executor only rank 0's is read (the other ranks may pass ``None``) and
        sent to every rank.
    backend : {"numpy", "cupy"}
        The array library.
    memory_limit : str, int or None
        The bytes a run may hold (``"8GiB"``; ``None``: the machine's default; ``"none"``: physical
        memory + swap). A plan is already sliced: one peaking above it is refused before anything
        is allocated. Under MPI: the limit per rank.
    executor : {"auto", "local", "mpi"}
        ``"auto"`` (``"mpi"`` with a ``comm`` or under mpiexec with several ranks, else
        ``"local"``), ``"local"`` or ``"mpi"``.
    comm : MPI communicator, optional
        The ranks (default ``MPI.COMM_WORLD``).
    gemm : str, default "complex"
        How BLAS steps multiply (see :func:`qsimdist.executors.local.execute`).
    collectives : {"auto", "mpi", "nccl"}
        How the ranks exchange arrays (see :func:`qsimdist.executors.comm.choose_collectives`).
    progress : callable, optional
        ``progress("slices", done, total)`` (:mod:`qsimdist.progress`), called as slices finish.
    trace : str or os.PathLike, optional
        Under MPI, a file to write each step's measured seconds, bytes and peak beside the
        prediction (rank 0 writes it; input for ``qsimdist calibrate --from-trace``).

    Returns
    -------
    PlanRun

    Raises
    ------
    InvalidInputError
        No plan on rank 0, a ``trace`` outside a distributed run, or a bad option.
    PlanError
        An unreadable plan file (:class:`PlanFormatError`), or a plan whose peak exceeds the memory
        limit.
    """
    import logging
    import time

    from .engine.amplitudes import merge_rank_stats
    from .executors import bind_executor, check_comm_choice, check_nccl_backend, resolve_executor

    log = logging.getLogger(__name__)
    check_comm_choice(collectives)  # before any work, alike on every rank
    check_nccl_backend(collectives, backend)
    runner = bind_executor(resolve_executor(executor, comm), comm)
    if trace is not None and not runner.distributed:
        raise InvalidInputError("a trace records distributed runs: launch under mpiexec")
    if plan is None and runner.rank == 0:
        raise InvalidInputError("run_plan needs a plan or the path of a plan file")

    def read() -> Plan:
        return plan if isinstance(plan, Plan) else Plan.load(plan)

    p = runner.share_plan(read)  # rank 0 reads; every rank receives and validates it
    # resolved once, checked on every rank before any work: the GEMM mode for the plan's
    # dtype, the backend
    engine = Engine(RunOptions.resolve(dtype=p.dtype, memory_limit=memory_limit,
                                       backend=backend, executor=runner.name,
                                       comm=runner.comm, gemm=gemm, collectives=collectives))
    run = engine.run
    run_stats = None  # distributed: each rank's measurements, gathered on rank 0 below
    if run.distributed:
        from .executors import RunStats

        run_stats = RunStats()
    log.info("executing %s on %s: %d slice(s), %.3e flops",
             plan if not isinstance(plan, Plan) else "the plan", backend, p.stats.n_slices,
             p.stats.flops)
    started = time.perf_counter()
    value = engine.contract(p, progress=progress, run_stats=run_stats).reshape(-1)
    log.info("executed in %.3f s", time.perf_counter() - started)
    stats = p.stats.to_dict()
    if run.distributed:
        gathered = run.comm.gather(run_stats.to_dict(), root=0)
        if runner.rank == 0:
            if trace is not None:
                from .executors import write_trace

                write_trace(trace, p, gathered, max(st["seconds"] for st in gathered))
            per_rank: dict = {}  # each rank's measured bytes, peak, seconds and step runs
            merge_rank_stats(per_rank, gathered, p)
            stats["ranks"] = [per_rank[r] for r in sorted(per_rank)]
            stats["comm"] = gathered[0]["comm"]  # the collectives the run chose
    pattern = p.meta.get("bitstring")
    if pattern and (1 << pattern.count("*")) != value.size:
        source = plan if not isinstance(plan, Plan) else "plan"
        raise PlanFormatError(
            f"{source}: field 'meta.bitstring' leaves {pattern.count('*')} qubits open but the "
            f"result holds {value.size} amplitudes"
        )
    return PlanRun(value, p, stats, runner.rank)
