"""The distribution report of ``qsimdist plan --profile NAME --devices P``.

Side by side for one path: every registered strategy's *predicted* time
(split into compute, link and pack/unpack), E_P (slice-only time / strategy
time), R_P (slice-only FLOPs / executed FLOPs, replicated work included),
communication, per-device peak memory and redistributions; and a plot of the
dp schedule per step. Every number here is a prediction of the cost model.
"""

from __future__ import annotations

import math
from pathlib import Path

from .config import format_bytes, format_count
from .hardware import load_profile
from .planner.distribution import PREDICTED_NOTE, Schedule, compare_strategies
from .planner.plan import Plan


def distribution_report(plan: Plan, profile: str, devices: int, reuse: bool = False
                        ) -> tuple[dict, dict[str, Schedule]]:
    """The report dictionary (the ``--json`` output) and the schedules behind it."""
    prof = load_profile(profile)
    return compare_strategies(plan, prof, devices, reuse=reuse)


def format_report(report: dict) -> str:
    """A plain-text table of :func:`distribution_report`, every model output labelled predicted."""
    pred = report["predicted"]
    lines = [
        f"profile {report['profile']}, {report['devices']} devices, "
        f"{format_bytes(report['usable_memory_per_device'])} usable per device",
        f"PREDICTED by the cost model (not measured): dp E_P = {pred['E_P']:.3g}, "
        f"R_P = {pred['R_P']:.3g}",
        f"{'strategy':<12}{'pred. time':>12}{'compute':>12}{'link':>12}{'pack':>12}{'E_P':>9}"
        f"{'R_P':>9}{'log10 cost':>11}{'group':>7}{'slices':>9}{'sent/dev':>12}"
        f"{'peak/dev':>12}{'redis':>7}"
        f"{'TFLOP/s/dev':>13}",
    ]
    for name, s in pred["strategies"].items():
        lines.append(
            f"{name:<12}{_seconds(s['seconds']):>12}{_seconds(s['compute_seconds']):>12}"
            f"{_seconds(s['comm_seconds']):>12}{_seconds(s['pack_seconds']):>12}"
            f"{s['E_P']:>9.3g}{s['R_P']:>9.3g}{s['log10_cost']:>11.2f}{s['group_size']:>7}"
            f"{format_count(s['n_slices']):>9}{format_bytes(s['comm_bytes_per_device']):>12}"
            f"{format_bytes(s['peak_bytes_per_device']):>12}{s['n_redistributions']:>7}"
            f"{s['tflops_per_device']:>13.3g}"
        )
    if report.get("reuse"):
        kept = ", ".join(f"{name} {s.get('kept_outputs', 0)}"
                         for name, s in pred["strategies"].items())
        lines.append(f"reuse across slices: step outputs kept per group: {kept}")
        b = pred["strategies"]["dp"].get("flops_breakdown")
        if b and pred["strategies"]["dp"]["n_slices"] > 1:
            def e(k: str) -> str:
                return f"10^{math.log10(max(b[k], 1.0)):.2f}"

            lines.append(
                f"dp executed FLOPs {e('kept')}: the path once {e('unsliced')}, each step once "
                f"per value of its sliced indices {e('once_per_value')}, every output kept in "
                f"this order {e('every_kept')}, nothing kept {e('nothing_kept')}")
            o = pred["strategies"]["dp"].get("order_loss")
            if o and o["steps"]:
                t = o["steps"][0]
                lines.append(
                    f"the order's cost: 10^{math.log10(o['extra_flops']):.2f} FLOPs above once "
                    f"per value, {t['share']:.0%} in step {t['step']} (run again for "
                    f"{len(t['reruns_for'])} outer sliced index(es); a copy per value would "
                    f"hold {format_bytes(t['bytes_all_versions'])} per device); "
                    f"{o['fits_share']:.1%} of it in steps whose copies would fit memory")
    lines.append(f"({PREDICTED_NOTE})")
    return "\n".join(lines)


def _seconds(t: float) -> str:
    if t >= 86400 * 365:
        return f"{t / (86400 * 365):.3g} y"
    if t >= 86400:
        return f"{t / 86400:.3g} d"
    if t >= 1 or t == 0:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


def plot_schedule(plan: Plan, sched: Schedule, path: str | Path) -> Path:
    """Per step: output size, per-device live memory, predicted time; redistributions marked."""
    from ._optional import require

    require("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._fileio import atomic_write

    steps = list(range(len(plan.steps)))
    itemsize = 16 if plan.dtype == "complex128" else 8
    tensor = [math.prod(s.out_view) * itemsize for s in plan.steps]
    live = [r.live_bytes for r in sched.steps]
    secs = [r.predicted_compute_seconds + r.predicted_comm_seconds + r.predicted_pack_seconds
            for r in sched.steps]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    ax1.semilogy(steps, tensor, label="output tensor (bytes, whole)")
    ax1.semilogy(steps, live, label="live memory per device (bytes, predicted)")
    ax1.axhline(sched.usable_memory, color="black", lw=0.8, ls="--", label="usable per device")
    red = [k for k, r in enumerate(sched.steps) if r.action.value == "redistribute"]
    for k in red:
        ax1.axvline(k, color="red", alpha=0.3, lw=0.8)
    ax1.set_ylabel("bytes")
    ax1.legend(loc="upper left")
    ax1.set_title(
        f"{sched.strategy} on {sched.devices} devices (groups of {sched.group_size}); "
        f"red: {len(red)} redistributions (predicted)"
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
