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


#: suffix a bundled circuit named without one is read with (the OpenQASM 2 copy)
DEFAULT_SUFFIX = ".qasm"


def resolve_circuit_path(path: Path) -> Path:
    """``path`` itself where it exists; else the bundled circuit of that name, if one exists.

    ``ghz_n12`` names the bundled ``ghz_n12.qasm`` and ``ghz_n12.qsim`` or
    ``lattice/tfim_rect_3x3_t2.qasm`` the bundled file itself, so a bundled
    circuit runs from any folder (``qsimdist amplitude ghz_n12 ...``). A path
    that names neither is returned unchanged, for the reader to report.
    """
    if path.exists() or path.is_absolute() or ".." in path.parts:
        return path
    try:
        folder = circuits_dir()
    except InvalidInputError:
        return path
    candidate = folder / path
    if not path.suffix:
        candidate = candidate.with_name(candidate.name + DEFAULT_SUFFIX)
    return candidate if candidate.is_file() else path


def bundled_names() -> list[str]:
    """The bundled circuits' names as the CLI accepts them (``ghz_n12``, ``qft_n6.qasm3``, ...)."""
    names = []
    for entry in manifest():
        file = entry["file"]
        names.append(file[: -len(DEFAULT_SUFFIX)] if file.endswith(DEFAULT_SUFFIX) else file)
    return names

