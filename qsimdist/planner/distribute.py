"""Compatibility re-export: the distribution planner lives in :mod:`qsimdist.planner.distribution`."""

from .distribution import *  # noqa: F401,F403
from .distribution import __all__  # noqa: F401
