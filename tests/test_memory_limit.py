"""The default memory limit is computed in one function (issue 44):
:func:`qsimdist.memory_limit.default_memory_limit`, with one reader of ``/proc/meminfo``,
called by the engine's MemoryBudget and by the MPI executor alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qsimdist.memory_limit as ml
from qsimdist.engine.memory import MemoryBudget
from qsimdist.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30

#: text that only the one reader of the host's memory may hold
READER_MARKS = ("/proc/meminfo", "MemAvailable", "SC_AVPHYS_PAGES")


def default_computations(package: Path) -> dict[str, list[str]]:
    """Per module of ``package`` (relative path), what looks like computing the default
    limit: a mark of reading the host's memory, a read of ``$QSIMDIST_MEMORY_LIMIT``
    (the name as a whole string), or a product with 0.8 / ``DEFAULT_FRACTION``."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        hits = [mark for mark in READER_MARKS if mark in text]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and node.value == "QSIMDIST_MEMORY_LIMIT":
                hits.append(f"environment, line {node.lineno}")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                for side in (node.left, node.right):
                    if (isinstance(side, ast.Constant) and side.value == 0.8) or (
                            isinstance(side, ast.Name) and side.id == "DEFAULT_FRACTION"):
                        hits.append(f"0.8 times, line {node.lineno}")
        if hits:
            found[str(path.relative_to(package))] = hits
    return found


def test_the_default_is_computed_in_one_module():
    found = default_computations(ROOT / "qsimdist")
    assert set(found) == {"memory_limit.py"}, found
    # there: one read of the environment and one 80%-of-available product
    assert sum(h.startswith("environment") for h in found["memory_limit.py"]) == 1
    assert sum(h.startswith("0.8 times") for h in found["memory_limit.py"]) == 1


def test_a_second_default_computation_is_found(tmp_path):
    """The scan above can fail: a module of its own that reads meminfo, or one that takes
    80% of something, or one that reads the environment variable, is reported."""
    pkg = tmp_path / "qsimdist"
    (pkg / "executors").mkdir(parents=True)
    (pkg / "memory_limit.py").write_text((ROOT / "qsimdist" / "memory_limit.py").read_text())
    assert set(default_computations(pkg)) == {"memory_limit.py"}
    (pkg / "executors" / "mpi.py").write_text(
        "import os\n"
        "def default_rank_limit(avail):\n"
        "    env = os.environ.get('QSIMDIST_MEMORY_LIMIT')\n"
        "    return env or int(0.8 * avail)\n")
    found = default_computations(pkg)
    assert found["executors/mpi.py"] == ["environment, line 3", "0.8 times, line 4"]
    (pkg / "config.py").write_text("def free():\n    return open('/proc/meminfo').read()\n")
    assert set(default_computations(pkg)) == {"memory_limit.py", "executors/mpi.py",
                                               "config.py"}


# ------------------------------------------------------------------ the one function
@pytest.fixture
def ten_gib_free(monkeypatch):
    """No environment variable; 10 GiB available now (the free-memory reader replaced)."""
    reads = []

    def available(*args):
        reads.append(args)
        return 10 * GIB

    monkeypatch.delenv("QSIMDIST_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(ml, "available_memory", available)
    return reads


def test_default_is_80_percent_of_available_shared_by_the_ranks(ten_gib_free):
    assert ml.default_memory_limit() == ml.DefaultLimit(8 * GIB, "default", 1)
    assert ml.default_memory_limit(4) == ml.DefaultLimit(2 * GIB, "default", 4)
    asked = []
    assert ml.default_memory_limit(lambda: asked.append(1) or 2).limit == 4 * GIB
    assert asked == [1] and len(ten_gib_free) == 3  # one read of free memory per call


def test_unreadable_memory_gives_no_default(monkeypatch):
    monkeypatch.delenv("QSIMDIST_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(ml, "available_memory", lambda *a: None)
    assert ml.default_memory_limit(2) == ml.DefaultLimit(None, "default", 2)


@pytest.mark.parametrize(("env", "want"), [
    ("3GiB", ml.DefaultLimit(3 * GIB, "environment")),
    ("500MB", ml.DefaultLimit(500 * 10**6, "environment")),
    ("2e9", ml.DefaultLimit(2 * 10**9, "environment")),
    (" None ", ml.DefaultLimit(None, "none")),
    ("UNLIMITED", ml.DefaultLimit(None, "none")),
])
def test_the_environment_sets_the_limit_per_rank_as_it_stands(monkeypatch, env, want):
    def never(*args):
        raise AssertionError("free memory read though the environment sets the limit")

    def no_collective():
        raise AssertionError("ranks counted though the environment's limit is per rank")

    monkeypatch.setenv("QSIMDIST_MEMORY_LIMIT", env)
    monkeypatch.setattr(ml, "available_memory", never)
    assert ml.default_memory_limit(no_collective) == want


def test_an_unreadable_environment_value_is_one_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("QSIMDIST_MEMORY_LIMIT", "lots")
    with pytest.raises(InvalidInputError, match=r"\$QSIMDIST_MEMORY_LIMIT: cannot read memory"):
        ml.default_memory_limit()
    with pytest.raises(InvalidInputError, match="QSIMDIST_MEMORY_LIMIT"):
        MemoryBudget.resolve(None)


def test_one_meminfo_reader_serves_available_and_machine_memory(tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:        2000 kB\nMemFree:  10 kB\nMemAvailable:  1500 kB\n"
                    "SwapTotal:        500 kB\nHugePages_Total:       0\nBogus: x kB\n")
    fields = ml.read_meminfo(str(info))
    assert fields["MemTotal"] == 2000 * 1024 and fields["HugePages_Total"] == 0
    assert "Bogus" not in fields
    assert ml.available_memory(str(info)) == 1500 * 1024
    assert ml.machine_memory(str(info)) == 2500 * 1024
    assert ml.read_meminfo(str(tmp_path / "absent")) == {}
    # without MemAvailable, the free pages the OS reports (never nothing on this host)
    info.write_text("MemTotal:        2000 kB\n")
    assert ml.available_memory(str(info)) > 0


# ----------------------------------------------------- every user goes through it
def test_memory_budget_and_the_mpi_executor_share_the_default(ten_gib_free, monkeypatch):
    import qsimdist.executors.rank_checks as checks

    class TwoRanks:
        def Get_size(self):
            return 2

    monkeypatch.setattr(checks, "ranks_on_host", lambda comm: 2)
    monkeypatch.setattr("qsimdist.engine.memory.machine_memory", lambda: 64 * GIB)
    budget = MemoryBudget.resolve(None, TwoRanks())
    assert (budget.limit, budget.source, budget.ranks_on_host) == (4 * GIB, "default", 2)
    assert budget.host == 32 * GIB
    assert checks.default_rank_limit(TwoRanks()) == budget.limit
    assert len(ten_gib_free) == 2  # one read each
    monkeypatch.setenv("QSIMDIST_MEMORY_LIMIT", "3GiB")
    assert checks.default_rank_limit(TwoRanks()) == MemoryBudget.resolve(None).limit == 3 * GIB


def test_the_quimb_hook_reads_free_memory_once_per_call(ten_gib_free):
    """``run_network`` (behind ``qsimdist.quimb.contract``, the hook and ``qsimdist
    contract``) resolves its budget once: planning and the guard share it."""
    import numpy as np

    from qsimdist.engine.networks import ContractOptions, run_network
    from qsimdist.network import Network

    rng = np.random.default_rng(3)
    net = Network([("a", "b"), ("b", "c"), ("c", "d")], ("a", "d"),
                  {"a": 2, "b": 3, "c": 4, "d": 2},
                  [rng.standard_normal(s).astype(complex) for s in ((2, 3), (3, 4), (4, 2))])
    want = net.arrays[0] @ net.arrays[1] @ net.arrays[2]
    values, plan = run_network(net, ContractOptions(), "complex128")
    np.testing.assert_allclose(values, want, rtol=1e-12)
    assert len(ten_gib_free) == 1


def test_api_plan_and_contract_read_free_memory_once(ten_gib_free):
    import numpy as np

    import qsimdist
    from qsimdist.network import Network

    qsimdist.plan(str(ROOT / "circuits" / "ghz_n5.qasm"), bitstrings="0000*")
    assert len(ten_gib_free) == 1
    net = Network([("a",), ("a",)], (), {"a": 2}, [np.ones(2), np.arange(2.0)])
    assert complex(qsimdist.contract(net)) == 1
    assert len(ten_gib_free) == 2
