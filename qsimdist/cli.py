"""The ``qsimdist`` command line.

Every :class:`~qsimdist.errors.QsimdistError` becomes one line on stderr and
exit code 2; no traceback is shown for bad input.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .config import DTYPES, ORDERS, format_bytes
from .errors import InvalidInputError, QsimdistError

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
    help="Peak memory allowed, e.g. 8GiB; slices to fit. Default: 80% of this machine's memory "
    "($QSIMDIST_MEMORY_LIMIT overrides; 'none' for unlimited).",
)
MaxTimeOpt = typer.Option(None, "--max-time", help="Path search budget in seconds.")
RepeatsOpt = typer.Option(None, "--max-repeats", help="Path search trials.")
JsonOpt = typer.Option(False, "--json", help="Print one JSON object instead of text.")
BackendOpt = typer.Option("numpy", "--backend", help="Array library: numpy or cupy.")


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


def _read_bitstrings(bitstrings: list[str], bitstrings_file: Optional[Path]) -> list[str]:
    out = list(bitstrings)
    if bitstrings_file is not None:
        try:
            text = bitstrings_file.read_text()
        except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read bitstrings file {bitstrings_file}: {exc}") from None
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
    as_json: bool = JsonOpt,
) -> None:
    """Amplitudes <b|U|0> of CIRCUIT for each bitstring (rightmost character = qubit 0)."""
    from .api import _circuit, amplitudes

    gc = _circuit(circuit)
    bits = _read_bitstrings(bitstrings or [], bitstrings_file) or ["0" * gc.n_qubits]
    with _progress("contracting") as progress:
        res = amplitudes(
            gc,
            bits,
            order=order,
            dtype=dtype,
            memory_limit=memory_limit,
            backend=backend,
            max_time=max_time,
            max_repeats=max_repeats,
            progress=progress,
        )
    if as_json:
        typer.echo(json.dumps(res.to_dict()))
        return
    for b, a in res.items():
        typer.echo(f"{b}  {a.real:+.8e} {a.imag:+.8e}j  p={abs(a) ** 2:.6e}")
    s = res.stats
    typer.echo(
        f"# {len(res)} amplitude(s), {s['contractions']} contraction(s), "
        f"{s['flops']:.3e} flops, plan {s['plan_seconds']:.2f}s, execute "
        f"{s['execute_seconds']:.2f}s, peak {format_bytes(s['peak_bytes'])}",
        err=True,
    )


@app.command()
def plan(
    circuit: Path = CircuitArg,
    bitstring: Optional[str] = typer.Option(
        None, "--bitstring", "-b", help="Bitstring pattern (* = open). Default: all zeros."
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the plan JSON here."),
    order: str = OrderOpt,
    dtype: str = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    max_time: Optional[float] = MaxTimeOpt,
    max_repeats: Optional[int] = RepeatsOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Plan the contraction of CIRCUIT (path, slicing, lifetime layouts) and print a summary."""
    from .api import plan as make

    p = make(
        str(circuit),
        bitstrings=bitstring,
        order=order,
        dtype=dtype,
        memory_limit=memory_limit,
        max_time=max_time,
        max_repeats=max_repeats,
        progbar=sys.stderr.isatty(),
    )
    if output is not None:
        p.save(output)
    if as_json:
        typer.echo(json.dumps({"stats": p.stats.to_dict(), "file": str(output) if output else None}))
    else:
        typer.echo(p.summary())
        if output is not None:
            typer.echo(f"plan written to {output}")


@app.command()
def run(
    plan_file: Path = typer.Argument(..., help="A plan written by 'qsimdist plan -o'."),
    backend: str = BackendOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Execute a saved plan and print its result (amplitudes for circuit plans)."""
    import numpy as np

    from .api import _to_numpy
    from .frontends import expand_bitstring
    from .planner.plan import Plan

    p = Plan.load(plan_file)
    with _progress("slices") as progress:
        value = np.asarray(_to_numpy(p.execute(backend=backend, progress=progress))).reshape(-1)
    pattern = p.meta.get("bitstring")
    labels = expand_bitstring(pattern) if pattern else [str(k) for k in range(value.size)]
    if as_json:
        typer.echo(json.dumps({
            "n_qubits": p.meta.get("n_qubits"),
            "dtype": p.dtype,
            "amplitudes": [
                {"bitstring": b, "re": float(a.real), "im": float(a.imag)}
                for b, a in zip(labels, value)
            ],
            "stats": p.stats.to_dict(),
        }))
        return
    for b, a in zip(labels, value):
        typer.echo(f"{b}  {a.real:+.8e} {a.imag:+.8e}j")


@app.command()
def version() -> None:
    """Print the qsimdist version."""
    typer.echo(__version__)


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: runs the CLI, turning qsimdist errors into one line and exit code 2."""
    try:
        app(args=argv, standalone_mode=False)
    except QsimdistError as exc:
        typer.echo(f"qsimdist: error: {exc}", err=True)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        typer.echo("qsimdist: interrupted", err=True)
        return 130
    except Exception as exc:
        # click's usage errors (unknown option, missing argument, bad type)
        # carry format_message(); typer vendors click, so test by shape.
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            typer.echo(f"qsimdist: error: {exc.format_message()}", err=True)
            return 2
        if type(exc).__name__ == "Abort":
            return 130
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
