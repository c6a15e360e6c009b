"""``python -m benchmarks run`` and ``python -m benchmarks report``: the peer comparison suite.

Run from a source checkout (the harness, its trees and plans are not in the wheel)::

    python -m benchmarks run --suite quick --json docs/bench/quick.json --data ../shared/data
    python -m benchmarks report docs/bench/quick.json
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def bench(
    suite: str = typer.Option(
        "quick", "--suite", help="tiny (seconds, for tests), quick (< 10 min on 2 cores) or full."
    ),
    json_path: Optional[Path] = typer.Option(
        None, "--json", help="Write every number, the command line, versions and machine here."
    ),
    out: Path = typer.Option(Path("docs/bench"), "--out", help="Folder for the report's PNGs."),
    report: bool = typer.Option(
        False, "--report", help="Regenerate the marked section of --benchmarks and the plots."
    ),
    benchmarks: Path = typer.Option(
        Path("docs/benchmarks/history.md"), "--benchmarks", help="Markdown file whose marked "
        "section --report replaces (text outside the markers is kept byte for byte)."
    ),
    data: Optional[Path] = typer.Option(
        None, "--data", help="Reference data folder (default $QSIMDIST_SHARED_DATA or "
        "../shared/data); comparisons needing absent files are skipped with the reason."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    sections: Optional[list[str]] = typer.Option(
        None, "--sections", help="Run only these sections (comma-separated or repeated): "
        "same_path, end_to_end, mpi, planning, first_amplitude, primitives, deep_amplitude."
    ),
) -> None:
    """Benchmark qsimdist beside cotengra, quimb, Qiskit Aer, qsim and itself under MPI."""
    from benchmarks.suite import SECTIONS, bench_command, get_suite

    get_suite(suite)  # a bad name fails before anything runs
    only = None
    if sections is not None:  # unknown names: run_suite raises before anything runs
        only = tuple(name.strip() for value in sections for name in value.split(",")
                     if name.strip())
        if not only:
            from qsimdist.errors import InvalidInputError

            raise InvalidInputError(f"--sections names no section; valid: {', '.join(SECTIONS)}")
    bench_command(suite, json_path, out, report, benchmarks, data, quiet, only=only)


def bench_report(
    json_file: Path = typer.Argument(..., help="A JSON file written by python -m benchmarks run --json."),
    out: Path = typer.Option(Path("docs/bench"), "--out", help="Folder for the PNGs."),
    benchmarks: Path = typer.Option(
        Path("docs/benchmarks/history.md"), "--benchmarks",
        help="Markdown file whose marked section is replaced."
    ),
) -> None:
    """Regenerate the marked suite section of docs/benchmarks/history.md and its plots."""
    from benchmarks.report_md import report_command

    written = report_command(json_file, benchmarks, out)
    typer.echo(f"report written to {benchmarks} and {', '.join(str(p) for p in written)}")


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m benchmarks``: qsimdist errors become one line and exit code 2."""
    from qsimdist.errors import QsimdistError

    app = typer.Typer(name="python -m benchmarks", add_completion=False, no_args_is_help=True,
                      pretty_exceptions_enable=False,
                      context_settings={"help_option_names": ["-h", "--help"]},
                      help="qsimdist beside cotengra, quimb, Qiskit Aer and qsim (source checkout).")
    app.command(name="run")(bench)
    app.command(name="report")(bench_report)
    try:
        rv = app(args=argv, standalone_mode=False)
    except QsimdistError as exc:
        typer.echo(f"benchmarks: error: {exc}", err=True)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # click's usage errors carry format_message()
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            typer.echo(f"benchmarks: error: {exc.format_message()}", err=True)
            return 2
        raise
    return rv if isinstance(rv, int) else 0
