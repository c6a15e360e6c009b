"""What a user installs: the wheel holds every subpackage, the data and the LICENSE, and
README's marked commands are the ones ``.ci/run`` runs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import check_wheel  # noqa: E402
import readme_command  # noqa: E402


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                           "--wheel-dir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (found,) = out.glob("qsimdist-*.whl")
    return found


def test_wheel_holds_every_subpackage_the_data_and_the_license(wheel):
    assert check_wheel.problems(wheel, ROOT) == []
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    on_disk = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "qsimdist").rglob(
        "__init__.py") if "circuits" not in p.parts and "backends" not in p.parts}
    assert on_disk <= packages and {"qsimdist/engine", "qsimdist/commands"} <= packages


def test_check_wheel_finds_a_forgotten_subpackage_and_license(wheel, tmp_path):
    doctored = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(doctored, "w") as dst:
        for item in src.infolist():
            if item.filename.startswith("qsimdist/engine/") or item.filename.endswith("LICENSE"):
                continue
            dst.writestr(item, src.read(item.filename))
    found = check_wheel.problems(doctored, ROOT)
    assert "missing module qsimdist/engine/__init__.py" in found
    assert "missing LICENSE in the .dist-info" in found


def test_version_has_one_source():
    import qsimdist

    version = check_wheel.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert qsimdist.__version__ == version
    assert '__version__ = "' not in (ROOT / "qsimdist" / "__init__.py").read_text()


def test_readme_marks_the_two_commands_ci_runs():
    text = (ROOT / "README.md").read_text()
    first = readme_command.marked_command(text, "install-and-run")
    assert first.startswith("pip install ") and "qsimdist amplitude " in first
    assert "circuits/" not in first  # a bundled circuit by name: runs outside the source tree
    assert "pytest" in readme_command.marked_command(text, "test")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_command install-and-run" in ci and "readme_command test" in ci


def test_readme_command_refuses_a_missing_marker():
    with pytest.raises(LookupError, match="no line '<!-- ci:nope -->'"):
        readme_command.marked_command("# title\n", "nope")
    with pytest.raises(LookupError, match="no code block"):
        readme_command.marked_command("<!-- ci:x -->\ntext\n```\nls\n```\n", "x")
