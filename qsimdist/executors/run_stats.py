"""What an MPI run measured: each rank's :class:`RunStats`, the process's memory
readings, and the ``--trace`` file that sets them beside the schedule's predictions."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from ..planner.plan import Plan

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


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc/self/statm``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def max_resident_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def traced_numpy_bytes() -> int:
    """Bytes of numpy arrays tracemalloc traces now (numpy's own tracemalloc domain)."""
    import tracemalloc

    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
    return sum(stat.size for stat in snap.statistics("filename"))


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
