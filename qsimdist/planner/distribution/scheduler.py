"""Schedule one slice of a plan on a group of ``d`` devices, then the whole plan on ``P``.

For one sliced plan, group size ``d = 2^q`` and threshold ``big_bytes``:

* Steps whose output exceeds ``big_bytes`` are candidates for sharding. A
  *chain* (a sharded running tensor absorbing replicated operands into big
  outputs) is solved by the chain DP (:mod:`.chain`): keep the bits while
  none is reduced, redistribute (all-to-all) where it pays or is forced.
* Every other step picks, among all valid combinations of operand moves
  (keep, all-gather, all-to-all onto the other operand's bits or onto its own
  leading surviving bits), the predicted-fastest one whose own footprint
  fits: sharded x replicated with a small output computes sharded and
  all-reduces (or all-gathers) the small output; sharded x sharded aligns
  one side's bits to the other's; a gather happens only where it is the
  cheapest option that fits.
* :func:`materialise` turns the decisions into :class:`~.schedule.StepRecord`
  data with local shapes, local GEMM views, collective sizes and per-device
  live bytes (live tensors, gathered copies, send and receive buffers,
  kernel workspace); a schedule whose peak exceeds usable memory is never
  returned.

:func:`schedule` sweeps group sizes, slicings and ``big_bytes`` (the
fraction of device memory above which a tensor is a sharding candidate) and
keeps the fastest prediction that fits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import PlanError
from ...hardware import HardwareProfile, costs
from ..lifetime import gemm_step
from ..plan import Plan, build_plan
from ..slicing import slice_from
from .bits import (
    Bits,
    aligned,
    leading_bits,
    local_elements,
    local_shape,
    local_sizes,
    position_preserving,
)
from .chain import ChainStep, solve_chain
from .cost import NO_MOVE, CostModel, Move
from .reuse import with_reuse
from .schedule import Collective, LocalView, Prediction, Schedule, StepRecord, action_of

#: fractions of usable device memory tried as the sharding threshold
BIG_FRACTIONS = (0.25, 0.05, 0.01, 0.001, 0.0)


@dataclass
class Decision:
    """What one step does, before sizes are attached."""

    pre: list[tuple[str, str, Bits, Bits]] = field(default_factory=list)  # kind, operand, from, to
    lhs_bits: Bits = ()
    rhs_bits: Bits = ()
    compute_bits: Bits = ()
    out_bits: Bits = ()
    post: str | None = None  # None | allreduce | allgather


class SliceScheduler:
    """Decisions for one slice of ``plan`` on ``d`` devices (see the module docstring)."""

    def __init__(self, plan: Plan, d: int, model: CostModel, big_bytes: float,
                 elective: bool, view_cache: dict | None = None) -> None:
        self.plan, self.d, self.model = plan, d, model
        self.q = d.bit_length() - 1
        self.size = plan.network.size_dict
        self.isz = model.itemsize
        self.big_bytes = big_bytes
        self.elective = elective
        self.mem = model.profile.usable_memory
        n = plan.network.num_tensors
        self.modes = dict(enumerate(plan.leaf_modes))
        for s in plan.steps:
            self.modes[s.out] = s.out_modes
        self.elems = {k: math.prod(self.size[i] for i in m) for k, m in self.modes.items()}
        self.consumer = {}
        self.producer = {}
        for j, s in enumerate(plan.steps):
            self.consumer[s.lhs] = j
            self.consumer[s.rhs] = j
            self.producer[s.out] = j
        self.n_leaves = n
        self.root = plan.steps[-1].out if plan.steps else 0
        self.views = view_cache if view_cache is not None else {}
        self.refused: list[str] = []

    # ------------------------------------------------------------ helpers
    def big(self, node: int) -> bool:
        """A sharding candidate. The root never is: every rank returns the whole result."""
        return self.d > 1 and node != self.root and self.elems[node] * self.isz > self.big_bytes

    def reduced(self, j: int) -> frozenset[str]:
        s = self.plan.steps[j]
        out = set(s.out_modes)
        return frozenset(i for i in s.lhs_modes if i in set(s.rhs_modes) and i not in out)

    def nbytes(self, node: int, bits: Bits) -> int:
        return local_elements(self.modes[node], self.size, bits) * self.isz

    def compute_seconds(self, j: int, split: bool) -> float:
        s = self.plan.steps[j]
        d = self.d if split else 1
        return self.model.step_seconds(s.flops / d, s.bytes / d)

    def move(self, kind: str, node: int, old: Bits, new: Bits) -> Move:
        if kind == "alltoall":
            return self.model.redistribute(self.modes[node], self.size, old, new, self.d)
        if kind == "allgather":
            return self.model.allgather(self.modes[node], self.size, old, self.d)
        if kind == "allreduce":
            return self.model.allreduce(self.elems[node] * self.isz, self.d)
        return NO_MOVE

    # -------------------------------------------------------------- chains
    def replicated(self, node: int, j: int, bits: dict[int, Bits]) -> bool:
        """Whether ``node`` is certainly replicated when the chain starting at step ``j`` meets it.

        Leaves are; outputs that are not big are (only big outputs are ever
        sharded); outputs of steps before ``j`` are known.
        """
        if node < self.n_leaves or not self.big(node):
            return True
        return self.producer[node] < j and not bits.get(node)

    def chain_from(self, j: int, running: int, bits: dict[int, Bits]) -> list[ChainStep]:
        out, node, k = [], running, j
        while True:
            st = self.plan.steps[k]
            other = st.rhs if st.lhs == node else st.lhs
            if not self.big(st.out) or not self.replicated(other, j, bits):
                break
            red = self.reduced(k)
            out.append(ChainStep(k, self.compute_seconds(k, True), self.modes[node], red,
                                 leading_bits(self.modes[node], self.size, self.q, exclude=red)))
            node = st.out
            if node not in self.consumer:
                break
            k = self.consumer[node]
        return out

    def solve(self, start: Bits, chain: list[ChainStep]):
        sol = solve_chain(start, chain, self.d, self.model, self.size, self.elective)
        if math.isfinite(sol.seconds):
            return chain, sol
        # only a step that can neither keep nor redistribute fails: stop before the first one
        cut = next(k for k, c in enumerate(chain) if c.target is None)
        chain = chain[:cut]
        if not chain:
            return [], None
        return chain, solve_chain(start, chain, self.d, self.model, self.size, self.elective)

    # ------------------------------------------------------------- general
    def options(self, j: int, bits: dict[int, Bits]) -> list[tuple[float, Decision]]:
        """Every valid way to run step ``j``, with its predicted seconds and a fit check."""
        s = self.plan.steps[j]
        red = self.reduced(j)
        big_c = self.big(s.out)
        cur = {"lhs": bits.get(s.lhs, ()), "rhs": bits.get(s.rhs, ())}
        node = {"lhs": s.lhs, "rhs": s.rhs}

        def transforms(side: str, other: str) -> list[tuple[Bits, tuple | None]]:
            b = cur[side]
            if not b:
                return [((), None)]
            out: list[tuple[Bits, tuple | None]] = [(b, None), ((), ("allgather", side, b, ()))]
            modes = set(self.modes[node[side]])
            targets = [cur[other], leading_bits(self.modes[node[side]], self.size, self.q,
                                                exclude=red)]
            for k, t in enumerate(targets):
                if not t or set(t) == set(b) or any(m not in modes for m, _ in t):
                    continue
                if k == 0 and not position_preserving(b, t):
                    continue  # matching the other operand's order would make the move uneven
                t = t if k == 0 else aligned(b, t)
                if (t, ("alltoall", side, b, t)) not in out:
                    out.append((t, ("alltoall", side, b, t)))
            return out

        found = []
        for ta, pa in transforms("lhs", "rhs"):
            for tb, pb in transforms("rhs", "lhs"):
                if ta and tb and ta != tb:
                    continue
                dec = Decision(pre=[p for p in (pa, pb) if p is not None], lhs_bits=ta,
                               rhs_bits=tb)
                split = ta or tb
                if split:
                    dec.compute_bits = split
                    if any(m in red for m, _ in split):
                        dec.post = "allreduce"  # partial sums: the whole output on every device
                    elif big_c:
                        dec.out_bits = split
                    else:
                        dec.post = "allgather"
                elif big_c:
                    start = leading_bits(s.out_modes, self.size, self.q)
                    if start is not None:
                        dec.compute_bits = dec.out_bits = start
                secs = self.compute_seconds(j, bool(dec.compute_bits))
                foot = 0
                for kind, side, old, new in dec.pre:
                    mv = self.move(kind, node[side], old, new)
                    secs += mv.seconds
                    foot += self.nbytes(node[side], old) + _buffer(self, kind, node[side], new, mv)
                for side, b in (("lhs", ta), ("rhs", tb)):
                    foot += self.nbytes(node[side], b)
                foot += self.nbytes(s.out, dec.compute_bits)
                if dec.post:
                    post_old = dec.compute_bits if dec.post == "allgather" else ()
                    secs += self.move(dec.post, s.out, post_old, ()).seconds
                    foot += self.elems[s.out] * self.isz * (2 if dec.post == "allgather" else 1)
                if foot <= self.mem:
                    found.append((secs, dec))
        return found

    # --------------------------------------------------------------- run
    def decide(self) -> list[Decision] | None:
        steps = self.plan.steps
        bits: dict[int, Bits] = {}
        decisions: list[Decision | None] = [None] * len(steps)
        for j, s in enumerate(steps):
            if decisions[j] is not None:
                continue
            da, db = bits.get(s.lhs, ()), bits.get(s.rhs, ())
            if self.big(s.out) and bool(da) != bool(db):
                running = s.lhs if da else s.rhs
                chain, sol = self.solve(da or db, self.chain_from(j, running, bits))
                if chain:
                    prev, node = da or db, running
                    for pos, (c, b) in enumerate(zip(chain, sol.bits_per_step)):
                        st = steps[c.index]
                        side = "lhs" if st.lhs == node else "rhs"
                        dec = Decision(compute_bits=b, out_bits=b)
                        if pos in sol.redistribute_at:
                            dec.pre.append(("alltoall", side, prev, b))
                        setattr(dec, f"{side}_bits", b)
                        decisions[c.index] = dec
                        bits[st.out] = b
                        prev, node = b, st.out
                    continue
            found = self.options(j, bits)
            if not found:
                return None
            decisions[j] = min(found, key=lambda t: t[0])[1]
            if decisions[j].out_bits:
                bits[s.out] = decisions[j].out_bits
        return decisions  # type: ignore[return-value]

    # ------------------------------------------------------- materialise
    def local_view(self, j: int, split: Bits) -> LocalView:
        key = (j, split)
        if key not in self.views:
            s = self.plan.steps[j]
            st = gemm_step(s.lhs, s.rhs, s.out, s.lhs_modes, s.rhs_modes, s.out_modes,
                           local_sizes(self.size, split), self.isz)
            self.views[key] = LocalView(st.kernel, st.x, st.x_view, st.y_view, st.out_view,
                                        st.transposed_bytes + st.expanded_bytes)
        return self.views[key]

    def materialise(self, decisions: list[Decision]) -> list[StepRecord]:
        records = []
        stored: dict[int, Bits] = {}
        live = sum(self.elems[k] * self.isz for k in range(self.n_leaves))
        for j, (s, dec) in enumerate(zip(self.plan.steps, decisions)):
            node = {"lhs": s.lhs, "rhs": s.rhs, "out": s.out}
            pre, extra = [], 0
            for kind, side, old, new in dec.pre:
                mv = self.move(kind, node[side], old, new)
                buf = _buffer(self, kind, node[side], new, mv)
                pre.append(_collective(kind, side, old, new, mv, buf))
                extra += buf
            view = self.local_view(j, dec.compute_bits)
            work = view.workspace_bytes
            for side, b in (("lhs", dec.lhs_bits), ("rhs", dec.rhs_bits)):
                if not b and dec.compute_bits and \
                        any(m in self.modes[node[side]] for m, _ in dec.compute_bits):
                    work += self.nbytes(node[side], dec.compute_bits)  # the rank's index range
            out_local = self.nbytes(s.out, dec.compute_bits)
            post = None
            if dec.post:
                old = dec.compute_bits if dec.post == "allgather" else ()
                mv = self.move(dec.post, s.out, old, ())
                whole = self.elems[s.out] * self.isz
                post = _collective(dec.post, "out", dec.compute_bits, (), mv,
                                   whole * (2 if dec.post == "allgather" else 1))
                extra += post.buffer_bytes
            step_live = live + extra + work + out_local
            stored_out = self.nbytes(s.out, dec.out_bits)
            records.append(StepRecord(
                index=j,
                action=action_of((k for k, *_ in dec.pre), dec.post is not None,
                                 dec.compute_bits, bool(dec.lhs_bits or dec.rhs_bits)),
                pre=tuple(pre), lhs_bits=dec.lhs_bits,
                rhs_bits=dec.rhs_bits, compute_bits=dec.compute_bits, out_bits=dec.out_bits,
                post=post,
                lhs_shape=local_shape(s.lhs_modes, self.size, dec.lhs_bits),
                rhs_shape=local_shape(s.rhs_modes, self.size, dec.rhs_bits),
                out_shape=local_shape(s.out_modes, self.size, dec.out_bits), view=view,
                predicted_compute_seconds=self.compute_seconds(j, bool(dec.compute_bits)),
                flops_per_device=s.flops / (self.d if dec.compute_bits else 1),
                live_bytes=int(step_live),
            ))
            live += stored_out - self.nbytes(s.lhs, stored.get(s.lhs, ())) \
                - self.nbytes(s.rhs, stored.get(s.rhs, ()))
            stored[s.out] = dec.out_bits
        return records


def _buffer(sch: SliceScheduler, kind: str, node: int, new: Bits, mv: Move) -> int:
    """Extra bytes a collective keeps live on each device (besides the operand it reads)."""
    if kind == "alltoall":  # packed send and receive buffers, and the new shard
        return mv.send_bytes + mv.recv_bytes + sch.nbytes(node, new)
    if kind == "allgather":  # the received shards, and the whole tensor they are placed in
        return 2 * sch.nbytes(node, ())
    return 0


def _collective(kind: str, operand: str, old: Bits, new: Bits, mv: Move, buf: int) -> Collective:
    return Collective(kind, operand, tuple(old), tuple(new), int(mv.send_bytes),
                      int(mv.recv_bytes), int(buf), int(mv.messages), mv.link_seconds,
                      mv.pack_seconds)


# ------------------------------------------------------------------ whole plan


def schedule_slice(plan: Plan, profile: HardwareProfile, d: int, *, strategy: str = "dp",
                   big_bytes: float = 0.0, devices: int | None = None,
                   view_cache: dict | None = None) -> Schedule | None:
    """The schedule of ``plan`` (its own slicing) on groups of ``d``; ``None`` if it cannot fit."""
    model = CostModel(profile, plan.dtype)
    devices = devices or d
    elective_options = (True, False) if strategy == "dp" else (False,)
    best = None
    for elective in elective_options:
        sch = SliceScheduler(plan, d, model, big_bytes, elective, view_cache)
        decisions = sch.decide()
        if decisions is None:
            continue
        records = sch.materialise(decisions)
        peak = max([r.live_bytes for r in records] +
                   [sum(sch.elems[k] * sch.isz for k in range(sch.n_leaves))])
        if peak > profile.usable_memory:
            continue
        cand = _assemble(plan, profile, strategy, devices, d, big_bytes, records, peak,
                         tuple(sch.refused))
        if best is None or cand.predicted.seconds < best.predicted.seconds:
            best = cand
    return best


def _assemble(plan: Plan, profile: HardwareProfile, strategy: str, devices: int, d: int,
              big_bytes: float, records: list[StepRecord], peak: int,
              refused: tuple[str, ...]) -> Schedule:
    n_slices = plan.stats.n_slices
    groups = devices // d
    rounds = math.ceil(n_slices / groups)
    compute = sum(r.predicted_compute_seconds for r in records)
    comm = sum(r.predicted_comm_seconds for r in records)
    pack = sum(r.predicted_pack_seconds for r in records)
    per_slice = compute + comm + pack
    flops_dev = sum(r.flops_per_device for r in records)
    sent = sum(c.send_bytes for r in records for c in r.collectives)
    pred = Prediction(
        seconds=per_slice * rounds, seconds_per_slice=per_slice,
        compute_seconds=compute * rounds, comm_seconds=comm * rounds,
        pack_seconds=pack * rounds, flops_counted=plan.stats.flops,
        flops_executed=flops_dev * d * n_slices, flops_per_device=flops_dev * rounds,
        comm_bytes_per_device=float(sent * rounds), peak_bytes_per_device=int(peak),
        n_redistributions=sum(1 for r in records for c in r.pre if c.kind == "alltoall"),
        rounds=rounds,
    )
    return Schedule(strategy, profile.name, devices, d, plan.dtype, tuple(plan.sliced), n_slices,
                    profile.usable_memory, float(big_bytes), tuple(records), pred, refused,
                    profile_spec=dataclasses.asdict(profile))


def search_slicing(plan: Plan) -> list[str]:
    """The slicing a plan's path was found with: restored or extended for every target."""
    prefer = plan.meta.get("search_sliced") if isinstance(plan.meta, dict) else None
    if isinstance(prefer, list) and all(isinstance(i, str) for i in prefer):
        return prefer
    return list(plan.sliced)


def sliced_plan(base: Plan, target: int) -> Plan:
    """``base``'s path sliced so no intermediate exceeds ``target`` elements."""
    prefer = search_slicing(base)
    sliced = slice_from(base.network, base.path, target, prefer=prefer, max_repeats=2)
    meta = dict(base.meta)
    meta["search_sliced"] = prefer
    return build_plan(base.network, base.path, sliced, base.dtype, meta=meta)


def scheduled_plan(base: Plan, sched: Schedule) -> Plan:
    """``base``'s path with the schedule's own slicing and the schedule attached.

    The plan's ``meta["search_sliced"]`` keeps the slicing the path was found
    with, so planning again from the saved plan starts from the same place
    and reproduces the same schedule.
    """
    meta = dict(base.meta)
    meta["search_sliced"] = search_slicing(base)
    meta.pop("distribution", None)
    plan = build_plan(base.network, base.path, list(sched.sliced), base.dtype, meta=meta)
    plan.stats.path_from_cache = base.stats.path_from_cache
    plan.schedule = sched
    return plan


Strategy = Callable[..., Schedule]
_STRATEGIES: dict[str, dict] = {}


def register_strategy(name: str, *, group_sizes: str, elective: bool) -> None:
    """Register a distribution strategy (refuses duplicates)."""
    if name in _STRATEGIES:
        raise ValueError(f"strategy {name!r} is already registered")
    _STRATEGIES[name] = {"group_sizes": group_sizes, "elective": elective}


def strategies() -> tuple[str, ...]:
    return tuple(_STRATEGIES)


def check_strategy(name: str) -> dict:
    if name not in _STRATEGIES:
        raise PlanError(f"unknown strategy {name!r}; valid: {', '.join(_STRATEGIES)}")
    return _STRATEGIES[name]


register_strategy("slice_only", group_sizes="one", elective=False)
register_strategy("forced_only", group_sizes="all", elective=False)
register_strategy("dp", group_sizes="all", elective=True)


def schedule(plan: Plan, profile: HardwareProfile, devices: int, strategy: str = "dp",
             big_fractions=BIG_FRACTIONS, sliced_cache: dict | None = None,
             view_caches: dict | None = None, budgeted: bool = False,
             reuse: bool = False) -> Schedule:
    """The predicted-fastest schedule of ``strategy`` on ``devices`` devices that fits memory.

    For every group size ``d`` (powers of two up to ``devices``; only 1 for
    slice-only) the path is sliced until a slice fits each device, and
    further while there are fewer slices than groups; every sharding
    threshold in ``big_fractions`` is tried. ``devices / d`` groups share
    the slices in rounds. Raises :class:`PlanError` when nothing fits.

    ``budgeted``: stop searching once the effort spent (counted in plan steps
    examined, :data:`~qsimdist.hardware.costs.PLANNING_SECONDS_PER_STEP` each, so the
    same plan always gets the same schedule) exceeds both
    :data:`~qsimdist.hardware.costs.MIN_PLANNING_SECONDS` and the best schedule's
    predicted run: a contraction of microseconds is not worth
    seconds of search (tfim_hex_4x4_t3 on 4 ranks: 1.6 s of planning, 10 us
    predicted).

    ``reuse``: each group keeps the step outputs worth keeping from one slice
    to the next in the memory a schedule leaves free (:mod:`.reuse`), and the
    schedules are compared with it.
    """
    profile.check_devices(devices)
    spec = check_strategy(strategy)
    model = CostModel(profile, plan.dtype)
    mem, isz = profile.usable_memory, model.itemsize
    sizes = [1] if spec["group_sizes"] == "one" else [
        2**k for k in range(devices.bit_length()) if 2**k <= devices]
    cache = sliced_cache if sliced_cache is not None else {}
    views = view_caches if view_caches is not None else {}
    best: Schedule | None = None
    call_seconds = costs.PLANNING_SECONDS_PER_STEP * len(plan.steps)
    spent = 0.0

    def enough() -> bool:
        return (budgeted and best is not None and spent > costs.MIN_PLANNING_SECONDS
                and spent > best.predicted.seconds)

    for d in sizes:
        groups = devices // d
        # from the group's whole memory, in elements, halved until a slice's schedule fits:
        # the predicted peak decides, and a third (the local planner's first guess) cost
        # n60m24 2.3x the FLOPs at P = 1 and 2x at P = 8 on dgx-h100
        target = max(1, (mem * d) // isz)
        fractions = (1.0,) if d == 1 else tuple(big_fractions)
        while target >= 1 and not enough():
            if target not in cache:
                try:
                    cache[target] = sliced_plan(plan, target)
                except PlanError:
                    cache[target] = None
                spent += call_seconds
            sp = cache[target]
            if sp is None:
                break
            fit = None
            for frac in fractions:
                if enough():
                    break
                spent += call_seconds
                sch = schedule_slice(sp, profile, d, strategy=strategy, big_bytes=frac * mem,
                                     devices=devices, view_cache=views.setdefault((target, d), {}))
                if sch is not None and (fit is None
                                        or sch.predicted.seconds < fit.predicted.seconds):
                    fit = sch
            if fit is not None and reuse:
                fit = with_reuse(sp, fit)
            if fit is not None:
                if best is None or fit.predicted.seconds < best.predicted.seconds:
                    best = fit
                if sp.stats.n_slices >= groups:
                    break
            if target == 1:
                break
            target //= 2
            # a target at or above the sliced plan's largest tensor slices it the same way
            # (restoring is greedy over the indices that fit): skip to the first one below
            while target > 1 and target >= sp.stats.max_intermediate:
                target //= 2
    if best is None:
        raise PlanError(
            f"nothing fits: even sliced, this contraction does not fit the "
            f"{profile.usable_memory / 2**30:.3g} GiB usable per device of profile {profile.name!r}"
        )
    return best
