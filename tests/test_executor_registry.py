"""Executors only through the registry (issue 44): no code outside ``qsimdist/executors/``
branches on an executor's name; callers ask the registered executor for what it means to
them (runs over ranks, its rank, a broadcast from rank 0, a shared seed, how a plan is
shared), and the registry is the one list of names every entry point checks against.

The scan reads the package's source with :mod:`ast` (docstrings and keyword arguments
such as ``executor="mpi"`` are not branches); a companion test plants branches in a file
and checks that the scan names each one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import qsimdist
from qsimdist.errors import InvalidInputError, PlanError
from qsimdist.executors import (
    Executor,
    LocalExecutor,
    MPIExecutor,
    bind_executor,
    executor_kind,
    executor_names,
    resolve_executor,
)

PACKAGE = Path(qsimdist.__file__).resolve().parent
#: the names a branch must not compare against outside the executors' own package
EXECUTOR_NAMES = frozenset({"local", "mpi"})


def _names_in(node: ast.AST) -> set[str]:
    """The executor names a compared operand spells: a string, or a literal collection."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & EXECUTOR_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)
                and isinstance(e.value, str)} & EXECUTOR_NAMES
    return set()


def name_branches(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """``(line, what)`` for every branch on an executor's name in ``source``: a comparison
    (``==``, ``!=``, ``in``, ``not in``, ``is``) with ``"local"`` or ``"mpi"`` or with a
    literal collection holding one, a ``match`` case on one, and a hand-written
    collection of executor names (both ``"local"`` and ``"mpi"``) anywhere."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            names = set().union(*(_names_in(n) for n in (node.left, *node.comparators)))
            if names:
                found.append((node.lineno, f"compares with {sorted(names)}"))
        elif isinstance(node, ast.MatchValue) and _names_in(node.value):
            found.append((node.lineno, f"matches {sorted(_names_in(node.value))}"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and _names_in(node) == (
                EXECUTOR_NAMES):
            found.append((node.lineno, "lists the executor names by hand"))
    # a collection compared against is reported once, as the comparison
    seen: dict[int, str] = {}
    for line, what in found:
        if line not in seen or what.startswith("compares"):
            seen[line] = what
    return sorted(seen.items())


def scan(root: Path, skip: Path | None = None) -> list[str]:
    """``path:line: what`` for every branch on an executor's name under ``root``, outside
    ``skip`` (a folder)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if skip is not None and skip in path.parents:
            continue
        for line, what in name_branches(path.read_text(encoding="utf-8"), str(path)):
            out.append(f"{path.relative_to(root.parent)}:{line}: {what}")
    return out


def test_no_branch_on_an_executor_name_outside_the_executors():
    found = scan(PACKAGE, skip=PACKAGE / "executors")
    assert not found, ("ask the executor (qsimdist.executors.executor_kind / bind_executor, "
                       "RunOptions.distributed) instead of comparing its name:\n"
                       + "\n".join(found))


def test_the_scan_sees_planted_branches(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "executors").mkdir(parents=True)
    (pkg / "door.py").write_text(
        '"""A docstring may say executor == "mpi"; that is no branch."""\n'  # 1
        'EXECUTORS = ("local", "mpi")\n'                                       # 2
        "def run(executor, opts):\n"                                           # 3
        '    plan(executor="mpi")\n'                                           # 4: a keyword
        '    if executor == "mpi":\n'                                          # 5
        "        pass\n"                                                       # 6
        '    if opts.resolved_executor() != "local":\n'                        # 7
        "        pass\n"                                                       # 8
        '    if executor not in ("auto", "local", "mpi"):\n'                   # 9
        "        pass\n"                                                       # 10
        "    match executor:\n"                                                # 11
        '        case "local":\n'                                              # 12
        "            pass\n"                                                   # 13
        '    return "mpi" if opts.distributed else "local"\n',                 # 14: no branch
        encoding="utf-8")
    (pkg / "executors" / "inside.py").write_text('if name == "mpi":\n    pass\n',
                                                 encoding="utf-8")
    found = scan(pkg, skip=pkg / "executors")
    assert [f.split(":")[1] for f in found] == ["2", "5", "7", "9", "12"], found
    assert "lists the executor names by hand" in found[0]
    assert "compares with ['mpi']" in found[1]
    # inside the executors' package the same branch is allowed; a full scan sees it
    assert any("inside.py:1:" in f for f in scan(pkg))


# ------------------------------------------------------------------ the registry's answers


class OneRankComm:
    """A communicator of one rank (what the MPI executor calls on it), without MPI."""

    def __init__(self) -> None:
        self.bcasts = 0

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's spelling
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def bcast(self, obj, root=0):
        assert root == 0
        self.bcasts += 1
        return obj

    def Ibarrier(self):  # noqa: N802
        class Done:
            def Test(self) -> bool:  # noqa: N802
                return True

        return Done()


def test_the_registry_is_the_one_list_of_names():
    assert executor_names() == ("local", "mpi")
    assert executor_kind("local") is LocalExecutor and executor_kind("mpi") is MPIExecutor
    assert set(executor_names()) <= set(qsimdist.executors.executors())  # each can execute
    for kind in map(executor_kind, executor_names()):
        assert issubclass(kind, Executor) and kind.one_process is (not kind.distributed)
    assert not LocalExecutor.distributed and MPIExecutor.distributed
    with pytest.raises(InvalidInputError, match=r"^unknown executor 'gpu'; valid: local, mpi$"):
        executor_kind("gpu")
    with pytest.raises(InvalidInputError, match="unknown executor"):
        executor_kind(["mpi"])  # not a name: refused in one line, not a TypeError


def test_every_entry_point_checks_against_the_registry(monkeypatch):
    """A name registered beside the built-in ones is accepted by every door's check, and
    the refusals list exactly what is registered: no door keeps its own tuple."""
    from qsimdist.engine.expectation import ExpectationEngine
    from qsimdist.engine.networks import ContractOptions
    from qsimdist.engine.options import RunOptions, check_executor
    from qsimdist.planner import registry

    checks = [
        ("RunOptions", lambda e: RunOptions.resolve(executor=e, memory_limit="none")),
        ("ContractOptions", lambda e: ContractOptions(executor=e)),
        ("ExpectationEngine", lambda e: ExpectationEngine(executor=e, memory_limit="none")),
    ]
    for door, make in checks:
        with pytest.raises(InvalidInputError, match=r"unknown executor 'gpu'; valid: local, mpi$"):
            make("gpu")
            pytest.fail(f"{door} accepted an unregistered executor")

    class GpuFarm(LocalExecutor):
        name = "gpu"

    monkeypatch.setitem(registry._EXECUTORS, "gpu", GpuFarm)
    assert check_executor("gpu") == "gpu"
    assert ContractOptions(executor="gpu").resolved_runner().name == "gpu"
    with pytest.raises(InvalidInputError, match=r"valid: local, mpi, gpu$"):
        check_executor("tpu")


def test_the_primitives_options_take_auto_and_the_registry():
    pytest.importorskip("qiskit")
    from qsimdist.qiskit.estimator import EstimatorOptions
    from qsimdist.qiskit.sampler import SamplerOptions

    for options in (SamplerOptions, EstimatorOptions):
        for name in ("auto", "local", "mpi"):
            assert options(executor=name).executor == name
        with pytest.raises(InvalidInputError,
                           match=r"^unknown executor 'gpu'; valid: auto, local, mpi$"):
            options(executor="gpu")


def test_auto_is_resolved_in_one_place(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE",
                "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_executor("auto") == "local"
    assert resolve_executor("auto", comm=OneRankComm()) == "mpi"  # a communicator asks for it
    assert resolve_executor("local", comm=OneRankComm()) == "local"  # a name is kept
    from qsimdist.engine.networks import ContractOptions

    assert ContractOptions(profile="local-cpu").resolved_executor() == "local"
    assert ContractOptions(comm=OneRankComm()).resolved_executor() == "mpi"
    monkeypatch.setenv("PMI_SIZE", "2")
    assert resolve_executor("auto") == "mpi"
    assert ContractOptions(profile="local-cpu").resolved_executor() == "mpi"
    assert ContractOptions().resolved_executor() == "local"  # neither comm nor profile


def test_what_each_executor_answers():
    here = bind_executor("local", comm=OneRankComm())
    assert (here.rank, here.size, here.one_process, here.distributed) == (0, 1, True, False)
    token = object()
    assert here.broadcast(token) is token
    assert here.execute_keywords(memory_limit=5, collectives="mpi") == {}
    seeds = {here.shared_seed() for _ in range(4)}
    assert len(seeds) == 4 and all(0 <= s < 1 << 63 for s in seeds)  # fresh each time
    calls = []
    assert here.share_plan(lambda: calls.append(1) or "plan") == "plan" and calls == [1]

    comm = OneRankComm()
    ranks = bind_executor("mpi", comm)
    assert (ranks.rank, ranks.size, ranks.distributed, ranks.comm) == (0, 1, True, comm)
    assert ranks.broadcast(token) is token and comm.bcasts == 1  # through the communicator
    assert isinstance(ranks.shared_seed(), int) and comm.bcasts == 2
    assert ranks.execute_keywords(memory_limit=5, collectives="mpi") == {
        "executor": "mpi", "comm": comm, "memory_limit": 5, "collectives": "mpi"}


def _small_network():
    from qsimdist.frontends import amplitude_network, load

    gc = load(str(Path(__file__).resolve().parent.parent / "circuits" / "ghz_n12.qasm"))
    return amplitude_network(gc, "0" * 12, "qiskit")


def test_a_distributed_plan_is_shared_by_the_executor(monkeypatch):
    """Rank 0's plan reaches the ranks through the executor's ``share_plan`` (sent as data and
    validated), and a failure while planning reaches them as the same error."""
    from qsimdist.executors.liveness import is_collective
    from qsimdist.planner.plan import make_plan

    net = _small_network()
    comm = OneRankComm()
    plan = make_plan(net, dtype="complex64", memory_limit=None)
    got = bind_executor("mpi", comm).share_plan(lambda: plan)
    assert got is not plan and got.to_dict() == plan.to_dict() and comm.bcasts == 1

    def broken():
        raise PlanError("no path fits")

    with pytest.raises(PlanError, match="no path fits") as info:
        bind_executor("mpi", comm).share_plan(broken)
    assert is_collective(info.value)


def test_the_plan_cache_owns_the_executor_branch(monkeypatch):
    """``PLANS.plan_for(net, run)``: in one process the plan is made within the limit and
    checked against the budget; on a distributed executor the one-device plan is made
    unsliced (``build(None)``), distributed for the ranks and shared, with no branch in
    the caller."""
    from qsimdist.engine.cache import PlanCache
    from qsimdist.engine.options import RunOptions
    from qsimdist.planner.plan import make_plan

    net = _small_network()
    cache = PlanCache()
    limits = []

    def build(limit):
        limits.append(limit)
        return make_plan(net, dtype="complex64", memory_limit=limit)

    here = RunOptions.resolve(memory_limit="1GiB")
    plan, reused = cache.plan_for(net, here, build=build)
    assert (reused, limits, plan.schedule) == (False, [1 << 30], None)
    assert cache.plan_for(net, here, build=build)[1] and limits == [1 << 30]  # kept
    tight = RunOptions.resolve(memory_limit=plan.stats.peak_bytes - 1)
    cache_tight = PlanCache()
    with pytest.raises(PlanError, match="too small"):  # the guard runs inside the cache
        cache_tight.plan_for(net, tight, build=lambda limit: plan)
    unchecked, _ = cache_tight.plan_for(net, tight, build=lambda limit: plan, check=False)
    assert unchecked is not None

    comm = OneRankComm()
    ranks = RunOptions.resolve(memory_limit="1GiB", executor="mpi", comm=comm)
    assert ranks.distributed and ranks.comm is comm and ranks.runner.comm is comm
    shared, reused = cache.plan_for(net, ranks, build=build)
    assert not reused and limits[-1] is None  # made unsliced, then distributed
    assert shared.schedule is not None and shared.schedule.devices == 1
    assert comm.bcasts >= 1  # shared through the communicator
    np.testing.assert_allclose(shared.execute(), plan.execute(), rtol=1e-5)
