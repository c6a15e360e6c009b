"""Strategies side by side: the distribution report (every number a cost-model prediction)."""

from __future__ import annotations

import math

from ...hardware import HardwareProfile
from ..plan import Plan
from .schedule import Schedule
from .scheduler import schedule, strategies

#: label put on every model output, in text and JSON
PREDICTED_NOTE = ("predicted by the cost model of the hardware profile (not measured): times, "
                  "E_P, R_P, TFLOP/s, bytes and peaks")


def compare_strategies(plan: Plan, profile: HardwareProfile, devices: int, reuse: bool = False
                       ) -> tuple[dict, dict[str, Schedule]]:
    """Every registered strategy on one path; the report dict and the schedules behind it.

    ``E_P`` is slice-only's predicted time over the strategy's; ``R_P`` is
    slice-only's FLOPs over the strategy's executed FLOPs, counting the work
    every device of a group repeats on replicated tensors. ``reuse``: every
    strategy keeps step outputs across slices where memory allows (see
    :mod:`.reuse`), and each strategy's ``flops_breakdown`` says where its
    executed FLOPs go (:func:`.reuse.breakdown`) and ``order_loss`` which steps
    the slices' order makes run again (:func:`.reuse.order_loss`; ``plan``
    unsliced only).
    """
    profile.check_devices(devices)
    cache: dict = {}
    views: dict = {}
    out = {s: schedule(plan, profile, devices, s, sliced_cache=cache, view_caches=views,
                       reuse=reuse)
           for s in strategies()}
    base = out["slice_only"].predicted
    entries = {}
    for name, sch in out.items():
        p = sch.predicted
        entries[name] = {
            "seconds": p.seconds,
            "compute_seconds": p.compute_seconds,
            "comm_seconds": p.comm_seconds,
            "pack_seconds": p.pack_seconds,
            "E_P": base.seconds / p.seconds if p.seconds else float("inf"),
            "R_P": base.flops_executed / p.flops_executed if p.flops_executed else 1.0,
            "tflops_per_device": p.flops_per_device / p.seconds / 1e12 if p.seconds else 0.0,
            "group_size": sch.group_size,
            "n_slices": sch.n_slices,
            "flops_counted": p.flops_counted,
            "log10_cost": math.log10(max(p.flops_counted / 8, 1.0)),
            "flops_executed": p.flops_executed,
            "comm_bytes_per_device": p.comm_bytes_per_device,
            "peak_bytes_per_device": p.peak_bytes_per_device,
            "n_redistributions": p.n_redistributions,
            "big_fraction": sch.big_bytes / profile.usable_memory,
            "kept_outputs": len(sch.kept),
        }
        if reuse and not plan.sliced:
            from .reuse import breakdown, order_loss
            from .scheduler import scheduled_plan

            sp = scheduled_plan(plan, sch)
            entries[name]["flops_breakdown"] = breakdown(sp, sch, plan.stats.flops)
            entries[name]["order_loss"] = order_loss(sp, sch)
    report = {
        "devices": devices,
        "profile": profile.name,
        "usable_memory_per_device": profile.usable_memory,
        "reuse": reuse,
        "predicted": {
            "note": PREDICTED_NOTE,
            "R_P": entries["dp"]["R_P"],
            "E_P": entries["dp"]["E_P"],
            "strategies": entries,
        },
    }
    return report, out
