"""``qsimdist search CIRCUIT --profile NAME --devices P --budget 30m --output TREE.json``.

Searches a contraction tree scored by the dp schedule's predicted time on the
target (see :mod:`qsimdist.planner.search`), writes it with its budget and
score history after every round, and resumes a search already in ``--output``
for the same target (``--out``, its former name, still works, hidden from the
help). ``qsimdist plan --tree`` plans along the result.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import InvalidInputError
from .common import (
    BitstringOpt,
    Dtype,
    DtypeOpt,
    JsonOpt,
    MemOpt,
    Order,
    OrderOpt,
    OutputOpt,
    ProfileOpt,
    check_profile,
    devices_opt,
    reuse_opt,
    seed_opt,
    tree_opt,
)

logger = logging.getLogger(__name__)

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_budget(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``30m`` or ``1.5h``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h)?\s*", str(text))
    if m is None or float(m.group(1)) <= 0:
        raise InvalidInputError(
            f"budget {text!r} is not a positive duration; e.g. 90, 90s, 30m or 1.5h")
    return float(m.group(1)) * _UNITS[m.group(2) or ""]


def _line(state) -> str:
    sc = state.score
    return (f"round {state.rounds}: {state.spent_seconds:7.1f} of {state.budget_seconds:.0f} s; "
            f"best {sc.seconds:.4g} s predicted, 10^{math.log10(max(sc.flops_executed, 1)):.2f} "
            f"FLOPs executed, {sc.n_slices} slice(s), groups of {sc.group_size}, peak "
            f"{sc.peak_bytes_per_device / 1e9:.3g} GB per device{_last_try(state)}")


def _last_try(state) -> str:
    """What the round's candidate scored, annealed how far below the best schedule's width."""
    if not state.tries:
        return ""
    t = state.tries[-1]
    got = "fits nowhere" if t["predicted_seconds"] is None else \
        f"{t['predicted_seconds']:.4g} s"
    where = f" (annealed 2^{t['anneal_offset']} narrower)" if t["anneal_offset"] else ""
    return f"; this round's tree{where}: {got}"


def search(
    circuit: Path = typer.Argument(..., help="Circuit or network file."),
    profile: Optional[str] = ProfileOpt,
    output: Optional[Path] = OutputOpt,
    out: Optional[Path] = typer.Option(None, "--out", hidden=True,
                                       help="Former name of --output (deprecated)."),
    devices: Optional[int] = devices_opt(
        "Devices P (a power of two); 1 gives the one-device baseline. Default: one node."),
    budget: str = typer.Option("10m", "--budget", help="Wall-clock budget, e.g. 600, 30m, 2h "
                               "(a resumed search counts the time it already spent)."),
    tree: Optional[Path] = tree_opt(
        "Start from this tree or path (see 'qsimdist plan --tree') instead of --start."),
    start_from: str = typer.Option(
        "greedy", "--start", help="Without --tree, start from cotengra's greedy tree (greedy) "
        "or its slicing-aware hyper-optimiser, given a quarter of the budget (hyper)."),
    bitstring: Optional[str] = BitstringOpt,
    order: Order = OrderOpt,
    dtype: Dtype = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    seed: int = seed_opt(0, "Seed of the search's random choices."),
    reuse: bool = reuse_opt(
        "Score trees with each group keeping step outputs across slices where memory allows."),
    narrower: int = typer.Option(
        0, "--narrower", help="Also anneal up to this many powers of two below the best "
        "schedule's width, each round's width drawn by which have produced better trees "
        "(0-8; default 0: at the schedule's width)."),
    fresh: bool = typer.Option(False, "--fresh",
                               help="Start afresh even if --output holds a search."),
    as_json: bool = JsonOpt,
) -> None:
    """Search a contraction tree scored by the dp schedule's predicted time on a target.

    --profile (the target) and --output (the tree file) are required. The result
    (the best tree, its predicted schedule, the budget spent and the best score
    over time) goes to --output after every round, and a search already there for
    the same target resumes; plan along it with
    'qsimdist plan CIRCUIT --tree TREE.json --profile NAME --devices P'.
    """
    from .._fileio import check_output_target
    from ..api import simplified_network, tree_network
    from ..planner.search import MAX_NARROWER, START_FROM, Target
    from ..planner.search import search as run_search
    from ..planner.simplify import DEFAULT_SEQUENCE
    from ..planner.trees import Simplification, load_tree

    seconds = parse_budget(budget)
    if not 0 <= narrower <= MAX_NARROWER:
        raise InvalidInputError(f"--narrower must be 0..{MAX_NARROWER}, got {narrower}")
    if seed < 0:
        raise InvalidInputError(f"--seed must be >= 0, got {seed}")
    if start_from not in START_FROM:
        raise InvalidInputError(f"--start must be one of {', '.join(START_FROM)}, "
                                f"not {start_from!r}")
    if out is not None:
        if output is not None and output != out:
            raise InvalidInputError("give --output only (--out is its former name), not both")
        typer.echo("qsimdist: note: --out is deprecated; write --output", err=True)
        output = out
    if profile is None:
        from ..hardware import list_profiles

        raise InvalidInputError(
            "search needs --profile NAME, the hardware to score trees on; valid: "
            f"{', '.join(p.name for p in list_profiles())} (or the path of a .toml profile file)")
    if output is None:
        raise InvalidInputError("search needs --output TREE.json, the tree file written after "
                                "every round")
    check_output_target(output, "--output")
    prof = check_profile(profile)
    p = devices if devices is not None else prof.devices_per_node
    prof.check_devices(p)
    per_device = None
    if memory_limit is not None:
        from ..engine import MemoryBudget

        per_device = MemoryBudget.resolve(memory_limit).limit
        if per_device is None:
            raise InvalidInputError("--memory-limit for a search needs a size, e.g. 16GiB")
    # the network is the one the search resumed (or the tree started from) was made for:
    # the simplification its file records, or the one whose structure hash it matches
    # (see api.tree_network); the tree file written records it in turn
    network_kw = dict(bitstrings=bitstring, order=order, memory_limit="none", dtype=dtype)
    resumed = output.exists() and not fresh
    if resumed or tree is not None:
        net, simplification = tree_network(str(circuit), output if resumed else tree,
                                           **network_kw)
    else:
        net = simplified_network(str(circuit), **network_kw)
        simplification = Simplification("qsimdist", DEFAULT_SEQUENCE)
    start = load_tree(tree, net) if tree is not None else None

    def report(state) -> None:
        typer.echo(_line(state), err=True)
        sys.stderr.flush()

    logger.info("searching a tree for %s on %s x %d for %.0f s", circuit, prof.name, p, seconds)
    state = run_search(net, Target.with_memory(prof, p, dtype, per_device, reuse), seconds,
                   out=output, start=start, seed=seed, resume=not fresh, narrower=narrower,
                   start_from=start_from, on_round=report, simplification=simplification)
    if as_json:
        typer.echo(json.dumps(dict(state.meta()["search"], file=str(output))))
        return
    typer.echo(_line(state))
    typer.echo(f"tree written to {output}")
