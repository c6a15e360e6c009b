"""Planning: path (cotengra), lifetime mode ordering, the versioned Plan, distribution.

``qsimdist.planner.replay`` (the schedule replay checker) and
``qsimdist.planner.Schedule`` are loaded on first use.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name in ("replay", "Replay", "Schedule", "schedule", "compare_strategies"):
        from . import distribution

        return getattr(distribution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
