"""The distribution report of ``qsimdist plan --profile NAME --devices P``.

Side by side for one path: dp, forced-only and slice-only predicted times,
E_P (slice-only time / strategy time), R_P (slice-only FLOPs / distributed
FLOPs), communication, per-device peak memory and redistributions; and a plot
of the dp schedule per step.
"""

from __future__ import annotations

import math
from pathlib import Path

from .config import format_bytes, format_count
from .hardware import load_profile
from .planner.distribute import Schedule, compare_strategies
from .planner.plan import Plan

STRATEGIES = ("dp", "forced_only", "slice_only")


def distribution_report(plan: Plan, profile: str, devices: int) -> tuple[dict, dict[str, Schedule]]:
    """The report dictionary (the ``--json`` output) and the schedules behind it."""
    prof = load_profile(profile)
    return compare_strategies(plan, prof, devices)


def format_report(report: dict) -> str:
    """A plain-text table of :func:`distribution_report`."""
    lines = [
        f"profile {report['profile']}, {report['devices']} devices: "
        f"total {report['flops']:.3e} FLOPs (dp), log10 cost {report['log10_cost']:.2f}, "
        f"R_P = {report['R_P']:.2f}",
        f"{'strategy':<12}{'time':>12}{'E_P':>9}{'group':>7}{'slices':>11}{'comm':>13}"
        f"{'comm %':>8}{'peak/dev':>12}{'redis':>7}{'TFLOP/s/dev':>13}",
    ]
    for name in STRATEGIES:
        s = report["strategies"][name]
        lines.append(
            f"{name:<12}{_seconds(s['time_s']):>12}{s['E_P']:>9.2f}{s['group_size']:>7}"
            f" {format_count(s['n_slices']):>10} {format_bytes(s['comm_bytes']):>12}"
            f"{100 * s['comm_share']:>7.1f}%"
            f"{format_bytes(s['peak_bytes_per_device']):>12}{s['n_redistributions']:>7}"
            f"{s['tflops_per_device']:>13.2f}"
        )
    return "\n".join(lines)


def _seconds(t: float) -> str:
    if t >= 86400 * 365:
        return f"{t / (86400 * 365):.3g} y"
    if t >= 86400:
        return f"{t / 86400:.3g} d"
    if t >= 1:
        return f"{t:.3g} s"
    return f"{t * 1e3:.3g} ms"


def plot_schedule(plan: Plan, sched: Schedule, path: str | Path) -> Path:
    """Per step: largest live tensor, per-device live memory, predicted time; redistributions marked."""
    from ._optional import require

    require("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._fileio import atomic_write

    steps = list(range(len(plan.steps)))
    itemsize = 16 if plan.dtype == "complex128" else 8
    tensor = [math.prod(s.out_view) * itemsize for s in plan.steps]
    live = [a.live_bytes_per_device for a in sched.annotations]
    secs = [a.compute_seconds + a.comm_seconds for a in sched.annotations]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    ax1.semilogy(steps, tensor, label="output tensor (bytes, whole)")
    ax1.semilogy(steps, live, label="live memory per device (bytes)")
    red = [k for k, a in enumerate(sched.annotations) if a.action == "redistribute"]
    for k in red:
        ax1.axvline(k, color="red", alpha=0.3, lw=0.8)
    ax1.set_ylabel("bytes")
    ax1.legend(loc="upper left")
    ax1.set_title(
        f"{sched.strategy} on {sched.devices} devices (groups of {sched.group_size}); "
        f"red: {len(red)} redistributions"
    )
    ax2.semilogy(steps, [max(s, 1e-12) for s in secs], ".", label="predicted seconds per step")
    ax2.set_xlabel("step")
    ax2.set_ylabel("seconds")
    ax2.legend(loc="upper left")
    fig.tight_layout()
    path = Path(path)
    atomic_write(path, lambda fh: fig.savefig(fh, format=path.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return path
