"""Contraction paths from cotengra's hyper-optimiser, cached by network structure.

The cache key is the network's canonical structure (indices renamed by first
appearance) plus the search options, so a structurally identical query —
the same circuit with another bitstring, say — skips the search. Paths are
kept in memory and on disk as JSON, in ``paths/`` of the qsimdist cache folder
(``$QSIMDIST_CACHE_DIR``, else the user cache folder of :mod:`platformdirs`:
``$XDG_CACHE_HOME/qsimdist``, by default ``~/.cache/qsimdist``, on Linux). The
disk entries are bounded in total (``$QSIMDIST_CACHE_MAX_BYTES``, default
256 MiB): a write that takes them past it removes the least recently used
(last read or written) ones. Entries
read from disk are checked against the network (a damaged or stale entry is a
miss, warned about once and rewritten); a cache folder that cannot be used is
warned about once and the run goes on without it. ``qsimdist cache info`` and
``qsimdist cache clear`` report on and empty it.

Searches are seeded (:attr:`PathOptions.seed`), so the same network, options
and library versions give the same path, hence the same bits. A network that
is cheap to contract gets cotengra's greedy path with no hyper-optimisation,
and the default search never plans to spend more time than the greedy
contraction would take (see :func:`_default_repeats`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import re
import stat
import time
import warnings
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from .._fileio import atomic_write_text, read_regular_bytes
from ..config import parse_memory
from ..errors import InvalidInputError, PlanError
from ..hardware import costs
from ..network import Network
from .lifetime import death_steps
from .simplify import CHEAP_COST, CHEAP_SIZE

_MEMORY_CACHE: dict[str, dict] = {}
#: cache problems already warned about in this process (one warning each)
_WARNED: set[str] = set()
#: largest path cache entry read (a path for a million tensors is ~20 MB)
MAX_ENTRY_BYTES = 64 << 20

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------ the disk cache
#: total bytes of disk path entries kept when ``$QSIMDIST_CACHE_MAX_BYTES`` is unset
DEFAULT_CACHE_MAX_BYTES = 256 << 20
#: names of the files qsimdist writes in the cache: entries (a SHA-256 key), the temporary
#: names of their atomic writes, and the sampler's chain records (``chains/``)
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json")
_TEMP_NAME = re.compile(r"\.[0-9a-f]{64}\.json\..+\.tmp")
_CHAIN_NAME = re.compile(r"[0-9a-f]{64}")
#: an atomic write's temporary file this old (seconds) was left by a process that died
STALE_TEMP_SECONDS = 3600.0
#: bytes of the entries in each cache folder as this process last counted them, plus what
#: it wrote since: the folder is listed again only when that passes the bound
_DISK_BYTES: dict[str, int] = {}


def cache_root() -> Path:
    """The qsimdist cache folder: ``$QSIMDIST_CACHE_DIR``, else the platform's user cache
    folder for qsimdist (``$XDG_CACHE_HOME/qsimdist`` or ``~/.cache/qsimdist`` on Linux)."""
    env = os.environ.get("QSIMDIST_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("qsimdist", appauthor=False))


def cache_dir() -> Path:
    """The folder of the disk path cache's entries."""
    return cache_root() / "paths"


def cache_max_bytes() -> int | None:
    """The disk path cache's bound in bytes: ``$QSIMDIST_CACHE_MAX_BYTES`` (a size such as
    ``64MiB``; ``0``: write nothing to disk; ``none``: unbounded), else 256 MiB."""
    value = os.environ.get("QSIMDIST_CACHE_MAX_BYTES", "").strip()
    if not value:
        return DEFAULT_CACHE_MAX_BYTES
    if value.lower() in ("none", "unlimited"):
        return None
    if value == "0":
        return 0
    try:
        return parse_memory(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"QSIMDIST_CACHE_MAX_BYTES: {exc}; or 0 (no disk cache) or "
                                "none (unbounded)") from None


def _listing(folder: Path, pattern: re.Pattern) -> list[tuple[Path, int, float]]:
    """(path, bytes, mtime) of the regular files in ``folder`` whose names match ``pattern``."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:  # no folder yet, or not readable
        return found
    for name in names:
        if not pattern.fullmatch(name):
            continue
        path = folder / name
        try:
            st = path.lstat()
        except OSError:  # removed by another process meanwhile
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((path, st.st_size, st.st_mtime))
    return found


def cache_entries() -> list[tuple[Path, int, float]]:
    """The disk path cache's entries as (path, bytes, last use), least recently used first."""
    return sorted(_listing(cache_dir(), _ENTRY_NAME), key=lambda e: e[2])


def evict_entries(bound: int | None, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries until they total at most ``bound`` bytes.

    ``keep`` (the entry just written) goes last. Returns the files removed; one that
    another process removed first, or that cannot be removed, is skipped.
    """
    if bound is None:
        return []
    entries = cache_entries()
    total = sum(size for _, size, _ in entries)
    _DISK_BYTES[str(cache_dir())] = total
    entries.sort(key=lambda e: (e[0] == keep, e[2]))
    removed = []
    for path, size, _ in entries:
        if total <= bound:
            break
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.debug("cannot remove the path cache entry %s (%s)", path, exc)
            continue
        total -= size
        removed.append(path)
    _DISK_BYTES[str(cache_dir())] = total
    if removed:
        logger.info("path cache over its bound (%d bytes): removed %d least recently used "
                    "entr%s", bound, len(removed), "y" if len(removed) == 1 else "ies")
    return removed


def cache_info() -> dict:
    """Where the disk path cache is, its entries, their bytes and its bound."""
    entries = cache_entries()
    return {"folder": str(cache_dir()), "entries": len(entries),
            "bytes": sum(size for _, size, _ in entries), "max_bytes": cache_max_bytes()}


def clear_cache() -> dict:
    """Remove qsimdist's files from its cache folder (path entries, the temporary files of
    writes that died, the sampler's chain records) and empty the in-memory cache.

    Nothing else in the folder is touched. Returns the folder, the entries removed
    and their bytes, and the other files removed.
    """
    _MEMORY_CACHE.clear()
    _DISK_BYTES.clear()
    folder = cache_dir()
    now = time.time()
    entries = _listing(folder, _ENTRY_NAME)
    others = [e for e in _listing(folder, _TEMP_NAME) if now - e[2] > STALE_TEMP_SECONDS]
    others += _listing(cache_root() / "chains", _CHAIN_NAME)
    removed: list[tuple[Path, int, float]] = []
    for entry in entries + others:
        try:
            entry[0].unlink()
        except FileNotFoundError:
            continue
        removed.append(entry)
    for sub in (folder, cache_root() / "chains"):
        try:
            sub.rmdir()  # only when nothing else is left in it
        except OSError:
            pass
    gone_entries = [e for e in removed if _ENTRY_NAME.fullmatch(e[0].name)
                    and e[0].parent == folder]
    return {"folder": str(folder), "entries": len(gone_entries),
            "bytes": sum(size for _, size, _ in gone_entries),
            "other_files": len(removed) - len(gone_entries),
            "files": [str(e[0]) for e in removed]}

#: networks up to this many tensors get cotengra's exact 'optimal' path
OPTIMAL_MAX_TENSORS = 12
#: a greedy path needing at most this many multiply-adds, with no intermediate over
#: :data:`NO_SEARCH_SIZE` elements, is kept as it is whatever ``max_repeats`` says: its
#: contraction takes milliseconds, one hyper-optimiser trial on a 100-tensor network
#: about 0.1 s (the bound below which simplification is skipped too)
NO_SEARCH_COST = CHEAP_COST
NO_SEARCH_SIZE = CHEAP_SIZE


#: how a search with a slicing target slices (see :attr:`PathOptions.slicing`)
SLICING_MODES = ("after", "aware")


@dataclass(frozen=True)
class PathOptions:
    """How hard to search for a contraction path.

    Attributes:
        max_repeats: trials of the hyper-optimiser (``None``: by network size,
            8 up to 100 tensors, 32 above, fewer where the greedy contraction is
            too cheap to pay for them). A network whose greedy path needs at most
            :data:`NO_SEARCH_COST` multiply-adds keeps it: no trial is run.
        max_time: wall-clock budget in seconds (``None``: trials only).
        methods: cotengra path methods (``None``: cotengra's default, greedy + kahypar).
        minimize: cotengra objective (``flops``, ``size``, ``write``, ``combo``).
        parallel: let cotengra use a process pool (``True`` or a number of processes).
        cache: read and write the structure-keyed path cache.
        reconfigure: refine each trial by cotengra's subtree reconfiguration.
        seed: seed of every random choice in the search. With ``max_time=None``
            and ``parallel=False`` the same network, options and library versions
            give the same path.
        slicing: how a search with a slicing target (a memory limit the unsliced path
            does not fit) slices: ``"after"`` (default) searches unsliced trees and
            scores each round's best by its cost once sliced to the target, searching on
            while that sliced cost pays for it; ``"aware"`` lets cotengra slice and
            reconfigure inside every trial (slower trials: on the 127-qubit kicked-Ising
            networks it found trees 10^3 times costlier in the same time, on random
            circuits it can pay).
    """

    max_repeats: int | None = None
    max_time: float | None = None
    methods: tuple[str, ...] | None = None
    minimize: str = "flops"
    parallel: bool | int = False
    cache: bool = True
    reconfigure: bool = True
    seed: int = 0
    slicing: str = "after"

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InvalidInputError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.max_repeats is not None and self.max_repeats < 1:
            raise InvalidInputError(f"max_repeats must be >= 1, got {self.max_repeats}")
        if self.max_time is not None and self.max_time <= 0:
            raise InvalidInputError(f"max_time must be positive seconds, got {self.max_time}")
        if self.slicing not in SLICING_MODES:
            raise InvalidInputError(f"slicing must be one of {', '.join(SLICING_MODES)}, "
                                    f"got {self.slicing!r}")
        valid = ("flops", "size", "write", "combo", "limit")
        if self.minimize.split("-")[0] not in valid:
            raise InvalidInputError(
                f"unknown objective {self.minimize!r}; valid: {', '.join(valid)}"
            )

    @classmethod
    def coerce(cls, value=None, max_time: float | None = None,
               max_repeats: int | None = None) -> PathOptions:
        """The one way a door turns what it was given into path options: ``None`` (the
        defaults), a ``PathOptions`` or a dict of its fields, with ``max_time`` /
        ``max_repeats`` (where not ``None``) replacing the fields of those names.

        Raises InvalidInputError for an unknown key or another type, naming the valid keys.
        """
        valid = ", ".join(f.name for f in fields(cls))
        if value is None:
            opts = cls()
        elif isinstance(value, cls):
            opts = value
        elif isinstance(value, dict):
            unknown = sorted(set(value) - {f.name for f in fields(cls)}, key=str)
            if unknown:
                raise InvalidInputError(f"unknown path option {unknown[0]!r}; valid: {valid}")
            opts = cls(**value)
        else:
            raise InvalidInputError(f"path_options must be a PathOptions or a dict, got "
                                    f"{type(value).__name__}; valid: {valid}")
        if max_time is not None or max_repeats is not None:
            opts = replace(opts,
                           max_time=max_time if max_time is not None else opts.max_time,
                           max_repeats=(max_repeats if max_repeats is not None
                                        else opts.max_repeats))
        return opts

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


def sliced_names(net: Network, tree) -> list[str]:
    """The network's names of the indices a cotengra tree over ``net.symbolic()`` slices."""
    names = net.canonical_names()
    _, _, _, sym = net.symbolic()
    sym_index = {s: i for i, s in enumerate(sym)}
    return [names[sym_index[s]] for s in tree.sliced_inds]


def _warn_once(topic: str, message: str) -> None:
    """One warning line per ``topic`` and process."""
    if topic in _WARNED:
        return
    _WARNED.add(topic)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _valid_index(x, limit: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < limit


def check_entry(entry: object, n_tensors: int, n_indices: int, output: set[int]) -> str | None:
    """Why ``entry`` is not a usable cache entry for a network of this shape (``None``: it is).

    A usable entry is a JSON object with ``ssa_path`` (``n_tensors - 1`` pairs of
    distinct earlier nodes, each node used once) and ``sliced`` (distinct
    canonical index numbers of the network, none an output index).
    """
    if not isinstance(entry, dict) or set(entry) != {"ssa_path", "sliced"}:
        return "not an object with keys 'ssa_path' and 'sliced'"
    path, sliced = entry["ssa_path"], entry["sliced"]
    if not isinstance(path, list) or len(path) != max(n_tensors - 1, 0):
        return f"'ssa_path' is not a list of {max(n_tensors - 1, 0)} steps"
    used: set[int] = set()
    for k, pair in enumerate(path):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(_valid_index(x, n_tensors + k) for x in pair)
                or pair[0] == pair[1] or pair[0] in used or pair[1] in used):
            return f"'ssa_path' step {k} ({pair!r}) is not two distinct unused earlier nodes"
        used.update(pair)
    if not isinstance(sliced, list) or len(set(map(repr, sliced))) != len(sliced):
        return "'sliced' is not a list of distinct indices"
    for i in sliced:
        if not _valid_index(i, n_indices) or i in output:
            return f"sliced index {i!r} is not an inner index of this network"
    return None


def _read_entry(cfile: Path, net: Network) -> dict | None:
    """The valid cache entry in ``cfile``, or ``None`` (missing, unreadable or damaged)."""
    if not os.path.lexists(cfile):
        return None
    try:
        raw = read_regular_bytes(cfile, "path cache", max_bytes=MAX_ENTRY_BYTES)
        entry = json.loads(raw.decode("utf-8"))
        inputs, output, sizes = net.canonical()
        why = check_entry(entry, len(inputs), len(sizes), set(output))
    except InvalidInputError as exc:
        if not os.path.lexists(cfile):  # removed by another process meanwhile
            return None
        why = str(exc)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        why = f"not UTF-8 JSON ({type(exc).__name__})"
    if why is None:
        try:
            os.utime(cfile)  # its last use: the bound removes the least recently used first
        except OSError:
            pass
        return entry
    _warn_once(f"entry:{cfile}", f"qsimdist: ignoring the damaged path cache entry {cfile} "
               f"({why}); searching again and rewriting it")
    return None


def _write_entry(cfile: Path, entry: dict, bound: int | None) -> None:
    """Write a cache entry atomically, then keep the entries within ``bound`` bytes (``0``:
    write nothing); an unusable cache folder is warned about once."""
    if bound == 0:
        return
    text = json.dumps(entry)
    try:
        atomic_write_text(cfile, text)
    except OSError as exc:
        _warn_once(f"write:{cfile.parent}", f"qsimdist: cannot write the path cache in "
                   f"{cfile.parent} ({exc.strerror or exc}); running without it")
        return
    logger.debug("path cache entry written: %s", cfile)
    if bound is None:
        return
    # count the folder once per process, then add what is written: a folder of many
    # entries is not listed after every write, only when the count passes the bound
    folder = str(cfile.parent)
    if folder in _DISK_BYTES:
        _DISK_BYTES[folder] += len(text.encode("utf-8"))
    if _DISK_BYTES.get(folder, bound + 1) > bound:
        evict_entries(bound, keep=cfile)


@contextlib.contextmanager
def _seeded(seed: int):
    """Seed the global ``random`` (which cotengra's trial functions draw from) and
    numpy's, restoring both afterwards."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _seeded_greedy_trial(inputs, output, size_dict, random_strength=0.0, temperature=0.0,
                         costmod=1.0):
    """cotengra's greedy trial with its randomness drawn from the (seeded) global ``random``:
    cotengra's own passes no seed to its Rust greedy, which then seeds itself from the OS."""
    import cotengra as ctg
    from cotengra.pathfinders.path_basic import get_optimize_greedy

    seed = random.getrandbits(32)
    sizes = ctg.core.jitter_dict(size_dict, random_strength, seed) if random_strength else size_dict
    greedy = get_optimize_greedy()
    kwargs = dict(temperature=temperature, costmod=costmod, use_ssa=True)
    if getattr(greedy, "f", None) is not None:  # the Rust implementation: seed it explicitly
        kwargs["seed"] = seed
    ssa_path = greedy(inputs, output, sizes, **kwargs)
    return ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa_path)


_SEEDED_GREEDY = "qsimdist-seeded-greedy"


def _methods(options: PathOptions) -> list[str]:
    """cotengra methods for the search, with 'greedy' replaced by its seeded twin."""
    from cotengra.hyperoptimizers import hyper

    if _SEEDED_GREEDY not in hyper.list_hyper_functions():
        hyper.register_hyper_function(
            _SEEDED_GREEDY, _seeded_greedy_trial, dict(hyper.get_hyper_space()["greedy"]),
            dict(hyper.get_hyper_constants().get("greedy", {})),
        )
    methods = list(options.methods) if options.methods else list(hyper.get_default_hq_methods())
    return [_SEEDED_GREEDY if m == "greedy" else m for m in methods]


def _optlib_seed_kwargs(seed: int) -> dict:
    """``seed=`` for the hyper-optimiser's sampler, where that sampler takes one."""
    import inspect

    from cotengra.hyperoptimizers import hyper

    lib = hyper._OPTLIB_FNS.get(hyper.get_default_optlib())
    try:
        return {"seed": seed} if lib and "seed" in inspect.signature(lib.setup).parameters else {}
    except (TypeError, ValueError):
        return {}


def _default_repeats(n: int, greedy_cost: float) -> int:
    """Hyper-optimiser trials when the user set none: 8 up to 100 tensors, 32 above, but
    no more than the greedy contraction's estimated time pays for (``0``: keep greedy).

    The estimate uses constants, not a clock, so the decision (and the path) is the
    same on every machine and run.
    """
    base = 8 if n <= 100 else 32
    affordable = (greedy_cost / costs.SEARCH_RATE) / (n * costs.TRIAL_SECONDS_PER_TENSOR)
    return int(min(base, affordable))


def find_path(
    net: Network,
    options: PathOptions | None = None,
    target_size: int | None = None,
    progbar: bool = False,
) -> PathResult:
    """Search (or recall) a path for ``net``.

    Sliced so that no intermediate exceeds ``target_size`` elements.
    """
    options = options or PathOptions()
    names = net.canonical_names()
    key_blob = json.dumps(
        [net.canonical(), options.key(), target_size, NO_SEARCH_COST],
        separators=(",", ":"), default=list,
    )
    key = hashlib.sha256(key_blob.encode()).hexdigest()
    cached = _MEMORY_CACHE.get(key) if options.cache else None
    cfile = cache_dir() / f"{key}.json"
    if cached is not None:
        logger.debug("path cache hit (memory): %s", key[:12])
    elif options.cache:
        cached = _read_entry(cfile, net)
        if cached is not None:
            logger.info("path cache hit (disk): %s", cfile)
            _MEMORY_CACHE[key] = cached
        else:
            logger.info("path cache miss: %s", key[:12])
    if cached is not None:
        return PathResult(
            [tuple(p) for p in cached["ssa_path"]],
            [names[i] for i in cached["sliced"]],
            from_cache=True,
        )
    bound = cache_max_bytes() if options.cache else None  # a bad setting refused first
    logger.info("path search started: %d tensor(s), %d index(es)", net.num_tensors,
                len(net.size_dict))
    started = time.perf_counter()
    with _seeded(options.seed):
        ssa_path, sliced_sym, sym = _search(net, options, target_size, progbar)
    logger.info("path search finished in %.3f s: %d sliced index(es)",
                time.perf_counter() - started, len(sliced_sym))
    sym_index = {s: i for i, s in enumerate(sym)}
    entry = {"ssa_path": [list(p) for p in ssa_path], "sliced": [sym_index[s] for s in sliced_sym]}
    if options.cache:
        _MEMORY_CACHE[key] = entry
        _write_entry(cfile, entry, bound)
    return PathResult(ssa_path, [names[i] for i in entry["sliced"]])


def _search(net: Network, options: PathOptions, target_size: int | None, progbar: bool):
    """(SSA path, sliced symbols, symbols) for ``net``: optimal for a few tensors, greedy
    where the contraction is cheap, else cotengra's hyper-optimiser."""
    import cotengra as ctg

    inputs, output, size_dict, sym = net.symbolic()
    n = len(inputs)
    if n == 1:
        return [], [], sym
    if n <= OPTIMAL_MAX_TENSORS:
        tree = ctg.ContractionTree.from_path(
            inputs, output, size_dict, path=ctg.array_contract_path(
                inputs, output, size_dict=size_dict, optimize="optimal"
            )
        )
    else:
        tree = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
        cost = float(tree.contraction_cost())
        repeats = options.max_repeats
        if repeats is None:
            repeats = _default_repeats(n, cost)
        if cost <= NO_SEARCH_COST and tree.max_size() <= NO_SEARCH_SIZE:
            repeats = 0
        if repeats > 0:
            started = time.perf_counter()
            # trials the user left to qsimdist are paid for by the best tree found so far;
            # a user's max_time is one budget for the whole search, so no batches then
            # (cotengra restarts its clock on every search call)
            afford = None if (options.max_repeats is not None
                              or options.max_time is not None) else (
                lambda best: _affordable_repeats(n, float(best)))
            aware = target_size if options.slicing == "aware" else None
            tree, opt = _hyper_search(inputs, output, size_dict, options, repeats, aware,
                                      progbar, afford)
            if aware is None and target_size is not None and tree.max_size() > target_size:
                tree = _slice(tree, target_size)
            if options.max_time is None and options.max_repeats is None:
                tree = _search_more(tree, opt, inputs, output, size_dict,
                                    None if aware else target_size,
                                    time.perf_counter() - started)
    if target_size is not None and tree.max_size() > target_size:
        tree = _slice(tree, target_size)
    ssa_path = [tuple(int(x) for x in p) for p in tree.get_ssa_path()]
    return ssa_path, list(tree.sliced_inds), sym


def _search_more(tree, opt, inputs, output, size_dict, target_size: int | None,
                 spent: float):
    """A costly contraction earns a longer search: while the best tree's predicted run
    (its multiply-adds at :data:`~qsimdist.hardware.costs.SEARCH_RATE`, sliced to
    ``target_size`` where one is given) is more than ``1 / SEARCH_SHARE`` times the search
    so far, or the last round saved more predicted time than it took, ``opt`` (the
    hyper-optimiser that found ``tree``, its sampler's state kept) searches on in rounds
    as long as the search so far, at most
    :data:`~qsimdist.hardware.costs.SEARCH_ROUND_SECONDS` each and
    ``MAX_SCALED_SEARCH_SECONDS`` in all, until ``STALLED_ROUNDS`` rounds in a row save
    less predicted time than they took; the cheaper tree (sliced to the target) is kept.
    Only where the user gave no budget (``max_time`` and ``max_repeats`` unset); the cheap
    majority of networks never gets here, and keeps a path independent of the clock."""
    t0 = time.perf_counter() - spent
    first = float(tree.contraction_cost())
    rounds, gain, took, stalled = 0, 0.0, 0.0, 0
    while stalled < costs.STALLED_ROUNDS:
        predicted = float(tree.contraction_cost()) / costs.SEARCH_RATE
        so_far = time.perf_counter() - t0
        left = min(costs.SEARCH_SHARE * predicted, costs.MAX_SCALED_SEARCH_SECONDS) - so_far
        if left < costs.MIN_SCALED_SEARCH_SECONDS:
            # past the share: a round that saved more predicted time than it took earns
            # another, within the cap
            left = min(costs.SEARCH_ROUND_SECONDS, costs.MAX_SCALED_SEARCH_SECONDS - so_far)
            if not (rounds and gain > took) or left < costs.MIN_SCALED_SEARCH_SECONDS:
                break
        logger.info("path search: the best contraction is predicted %.3g s; searching %.1f s "
                    "more", predicted, left)
        # rounds grow with the search so far (a network with little to find stops early)
        opt.max_time = min(left, costs.SEARCH_ROUND_SECONDS,
                           max(costs.MIN_SCALED_SEARCH_SECONDS, so_far))
        opt.max_repeats = 1 << 20
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                other = opt.search(inputs, output, size_dict)
        except KeyError:  # no trial finished in the time: keep what was found
            break
        rounds += 1
        if target_size is not None and other.max_size() > target_size:
            other = _slice(other, target_size)
        took = time.perf_counter() - started
        gain = predicted - float(other.contraction_cost()) / costs.SEARCH_RATE
        if gain > 0:
            tree = other
        stalled = 0 if gain > took else stalled + 1  # a saving under its cost is no find
    if rounds:
        logger.info("path search: %s (10^%.2f against 10^%.2f multiply-adds%s)",
                    "a cheaper tree found" if float(tree.contraction_cost()) < first
                    else "no cheaper tree",
                    math.log10(max(float(tree.contraction_cost()), 1.0)),
                    math.log10(max(first, 1.0)),
                    f", sliced to {target_size} elements" if target_size else "")
    return tree


def _affordable_repeats(n: int, best_cost: float) -> float:
    """Trials a contraction of ``best_cost`` multiply-adds pays for (the rule of
    :func:`_default_repeats`, on the best tree found instead of the greedy one)."""
    return (best_cost / costs.SEARCH_RATE) / (n * costs.TRIAL_SECONDS_PER_TENSOR)


def _hyper_search(inputs, output, size_dict, options: PathOptions, repeats: int,
                  target_size: int | None, progbar: bool, afford=None):
    """cotengra's hyper-optimiser, ``repeats`` trials: (best tree, the optimiser, which can
    search on). ``target_size``: every trial sliced and reconfigured to it (cotengra's
    ``slicing_reconf_opts``). ``afford(best cost)``: trials run in
    doubling batches (:data:`~qsimdist.hardware.costs.FIRST_TRIALS` first) while the best
    tree so far pays for more than were run, up to ``repeats``; no clock is read, so the
    same network and seed give the same path."""
    import cotengra as ctg

    kwargs = dict(
        max_repeats=repeats,
        max_time=options.max_time,
        minimize=options.minimize,
        parallel=options.parallel,
        progbar=progbar,
        on_trial_error="ignore",
        methods=_methods(options),
        **_optlib_seed_kwargs(options.seed),
    )
    if not options.reconfigure:
        kwargs["reconf_opts"] = None
    if target_size is not None:
        kwargs["slicing_reconf_opts"] = {"target_size": target_size, "allow_outer": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if afford is not None:
            kwargs["max_repeats"] = min(repeats, costs.FIRST_TRIALS)
        opt = ctg.HyperOptimizer(**kwargs)
        try:
            tree = opt.search(inputs, output, size_dict)
            done = kwargs["max_repeats"]
            while afford is not None and done < min(repeats, afford(tree.contraction_cost())):
                opt.max_repeats = min(done, repeats - done)  # doubling batches
                tree = opt.search(inputs, output, size_dict)
                done += opt.max_repeats
            if afford is not None:
                logger.info("path search: %d trial(s), best 10^%.2f multiply-adds", done,
                            math.log10(max(float(tree.contraction_cost()), 1.0)))
            return tree, opt
        except KeyError:  # every trial failed (e.g. an unreachable slicing target)
            raise PlanError(
                f"no contraction path found within {repeats} trials"
                + (f" at {target_size} elements per intermediate" if target_size else "")
            ) from None


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
        tree = _slice(tree, target_size, max_repeats)
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
    tree = _slice(tree, target_size, max_repeats)
    # cotengra's slicer measures width its own way on hyper-indices: finish by ours
    return slice_costs.extend(sliced_names(net, tree), target_log2, set(net.output))
