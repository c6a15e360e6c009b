"""Contraction trees as data: save a path and its slicing, read one back for a network.

A qsimdist tree file is JSON::

    {"schema": "qsimdist-tree", "version": 1,
     "network": {"structure_hash": ..., "n_tensors": ..., "n_indices": ...,
                 "simplify": {"engine": "qsimdist", "sequence": "ADCRS"}},
     "ssa_path": [[i, j], ...], "sliced": [k, ...], "meta": {...}}

``sliced`` holds canonical index positions (see :meth:`Network.canonical`),
so a tree applies to every network of the same structure whatever its index
names. ``network.simplify`` (optional, written since trees record it) says how
the circuit's network was simplified (:func:`qsimdist.planner.simplify.simplify`'s
``engine`` and ``seq``), so a planner can rebuild the same network; files
without it (older ones) read as before, and readers that do not know the key
ignore it. :func:`load_tree` also reads, for a given network:

* a saved qsimdist plan (its path and slicing);
* an SSA path as a JSON list of pairs, or ``{"ssa_path": [...]}``;
* a linear (opt_einsum-style) path as ``{"path": [...]}``;
* a pickled cotengra ``ContractionTree`` (``.pkl`` / ``.pickle``; a pickle runs
  code when read, so name only files you made or trust), sliced or not, whose
  inputs must be the network's (as :meth:`Network.symbolic` gives them).

Every mismatch is one :class:`~qsimdist.errors.PlanFormatError` line.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PlanFormatError
from ..network import Network

TREE_SCHEMA = "qsimdist-tree"
TREE_VERSION = 1
PICKLE_SUFFIXES = (".pkl", ".pickle")
#: the simplification engines a tree file may record (``simplify(..., engine=...)``)
SIMPLIFY_ENGINES = ("qsimdist", "quimb")


class TreeNetworkError(PlanFormatError):
    """A tree was made for another network than the one it is applied to."""


@dataclass(frozen=True)
class Simplification:
    """How a circuit's network was simplified before a tree was made for it."""

    engine: str  # "qsimdist" (its own passes) or "quimb" (quimb's full_simplify)
    sequence: str  # the simplification letters

    def to_dict(self) -> dict:
        return {"engine": self.engine, "sequence": self.sequence}

    @classmethod
    def from_dict(cls, d: object, source: str) -> Simplification:
        if not isinstance(d, dict):
            raise PlanFormatError(f"{source}: 'network.simplify' must be an object")
        engine, seq = d.get("engine"), d.get("sequence")
        if engine not in SIMPLIFY_ENGINES:
            raise PlanFormatError(
                f"{source}: 'network.simplify.engine' is {str(engine)[:40]!r}; valid: "
                f"{', '.join(SIMPLIFY_ENGINES)}")
        if not isinstance(seq, str):
            raise PlanFormatError(f"{source}: 'network.simplify.sequence' must be a string of "
                                  "simplification letters (e.g. 'ADCRS')")
        return cls(engine, seq)


@dataclass
class Tree:
    """A contraction path for one network and the indices sliced along it."""

    ssa_path: list[tuple[int, int]]
    sliced: list[str]  # the network's own index names
    meta: dict = field(default_factory=dict)
    #: how the network was simplified, where known (a tree file's ``network.simplify``)
    simplification: Simplification | None = None


def _canonical_position(net: Network) -> dict:
    return {name: k for k, name in enumerate(net.canonical_names())}


def tree_to_dict(net: Network, tree: Tree) -> dict:
    pos = _canonical_position(net)
    unknown = [i for i in tree.sliced if i not in pos]
    if unknown:
        raise PlanFormatError(f"sliced indices {unknown[:3]} are not in the network")
    network = {"structure_hash": net.structure_hash(), "n_tensors": net.num_tensors,
               "n_indices": len(pos)}
    if tree.simplification is not None:
        network["simplify"] = tree.simplification.to_dict()
    return {
        "schema": TREE_SCHEMA,
        "version": TREE_VERSION,
        "network": network,
        "ssa_path": [list(map(int, p)) for p in tree.ssa_path],
        "sliced": sorted(pos[i] for i in tree.sliced),
        "meta": tree.meta,
    }


def save_tree(path: str | os.PathLike, net: Network, tree: Tree) -> Path:
    """Write ``tree`` for ``net`` as a qsimdist tree file, atomically."""
    from .._fileio import atomic_write_text

    return atomic_write_text(path, json.dumps(tree_to_dict(net, tree)))


def _check_ssa(path: object, n: int, source: str) -> list[tuple[int, int]]:
    if not isinstance(path, list):
        raise PlanFormatError(f"{source}: the path is {type(path).__name__}, not a list of pairs")
    if len(path) != max(n - 1, 0):
        raise PlanFormatError(
            f"{source}: the path has {len(path)} steps; this network of {n} tensors needs "
            f"{max(n - 1, 0)} (one per pairwise contraction)")
    out, seen = [], set()
    for k, pair in enumerate(path):
        ok = (isinstance(pair, (list, tuple)) and len(pair) == 2
              and all(isinstance(x, int) and not isinstance(x, bool) for x in pair))
        if not ok or not all(0 <= x < n + k for x in pair) or pair[0] == pair[1] \
                or pair[0] in seen or pair[1] in seen:
            raise PlanFormatError(
                f"{source}: path step {k} is {pair!r}; an SSA step names two distinct nodes "
                f"not used before, among 0..{n + k - 1}")
        seen.update(pair)
        out.append((int(pair[0]), int(pair[1])))
    return out


def linear_to_ssa(path: object, n: int, source: str) -> list[tuple[int, int]]:
    """An opt_einsum-style linear path (positions in the shrinking list) as SSA pairs."""
    if not isinstance(path, list):
        raise PlanFormatError(f"{source}: the path is {type(path).__name__}, not a list")
    alive = list(range(n))
    ssa = []
    for k, step in enumerate(path):
        ok = (isinstance(step, (list, tuple)) and len(step) == 2
              and all(isinstance(x, int) and not isinstance(x, bool) for x in step))
        if not ok or len(set(step)) != 2 or not all(0 <= x < len(alive) for x in step):
            raise PlanFormatError(
                f"{source}: linear path step {k} is {step!r}; a step names two distinct "
                f"positions among the {len(alive)} tensors left (0..{len(alive) - 1})")
        i, j = sorted(step)
        ssa.append((alive[i], alive[j]))
        del alive[j], alive[i]
        alive.append(n + k)
    return _check_ssa(ssa, n, source)


def _sliced_from_positions(net: Network, positions: object, source: str) -> list[str]:
    names = net.canonical_names()
    if not isinstance(positions, list) or not all(
            isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(names)
            for k in positions):
        raise PlanFormatError(
            f"{source}: 'sliced' must list index positions 0..{len(names) - 1}")
    out = set(net.output)
    sliced = [names[k] for k in positions]
    if any(i in out for i in sliced):
        raise PlanFormatError(f"{source}: an output index is sliced; only inner indices can be")
    return sliced


def _from_qsimdist_tree(net: Network, d: dict, source: str) -> Tree:
    if d.get("version") != TREE_VERSION:
        raise PlanFormatError(
            f"{source}: tree version {d.get('version')!r}; this qsimdist reads {TREE_VERSION}")
    info = d.get("network")
    want = net.structure_hash()
    if not isinstance(info, dict) or info.get("structure_hash") != want:
        got = info.get("structure_hash") if isinstance(info, dict) else None
        raise TreeNetworkError(
            f"{source}: the tree was made for another network (structure hash "
            f"{str(got)[:12]}..., this network's {want[:12]}...); plan with the same "
            "circuit, bitstring pattern, --order and simplification")
    meta = d.get("meta", {})
    if not isinstance(meta, dict):
        raise PlanFormatError(f"{source}: 'meta' must be an object")
    simplification = _recorded_simplification(d, source)
    return Tree(_check_ssa(d.get("ssa_path"), net.num_tensors, source),
                _sliced_from_positions(net, d.get("sliced", []), source), meta, simplification)


def _recorded_simplification(d: dict, source: str) -> Simplification | None:
    info = d.get("network")
    if not isinstance(info, dict) or info.get("simplify") is None:
        return None
    return Simplification.from_dict(info["simplify"], source)


def _from_saved_plan(net: Network, d: dict, source: str) -> Tree:
    from .plan import Plan

    saved = Plan.from_dict(d, source)
    if saved.network.canonical() != net.canonical():
        raise PlanFormatError(
            f"{source}: the saved plan is for another network ({saved.network.num_tensors} "
            f"tensors; this one has {net.num_tensors}); plan with the same circuit, pattern, "
            "--order and simplification")
    theirs = saved.network.canonical_names()
    ours = net.canonical_names()
    rename = dict(zip(theirs, ours))
    return Tree([tuple(p) for p in saved.path], [rename[i] for i in saved.sliced],
                {"from": "qsimdist plan", "source": source})


def _canonical_of(inputs, output, size_dict) -> tuple:
    names: dict = {}
    for term in (*inputs, tuple(output)):
        for i in term:
            names.setdefault(i, len(names))
    order = sorted(names, key=names.__getitem__)
    return (tuple(tuple(names[i] for i in t) for t in inputs),
            tuple(names[i] for i in output),
            tuple(int(size_dict[i]) for i in order)), order


def from_cotengra(net: Network, ctree, source: str = "cotengra tree") -> Tree:
    """A cotengra ``ContractionTree`` over ``net``'s tensors as a :class:`Tree`."""
    try:
        inputs = [tuple(t) for t in ctree.inputs]
        output = tuple(ctree.output)
        sizes = dict(ctree.size_dict)
        sliced_syms = list(getattr(ctree, "sliced_inds", {}) or {})
        ssa = [tuple(map(int, p)) for p in ctree.get_ssa_path()]
    except Exception as exc:  # noqa: BLE001 - any object that is not a usable tree
        raise PlanFormatError(f"{source}: not a cotengra ContractionTree ({exc})") from None
    canon, order = _canonical_of(inputs, output, sizes)
    if canon != net.canonical():
        raise PlanFormatError(
            f"{source}: the tree's inputs are not this network's ({len(inputs)} tensors, "
            f"this one has {net.num_tensors}); build it from Network.symbolic() of the same "
            "circuit, pattern, --order and simplification")
    ours = net.canonical_names()
    rename = {sym: ours[k] for k, sym in enumerate(order)}
    missing = [s for s in sliced_syms if s not in rename]
    if missing:
        raise PlanFormatError(f"{source}: sliced indices {missing[:3]} are not in the network")
    # (a sliced cotengra tree keeps its inputs and size_dict whole, so the check above
    # compares full extents)
    return Tree(_check_ssa([list(p) for p in ssa], net.num_tensors, source),
                [rename[s] for s in sliced_syms], {"from": "cotengra ContractionTree"})


def to_cotengra(net: Network, tree: Tree):
    """``tree`` as a cotengra ``ContractionTree`` over :meth:`Network.symbolic`, sliced."""
    import cotengra as ctg

    inputs, output, size_dict, sym = net.symbolic()
    pos = _canonical_position(net)
    ctree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=tree.ssa_path)
    for i in tree.sliced:
        ctree.remove_ind_(sym[pos[i]])
    return ctree


@dataclass
class TreeFile:
    """A tree or path file read (once), not yet applied to a network.

    :attr:`structure_hash` and :attr:`simplification` say which network a
    qsimdist tree file was made for (None for the other formats, which do not
    record it), so a caller can build that network before :meth:`tree_for`.
    """

    source: str
    data: object  # the parsed JSON, or the unpickled object of a .pkl file
    pickled: bool = False

    def _own(self) -> dict | None:
        d = self.data
        return d if isinstance(d, dict) and d.get("schema") == TREE_SCHEMA else None

    @property
    def structure_hash(self) -> str | None:
        """The structure hash of the network a qsimdist tree file was made for."""
        d = self._own()
        info = d.get("network") if d is not None else None
        got = info.get("structure_hash") if isinstance(info, dict) else None
        return got if isinstance(got, str) else None

    @property
    def simplification(self) -> Simplification | None:
        """How that network was simplified, where the file records it."""
        d = self._own()
        return _recorded_simplification(d, self.source) if d is not None else None

    def tree_for(self, net: Network) -> Tree:
        """The tree of this file for ``net`` (one :class:`PlanFormatError` line if it does
        not fit)."""
        source, data = self.source, self.data
        if self.pickled:
            return from_cotengra(net, data, source)
        if isinstance(data, list):
            return Tree(_check_ssa(data, net.num_tensors, source), [], {"from": "SSA path"})
        if not isinstance(data, dict):
            raise PlanFormatError(f"{source}: expected a tree object or a list of SSA pairs")
        schema = data.get("schema")
        if schema == TREE_SCHEMA:
            return _from_qsimdist_tree(net, data, source)
        if schema is not None:  # a saved plan (the plan loader names what is wrong)
            return _from_saved_plan(net, data, source)
        if "ssa_path" in data:
            return Tree(_check_ssa(data["ssa_path"], net.num_tensors, source), [],
                        {"from": "SSA path"})
        if "path" in data:
            return Tree(linear_to_ssa(data["path"], net.num_tensors, source), [],
                        {"from": "linear path"})
        raise PlanFormatError(
            f"{source}: not a tree: expected a qsimdist tree or plan, a list of SSA pairs, "
            "{\"ssa_path\": [...]} or {\"path\": [...]}")


def read_tree_file(path: str | os.PathLike) -> TreeFile:
    """Read a tree or path file (see the module's docstring) without a network."""
    from .._fileio import read_regular_bytes
    from ..network.io import parse_json_text

    path = Path(path)
    source = str(path)
    if not os.path.lexists(path):
        raise PlanFormatError(f"no such tree file: {path}")
    raw = read_regular_bytes(path, "tree", PlanFormatError)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        try:
            obj = pickle.loads(raw)  # noqa: S301 - documented: only files the user trusts
        except Exception as exc:  # noqa: BLE001 - any unreadable pickle
            raise PlanFormatError(f"{source}: not a readable pickle ({type(exc).__name__}: "
                                  f"{exc})") from None
        return TreeFile(source, obj, pickled=True)
    return TreeFile(source, parse_json_text(raw, source, "the tree", PlanFormatError))


def load_tree(path: str | os.PathLike, net: Network) -> Tree:
    """Read a tree or path file (see the module's docstring) for ``net``."""
    return read_tree_file(path).tree_for(net)
