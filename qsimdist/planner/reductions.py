"""qsimdist's own network simplification: the ``A D C R S`` passes, on this project's arrays.

The passes are those quimb's ``full_simplify`` names with the same letters (the facts
carry over; the code is this module's own, written for :class:`~qsimdist.network.Network`
and its hyper-indices):

- ``C`` (columns): a tensor that is zero except at one value ``v`` of an index fixes that
  index: every tensor on it is sliced at ``v`` and the index leaves the network (the
  ``|0>`` states of a circuit fold into their first gates this way).
- ``D`` (diagonals): a tensor that is zero off the diagonal of two equal-sized indices
  ``i, j`` keeps its diagonal, and ``j`` becomes ``i`` everywhere (a hyper-index).
- ``A`` (anti-diagonals): a tensor zero off the anti-diagonal of ``i, j`` has ``j``'s
  values reversed across the network, which makes it diagonal for ``D``.
- ``R`` (rank): an index on one tensor only is summed; two tensors sharing an index are
  contracted where the result has no more indices than the larger of them; scalars are
  set aside into one factor.
- ``S`` (split): a tensor whose matrix across some bipartition of its indices has low
  rank is split in two by an SVD where both parts are smaller than it.
- ``E`` (eliminate; qsimdist's own letter, not quimb's): an index is summed out of all
  its tensors at once where the one tensor left has at most
  :data:`MAX_ELIMINATED_SIZE` entries, smallest first. On networks of small tensors that
  share hyper-indices (the doubled kicked-Ising networks are 2x2 diagonal factors on
  qubit lines) this is variable elimination of the low-degree variables: the path search
  then sees a network a third the size, and finds cheaper paths sooner.

The letters run in the order given, again and again, until a round changes neither the
number of tensors nor the number of indices. Output indices are never removed or
renamed. Entries at most ``atol`` in magnitude count as zero (for ``S``: singular values
at most ``atol`` times the largest).

Why not quimb's own: importing ``quimb.tensor`` and loading its compiled kernels costs
about a second in a fresh process, which was half of a 127-qubit kicked-Ising
expectation value; these passes on the same networks take milliseconds.
"""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np

from ..network import Network

#: the letters this module implements
LETTERS = frozenset("ADCRSE")
#: tensors with more indices are not tried for a split (2^(n-1) bipartitions each)
MAX_SPLIT_INDICES = 10
#: of a hyper-index on more tensors, only pairs among this many of the smallest are tried
MAX_PAIR_HOLDERS = 32
#: tensors with more entries are not scanned for columns, diagonals or splits
MAX_SCAN_SIZE = 1 << 16
#: ``E`` sums an index out of its tensors only where the tensor left has at most this many
#: entries (5 indices of size 2): small enough that no contraction's width is forced up
MAX_ELIMINATED_SIZE = 32


class _Work:
    """A network being simplified: tensors by id, where each index lives, one scalar."""

    def __init__(self, net: Network, atol: float):
        self.atol = atol
        self.output = tuple(net.output)
        self.protected = frozenset(self.output)
        self.sizes = dict(net.size_dict)
        self.tensors: dict[int, tuple[tuple[str, ...], np.ndarray]] = {}
        self.index_sets: dict[int, frozenset[str]] = {}
        #: pairs of tensors whose contraction was found to add indices (not tried again,
        #: as quimb's rank pass does not)
        self.failed_pairs: set[tuple[int, int]] = set()
        self.where: dict[str, set[int]] = {}
        self.scalar = 1.0 + 0.0j
        self.zero = False
        self.dtype = np.result_type(*[np.asarray(a).dtype for a in net.arrays]) \
            if net.arrays else np.dtype(complex)
        self._next = 0
        self._fresh = 0
        #: per pass, the first tensor id it has not looked at (ids only grow, and a tensor
        #: a pass looked at and left is unchanged since: only newer ones need a look)
        self.seen_upto: dict[str, int] = {c: 0 for c in LETTERS}
        #: indices whose tensors changed since the last rank pass
        self.touched: set[str] = set()
        #: each index's rank in order of first appearance: ties are broken by it, so
        #: that every process (every MPI rank) simplifies a network the same way
        self.first_seen: dict[str, int] = {}
        for inds, arr in zip(net.inputs, net.arrays):
            self.add(tuple(inds), np.asarray(arr))

    # ------------------------------------------------------------------ bookkeeping
    def add(self, inds: tuple[str, ...], arr: np.ndarray) -> int | None:
        if len(set(inds)) < len(inds):
            inds, arr = _collapse_repeats(inds, arr)
        if not inds:
            self.scalar *= complex(arr)
            return None
        tid = self._next
        self._next += 1
        self.tensors[tid] = (inds, arr)
        self.index_sets[tid] = frozenset(inds)
        self.touched.update(inds)
        for ix in inds:
            self.where.setdefault(ix, set()).add(tid)
            self.first_seen.setdefault(ix, len(self.first_seen))
        return tid

    def pop(self, tid: int) -> tuple[tuple[str, ...], np.ndarray]:
        inds, arr = self.tensors.pop(tid)
        del self.index_sets[tid]
        self.touched.update(inds)
        for ix in inds:
            holders = self.where[ix]
            holders.discard(tid)
            if not holders:
                del self.where[ix]
        return inds, arr

    def fresh_index(self) -> str:
        while True:
            name = f"_r{self._fresh}"
            self._fresh += 1
            if name not in self.sizes:
                return name

    def shape(self) -> tuple[int, int]:
        return len(self.tensors), len(self.where)

    def count(self, ix: str) -> int:
        """Places of ``ix``: its tensors, plus one for an output index."""
        return len(self.where.get(ix, ())) + (ix in self.protected)

    def unseen(self, letter: str) -> list[int]:
        """Tensors pass ``letter`` has not looked at yet, oldest first; marks them seen (a
        pass that makes tensors and looks at them too marks those after it)."""
        upto = self.seen_upto[letter]
        new = list(itertools.takewhile(lambda t: t >= upto, reversed(self.tensors)))
        self.seen_upto[letter] = self._next
        return new[::-1]

    # ------------------------------------------------------------------ index moves
    def fix(self, ix: str, value: int) -> None:
        """Slice every tensor on ``ix`` at ``value``; ``ix`` leaves the network."""
        for tid in list(self.where.get(ix, ())):
            inds, arr = self.pop(tid)
            ax = inds.index(ix)
            self.add(inds[:ax] + inds[ax + 1:], np.take(arr, value, axis=ax))

    def rename(self, old: str, new: str) -> None:
        """``old`` becomes ``new`` on every tensor (repeats on one tensor: its diagonal)."""
        for tid in list(self.where.get(old, ())):
            inds, arr = self.pop(tid)
            self.add(tuple(new if i == old else i for i in inds), arr)

    def flip(self, ix: str) -> None:
        """Reverse the values of ``ix`` on every tensor (a relabelling of a summed index)."""
        for tid in list(self.where.get(ix, ())):
            inds, arr = self.pop(tid)
            self.add(inds, np.flip(arr, axis=inds.index(ix)).copy())

    # ------------------------------------------------------------------ the passes
    def columns(self) -> None:
        queue = self.unseen("C")
        while queue and not self.zero:
            tid = queue.pop()
            if tid not in self.tensors:
                continue
            found = self._column(*self.tensors[tid])
            if found is not None:
                before = self._next
                self.fix(*found)
                queue.extend(range(before, self._next))
        self.seen_upto["C"] = self._next

    def _column(self, inds, arr) -> tuple[str, int] | None:
        """``(index, value)`` where ``arr`` is zero off that one value of an index."""
        if arr.size > MAX_SCAN_SIZE:
            return None
        nonzero = np.abs(arr) > self.atol
        if not nonzero.any():
            self.zero = True
            return None
        for ax, ix in enumerate(inds):
            if ix in self.protected:
                continue
            others = tuple(a for a in range(arr.ndim) if a != ax)
            hits = np.flatnonzero(nonzero.any(axis=others)) if others else \
                np.flatnonzero(nonzero)
            if len(hits) == 1:
                return ix, int(hits[0])
        return None

    def diagonals(self, anti: bool = False) -> None:
        letter = "A" if anti else "D"
        flipped: set[str] = set()
        queue = self.unseen(letter)
        while queue:
            tid = queue.pop()
            if tid not in self.tensors:
                continue
            inds, arr = self.tensors[tid]
            pair = _diagonal_pair(inds, arr, self.atol, anti, self.protected, flipped)
            if pair is None:
                continue
            keep, drop = pair
            before = self._next
            if anti:
                flipped.add(drop)
                self.flip(drop)
            else:
                self.rename(drop, keep)
            queue.extend(range(before, self._next))
        self.seen_upto[letter] = self._next

    def rank(self) -> None:
        # an index none of whose tensors changed since the last pass has nothing new to do
        queue = deque(sorted((ix for ix in self.touched if ix in self.where),
                             key=lambda ix: (sum(len(self.index_sets[t]) for t in self.where[ix]),
                                             self.first_seen[ix])))
        self.touched = set()
        queued = set(queue)
        failed = self.failed_pairs
        count = self.count

        def requeue(inds) -> None:
            for j in inds:
                if j not in queued:
                    queue.append(j)
                    queued.add(j)

        while queue:
            ix = queue.popleft()
            queued.discard(ix)
            holders = self.where.get(ix)
            if not holders:
                continue
            if count(ix) == 1:  # on one tensor, not an output: summed away
                (tid,) = holders
                inds, arr = self.pop(tid)
                ax = inds.index(ix)
                new = self.add(inds[:ax] + inds[ax + 1:], arr.sum(axis=ax))
                if new is not None:
                    requeue(self.tensors[new][0])
                continue
            if len(holders) > MAX_PAIR_HOLDERS:  # a wide hyper-index: its smallest tensors
                holders = sorted(holders, key=lambda t: len(self.index_sets[t]))
                holders = holders[:MAX_PAIR_HOLDERS]
            best = None
            for a, b in itertools.combinations(sorted(holders), 2):
                if (a, b) in failed:
                    continue
                sa, sb = self.index_sets[a], self.index_sets[b]
                # an index leaves with the pair where all its places are in the pair
                kept = len(sa | sb) - sum(1 for j in sa & sb if count(j) == 2) \
                    - sum(1 for j in sa ^ sb if count(j) == 1)
                grow = kept - max(len(sa), len(sb))
                if grow > 0:
                    failed.add((a, b))
                elif best is None or grow < best[0]:
                    best = (grow, a, b)
            if best is None:
                continue
            _, a, b = best
            ia, xa = self.tensors[a]
            ib, xb = self.tensors[b]
            out = tuple(j for j in dict.fromkeys(ia + ib)
                        if (j in ia) + (j in ib) != count(j))
            self.pop(a)
            self.pop(b)
            if self.add(out, _pair(ia, xa, ib, xb, out)) is not None:
                requeue(out)
        self.touched = set()

    def splits(self) -> None:
        # the parts of a split are looked at in the next round's pass
        for tid in self.unseen("S"):
            if tid not in self.tensors:
                continue
            inds, arr = self.tensors[tid]
            if not 2 <= arr.ndim <= MAX_SPLIT_INDICES or arr.size > MAX_SCAN_SIZE:
                continue
            best = None
            for left in _bipartitions(arr.ndim):
                right = tuple(a for a in range(arr.ndim) if a not in left)
                rows = int(np.prod([arr.shape[a] for a in left]))
                cols = arr.size // rows
                if min(rows, cols) == 1:
                    continue
                matrix = np.transpose(arr, left + right).reshape(rows, cols)
                sv = np.linalg.svd(matrix, compute_uv=False)
                r = int(np.count_nonzero(sv > self.atol * sv[0])) if sv[0] > 0 else 0
                new_size = max(rows, cols) * r
                if r and new_size < arr.size and (best is None or new_size < best[0]):
                    best = (new_size, left, right, matrix)
            if best is None:
                continue
            _, left, right, matrix = best
            u, sv, vh = np.linalg.svd(matrix, full_matrices=False)
            r = int(np.count_nonzero(sv > self.atol * sv[0]))
            root = np.sqrt(sv[:r]).astype(arr.dtype)
            bond = self.fresh_index()
            self.sizes[bond] = r
            self.pop(tid)
            self.add(tuple(inds[a] for a in left) + (bond,),
                     (u[:, :r] * root).reshape(tuple(arr.shape[a] for a in left) + (r,)))
            self.add((bond,) + tuple(inds[a] for a in right),
                     (root[:, None] * vh[:r]).reshape((r,) + tuple(arr.shape[a] for a in right)))

    def _left_after(self, ix: str) -> tuple[str, ...] | None:
        """The indices of the one tensor left when ``ix`` is summed out of all its tensors
        (with any other index found only on them), if it has at most
        :data:`MAX_ELIMINATED_SIZE` entries; else ``None``."""
        holders = self.where.get(ix)
        if not holders or ix in self.protected or len(holders) > MAX_PAIR_HOLDERS:
            return None
        inside: dict[str, int] = {}
        for t in holders:
            for j in self.index_sets[t]:
                inside[j] = inside.get(j, 0) + 1
        left = tuple(sorted((j for j, k in inside.items() if j != ix and k < self.count(j)),
                            key=self.first_seen.__getitem__))
        size = 1
        for j in left:
            size *= self.sizes[j]
            if size > MAX_ELIMINATED_SIZE:
                return None
        return left

    def eliminate(self) -> None:
        """``E``: each index whose elimination leaves a tensor of at most
        :data:`MAX_ELIMINATED_SIZE` entries is summed out, the smallest result first (ties
        by first appearance, so every rank simplifies alike)."""
        found = []
        for ix in self.where:
            left = self._left_after(ix)
            if left is not None:
                found.append((len(left), self.first_seen[ix], ix))
        for _, _, ix in sorted(found):
            left = self._left_after(ix)  # earlier eliminations may have changed it
            if left is None:
                continue
            parts = [self.pop(t) for t in sorted(self.where[ix])]
            self.add(left, _join(parts, left))

    # ------------------------------------------------------------------ result
    def network(self, meta: dict) -> Network:
        if self.zero:
            shape = tuple(self.sizes[i] for i in self.output)
            return Network([self.output], self.output,
                           {i: self.sizes[i] for i in self.output},
                           [np.zeros(shape, dtype=self.dtype)], meta)
        tids = sorted(self.tensors)
        inputs = [self.tensors[t][0] for t in tids]
        arrays = [self.tensors[t][1] for t in tids]
        if not arrays:
            return Network([()], (), {}, [np.asarray(self.scalar, dtype=self.dtype)], meta)
        if self.scalar != 1.0:
            arrays[0] = arrays[0] * np.asarray(self.scalar, dtype=arrays[0].dtype)
        size_dict = {i: self.sizes[i] for i in self.where}
        return Network(inputs, self.output, size_dict, arrays, meta)


def _collapse_repeats(inds: tuple[str, ...], arr: np.ndarray):
    """A tensor with an index repeated: its diagonal over the repeats, each index once."""
    names = {ix: n for n, ix in enumerate(dict.fromkeys(inds))}
    out = tuple(names)
    return out, np.einsum(arr, [names[i] for i in inds], list(range(len(out))))


def _pair(ia, xa, ib, xb, out) -> np.ndarray:
    """The contraction of two tensors onto the indices ``out`` (hyper-indices kept)."""
    names = {ix: n for n, ix in enumerate(dict.fromkeys(ia + ib))}
    return np.einsum(xa, [names[i] for i in ia], xb, [names[i] for i in ib],
                     [names[i] for i in out], optimize=False)


def _join(parts, out) -> np.ndarray:
    """The contraction of several tensors ``(inds, array)`` onto the indices ``out``."""
    names = {ix: n for n, ix in enumerate(dict.fromkeys(i for inds, _ in parts for i in inds))}
    operands = []
    for inds, arr in parts:
        operands += [arr, [names[i] for i in inds]]
    return np.einsum(*operands, [names[i] for i in out], optimize=len(parts) > 2)


def _diagonal_pair(inds, arr, atol, anti, protected, flipped):
    """``(keep, drop)``: two indices of equal size that ``arr`` is (anti-)diagonal in, with
    ``drop`` free to be renamed (diagonal) or reversed (anti-diagonal); ``None`` if none."""
    if arr.ndim < 2 or arr.size > MAX_SCAN_SIZE:
        return None
    nonzero = np.abs(arr) > atol
    total = int(np.count_nonzero(nonzero))
    for a, b in itertools.combinations(range(arr.ndim), 2):
        d = arr.shape[a]
        if d != arr.shape[b] or d < 2 or inds[a] == inds[b]:
            continue
        i, j = inds[a], inds[b]
        if j in protected or (anti and j in flipped):
            if i in protected or (anti and i in flipped):
                continue
            i, j = j, i
        # all nonzero entries on the (anti-)diagonal of axes a, b
        on = np.diagonal(np.flip(nonzero, axis=b) if anti else nonzero, axis1=a, axis2=b)
        if int(np.count_nonzero(on)) == total:
            return i, j
    return None


def _bipartitions(n: int):
    """Each split of ``range(n)`` into two non-empty sides once (the side without 0)."""
    for bits in range(1, 1 << (n - 1)):
        yield tuple(a for a in range(1, n) if bits >> (a - 1) & 1)


def reduce_network(net: Network, seq: str = "ADCRS", atol: float = 1e-12) -> Network:
    """``net`` after the ``seq`` passes (module docstring), repeated until nothing changes."""
    work = _Work(net, atol)
    passes = {"A": lambda: work.diagonals(anti=True), "D": work.diagonals,
              "C": work.columns, "R": work.rank, "S": work.splits, "E": work.eliminate}
    # size-1 indices carry nothing: fixed at their one value first
    for ix in [i for i, s in work.sizes.items() if s == 1 and i not in work.protected]:
        work.fix(ix, 0)
    previous = None
    while work.shape() != previous and not work.zero:
        previous = work.shape()
        for letter in seq:
            passes[letter]()
            if work.zero:
                break
    return work.network(dict(net.meta))


__all__ = ["LETTERS", "reduce_network"]
