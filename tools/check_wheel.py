"""Check a built qsimdist wheel against the source tree it was built from.

    python tools/check_wheel.py dist/qsimdist-*.whl [SOURCE_TREE]

Fails (exit 1, one line per problem) unless the wheel holds:

- every package under ``qsimdist/`` (each folder with an ``__init__.py``) with all of its
  ``.py`` files, so no subpackage can be forgotten;
- the bundled data packages ``qsimdist.circuits`` and ``qsimdist.backends`` with every data
  file of the repository's ``circuits/`` and ``backends/`` folders;
- the ``LICENSE`` file, in its ``.dist-info``;
- metadata whose version is the one ``pyproject.toml`` gives;

and nothing from ``benchmarks/`` or ``tests/``.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

#: repository folders shipped as data packages: folder -> (package path in the wheel, globs)
DATA_FOLDERS = {
    "circuits": ("qsimdist/circuits", ("*.qasm", "*.qasm3", "*.qsim", "*.json", "lattice/*.qasm",
                                       "lattice/*.json")),
    "backends": ("qsimdist/backends", ("*.toml",)),
}


def problems(wheel: Path, source: Path) -> list[str]:
    """Everything the wheel lacks or should not hold (empty when it is complete)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    found: list[str] = []
    package_root = source / "qsimdist"
    for init in sorted(package_root.rglob("__init__.py")):
        folder = init.parent
        if any(part in DATA_FOLDERS for part in folder.relative_to(package_root).parts):
            continue
        for module in sorted(folder.glob("*.py")):
            member = module.relative_to(source).as_posix()
            if member not in names:
                found.append(f"missing module {member}")
    for folder, (target, globs) in DATA_FOLDERS.items():
        for glob in globs:
            for data in sorted((source / folder).glob(glob)):
                member = f"{target}/{data.relative_to(source / folder).as_posix()}"
                if member not in names:
                    found.append(f"missing data file {member}")
    dist_info = [n for n in names if n.split("/")[0].endswith(".dist-info")]
    if not any(n.rsplit("/", 1)[-1] == "LICENSE" for n in dist_info):
        found.append("missing LICENSE in the .dist-info")
    version = tomllib.loads((source / "pyproject.toml").read_text())["project"]["version"]
    metadata = [n for n in dist_info if n.endswith("/METADATA")]
    if not metadata:
        found.append("missing METADATA")
    else:
        text = zipfile.ZipFile(wheel).read(metadata[0]).decode()
        if f"\nVersion: {version}\n" not in text:
            found.append(f"METADATA does not give version {version} (pyproject.toml's)")
    for name in sorted(names):
        if name.split("/")[0] in ("benchmarks", "tests"):
            found.append(f"unexpected file {name} (benchmarks and tests stay out of the wheel)")
    return found


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python tools/check_wheel.py WHEEL [SOURCE_TREE]", file=sys.stderr)
        return 2
    wheel = Path(argv[0])
    source = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parents[1]
    found = problems(wheel, source)
    for line in found:
        print(f"check_wheel: {wheel.name}: {line}", file=sys.stderr)
    if not found:
        packages = {n.rsplit("/", 1)[0] for n in zipfile.ZipFile(wheel).namelist()
                    if n.endswith("__init__.py")}
        print(f"check_wheel: {wheel.name}: {len(packages)} packages, the bundled circuits and "
              "profiles, LICENSE and the version: complete")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
