"""``qsimdist cache info`` and ``qsimdist cache clear``: the disk cache of contraction paths.

The cache folder is ``$QSIMDIST_CACHE_DIR``, else the platform's user cache
folder (``$XDG_CACHE_HOME/qsimdist``, by default ``~/.cache/qsimdist``, on
Linux); its path entries are bounded by ``$QSIMDIST_CACHE_MAX_BYTES`` (default
256 MiB, least recently used removed first). See :mod:`qsimdist.planner.path_cache`.
"""

from __future__ import annotations

import json

import typer

from ..config import format_bytes
from .common import JsonOpt

cache_app = typer.Typer(
    name="cache",
    help="The disk cache of contraction paths: where it is, its size, and emptying it.",
    no_args_is_help=True,
)


def _bound_text(bound) -> str:
    if bound is None:
        return "unbounded"
    if bound == 0:
        return "0 (nothing is written to disk)"
    return format_bytes(bound)


@cache_app.command("info")
def info(as_json: bool = JsonOpt) -> None:
    """Print the cache folder, its entries, their size and the bound ($QSIMDIST_CACHE_MAX_BYTES)."""
    from ..planner.path_cache import cache_info

    data = cache_info()
    if as_json:
        typer.echo(json.dumps(data))
        return
    typer.echo(f"folder   {data['folder']}")
    typer.echo(f"entries  {data['entries']}")
    typer.echo(f"size     {format_bytes(data['bytes'])} ({data['bytes']} bytes)")
    typer.echo(f"bound    {_bound_text(data['max_bytes'])} "
               "(set with $QSIMDIST_CACHE_MAX_BYTES)")


@cache_app.command("clear")
def clear(as_json: bool = JsonOpt) -> None:
    """Remove qsimdist's cache entries (nothing else in the folder) and print what went."""
    from ..planner.path_cache import clear_cache

    data = clear_cache()
    if as_json:
        typer.echo(json.dumps(data))
        return
    for name in data["files"]:
        typer.echo(f"removed {name}")
    others = f" and {data['other_files']} other file(s)" if data["other_files"] else ""
    typer.echo(f"removed {data['entries']} path cache entr{'y' if data['entries'] == 1 else 'ies'}"
               f" ({format_bytes(data['bytes'])}){others} from {data['folder']}")
