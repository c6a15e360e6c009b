"""Communication-aware distribution planner: cost model, redistribution DP, baselines.

Instead of only slicing, intermediates too large for one device are sharded
over ``d = 2^q`` devices by ``q`` index *bits* and moved with all-to-all at
points a dynamic program picks from a hardware cost model.

Model (per slice of the contraction, on a group of ``d`` devices):

* A tensor is *big* when it exceeds ``big_fraction`` of one device's usable
  memory; small tensors are replicated and computed redundantly on every
  device (no communication).
* Big tensors form *chains*: a big running tensor absorbs operands step
  after step. A chain is *activated* when its first big tensor is computed,
  directly in shards over the leading ``q`` bits of its lifetime layout (its
  longest-lived modes, so each shard is one contiguous block).
* At every step the distributed bits ``D`` are *kept* if none is reduced
  there (every device works on its shard, no communication), or the running
  tensor is *redistributed* (all-to-all) to the leading ``q`` bits it keeps
  through the step: *forced* when a bit of ``D`` is about to be reduced,
  *elective* otherwise. When both operands are big, the smaller one is
  gathered (all-gather) and the other continues. A chain ends by a *gather*
  when its tensor is small again.
* Costs: a local step takes ``max(flops / F_dev, bytes / B_dev)``, divided by
  ``d`` when sharded; moving a tensor costs ``bytes_sent / B_net + latency *
  n_blocks`` where ``n_blocks`` counts the contiguous pieces each device sends,
  so a redistribution that cuts a tensor into millions of strided fragments
  costs what it costs. Bandwidth and latency switch from intra- to inter-node
  when ``d`` exceeds the devices of one node.
* The DP (:func:`solve_chain`) chooses, along each chain, the steps where to
  redistribute so the predicted time is least; *forced-only* restricts it to
  forced redistributions. Slicing is chosen jointly: for each group size
  ``d`` the path is sliced until per-device memory fits, and the ``P / d``
  groups run slices in parallel.

Mode extents that are not powers of two cannot be split into bits; such
modes are never distributed (a chain whose leading modes are all such stays
replicated and is refused, reported as ``refused``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError, ProfileError
from ..hardware import HardwareProfile
from ..network import Network
from .lifetime import Step
from .path import slice_from
from .plan import Plan, build_plan

Bit = tuple[str, int]  # (index, bit position within the index, 0 = most significant)


# --------------------------------------------------------------------- bits


def _bits(mode: str, size: int) -> list[Bit]:
    """The binary digits of a mode, most significant first ([] if not a power of two)."""
    if size < 2 or size & (size - 1):
        return []
    return [(mode, b) for b in range(size.bit_length() - 1)]


def leading_bits(modes: Sequence[str], size_dict: dict[str, int], q: int,
                 exclude: set[str] = frozenset()) -> tuple[Bit, ...] | None:
    """The first ``q`` bits of a layout, skipping ``exclude`` modes; ``None`` if too few.

    A mode whose extent is not a power of two ends the prefix: bits after it
    would not give contiguous shards.
    """
    out: list[Bit] = []
    for mode in modes:
        if len(out) == q:
            break
        if mode in exclude:
            continue
        bits = _bits(mode, size_dict[mode])
        if not bits:
            return None
        out.extend(bits[: q - len(out)])
    return tuple(out) if len(out) == q else None


def block_elements(modes: Sequence[str], size_dict: dict[str, int],
                   held: set[Bit], moved: set[Bit]) -> int:
    """Elements in one contiguous piece a device sends when ``moved`` bits change owner.

    The local shard is the layout with the ``held`` bits removed; a piece
    ends at the last (least significant) moved bit.
    """
    trailing = 1
    for mode in reversed(modes):
        for bit in reversed(_bits(mode, size_dict[mode]) or [(mode, -1)]):
            if bit in moved:
                return trailing
            if bit not in held:
                trailing *= 2 if bit[1] >= 0 else size_dict[mode]
    return trailing


# -------------------------------------------------------------- cost model


@dataclass(frozen=True)
class CostModel:
    """Predicted seconds of local steps and of data movement on ``d`` devices."""

    profile: HardwareProfile
    dtype: str = "complex64"

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    def step_seconds(self, flops: float, nbytes: float) -> float:
        """Local time: the slower of the compute and the memory floor."""
        return max(flops / self.profile.flop_rate(self.dtype), nbytes / self.profile.mem_bandwidth)

    def move_seconds(self, bytes_per_device: float, blocks_per_device: float, d: int) -> float:
        if bytes_per_device <= 0 or d <= 1:
            return 0.0
        return bytes_per_device / self.profile.bandwidth(d) + self.profile.latency(d) * blocks_per_device

    def redistribute(self, elems: int, modes: Sequence[str], size_dict: dict[str, int],
                     old: Sequence[Bit], new: Sequence[Bit], d: int) -> tuple[float, float]:
        """(seconds, bytes sent per device) of an all-to-all from bits ``old`` to ``new``."""
        moved = set(new) - set(old)
        if not moved:
            return 0.0, 0.0
        shard = elems / d
        sent = shard * (1 - 2.0 ** -len(moved)) * self.itemsize
        block = block_elements(modes, size_dict, set(old), moved)
        blocks = max(1.0, shard * (1 - 2.0 ** -len(moved)) / block)
        return self.move_seconds(sent, blocks, d), sent

    def gather(self, elems: int, d: int) -> tuple[float, float]:
        """(seconds, bytes received per device) to replicate a tensor sharded over ``d``."""
        if d <= 1:
            return 0.0, 0.0
        nbytes = elems * self.itemsize * (1 - 1 / d)
        return self.move_seconds(nbytes, d - 1, d), nbytes


# ---------------------------------------------------------------------- DP


@dataclass
class ChainStep:
    """One step of a chain as the DP sees it."""

    index: int  # position in plan.steps
    compute: float  # seconds of the step on one device
    elems: int  # elements of the running tensor entering the step
    modes: tuple[str, ...]  # its layout
    reduced: frozenset[str]  # modes reduced by the step
    target: tuple[Bit, ...] | None  # bits to redistribute to before the step (None: impossible)


@dataclass
class ChainSolution:
    seconds: float
    redistribute_at: list[int]  # positions (in the chain) where a redistribution happens
    bits_per_step: list[tuple[Bit, ...]]
    comm_seconds: float
    comm_bytes: float


def _kept(bits: Sequence[Bit], step: ChainStep) -> bool:
    return not any(b[0] in step.reduced for b in bits)


def solve_chain(start: tuple[Bit, ...], steps: Sequence[ChainStep], d: int,
                model: CostModel, size_dict: dict[str, int],
                elective: bool = True) -> ChainSolution:
    """Least predicted time along a chain, choosing where to redistribute.

    State: the bits in effect, which are ``start`` or the target of the last
    redistribution. ``elective=False`` redistributes only when forced.
    """
    inf = float("inf")
    # states: -1 = start, j = target of step j
    best: dict[int, tuple[float, list[int], float, float]] = {-1: (0.0, [], 0.0, 0.0)}

    def bits_of(state: int) -> tuple[Bit, ...]:
        return start if state < 0 else steps[state].target

    for j, st in enumerate(steps):
        nxt: dict[int, tuple[float, list[int], float, float]] = {}
        local = st.compute / d
        move_best = (inf, [], 0.0, 0.0)
        for state, (cost, hist, cs, cb) in best.items():
            bits = bits_of(state)
            if _kept(bits, st):
                cand = (cost + local, hist, cs, cb)
                if cand[0] < nxt.get(state, (inf,))[0]:
                    nxt[state] = cand
                if not elective:
                    continue
            if st.target is None or not _kept(st.target, st):
                continue
            secs, sent = model.redistribute(st.elems, st.modes, size_dict, bits, st.target, d)
            cand = (cost + secs + local, hist + [j], cs + secs, cb + sent)
            if cand[0] < move_best[0]:
                move_best = cand
        if move_best[0] < inf:
            if move_best[0] < nxt.get(j, (inf,))[0]:
                nxt[j] = move_best
        if not nxt:
            return ChainSolution(inf, [], [], inf, inf)
        best = nxt
    state, (cost, hist, cs, cb) = min(best.items(), key=lambda kv: kv[1][0])
    per_step, current, moves = [], start, set(hist)
    for j in range(len(steps)):
        if j in moves:
            current = steps[j].target
        per_step.append(current)
    return ChainSolution(cost, hist, per_step, cs, cb)


def exhaustive_chain(start: tuple[Bit, ...], steps: Sequence[ChainStep], d: int,
                     model: CostModel, size_dict: dict[str, int]) -> float:
    """Brute force over every set of redistribution points (for testing the DP)."""
    import itertools

    best = float("inf")
    for mask in itertools.product((False, True), repeat=len(steps)):
        bits, cost, ok = start, 0.0, True
        for move, st in zip(mask, steps):
            if move:
                if st.target is None or not _kept(st.target, st):
                    ok = False
                    break
                secs, _ = model.redistribute(st.elems, st.modes, size_dict, bits, st.target, d)
                cost += secs
                bits = st.target
            elif not _kept(bits, st):
                ok = False
                break
            cost += st.compute / d
        if ok:
            best = min(best, cost)
    return best


# ------------------------------------------------------------- schedules


@dataclass
class StepAnnotation:
    """What the schedule does at one step (per slice)."""

    action: str  # local | activate | keep | redistribute | gather
    out_bits: list[list] = field(default_factory=list)  # distributed bits of the output
    compute_seconds: float = 0.0
    comm_seconds: float = 0.0
    bytes_sent_per_device: float = 0.0
    live_bytes_per_device: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Schedule:
    """A strategy's predicted cost for a whole contraction on ``devices`` devices."""

    strategy: str
    devices: int
    group_size: int  # devices sharing one slice
    n_slices: int
    flops: float  # total over all slices
    seconds_per_slice: float
    time_s: float
    comm_seconds_per_slice: float
    comm_bytes: float  # per device, over the whole run
    peak_bytes_per_device: int
    n_redistributions: int  # per slice
    annotations: list[StepAnnotation] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {
            "time_s": self.time_s,
            "group_size": self.group_size,
            "n_slices": self.n_slices,
            "flops": self.flops,
            "comm_bytes": self.comm_bytes,
            "comm_share": (self.comm_seconds_per_slice / self.seconds_per_slice
                           if self.seconds_per_slice else 0.0),
            "peak_bytes_per_device": self.peak_bytes_per_device,
            "n_redistributions": self.n_redistributions,
        }


def _schedule_slice(plan: Plan, d: int, model: CostModel, elective: bool,
                    big_bytes: float) -> tuple[float, float, float, int, int, list[StepAnnotation], list[str]]:
    """Predicted (seconds, comm seconds, comm bytes/device, peak bytes/device, redistributions,
    annotations, refusals) of one slice on a group of ``d`` devices."""
    net = plan.network
    size = net.size_dict
    isz = model.itemsize
    q = d.bit_length() - 1
    n_leaves = net.num_tensors
    elems = {k: math.prod(size[i] for i in m) for k, m in enumerate(plan.leaf_modes)}
    modes = {k: m for k, m in enumerate(plan.leaf_modes)}
    for s in plan.steps:
        elems[s.out] = math.prod(s.out_view)
        modes[s.out] = s.out_modes
    big = {node for node, e in elems.items() if d > 1 and e * isz > big_bytes}
    notes = [StepAnnotation("local") for _ in plan.steps]
    refused: list[str] = []
    comp = [model.step_seconds(s.flops, s.bytes) for s in plan.steps]

    consumer = {}
    for j, s in enumerate(plan.steps):
        consumer[s.lhs] = j
        consumer[s.rhs] = j

    def chain_step(k: int, running: int) -> ChainStep:
        st = plan.steps[k]
        red = _reduced(st)
        return ChainStep(k, comp[k], elems[running], modes[running], frozenset(red),
                         leading_bits(modes[running], size, q, exclude=set(red)))

    def follow(node: int) -> list[ChainStep]:
        """Steps after ``node`` that keep a big running tensor, up to a merge with another big one."""
        out = []
        while node in consumer:
            k = consumer[node]
            st = plan.steps[k]
            other = st.rhs if st.lhs == node else st.lhs
            if st.out not in big or other in big:
                break
            out.append(chain_step(k, node))
            node = st.out
        return out

    dist_bits: dict[int, tuple[Bit, ...]] = {}  # node -> bits it is sharded over
    total = comm_s = comm_b = 0.0
    n_redis = 0
    handled: set[int] = set()

    def add_comm(j: int, secs: float, nbytes: float) -> None:
        nonlocal total, comm_s, comm_b
        notes[j].comm_seconds += secs
        notes[j].bytes_sent_per_device += nbytes
        total += secs
        comm_s += secs
        comm_b += nbytes

    for j, s in enumerate(plan.steps):
        if j in handled:
            continue
        handled.add(j)
        dist_ops = [n for n in (s.lhs, s.rhs) if n in dist_bits]
        if s.out not in big:
            # a small output: gather distributed operands, compute replicated
            notes[j] = StepAnnotation("gather" if dist_ops else "local", [], comp[j])
            total += comp[j]
            for node in dist_ops:
                add_comm(j, *model.gather(elems[node], d))
            continue
        if not dist_ops:
            start = leading_bits(s.out_modes, size, q)
            if start is None:
                refused.append(f"step {j}: output modes cannot be split into {q} bits; kept whole")
                notes[j] = StepAnnotation("local", [], comp[j])
                total += comp[j]
                big.discard(s.out)
                continue
            notes[j] = StepAnnotation("activate", [list(b) for b in start], comp[j] / d)
            total += comp[j] / d
            dist_bits[s.out] = start
            chain = follow(s.out)
        else:
            running = max(dist_ops, key=lambda n: elems[n])
            for node in dist_ops:
                if node != running:  # the smaller big operand is replicated for this step
                    add_comm(j, *model.gather(elems[node], d))
            start = dist_bits[running]
            chain = [chain_step(j, running)] + follow(s.out)
        if not chain:
            continue
        sol = solve_chain(start, chain, d, model, size, elective)
        if not math.isfinite(sol.seconds):
            refused.append(f"chain at step {chain[0].index}: no valid distribution; replicated")
            for c in chain:
                handled.add(c.index)
                notes[c.index] = StepAnnotation("local", [], comp[c.index])
                total += comp[c.index]
            continue
        total += sol.seconds
        comm_s += sol.comm_seconds
        comm_b += sol.comm_bytes
        n_redis += len(sol.redistribute_at)
        moves = set(sol.redistribute_at)
        prev = start
        for pos, (c, bits) in enumerate(zip(chain, sol.bits_per_step)):
            handled.add(c.index)
            secs, nbytes = notes[c.index].comm_seconds, notes[c.index].bytes_sent_per_device
            if pos in moves:
                extra = model.redistribute(c.elems, c.modes, size, prev, bits, d)
                secs, nbytes = secs + extra[0], nbytes + extra[1]
            act = "redistribute" if pos in moves else "keep"
            notes[c.index] = StepAnnotation(act, [list(b) for b in bits], c.compute / d, secs,
                                            nbytes)
            dist_bits[plan.steps[c.index].out] = bits
            prev = bits

    # per-device memory: sharded tensors count 1/d, replicated ones whole
    live = sum(elems[k] * isz / (d if k in dist_bits else 1) for k in range(n_leaves))
    peak = live
    for j, s in enumerate(plan.steps):
        out = elems[s.out] * isz / (d if s.out in dist_bits else 1)
        live += out
        peak = max(peak, live)
        notes[j].live_bytes_per_device = int(live)
        for node in (s.lhs, s.rhs):
            live -= elems[node] * isz / (d if node in dist_bits else 1)
    return total, comm_s, comm_b, int(peak), n_redis, notes, refused


def _reduced(step: Step) -> list[str]:
    kept = set(step.out_modes)
    return [i for i in step.lhs_modes if i in set(step.rhs_modes) and i not in kept]


def _sliced_plan(base: Plan, net: Network, target: int) -> Plan:
    # few slicing trials: the planner sweeps many targets and group sizes. A
    # plan that is already sliced (by a slicing-aware search) is the starting
    # point: its indices are restored or added to, never thrown away.
    sliced = slice_from(net, base.path, target, prefer=base.sliced, max_repeats=2)
    return build_plan(net, base.path, sliced, base.dtype, meta=base.meta)


def schedule(plan: Plan, profile: HardwareProfile, devices: int, strategy: str = "dp",
             big_fraction: float = 0.25, sliced_cache: dict | None = None) -> Schedule:
    """Predict the best schedule of ``strategy`` (dp | forced_only | slice_only) on ``devices``.

    For every group size ``d`` (a power of two dividing ``devices``; only
    ``d = 1`` for slice-only) the path is sliced until each device's memory
    fits (and further while there are fewer slices than groups), one slice is
    scheduled on ``d`` devices, and ``devices / d`` groups share the slices in
    rounds. The fastest candidate wins; slice-only is the ``d = 1`` candidate,
    so dp is never slower than it.
    """
    profile.check_devices(devices)
    if strategy not in ("dp", "forced_only", "slice_only"):
        raise PlanError(f"unknown strategy {strategy!r}; valid: dp, forced_only, slice_only")
    model = CostModel(profile, plan.dtype)
    net = plan.network
    mem = profile.usable_memory
    isz = model.itemsize
    group_sizes = [1] if strategy == "slice_only" else [
        2**k for k in range(devices.bit_length()) if 2**k <= devices
    ]
    best: Schedule | None = None
    # sliced plans by target size: the halving sequences of different group
    # sizes (and strategies, when the caller shares the cache) overlap
    cache = sliced_cache if sliced_cache is not None else {}

    def sliced_plan(target: int) -> Plan:
        if target not in cache:
            cache[target] = _sliced_plan(plan, net, target)
        return cache[target]

    for d in group_sizes:
        groups = devices // d
        target = max(1, int(mem * d / (3 * isz)))
        # Slice until one slice fits each device; then keep slicing while there
        # are fewer slices than groups (idle groups), and take the fastest.
        while target >= 1:
            try:
                sp = sliced_plan(target)
            except PlanError:
                break
            res = _schedule_slice(sp, d, model, False, big_fraction * mem)
            if strategy == "dp" and d > 1:
                # the DP's policies include redistributing only when forced; chains
                # interact through merges, so keep whichever whole schedule is faster
                elective = _schedule_slice(sp, d, model, True, big_fraction * mem)
                if elective[0] <= res[0]:
                    res = elective
            secs, comm_s, comm_b, peak, n_redis, notes, refused = res
            n_slices = sp.stats.n_slices
            if peak <= mem:
                # slices run in rounds over the groups; for slice-only (d = 1) with at
                # least P slices this is the paper's ideal t_1 * 2^b_1 / P, and with
                # fewer slices the loop below slices further so no device idles
                rounds = math.ceil(n_slices / groups)
                time_s = secs * rounds
                sched = Schedule(strategy, devices, d, n_slices, sp.stats.flops, secs, time_s,
                                 comm_s, comm_b * rounds, peak, n_redis, notes, refused)
                if best is None or sched.time_s < best.time_s:
                    best = sched
                if n_slices >= groups:
                    break
            if target == 1:
                break
            target //= 2
    if best is None:
        raise PlanError(
            f"nothing fits: even sliced, this contraction does not fit the "
            f"{profile.usable_memory / 2**30:.1f} GiB usable per device of profile {profile.name!r}"
        )
    return best


def compare_strategies(plan: Plan, profile: HardwareProfile, devices: int) -> dict:
    """The report of ``qsimdist plan --profile``: dp, forced-only and slice-only side by side."""
    try:
        profile.check_devices(devices)
    except ProfileError:
        raise
    cache: dict = {}
    out = {
        s: schedule(plan, profile, devices, s, sliced_cache=cache)
        for s in ("slice_only", "forced_only", "dp")
    }
    base = out["slice_only"]
    report = {
        "devices": devices,
        "profile": profile.name,
        "flops": out["dp"].flops,
        "log10_cost": plan.stats.log10_cost,
        "R_P": base.flops / out["dp"].flops,
        "strategies": {},
    }
    for name, sch in out.items():
        entry = sch.summary()
        entry["E_P"] = base.time_s / sch.time_s if sch.time_s else float("inf")
        entry["tflops_per_device"] = sch.flops / sch.time_s / devices / 1e12 if sch.time_s else 0.0
        report["strategies"][name] = entry
    return report, out
