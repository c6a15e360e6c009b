"""The ``qsimdist`` command line.

Every :class:`~qsimdist.errors.QsimdistError` becomes one line on stderr and
exit code 2; no traceback is shown for bad input.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .config import DTYPES, ORDERS, format_bytes
from .errors import InvalidInputError, PlanFormatError, QsimdistError

app = typer.Typer(
    name="qsimdist",
    help="Exact tensor-network simulation of quantum circuits, planned for one or many devices.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

CircuitArg = typer.Argument(
    ..., help="Circuit file (.qasm OpenQASM 2/3, .qasm3, .qsim) or network (.json + .npz)."
)
OrderOpt = typer.Option("qiskit", "--order", help=f"Bitstring order: {' or '.join(ORDERS)}.")
DtypeOpt = typer.Option("complex64", "--dtype", help=f"One of {', '.join(DTYPES)}.")
MemOpt = typer.Option(
    None,
    "--memory-limit",
    help="Peak memory allowed, e.g. 8GiB; slices to fit. Default: 80% of the memory available now "
    "($QSIMDIST_MEMORY_LIMIT overrides; 'none': no slicing, bounded by physical memory + swap).",
)
MaxTimeOpt = typer.Option(None, "--max-time", help="Path search budget in seconds.")
RepeatsOpt = typer.Option(None, "--max-repeats", help="Path search trials.")
JsonOpt = typer.Option(False, "--json", help="Print one JSON object instead of text.")
BackendOpt = typer.Option("numpy", "--backend", help="Array library: numpy or cupy.")
GemmOpt = typer.Option(
    "complex", "--gemm",
    help="How BLAS steps multiply: complex (default); 3m (three real GEMMs on large steps, "
    "slightly less accurate); tf32, 3m-tf32 (--backend cupy, complex64: cuBLAS's TF32 "
    "compute type, less accurate; BENCHMARKS.md section 18).")


def _fail(msg: str) -> None:
    typer.echo(f"qsimdist: error: {msg}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def _progress(label: str):
    """A progress callback drawing a bar on stderr when it is a terminal (else silent)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(*args) -> None:
            done, total = args[-2], args[-1]
            bar.update(task, completed=done, total=total)

        yield update


#: amplitudes formatted and written per block, so output memory stays bounded
_BLOCK = 1 << 12


def _output_fault(out=None) -> None:
    """Under mpiexec, the fault injected ``at=output`` (after the first block is written)."""
    if "mpi4py.MPI" in sys.modules and os.environ.get("QSIMDIST_FAULT_INJECT"):
        from .executors.mpi import fault_point

        if out is not None:
            out.flush()
        fault_point("output", sys.modules["mpi4py.MPI"].COMM_WORLD)


def _write_amplitudes(chunks, header: dict, stats: dict, as_json: bool, with_p: bool) -> None:
    """Stream (bitstrings, amplitudes) blocks to stdout as text lines or one JSON object.

    Nothing holds more than one block of strings, whatever the number of amplitudes.
    """
    import numpy as np

    out = sys.stdout
    if as_json:
        head = json.dumps(header)
        out.write(head[:-1] + (", " if header else "") + '"amplitudes": [')
        first = True
        for labels, vals in chunks:
            re_, im_ = vals.real.tolist(), vals.imag.tolist()
            if np.isfinite(vals).all():  # labels are 0/1/digits; repr(float) is JSON's number
                body = ", ".join(f'{{"bitstring": "{b}", "re": {r!r}, "im": {i!r}}}'
                                 for b, r, i in zip(labels, re_, im_))
            else:
                body = ", ".join(json.dumps({"bitstring": b, "re": r, "im": i})
                                 for b, r, i in zip(labels, re_, im_))
            if body:
                out.write(body if first else ", " + body)
                if first:
                    _output_fault(out)
                first = False
        out.write('], "stats": ' + json.dumps(stats) + "}\n")
        out.flush()
        return
    for labels, vals in chunks:
        re_, im_ = vals.real.tolist(), vals.imag.tolist()
        if with_p:
            lines = [f"{b}  {r:+.8e} {i:+.8e}j  p={r * r + i * i:.6e}"
                     for b, r, i in zip(labels, re_, im_)]
        else:
            lines = [f"{b}  {r:+.8e} {i:+.8e}j" for b, r, i in zip(labels, re_, im_)]
        if lines:
            out.write("\n".join(lines) + "\n")
            _output_fault(out)
    out.flush()


def _check_output_path(path: Path, option: str) -> None:
    """Refuse, before any long work, an output path that cannot be a file."""
    from ._fileio import check_output_target

    check_output_target(path, option)


def _read_bitstrings(bitstrings: list[str], bitstrings_file: Optional[Path]) -> list[str]:
    from ._fileio import read_input_text

    out = list(bitstrings)
    if bitstrings_file is not None:
        # regular files only (a FIFO never blocks), size-capped, one-line errors
        text = read_input_text(bitstrings_file, "bitstrings", InvalidInputError)
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line.split()[0])
    return out


@app.command()
def amplitude(
    circuit: Path = CircuitArg,
    bitstrings: Optional[list[str]] = typer.Argument(
        None, help="Bitstrings (0, 1, * for open qubits). Default: all zeros."
    ),
    bitstrings_file: Optional[Path] = typer.Option(
        None, "--bitstrings-file", help="File with one bitstring per line."
    ),
    order: str = OrderOpt,
    dtype: str = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    backend: str = BackendOpt,
    max_time: Optional[float] = MaxTimeOpt,
    max_repeats: Optional[int] = RepeatsOpt,
    profile: Optional[str] = typer.Option(
        None, "--profile",
        help="Under mpiexec: hardware profile the distributed plan is made for (default "
        "local-cpu); --memory-limit is then the limit per rank.",
    ),
    gemm: str = GemmOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Amplitudes <b|U|0> of CIRCUIT for each bitstring (rightmost character = qubit 0).

    Under 'mpiexec -n P' the plan is made once on rank 0 for P ranks and run
    distributed; rank 0 prints the result.
    """
    from .api import amplitudes, distributed_amplitudes
    from .engine.amplitudes import load_circuit, path_options_from

    options = dict(order=order, dtype=dtype, memory_limit=memory_limit, backend=backend,
                   gemm=gemm)
    with _progress("contracting") as progress:
        if _under_mpi():
            # rank 0 alone reads the circuit and the bitstrings, routes and plans
            opts = path_options_from(None, max_time, max_repeats)
            res = distributed_amplitudes(
                circuit, lambda n: _read_bitstrings(bitstrings or [], bitstrings_file)
                or ["0" * n], profile=profile, opts=opts, progress=progress, **options)
        else:
            gc = load_circuit(circuit)
            bits = _read_bitstrings(bitstrings or [], bitstrings_file) or ["0" * gc.n_qubits]
            res = amplitudes(gc, bits, max_time=max_time, max_repeats=max_repeats,
                             progress=progress, profile=profile, **options)
    if _rank() != 0:
        _output_fault()
        return
    header = {"n_qubits": res.n_qubits, "dtype": res.dtype, "order": res.order}
    _write_amplitudes(res.chunks(_BLOCK), header, res.stats, as_json, with_p=True)
    if as_json:
        return
    s = res.stats
    typer.echo(
        f"# {len(res)} amplitude(s), {s.get('method', 'tensor-network')} route, "
        f"{s['contractions']} contraction(s), "
        f"{s['flops']:.3e} flops, plan {s['plan_seconds']:.2f}s, execute "
        f"{s['execute_seconds']:.2f}s, peak {format_bytes(s['peak_bytes'])}",
        err=True,
    )


@app.command()
def plan(
    circuit: Path = typer.Argument(
        ..., help="Circuit or network file, or a saved plan (.json) to report on without searching."
    ),
    bitstring: Optional[str] = typer.Option(
        None, "--bitstring", "-b", help="Bitstring pattern (* = open). Default: all zeros."
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the plan JSON here."),
    order: str = OrderOpt,
    dtype: str = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    max_time: Optional[float] = MaxTimeOpt,
    max_repeats: Optional[int] = RepeatsOpt,
    profile: Optional[str] = typer.Option(
        None, "--profile",
        help="Hardware profile (see 'qsimdist profiles') for a distribution report (predicted).",
    ),
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
    as_json: bool = JsonOpt,
) -> None:
    """Plan the contraction of CIRCUIT (path, slicing, lifetime layouts) and print a summary.

    With --profile and --devices, also plan its distribution over P devices and
    compare dp, forced-only and slice-only side by side. With --tree, plan along
    a given tree (see 'qsimdist search').
    """
    from .api import plan as make
    from .planner.plan import Plan

    if profile is None and (devices is not None or plot is not None):
        raise InvalidInputError(
            "--devices and --plot need --profile NAME (see 'qsimdist profiles')")
    if output is not None:
        _check_output_path(output, "-o")
    if plot is not None:
        _check_output_path(plot, "--plot")
    saved = _saved_plan(circuit)
    if saved is not None and tree is not None:
        raise InvalidInputError("--tree plans a circuit or network; a saved plan has its tree")
    if saved is not None:
        p = Plan.from_dict(saved, str(circuit))
    else:
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
    report = None
    if profile is not None:
        from .hardware import load_profile
        from .planner.distribution import scheduled_plan
        from .report import distribution_report, format_report, plot_schedule

        prof = load_profile(profile)
        p_devices = devices if devices is not None else prof.devices_per_node
        report, schedules = distribution_report(p, prof, p_devices)
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


def _saved_plan(path: Path) -> Optional[dict]:
    """The parsed JSON of a saved qsimdist plan (top-level ``"schema": "qsimdist.plan"``) or None.

    Key order and spacing do not matter; the file is read once, size-capped.
    """
    from ._fileio import read_regular_bytes

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


@app.command()
def run(
    plan_file: Path = typer.Argument(..., help="A plan written by 'qsimdist plan -o'."),
    backend: str = BackendOpt,
    memory_limit: Optional[str] = typer.Option(
        None,
        "--memory-limit",
        help="Refuse plans peaking above this, e.g. 8GiB. Default: 80% of the memory available "
        "now ($QSIMDIST_MEMORY_LIMIT overrides); 'none': physical memory + swap.",
    ),
    trace: Optional[Path] = typer.Option(
        None, "--trace",
        help="Under mpiexec: write each step's measured seconds, bytes and peak beside the "
        "prediction (input for 'qsimdist calibrate --from-trace').",
    ),
    gemm: str = GemmOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Execute a saved plan and print its result (amplitudes for circuit plans).

    Under 'mpiexec -n P' rank 0 reads the plan and sends it to every rank, which
    run its distributed schedule (made with 'plan --profile NAME --devices P');
    --memory-limit is then the limit per rank. Rank 0 prints the result.
    """
    import numpy as np

    from .api import check_plan_fits
    from .engine.amplitudes import to_numpy
    from .config import check_gemm
    from .frontends import bitstring_chunks
    from .planner.plan import Plan

    options: dict = {}
    if _under_mpi():
        from .engine.distributed import plan_on_root, world

        comm = world()
        p = plan_on_root(lambda: Plan.load(plan_file), comm)
        from .engine.distributed import rank_memory_limit
        from .executors.mpi import RunStats

        # per rank: explicit as given, else the host's share ('none': of its physical memory)
        options = {"executor": "mpi", "comm": comm,
                   "memory_limit": rank_memory_limit(memory_limit, comm), "stats": RunStats()}
    else:
        if trace is not None:
            raise InvalidInputError("--trace records distributed runs: launch under mpiexec")
        p = Plan.load(plan_file)
    options["gemm"] = check_gemm(gemm, backend, p.dtype)  # on every rank, before any work
    if "comm" not in options:
        check_plan_fits(p, memory_limit)  # before anything is allocated
    pattern = p.meta.get("bitstring")
    with _progress("slices") as progress:
        value = np.asarray(to_numpy(p.execute(backend=backend, progress=progress,
                                               **options))).reshape(-1)
    if "stats" in options:
        gathered = options["comm"].gather(options["stats"].to_dict(), root=0)
        if trace is not None and _rank() == 0:
            from .executors.mpi import write_trace

            write_trace(trace, p, gathered, max(st["seconds"] for st in gathered))
    if _rank() != 0:
        return
    if pattern and (1 << pattern.count("*")) != value.size:
        raise PlanFormatError(
            f"{plan_file}: field 'meta.bitstring' leaves {pattern.count('*')} qubits open but the "
            f"result holds {value.size} amplitudes"
        )

    def chunks():
        start = 0
        if pattern:
            blocks = bitstring_chunks(pattern, chunk=_BLOCK)
        else:
            blocks = ([str(k) for k in range(a, min(a + _BLOCK, value.size))]
                      for a in range(0, value.size, _BLOCK))
        for labels in blocks:
            yield labels, value[start:start + len(labels)]
            start += len(labels)

    header = {"n_qubits": p.meta.get("n_qubits"), "dtype": p.dtype}
    _write_amplitudes(chunks(), header, p.stats.to_dict(), as_json, with_p=False)


@app.command()
def version() -> None:
    """Print the qsimdist version."""
    typer.echo(__version__)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", callback=_print_version,
                                      is_eager=True, help="Print the version and exit."),
) -> None:
    """Exact tensor-network simulation of quantum circuits, planned for one or many devices."""


def _profile_row(p) -> dict:
    """A hardware profile as plain JSON data, with its derived sizes."""
    import dataclasses

    row = dataclasses.asdict(p)
    row["usable_memory"] = p.usable_memory
    row["max_devices"] = p.max_devices()
    return row


@app.command()
def profiles(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of profiles."),
) -> None:
    """List the bundled hardware profiles (backends/*.toml), with per-device numbers."""
    from .hardware import list_profiles

    found = list_profiles()
    if as_json:
        typer.echo(json.dumps([_profile_row(p) for p in found]))
        return
    head = ("name", "dev/node", "max dev", "mem/dev GB", "c64 TFLOP/s", "HBM TB/s", "intra GB/s",
            "inter GB/s")
    rows = [
        (
            p.name,
            str(p.devices_per_node),
            "any" if p.max_devices() is None else str(p.max_devices()),
            f"{p.memory_bytes / 1e9:.1f}",
            f"{p.flop_rate('complex64') / 1e12:.2f}",
            f"{p.mem_bandwidth / 1e12:.3f}",
            f"{p.intra_bandwidth / 1e9:.1f}",
            f"{p.inter_bandwidth / 1e9:.1f}",
        )
        for p in found
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        typer.echo("  ".join(cells).rstrip())


@app.command()
def calibrate(
    output: Path = typer.Option(
        ..., "--output", "-o", help="Profile file to write, e.g. backends/mybox.toml."
    ),
    name: Optional[str] = typer.Option(
        None, "--name", help="Profile name. Default: the file's stem."
    ),
    quick: bool = typer.Option(
        False, "--quick", help="Small problems (about a second); rougher numbers."
    ),
    from_trace: Optional[list[Path]] = typer.Option(
        None, "--from-trace",
        help="Fit the profile to measured runs instead ('run --trace' files; repeatable).",
    ),
    base: str = typer.Option(
        "local-cpu", "--base", help="With --from-trace: the profile whose other fields are kept."
    ),
) -> None:
    """Measure this machine (GEMM, copy bandwidth, memory; Alltoall under mpiexec) as a profile.

    With --from-trace, fit GEMM rate, per-step overhead, link bandwidth and
    latency to the steps of measured distributed runs instead.
    """
    from .hardware import save_profile
    from .hardware.calibrate import calibrate as measure

    if output.suffix != ".toml":
        raise InvalidInputError(f"profile file must end in .toml, got {str(output)!r}")
    # fail before measuring when the file cannot be written (a folder, or a file in the way)
    _check_output_path(output, "-o")

    if from_trace:
        from .hardware import load_profile
        from .hardware.calibrate import fit_from_traces

        profile = fit_from_traces(load_profile(base), from_trace,
                                  output.stem if name is None else name)
    else:
        profile = measure(output.stem if name is None else name, quick=quick)
    rank = 0
    if "mpi4py.MPI" in sys.modules:  # calibrate ran under MPI: only rank 0 writes and prints
        rank = sys.modules["mpi4py.MPI"].COMM_WORLD.Get_rank()
    if rank != 0:
        return
    save_profile(profile, output)
    typer.echo(f"profile {profile.name!r}: {profile.description}")
    for dtype, rate in profile.flops.items():
        typer.echo(f"  {dtype:<16} {rate / 1e9:10.2f} GFLOP/s")
    typer.echo(f"  {'memory':<16} {format_bytes(profile.memory_bytes):>16} per device")
    typer.echo(f"  {'copy bandwidth':<16} {profile.mem_bandwidth / 1e9:10.2f} GB/s (read + write)")
    typer.echo(f"  {'intra-node':<16} {profile.intra_bandwidth / 1e9:10.2f} GB/s, "
               f"{profile.intra_latency * 1e6:.2f} us latency")
    typer.echo(f"  {'inter-node':<16} {profile.inter_bandwidth / 1e9:10.2f} GB/s, "
               f"{profile.inter_latency * 1e6:.2f} us latency")
    typer.echo(f"written to {output}")


from .qiskit.expect_command import expect as _expect  # noqa: E402

app.command(name="expect")(_expect)

from .contract_command import contract_command as _contract_command  # noqa: E402

app.command(name="contract")(_contract_command)

from .search_command import search_command as _search_command  # noqa: E402

app.command(name="search")(_search_command)

from .bench.command import bench as _bench  # noqa: E402
from .bench.command import bench_report as _bench_report  # noqa: E402

app.command(name="bench")(_bench)
app.command(name="bench-report")(_bench_report)


from .qiskit.cli_commands import sample as _sample  # noqa: E402

app.command(name="sample")(_sample)

from .qec.command import decode_command as _decode  # noqa: E402

app.command(name="decode")(_decode)


def _under_mpi() -> bool:
    """Started by mpiexec with more than one rank."""
    from .executors import launched_under_mpi

    return launched_under_mpi()


def _rank() -> int:
    """This process's MPI rank (0 when MPI was never started)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return 0
    return mpi.COMM_WORLD.Get_rank()


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: runs the CLI, turning qsimdist errors into one line and exit code 2.

    Under mpiexec with several ranks, SIGINT and SIGTERM abort every rank, an
    error every rank agreed on exits them all with code 2 (rank 0 prints it),
    and any other failure on one rank prints that rank's error and aborts the
    job; a command that succeeds ends with every rank on one barrier.
    """
    if _under_mpi():
        from .executors.liveness import abort_on_signals

        abort_on_signals()
    _agreed.clear()
    try:
        rv = _main(argv)
    except BaseException as exc:  # escaped every handler: under MPI, every rank must end
        world = _mpi_world()
        if world is not None:
            from .executors.liveness import fail_rank

            fail_rank(world, exc)
        raise
    world = _mpi_world()
    if world is not None:
        from .executors.liveness import barrier_sleeping, fail_rank

        if rv not in (0, None) and not _agreed:  # this rank alone failed (file error, ^C)
            fail_rank(world, SystemExit(rv), code=rv)
        try:
            barrier_sleeping(world)  # every rank ends together
        except BaseException as exc:  # an interrupt while waiting for the other ranks
            fail_rank(world, exc)
    return rv


def _mpi_world():
    """``MPI.COMM_WORLD`` when MPI runs with several ranks, else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    world = mpi.COMM_WORLD
    return world if world.Get_size() > 1 else None


#: set when the command's error was raised alike on every rank (so no rank aborts)
_agreed: dict = {}


def _main(argv: Optional[list[str]] = None) -> int:
    try:
        # typer turns Ctrl-C into exit code 130 and returns every typer.Exit's code
        # (standalone_mode=False); a command that finishes returns None
        rv = app(args=argv, standalone_mode=False)
    except QsimdistError as exc:
        world = _mpi_world()
        if world is not None:
            from .executors.liveness import fail_rank, is_collective

            if not is_collective(exc):  # one rank's error: every rank must end
                fail_rank(world, exc)
            _agreed["error"] = str(exc)
        if _rank() == 0:  # under mpiexec every rank raises the same error; one prints it
            typer.echo(f"qsimdist: error: {exc}", err=True)
        return 2
    except typer.Exit as exc:
        rv = exc.exit_code
    except KeyboardInterrupt:
        rv = 130
    except OSError as exc:
        # last resort: a file operation failed in a way nothing above foresaw
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        what = exc.strerror or str(exc) or type(exc).__name__
        typer.echo(f"qsimdist: error: {what}" + (f": {where}" if where else ""), err=True)
        return 2
    except Exception as exc:
        # click's usage errors (unknown option, missing argument, bad type)
        # carry format_message(); typer vendors click, so test by shape.
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            typer.echo(f"qsimdist: error: {exc.format_message()}", err=True)
            return 2
        if type(exc).__name__ == "Abort":
            rv = 130
        else:
            raise
    if rv == 130:
        typer.echo("qsimdist: interrupted", err=True)
        return 130
    return rv if isinstance(rv, int) else 0


def _exit_now(code: int) -> None:
    """Leave the process with ``code`` without tearing the interpreter down.

    Freeing every module's objects at exit costs about 0.15 s once Qiskit is
    loaded, a sixth of a small circuit's whole command. Output is flushed and
    the ``atexit`` handlers run first (temporary files, logging); this is
    skipped (a normal exit) under MPI, whose finalisation must run, and while
    any other thread is alive.
    """
    if "mpi4py.MPI" in sys.modules or threading.active_count() > 1:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    atexit._run_exitfuncs()
    os._exit(code)


#: seconds a Ctrl-C'd command may take to unwind before the process ends regardless
INTERRUPT_GRACE_SECONDS = 5.0


def _interrupt_with_deadline() -> None:
    """SIGINT raises ``KeyboardInterrupt`` as usual, and ends the process anyway if that
    has not done so within ``INTERRUPT_GRACE_SECONDS`` (a library that swallows the
    interrupt, or a long native call, must not keep a Ctrl-C'd command running).

    Only the console entry point installs it (one process, its main thread); partial
    output files are written under temporary names, so nothing half-written is left.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return  # ignored, or someone else's handler: leave it

    def on_sigint(signum, frame):
        def deadline() -> None:
            time.sleep(INTERRUPT_GRACE_SECONDS)
            sys.stderr.write("qsimdist: interrupted\n")
            sys.stderr.flush()
            atexit._run_exitfuncs()
            os._exit(130)

        threading.Thread(target=deadline, name="qsimdist-interrupt-deadline",
                         daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


def console_main() -> None:
    """Console entry point (``qsimdist`` and ``python -m qsimdist``)."""
    if not _under_mpi():
        _interrupt_with_deadline()
    _exit_now(main())


if __name__ == "__main__":
    console_main()
