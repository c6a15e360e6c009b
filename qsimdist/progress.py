"""The one progress protocol: ``progress(stage, done, total)``.

Every long piece of work that reports progress calls a callback of this shape:
``stage`` names the work (``"slices"``, ``"amplitudes"``, ``"statevector"``,
``"fusing"``, ...), ``done`` counts what is finished and ``total`` what there is
(``None`` where unknown). The CLI's bar (:func:`qsimdist.commands.common.progress_bar`)
draws any of them; a user passes their own function the same way, e.g.
``qsimdist.amplitudes(..., progress=lambda stage, done, total: print(stage, done, total))``.

A path search's rounds are not progress of this kind: :func:`qsimdist.planner.search.search`
hands each round's whole state to its ``on_round`` observer instead.

Layer 0 (the standard library only).
"""

from __future__ import annotations

from collections.abc import Callable

#: a progress callback: ``progress(stage, done, total)``
Progress = Callable[[str, int, "int | None"], None]


def report(progress: Progress | None, stage: str, done: int, total: int | None) -> None:
    """Call ``progress(stage, done, total)`` where a callback was given."""
    if progress is not None:
        progress(stage, done, total)


__all__ = ["Progress", "report"]
