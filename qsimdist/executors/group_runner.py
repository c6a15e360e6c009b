"""One rank's work inside its device group for one slice of a distributed schedule.

:class:`GroupRunner` follows the schedule's records step by step: it moves shards
between ranks (``alltoall``, ``allgather``, ``allreduce``, through the run's
:class:`~qsimdist.executors.comm.Collectives`), runs each step's local GEMM view and
records bytes, seconds and peak memory in the rank's
:class:`~qsimdist.executors.run_stats.RunStats`.
"""

from __future__ import annotations

import math
import time
from functools import lru_cache

import numpy as np

from ..errors import ExecutionError
from ..planner.distribution.bits import local_shape, local_sizes
from ..planner.distribution.bits import shard_slices as _shard_slices
from ..planner.lifetime import gemm_step
from ..planner.plan import Plan
from .carry import Carry
from .comm import Collectives, MpiCollectives
from .local import (
    BufferPool,
    load_leaf,
    run_step,
    scale_by_power_of_two,
    strip_power_of_two,
)
from .rank_checks import FAULT_ENV
from .run_stats import RunStats, traced_numpy_bytes

#: the exponent a rank reports for an exactly zero shard when ranks agree on one (MAX)
NO_EXPONENT = -(1 << 62)


@lru_cache(maxsize=65536)
def _slices_cached(modes, size_items, bits, rank):
    return _shard_slices(modes, dict(size_items), bits, rank)


def shard_slices(modes, size, bits, rank):
    """``bits.shard_slices``, memoised: every slice asks for the same ranges."""
    key = tuple((m, size[m]) for m in modes)
    return _slices_cached(tuple(modes), key, tuple(bits), rank)


class GroupRunner:
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
        e = self.group.allreduce(NO_EXPONENT if mine is None else mine, op=MPI.MAX)
        if e == NO_EXPONENT:
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
                                                    traced_numpy_bytes())
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
