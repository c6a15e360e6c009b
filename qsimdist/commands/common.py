"""What the ``qsimdist`` commands share: their options, progress, output and MPI checks."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from ..config import DTYPES, ORDERS
from ..errors import InvalidInputError

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



def fail(msg: str) -> None:
    typer.echo(f"qsimdist: error: {msg}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def progress_bar(label: str):
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
BLOCK = 1 << 12


def output_fault(out=None) -> None:
    """Under mpiexec, the fault injected ``at=output`` (after the first block is written)."""
    if "mpi4py.MPI" in sys.modules and os.environ.get("QSIMDIST_FAULT_INJECT"):
        from ..executors.mpi import fault_point

        if out is not None:
            out.flush()
        fault_point("output", sys.modules["mpi4py.MPI"].COMM_WORLD)


def write_amplitudes(chunks, header: dict, stats: dict, as_json: bool, with_p: bool) -> None:
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
                    output_fault(out)
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
            output_fault(out)
    out.flush()


def check_output_path(path: Path, option: str) -> None:
    """Refuse, before any long work, an output path that cannot be a file."""
    from .._fileio import check_output_target

    check_output_target(path, option)


def read_bitstrings(bitstrings: list[str], bitstrings_file: Optional[Path]) -> list[str]:
    from .._fileio import read_input_text

    out = list(bitstrings)
    if bitstrings_file is not None:
        # regular files only (a FIFO never blocks), size-capped, one-line errors
        text = read_input_text(bitstrings_file, "bitstrings", InvalidInputError)
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line.split()[0])
    return out


def under_mpi() -> bool:
    """Started by mpiexec with more than one rank."""
    from ..executors import launched_under_mpi

    return launched_under_mpi()


def rank() -> int:
    """This process's MPI rank (0 when MPI was never started)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return 0
    return mpi.COMM_WORLD.Get_rank()
