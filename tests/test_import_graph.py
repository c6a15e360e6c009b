"""The package's import structure (issues 23 and 44): no import cycles with every edge
counted (package faces included), the planner never imports the executors, and
Plan.execute finds the built-in executors after ``import qsimdist``."""

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
    mods = tool._modules(ROOT / "qsimdist")
    edges, private = tool.graph(mods)
    return tool, edges, tool.runtime_graph(edges, mods), private


def test_no_import_cycles():
    """No circle, with every edge counted: a package's face importing its own modules, a
    module importing its parent's face, and the faces importing a module runs first."""
    tool, _, g, _ = _graph()
    assert tool.sccs(g) == []


def _fake_package(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / "qsimdist" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "qsimdist"


def _cycles(tool, pkg: Path) -> list[list[str]]:
    mods = tool._modules(pkg)
    edges, _ = tool.graph(mods)
    return sorted(sorted(c) for c in tool.sccs(tool.runtime_graph(edges, mods)))


def test_a_circle_through_a_package_face_is_reported(tmp_path, capsys):
    """``plan`` imports the face of ``dist``, whose face imports ``sched``, which imports
    ``plan``: the circle the old rule (package-face edges dropped) could not see."""
    tool = _tool()
    pkg = _fake_package(tmp_path, {
        "__init__.py": "",
        "plan.py": "def load():\n    from .dist import replay\n",
        "dist/__init__.py": "from .sched import schedule\nfrom .replay import replay\n",
        "dist/sched.py": "from ..plan import load\nschedule = 1\n",
        "dist/replay.py": "replay = 1\n",
    })
    assert _cycles(tool, pkg) == [["qsimdist.dist", "qsimdist.dist.sched", "qsimdist.plan"]]
    assert tool.main(["import_graph", str(tmp_path)]) == 0
    assert "cycles: 1" in capsys.readouterr().out
    # importing a submodule of dist still runs dist's face first: still a circle
    (pkg / "plan.py").write_text("def load():\n    from .dist.replay import replay\n")
    assert _cycles(tool, pkg) == [["qsimdist.dist", "qsimdist.dist.sched", "qsimdist.plan"]]
    # a module outside the package holds what plan needs: no circle
    (pkg / "replay.py").write_text("replay = 1\n")
    (pkg / "plan.py").write_text("def load():\n    from .replay import replay\n")
    (pkg / "dist" / "__init__.py").write_text("from .sched import schedule\n")
    assert _cycles(tool, pkg) == []


def test_a_module_importing_its_parents_face_back_is_a_circle(tmp_path):
    tool = _tool()
    pkg = _fake_package(tmp_path, {
        "__init__.py": "",
        "eng/__init__.py": "from .net import run\n",
        "eng/net.py": "def run():\n    from . import helper\n    from ..eng import Budget\n",
        "eng/helper.py": "",
    })
    assert _cycles(tool, pkg) == [["qsimdist.eng", "qsimdist.eng.net"]]
    (pkg / "eng" / "net.py").write_text("def run():\n    from .helper import Budget\n")
    assert _cycles(tool, pkg) == []


def test_planner_never_imports_executors():
    _, edges, _, _ = _graph()
    up = [(m, t) for m, ts in edges.items() for t in ts
          if m.startswith("qsimdist.planner") and t.startswith("qsimdist.executors")]
    assert up == []


def test_no_private_cross_module_imports():
    """No module of ``qsimdist/`` takes a private name from another (issue 53).

    The rule, as ``tools/import_graph.py`` reads it: a ``from M import _name`` where ``M``
    is a qsimdist module other than the importer and ``_name`` starts with one underscore
    (dunder names such as ``__version__`` are public, and ``from __future__`` is not a
    qsimdist module). The name imported is what counts, not the module it comes from: the
    underscore modules (``_fileio``, ``_optional``, ``_resources``) are package-internal,
    so ``from .._fileio import write_atomic`` is allowed, while ``from .. import _fileio``
    names a private name and is refused. A helper two modules share takes a public name in
    its home module. Imports under ``if TYPE_CHECKING:`` never run and are not counted.
    """
    _, _, _, private = _graph()
    assert sorted(private) == []


def test_a_private_cross_module_import_is_reported(tmp_path):
    tool = _tool()
    pkg = _fake_package(tmp_path, {
        "__init__.py": "",
        "_fileio.py": "def write():\n    pass\n",
        "a.py": "from __future__ import annotations\nfrom ._fileio import write\n"
                "from . import __doc__\n_own = 1\nfrom .a import _own\n",
        "b.py": "def f():\n    from .a import _own\n",
        "c.py": "from . import _fileio\n",
    })
    _, private = tool.graph(tool._modules(pkg))
    assert sorted(private) == [("qsimdist.b", "qsimdist.a", "_own"),
                               ("qsimdist.c", "qsimdist", "_fileio")]


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


def test_the_plan_module_loads_no_distribution_module():
    """The circle is closed at run time too: the plan module does not load the
    distribution package (whose scheduler imports it); the planner's face registers the
    reader that replays a saved schedule."""
    code = (
        "import sys, qsimdist.planner.plan; "
        "from qsimdist.planner.registry import schedule_reader_registered; "
        "print(sorted(m for m in sys.modules if m.startswith('qsimdist.planner.distribution')),"
        " schedule_reader_registered())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[] True"


def test_a_saved_schedule_is_replayed_through_the_registered_reader(monkeypatch):
    from qsimdist.errors import PlanFormatError
    from qsimdist.planner import registry

    seen = []
    monkeypatch.setattr(registry, "_SCHEDULE_READER", [lambda *a: seen.append(a) or "sched"])
    assert registry.read_schedule("plan", {"x": 1}, "p.json") == "sched"
    assert seen == [("plan", {"x": 1}, "p.json")]
    with pytest.raises(ValueError, match="already registered"):
        registry.register_schedule_reader(print)
    monkeypatch.setattr(registry, "_SCHEDULE_READER", [])
    with pytest.raises(PlanFormatError, match="p.json: .*no schedule reader"):
        registry.read_schedule("plan", {"x": 1}, "p.json")
