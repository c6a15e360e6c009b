"""``qsimdist profiles`` and ``qsimdist calibrate``: the hardware profiles plans are made for."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from ..config import format_bytes
from ..errors import InvalidInputError
from .common import JsonOpt, OutputOpt, check_output_path


def profile_row(p) -> dict:
    """A hardware profile as plain JSON data, with its derived sizes."""
    import dataclasses

    row = dataclasses.asdict(p)
    row["usable_memory"] = p.usable_memory
    row["max_devices"] = p.max_devices()
    return row


def profiles(as_json: bool = JsonOpt) -> None:
    """List the bundled hardware profiles (backends/*.toml), with per-device numbers.

    --json prints them as one JSON list.
    """
    from ..hardware import list_profiles

    found = list_profiles()
    if as_json:
        typer.echo(json.dumps([profile_row(p) for p in found]))
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


def calibrate(
    output: Optional[Path] = OutputOpt,
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
    local_costs: Optional[Path] = typer.Option(
        None, "--local-costs",
        help="Also fit the single-device kernel prices (BLAS call, GEMM rate and efficiency, "
             "copy and permutation) and write them to this .toml file; set "
             "QSIMDIST_LOCAL_COSTS to it to plan with them.",
    ),
) -> None:
    """Measure this machine (GEMM, copy bandwidth, memory; Alltoall under mpiexec) as a profile.

    --output names the profile file to write, e.g. backends/mybox.toml (required
    unless --local-costs is given). With --from-trace, fit GEMM rate, per-step
    overhead, link bandwidth and latency to the steps of measured distributed runs
    instead. --local-costs FILE.toml fits the prices the single-device planner
    chooses its kernels with; QSIMDIST_LOCAL_COSTS=FILE.toml makes plans use them.
    """
    from ..hardware import save_profile
    from ..hardware.calibrate import calibrate as measure

    if output is None and local_costs is None:
        raise InvalidInputError("calibrate needs --output FILE.toml (the profile file to "
                                "write) or --local-costs FILE.toml (the kernel prices)")
    for path, flag in ((output, "-o"), (local_costs, "--local-costs")):
        if path is None:
            continue
        if path.suffix != ".toml":
            raise InvalidInputError(f"{flag} file must end in .toml, got {str(path)!r}")
        # fail before measuring when the file cannot be written (a folder, a file in the way)
        check_output_path(path, flag)
    if local_costs is not None:
        _write_local_costs(local_costs, quick)
    if output is None:
        return

    if from_trace:
        from ..hardware import load_profile
        from ..hardware.calibrate import fit_from_traces

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


def _write_local_costs(path: Path, quick: bool) -> None:
    """Fit the kernel prices here and write them (rank 0 alone under MPI)."""
    import time

    from ..hardware.calibrate import measure_local_costs
    from ..hardware.costs import DEFAULT_COSTS, FITTED_LOCAL_FIELDS
    from ..hardware.local_costs import save_local_costs

    fitted = measure_local_costs(quick=quick)
    if "mpi4py.MPI" in sys.modules and sys.modules["mpi4py.MPI"].COMM_WORLD.Get_rank() != 0:
        return
    save_local_costs(fitted, path, source=f"measured by qsimdist calibrate --local-costs"
                                          f"{' --quick' if quick else ''} on "
                                          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    typer.echo("local kernel costs (fitted; default in brackets):")
    for name in FITTED_LOCAL_FIELDS:
        typer.echo(f"  {name:<14} {getattr(fitted, name):11.4g}  "
                   f"[{getattr(DEFAULT_COSTS, name):.4g}]")
    typer.echo(f"written to {path}; plan with them: export QSIMDIST_LOCAL_COSTS={path}")
