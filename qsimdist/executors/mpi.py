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

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..config import format_bytes
from ..errors import ExecutionError, InvalidInputError, PlanError, QsimdistError
from ..planner.distribution.bits import local_shape, local_sizes
from ..planner.distribution.bits import shard_slices as _shard_slices
from ..planner.distribution.reuse import kept_bytes
from ..planner.lifetime import gemm_step
from ..planner.plan import Plan
from . import kernels
from .carry import Carry, slice_assignment
from .comm import (
    Collectives,
    MpiCollectives,
    check_comm_choice,
    check_nccl_backend,
    choose_collectives,
    launched_under_mpi,  # noqa: F401  (re-exported: older callers import it from here)
    mpi_module,
)
from .local import (
    BufferPool,
    accumulate,
    accumulate_scaled,
    array_module,
    check_gemm_mode,
    decimal_mantissa,
    gemm_context,
    load_leaf,
    run_step,
    scale_by_power_of_two,
    strip_power_of_two,
)

#: the exponent a rank reports for an exactly zero shard when ranks agree on one (MAX)
_NO_EXPONENT = -(1 << 62)

FAULT_ENV = "QSIMDIST_FAULT_INJECT"
#: ``1``: trace each run's allocations with tracemalloc (``RunStats.traced_peak_bytes``),
#: in its first two slices where it has many (see TRACE_ALL_SLICES); ``all``: every slice;
#: ``rss``: the warm-up slice of a traced run, without tracemalloc, whose own tables
#: would otherwise count in ``rss_growth_bytes``
TRACE_ENV = "QSIMDIST_TRACE_MEMORY"
#: a traced run of more slices than this traces its first two slices only: tracemalloc
#: slows every allocation, and a plan sliced 2^17 ways then took minutes for what ran
#: in under one. The pool and the output are allocated by then. A plan that keeps step
#: outputs across slices computes a different subset of its steps in later slices, so its
#: pool can still grow after the first two (rqc_3x4_m8 at a 3,286-byte limit: 1,840 array
#: bytes in the first two slices, 3,224 over all); that growth shows in the run's
#: resident high-water mark (``rss_growth_bytes``), which covers every slice.
TRACE_ALL_SLICES = 16


@lru_cache(maxsize=65536)
def _slices_cached(modes, size_items, bits, rank):
    return _shard_slices(modes, dict(size_items), bits, rank)


def shard_slices(modes, size, bits, rank):
    """``bits.shard_slices``, memoised: every slice asks for the same ranges."""
    key = tuple((m, size[m]) for m in modes)
    return _slices_cached(tuple(modes), key, tuple(bits), rank)


@dataclass
class RunStats:
    """What one rank measured: bytes moved, seconds per step, peak memory."""

    rank: int = 0
    # peak_bytes: the most bytes of arrays this rank held at once (tensors, collective buffers,
    # local copies), summed from the arrays themselves; kernels' internal temporaries excluded
    sent_bytes: int = 0
    recv_bytes: int = 0
    peak_bytes: int = 0
    seconds: float = 0.0
    slices: int = 0
    redistributions: int = 0
    step_seconds: list[float] = field(default_factory=list)  # summed over this rank's slices
    step_sent: list[int] = field(default_factory=list)  # bytes sent per step, one slice
    step_recv: list[int] = field(default_factory=list)
    step_peak: list[int] = field(default_factory=list)  # bytes held by this rank during each step
    # times each step ran on this rank (its slices; fewer where kept outputs were reused)
    step_runs: list[int] = field(default_factory=list)
    array_peak_bytes: int = 0  # peak_bytes plus the buffer pool's free buffers at that step
    guarded_bytes: int = 0  # the per-rank peak the memory guard checked (schedule + workspace)
    blas_threads: int = 0  # this rank's BLAS threads as capped by share_cores (0: left alone)
    rss_before_bytes: int = 0  # resident memory when the run started
    rss_growth_bytes: int = 0  # resident high-water mark less rss_before (an upper bound)
    traced_peak_bytes: int = -1  # under tracemalloc: peak traced bytes the run added (-1: off)
    # under tracemalloc: the most bytes numpy's arrays held at the end of the steps with the
    # largest predicted live bytes (first and last slice; the pool's free buffers included),
    # less what numpy held before the run
    traced_array_bytes: int = -1
    comm: str = "mpi"  # the collectives that moved this rank's arrays: "mpi" or "nccl"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


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


class _GroupRunner:
    """One rank's work inside its group for one slice."""

    def __init__(self, plan: Plan, group, xp, pool: BufferPool, stats: RunStats, fault,
                 gemm: str = "complex", compiled: bool | None = None,
                 coll: Collectives | None = None) -> None:
        self.plan, self.group, self.xp, self.pool, self.stats = plan, group, xp, pool, stats
        # the group's collectives (host-staged MPI unless the run chose otherwise)
        self.coll = coll if coll is not None else MpiCollectives(group, xp, pool, plan.dtype)
        self.gemm = gemm
        self.sched = plan.schedule
        self.d = self.sched.group_size
        self.r = group.Get_rank()
        self.size = plan.network.size_dict
        self.dtype = np.dtype(plan.dtype)
        self.modes = dict(enumerate(plan.leaf_modes))
        for s in plan.steps:
            self.modes[s.out] = s.out_modes
        self.fault = fault
        self.compiled = compiled
        # under tracemalloc: numpy's traced bytes after the steps the schedule predicts the
        # most memory for (a snapshot costs too much to take after every step)
        self.sample_arrays = False
        live = [rec.live_bytes for rec in self.sched.steps]
        self.sample_steps = {j for j, b in enumerate(live) if b == max(live, default=0)}
        self.global_rank = stats.rank
        self.local_steps = {}
        # the schedule's kept outputs, reused while their sliced indices are unchanged
        self.carry = Carry.of(plan)

    # ----------------------------------------------------------- helpers
    def shard_of(self, node: int, whole, bits, rank: int):
        return self.xp.ascontiguousarray(whole[shard_slices(self.modes[node], self.size, bits,
                                                            rank)])

    def full_shape(self, node: int) -> tuple[int, ...]:
        return tuple(self.size[i] for i in self.modes[node])

    def out_shape(self, j: int, bits) -> tuple[int, ...]:
        key = ("out", j, bits)
        if key not in self.local_steps:
            self.local_steps[key] = local_shape(self.plan.steps[j].out_modes, self.size, bits)
        return self.local_steps[key]

    def local_step(self, j: int, bits):
        key = (j, tuple(bits))
        if key not in self.local_steps:
            s = self.plan.steps[j]
            self.local_steps[key] = gemm_step(s.lhs, s.rhs, s.out, s.lhs_modes, s.rhs_modes,
                                              s.out_modes, local_sizes(self.size, bits),
                                              self.dtype.itemsize)
        return self.local_steps[key]

    # -------------------------------------------------------- collectives
    def fault_in_collective(self) -> None:
        """The injected ``at=collective`` fault: raised as this rank's peers enter the call."""
        if self.fault == (self.global_rank, "collective"):
            raise ExecutionError(f"fault injected inside a collective ({FAULT_ENV})")

    def alltoall(self, node: int, x, old, new):
        """Move a shard from bits ``old`` to ``new`` (all-to-all; the kept block is copied).

        Blocks for other ranks are packed straight into one send buffer and
        unpacked straight from one receive buffer (pooled where the collectives
        use the run's memory): one copy each way.
        """
        coll = self.coll
        modes, d, me = self.modes[node], self.d, self.r
        mine_old = shard_slices(modes, self.size, old, me)
        mine_new = shard_slices(modes, self.size, new, me)
        out = self.pool.get(local_shape(modes, self.size, new))
        xh = coll.stage(x)
        sends, recvs = [], []
        scount, rcount = [0] * d, [0] * d  # elements
        for p in range(d):
            give = _overlap(mine_old, shard_slices(modes, self.size, new, p), self.size, modes)
            take = _overlap(shard_slices(modes, self.size, old, p), mine_new, self.size, modes)
            if p == me:
                if give is not None:
                    out[_relative(give, mine_new)] = x[_relative(give, mine_old)]
                continue
            if give is not None:
                blk = _relative(give, mine_old)
                sends.append((p, blk))
                scount[p] = math.prod(s.stop - s.start for s in blk)
            if take is not None:
                blk = _relative(take, mine_new)
                recvs.append((p, blk))
                rcount[p] = math.prod(s.stop - s.start for s in blk)
        sdispl = [sum(scount[:p]) for p in range(d)]
        rdispl = [sum(rcount[:p]) for p in range(d)]
        sendbuf = coll.buffer(sum(scount))
        recvbuf = coll.buffer(sum(rcount))
        for p, blk in sends:
            shape = tuple(s.stop - s.start for s in blk)
            sendbuf[sdispl[p]:sdispl[p] + scount[p]].reshape(shape)[...] = xh[blk]
        item = self.dtype.itemsize
        self.fault_in_collective()
        coll.alltoallv(sendbuf, scount, sdispl, recvbuf, rcount, rdispl)
        for p, blk in recvs:
            shape = tuple(s.stop - s.start for s in blk)
            out[blk] = coll.unstage(recvbuf[rdispl[p]:rdispl[p] + rcount[p]].reshape(shape))
        staged = (sendbuf.nbytes + recvbuf.nbytes + out.nbytes)
        coll.release(sendbuf, recvbuf)
        return out, sum(scount) * item, sum(rcount) * item, staged

    def allgather(self, node: int, x, bits):
        """The whole tensor from its shards."""
        coll = self.coll
        xh = coll.stage(x)
        recv = coll.buffer(self.d * xh.size)
        self.fault_in_collective()
        coll.allgather(xh.reshape(-1), recv)
        recv = recv.reshape((self.d,) + xh.shape)
        whole = self.pool.get(self.full_shape(node))
        for p in range(self.d):
            whole[shard_slices(self.modes[node], self.size, bits, p)] = coll.unstage(recv[p])
        staged = recv.nbytes + whole.nbytes
        coll.release(recv)
        return whole, xh.nbytes, xh.nbytes * (self.d - 1), staged

    def allreduce(self, node: int, part, bits):
        """Sum partial results placed at each device's index range (in place)."""
        coll = self.coll
        whole = coll.buffer(math.prod(self.full_shape(node))).reshape(self.full_shape(node))
        whole[...] = 0
        whole[shard_slices(self.modes[node], self.size, bits, self.r)] = coll.stage(part)
        self.fault_in_collective()
        coll.allreduce(whole.reshape(-1))  # a flat view: 0-d buffers fail
        nbytes = whole.nbytes
        wire = int(2 * nbytes * (self.d - 1) / self.d)  # a ring's volume (MPI picks its own)
        return coll.unstage(whole), wire, wire, nbytes

    # ---------------------------------------------------------------- run
    def agreed_exponent(self, arr, sharded: bool) -> int | None:
        """Divide ``arr`` by ``2**e`` (its largest magnitude near 1) and return ``e``; a
        sharded tensor's ranks agree on the largest ``e`` of their shards (one
        all-reduce), so the tensor keeps one exponent. ``None``: exactly zero."""
        from mpi4py import MPI

        mine = strip_power_of_two(arr, self.xp)
        if not sharded:  # replicated: every rank holds (and strips) the same values
            return mine
        e = self.group.allreduce(_NO_EXPONENT if mine is None else mine, op=MPI.MAX)
        if e == _NO_EXPONENT:
            return None
        if mine is not None and mine != e:
            scale_by_power_of_two(arr, mine - e)
        return e

    def run(self, assignment: dict[str, int], first_slice: bool, scaled: bool = False,
            slice_no: int = 0):
        """Contract one slice; returns the whole root (every step's bytes and time recorded).

        ``scaled``: track exponents as ``local.contract_slice_scaled`` does and return
        ``(root, e)``, the slice's value being ``root * 2**e`` (``e`` None: exactly zero).
        """
        plan, sched, xp = self.plan, self.sched, self.xp
        held: dict[int, tuple[object, tuple]] = {}
        exps: dict[int, int | None] = {}
        # kept outputs still valid for slice ``s`` are not computed again (exponent
        # tracking runs every step: a kept output would need its exponent kept too)
        carry = None if scaled else self.carry
        need = carry.needed(plan, slice_no) if carry is not None else None
        kept = carry.kept if carry is not None else frozenset()
        for k in range(plan.network.num_tensors):
            if need is not None and k not in need:
                continue
            held[k] = (load_leaf(plan, k, assignment, xp, self.dtype), ())
            if scaled:  # leaves are whole on every rank
                exps[k] = strip_power_of_two(held[k][0], xp)
        held_bytes = sum(a.nbytes for a, _ in held.values())
        # the leaves are made outside the pool: their bytes count against its cap until used
        leaves = {id(a): a for a, _ in held.values()}  # (kept alive: no id is reused meanwhile)
        self.pool.external += held_bytes
        for j, (s, rec) in enumerate(zip(plan.steps, sched.steps)):
            if self.fault is not None and self.fault == (self.global_rank, j):
                raise ExecutionError(f"fault injected at step {j} ({FAULT_ENV})")
            if need is not None and s.out not in need:
                continue
            t0 = time.perf_counter()
            sent = recv = 0
            node = {"lhs": s.lhs, "rhs": s.rhs}
            ops = {side: held.pop(node[side]) if node[side] in held else carry.get(node[side])
                   for side in ("lhs", "rhs")}
            held_bytes -= sum(a.nbytes for side, (a, _) in ops.items() if node[side] not in kept)
            consumed = sum(leaves.pop(id(a)).nbytes for a, _ in ops.values() if id(a) in leaves)
            # kept outputs resident beside this step (its own operands count below)
            resident = 0 if carry is None else carry.nbytes - sum(
                a.nbytes for side, (a, _) in ops.items() if node[side] in carry.store)
            others = held_bytes + resident
            # bytes this step holds: the operands as stored, collective buffers, local copies
            step_bytes = sum(a.nbytes for a, _ in ops.values())
            # back to the pool once the step is done (kept outputs stay)
            spent = [a for side, (a, _) in ops.items() if node[side] not in kept]
            for c in rec.pre:
                arr, bits = ops[c.operand]
                n = node[c.operand]
                if c.kind == "alltoall":
                    arr2, a, b, tmp = self.alltoall(n, arr, bits, c.to_bits)
                    self.stats.redistributions += first_slice
                else:
                    arr2, a, b, tmp = self.allgather(n, arr, bits)
                spent.append(arr2)
                ops[c.operand] = (arr2, tuple(c.to_bits))
                sent, recv, step_bytes = sent + a, recv + b, step_bytes + tmp
            cb = tuple(rec.compute_bits)
            local = []
            for side in ("lhs", "rhs"):
                arr, bits = ops[side]
                if not bits and cb and any(m in self.modes[node[side]] for m, _ in cb):
                    part = arr[shard_slices(self.modes[node[side]], self.size, cb, self.r)]
                    arr = self.pool.get(part.shape)
                    arr[...] = part
                    spent.append(arr)
                    step_bytes += arr.nbytes
                local.append(arr)
            out = run_step(self.local_step(j, cb), local[0], local[1], xp, self.pool,
                           self.compiled, gemm=self.gemm)
            out = out.reshape(self.out_shape(j, cb))
            step_bytes += out.nbytes
            if rec.post is not None:
                spent.append(out)
                if rec.post.kind == "allreduce":
                    out, a, b, tmp = self.allreduce(s.out, out, cb)
                else:
                    out, a, b, tmp = self.allgather(s.out, out, cb)
                sent, recv, step_bytes = sent + a, recv + b, step_bytes + tmp
            self.pool.external -= consumed  # (a leaf given back may now be kept as free)
            for a in spent:
                if a is not out:
                    self.pool.put(a)
            measured = others + step_bytes
            self.stats.peak_bytes = max(self.stats.peak_bytes, measured)
            # with the pool's free buffers: every array this rank's run holds
            self.stats.array_peak_bytes = max(self.stats.array_peak_bytes,
                                              measured + self.pool.held)
            held[s.out] = (out, tuple(rec.out_bits))
            if s.out in kept:  # held for its consumer now, and kept for later slices
                old = carry.put(s.out, slice_no, (out, tuple(rec.out_bits)), out.nbytes)
                if old is not None:
                    self.pool.put(old[0])
            if scaled:
                ea, eb = exps.pop(s.lhs), exps.pop(s.rhs)
                e = self.agreed_exponent(out, bool(rec.out_bits))
                exps[s.out] = None if e is None or ea is None or eb is None else ea + eb + e
            if self.sample_arrays and j in self.sample_steps:
                self.stats.traced_array_bytes = max(self.stats.traced_array_bytes,
                                                    _traced_numpy_bytes())
            held_bytes += out.nbytes if s.out not in kept else 0
            if first_slice:
                self.stats.step_sent.append(sent)
                self.stats.step_recv.append(recv)
                self.stats.step_seconds.append(0.0)
                self.stats.step_peak.append(0)
                self.stats.step_runs.append(0)
            self.stats.step_runs[j] += 1
            self.stats.step_peak[j] = max(self.stats.step_peak[j], measured)
            self.stats.step_seconds[j] += time.perf_counter() - t0
            self.stats.sent_bytes += sent
            self.stats.recv_bytes += recv
        ((key, (root, bits)),) = held.items()
        if bits:
            raise ExecutionError("the schedule left the result sharded")
        return (root, exps[key]) if scaled else root


def _overlap(a: tuple[slice, ...], b: tuple[slice, ...], size, modes):
    """Intersection of two index boxes (``slice(None)`` = the whole mode); ``None`` if empty."""
    out = []
    for m, sa, sb in zip(modes, a, b):
        lo_a, hi_a = (0, size[m]) if sa.start is None else (sa.start, sa.stop)
        lo_b, hi_b = (0, size[m]) if sb.start is None else (sb.start, sb.stop)
        lo, hi = max(lo_a, lo_b), min(hi_a, hi_b)
        if lo >= hi:
            return None
        out.append(slice(lo, hi))
    return tuple(out)


def _relative(box: tuple[slice, ...], origin: tuple[slice, ...]) -> tuple[slice, ...]:
    """``box`` in the local coordinates of a shard whose global ranges are ``origin``."""
    out = []
    for b, o in zip(box, origin):
        start = 0 if o.start is None else o.start
        out.append(slice(b.start - start, b.stop - start))
    return tuple(out)


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


def _resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc/self/statm``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _max_resident_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _traced_numpy_bytes() -> int:
    """Bytes of numpy arrays tracemalloc traces now (numpy's own tracemalloc domain)."""
    import tracemalloc

    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
    return sum(stat.size for stat in snap.statistics("filename"))


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
    runner = _GroupRunner(plan, group, xp, pool, stats, fault, gemm, compiled, inside)
    out_shape = tuple(plan.network.size_dict[i] for i in plan.network.output)
    stats.guarded_bytes = need
    trace = os.environ.get(TRACE_ENV)
    measuring = trace in ("1", "all", "rss")
    mine = sched.slices_of_group(g)
    if measuring and len(mine):
        # measure the run, not the loading of code: one untimed slice first compiles (or
        # loads) the kernels every step uses, as any earlier run in the process would have
        warm = _GroupRunner(plan, group, xp, pool, RunStats(rank=rank), None, gemm, compiled,
                            inside)
        pool.put(warm.run(slice_assignment(plan, mine[0]), first_slice=True, slice_no=mine[0]))
        for arr, _ in (warm.carry.values() if warm.carry is not None else ()):
            pool.put(arr)
    stats.rss_before_bytes = _resident_bytes()
    started = measuring and trace != "rss" and not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracing = tracemalloc.is_tracing()
    if tracing:
        traced_before = tracemalloc.get_traced_memory()[0]
        arrays_before = _traced_numpy_bytes() if xp is np else 0
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
            top = across.allreduce(_NO_EXPONENT if exp is None else exp, op=MPI.MAX)
            if exp is None:
                result[...] = 0
            elif top != exp:
                scale_by_power_of_two(result, exp - top)
            exp = None if top == _NO_EXPONENT else top
        staged = between.stage(result)
        runner.fault_in_collective()
        between.allreduce(staged.reshape(-1))  # a flat view: 0-d buffers fail
        result = between.unstage(staged)
        if strip_exponent:
            result = decimal_mantissa(result, exp, xp)
    stats.seconds = time.perf_counter() - t0
    # an upper bound on what the run added to the process: its resident high-water
    # mark (which may predate the run) less what was resident when it started
    stats.rss_growth_bytes = max(0, _max_resident_bytes() - stats.rss_before_bytes)
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


def _runs_of(st: dict, j: int) -> int:
    """How often a rank ran step ``j`` (its slices, for stats without ``step_runs``)."""
    runs = st.get("step_runs") or []
    return max(1, runs[j]) if j < len(runs) else st["slices"]


def trace_rows(plan: Plan, gathered: list[dict]) -> list[dict]:
    """Per step: what the schedule predicted next to what the ranks measured (per slice).

    ``measured_s`` is the mean over ranks (a collective's time includes waiting
    for the slowest peer, so the mean is what the step costs the group);
    ``measured_max_s`` the slowest rank's.
    """
    rows = []
    for j, rec in enumerate(plan.schedule.steps):
        # per run of the step: with kept outputs a step runs on fewer than every slice
        per_rank = [st["step_seconds"][j] / _runs_of(st, j) for st in gathered
                    if st["slices"] and j < len(st["step_seconds"])]
        measured = sum(per_rank) / len(per_rank) if per_rank else 0.0
        rows.append({
            "step": j,
            "action": rec.action.value,
            "flops_per_device": rec.flops_per_device,
            "sent_bytes": sum(c.send_bytes for c in rec.collectives),
            "messages": sum(c.messages for c in rec.collectives),
            "pack_bytes": sum(c.send_bytes + c.recv_bytes for c in rec.collectives),
            "predicted_s": rec.predicted_compute_seconds + rec.predicted_comm_seconds
            + rec.predicted_pack_seconds,
            "measured_s": measured,
            "measured_max_s": max(per_rank, default=0.0),
            "measured_peak_bytes": max((st["step_peak"][j] for st in gathered
                                        if j < len(st["step_peak"])), default=0),
            "predicted_live_bytes": rec.live_bytes,
        })
    return rows


def write_trace(path, plan: Plan, gathered: list[dict], seconds: float) -> None:
    """Write a ``--trace`` file: predictions beside measurements, per step and in total."""
    from .._fileio import atomic_write_text

    sched = plan.schedule
    rows = trace_rows(plan, gathered)
    rounds = sched.predicted.rounds
    data = {
        "schema": "qsimdist.trace", "version": 1,
        "profile": sched.profile, "ranks": sched.devices, "group_size": sched.group_size,
        "dtype": plan.dtype, "n_slices": sched.n_slices, "rounds": rounds,
        "predicted_seconds": sched.predicted.seconds,
        "measured_seconds": seconds,
        "measured_steps_seconds": sum(r["measured_s"] for r in rows) * rounds,
        "predicted_peak_bytes": sched.predicted.peak_bytes_per_device,
        "measured_peak_bytes": max(st["peak_bytes"] for st in gathered),
        "sent_bytes_per_rank": [st["sent_bytes"] for st in gathered],
        "steps": rows,
    }
    atomic_write_text(path, json.dumps(data, indent=1))
