"""The package's import structure (issue 23): no import cycles, the planner never imports
the executors, and Plan.execute finds the built-in executors after ``import qsimdist``."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    path = ROOT / "tools" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _graph():
    tool = _tool()
    edges, private = tool.graph(tool._modules(ROOT / "qsimdist"))
    g = {m: {t for t in ts if not t.startswith(m + ".") and not m.startswith(t + ".")}
         for m, ts in edges.items()}
    return tool, edges, g, private


def test_no_import_cycles():
    tool, _, g, _ = _graph()
    assert tool.sccs(g) == []


def test_planner_never_imports_executors():
    _, edges, _, _ = _graph()
    up = [(m, t) for m, ts in edges.items() for t in ts
          if m.startswith("qsimdist.planner") and t.startswith("qsimdist.executors")]
    assert up == []


def test_type_checking_imports_are_skipped(tmp_path):
    pkg = tmp_path / "qsimdist"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import _y\nx = 1\n"
    )
    tool = _tool()
    edges, private = tool.graph(tool._modules(pkg))
    assert edges == {"qsimdist.a": {"qsimdist.b"}} and private == []
    (pkg / "b.py").write_text("from .a import _y\nx = 1\n")
    edges, private = tool.graph(tool._modules(pkg))
    assert tool.sccs(edges) and private == [("qsimdist.b", "qsimdist.a", "_y")]


@pytest.mark.parametrize("first", ["qsimdist", "qsimdist.planner.plan"])
def test_executors_registered_on_import(first):
    """Importing any part of qsimdist fills the registry Plan.execute dispatches through,
    without loading an executor module itself."""
    code = (
        f"import sys, importlib; importlib.import_module({first!r}); "
        "from qsimdist.planner.registry import executors; "
        "print(executors(), 'qsimdist.executors.local' in sys.modules, "
        "'qsimdist.executors.mpi' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "('local', 'mpi') False False"


def test_unknown_executor_names_the_valid_ones():
    from qsimdist import InvalidInputError
    from qsimdist.planner.registry import get_executor

    with pytest.raises(InvalidInputError, match="valid: local, mpi"):
        get_executor("nope")
