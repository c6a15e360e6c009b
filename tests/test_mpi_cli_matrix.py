"""A part of the CLI matrix under mpiexec (tests/mpi_matrix.py runs all of it).

Each case runs ``qsimdist amplitude`` under ``mpiexec -n P`` and in one
process at the same per-rank memory limit; the amplitudes must agree (rtol
1e-5, complex64) in the same shape, and where the distributed executor ran,
numpy's traced bytes on every rank must stay within that rank's limit and the
guard must have checked a peak within it. Times are recorded by the full
matrix (BENCHMARKS.md), not asserted here.
"""

from __future__ import annotations

import shutil
import warnings

import pytest

from . import mpi_matrix

pytestmark = [pytest.mark.mpi]

if shutil.which("mpiexec") is None:  # pragma: no cover - the test extra installs mpich
    pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'", allow_module_level=True)

CASES = [
    ("ghz_n12.qasm", "one", "forcing", 2),
    ("ghz_n12.qasm", "two", "forcing", 2),
    ("ghz_n12.qasm", "stars", "forcing", 2),
    ("qft_n10.qasm", "stars", "none", 2),
    ("rqc_4x5_m12.qasm", "one", "forcing", 2),
    ("rqc_3x4_m8.qasm", "two", "forcing", 4),
    ("lattice/tfim_rect_3x3_t2.qasm", "stars", "ample", 4),
]


def _check(rec: dict) -> None:
    if mpi_matrix.CRASHES:  # run again after a signal: visible in the summary, with the dump
        crashes, mpi_matrix.CRASHES[:] = list(mpi_matrix.CRASHES), []
        warnings.warn(f"a run ended by a signal and was run again: {crashes}", stacklevel=2)
    assert rec["ok"], rec.get("reason")
    assert rec["rel_err"] <= mpi_matrix.RTOL
    assert rec["shape_one"] == rec["shape_mpi"]
    limit = rec.get("memory_limit")
    for m in rec.get("memory", []):
        assert m["guarded_bytes"] >= m["predicted_peak_bytes"] > 0 or m["guarded_bytes"] == 0
        if limit is not None and limit != mpi_matrix.AMPLE:
            assert m["guarded_bytes"] <= int(limit), m
            assert 0 <= m["traced_array_bytes"] <= int(limit), m


@pytest.mark.parametrize("name,kind,limit,ranks", CASES)
def test_cli_case_equals_one_process(name, kind, limit, ranks):
    rec = mpi_matrix.run_case(name, kind, limit, ranks)
    _check(rec)
    if (name, limit) == ("rqc_4x5_m12.qasm", "forcing"):
        assert rec["forces_redistribution"] and rec["redistributions"] > 0
        assert rec["method_mpi"] == "tensor-network"


@pytest.mark.slow
def test_cli_n30_reference_circuit_under_mpiexec(shared_data):
    del shared_data  # the fixture skips, with its reason, when ../shared/data is absent
    rec = mpi_matrix.run_case("n30", "one", "forcing", 2)
    _check(rec)
    assert rec["method_mpi"] == "tensor-network"


SCALAR_SCRIPT = """
import numpy as np
from mpi4py import MPI
import qsimdist
from qsimdist.engine.coordination import distribute, plan_on_root, profile_for
from qsimdist.network import Network

rng = np.random.default_rng(3)
arrays = [np.array(1.5 - 0.5j), rng.normal(size=4) + 0j, rng.normal(size=(4, 4)) + 0j,
          rng.normal(size=4) + 0j]
net = Network([(), ("a",), ("a", "b"), ("b",)], (), {"a": 4, "b": 4}, arrays)
def build():
    one = qsimdist.plan(net, memory_limit="none", dtype="complex128")
    return distribute(one, profile_for("local-cpu", None), MPI.COMM_WORLD.Get_size())
plan = plan_on_root(build, MPI.COMM_WORLD)  # a scalar leaf goes through the broadcast
value = plan.execute(executor="mpi", comm=MPI.COMM_WORLD)
local = qsimdist.plan(net, memory_limit="none", dtype="complex128").execute()
want = 1.5 - 0.5j
want *= arrays[1] @ arrays[2] @ arrays[3]
assert value.shape == () == local.shape, (value.shape, local.shape)
assert abs(complex(value) - want) <= 1e-12 * abs(want), (complex(value), want)
print("ok", MPI.COMM_WORLD.Get_rank(), value.shape)
"""


@pytest.mark.parametrize("ranks", [2, 4])
def test_scalar_result_and_scalar_leaf_under_mpi(ranks, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "scalar.py"
    script.write_text(SCALAR_SCRIPT)
    proc = subprocess.run(["mpiexec", "-n", str(ranks), sys.executable, str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("ok") == ranks and "()" in proc.stdout


def test_saved_schedule_checked_against_the_hosts_share():
    """A saved dgx-h100 schedule (36 GiB per rank) is refused on a host whose available
    memory, shared by its 8 ranks, is less: the default limit is the host's, not the
    profile's usable memory."""
    import subprocess
    from pathlib import Path

    from qsimdist.memory_limit import default_memory_limit

    plan = Path(mpi_matrix.ROOT) / "benchmarks" / "plans" / \
        "tfim_hex_8x8_t10_dgx-h100-8.json"
    need = 36 * 2**30
    share = default_memory_limit().limit
    if share is None or share // 8 >= need:
        pytest.skip(f"this host's share per rank ({share}) would hold the schedule")
    proc = subprocess.run(["mpiexec", "-n", "8", mpi_matrix.QSIMDIST, "run", str(plan)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("qsimdist: error:")]
    assert len(lines) == 1 and "over its memory limit" in lines[0], proc.stderr


def test_traced_memory_of_a_run_of_many_slices():
    """QSIMDIST_TRACE_MEMORY=1 traces the first two of many slices per rank, =all every
    slice: the first two see part of what every slice sees (later slices of a plan that
    keeps step outputs compute other subsets of the steps, and the pool may grow), and both
    stay within the per-rank limit; =rss traces nothing and measures the resident size
    alone."""
    import json
    import subprocess

    args = ["mpiexec", "-n", "2", mpi_matrix.QSIMDIST, "amplitude",
            str(mpi_matrix.circuit_path("rqc_3x4_m8.qasm")), "000000000000",
            "--memory-limit", "3286", "--profile", "local-cpu", "--json"]
    seen = {}
    for mode in ("1", "all", "rss"):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300,
                              cwd=mpi_matrix.ROOT,
                              env=dict(mpi_matrix.os.environ, QSIMDIST_TRACE_MEMORY=mode))
        assert proc.returncode == 0, proc.stderr[-2000:]
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][0]
        stats = json.loads(line)["stats"]
        assert stats["n_slices"] >= 2 * 17  # more than TRACE_ALL_SLICES per rank
        seen[mode] = stats["ranks"]
    for win, full in zip(seen["1"], seen["all"]):
        assert 0 < full["traced_array_bytes"] <= 3286
        assert 0 < win["traced_array_bytes"] <= full["traced_array_bytes"]
        assert 0 < win["traced_peak_bytes"] <= 1.1 * full["traced_peak_bytes"]
    for rank in seen["rss"]:  # resident size only: nothing traced
        assert rank["traced_peak_bytes"] == rank["traced_array_bytes"] == -1
        assert rank["rss_before_bytes"] > 0 and rank["rss_growth_bytes"] >= 0


def test_a_crash_is_told_from_a_failure():
    """Only a run a signal ended is run again: one process by its negative return code,
    mpiexec by its report of a rank's signal; an error exit is a failure as it stands."""
    import subprocess

    def proc(rc, out=""):
        return subprocess.CompletedProcess(["x"], rc, out, "")

    assert mpi_matrix._crashed(proc(-11)) == 11
    assert mpi_matrix._crashed(proc(11, "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: "
                                        "Segmentation fault (signal 11)\n")) == 11
    assert mpi_matrix._crashed(proc(2, "qsimdist: error: bad input")) is None
    assert mpi_matrix._crashed(proc(0)) is None
