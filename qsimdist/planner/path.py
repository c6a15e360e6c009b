"""Contraction paths from cotengra's hyper-optimiser, cached by network structure.

The cache key is the network's canonical structure (indices renamed by first
appearance) plus the search options, so a structurally identical query —
the same circuit with another bitstring, say — skips the search. Paths are
kept in memory and on disk (:mod:`qsimdist.planner.path_cache`, which
``qsimdist cache info`` and ``qsimdist cache clear`` report on and empty); a path
is sliced to a memory limit by :mod:`qsimdist.planner.slicing`.

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
import random
import time
import warnings
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from ..errors import InvalidInputError, PlanError
from ..hardware import costs
from ..network import Network
from . import path_cache
from .simplify import CHEAP_COST, CHEAP_SIZE
from .slicing import slice_tree

logger = logging.getLogger(__name__)


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

    Every door takes these as ``path_options``: a ``PathOptions`` or a dict of its
    fields (see :meth:`coerce`).

    Parameters
    ----------
    max_repeats : int, optional
        Trials of the hyper-optimiser, >= 1 (``None``: by network size, 8 up to
        100 tensors, 32 above, fewer where the greedy contraction is too cheap to
        pay for them). A network whose greedy path needs at most
        :data:`NO_SEARCH_COST` multiply-adds keeps it: no trial is run.
    max_time : float, optional
        Wall-clock budget in seconds, > 0 (``None``: trials only).
    methods : tuple of str, optional
        cotengra path methods (``None``: cotengra's default, greedy + kahypar).
    minimize : str, default "flops"
        cotengra objective: ``flops``, ``size``, ``write``, ``combo`` or ``limit``
        (with a cotengra suffix such as ``combo-256`` where it takes one).
    parallel : bool or int, default False
        Let cotengra use a process pool (``True`` or a number of processes).
    cache : bool, default True
        Read and write the structure-keyed path cache.
    reconfigure : bool, default True
        Refine each trial by cotengra's subtree reconfiguration.
    seed : int, default 0
        Seed (an integer >= 0) of every random choice in the search. With
        ``max_time=None`` and ``parallel=False`` the same network, options and
        library versions give the same path.
    slicing : {"after", "aware"}
        How a search with a slicing target (a memory limit the unsliced path does
        not fit) slices: ``"after"`` (default) searches unsliced trees and scores
        each round's best by its cost once sliced to the target, searching on while
        that sliced cost pays for it; ``"aware"`` lets cotengra slice and
        reconfigure inside every trial (slower trials: on the 127-qubit
        kicked-Ising networks it found trees 10^3 times costlier in the same time,
        on random circuits it can pay).

    Raises
    ------
    InvalidInputError
        A field outside its valid values (a negative seed, ``max_repeats < 1``,
        ``max_time <= 0``, an unknown ``slicing`` mode or objective).
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
        """The one way a door turns what it was given into path options.

        Parameters
        ----------
        value : PathOptions or dict, optional
            ``None`` (the defaults), a ``PathOptions`` or a dict of its fields.
        max_time : float, optional
            Where not ``None``, replaces the ``max_time`` field.
        max_repeats : int, optional
            Where not ``None``, replaces the ``max_repeats`` field.

        Returns
        -------
        PathOptions
            The options (``value`` itself where nothing is replaced).

        Raises
        ------
        InvalidInputError
            An unknown key, another type, or a field outside its valid values; the
            message names the valid keys.
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
    cached = path_cache.recall(key) if options.cache else None
    cfile = path_cache.cache_dir() / f"{key}.json"
    if cached is not None:
        logger.debug("path cache hit (memory): %s", key[:12])
    elif options.cache:
        cached = path_cache.read_entry(cfile, net)
        if cached is not None:
            logger.info("path cache hit (disk): %s", cfile)
            path_cache.remember(key, cached)
        else:
            logger.info("path cache miss: %s", key[:12])
    if cached is not None:
        return PathResult(
            [tuple(p) for p in cached["ssa_path"]],
            [names[i] for i in cached["sliced"]],
            from_cache=True,
        )
    # a bad setting refused first
    bound = path_cache.cache_max_bytes() if options.cache else None
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
        path_cache.remember(key, entry)
        path_cache.write_entry(cfile, entry, bound)
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
                tree = slice_tree(tree, target_size)
            if options.max_time is None and options.max_repeats is None:
                tree = _search_more(tree, opt, inputs, output, size_dict,
                                    None if aware else target_size,
                                    time.perf_counter() - started)
    if target_size is not None and tree.max_size() > target_size:
        tree = slice_tree(tree, target_size)
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
            other = slice_tree(other, target_size)
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
