"""The package's import structure (issues 23, 44 and 53): no import cycles with every edge
counted (package faces included), the planner never imports the executors, no private name
crosses modules, nothing outside ``executors/`` imports an executor module, one executor
registry, and Plan.execute finds the built-in executors after ``import qsimdist``."""

import ast
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


def test_the_tool_reports_run_time_cycles_and_type_only_imports_apart(capsys):
    """On the package: 0 run-time cycles; the type-only imports (under ``if TYPE_CHECKING:``)
    counted on their own line, each listed, with the cycles they would close if they ran."""
    tool, edges, _, _ = _graph()
    mods = tool._modules(ROOT / "qsimdist")
    typed = tool.type_only_graph(mods)
    assert tool.main(["import_graph", str(ROOT)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "run-time cycles: 0"
    n_typed = sum(len(ts) for ts in typed.values())
    assert n_typed > 0 and f"type-only imports: {n_typed}" in lines
    closed = tool.closed_by_type_only(edges, typed, mods)
    assert f"cycles closed by type-only imports: {len(closed)}" in lines


def test_a_cycle_closed_only_by_a_type_only_import_is_reported_apart(tmp_path, capsys):
    """``a`` imports ``b`` at run time; ``b`` imports ``a`` only for annotations: no
    run-time cycle, one type-only import, and the cycle it would close named."""
    tool = _tool()
    _fake_package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import x\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from .a import y\nx = 1\n",
    })
    assert tool.main(["import_graph", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "run-time cycles: 0\n" in out
    assert "type-only imports: 1\n   ('qsimdist.b', 'qsimdist.a')\n" in out
    assert "cycles closed by type-only imports: 1\n   ['qsimdist.a', 'qsimdist.b']\n" in out
    # the same import at run time: a run-time cycle, and no type-only import left
    (tmp_path / "qsimdist" / "b.py").write_text("from .a import y\nx = 1\n")
    assert tool.main(["import_graph", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "run-time cycles: 1\n" in out and "type-only imports: 0\n" in out
    assert "cycles closed by type-only imports: 0\n" in out


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


EXECUTORS = "qsimdist.executors"
#: the one executor registry (``tests/test_import_graph.py`` keeps it one)
REGISTRY = "qsimdist.planner.registry"
#: imports of executor modules left in a module another engineer is changing (issue 53):
#: ``from ..executors import executor_kind, statevector_bytes`` (the face) replaces them


def _hidden_imports(tree: ast.AST) -> list[str]:
    """Module names given as strings to ``importlib.import_module`` or ``__import__``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) \
                    and isinstance(arg.value, str):
                out.append(arg.value)
    return out


def executor_module_imports(tool, pkg: Path) -> list[tuple[str, str]]:
    """``(importer, executor module)`` for every import of a module under
    ``qsimdist/executors/`` (anything but the package's face, ``qsimdist.executors``) by a
    module outside it: ``from ..executors.mpi import x``, ``import qsimdist.executors.mpi``,
    ``from ..executors import mpi`` (a submodule by name), or the module's name given to
    ``importlib.import_module``; at any level, inside functions too, except under
    ``if TYPE_CHECKING:``."""
    mods = tool._modules(pkg)
    edges, _ = tool.graph(mods)
    found = set()
    for m in mods:
        if m == EXECUTORS or m.startswith(EXECUTORS + "."):
            continue
        found.update((m, t) for t in edges.get(m, ()) if t.startswith(EXECUTORS + "."))
        found.update((m, t) for t in _hidden_imports(ast.parse(mods[m].read_text()))
                     if t.startswith(EXECUTORS + "."))
    return sorted(found)


def test_nothing_outside_executors_imports_an_executor_module():
    """Outside ``qsimdist/executors/``, code imports the ``qsimdist.executors`` face, which
    names what the rest needs (and loads it on first use); never an executor module."""
    tool = _tool()
    found = executor_module_imports(tool, ROOT / "qsimdist")
    assert found == []


def executor_tables(pkg: Path) -> list[tuple[str, int, str]]:
    """``(module, line, what)`` for every executor registry in the package: a module-level
    mapping that a function of the same module fills (``TABLE[key] = value``,
    ``TABLE.setdefault``, ``TABLE.update``) where the function's name or the table's
    names an executor (``*executor*``, ``*kind*``); a function named
    ``register_executor*``; and a hand-written mapping keyed by both ``"local"`` and
    ``"mpi"``. The one registry has all three of the first two and none of the third."""
    found = []
    for path in sorted(pkg.rglob("*.py")):
        parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        tables = set()
        for stmt in tree.body:
            value = getattr(stmt, "value", None)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
            annotated = isinstance(stmt, ast.AnnAssign) and "dict" in ast.unparse(stmt.annotation)
            is_dict = isinstance(value, ast.Dict) or (
                isinstance(value, ast.Call) and getattr(value.func, "id", "") == "dict")
            if annotated or is_dict:
                tables.update(t.id for t in targets if isinstance(t, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("register_executor"):
                    found.append((module, node.lineno, f"defines {node.name}"))
                for sub in ast.walk(node):
                    filled = None
                    if isinstance(sub, ast.Assign):
                        for t in sub.targets:
                            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                                filled = t.value.id
                    elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                            and sub.func.attr in ("setdefault", "update", "__setitem__") \
                            and isinstance(sub.func.value, ast.Name):
                        filled = sub.func.value.id
                    if filled in tables and any(w in name.lower() for name in (filled, node.name)
                                                for w in ("executor", "kind")):
                        found.append((module, sub.lineno, f"{node.name} fills {filled}"))
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"local", "mpi"} <= keys:
                    found.append((module, node.lineno, "a mapping keyed by local and mpi"))
    return found


def test_one_executor_registry():
    """One table of executors, in :mod:`qsimdist.planner.registry`: ``register_executor``
    fills it, and ``Plan.execute``, the entry points' name checks and the executor kinds
    all read it (see :func:`executor_tables` for what counts as a table)."""
    found = executor_tables(ROOT / "qsimdist")
    assert {m for m, _, _ in found} == {REGISTRY}, found
    assert {what for _, _, what in found} == {"defines register_executor",
                                              "register_executor fills _EXECUTORS"}


def test_executor_imports_and_second_registries_are_reported(tmp_path):
    """The scans name each planted breach: an executor module imported four ways from
    outside ``executors/`` (a type-only import and the face are allowed), a second
    table filled by a register function, and a hand-written table of the names."""
    tool = _tool()
    pkg = _fake_package(tmp_path, {
        "__init__.py": "",
        "executors/__init__.py": "from .kinds import Executor\n",
        "executors/kinds.py": "from .mpi import x\nclass Executor:\n    pass\n",
        "executors/mpi.py": "x = 1\n",
        "engine/__init__.py": "",
        "engine/a.py": "from ..executors import Executor\nfrom ..executors.mpi import x\n",
        "engine/b.py": "def f():\n    import qsimdist.executors.kinds\n",
        "engine/c.py": "from ..executors import mpi\n",
        "engine/d.py": "import importlib\nimportlib.import_module('qsimdist.executors.mpi')\n"
                       "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from ..executors.kinds import Executor\n",
        "planner/__init__.py": "",
        "planner/registry.py": "_EXECUTORS: dict = {}\ndef register_executor(kind):\n"
                               "    _EXECUTORS[kind.name] = kind\n",
    })
    assert executor_module_imports(tool, pkg) == [
        ("qsimdist.engine.a", "qsimdist.executors.mpi"),
        ("qsimdist.engine.b", "qsimdist.executors.kinds"),
        ("qsimdist.engine.c", "qsimdist.executors.mpi"),
        ("qsimdist.engine.d", "qsimdist.executors.mpi"),
    ]
    assert {m for m, _, _ in executor_tables(pkg)} == {"qsimdist.planner.registry"}
    (pkg / "executors" / "kinds.py").write_text(
        "_KINDS = {}\ndef register_kind(kind):\n    _KINDS[kind.name] = kind\n")
    (pkg / "engine" / "e.py").write_text("RUNNERS = {'local': 1, 'mpi': 2}\n")
    assert sorted(executor_tables(pkg)) == [
        ("qsimdist.engine.e", 1, "a mapping keyed by local and mpi"),
        ("qsimdist.executors.kinds", 3, "register_kind fills _KINDS"),
        ("qsimdist.planner.registry", 2, "defines register_executor"),
        ("qsimdist.planner.registry", 3, "register_executor fills _EXECUTORS"),
    ]


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
    assert tool.type_only_graph(tool._modules(pkg)) == {"qsimdist.b": {"qsimdist.a"}}
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
