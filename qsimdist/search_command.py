"""``qsimdist search CIRCUIT --profile NAME --devices P --budget 30m --out TREE.json``.

Registered in :mod:`qsimdist.cli`. Searches a contraction tree scored by the
dp schedule's predicted time on the target (see :mod:`qsimdist.planner.search`),
writes it with its budget and score history after every round, and resumes a
search already in ``--out`` for the same target. ``qsimdist plan --tree``
plans along the result.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Optional

import typer

from .config import DTYPES, ORDERS
from .errors import InvalidInputError

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


def search_command(
    circuit: Path = typer.Argument(..., help="Circuit or network file."),
    profile: str = typer.Option(..., "--profile", help="Hardware profile to score trees on "
                                "(see 'qsimdist profiles')."),
    out: Path = typer.Option(..., "--out", "-o", help="Tree file: written after every round; a "
                             "search already there for the same target resumes."),
    devices: Optional[int] = typer.Option(
        None, "--devices", help="Devices P (a power of two); 1 gives the one-device baseline. "
        "Default: one node."),
    budget: str = typer.Option("10m", "--budget", help="Wall-clock budget, e.g. 600, 30m, 2h "
                               "(a resumed search counts the time it already spent)."),
    tree: Optional[Path] = typer.Option(None, "--tree", help="Start from this tree or path "
                                        "(see 'qsimdist plan --tree') instead of --start."),
    start_from: str = typer.Option(
        "greedy", "--start", help="Without --tree, start from cotengra's greedy tree (greedy) "
        "or its slicing-aware hyper-optimiser, given a quarter of the budget (hyper)."),
    bitstring: Optional[str] = typer.Option(None, "--bitstring", "-b",
                                            help="Bitstring pattern (* = open). Default: zeros."),
    order: str = typer.Option("qiskit", "--order", help=f"Bitstring order: {' or '.join(ORDERS)}."),
    dtype: str = typer.Option("complex64", "--dtype", help=f"One of {', '.join(DTYPES)}."),
    memory_limit: Optional[str] = typer.Option(
        None, "--memory-limit", help="Memory usable per device, e.g. 16GiB (default: the "
        "profile's usable memory)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the search's random choices."),
    reuse: bool = typer.Option(False, "--reuse", help="Score trees with each group keeping "
                               "step outputs across slices where memory allows."),
    narrower: int = typer.Option(
        0, "--narrower", help="Also anneal up to this many powers of two below the best "
        "schedule's width, each round's width drawn by which have produced better trees "
        "(0-8; default 0: at the schedule's width)."),
    fresh: bool = typer.Option(False, "--fresh", help="Start afresh even if --out holds a search."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object at the end."),
) -> None:
    """Search a contraction tree scored by the dp schedule's predicted time on a target.

    The result (the best tree, its predicted schedule, the budget spent and the
    best score over time) goes to --out; plan along it with
    'qsimdist plan CIRCUIT --tree OUT --profile NAME --devices P'.
    """
    from ._fileio import check_output_target
    from .api import plan_network
    from .hardware import load_profile
    from .planner.search import MAX_NARROWER, START_FROM, Target, search
    from .planner.trees import load_tree

    seconds = parse_budget(budget)
    if not 0 <= narrower <= MAX_NARROWER:
        raise InvalidInputError(f"--narrower must be 0..{MAX_NARROWER}, got {narrower}")
    if seed < 0:
        raise InvalidInputError(f"--seed must be >= 0, got {seed}")
    if start_from not in START_FROM:
        raise InvalidInputError(f"--start must be one of {', '.join(START_FROM)}, "
                                f"not {start_from!r}")
    check_output_target(out, "--out")
    prof = load_profile(profile)
    p = devices if devices is not None else prof.devices_per_node
    prof.check_devices(p)
    per_device = None
    if memory_limit is not None:
        from .engine.memory import MemoryBudget

        per_device = MemoryBudget.resolve(memory_limit).limit
        if per_device is None:
            raise InvalidInputError("--memory-limit for a search needs a size, e.g. 16GiB")
    net = plan_network(str(circuit), bitstrings=bitstring, order=order, memory_limit="none",
                       dtype=dtype)
    start = load_tree(tree, net) if tree is not None else None

    def report(state) -> None:
        typer.echo(_line(state), err=True)
        sys.stderr.flush()

    state = search(net, Target.with_memory(prof, p, dtype, per_device, reuse), seconds, out=out,
                   start=start, seed=seed, resume=not fresh, narrower=narrower,
                   start_from=start_from, progress=report)
    if as_json:
        typer.echo(json.dumps(dict(state.meta()["search"], file=str(out))))
        return
    typer.echo(_line(state))
    typer.echo(f"tree written to {out}")
