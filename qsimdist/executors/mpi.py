"""MPI executor: run a plan's distributed schedule over the ranks of a communicator.

Rank ``g d + r`` is device ``r`` of group ``g`` (``d`` = the schedule's
group size). Every group runs its share of the slices (one contiguous block); inside a
group each device holds only its shards and follows the schedule's records
step by step:

* ``alltoall`` — ``Alltoallv`` with per-peer blocks cut from the shard (the
  part a device keeps is copied locally, so the bytes on the wire equal the
  schedule's);
* ``allgather`` — ``Allgather`` of equal shards, placed into the whole tensor;
* compute — the local GEMM view of the record (the single-process kernels on
  local shapes); a replicated operand is read at the device's index range;
* ``allreduce`` — each device writes its partial result at its index range of
  a zero buffer of the whole output, summed in place.

The groups' results are summed at the end, so every rank returns the whole
result. Before the first step all ranks check that they hold the same plan
(a hash) and that the schedule's per-rank peak fits each rank's memory limit.
An exception on one rank prints ``qsimdist: error: rank R: ...`` and aborts
the communicator, so no rank waits forever in a collective.

The checks every rank makes together (same plan, memory, faults, BLAS threads) are in
:mod:`qsimdist.executors.rank_checks`; one rank's steps inside its group in
:mod:`qsimdist.executors.group_runner`; the measured stats and the ``--trace`` file in
:mod:`qsimdist.executors.run_stats`.

The runner calls its collectives through a
:class:`~qsimdist.executors.comm.Collectives` object and does not know which
implementation it holds: host-staged MPI (``Alltoallv``, ``Allgather``,
``Allreduce`` on host buffers) or NCCL on device buffers, chosen once per run by
``collectives=`` (``"auto"``, ``"mpi"``, ``"nccl"``; the CLI's ``--comm``) and
reported in ``RunStats.comm``. The groups' final sum goes through the same
interface; small control values (exponents, limits, plan digests) stay on MPI.

Arrays are numpy here; with ``backend="cupy"`` the shards live on the rank's
GPU, and the collectives are staged through host memory (``"mpi"``) or run by
NCCL between the ranks' GPUs (``"nccl"``; not yet run on a GPU).
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..errors import InvalidInputError, PlanError, QsimdistError
from ..planner.plan import Plan
from .carry import slice_assignment
from .comm import (
    check_comm_choice,
    check_nccl_backend,
    choose_collectives,
    launched_under_mpi,  # noqa: F401  (re-exported: older callers import it from here)
    mpi_module,
)
from .group_runner import NO_EXPONENT, GroupRunner
from .local import (
    BufferPool,
    accumulate,
    accumulate_scaled,
    array_module,
    check_gemm_mode,
    decimal_mantissa,
    gemm_context,
    scale_by_power_of_two,
)
from .rank_checks import agreed_fault, check_memory, check_same_plan, share_cores
from .run_stats import (
    TRACE_ALL_SLICES,
    TRACE_ENV,
    RunStats,
    max_resident_bytes,
    resident_bytes,
    traced_numpy_bytes,
)


def execute(plan: Plan, backend: str = "numpy", progress=None, comm=None,
            memory_limit: int | None = None, stats: RunStats | None = None,
            gemm: str = "complex", strip_exponent: bool = False, collectives: str = "auto"):
    """Run ``plan.schedule`` on the ranks of ``comm`` (default ``MPI.COMM_WORLD``).

    Returns the whole result on every rank, in the local executor's shape.
    ``stats`` (a :class:`RunStats`) is filled with this rank's measured bytes,
    times and memory. Without a schedule, a single rank runs the local executor.
    ``gemm``: the local steps' GEMM mode, as for
    :func:`qsimdist.executors.local.execute`. ``memory_limit``: this rank's
    limit (default: the host's available memory shared by its ranks).
    ``strip_exponent=True`` returns ``(mantissa, exponent)`` as the local
    executor does: every leaf and step output is rescaled by a power of two
    as the schedule runs (a sharded output's ranks agree on one exponent with
    a small all-reduce), the groups' sums meet at a common exponent, and the
    value is ``mantissa * 10**exponent``.

    ``collectives``: how the ranks exchange arrays (the CLI's ``--comm``):
    ``"auto"`` (default) NCCL where ``backend="cupy"``, every rank has its own
    GPU and NCCL loads, else host-staged MPI; ``"mpi"``; ``"nccl"``, refused on
    every rank (:class:`~qsimdist.errors.NcclUnavailableError`, one line naming
    the reason) where it cannot run. The choice is ``stats.comm``. (``comm`` is
    the MPI communicator; NCCL's are made from it.) The NCCL path has not yet
    run on a GPU.

    Every check runs inside the abort scope: a failure on one rank (any
    exception, an interrupt included) prints ``qsimdist: error: rank R: ...``
    and aborts the communicator. Checks that every rank makes together (same
    plan, memory) raise the same error on every rank instead.
    """
    if plan.network.arrays is None:
        raise InvalidInputError("this plan's network has no arrays; nothing to contract")
    check_comm_choice(collectives)
    check_nccl_backend(collectives, backend)  # alike on every rank, before any collective
    MPI = mpi_module()
    comm = comm if comm is not None else MPI.COMM_WORLD
    nranks, rank = comm.Get_size(), comm.Get_rank()
    stats = stats if stats is not None else RunStats()
    stats.rank = rank
    sched = plan.schedule
    if sched is None:
        if nranks == 1:
            from .local import execute as local_execute

            return local_execute(plan, backend=backend, progress=progress, gemm=gemm,
                                 **({"strip_exponent": True} if strip_exponent else {}))
        raise PlanError(f"this plan has no distributed schedule for {nranks} ranks; make one "
                        f"with 'qsimdist plan … --profile NAME --devices {nranks}'")
    if sched.devices != nranks:
        raise PlanError(f"the schedule is for {sched.devices} ranks but {nranks} are running; "
                        f"launch with mpiexec -n {sched.devices}")
    from .liveness import fail_rank, is_collective, mark_collective

    try:
        fault = agreed_fault(comm)
        xp = array_module(backend)
        check_gemm_mode(gemm, xp, plan.dtype)
        try:
            check_same_plan(comm, plan)
            need, compiled = check_memory(comm, plan, memory_limit, xp)
        except QsimdistError as exc:  # raised alike on every rank
            raise mark_collective(exc) from None
        if backend == "cupy":
            _select_device(xp, comm)
        else:
            stats.blas_threads = share_cores(comm)
        try:  # after the device is chosen: ranks compare their hosts and devices
            stats.comm = choose_collectives(collectives, backend, comm, xp)
        except QsimdistError as exc:  # decided from gathered answers: alike on every rank
            raise mark_collective(exc) from None
        return _run(plan, comm, xp, stats, fault, gemm, compiled, need, progress, MPI,
                    strip_exponent)
    except BaseException as exc:  # noqa: BLE001 - any failure must end every rank
        if is_collective(exc):
            raise
        fail_rank(comm, exc)


def _run(plan: Plan, comm, xp, stats: RunStats, fault, gemm: str, compiled: bool, need: int,
         progress, MPI, strip_exponent: bool = False):
    import tracemalloc

    from .comm import make_collectives

    sched = plan.schedule
    rank = comm.Get_rank()
    g, r = divmod(rank, sched.group_size)
    group = comm.Split(g, r)
    across = comm.Split(r, g)
    dtype = np.dtype(plan.dtype)
    # the pool's lent and free buffers together stay within the guarded peak
    pool = BufferPool(xp, dtype, limit=need, cap=need)
    # the collectives inside the group and across the groups, as the run chose (stats.comm)
    inside = make_collectives(stats.comm, group, xp, pool, dtype)
    between = make_collectives(stats.comm, across, xp, pool, dtype)
    runner = GroupRunner(plan, group, xp, pool, stats, fault, gemm, compiled, inside)
    out_shape = tuple(plan.network.size_dict[i] for i in plan.network.output)
    stats.guarded_bytes = need
    trace = os.environ.get(TRACE_ENV)
    measuring = trace in ("1", "all", "rss")
    mine = sched.slices_of_group(g)
    if measuring and len(mine):
        # measure the run, not the loading of code: one untimed slice first compiles (or
        # loads) the kernels every step uses, as any earlier run in the process would have
        warm = GroupRunner(plan, group, xp, pool, RunStats(rank=rank), None, gemm, compiled,
                            inside)
        pool.put(warm.run(slice_assignment(plan, mine[0]), first_slice=True, slice_no=mine[0]))
        for arr, _ in (warm.carry.values() if warm.carry is not None else ()):
            pool.put(arr)
    stats.rss_before_bytes = resident_bytes()
    started = measuring and trace != "rss" and not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracing = tracemalloc.is_tracing()
    if tracing:
        traced_before = tracemalloc.get_traced_memory()[0]
        arrays_before = traced_numpy_bytes() if xp is np else 0
        stats.traced_array_bytes = 0
        tracemalloc.reset_peak()
    # a run we trace ourselves over many slices: traced in its first two slices only
    # (see TRACE_ALL_SLICES)
    window = started and trace != "all" and len(mine) > TRACE_ALL_SLICES
    first_peak = 0
    t0 = time.perf_counter()
    result = None
    with gemm_context(gemm, xp):  # TF32 for this run only
        exp = None
        for done, s in enumerate(mine, start=1):
            if window and done == 3:
                first_peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            runner.sample_arrays = (tracing and xp is np
                                    and done in ((1, 2) if window else (1, len(mine))))
            if strip_exponent:
                root, e = runner.run(slice_assignment(plan, s), done == 1, scaled=True,
                                     slice_no=s)
                result, exp = accumulate_scaled(result, exp, root.reshape(out_shape), e, pool)
            else:
                root = runner.run(slice_assignment(plan, s), first_slice=done == 1, slice_no=s)
                result = accumulate(result, root.reshape(out_shape), pool)
            stats.slices += 1
            if progress is not None and rank == 0:
                progress("slices", done, len(mine))
        if result is None:
            result = xp.zeros(out_shape, dtype)
        if strip_exponent:  # the groups' sums meet at the largest exponent
            top = across.allreduce(NO_EXPONENT if exp is None else exp, op=MPI.MAX)
            if exp is None:
                result[...] = 0
            elif top != exp:
                scale_by_power_of_two(result, exp - top)
            exp = None if top == NO_EXPONENT else top
        staged = between.stage(result)
        runner.fault_in_collective()
        between.allreduce(staged.reshape(-1))  # a flat view: 0-d buffers fail
        result = between.unstage(staged)
        if strip_exponent:
            result = decimal_mantissa(result, exp, xp)
    stats.seconds = time.perf_counter() - t0
    # an upper bound on what the run added to the process: its resident high-water
    # mark (which may predate the run) less what was resident when it started
    stats.rss_growth_bytes = max(0, max_resident_bytes() - stats.rss_before_bytes)
    if tracing:
        peak = first_peak if window else tracemalloc.get_traced_memory()[1]
        stats.traced_peak_bytes = peak - traced_before
        if xp is np:
            stats.traced_array_bytes = max(0, stats.traced_array_bytes - arrays_before)
    if started and tracemalloc.is_tracing():
        tracemalloc.stop()
    inside.close()
    between.close()
    group.Free()
    across.Free()
    return result


def _select_device(cupy, comm) -> None:
    """One GPU per rank, chosen by the rank's index on its node."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ndev = cupy.cuda.runtime.getDeviceCount()
    cupy.cuda.Device(local.Get_rank() % max(ndev, 1)).use()
    local.Free()
