"""The circuits bundled with qsimdist (the repository's ``circuits/`` folder).

In a wheel they ship as the package data ``qsimdist.circuits``; in a source
checkout they are read from ``circuits/`` beside the package.
"""

from __future__ import annotations

import json
from pathlib import Path

from ._resources import bundled_dir
from .errors import InvalidInputError


def circuits_dir() -> Path:
    """The folder holding the bundled circuit files and ``manifest.json``."""
    found = bundled_dir("circuits", "qsimdist.circuits", "manifest.json")
    if found is None:
        raise InvalidInputError("the bundled circuits are not installed with this qsimdist")
    return found


def manifest() -> list[dict]:
    """Entries of ``manifest.json``: file, format, family, n_qubits, depth, reference amplitude."""
    return json.loads((circuits_dir() / "manifest.json").read_text())


def bundled_circuit(name: str) -> Path:
    """Path of a bundled circuit file, e.g. ``bundled_circuit("ghz_n12.qasm")``."""
    path = circuits_dir() / name
    if not path.is_file() or name == "manifest.json":
        valid = ", ".join(e["file"] for e in manifest())
        raise InvalidInputError(f"no bundled circuit {name!r}; valid: {valid}")
    return path
