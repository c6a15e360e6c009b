"""qsimdist: exact tensor-network simulation of quantum circuits, planned for one or many devices.

``import qsimdist`` stays light: numpy, autoray, cotengra and the standard
library only; Qiskit, quimb, cupy, mpi4py and typer load when first needed.
"""

from __future__ import annotations

from .api import AmplitudeResult, amplitude, amplitudes, contract, plan
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

__version__ = "0.1.0"

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
    "QsimdistError",
    "UnsupportedInstructionError",
    "__version__",
    "amplitude",
    "amplitudes",
    "contract",
    "load_network",
    "plan",
    "save_network",
]
