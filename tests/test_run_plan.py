"""``qsimdist.run_plan``: the Python twin of ``qsimdist run`` (issue 44).

In one process it checks a saved plan against the memory limit, runs it and returns a
:class:`~qsimdist.PlanRun`; under ``mpiexec -n 2`` every rank calls it, rank 0 alone reads
the plan file and sends it, and each rank runs the distributed schedule (compared with the
single-process values). ``qsimdist run`` is a thin caller of it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import qsimdist
from qsimdist.errors import InvalidInputError, PlanError, PlanFormatError

HERE = Path(__file__).resolve().parent
CIRCUIT = HERE.parent / "circuits" / "rqc_3x4_m8.qsim"
PATTERN = "0000********"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A circuit plan (8 open qubits) saved to a file, and its values from plan.execute()."""
    plan = qsimdist.plan(str(CIRCUIT), bitstrings=PATTERN, order="natural", dtype="complex128",
                         memory_limit="none", max_repeats=4)
    path = tmp_path_factory.mktemp("run_plan") / "plan.json"
    plan.save(path)
    return path, np.asarray(plan.execute()).reshape(-1)


def test_run_plan_runs_a_saved_file_in_one_process(saved):
    path, ref = saved
    got = qsimdist.run_plan(path, memory_limit="1GiB")
    assert isinstance(got, qsimdist.PlanRun) and got.rank == 0
    assert got.values.shape == (256,) and got.values.dtype == np.complex128
    np.testing.assert_allclose(got.values, ref, rtol=1e-12, atol=1e-14)
    assert got.pattern == PATTERN and got.plan.dtype == "complex128"
    assert got.stats["flops"] == got.plan.stats.flops and "ranks" not in got.stats
    # the labels the CLI prints: the pattern's bitstrings, block by block, in value order
    blocks = list(got.chunks(100))
    assert [len(labels) for labels, _ in blocks] == [100, 100, 56]
    labels = [b for block, _ in blocks for b in block]
    assert labels[0] == "000000000000" and labels[1] == "000000000001"
    assert labels[-1] == "000011111111"
    np.testing.assert_array_equal(np.concatenate([v for _, v in blocks]), got.values)
    # one amplitude checked against the amplitude API, which plans on its own
    ref_amp = qsimdist.amplitude(str(CIRCUIT), labels[37], order="natural", dtype="complex128")
    assert abs(got.values[37] - ref_amp) <= 1e-12 * max(1.0, abs(ref_amp))


def test_run_plan_takes_a_plan_object_and_matches_the_cli(saved, tmp_path):
    path, ref = saved
    got = qsimdist.run_plan(qsimdist.Plan.load(path), executor="local")
    np.testing.assert_allclose(got.values, ref, rtol=1e-12, atol=1e-14)
    proc = subprocess.run([sys.executable, "-m", "qsimdist", "run", str(path), "--json"],
                          capture_output=True, text=True, timeout=300, cwd=HERE.parent)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    cli = np.array([complex(a["re"], a["im"]) for a in data["amplitudes"]])
    assert [a["bitstring"] for a in data["amplitudes"]][:2] == ["000000000000", "000000000001"]
    np.testing.assert_array_equal(cli, got.values)  # the CLI prints what the library returns


def test_run_plan_refuses_in_one_line(saved):
    path, _ = saved
    with pytest.raises(PlanError, match="memory limit .* is too small"):
        qsimdist.run_plan(path, memory_limit="1KiB")  # the guard, before anything is allocated
    with pytest.raises(InvalidInputError, match="trace records distributed runs"):
        qsimdist.run_plan(path, trace=path.with_suffix(".trace.json"), executor="local")
    with pytest.raises(InvalidInputError, match="needs a plan"):
        qsimdist.run_plan(None)
    with pytest.raises(PlanFormatError, match="no such plan file"):
        qsimdist.run_plan(path.with_name("missing.json"))
    with pytest.raises(InvalidInputError, match="unknown executor 'gpu'; valid: local, mpi"):
        qsimdist.run_plan(path, executor="gpu")


def test_run_plan_checks_the_pattern_against_the_result(saved):
    """A plan whose pattern does not match its result is refused (a file's pattern is
    checked on load; a Plan object built by hand is checked after the run)."""
    path, _ = saved
    plan = qsimdist.Plan.load(path)
    plan.meta["bitstring"] = "000000******"  # 6 open qubits, but the plan gives 256 values
    with pytest.raises(PlanFormatError, match="leaves 6 qubits open but the result holds 256"):
        qsimdist.run_plan(plan)


MPI_SCRIPT = """
import json, sys
import numpy as np
import qsimdist
from mpi4py import MPI

comm = MPI.COMM_WORLD
path = sys.argv[1] if comm.Get_rank() == 0 else None  # rank 0 alone names the file
got = qsimdist.run_plan(path, memory_limit="48KiB")
ref = np.load(sys.argv[2])
err = float(np.max(np.abs(got.values - ref)) / np.max(np.abs(ref)))
errs = comm.gather(err, root=0)
if got.rank == 0:
    print(json.dumps({"errs": errs, "ranks": [r["rank"] for r in got.stats["ranks"]],
                      "slices": [r["slices"] for r in got.stats["ranks"]],
                      "devices": got.plan.schedule.devices, "comm": got.stats["comm"]}))
"""


@pytest.mark.mpi
def test_run_plan_under_mpiexec_equals_one_process(tmp_path):
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'")
    pytest.importorskip("mpi4py")
    sys.path.insert(0, str(HERE))
    from test_distribute import toy_profile

    from qsimdist.engine.coordination import distribute

    one = qsimdist.plan(str(CIRCUIT), bitstrings=PATTERN, order="natural", memory_limit="none",
                        max_repeats=4)
    prof = toy_profile(name="tight", memory_bytes=48 * 1024, devices_per_node=2)
    plan = distribute(one, prof, 2)
    path = tmp_path / "two.json"
    plan.save(path)
    ref = tmp_path / "ref.npy"
    np.save(ref, np.asarray(one.execute()).reshape(-1))
    script = tmp_path / "run_plan_mpi.py"
    script.write_text(MPI_SCRIPT)
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", str(script),
                           str(path), str(ref)], capture_output=True, text=True, timeout=240,
                          cwd=HERE.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout  # rank 0 alone reports
    res = json.loads(lines[0])
    assert res["devices"] == 2 and res["ranks"] == [0, 1] and res["comm"] == "mpi"
    assert all(s >= 1 for s in res["slices"])
    assert max(res["errs"]) <= 1e-5  # complex64, every rank's values
