"""``qsimdist plan`` and ``qsimdist run``: plan a contraction, save it, execute a saved one."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from ..errors import InvalidInputError
from .common import (
    BLOCK,
    Backend,
    BackendOpt,
    BitstringOpt,
    Comm,
    CommOpt,
    Dtype,
    DtypeOpt,
    GemmOpt,
    JsonOpt,
    MaxTimeOpt,
    MemOpt,
    Order,
    OrderOpt,
    OutputOpt,
    ProfileOpt,
    RepeatsOpt,
    check_comm,
    check_output_path,
    check_profile,
    devices_opt,
    progress_bar,
    reuse_opt,
    tree_opt,
    under_mpi,
    write_amplitudes,
)

logger = logging.getLogger(__name__)


def plan(
    circuit: Path = typer.Argument(
        ..., help="Circuit or network file, or a saved plan (.json) to report on without searching."
    ),
    bitstring: Optional[str] = BitstringOpt,
    output: Optional[Path] = OutputOpt,
    order: Order = OrderOpt,
    dtype: Dtype = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    max_time: Optional[float] = MaxTimeOpt,
    max_repeats: Optional[int] = RepeatsOpt,
    profile: Optional[str] = ProfileOpt,
    devices: Optional[int] = devices_opt(
        "Devices P (a power of two) for --profile; default: one node."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="With --profile: write a PNG of the dp schedule."
    ),
    tree: Optional[Path] = tree_opt(
        "Plan along this tree instead of searching: a 'qsimdist search' tree, a saved plan, "
        "an SSA path (JSON list of pairs), {\"path\": linear path}, or a pickled cotengra "
        "ContractionTree (.pkl; read only files you trust). A qsimdist tree is planned on the "
        "network simplified as its file records (older files: by quimb's passes where that "
        "network is the one it was made for)."),
    reuse: bool = reuse_opt(
        "With --profile: each group keeps the step outputs worth keeping from one slice to "
        "the next, in the memory the schedule leaves free."),
    as_json: bool = JsonOpt,
) -> None:
    """Plan the contraction of CIRCUIT (path, slicing, lifetime layouts) and print a summary.

    --output FILE.json writes the plan, for 'qsimdist run'. With --profile and
    --devices, also plan its distribution over P devices and compare dp,
    forced-only and slice-only side by side. With --tree, plan along a given
    tree (see 'qsimdist search').
    """
    from ..api import plan as make
    from ..planner.plan import Plan

    if profile is None and (devices is not None or plot is not None or reuse):
        raise InvalidInputError(
            "--devices, --plot and --reuse need --profile NAME (see 'qsimdist profiles')")
    prof = check_profile(profile)  # an unknown name is refused before any planning
    if output is not None:
        check_output_path(output, "-o")
    if plot is not None:
        check_output_path(plot, "--plot")
    saved = saved_plan(circuit)
    if saved is not None and tree is not None:
        raise InvalidInputError("--tree plans a circuit or network; a saved plan has its tree")
    started = time.perf_counter()
    if saved is not None:
        logger.info("reading the saved plan %s", circuit)
        p = Plan.from_dict(saved, str(circuit))
    else:
        logger.info("planning %s", circuit)
        p = make(
            str(circuit),
            bitstrings=bitstring,
            order=order,
            dtype=dtype,
            # the distribution planner slices for the profile's memory itself
            memory_limit=memory_limit if profile is None else (memory_limit or "none"),
            max_time=max_time,
            max_repeats=max_repeats,
            progbar=sys.stderr.isatty(),
            tree=tree,
        )
        logger.info("planned in %.3f s: %.3e flops, %d slice(s)", time.perf_counter() - started,
                    p.stats.flops, p.stats.n_slices)
    report = None
    if prof is not None:
        from ..planner.distribution import scheduled_plan
        from ..report import distribution_report, format_report, plot_schedule

        logger.info("scheduling the plan on profile %s", prof.name)
        p_devices = devices if devices is not None else prof.devices_per_node
        report, schedules = distribution_report(p, prof, p_devices, reuse=reuse)
        # the plan written is the one the dp schedule runs: its slicing, with the schedule
        p = scheduled_plan(p, schedules["dp"])
        if plot is not None:
            plot_schedule(p, schedules["dp"], plot)
    if output is not None:
        p.save(output)
    if as_json:
        payload = report if report is not None else {"stats": p.stats.to_dict()}
        payload = dict(payload, file=str(output) if output else None)
        typer.echo(json.dumps(payload))
        return
    typer.echo(p.summary())
    if report is not None:
        typer.echo(format_report(report))
        for name, sched in schedules.items():
            for note in sched.refused[:3]:
                typer.echo(f"note ({name}): {note}", err=True)
    if output is not None:
        typer.echo(f"plan written to {output}")
    if plot is not None:
        typer.echo(f"plot written to {plot}")


def saved_plan(path: Path) -> Optional[dict]:
    """The parsed JSON of a saved qsimdist plan (top-level ``"schema": "qsimdist.plan"``) or None.

    Key order and spacing do not matter; the file is read once, size-capped.
    """
    from .._fileio import read_regular_bytes

    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    raw = read_regular_bytes(path, "plan or network JSON")
    if b"qsimdist.plan" not in raw:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None  # the network reader reports what is wrong with it
    if isinstance(data, dict) and data.get("schema") == "qsimdist.plan":
        return data
    return None


def run(
    plan_file: Path = typer.Argument(..., help="A plan written by 'qsimdist plan -o'."),
    backend: Backend = BackendOpt,
    memory_limit: Optional[str] = MemOpt,
    trace: Optional[Path] = typer.Option(
        None, "--trace",
        help="Under mpiexec: write each step's measured seconds, bytes and peak beside the "
        "prediction (input for 'qsimdist calibrate --from-trace').",
    ),
    gemm: str = GemmOpt,
    collectives: Comm = CommOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Execute a saved plan and print its result (amplitudes for circuit plans).

    Under 'mpiexec -n P' rank 0 reads the plan and sends it to every rank, which
    run its distributed schedule (made with 'plan --profile NAME --devices P');
    --memory-limit is then the limit per rank. A saved plan is already sliced:
    one peaking above --memory-limit is refused. Rank 0 prints the result.
    """
    from ..api import run_plan

    check_comm(collectives, backend)
    if trace is not None and not under_mpi():
        raise InvalidInputError("--trace records distributed runs: launch under mpiexec")
    # the protocol (rank 0 reads and sends the plan, every rank runs it) is the library's
    with progress_bar("slices") as progress:
        result = run_plan(plan_file, backend=backend, memory_limit=memory_limit,
                          executor="auto", gemm=gemm, collectives=collectives,
                          progress=progress, trace=trace)
    if result.rank != 0:
        return
    header = {"n_qubits": result.plan.meta.get("n_qubits"), "dtype": result.plan.dtype}
    write_amplitudes(result.chunks(BLOCK), header, result.stats, as_json, with_p=False)
