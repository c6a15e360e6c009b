"""Replay a distributed schedule on shapes alone and check it can run as written.

:func:`replay` walks every step of a :class:`~.schedule.Schedule` against its
:class:`~qsimdist.planner.plan.Plan` without touching data and checks:

* the schedule runs the plan's own slicing, one record per step, and every
  index of the network is accounted for (stored on a leaf, summed on load,
  sliced, or produced and reduced by the steps);
* every bit tuple has ``q`` bits, names modes of the tensor it splits and
  takes a prefix of each mode's digits; operands enter each step with the
  bits the previous steps left them, moved only by the recorded collectives;
  compute and output bits follow from them (sharded compute never reduces a
  distributed mode unless the output is all-reduced);
* local shapes and the local GEMM view are what the bits imply;
* the bytes each collective sends, receives and buffers are what its bits
  imply (recomputed with the cost model);
* the bytes live on each device at every step — live tensors, gathered
  copies, send and receive buffers, kernel workspace — equal the recorded
  ones and stay within the profile's usable memory.

The planner's tests and the MPI executor both call it, and every plan file with
a schedule goes through it when read (:func:`read_schedule`, the reader
:mod:`qsimdist.planner` registers for :meth:`Plan.from_dict
<qsimdist.planner.plan.Plan.from_dict>`). Any violation raises
:class:`~qsimdist.errors.PlanFormatError` with one line naming the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import PlanFormatError
from ...hardware import HardwareProfile
from ..lifetime import gemm_step
from .bits import (
    Bits,
    is_prefix_set,
    leading_bits,
    local_elements,
    local_shape,
    local_sizes,
    position_preserving,
)
from .cost import CostModel
from .schedule import Schedule, action_of

if TYPE_CHECKING:  # for annotations only: this package imports the plan module, not back
    from ..plan import Plan


def _bytes_profile() -> HardwareProfile:
    from ...hardware import load_profile

    return load_profile("local-cpu")


def _profile_of(sched: Schedule, given: HardwareProfile | None, fail) -> HardwareProfile | None:
    """The profile a schedule was made for: the one given, else its embedded fields (a
    custom ``.toml`` needs no file), else the bundled profile of its stored name."""
    from ...errors import QsimdistError
    from ...hardware import load_profile
    from ...hardware.profiles import from_mapping

    if given is not None:
        return given
    if sched.profile_spec is not None:
        try:
            prof = from_mapping(dict(sched.profile_spec), "profile_spec")
        except QsimdistError as exc:
            fail(f"bad profile_spec ({exc})")
        if prof.name != sched.profile:
            fail(f"profile_spec names {prof.name!r} but the schedule's profile is "
                 f"{sched.profile!r}")
        return prof
    try:
        return load_profile(sched.profile)
    except QsimdistError:  # an older file from a custom profile: its rates cannot be checked
        return None


def _check_totals(plan: Plan, sched: Schedule, sent: list[int], fail) -> None:
    """The schedule's predicted totals follow from its records, slicing, kept outputs
    (checked by :func:`replay` before) and device count."""
    from .reuse import predicted_totals

    pred = sched.predicted
    want = predicted_totals(plan, sched, sent)
    for name in ("compute_seconds", "comm_seconds", "pack_seconds"):
        want.pop(name)
    for name, value in want.items():
        have = getattr(pred, name)
        if not math.isclose(have, value, rel_tol=1e-9, abs_tol=1e-300):
            fail(f"predicted {name} is {have!r}; the records, {sched.n_slices} slices and "
                 f"{sched.devices} devices give {value!r}")


@dataclass(frozen=True)
class Replay:
    """What a replay measured (on shapes): per-step live bytes and bytes moved, per device."""

    live_bytes: tuple[int, ...]
    peak_bytes: int
    sent_bytes: tuple[int, ...]  # per step, every collective of the step
    recv_bytes: tuple[int, ...]
    total_sent: int  # per slice
    total_recv: int


def replay(plan: Plan, sched: Schedule, profile: HardwareProfile | None = None,
           source: str = "schedule") -> Replay:
    """Check ``sched`` against ``plan`` step by step (see the module docstring)."""

    def fail(msg: str) -> None:
        raise PlanFormatError(f"{source}: {msg}")

    net = plan.network
    size = net.size_dict
    if tuple(plan.sliced) != tuple(sched.sliced):
        fail(f"the schedule slices {sorted(sched.sliced)} but the plan slices "
             f"{sorted(plan.sliced)}")
    if sched.n_slices != plan.stats.n_slices:
        fail(f"n_slices {sched.n_slices} does not match the plan's {plan.stats.n_slices}")
    if sched.dtype != plan.dtype:
        fail(f"dtype {sched.dtype} does not match the plan's {plan.dtype}")
    if len(sched.steps) != len(plan.steps):
        fail(f"{len(sched.steps)} step records for {len(plan.steps)} steps")
    profile = _profile_of(sched, profile, fail)
    if profile is not None and profile.usable_memory != sched.usable_memory:
        fail(f"usable memory {sched.usable_memory} is not profile {profile.name!r}'s "
             f"{profile.usable_memory}")
    if profile is not None and sched.devices > (profile.max_devices() or sched.devices):
        fail(f"{sched.devices} devices, more than profile {profile.name!r} has "
             f"({profile.max_devices()})")
    accounted = {i for m in plan.leaf_modes for i in m} | {i for m in plan.leaf_sum for i in m}
    accounted |= set(plan.sliced)
    missing = set(size) - accounted
    if missing:
        fail(f"indices {sorted(missing)[:5]} are on no leaf, summed nowhere and not sliced")
    d, q = sched.group_size, sched.q
    mem = sched.usable_memory
    # bytes and message counts do not depend on the profile's rates: without the schedule's
    # own profile they are still recomputed (with the bundled local-cpu one)
    model = CostModel(profile if profile is not None else _bytes_profile(), plan.dtype)
    isz = 16 if plan.dtype == "complex128" else 8
    modes = dict(enumerate(plan.leaf_modes))
    for s in plan.steps:
        modes[s.out] = s.out_modes

    def nbytes(node: int, bits: Bits) -> int:
        return local_elements(modes[node], size, bits) * isz

    def check_bits(bits: Bits, node: int, j: int, what: str) -> None:
        if bits and (len(bits) != q or not is_prefix_set(bits, size)
                     or any(m not in modes[node] for m, _ in bits)):
            fail(f"step {j}: {what} bits {[list(b) for b in bits]} are not {q} prefix bits of "
                 "the tensor's modes")

    stored: dict[int, Bits] = {}
    live = sum(nbytes(k, ()) for k in range(net.num_tensors))
    lives, sent_l, recv_l = [], [], []
    for j, (s, r) in enumerate(zip(plan.steps, sched.steps)):
        if r.index != j:
            fail(f"step record {j} has index {r.index}")
        node = {"lhs": s.lhs, "rhs": s.rhs, "out": s.out}
        held = {"lhs": stored.get(s.lhs, ()), "rhs": stored.get(s.rhs, ())}
        red = set(s.lhs_modes) & set(s.rhs_modes) - set(s.out_modes)
        extra = sent = recv = 0
        for c in r.pre:
            if c.operand not in ("lhs", "rhs") or c.kind not in ("alltoall", "allgather"):
                fail(f"step {j}: a {c.kind} on {c.operand} cannot come before the step")
            if tuple(c.from_bits) != held[c.operand]:
                fail(f"step {j}: {c.kind} of {c.operand} starts from bits "
                     f"{[list(b) for b in c.from_bits]} but the tensor holds "
                     f"{[list(b) for b in held[c.operand]]}")
            n = node[c.operand]
            check_bits(c.to_bits, n, j, c.kind)
            if c.kind == "alltoall" and not position_preserving(c.from_bits, c.to_bits):
                fail(f"step {j}: all-to-all moves shared bits to other positions (uneven move)")
            if not c.from_bits or (c.kind == "allgather") != (not c.to_bits):
                fail(f"step {j}: {c.kind} from {list(c.from_bits)} to {list(c.to_bits)} is not "
                     "a valid move")
            mv = (model.redistribute(modes[n], size, c.from_bits, c.to_bits, d)
                  if c.kind == "alltoall" else model.allgather(modes[n], size, c.from_bits, d))
            buf = mv.send_bytes + mv.recv_bytes + nbytes(n, c.to_bits) \
                if c.kind == "alltoall" else 2 * nbytes(n, ())
            if (mv.send_bytes, mv.recv_bytes, buf) != (c.send_bytes, c.recv_bytes,
                                                       c.buffer_bytes):
                fail(f"step {j}: {c.kind} of {c.operand} moves {c.send_bytes}/{c.recv_bytes} "
                     f"bytes with a {c.buffer_bytes}-byte buffer; its bits imply "
                     f"{mv.send_bytes}/{mv.recv_bytes} and {buf}")
            if mv.messages != c.messages:
                fail(f"step {j}: {c.kind} of {c.operand} records {c.messages} messages; its "
                     f"bits imply {mv.messages}")
            extra += c.buffer_bytes
            sent += c.send_bytes
            recv += c.recv_bytes
            held[c.operand] = tuple(c.to_bits)
        if (held["lhs"], held["rhs"]) != (tuple(r.lhs_bits), tuple(r.rhs_bits)):
            fail(f"step {j}: operand bits after the collectives do not match the record")
        split = held["lhs"] or held["rhs"]
        if held["lhs"] and held["rhs"] and held["lhs"] != held["rhs"]:
            fail(f"step {j}: both operands are sharded, by different bits")
        if split:
            if tuple(r.compute_bits) != split:
                fail(f"step {j}: compute bits differ from the operands' bits")
        elif r.compute_bits:
            start = leading_bits(s.out_modes, size, q)
            if tuple(r.compute_bits) != start:
                fail(f"step {j}: a step on replicated operands may only shard its output by "
                     "the output's leading bits")
        cb = tuple(r.compute_bits)
        partial = any(m in red for m, _ in cb)
        post = r.post
        if post is None:
            if partial:
                fail(f"step {j}: sharded compute reduces a distributed mode but nothing sums "
                     "the partial results")
            if tuple(r.out_bits) != cb:
                fail(f"step {j}: output bits differ from the compute bits with no collective")
        else:
            if post.operand != "out" or post.kind not in ("allreduce", "allgather") or not cb \
                    or r.out_bits or (post.kind == "allgather" and partial):
                fail(f"step {j}: a {post.kind} of the output is not valid here")
            mv = (model.allreduce(nbytes(s.out, ()), d) if post.kind == "allreduce"
                  else model.allgather(modes[s.out], size, cb, d))
            whole = nbytes(s.out, ()) * (2 if post.kind == "allgather" else 1)
            if (mv.send_bytes, mv.recv_bytes, whole, mv.messages) != (
                    post.send_bytes, post.recv_bytes, post.buffer_bytes, post.messages):
                fail(f"step {j}: {post.kind} of the output moves the wrong number of bytes "
                     "or messages")
            extra += post.buffer_bytes
            sent += post.send_bytes
            recv += post.recv_bytes
        if (tuple(r.lhs_shape), tuple(r.rhs_shape), tuple(r.out_shape)) != (
                local_shape(s.lhs_modes, size, r.lhs_bits),
                local_shape(s.rhs_modes, size, r.rhs_bits),
                local_shape(s.out_modes, size, r.out_bits)):
            fail(f"step {j}: local shapes do not follow from the bits")
        g = gemm_step(s.lhs, s.rhs, s.out, s.lhs_modes, s.rhs_modes, s.out_modes,
                      local_sizes(size, cb), isz)
        if (g.x_view, g.y_view, g.out_view) != (r.view.x_view, r.view.y_view, r.view.out_view) \
                or r.view.workspace_bytes != g.transposed_bytes + g.expanded_bytes:
            fail(f"step {j}: the local GEMM view does not follow from the compute bits")
        flops = s.flops / (d if cb else 1)
        if not math.isclose(r.flops_per_device, flops, rel_tol=1e-12):
            fail(f"step {j}: records {r.flops_per_device:.6g} FLOPs per device; the step's "
                 f"{s.flops:.6g} over {d if cb else 1} devices is {flops:.6g}")
        for c in r.collectives:
            if not (math.isfinite(c.predicted_link_seconds) and c.predicted_link_seconds >= 0
                    and math.isfinite(c.predicted_pack_seconds) and c.predicted_pack_seconds >= 0):
                fail(f"step {j}: a {c.kind}'s predicted seconds must be finite and >= 0")
        if not (math.isfinite(r.predicted_compute_seconds) and r.predicted_compute_seconds >= 0):
            fail(f"step {j}: predicted compute seconds must be finite and >= 0")
        expect = action_of((c.kind for c in r.pre), r.post is not None, cb,
                           bool(held["lhs"] or held["rhs"]))
        if r.action != expect:
            fail(f"step {j}: action {r.action.value!r} should be {expect.value!r}")
        work = r.view.workspace_bytes
        for side in ("lhs", "rhs"):
            if not held[side] and cb and any(m in modes[node[side]] for m, _ in cb):
                work += nbytes(node[side], cb)
        step_live = live + extra + work + nbytes(s.out, cb)
        if step_live != r.live_bytes:
            fail(f"step {j}: records {r.live_bytes} live bytes per device; replay counts "
                 f"{step_live}")
        if step_live > mem:
            fail(f"step {j}: needs {step_live} bytes per device, over the {mem} usable")
        lives.append(step_live)
        sent_l.append(sent)
        recv_l.append(recv)
        live += nbytes(s.out, tuple(r.out_bits)) - nbytes(s.lhs, stored.get(s.lhs, ())) \
            - nbytes(s.rhs, stored.get(s.rhs, ()))
        stored[s.out] = tuple(r.out_bits)
    if plan.steps and stored.get(plan.steps[-1].out):
        fail("the result ends sharded; the last step must leave it whole on every device")
    first = sum(nbytes(k, ()) for k in range(net.num_tensors))
    peak = max(lives + [first])
    if peak > mem:
        fail(f"the leaves alone need {first} bytes per device, over the {mem} usable")
    if sched.kept:  # kept outputs stay resident beside every step
        from ..reuse import check_kept
        from .reuse import kept_bytes

        why = check_kept(plan, sched.kept)
        if why is not None:
            fail(why)
        peak += kept_bytes(plan, sched)
        if peak > mem:
            fail(f"with its kept outputs the schedule needs {peak} bytes per device, over "
                 f"the {mem} usable")
    if peak != sched.predicted.peak_bytes_per_device:
        fail(f"reports a peak of {sched.predicted.peak_bytes_per_device} bytes per device; "
             f"replay counts {peak}")
    if not math.isfinite(sched.predicted.seconds) or sched.predicted.seconds < 0:
        fail("predicted seconds must be finite and non-negative")
    _check_totals(plan, sched, sent_l, fail)
    return Replay(tuple(lives), peak, tuple(sent_l), tuple(recv_l), sum(sent_l), sum(recv_l))


def read_schedule(plan: Plan, data: object, source: str) -> Schedule:
    """A plan file's ``distribution`` field as the schedule of ``plan``, replayed.

    Refused with one :class:`~qsimdist.errors.PlanFormatError` line unless the
    field is a valid schedule (:meth:`Schedule.from_dict`) that :func:`replay`
    finds runnable on ``plan`` as written. ``source`` names the file in messages.
    """
    where = f"{source}: distribution"
    sched = Schedule.from_dict(data, where)
    replay(plan, sched, source=where)
    return sched
