"""Index bits: how a tensor is sharded over ``d = 2^q`` devices.

A distributed tensor is split by ``q`` *bits* of its modes. A bit is
``(mode, position)``, position 0 being the most significant binary digit of
the mode's index value. The bits of one mode are always a prefix of its
digits, so a shard keeps a contiguous range of every mode, and a tensor's
local shape is its global shape with each distributed mode's extent divided
by ``2^(bits on it)``.

Rank ``r`` of a group of ``d`` devices holds the shard in which bit ``j`` of
the tensor's bit tuple equals binary digit ``j`` of ``r``, most significant
first (see :func:`rank_digits`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

Bit = tuple[str, int]  # (index, bit position within the index, 0 = most significant)
Bits = tuple[Bit, ...]


def mode_bits(mode: str, size: int) -> list[Bit]:
    """The binary digits of a mode, most significant first ([] if not a power of two)."""
    if size < 2 or size & (size - 1):
        return []
    return [(mode, b) for b in range(size.bit_length() - 1)]


def leading_bits(modes: Sequence[str], size_dict: dict[str, int], q: int,
                 exclude: Iterable[str] = frozenset()) -> Bits | None:
    """The first ``q`` bits of a layout, skipping ``exclude`` modes; ``None`` if too few.

    A mode whose extent is not a power of two ends the prefix: bits after it
    would not give contiguous shards.
    """
    exclude = set(exclude)
    out: list[Bit] = []
    for mode in modes:
        if len(out) == q:
            break
        if mode in exclude:
            continue
        bits = mode_bits(mode, size_dict[mode])
        if not bits:
            return None
        out.extend(bits[: q - len(out)])
    return tuple(out) if len(out) == q else None


def bits_per_mode(bits: Iterable[Bit]) -> dict[str, int]:
    """How many bits each mode gives (a prefix of its digits)."""
    out: dict[str, int] = {}
    for mode, _ in bits:
        out[mode] = out.get(mode, 0) + 1
    return out


def is_prefix_set(bits: Sequence[Bit], size_dict: dict[str, int]) -> bool:
    """Whether ``bits`` are distinct, name known modes, and take a prefix of each mode's digits."""
    if len(set(bits)) != len(bits):
        return False
    per: dict[str, list[int]] = {}
    for mode, pos in bits:
        if mode not in size_dict or (mode, pos) not in mode_bits(mode, size_dict[mode]):
            return False
        per.setdefault(mode, []).append(pos)
    return all(sorted(p) == list(range(len(p))) for p in per.values())


def local_shape(modes: Sequence[str], size_dict: dict[str, int],
                bits: Iterable[Bit]) -> tuple[int, ...]:
    """Per-mode extents of one shard of a tensor with layout ``modes`` split by ``bits``."""
    per = bits_per_mode(bits)
    return tuple(size_dict[m] >> per.get(m, 0) for m in modes)


def local_elements(modes: Sequence[str], size_dict: dict[str, int], bits: Iterable[Bit]) -> int:
    return math.prod(local_shape(modes, size_dict, bits))


def local_sizes(size_dict: dict[str, int], bits: Iterable[Bit]) -> dict[str, int]:
    """``size_dict`` with each distributed mode's extent divided by its bits."""
    per = bits_per_mode(bits)
    if not per:
        return size_dict
    out = dict(size_dict)
    for m, k in per.items():
        out[m] = size_dict[m] >> k
    return out


def run_elements(modes: Sequence[str], size_dict: dict[str, int], held: Iterable[Bit],
                 cut: Iterable[Bit]) -> int:
    """Contiguous elements of a shard (layout ``modes`` without ``held`` bits) between ``cut`` bits.

    A collective that splits or assembles a shard along ``cut`` bits copies
    runs of this many elements: everything after the least significant cut
    bit in the local layout. With no cut bit the run is the whole shard.
    """
    held, cut = set(held), set(cut)
    trailing = 1
    for mode in reversed(modes):
        digits = mode_bits(mode, size_dict[mode])
        if not digits:  # not a power of two: never distributed, one indivisible extent
            trailing *= size_dict[mode]
            continue
        for bit in reversed(digits):
            if bit in cut:
                return trailing
            if bit not in held:
                trailing *= 2
    return trailing


def rank_digits(rank: int, q: int) -> tuple[int, ...]:
    """Binary digits of a rank within its group, most significant first (bit ``j`` of a tuple)."""
    return tuple((rank >> (q - 1 - j)) & 1 for j in range(q))


def shard_slices(modes: Sequence[str], size_dict: dict[str, int], bits: Sequence[Bit],
                 rank: int) -> tuple[slice, ...]:
    """The index ranges (one per mode) of rank ``rank``'s shard of a tensor split by ``bits``."""
    digits = rank_digits(rank, len(bits))
    value: dict[str, int] = {}
    per = bits_per_mode(bits)
    for (mode, pos), digit in zip(bits, digits):
        k = per[mode]
        value[mode] = value.get(mode, 0) | (digit << (k - 1 - pos))
    out = []
    for m in modes:
        if m in value:
            width = size_dict[m] >> per[m]
            out.append(slice(value[m] * width, (value[m] + 1) * width))
        else:
            out.append(slice(None))
    return tuple(out)


def aligned(old: Sequence[Bit], new: Sequence[Bit]) -> Bits:
    """``new``'s bits ordered so those it shares with ``old`` keep their positions.

    An all-to-all between two such tuples is uniform: every device keeps
    ``2^-m`` of its shard (``m`` bits change) and sends the rest in equal
    parts to ``2^m - 1`` peers.
    """
    old, new = tuple(old), tuple(new)
    if len(old) != len(new):
        return new
    fresh = iter([b for b in new if b not in set(old)])
    return tuple(b if b in set(new) else next(fresh) for b in old)


def position_preserving(old: Sequence[Bit], new: Sequence[Bit]) -> bool:
    """Whether every bit in both tuples sits at the same position in each."""
    pos = {b: k for k, b in enumerate(new)}
    return all(pos.get(b, k) == k for k, b in enumerate(old))
