"""qsimdist: exact tensor-network simulation of quantum circuits, planned for one or many devices.

``import qsimdist`` stays light: numpy, autoray, cotengra and the standard
library only; Qiskit, quimb, cupy, mpi4py and typer load when first needed.
"""

from __future__ import annotations

import logging as _logging
import os as _os

# OpenBLAS's worker threads spin for about 2^28 cycles after each call before
# sleeping. The executor alternates BLAS steps with compiled loops on the same
# cores, which spinning workers would slow down (measured in BENCHMARKS.md), so
# ask for a short spin (2^4 cycles). It takes effect only when numpy is loaded
# after this line, and never overrides a value the user has set.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

# registers the built-in executors that Plan.execute looks up (the planner never imports
# them); light: the executors themselves load on first use
from . import executors  # noqa: F401
from .api import AmplitudeResult, PlanRun, amplitude, amplitudes, contract, plan, run_plan
from .engine.expectation_api import expectation_costs, expectation_values
from .errors import (
    BitstringError,
    CircuitParseError,
    InvalidInputError,
    MissingDependencyError,
    PlanError,
    QsimdistError,
    UnsupportedInstructionError,
)
from .network import Network, load_network, save_network
from .planner.path import PathOptions
from .planner.plan import Plan

_logging.getLogger("qsimdist").addHandler(_logging.NullHandler())


def _installed_version() -> str:
    """The version pyproject.toml gives, as the installed distribution records it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("qsimdist")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "0+unknown"


__version__ = _installed_version()


__all__ = [
    "AmplitudeResult",
    "BitstringError",
    "CircuitParseError",
    "InvalidInputError",
    "MissingDependencyError",
    "Network",
    "PathOptions",
    "Plan",
    "PlanError",
    "PlanRun",
    "expectation_costs",
    "QsimdistError",
    "UnsupportedInstructionError",
    "__version__",
    "amplitude",
    "amplitudes",
    "contract",
    "expectation_values",
    "load_network",
    "plan",
    "run_plan",
    "save_network",
]
