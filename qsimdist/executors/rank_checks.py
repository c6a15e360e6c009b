"""Checks every rank of an MPI run makes together before the first step.

Injected faults (``$QSIMDIST_FAULT_INJECT``, agreed by every rank), the BLAS threads a
rank may run (its share of the host's cores), the per-rank memory limit and the
guard on the schedule's per-rank peak, and the hash that shows every rank holds the
same plan. :mod:`qsimdist.executors.mpi` calls them in its abort scope.
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np

from ..config import format_bytes
from ..errors import ExecutionError, InvalidInputError, PlanError
from ..planner.distribution.bits import local_sizes
from ..planner.distribution.reuse import kept_bytes
from ..planner.lifetime import gemm_step
from ..planner.plan import Plan
from . import kernels
from .comm import mpi_module

FAULT_ENV = "QSIMDIST_FAULT_INJECT"


def plan_hash(plan: Plan) -> str:
    """A digest of everything a rank executes: the plan with its arrays and schedule."""
    text = json.dumps(plan.to_dict(include_arrays=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


#: where a fault can be injected besides a step: ``start`` (before planning), ``broadcast``
#: (sending or receiving a plan), ``collective`` (inside the first collective of a run),
#: ``output`` (while rank 0 writes the result; the other ranks at the same point)
FAULT_POINTS = ("start", "broadcast", "collective", "output")


def parse_fault(value: str | None) -> tuple[int, int | str] | None:
    """``"rank=R,step=S"`` -> (R, S); ``"rank=R,at=POINT"`` -> (R, POINT); ``None`` when unset."""
    if not value:
        return None
    try:
        fields = dict(part.split("=", 1) for part in value.split(","))
        rank = int(fields["rank"])
        if "step" in fields and "at" not in fields:
            where: int | str = int(fields["step"])
        elif fields.get("at") in FAULT_POINTS and "step" not in fields:
            where = fields["at"]
        else:
            raise KeyError("at")
        if set(fields) - {"rank", "step", "at"} or rank < 0:
            raise ValueError(value)
    except (ValueError, KeyError):
        raise InvalidInputError(
            f"{FAULT_ENV}={value!r} is not of the form 'rank=R,step=S' or 'rank=R,at=POINT' "
            f"(POINT: {', '.join(FAULT_POINTS)})") from None
    return rank, where


def check_fault(fault, nranks: int):
    """``fault`` when it names an existing rank; a fault for rank >= P is refused."""
    if fault is not None and fault[0] >= nranks:
        raise InvalidInputError(f"{FAULT_ENV} names rank {fault[0]}, but only ranks 0-"
                                f"{nranks - 1} are running")
    return fault


def fault_point(point: str, comm) -> None:
    """Raise the injected fault when ``$QSIMDIST_FAULT_INJECT`` names this rank and ``point``."""
    value = os.environ.get(FAULT_ENV)
    if value and parse_fault(value) == (comm.Get_rank(), point):
        raise ExecutionError(f"fault injected at {point} ({FAULT_ENV})")


def agreed_fault(comm):
    """Every rank's fault spec, checked together: a bad or out-of-range spec on any rank
    raises the same error on every rank (collectively agreed)."""
    from .liveness import mark_collective

    try:
        fault, problem = check_fault(parse_fault(os.environ.get(FAULT_ENV)),
                                     comm.Get_size()), None
    except InvalidInputError as exc:
        fault, problem = None, str(exc)
    problems = [p for p in comm.allgather(problem) if p is not None]
    if problems:
        raise mark_collective(InvalidInputError(problems[0]))
    return fault


def ranks_on_host(comm) -> int:
    """How many ranks of ``comm`` share this rank's host (its shared-memory group)."""
    MPI = mpi_module()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return local.Get_size()
    finally:
        local.Free()


#: environment variables that set BLAS / OpenMP threads by hand: where one is set, the
#: ranks' threads are left as they are
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS")
_rank_threads: int | None = None


def share_cores(comm) -> int:
    """Cap this rank's BLAS threads at its share of the host's cores; the cap (0: left alone).

    Every rank of ``comm`` calls it together (the first call per process asks how
    many ranks share the host; later calls return the same answer). Without a
    cap each rank's OpenBLAS starts a thread per core, so ``mpiexec -n 2`` on two
    cores ran four spinning threads: the n30 amplitude at 1.2 MiB per rank took
    33.6 s against 7.55 s with one thread per rank (medians; docs/benchmarks/history.md,
    "n60m24 at P = 8 from a fresh search", under "BLAS threads per rank").
    A variable of :data:`THREAD_VARIABLES` set by hand, or a lone rank on its
    host, leaves the threads alone.
    """
    global _rank_threads
    if _rank_threads is not None:
        return _rank_threads
    local = ranks_on_host(comm)
    if local < 2 or any(os.environ.get(v) for v in THREAD_VARIABLES):
        _rank_threads = 0
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    # the cores this rank may run on, shared with the host's other ranks (a rank the
    # launcher bound to fewer cores gets fewer threads: never more threads than cores)
    _rank_threads = max(1, cores // local)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency
        _rank_threads = 0
        return 0
    threadpool_limits(limits=_rank_threads, user_api="blas")
    return _rank_threads


def default_rank_limit(comm) -> int | None:
    """The default per-rank memory limit: the host's default divided by its ranks.

    ``memory_limit.default_memory_limit`` (80% of the memory available now) shared
    by the ranks on this host; ``$QSIMDIST_MEMORY_LIMIT`` is taken as a per-rank
    limit as it stands.
    """
    from ..memory_limit import default_memory_limit

    return default_memory_limit(lambda: ranks_on_host(comm)).limit


def check_same_plan(comm, plan: Plan) -> str:
    """Refuse to start unless every rank holds the same plan (raised on every rank)."""
    digest = plan_hash(plan)
    digests = comm.allgather(digest)
    odd = [r for r, h in enumerate(digests) if h != digests[0]]
    if odd:
        raise PlanError(f"ranks {odd[:8]} hold a different plan from rank 0; every rank must "
                        "run the same plan (make it once and broadcast it)")
    return digest


def backend_workspace(step, xp, compiled: bool, itemsize: int) -> int:
    """Bytes ``local.run_step`` allocates for ``step`` beyond what the plan counts.

    The plan counts a step's workspace as the numpy executor with its compiled
    loop kernel runs it. Where the loop kernel does not run (CuPy, or numpy
    without numba) a loop step goes through ``matmul`` and, when both operands
    broadcast, materialises the smaller one over the outer axes: those bytes.
    """
    if not step.loop or step.expand or (xp is np and compiled):
        return 0
    x_b = any(d == 1 < o for d, o in zip(step.x_view[:-2], step.out_view[:-2]))
    y_b = any(d == 1 < o for d, o in zip(step.y_view[:-2], step.out_view[:-2]))
    if not (x_b and y_b):
        return 0
    side = step.x_view if step.m <= step.n else step.y_view
    return math.prod(step.out_view[:-2]) * math.prod(side[-2:]) * itemsize


def guarded_peak(plan: Plan, xp, compiled: bool) -> int:
    """The per-rank peak the guard checks: the schedule's, plus the workspace of the
    backend that actually runs each step (:func:`backend_workspace`)."""
    sched = plan.schedule
    size = plan.network.size_dict
    dtype = np.dtype(plan.dtype)
    peak = sched.predicted.peak_bytes_per_device
    kept = kept_bytes(plan, sched)  # resident beside every step
    for s, rec in zip(plan.steps, sched.steps):
        cb = tuple(rec.compute_bits)
        local = gemm_step(s.lhs, s.rhs, s.out, s.lhs_modes, s.rhs_modes, s.out_modes,
                          local_sizes(size, cb), dtype.itemsize)
        extra = backend_workspace(local, xp, compiled, dtype.itemsize)
        if extra:
            peak = max(peak, rec.live_bytes + extra + kept)
    return peak


def check_memory(comm, plan: Plan, limit: int | None, xp=np) -> tuple[int, bool]:
    """The guarded per-rank peak and whether loop steps run compiled; refused on every rank
    when the peak exceeds some rank's limit.

    ``limit``: this rank's limit (``None``: the host's default share,
    :func:`default_rank_limit`). The peak is the schedule's plus the workspace
    of the kernels that run (:func:`guarded_peak`). A tiny plan runs its loop
    steps through ``matmul`` (compiling the loop kernel costs more than the
    plan); where that workspace would not fit, numpy runs them compiled.
    """
    mine = default_rank_limit(comm) if limit is None else int(limit)
    limits = comm.allgather(mine)
    bound = min((lim for lim in limits if lim is not None), default=None)
    compiled = xp is np and kernels.worthwhile(plan.stats.flops)
    need = guarded_peak(plan, xp, compiled)
    if bound is not None and need > bound and xp is np and not compiled \
            and kernels.available():
        compiled, need = True, guarded_peak(plan, xp, True)
    over = [(r, lim) for r, lim in enumerate(limits) if lim is not None and need > lim]
    if over:
        r, lim = over[0]
        raise PlanError(f"rank {r}: the schedule needs {format_bytes(need)} per rank (predicted "
                        f"peak), over its memory limit {format_bytes(lim)}; plan for that limit "
                        "(--memory-limit) or use more ranks")
    return need, compiled
