"""The hardware cost model of distributed steps: compute, link time, pack and unpack.

All numbers are *predictions* from a hardware profile (``backends/*.toml``).

* A local step takes ``max(flops / F, bytes / B_mem)`` on one device.
* Every collective is link time plus the copies on both ends. Link time is
  ``bytes / B_net + latency * messages`` (bandwidth and latency switch from
  intra- to inter-node when the group spans nodes). A copy moves each byte
  twice (read and write) at the profile's memory bandwidth, slowed by
  ``CACHE_LINE / run_bytes`` when its contiguous runs are shorter than a
  cache line: packing a send buffer out of strided fragments costs what it
  costs, and so does unpacking the receive buffer. Both ends are modelled,
  so a move and its mirror cost the same.
* All-reduce is a ring: ``2 (d-1)/d`` of the buffer crosses the link in
  ``2 (d-1)`` messages, and ``(d-1)/d`` of it is summed in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...hardware import HardwareProfile
from .bits import Bit, local_elements, run_elements

#: bytes below which a copy's contiguous runs waste the rest of a cache line
CACHE_LINE = 64


@dataclass(frozen=True)
class Move:
    """Predicted cost of one collective, per device."""

    link_seconds: float = 0.0
    pack_seconds: float = 0.0  # packing the send buffer plus unpacking the receive buffer
    send_bytes: int = 0
    recv_bytes: int = 0
    messages: int = 0

    @property
    def seconds(self) -> float:
        return self.link_seconds + self.pack_seconds


NO_MOVE = Move()


@dataclass(frozen=True)
class CostModel:
    """Predicted seconds of local steps and of data movement on groups of ``d`` devices."""

    profile: HardwareProfile
    dtype: str = "complex64"

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    def step_seconds(self, flops: float, nbytes: float) -> float:
        """Local time: the slower of the compute and the memory floor, plus the fixed
        per-step cost of the executor (``profile.step_overhead``, fitted from runs)."""
        return self.profile.step_overhead + max(flops / self.profile.flop_rate(self.dtype),
                                                nbytes / self.profile.mem_bandwidth)

    def copy_seconds(self, nbytes: float, run_elems: float) -> float:
        """A copy of ``nbytes`` in contiguous runs of ``run_elems`` elements (read + write)."""
        if nbytes <= 0:
            return 0.0
        run_bytes = max(1.0, run_elems * self.itemsize)
        return 2.0 * nbytes / self.profile.mem_bandwidth * max(1.0, CACHE_LINE / run_bytes)

    def link_seconds(self, nbytes: float, messages: int, d: int) -> float:
        if d <= 1 or nbytes <= 0:
            return 0.0
        return nbytes / self.profile.bandwidth(d) + self.profile.latency(d) * messages

    def redistribute(self, modes: Sequence[str], size_dict: dict[str, int],
                     old: Sequence[Bit], new: Sequence[Bit], d: int) -> Move:
        """All-to-all of a tensor with layout ``modes`` from bits ``old`` to ``new``.

        Each device keeps ``2^-m`` of its shard (``m`` bits change) and sends
        the rest in equal parts to ``2^m - 1`` peers. The sender cuts its
        shard along the new bits; the receiver assembles along the old ones.
        """
        moved_in = [b for b in new if b not in set(old)]
        if d <= 1 or not moved_in:
            return NO_MOVE
        moved_out = [b for b in old if b not in set(new)]
        m = len(moved_in)
        shard = local_elements(modes, size_dict, old) * self.itemsize
        sent = int(shard - shard // 2**m)
        send_run = run_elements(modes, size_dict, old, moved_in)
        recv_run = run_elements(modes, size_dict, new, moved_out)
        pack = self.copy_seconds(shard, send_run) + self.copy_seconds(shard, recv_run)
        peers = 2**m - 1
        return Move(self.link_seconds(sent, peers, d), pack, sent, sent, peers)

    def allgather(self, modes: Sequence[str], size_dict: dict[str, int], bits: Sequence[Bit],
                  d: int) -> Move:
        """Replicate a tensor sharded by ``bits``: receive the other shards and place them."""
        if d <= 1 or not bits:
            return NO_MOVE
        shard = local_elements(modes, size_dict, bits) * self.itemsize
        recv = shard * (d - 1)
        run = run_elements(modes, size_dict, (), bits)
        return Move(self.link_seconds(recv, d - 1, d), self.copy_seconds(recv, run),
                    shard, recv, d - 1)

    def allreduce(self, nbytes: int, d: int) -> Move:
        """Sum a replicated buffer of ``nbytes`` over ``d`` devices (ring, in place)."""
        if d <= 1 or nbytes <= 0:
            return NO_MOVE
        wire = int(2 * nbytes * (d - 1) / d)
        summed = nbytes * (d - 1) / d
        return Move(self.link_seconds(wire, 2 * (d - 1), d),
                    3.0 * summed / self.profile.mem_bandwidth, wire, wire, 2 * (d - 1))
