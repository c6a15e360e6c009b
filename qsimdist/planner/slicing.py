"""Slicing a contraction path: which indices to sum outside the contraction so that no
intermediate exceeds a size, on cotengra's trees (:func:`slice_tree`, :func:`slice_path`)
and on a fixed path priced for any set of sliced indices (:class:`SliceCosts`,
:func:`slice_from`)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import PlanError
from ..network import Network
from .lifetime import death_steps


def slice_tree(tree, target_size: int, max_repeats: int = 16):
    """Slice ``tree`` (never output indices) until no intermediate exceeds ``target_size``."""
    try:
        return tree.slice(
            target_size=target_size, allow_outer=False, max_repeats=max_repeats, seed=0
        )
    except RuntimeError as exc:  # cotengra: "Ran out of valid indices to slice."
        raise PlanError(
            f"cannot slice this network below {target_size} elements per intermediate ({exc})"
        ) from None


def sliced_names(net: Network, tree) -> list[str]:
    """The network's names of the indices a cotengra tree over ``net.symbolic()`` slices."""
    names = net.canonical_names()
    _, _, _, sym = net.symbolic()
    sym_index = {s: i for i, s in enumerate(sym)}
    return [names[sym_index[s]] for s in tree.sliced_inds]


def slice_path(net: Network, ssa_path, target_size: int, max_repeats: int = 16) -> list[str]:
    """Indices to slice along a fixed path so no intermediate exceeds ``target_size`` elements.

    ``max_repeats`` is the number of randomised slicing trials cotengra makes.
    """
    import cotengra as ctg

    inputs, output, size_dict, sym = net.symbolic()
    if len(inputs) == 1:
        return []
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa_path)
    if tree.max_size() > target_size:
        tree = slice_tree(tree, target_size, max_repeats)
    return sliced_names(net, tree)


class SliceCosts:
    """Per-slice sizes and total cost of a fixed path for any set of sliced indices.

    Sizes are kept in log2 over a membership matrix (nodes x indices), so
    trying to restore or add each candidate index is a few vector operations
    rather than a copy of the contraction tree.
    """

    def __init__(self, net: Network, ssa_path) -> None:
        legs, _, _ = death_steps(net.inputs, net.output, ssa_path, set())
        self.names = sorted(net.size_dict)
        col = {i: j for j, i in enumerate(self.names)}
        self.w = np.log2([net.size_dict[i] for i in self.names])
        nodes = np.zeros((len(legs), len(self.names)), dtype=bool)
        for r, term in enumerate(legs):
            nodes[r, [col[i] for i in term]] = True
        # a contraction touches the union of its operands' legs
        cons = np.zeros((len(ssa_path), len(self.names)), dtype=bool)
        for s, (a, b) in enumerate(ssa_path):
            cons[s] = nodes[a] | nodes[b]
        # every tensor counts towards the width (leaves too, as in cotengra's max_size)
        self.nodes = nodes.astype(np.float64)
        self.cons = cons.astype(np.float64)
        self.col = col

    def _keep(self, sliced) -> object:
        keep = self.w.copy()
        keep[[self.col[i] for i in sliced]] = 0.0
        return keep

    def evaluate(self, sliced: set[str]) -> tuple[float, float]:
        """(log2 largest intermediate per slice, log2 total multiply-adds over all slices)."""
        keep = self._keep(sliced)
        width = float((self.nodes @ keep).max()) if len(self.nodes) else 0.0
        per = self.cons @ keep
        top = per.max() if len(per) else 0.0
        total = top + np.log2(np.exp2(per - top).sum()) + float((self.w - keep).sum())
        return width, float(total)

    def restore(self, sliced: list[str], target_log2: float) -> list[str]:
        """Greedily un-slice indices (cheapest total first) while every intermediate fits.

        Each round scores every candidate at once: restoring index ``c`` adds
        ``w_c`` to the log2 size of every tensor and contraction holding it
        and divides the number of slices by ``2^w_c``.
        """
        current = list(sliced)
        while current:
            keep = self._keep(current)
            cols = [self.col[i] for i in current]
            wc = self.w[cols]
            sizes = self.nodes @ keep
            widths = (sizes[:, None] + self.nodes[:, cols] * wc).max(axis=0)
            per = self.cons @ keep
            e = np.exp2(per - per.max())
            grown = e.sum() + (e @ self.cons[:, cols]) * (np.exp2(wc) - 1.0)
            totals = np.log2(grown) - wc  # up to a constant shared by all candidates
            totals[widths > target_log2 + 1e-9] = np.inf
            j = int(np.argmin(totals))
            if not np.isfinite(totals[j]):
                break
            current.pop(j)
        return current

    def extend(self, sliced: list[str], target_log2: float, forbidden: set[str]) -> list[str]:
        """Greedily slice more indices (cheapest total first) until every tensor fits."""
        current = list(sliced)
        while True:
            sizes = self.nodes @ self._keep(current)
            if sizes.max() <= target_log2 + 1e-9:
                return current
            widest = self.nodes[np.argmax(sizes)]
            best = None
            for j in np.flatnonzero(widest):
                i = self.names[j]
                if i in forbidden or i in current:
                    continue
                _, total = self.evaluate(set(current) | {i})
                over = int((sizes - self.nodes[:, j] * self.w[j] > target_log2 + 1e-9).sum())
                if best is None or (over, total) < best[:2]:
                    best = (over, total, i)
            if best is None:
                raise PlanError(
                    f"cannot slice this network below 2^{target_log2:.1f} elements per tensor"
                )
            current.append(best[2])


def slice_from(net: Network, ssa_path, target_size: int, prefer=(), max_repeats: int = 16
               ) -> list[str]:
    """Indices to slice along ``ssa_path`` so no intermediate exceeds ``target_size`` elements.

    ``prefer`` is a slicing found together with the path (a slicing-aware
    search's): slicing-aware trees are cheap only when sliced over those
    indices, and re-slicing them from scratch can cost orders of magnitude.
    If the preferred set already fits, indices of it are restored greedily
    (smallest total cost first) while everything still fits; if it does not,
    cotengra's slicer adds indices to it. Without ``prefer`` this is
    :func:`slice_path`.
    """
    import cotengra as ctg

    prefer = [i for i in prefer if i in net.size_dict and i not in set(net.output)]
    if not prefer:
        return slice_path(net, ssa_path, target_size, max_repeats)
    slice_costs = SliceCosts(net, ssa_path)
    width, _ = slice_costs.evaluate(set(prefer))
    target_log2 = math.log2(target_size)
    if width <= target_log2 + 1e-9:
        return slice_costs.restore(prefer, target_log2)
    inputs, output, size_dict, sym = net.symbolic()
    names = net.canonical_names()
    to_sym = {names[j]: s for j, s in enumerate(sym)}
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa_path)
    for i in prefer:
        tree.remove_ind_(to_sym[i])
    tree = slice_tree(tree, target_size, max_repeats)
    # cotengra's slicer measures width its own way on hyper-indices: finish by ours
    return slice_costs.extend(sliced_names(net, tree), target_log2, set(net.output))
