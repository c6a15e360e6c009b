"""Contraction paths from cotengra's hyper-optimiser, cached by network structure.

The cache key is the network's canonical structure (indices renamed by first
appearance) plus the search options, so a structurally identical query —
the same circuit with another bitstring, say — skips the search. Paths are
kept in memory and on disk (``$QSIMDIST_CACHE_DIR``, default
``~/.cache/qsimdist/paths``) as JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._fileio import atomic_write_text
from ..errors import InvalidInputError, PlanError
from ..network import Network

_MEMORY_CACHE: dict[str, dict] = {}


@dataclass(frozen=True)
class PathOptions:
    """How hard to search for a contraction path.

    Attributes:
        max_repeats: trials of the hyper-optimiser (``None``: by network size,
            8 up to 100 tensors, 32 above).
        max_time: wall-clock budget in seconds (``None``: trials only).
        methods: cotengra path methods (``None``: cotengra's default, greedy + kahypar).
        minimize: cotengra objective (``flops``, ``size``, ``write``, ``combo``).
        parallel: let cotengra use a process pool (``True`` or a number of processes).
        cache: read and write the structure-keyed path cache.
    """

    max_repeats: int | None = None
    max_time: float | None = None
    methods: tuple[str, ...] | None = None
    minimize: str = "flops"
    parallel: bool | int = False
    cache: bool = True
    reconfigure: bool = True

    def __post_init__(self) -> None:
        if self.max_repeats is not None and self.max_repeats < 1:
            raise InvalidInputError(f"max_repeats must be >= 1, got {self.max_repeats}")
        if self.max_time is not None and self.max_time <= 0:
            raise InvalidInputError(f"max_time must be positive seconds, got {self.max_time}")
        valid = ("flops", "size", "write", "combo", "limit")
        if self.minimize.split("-")[0] not in valid:
            raise InvalidInputError(f"unknown objective {self.minimize!r}; valid: {', '.join(valid)}")

    def key(self) -> dict:
        d = asdict(self)
        d.pop("cache")
        d.pop("parallel")
        return d


@dataclass
class PathResult:
    """An SSA path (cotengra convention) and the indices to slice."""

    ssa_path: list[tuple[int, int]]
    sliced: list[str] = field(default_factory=list)
    from_cache: bool = False


def _slice(tree, target_size: int, max_repeats: int = 16):
    """Slice ``tree`` (never output indices) until no intermediate exceeds ``target_size``."""
    try:
        return tree.slice(
            target_size=target_size, allow_outer=False, max_repeats=max_repeats, seed=0
        )
    except RuntimeError as exc:  # cotengra: "Ran out of valid indices to slice."
        raise PlanError(
            f"cannot slice this network below {target_size} elements per intermediate ({exc})"
        ) from None


def cache_dir() -> Path:
    return Path(os.environ.get("QSIMDIST_CACHE_DIR", Path.home() / ".cache" / "qsimdist")) / "paths"


def _symbolic(net: Network):
    """The network with indices as single-character symbols (what every cotengra optimiser takes)."""
    from cotengra import get_symbol

    inputs, output, sizes = net.canonical()
    sym = [get_symbol(i) for i in range(len(sizes))]
    return (
        [tuple(sym[i] for i in t) for t in inputs],
        tuple(sym[i] for i in output),
        {sym[i]: s for i, s in enumerate(sizes)},
        sym,
    )


def _names_by_canonical(net: Network) -> list[str]:
    names: dict[str, int] = {}
    for term in (*net.inputs, net.output):
        for i in term:
            names.setdefault(i, len(names))
    return sorted(names, key=names.__getitem__)


def sliced_names(net: Network, tree) -> list[str]:
    """The network's names of the indices a cotengra tree over ``_symbolic(net)`` slices."""
    names = _names_by_canonical(net)
    _, _, _, sym = _symbolic(net)
    sym_index = {s: i for i, s in enumerate(sym)}
    return [names[sym_index[s]] for s in tree.sliced_inds]


def find_path(
    net: Network,
    options: PathOptions | None = None,
    target_size: int | None = None,
    progbar: bool = False,
) -> PathResult:
    """Search (or recall) a path for ``net``; slice so no intermediate exceeds ``target_size`` elements."""
    import cotengra as ctg

    options = options or PathOptions()
    names = _names_by_canonical(net)
    key_blob = json.dumps(
        [net.canonical(), options.key(), target_size], separators=(",", ":"), default=list
    )
    key = hashlib.sha256(key_blob.encode()).hexdigest()
    cached = _MEMORY_CACHE.get(key) if options.cache else None
    cfile = cache_dir() / f"{key}.json"
    if cached is None and options.cache and cfile.exists():
        try:
            cached = json.loads(cfile.read_text())
            _MEMORY_CACHE[key] = cached
        except (OSError, json.JSONDecodeError):
            cached = None  # a damaged cache entry is simply searched again
    if cached is not None:
        return PathResult(
            [tuple(p) for p in cached["ssa_path"]],
            [names[i] for i in cached["sliced"]],
            from_cache=True,
        )

    inputs, output, size_dict, sym = _symbolic(net)
    n = len(inputs)
    if n == 1:
        ssa_path: list[tuple[int, int]] = []
        sliced_sym: list[str] = []
    else:
        if n <= 12:
            tree = ctg.ContractionTree.from_path(
                inputs, output, size_dict, path=ctg.array_contract_path(
                    inputs, output, size_dict=size_dict, optimize="optimal"
                )
            )
        else:
            repeats = options.max_repeats or (8 if n <= 100 else 32)
            kwargs = dict(
                max_repeats=repeats,
                max_time=options.max_time,
                minimize=options.minimize,
                parallel=options.parallel,
                progbar=progbar,
                on_trial_error="ignore",
            )
            if options.methods:
                kwargs["methods"] = list(options.methods)
            if not options.reconfigure:
                kwargs["reconf_opts"] = None
            if target_size is not None:
                kwargs["slicing_reconf_opts"] = {"target_size": target_size, "allow_outer": False}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt = ctg.HyperOptimizer(**kwargs)
                try:
                    tree = opt.search(inputs, output, size_dict)
                except KeyError:  # every trial failed (e.g. an unreachable slicing target)
                    raise PlanError(
                        f"no contraction path found within {repeats} trials"
                        + (f" at {target_size} elements per intermediate" if target_size else "")
                    ) from None
        if target_size is not None and tree.max_size() > target_size:
            tree = _slice(tree, target_size)
        ssa_path = [tuple(int(x) for x in p) for p in tree.get_ssa_path()]
        sliced_sym = list(tree.sliced_inds)
    sym_index = {s: i for i, s in enumerate(sym)}
    entry = {"ssa_path": ssa_path, "sliced": [sym_index[s] for s in sliced_sym]}
    if options.cache:
        _MEMORY_CACHE[key] = entry
        try:
            atomic_write_text(cfile, json.dumps(entry))
        except OSError:
            pass  # an unwritable cache folder only costs a repeated search
    return PathResult(ssa_path, [names[i] for i in entry["sliced"]])


def slice_path(net: Network, ssa_path, target_size: int, max_repeats: int = 16) -> list[str]:
    """Indices to slice along a fixed path so no intermediate exceeds ``target_size`` elements.

    ``max_repeats`` is the number of randomised slicing trials cotengra makes.
    """
    import cotengra as ctg

    inputs, output, size_dict, sym = _symbolic(net)
    if len(inputs) == 1:
        return []
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa_path)
    if tree.max_size() > target_size:
        tree = _slice(tree, target_size, max_repeats)
    return sliced_names(net, tree)


class _SliceCosts:
    """Per-slice sizes and total cost of a fixed path for any set of sliced indices.

    Sizes are kept in log2 over a membership matrix (nodes x indices), so
    trying to restore or add each candidate index is a few vector operations
    rather than a copy of the contraction tree.
    """

    def __init__(self, net: Network, ssa_path) -> None:
        from .lifetime import _death_steps

        legs, _, _ = _death_steps(net.inputs, net.output, ssa_path, set())
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
    costs = _SliceCosts(net, ssa_path)
    width, _ = costs.evaluate(set(prefer))
    target_log2 = math.log2(target_size)
    if width <= target_log2 + 1e-9:
        return costs.restore(prefer, target_log2)
    inputs, output, size_dict, sym = _symbolic(net)
    names = _names_by_canonical(net)
    to_sym = {names[j]: s for j, s in enumerate(sym)}
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa_path)
    for i in prefer:
        tree.remove_ind_(to_sym[i])
    tree = _slice(tree, target_size, max_repeats)
    # cotengra's slicer measures width its own way on hyper-indices: finish by ours
    return costs.extend(sliced_names(net, tree), target_log2, set(net.output))
