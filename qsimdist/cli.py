"""The ``qsimdist`` command line.

Every :class:`~qsimdist.errors.QsimdistError`, and every usage error (an
unknown option, a bad option value), becomes one line on stderr and exit code
2; no traceback is shown for bad input. With ``--json`` among the arguments
that line is one JSON object instead::

    {"error": {"type": "InvalidInputError", "message": "..."}, "exit_code": 2}

``-v`` logs the main stages on stderr (``-vv``: with details). The commands
and every option they take live in :mod:`qsimdist.commands`, one module per
command family; this module builds the app from them.
:mod:`qsimdist.commands.process` runs it and owns how a run ends, alone or
under ``mpiexec``.
"""

from __future__ import annotations

from typing import Optional

import typer

from .commands.amplitude import amplitude
from .commands.cache import cache_app
from .commands.common import VerboseOpt, VersionOpt
from .commands.contract import contract
from .commands.expect import expect
from .commands.machine import calibrate, profiles
from .commands.plans import plan, run
from .commands.process import configure_logging, run_app, run_console
from .commands.qec import decode
from .commands.sample import sample
from .commands.search import search
from .commands.version import version

app = typer.Typer(
    name="qsimdist",
    help="Exact tensor-network simulation of quantum circuits, planned for one or many devices.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(show_version: bool = VersionOpt, verbose: int = VerboseOpt) -> None:
    """Exact tensor-network simulation of quantum circuits, planned for one or many devices."""
    configure_logging(verbose)


# in the order 'qsimdist --help' lists them
for command in (amplitude, plan, run, version, profiles, calibrate, expect, contract, search,
                sample, decode):
    app.command()(command)
app.add_typer(cache_app, name="cache")


def __getattr__(name: str):
    # the click command behind the typer app, for tools that read click (the docs'
    # mkdocs-click page); built on first use, so a command's start does not pay for it
    if name == "click_command":
        return typer.main.get_command(app)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: runs the CLI, turning qsimdist errors into one line and exit code 2.

    Under mpiexec with several ranks, SIGINT and SIGTERM abort every rank, an
    error every rank agreed on exits them all with code 2 (rank 0 prints it),
    and any other failure on one rank prints that rank's error and aborts the
    job; a command that succeeds ends with every rank on one barrier (see
    :mod:`qsimdist.commands.process`).
    """
    return run_app(app, argv)


def console_main() -> None:
    """Console entry point (``qsimdist`` and ``python -m qsimdist``)."""
    run_console(main)


if __name__ == "__main__":
    console_main()
