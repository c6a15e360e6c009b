"""``qsimdist version``: the installed version (``qsimdist --version`` prints the same)."""

from __future__ import annotations

import typer


def version() -> None:
    """Print the qsimdist version."""
    from .. import __version__

    typer.echo(__version__)
