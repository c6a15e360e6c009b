"""What a contraction will cost, before it runs: :func:`plan_cost`.

From a :class:`~qsimdist.planner.plan.Plan` alone (nothing is contracted):

* the FLOPs the executor will run (all slices: the plan's own count, which the
  executor's ``stats`` report after a run), the largest intermediate, the peak
  memory and the number of slices;
* the predicted time on this machine: each step priced as the local executor
  will run it (:func:`predicted_local_seconds`, the kernel the plan chose, at
  :class:`~qsimdist.hardware.costs.LocalCosts` prices, plus the Python dispatch of
  each step and slice);
* optionally the predicted time on ``devices`` devices of a hardware profile: the
  plan's path unsliced, scheduled by the distribution planner (``dp``: sharded
  intermediates with all-to-all redistribution, sliced where memory requires),
  beside ``slice_only`` on the same devices.

Every time here is a **prediction** of the cost model; the FLOPs, bytes and slices
are counts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..config import format_bytes, format_count
from ..hardware import costs as cost_constants
from ..hardware.costs import LocalCosts
from .plan import Plan, build_plan


@dataclass(frozen=True)
class DistributedCost:
    """The dp schedule of a plan's path on ``devices`` devices of ``profile`` (predicted).

    Attributes
    ----------
    profile : str
        The hardware profile's name.
    devices : int
        The devices the schedule runs on.
    predicted_seconds : float
        The dp schedule's predicted time.
    flops_executed : float
        Real FLOPs the devices execute together, work repeated on replicated tensors
        included.
    peak_bytes_per_device : int
        The schedule's peak memory on one device.
    slices : int
        Slices the schedule runs.
    group_size : int
        Devices that share one slice's sharded intermediates.
    redistributions : int
        All-to-all redistributions per slice.
    slice_only_seconds : float
        Predicted time of slice-only parallelism on the same devices.
    E_P : float
        Slice-only's predicted time over the dp schedule's.
    R_P : float
        Slice-only's FLOPs over the dp schedule's executed FLOPs.
    """

    profile: str
    devices: int
    predicted_seconds: float
    flops_executed: float
    peak_bytes_per_device: int
    slices: int
    group_size: int
    redistributions: int
    slice_only_seconds: float
    E_P: float
    R_P: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ContractionCost:
    """A contraction's cost before it runs (see the module docstring).

    Attributes
    ----------
    flops : float
        Real FLOPs over all slices (8 per complex multiply-add), as executed.
    largest_intermediate_bytes : int
        The largest intermediate of one slice.
    peak_bytes : int
        The plan's peak memory (one process).
    slices : int
        Slices the plan runs.
    steps : int
        Pairwise steps per slice.
    predicted_seconds : float
        Predicted time of the run on this machine (the contraction; a process's first
        load of the compiled kernels is added by the engine, see
        :class:`~qsimdist.engine.term_costs.TermCost`).
    distributed : DistributedCost or None
        The dp schedule on a profile, where one was asked for.
    compiled_steps : int, default 0
        Steps per slice that run in the compiled (numba) loop kernels.
    """

    flops: float
    largest_intermediate_bytes: int
    peak_bytes: int
    slices: int
    steps: int
    predicted_seconds: float
    distributed: DistributedCost | None = None
    compiled_steps: int = 0

    @property
    def log10_flops(self) -> float:
        return math.log10(max(self.flops, 1.0))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["log10_flops"] = self.log10_flops
        d["distributed"] = None if self.distributed is None else self.distributed.to_dict()
        return d

    def summary(self) -> str:
        """One line: counts, then the predicted times (labelled)."""
        text = (f"10^{self.log10_flops:.2f} FLOPs, largest intermediate "
                f"{format_bytes(self.largest_intermediate_bytes)}, peak "
                f"{format_bytes(self.peak_bytes)}, {format_count(self.slices)} slice(s); "
                f"predicted {seconds_text(self.predicted_seconds)} here")
        d = self.distributed
        if d is not None:
            text += (f", predicted {seconds_text(d.predicted_seconds)} on {d.profile} x "
                     f"{d.devices} (dp: 10^{math.log10(max(d.flops_executed, 1.0)):.2f} FLOPs, "
                     f"{format_bytes(d.peak_bytes_per_device)} per device, "
                     f"{format_count(d.slices)} slice(s), E_P {d.E_P:.3g})")
        return text


def seconds_text(s: float) -> str:
    """Seconds for people: ``0.42 s``, ``3.1 min``, ``2.0 h``, ``5.3 days``, ``1.2e+03 years``."""
    if not math.isfinite(s):
        return "inf"
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if s >= size * (2 if unit != "min" else 1):
            value = s / size
            return f"{value:.3g} {unit}" if value < 1e4 else f"{value:.2e} {unit}"
    return f"{s:.3g} s"


def step_seconds(step, itemsize: int, costs: LocalCosts) -> float:
    """Predicted time of one step as the local executor runs it (the plan's kernel choice)."""
    if step.kernel == "gemm":
        t = costs.gemm_seconds(step.batch, step.m, step.n, step.k)
    elif step.kernel == "transpose":
        b, m, n = step.tmp_shape
        t = (costs.gemm_seconds(b, m, n, step.k)
             + step.transposed_bytes * costs.permute_byte)
    elif step.loop:
        if step.tiled:
            x = math.prod(step.x_view) // max(step.k, 1)
            y = math.prod(step.y_view) // max(step.k, 1)
            t = costs.tiled_seconds(max(x, y), min(x, y), step.k, itemsize)
        else:
            t = costs.loop_seconds(step.batch, step.m, step.n, step.k)
        if not math.isfinite(t):  # without the compiled kernel it runs as broadcast
            t = costs.gemm_seconds(step.batch, step.m, step.n, step.k)
    else:
        t = (costs.gemm_seconds(step.batch, step.m, step.n, step.k)
             + 2 * step.expanded_bytes * costs.copy_byte)
    return t + cost_constants.LOCAL_STEP_DISPATCH_SECONDS


def predicted_local_seconds(plan: Plan, costs: LocalCosts | None = None) -> float:
    """Predicted seconds of ``plan`` on the local executor: every step at the prices of
    ``costs`` (default: this process's, :func:`~qsimdist.hardware.local_costs.local_costs`)
    times the slices, plus each slice's dispatch."""
    if costs is None:
        from ..hardware.local_costs import local_costs

        costs = local_costs()
    itemsize = 16 if plan.dtype == "complex128" else 8
    per_slice = sum(step_seconds(s, itemsize, costs) for s in plan.steps)
    slices = max(1, plan.stats.n_slices)
    return slices * (per_slice + cost_constants.LOCAL_SLICE_DISPATCH_SECONDS)


def distributed_cost(plan: Plan, profile, devices: int) -> DistributedCost:
    """The dp schedule of ``plan``'s path, unsliced first, on ``devices`` devices of
    ``profile`` (a name or a :class:`~qsimdist.hardware.profiles.HardwareProfile`)."""
    from ..hardware.profiles import load_profile
    from .distribution.report import compare_strategies

    prof = load_profile(profile) if isinstance(profile, str) else profile
    unsliced = plan if not plan.sliced else build_plan(plan.network, plan.path, (), plan.dtype)
    report, schedules = compare_strategies(unsliced, prof, devices)
    dp = report["predicted"]["strategies"]["dp"]
    base = report["predicted"]["strategies"]["slice_only"]
    return DistributedCost(
        profile=prof.name, devices=devices, predicted_seconds=dp["seconds"],
        flops_executed=dp["flops_executed"], peak_bytes_per_device=dp["peak_bytes_per_device"],
        slices=dp["n_slices"], group_size=dp["group_size"],
        redistributions=dp["n_redistributions"], slice_only_seconds=base["seconds"],
        E_P=dp["E_P"], R_P=dp["R_P"])


def plan_cost(plan: Plan, profile=None, devices: int | None = None,
              costs: LocalCosts | None = None) -> ContractionCost:
    """The cost of running ``plan`` (see the module docstring); nothing is contracted.

    Parameters
    ----------
    plan : Plan
        The plan to price.
    profile : str or HardwareProfile, optional
        A hardware profile (a name, a ``.toml`` path or a profile): also price the
        plan's dp schedule on ``devices`` devices of it.
    devices : int, optional
        Devices of ``profile`` (a power of two it holds; default: one node of the
        profile).
    costs : LocalCosts, optional
        The local executor's prices (default: this process's).

    Returns
    -------
    ContractionCost
        Counts and predicted times; ``distributed`` is set where ``profile`` is given.

    Raises
    ------
    ProfileError
        An unknown profile, or a device count it does not hold.
    """
    itemsize = 16 if plan.dtype == "complex128" else 8
    dist = None
    if profile is not None:
        from ..hardware.profiles import load_profile

        prof = load_profile(profile) if isinstance(profile, str) else profile
        dist = distributed_cost(plan, prof, devices or prof.devices_per_node)
    return ContractionCost(
        flops=float(plan.stats.flops),
        largest_intermediate_bytes=int(plan.stats.max_intermediate) * itemsize,
        peak_bytes=int(plan.stats.peak_bytes),
        slices=max(1, int(plan.stats.n_slices)),
        steps=int(plan.stats.n_steps),
        predicted_seconds=predicted_local_seconds(plan, costs),
        distributed=dist,
        compiled_steps=(sum(1 for s in plan.steps if getattr(s, "loop", False))
                        if plan.stats.flops >= cost_constants.COMPILE_MIN_FLOPS else 0),
    )


__all__ = ["ContractionCost", "DistributedCost", "distributed_cost", "plan_cost",
           "predicted_local_seconds", "seconds_text", "step_seconds"]
