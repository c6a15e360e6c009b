"""Tree search scored by what will run: the dp schedule's predicted time on a target.

A target is a hardware profile, a number of devices P and a dtype. Every
candidate tree is scored by :func:`~qsimdist.planner.distribution.schedule`
(strategy ``dp``): the predicted seconds of the fastest schedule that fits
each device's memory, slicing and sharding chosen together for that tree.
P = 1 gives the competitive one-device baseline: the same search, the same
budget, the same memory per device.

The search starts from a given tree, from cotengra's greedy tree (the
default: annealing makes a good tree of it within a few rounds) or from
cotengra's slicing-aware hyper-optimiser (``start_from="hyper"``, given a
quarter of the budget), then runs rounds of cotengra's simulated annealing of the
tree, sliced to the width the best schedule fits at (with ``narrower=K``, up
to K powers of two below it: each round draws its width, favouring the
offsets that have produced better trees). After each round the
best tree, its score and the history of best scores over time are written
to the state file, so a search stopped at any point resumes from there with
the rest of its budget.
"""

from __future__ import annotations

import math
import os
import random
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidInputError, PlanError, PlanFormatError
from ..hardware import HardwareProfile
from ..network import Network
from .trees import Simplification, Tree, from_cotengra, load_tree, save_tree, to_cotengra

#: the share of the budget the first hyper-optimiser search may take (no start tree)
HYPER_SHARE = 0.25
#: where a search without a start tree begins (on n56m20 at P = 8, eight minutes from
#: the greedy tree ended 300x ahead of eight from the hyper-optimiser; measured in
#: docs/benchmarks/history.md, "Searches start from the greedy tree")
START_FROM = ("greedy", "hyper")
#: annealing sweeps per round: rounds of about this many seconds report progress and
#: save state often enough to resume, and long enough that scoring is a small share
ROUND_SECONDS = 60.0
#: the most a search may anneal below the best schedule's width (``narrower``, log2
#: elements). Sliced FLOPs at the schedule's own width is only a proxy for the dp's
#: predicted time (sharding, kept outputs): n60m24's best P = 8 tree came from a search
#: annealing at the P = 1 width, 3 narrower; yet in 56 rounds drawn over 0-3 narrower
#: both improvements came at the schedule's width, so it is opt-in (docs/benchmarks/
#: history.md, "n60m24 at P = 8 from a fresh search" and "30 more minutes per side")
MAX_NARROWER = 8


@dataclass
class Target:
    profile: HardwareProfile
    devices: int
    dtype: str = "complex64"
    #: groups keep step outputs across slices where memory allows (distribution.reuse)
    reuse: bool = False

    @classmethod
    def with_memory(cls, profile: HardwareProfile, devices: int, dtype: str,
                    memory_bytes: int | None, reuse: bool = False) -> Target:
        """The target with ``memory_bytes`` usable per device instead of the profile's."""
        if memory_bytes is not None:
            import dataclasses

            profile = dataclasses.replace(profile, memory_bytes=int(memory_bytes),
                                          usable_memory_fraction=1.0)
        return cls(profile, devices, dtype, reuse)

    def describe(self) -> dict:
        return {"profile": self.profile.name, "devices": self.devices, "dtype": self.dtype,
                "usable_memory_per_device": self.profile.usable_memory, "reuse": self.reuse}


@dataclass
class Score:
    seconds: float  # the dp schedule's predicted run
    flops_executed: float
    peak_bytes_per_device: float
    n_slices: int
    group_size: int
    width_log2: float  # the largest intermediate of one slice (whole group), log2 elements

    def to_dict(self) -> dict:
        return {"predicted_seconds": self.seconds, "flops_executed": self.flops_executed,
                "log10_flops_executed": math.log10(max(self.flops_executed, 1.0)),
                "peak_bytes_per_device": self.peak_bytes_per_device,
                "n_slices": self.n_slices, "group_size": self.group_size,
                "width_log2": self.width_log2}


def score_tree(net: Network, tree: Tree, target: Target):
    """(:class:`Score`, schedule, plan) of the dp schedule for ``tree`` on ``target``."""
    from .distribution import schedule
    from .plan import build_plan
    from .slicing import SliceCosts

    plan = build_plan(net, tree.ssa_path, [], target.dtype,
                      meta=dict(net.meta, search_sliced=list(tree.sliced)))
    sch = schedule(plan, target.profile, target.devices, "dp", reuse=target.reuse)
    pred = sch.predicted
    width, _ = SliceCosts(net, tree.ssa_path).evaluate(set(sch.sliced))
    return Score(pred.seconds, pred.flops_executed, pred.peak_bytes_per_device, sch.n_slices,
                 sch.group_size, width), sch, plan


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class SearchState:
    """Where a search stands: the best tree, its score, the budget and the history."""

    tree: Tree
    score: Score
    target: Target
    budget_seconds: float
    spent_seconds: float = 0.0
    cpu_seconds: float = 0.0
    rounds: int = 0
    history: list = field(default_factory=list)  # {"seconds", "round", "predicted_seconds", ...}
    #: every round's candidate: {"round", "anneal_offset", "predicted_seconds", "better"}
    tries: list = field(default_factory=list)
    #: rounds may anneal up to this many powers of two below the schedule's width
    narrower: int = 0
    seed: int = 0
    #: how the network searched on was simplified (written with the tree, where known)
    simplification: Simplification | None = None

    def record(self, what: str, **extra) -> None:
        self.history.append({"seconds": round(self.spent_seconds, 2), "round": self.rounds,
                             "what": what, **extra, **self.score.to_dict()})

    def offset_odds(self, narrower: int = 0) -> dict[int, float]:
        """Weights of the anneal width offsets 0..``narrower``: (wins + 1) / (tries + 2)
        over the rounds so far."""
        offsets = range(narrower + 1)
        tries = {o: 0 for o in offsets}
        wins = dict(tries)
        for t in self.tries:
            o = t.get("anneal_offset")
            if o in tries:
                tries[o] += 1
                wins[o] += bool(t.get("better"))
        return {o: (wins[o] + 1) / (tries[o] + 2) for o in offsets}

    def meta(self) -> dict:
        return {"search": {
            "target": self.target.describe(), "budget_seconds": self.budget_seconds,
            "spent_seconds": round(self.spent_seconds, 2),
            "cpu_seconds": round(self.cpu_seconds, 2), "rounds": self.rounds,
            "seed": self.seed, "score": self.score.to_dict(), "history": self.history,
            "tries": self.tries,
            "method": "cotengra simulated annealing of the tree, sliced to the width the best "
                      "dp schedule fits at (or up to `narrower` below it, drawn per round); "
                      "scored by that schedule's predicted seconds",
            "narrower": self.narrower,
        }}

    def save(self, path: str | os.PathLike, net: Network) -> Path:
        meta = dict(self.tree.meta)
        meta.update(self.meta())
        return save_tree(path, net, Tree(self.tree.ssa_path, self.tree.sliced, meta,
                                         self.simplification))


def _resume(path: Path, net: Network, target: Target) -> dict | None:
    """The saved search of ``path`` for this target, if it is one."""
    if not path.exists():
        return None
    tree = load_tree(path, net)
    info = tree.meta.get("search")
    if not isinstance(info, dict):
        return None
    want = target.describe()
    got = info.get("target", {})
    keys = ("profile", "devices", "dtype", "usable_memory_per_device", "reuse")
    if {k: got.get(k, False if k == "reuse" else None) for k in keys} != \
            {k: want[k] for k in keys}:
        raise InvalidInputError(
            f"{path} holds a search for {got.get('profile')} x {got.get('devices')} "
            f"({got.get('dtype')}, {got.get('usable_memory_per_device')} B per device), not "
            f"{want['profile']} x {want['devices']} ({want['dtype']}, "
            f"{want['usable_memory_per_device']} B); name another --output or the same target")
    try:
        return {"tree": tree, "spent": float(info["spent_seconds"]),
                "cpu": float(info.get("cpu_seconds", 0.0)), "rounds": int(info["rounds"]),
                "history": list(info["history"]), "seed": int(info.get("seed", 0)),
                "tries": list(info.get("tries", []))}
    except (KeyError, TypeError, ValueError):
        raise PlanFormatError(f"{path}: its search record is incomplete; start afresh "
                              "with another --output") from None


def _anneal(ctree, width_log2: float, seconds: float, rng: random.Random):
    """One round of annealing the (unsliced) ``ctree`` with slicing to ``2^width_log2``."""
    from cotengra.pathfinders.path_simulated_annealing import simulated_anneal_tree

    size = 2 ** int(math.floor(width_log2 + 1e-9))
    # round length: a few short runs first to learn the speed of a sweep here
    tstart = rng.choice((0.05, 0.1, 0.3, 1.0))
    t0 = time.perf_counter()
    best = None
    steps = 2
    while True:
        t1 = time.perf_counter()
        cand = simulated_anneal_tree(ctree, tfinal=0.005, tstart=tstart, tsteps=steps,
                                     numiter=25, minimize="flops", target_size=size,
                                     target_size_initial=size, slice_mode="basic",
                                     seed=rng.randrange(2**31))
        per_step = (time.perf_counter() - t1) / steps
        if best is None or cand.total_flops(log=2) < best.total_flops(log=2):
            best = cand
        left = seconds - (time.perf_counter() - t0)
        # the next run fills what is left of the round (a run cannot be stopped midway)
        steps = min(200, int(left / max(per_step, 1e-6)))
        if steps < 2:
            return best


def search(net: Network, target: Target, budget_seconds: float, *, out: str | os.PathLike,
           start: Tree | None = None, seed: int = 0, resume: bool = True,
           round_seconds: float = ROUND_SECONDS, narrower: int = 0,
           start_from: str = "greedy",
           on_round: Callable[[SearchState], None] | None = None,
           simplification: Simplification | None = None) -> SearchState:
    """Search a tree for ``net`` on ``target`` within ``budget_seconds`` of wall clock.

    ``out`` is the state file: written after every round; when it already
    holds a search for this target and ``resume``, the search continues from
    it (its spent time counts against the budget). ``start`` is a tree to
    start from; without one the search starts from ``start_from``: cotengra's
    greedy tree (``"greedy"``) or its slicing-aware hyper-optimiser given
    :data:`HYPER_SHARE` of the budget (``"hyper"``). ``narrower``: each round
    anneals at the best schedule's width or up to this many powers of two below
    it, drawn by the offsets' past wins (0: always at the schedule's width).
    ``simplification``: how ``net`` was simplified (e.g. ``Simplification("qsimdist",
    "ADCRS")`` for :func:`qsimdist.api.simplified_network`'s network), recorded in
    ``out`` so ``plan --tree`` rebuilds the same network; without it, the record of
    the resumed file or of ``start`` where they hold one.
    """
    from .path import PathOptions, find_path

    if not 0 <= narrower <= MAX_NARROWER:
        raise InvalidInputError(f"narrower must be 0..{MAX_NARROWER} (powers of two below the "
                                f"schedule's width to anneal at), not {narrower}")
    if not budget_seconds > 0:
        raise InvalidInputError(f"the search budget must be positive, not {budget_seconds}")
    if start_from not in START_FROM:
        raise InvalidInputError(f"a search starts from one of {', '.join(START_FROM)}, "
                                f"not {start_from!r}")
    if net.num_tensors < 2:
        raise InvalidInputError("a network of one tensor has nothing to search")
    out = Path(out)
    t_wall, t_cpu = time.perf_counter(), cpu_seconds()
    prior = _resume(out, net, target) if resume else None
    base_spent = prior["spent"] if prior else 0.0
    base_cpu = prior["cpu"] if prior else 0.0

    def spent() -> float:
        return base_spent + time.perf_counter() - t_wall

    if prior is not None:
        tree = prior["tree"]
        seed = prior["seed"]
    elif start is not None:
        tree = start
    elif start_from == "greedy":
        tree = _greedy_tree(net)
    else:
        share = max(1.0, HYPER_SHARE * budget_seconds)
        mem_elems = target.profile.usable_memory * target.devices // (
            2 * _itemsize(target.dtype))
        res = find_path(net, PathOptions(max_time=share, max_repeats=10**6, minimize="flops",
                                         seed=seed, slicing="aware"), target_size=max(2, mem_elems))
        tree = Tree([tuple(p) for p in res.ssa_path], list(res.sliced),
                    {"from": "cotengra hyper-optimiser, slicing-aware"})
    t_score = time.perf_counter()
    sc, _, _ = score_tree(net, tree, target)
    scoring = time.perf_counter() - t_score  # reserved at the end of each round
    if simplification is None:  # the file resumed, or the start tree, knows it (same network)
        simplification = tree.simplification
    state = SearchState(tree, sc, target, budget_seconds, spent_seconds=spent(), seed=seed,
                        narrower=narrower, simplification=simplification)
    if prior is not None:
        state.rounds, state.history = prior["rounds"], prior["history"]
        state.tries = prior["tries"]
        state.record("resumed")
    else:
        state.record("start")
    state.cpu_seconds = base_cpu + cpu_seconds() - t_cpu
    state.save(out, net)
    if on_round is not None:
        on_round(state)
    rng = random.Random(hash((seed, state.rounds)) & 0xFFFFFFFF)
    while True:
        left = budget_seconds - spent() - 1.5 * scoring
        if left <= 0:
            break
        ctree = to_cotengra(net, Tree(state.tree.ssa_path, []))
        odds = state.offset_odds(narrower)
        offset = rng.choices(list(odds), weights=list(odds.values()))[0]
        width = max(1.0, state.score.width_log2 - offset)
        cand = _anneal(ctree, width, min(round_seconds, left), rng)
        cand_tree = from_cotengra(net, cand, "annealed tree")
        state.rounds += 1
        t_score = time.perf_counter()
        try:
            cand_score, _, _ = score_tree(net, cand_tree, target)
        except PlanError:  # a tree whose slices fit nowhere: keep the best
            cand_score = None
        scoring = max(scoring, time.perf_counter() - t_score)
        state.spent_seconds = spent()
        state.cpu_seconds = base_cpu + cpu_seconds() - t_cpu
        better = cand_score is not None and cand_score.seconds < state.score.seconds
        state.tries.append({"round": state.rounds, "anneal_offset": offset,
                            "predicted_seconds": cand_score.seconds if cand_score else None,
                            "better": better})
        if better:
            origin = str(state.tree.meta.get("from", "?"))
            if not origin.startswith("annealed from "):  # one prefix, however many rounds
                origin = "annealed from " + origin
            state.tree = Tree(cand_tree.ssa_path, cand_tree.sliced, {"from": origin})
            state.score = cand_score
            state.record("better", anneal_offset=offset)
        state.save(out, net)
        if on_round is not None:
            on_round(state)
    state.spent_seconds = spent()
    state.cpu_seconds = base_cpu + cpu_seconds() - t_cpu
    state.record("end")
    state.save(out, net)
    return state


def _greedy_tree(net: Network) -> Tree:
    """cotengra's greedy tree of ``net``, unsliced (the annealing slices it)."""
    import cotengra as ctg

    inputs, output, size_dict, _ = net.symbolic()
    t = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    return Tree([tuple(int(x) for x in p) for p in t.get_ssa_path()], [],
                {"from": "cotengra greedy"})


def _itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(dtype).itemsize
