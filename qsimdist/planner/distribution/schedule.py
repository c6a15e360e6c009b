"""A distributed schedule as flat, frozen data (plan schema v3, key ``"distribution"``).

One :class:`StepRecord` per pairwise step says, for one slice on a group of
``d = 2^q`` devices, what every device of the group does:

1. ``pre``: collectives on the operands before computing (``alltoall``:
   redistribute from ``from_bits`` to ``to_bits``; ``allgather``: replicate).
2. compute on local shards. ``compute_bits`` are the bits that split the
   work (empty: every device computes the whole step, replicated work). A
   replicated operand is read at the rank's index range of the modes in
   ``compute_bits`` (:func:`~.bits.shard_slices`).
3. ``post``: a collective on the output (``allreduce``: each device writes
   its partial result into a zero buffer of the whole output at its index
   range, and the buffers are summed in place; ``allgather``: the output
   shards are gathered).

``out_bits`` are the bits the stored output is sharded by (empty:
replicated). Shapes are per device and the same on every device; devices
differ only in the index ranges they hold, given by the rank <-> bit map:
bit ``j`` of a tuple is binary digit ``j`` (most significant first) of the
rank within its group. Groups are ranks ``[g d, (g+1) d)``, ``g < P/d``;
group ``g`` runs the slices ``s`` with ``s % (P/d) == g`` (cotengra's
``slice_key`` order) and the groups' results are summed at the end.
``kept`` names the step outputs a group keeps from one slice to the next
and reuses while the sliced indices they depend on are unchanged
(:mod:`.reuse`); the predicted totals then count each step's runs.

Every number under ``predicted`` comes from the cost model, not a
measurement.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

from ...errors import PlanFormatError
from .bits import Bits


class Action(str, Enum):
    """What a step does, in one word (the records say exactly how)."""

    LOCAL = "local"  # replicated operands, replicated output, replicated work
    ACTIVATE = "activate"  # replicated operands, sharded output (each device computes its shard)
    KEEP = "keep"  # sharded compute with no communication
    REDISTRIBUTE = "redistribute"  # an all-to-all moves an operand's bits first
    REDUCE = "reduce"  # sharded compute, then the output is all-reduced (or all-gathered)
    GATHER = "gather"  # an operand is all-gathered (replicated) first


COLLECTIVES = ("alltoall", "allgather", "allreduce")


def action_of(pre_kinds, has_post: bool, compute_bits, operand_sharded: bool) -> Action:
    """The one-word action of a step from its collectives and bits."""
    kinds = set(pre_kinds)
    if "allgather" in kinds:
        return Action.GATHER
    if "alltoall" in kinds:
        return Action.REDISTRIBUTE
    if has_post:
        return Action.REDUCE
    if compute_bits:
        return Action.KEEP if operand_sharded else Action.ACTIVATE
    return Action.LOCAL
OPERANDS = ("lhs", "rhs", "out")


@dataclass(frozen=True)
class Collective:
    """One collective of one step, per device of the group."""

    kind: str  # alltoall | allgather | allreduce
    operand: str  # lhs | rhs | out
    from_bits: Bits
    to_bits: Bits
    send_bytes: int  # bytes each device sends
    recv_bytes: int  # bytes each device receives
    buffer_bytes: int  # extra bytes live on each device while it runs
    messages: int
    predicted_link_seconds: float
    predicted_pack_seconds: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["from_bits"] = [list(b) for b in self.from_bits]
        d["to_bits"] = [list(b) for b in self.to_bits]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Collective:
        return cls(
            kind=str(d["kind"]), operand=str(d["operand"]),
            from_bits=_bits(d["from_bits"]), to_bits=_bits(d["to_bits"]),
            send_bytes=int(d["send_bytes"]), recv_bytes=int(d["recv_bytes"]),
            buffer_bytes=int(d["buffer_bytes"]), messages=int(d["messages"]),
            predicted_link_seconds=float(d["predicted_link_seconds"]),
            predicted_pack_seconds=float(d["predicted_pack_seconds"]),
        )


@dataclass(frozen=True)
class LocalView:
    """The local GEMM of a step on one device's shards (see ``planner.lifetime.Step``)."""

    kernel: str
    x: str
    x_view: tuple[int, ...]
    y_view: tuple[int, ...]
    out_view: tuple[int, ...]
    workspace_bytes: int  # permuted or expanded copies the kernel makes

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> LocalView:
        return cls(str(d["kernel"]), str(d["x"]), _ints(d["x_view"]), _ints(d["y_view"]),
                   _ints(d["out_view"]), int(d["workspace_bytes"]))


@dataclass(frozen=True)
class StepRecord:
    """What every device of a group does at one step (per slice)."""

    index: int
    action: Action
    pre: tuple[Collective, ...]
    lhs_bits: Bits  # operand bits while computing (after ``pre``)
    rhs_bits: Bits
    compute_bits: Bits
    out_bits: Bits
    post: Collective | None
    lhs_shape: tuple[int, ...]  # local shapes (per mode of the step's layouts)
    rhs_shape: tuple[int, ...]
    out_shape: tuple[int, ...]  # of the stored output (after ``post``)
    view: LocalView
    predicted_compute_seconds: float
    flops_per_device: float
    live_bytes: int  # per device while the step runs: live tensors, buffers, workspace

    @property
    def collectives(self) -> tuple[Collective, ...]:
        return self.pre + ((self.post,) if self.post is not None else ())

    @property
    def predicted_comm_seconds(self) -> float:
        return sum(c.predicted_link_seconds for c in self.collectives)

    @property
    def predicted_pack_seconds(self) -> float:
        return sum(c.predicted_pack_seconds for c in self.collectives)

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "action": self.action.value,
            "pre": [c.to_dict() for c in self.pre],
            "lhs_bits": [list(b) for b in self.lhs_bits],
            "rhs_bits": [list(b) for b in self.rhs_bits],
            "compute_bits": [list(b) for b in self.compute_bits],
            "out_bits": [list(b) for b in self.out_bits],
            "post": self.post.to_dict() if self.post is not None else None,
            "lhs_shape": list(self.lhs_shape),
            "rhs_shape": list(self.rhs_shape),
            "out_shape": list(self.out_shape),
            "view": self.view.to_dict(),
            "predicted_compute_seconds": self.predicted_compute_seconds,
            "flops_per_device": self.flops_per_device,
            "live_bytes": self.live_bytes,
        }

    @classmethod
    def from_dict(cls, d: dict) -> StepRecord:
        return cls(
            index=int(d["index"]), action=Action(d["action"]),
            pre=tuple(Collective.from_dict(c) for c in d["pre"]),
            lhs_bits=_bits(d["lhs_bits"]), rhs_bits=_bits(d["rhs_bits"]),
            compute_bits=_bits(d["compute_bits"]), out_bits=_bits(d["out_bits"]),
            post=Collective.from_dict(d["post"]) if d["post"] is not None else None,
            lhs_shape=_ints(d["lhs_shape"]), rhs_shape=_ints(d["rhs_shape"]),
            out_shape=_ints(d["out_shape"]), view=LocalView.from_dict(d["view"]),
            predicted_compute_seconds=float(d["predicted_compute_seconds"]),
            flops_per_device=float(d["flops_per_device"]), live_bytes=int(d["live_bytes"]),
        )


@dataclass(frozen=True)
class Prediction:
    """A schedule's totals as the cost model predicts them (never a measurement)."""

    seconds: float  # whole run: per-slice seconds times rounds
    seconds_per_slice: float
    compute_seconds: float  # whole run, per device
    comm_seconds: float  # link time, whole run
    pack_seconds: float  # pack/unpack copies, whole run
    flops_counted: float  # the plan's FLOPs over all slices (each step counted once)
    flops_executed: float  # summed over every device, replicated work included
    flops_per_device: float  # on the busiest device over the whole run
    comm_bytes_per_device: float  # sent, whole run
    peak_bytes_per_device: int
    n_redistributions: int  # per slice
    rounds: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Schedule:
    """A complete distributed schedule: slicing, groups, rank map and one record per step."""

    strategy: str
    profile: str
    devices: int  # P
    group_size: int  # d = 2^q devices share one slice
    dtype: str
    sliced: tuple[str, ...]  # the slicing this schedule runs (the plan's own)
    n_slices: int
    usable_memory: int  # per device, from the profile
    big_bytes: float  # tensors above this many bytes were candidates for sharding
    steps: tuple[StepRecord, ...]
    predicted: Prediction
    refused: tuple[str, ...] = field(default=())
    # the profile's own fields, so a schedule made from a custom .toml is checked without it
    profile_spec: dict | None = field(default=None, compare=False, hash=False)
    # step outputs (SSA node ids) a group keeps from one slice to the next (see .reuse);
    # empty: every step runs once per slice
    kept: tuple[int, ...] = ()

    @property
    def q(self) -> int:
        return self.group_size.bit_length() - 1

    @property
    def groups(self) -> int:
        return self.devices // self.group_size

    def slices_of_group(self, g: int) -> range:
        """Slice numbers group ``g`` runs: the contiguous block ``g * N // G`` up to
        ``(g + 1) * N // G``, so that the step outputs it keeps serve every slice of
        a prefix (round robin made every group meet every prefix: see ``reuse``)."""
        n, groups = self.n_slices, self.groups
        return range(g * n // groups, (g + 1) * n // groups)

    def group_of_rank(self, rank: int) -> tuple[int, int]:
        """(group, rank within the group) of a global rank."""
        return divmod(rank, self.group_size)

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "profile": self.profile,
            "devices": self.devices,
            "group_size": self.group_size,
            "groups": self.groups,
            "slice_rule": "round_robin",
            "rank_bits": "msb_first",
            "dtype": self.dtype,
            "sliced": list(self.sliced),
            "n_slices": self.n_slices,
            "usable_memory": self.usable_memory,
            "big_bytes": self.big_bytes,
            "refused": list(self.refused),
            "profile_spec": self.profile_spec,
            "predicted": self.predicted.to_dict(),
            "kept": list(self.kept),
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, d: object, source: str = "schedule") -> Schedule:
        """Parse a schedule; a malformed one raises :class:`PlanFormatError` with one line."""
        try:
            if not isinstance(d, dict):
                raise TypeError("not an object")
            if d.get("slice_rule", "round_robin") != "round_robin" or \
                    d.get("rank_bits", "msb_first") != "msb_first":
                raise ValueError("unknown slice_rule or rank_bits convention")
            pred = d["predicted"]
            sched = cls(
                strategy=str(d["strategy"]), profile=str(d["profile"]),
                devices=int(d["devices"]), group_size=int(d["group_size"]),
                dtype=str(d["dtype"]), sliced=tuple(str(i) for i in d["sliced"]),
                n_slices=int(d["n_slices"]), usable_memory=int(d["usable_memory"]),
                big_bytes=float(d["big_bytes"]),
                steps=tuple(StepRecord.from_dict(s) for s in d["steps"]),
                predicted=Prediction(**{k: type(v)(pred[k]) for k, v in
                                        asdict(_ZERO_PREDICTION).items()}),
                refused=tuple(str(r) for r in d.get("refused", ())),
                profile_spec=_spec(d.get("profile_spec")),
                kept=tuple(int(k) for k in d.get("kept", ())),
            )
        except PlanFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PlanFormatError(f"{source}: malformed distribution schedule ({exc!r})") from None
        p, g = sched.devices, sched.group_size
        if p < 1 or p & (p - 1) or g < 1 or g & (g - 1) or g > p:
            raise PlanFormatError(
                f"{source}: devices {p} and group_size {g} must be powers of two with "
                "group_size <= devices")
        if sched.n_slices < 1:
            raise PlanFormatError(f"{source}: n_slices must be at least 1")
        return sched


_ZERO_PREDICTION = Prediction(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0)


def _bits(value) -> Bits:
    out = []
    for b in value:
        if not isinstance(b, (list, tuple)) or len(b) != 2:
            raise ValueError(f"a bit is [mode, position], got {b!r}")
        out.append((str(b[0]), int(b[1])))
    return tuple(out)


def _spec(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("profile_spec is not an object")
    return dict(value)


def _ints(value) -> tuple[int, ...]:
    return tuple(int(x) for x in value)
