"""``qsimdist plan`` and ``qsimdist run``: plan a contraction, save it, execute a saved one."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from ..errors import InvalidInputError, PlanFormatError
from .common import (
    BLOCK,
    Backend,
    BackendOpt,
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
    progress_bar,
    rank,
    under_mpi,
    write_amplitudes,
)

logger = logging.getLogger(__name__)


def plan(
    circuit: Path = typer.Argument(
        ..., help="Circuit or network file, or a saved plan (.json) to report on without searching."
    ),
    bitstring: Optional[str] = typer.Option(
        None, "--bitstring", "-b", help="Bitstring pattern (* = open). Default: all zeros."
    ),
    output: Optional[Path] = OutputOpt,
    order: Order = OrderOpt,
    dtype: Dtype = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    max_time: Optional[float] = MaxTimeOpt,
    max_repeats: Optional[int] = RepeatsOpt,
    profile: Optional[str] = ProfileOpt,
    devices: Optional[int] = typer.Option(
        None, "--devices", help="Devices P (a power of two) for --profile; default: one node."
    ),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="With --profile: write a PNG of the dp schedule."
    ),
    tree: Optional[Path] = typer.Option(
        None, "--tree", help="Plan along this tree instead of searching: a 'qsimdist search' "
        "tree, a saved plan, an SSA path (JSON list of pairs), {\"path\": linear path}, or a "
        "pickled cotengra ContractionTree (.pkl; read only files you trust)."
    ),
    reuse: bool = typer.Option(
        False, "--reuse", help="With --profile: each group keeps the step outputs worth "
        "keeping from one slice to the next, in the memory the schedule leaves free."
    ),
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
    import numpy as np

    from ..api import check_plan_fits
    from ..engine.amplitudes import to_numpy
    from ..config import check_gemm
    from ..frontends import bitstring_chunks
    from ..planner.plan import Plan

    check_comm(collectives, backend)
    options: dict = {}
    if under_mpi():
        from ..engine.coordination import plan_on_root, world

        comm = world()
        p = plan_on_root(lambda: Plan.load(plan_file), comm)
        from ..engine.coordination import rank_memory_limit
        from ..executors.mpi import RunStats

        # per rank: explicit as given, else the host's share ('none': of its physical memory)
        options = {"executor": "mpi", "comm": comm,
                   "memory_limit": rank_memory_limit(memory_limit, comm), "stats": RunStats(),
                   "collectives": collectives}
    else:
        if trace is not None:
            raise InvalidInputError("--trace records distributed runs: launch under mpiexec")
        p = Plan.load(plan_file)
    options["gemm"] = check_gemm(gemm, backend, p.dtype)  # on every rank, before any work
    if "comm" not in options:
        check_plan_fits(p, memory_limit)  # before anything is allocated
    pattern = p.meta.get("bitstring")
    logger.info("executing %s on %s: %d slice(s), %.3e flops", plan_file, backend,
                p.stats.n_slices, p.stats.flops)
    started = time.perf_counter()
    with progress_bar("slices") as progress:
        value = np.asarray(to_numpy(p.execute(backend=backend, progress=progress,
                                               **options))).reshape(-1)
    logger.info("executed in %.3f s", time.perf_counter() - started)
    if "stats" in options:
        gathered = options["comm"].gather(options["stats"].to_dict(), root=0)
        if trace is not None and rank() == 0:
            from ..executors.mpi import write_trace

            write_trace(trace, p, gathered, max(st["seconds"] for st in gathered))
    if rank() != 0:
        return
    if pattern and (1 << pattern.count("*")) != value.size:
        raise PlanFormatError(
            f"{plan_file}: field 'meta.bitstring' leaves {pattern.count('*')} qubits open but the "
            f"result holds {value.size} amplitudes"
        )

    def chunks():
        start = 0
        if pattern:
            blocks = bitstring_chunks(pattern, chunk=BLOCK)
        else:
            blocks = ([str(k) for k in range(a, min(a + BLOCK, value.size))]
                      for a in range(0, value.size, BLOCK))
        for labels in blocks:
            yield labels, value[start:start + len(labels)]
            start += len(labels)

    header = {"n_qubits": p.meta.get("n_qubits"), "dtype": p.dtype}
    stats = p.stats.to_dict()
    if "stats" in options:  # each rank's measured bytes, peak, seconds and step runs
        from ..engine.amplitudes import merge_rank_stats

        per_rank: dict = {}
        merge_rank_stats(per_rank, gathered, p)
        stats["ranks"] = [per_rank[r] for r in sorted(per_rank)]
        stats["comm"] = gathered[0]["comm"]  # the collectives the run chose
    write_amplitudes(chunks(), header, stats, as_json, with_p=False)
