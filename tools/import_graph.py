"""Import graph of qsimdist: cycles (any level), planner->executors imports, private imports.

    python tools/import_graph.py [REPO_ROOT]

Reads every module under ``REPO_ROOT/qsimdist`` (default: this script's
repository) with :mod:`ast`, without importing anything, and prints

* ``run-time cycles:`` the strongly connected components of the import graph as
  Python runs it (:func:`runtime_graph`), counting imports at any level (inside
  functions too). Every edge counts: a package's face (``pkg/__init__.py``)
  importing its own submodules, and a submodule importing its parent's face.
  Importing ``a.b.c`` also runs the faces ``a.b`` and ``a`` first, so a module
  depends on every package above what it imports that is not already above
  itself: ``pkg.x`` importing ``pkg.sub.y`` depends on ``pkg.sub``'s face;
* ``planner->executors:`` imports from ``qsimdist.planner`` into
  ``qsimdist.executors`` (the planner must not depend on the executors);
* ``private cross-module imports:`` every ``from M import _name`` of a name
  starting with one underscore from another module;
* ``executor modules imported from outside executors/:`` imports of a module
  under ``qsimdist.executors`` (other than the package's face) by a module
  outside it (``tests/test_import_graph.py`` also reads hidden imports by name).

* ``type-only imports:`` the imports under ``if TYPE_CHECKING:`` (or
  ``if typing.TYPE_CHECKING:``), counted apart, one per (importer, imported module):
  they are for annotations only and never run, so they close no run-time cycle and no
  other line counts them; ``cycles closed by type-only imports:`` the cycles the graph
  would have if they ran (:func:`type_only_graph`), those the run-time graph lacks.
"""

import ast
import pathlib
import sys


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of every node inside the body of an ``if TYPE_CHECKING:`` block."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    return skip


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    mods = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _resolve(mods, mod: str, node: ast.ImportFrom) -> str | None:
    pkg = mod.split(".") if mods[mod].name == "__init__.py" else mod.split(".")[:-1]
    if node.level:
        base = pkg[: len(pkg) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module


def graph(mods):
    """(edges module -> imported modules, private imports (module, from, name)), imports
    under ``if TYPE_CHECKING:`` left out (see :func:`type_only_graph`)."""
    return _scan(mods, type_only=False)


def type_only_graph(mods) -> dict[str, set[str]]:
    """Edges module -> imported modules of the imports under ``if TYPE_CHECKING:`` only."""
    return _scan(mods, type_only=True)[0]


def _scan(mods, type_only: bool):
    edges: dict[str, set[str]] = {}
    private = []
    for m, p in mods.items():
        tree = ast.parse(p.read_text())
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if (id(node) in skip) != type_only:
                continue
            targets = []
            if isinstance(node, ast.ImportFrom):
                name = _resolve(mods, m, node)
                if not name or not name.startswith("qsimdist"):
                    continue
                for a in node.names:
                    full = name + "." + a.name
                    tgt = full if full in mods else name
                    targets.append(tgt)
                    if a.name.startswith("_") and tgt != m and not a.name.startswith("__"):
                        private.append((m, name, a.name))
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("qsimdist")]
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t != m and t in mods:
                    edges.setdefault(m, set()).add(t)
    return edges, private


def _packages_above(module: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``: the packages whose faces run before ``module``."""
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def runtime_graph(edges: dict[str, set[str]], mods) -> dict[str, set[str]]:
    """``edges`` with what importing implies: ``m`` importing ``t`` also runs the faces of
    the packages above ``t`` that are not above ``m`` (those already ran before ``m``).

    Nothing is left out: a package's face importing its submodules, and a submodule
    importing its parent's face, are edges like any other.
    """
    out: dict[str, set[str]] = {}
    for m, ts in edges.items():
        above_m = set(_packages_above(m))
        deps = set(ts)
        for t in ts:
            deps.update(p for p in _packages_above(t) if p in mods and p not in above_m)
        deps.discard(m)
        out[m] = deps
    return out


def sccs(g):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, st, on, out, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = c[0]
        c[0] += 1
        st.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(g):
        if v not in index:
            strong(v)
    return out


def closed_by_type_only(edges, typed, mods) -> list[list[str]]:
    """The cycles (sorted components) the run-time graph would have if the type-only
    imports ``typed`` ran too, less those it has without them."""
    both = {m: set(edges.get(m, ())) | set(typed.get(m, ())) for m in set(edges) | set(typed)}
    have = {frozenset(c) for c in sccs(runtime_graph(edges, mods))}
    return sorted(sorted(c) for c in sccs(runtime_graph(both, mods)) if frozenset(c) not in have)


def main(argv: list[str]) -> int:
    repo = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[1]
    mods = _modules(repo / "qsimdist")
    edges, private = graph(mods)
    cyc = sccs(runtime_graph(edges, mods))
    print("run-time cycles:", len(cyc))
    for comp in cyc:
        print("  ", sorted(comp))
    typed = type_only_graph(mods)
    print("type-only imports:", sum(len(ts) for ts in typed.values()))
    for m in sorted(typed):
        for t in sorted(typed[m]):
            print("  ", (m, t))
    closed = closed_by_type_only(edges, typed, mods)
    print("cycles closed by type-only imports:", len(closed))
    for comp in closed:
        print("  ", comp)
    up = [(m, t) for m, ts in edges.items() for t in ts
          if m.startswith("qsimdist.planner") and t.startswith("qsimdist.executors")]
    print("planner->executors:", up)
    print("private cross-module imports:", len(private))
    for x in sorted(private):
        print("  ", x)
    ex = "qsimdist.executors"
    inward = sorted((m, t) for m, ts in edges.items() for t in ts
                    if t.startswith(ex + ".") and not (m == ex or m.startswith(ex + ".")))
    print("executor modules imported from outside executors/:", len(inward))
    for x in inward:
        print("  ", x)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
