"""Lazy imports of optional dependencies with a clear error naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

#: module name -> (pip extra that provides it, what it is for)
_EXTRAS = {
    "cupy": ("gpu", "the cupy backend"),
    "mpi4py": ("mpi", "the mpi executor"),
    "qiskit_qasm3_import": ("qasm3", "OpenQASM 3 import"),
    "matplotlib": ("plot", "plots"),
    "qsimcirq": ("qsim", "the qsim statevector engine"),
    "stim": ("qec", "the stabilizer route and QEC decoding"),
    "cirq": ("qsim", "the qsim statevector engine"),
    "qiskit": ("", "Qiskit circuits"),
    "quimb": ("", "quimb networks, PEPS and quimb's own simplification letters"),
}


def require(module: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming its extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        root = module.split(".")[0]
        extra, purpose = _EXTRAS.get(root, ("", module))
        how = f"pip install 'qsimdist[{extra}]'" if extra else f"pip install {root}"
        raise MissingDependencyError(
            f"{module} is needed for {purpose} but is not installed ({exc}); install it with: {how}"
        ) from exc


def available(module: str) -> bool:
    """Whether ``module`` can be imported (does not import it if already absent)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
