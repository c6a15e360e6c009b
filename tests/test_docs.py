"""The documentation site: `mkdocs build --strict` passes and the API reference is complete.

One strict build (about 5 s) serves both tests. The docs packages are test dependencies
(the `test` extra): a missing one fails with the install line, it is not skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: modules whose public names (``__all__``) must each have an entry in the API reference
DOCUMENTED_MODULES = ("qsimdist", "qsimdist.qiskit", "qsimdist.quimb", "qsimdist.qec",
                      "qsimdist.hardware")
#: names of ``__all__`` that are not API objects
NOT_DOCUMENTED = {"__version__"}

_DOCS_MODULES = {
    "mkdocs": "mkdocs",
    "material": "mkdocs-material",
    "mkdocstrings": "mkdocstrings",
    "mkdocstrings_handlers.python": "mkdocstrings[python]",
    "mkdocs_click": "mkdocs-click",
}


def _require_docs_packages() -> None:
    missing = [dist for mod, dist in _DOCS_MODULES.items() if _find_spec(mod) is None]
    if missing:
        pytest.fail(f"the docs packages are test dependencies, missing: {', '.join(missing)}; "
                    "run pip install '.[test]' (or '.[docs]')", pytrace=False)


def _find_spec(name: str):
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent package is missing
        return None


@pytest.fixture(scope="module")
def strict_build(tmp_path_factory):
    """Build the site once with ``--strict``; (return code, output, site folder)."""
    _require_docs_packages()
    site = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return proc.returncode, proc.stdout + proc.stderr, site


def read_inventory(path: Path) -> set[str]:
    """The object names in a Sphinx ``objects.inv`` (version 2), as mkdocstrings writes it."""
    data = path.read_bytes()
    header_lines = 4
    start = 0
    for _ in range(header_lines):
        start = data.index(b"\n", start) + 1
    if not data.startswith(b"# Sphinx inventory version 2"):
        raise ValueError(f"{path}: not a version 2 Sphinx inventory")
    names = set()
    for line in zlib.decompress(data[start:]).decode("utf-8").splitlines():
        if line.strip():
            names.add(line.split(" ", 1)[0])
    return names


def public_names() -> dict[str, list[str]]:
    """For each public name, the inventory names any one of which documents it."""
    wanted = {}
    for module_name in DOCUMENTED_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name in NOT_DOCUMENTED:
                continue
            obj = getattr(module, name)
            accepted = [f"{module_name}.{name}"]
            home, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if isinstance(home, str) and isinstance(qualname, str):
                accepted.append(f"{home}.{qualname}")  # where it is defined
            wanted[f"{module_name}.{name}"] = accepted
    return wanted


def missing_names(inventory: set[str], wanted: dict[str, list[str]]) -> list[str]:
    return sorted(name for name, accepted in wanted.items()
                  if not any(a in inventory for a in accepted))


def test_mkdocs_build_strict(strict_build):
    code, output, site = strict_build
    assert code == 0, f"mkdocs build --strict failed (exit {code}):\n{output}"
    assert (site / "index.html").is_file()
    assert (site / "cli" / "index.html").is_file()


def test_api_reference_covers_public_names(strict_build):
    code, output, site = strict_build
    inventory_file = site / "objects.inv"
    assert inventory_file.is_file(), f"the build wrote no objects.inv:\n{output}"
    inventory = read_inventory(inventory_file)
    wanted = public_names()
    assert len(wanted) >= 40, sorted(wanted)  # the four modules' lists were read
    missing = missing_names(inventory, wanted)
    assert not missing, (
        "public names without an entry in the API reference (add a '::: NAME' line to "
        f"docs/api/): {', '.join(missing)}"
    )


def test_coverage_check_sees_a_missing_name():
    # the check above must be able to fail: drop one documented name from an inventory
    wanted = {"qsimdist.amplitudes": ["qsimdist.amplitudes", "qsimdist.api.amplitudes"],
              "qsimdist.plan": ["qsimdist.plan", "qsimdist.api.plan"]}
    assert missing_names({"qsimdist.api.amplitudes", "qsimdist.plan"}, wanted) == []
    assert missing_names({"qsimdist.api.amplitudes"}, wanted) == ["qsimdist.plan"]
