"""Planning: path (cotengra), lifetime mode ordering, the versioned Plan, distribution.

``qsimdist.planner.replay`` (the schedule replay checker) and
``qsimdist.planner.Schedule`` are loaded on first use.

This face runs before any module of the package, so it registers the reader
that :meth:`Plan.from_dict <qsimdist.planner.plan.Plan.from_dict>` and
:meth:`Plan.load <qsimdist.planner.plan.Plan.load>` hand a saved schedule to
(:mod:`qsimdist.planner.registry`): the plan module never imports the
distribution package, which imports it.
"""

from __future__ import annotations

from .registry import register_schedule_reader, schedule_reader_registered


def _read_schedule(plan, data: object, source: str):
    """A saved schedule of ``plan``, replayed (loads the distribution package on first use)."""
    from .distribution.replay import read_schedule

    return read_schedule(plan, data, source)


if not schedule_reader_registered():  # a reload of this package registers nothing twice
    register_schedule_reader(_read_schedule)


def __getattr__(name: str):
    if name in ("replay", "Replay", "Schedule", "schedule", "compare_strategies"):
        from . import distribution

        return getattr(distribution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
