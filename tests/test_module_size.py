"""No module of the package is over 600 lines (issue 53: a reader meets one concern per file)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "qsimdist"
#: the most lines a module of ``qsimdist/`` may have
MAX_LINES = 600


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Modules under ``root`` over ``limit`` lines, with their counts."""
    counts = {str(p.relative_to(root.parent)): len(p.read_text().splitlines())
              for p in sorted(root.rglob("*.py"))}
    return {name: n for name, n in counts.items() if n > limit}


def test_no_module_over_600_lines():
    assert long_modules(PACKAGE) == {}


def test_the_count_catches_a_long_module(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "short.py").write_text("x = 1\n" * 600)
    (pkg / "sub" / "long.py").write_text("x = 1\n" * 601)
    assert long_modules(pkg) == {"pkg/sub/long.py": 601}
