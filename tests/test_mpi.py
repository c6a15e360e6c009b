"""The ``mpi`` executor under ``mpiexec -n 2`` and ``-n 4``, against the single-process one.

Each case runs ``tests/mpi_cases.py`` under mpiexec: rank 0 plans and
broadcasts, every rank validates, replays and executes the schedule, and
rank 0 reports the error against the single-process executor with every
rank's measured bytes and peak memory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("QSIMDIST_SHARED_DATA", HERE.parent.parent / "shared" / "data"))

pytestmark = [pytest.mark.mpi]

if shutil.which("mpiexec") is None:  # pragma: no cover - the test extra installs mpich
    pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'", allow_module_level=True)


def mpirun(nranks: int, *args: str, env: dict | None = None, timeout: float = 240):
    cmd = ["mpiexec", "-n", str(nranks), sys.executable, "-m", "mpi4py", *args]
    full_env = dict(os.environ, **(env or {}))
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=HERE.parent)
    return proc, time.monotonic() - t


def run_case(nranks: int, case: str) -> dict:
    proc, _ = mpirun(nranks, str(HERE / "mpi_cases.py"), case)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout  # rank 0 prints, the others print nothing
    return json.loads(lines[0])


def check(res: dict, nranks: int) -> None:
    tol = 1e-5 if res["dtype"] == "complex64" else 1e-12
    assert res["rel_err"] <= tol, res["rel_err"]
    assert len(res["stats"]) == nranks
    for st in res["stats"]:
        # the bytes each rank sends and receives are the schedule's, step by step
        assert st["step_sent"] == res["replay_step_sent"], (st["rank"], st["step_sent"])
        assert st["step_recv"] == res["replay_step_recv"]
        assert st["sent_bytes"] == res["replay_sent_per_slice"] * st["slices"]
        # measured peak (arrays held) within 1.25x of the prediction, never above the limit
        assert st["peak_bytes"] <= 1.25 * res["predicted_peak"]
        assert st["peak_bytes"] <= res["usable"]
        assert st["peak_bytes"] >= 0.5 * res["predicted_peak"]


@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_batched_amplitudes_sharded(nranks, dtype):
    res = run_case(nranks, f"circuit:16:12:3:3:1.0:sharded:{dtype}")
    check(res, nranks)
    assert res["group_size"] == nranks
    assert {"redistribute", "keep"} <= set(res["actions"])


def test_slicing_and_distribution_together():
    res = run_case(4, "circuit:16:12:3:3:1.0:groups")
    check(res, 4)
    assert res["group_size"] == 2 and res["n_slices"] >= 2


@pytest.mark.parametrize("nranks,case", [
    (2, "circuit:16:12:3:3:1.0:reuse"),
    (4, "circuit:16:12:3:3:1.0:reuse:groups"),
    (4, "circuit:14:10:0:7:1.0:reuse:c128"),
])
def test_reuse_across_slices(nranks, case):
    """Kept outputs: every rank runs each step exactly as often as the planner priced it,
    sends the priced bytes, stays under the predicted peak, and the result is right."""
    res = run_case(nranks, case)
    tol = 1e-5 if res["dtype"] == "complex64" else 1e-12
    assert res["rel_err"] <= tol
    assert res["kept"] and res["n_slices"] >= 2
    assert min(res["runs"]) < max(res["runs"])  # something was reused
    priced = sum(b * c for b, c in zip(res["replay_step_sent"], res["runs"]))
    for st in res["stats"]:
        assert st["step_runs"] == res["runs"], st["rank"]
        assert st["sent_bytes"] == priced == res["predicted_comm_bytes"]
        assert st["peak_bytes"] <= res["predicted_peak"] <= res["usable"]


def test_peps_norm_sharded():
    res = run_case(2, "peps:2.0:sharded:c128")
    check(res, 2)
    assert res["group_size"] == 2 and set(res["actions"]) - {"local"}


@pytest.mark.skipif(not (DATA / "networks").is_dir(),
                    reason="reference networks need ../shared/data (absent here)")
def test_benchmark_network_sharded():
    net = DATA / "networks" / "cubic_6x6x10.json"  # a 48-tensor piece of it, closed
    res = run_case(2, f"network:{net}:48:2.0:sharded")
    check(res, 2)
    assert set(res["actions"]) - {"local"}


def test_fault_ends_every_rank_promptly():
    proc, secs = mpirun(4, str(HERE / "mpi_cases.py"), "circuit:16:12:3:3:1.0:sharded",
                        env={"QSIMDIST_FAULT_INJECT": "rank=1,step=3"}, timeout=120)
    assert proc.returncode != 0
    assert secs < 60  # includes planning; the abort itself is immediate
    assert "qsimdist: error: rank 1:" in proc.stderr and "fault injected at step 3" in proc.stderr


def test_different_plans_are_refused():
    code = (
        "import sys; from mpi4py import MPI; sys.argv=['x','circuit:12:6:3:1:2.0:sharded'];"
        "sys.path.insert(0, 'tests');"
        "exec(open('tests/mpi_cases.py').read().split('def main()')[0]);"
        "from qsimdist.executors.rank_checks import check_same_plan;"
        "from qsimdist.errors import PlanError;"
        "p = circuit_plan(8 + MPI.COMM_WORLD.rank, 4, 2, 'complex64', 1);"
        "\ntry:\n    check_same_plan(MPI.COMM_WORLD, p)\nexcept PlanError as e:\n    print(e)"
    )
    proc, _ = mpirun(2, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ranks [1] hold a different plan") == 2


# ------------------------------------------------------------ command line


def qsimdist_cli(nranks: int, *args: str, env: dict | None = None, timeout: float = 240):
    exe = shutil.which("qsimdist")
    assert exe is not None
    cmd = ["mpiexec", "-n", str(nranks), exe, *args] if nranks else [exe, *args]
    t = time.monotonic()
    full = {k: v for k, v in dict(os.environ, **(env or {})).items() if v is not None}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full,
                          cwd=HERE.parent)  # env values None: removed
    return proc, time.monotonic() - t


def amplitudes_of(stdout: str) -> dict:
    data = json.loads(stdout)
    return {a["bitstring"]: complex(a["re"], a["im"]) for a in data["amplitudes"]}


@pytest.fixture(scope="module")
def distributed_plan(tmp_path_factory):
    """A v3 plan for 2 ranks whose schedule shards (sliced plan + dp on a tight profile)."""
    from qsimdist.hardware import save_profile

    sys.path.insert(0, str(HERE))
    from test_distribute import toy_profile

    tmp = tmp_path_factory.mktemp("mpi_cli")
    prof = save_profile(toy_profile(name="tight", memory_bytes=48 * 1024, devices_per_node=2),
                        tmp / "tight.toml")
    out = tmp / "a.json"
    proc, _ = qsimdist_cli(0, "plan", "circuits/rqc_3x4_m8.qsim", "--order", "natural", "-b",
                           "0000********", "--profile", str(prof), "--devices", "2", "-o",
                           str(out), "--max-repeats", "4")
    assert proc.returncode == 0, proc.stderr
    return out


def test_cli_amplitude_under_mpiexec_equals_single_process():
    args = ["amplitude", "circuits/rqc_3x4_m8.qsim", "--order", "natural", "0000000*****",
            "101010101010", "--json", "--dtype", "complex128"]
    one, _ = qsimdist_cli(0, *args)
    two, _ = qsimdist_cli(2, *args, "--memory-limit", "48KiB")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    a, b = amplitudes_of(one.stdout), amplitudes_of(two.stdout)  # rank 0 alone printed
    assert a.keys() == b.keys() and len(a) == 33
    norm = max(abs(v) for v in a.values())
    assert max(abs(a[k] - b[k]) for k in a) <= 1e-12 * norm
    ranks = json.loads(two.stdout)["stats"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["measured_peak_bytes"] <= 48 * 1024 for r in ranks)


@pytest.mark.parametrize("reuse", ["on", "off"])
def test_cli_amplitude_under_mpiexec_reuses_across_slices(reuse):
    """``mpiexec qsimdist amplitude`` plans a sliced schedule whose groups keep step outputs
    (``$QSIMDIST_REUSE``, default on): fewer step runs than slices x steps, the same
    amplitude; ``off`` runs every step once per slice."""
    args = ["amplitude", "circuits/rqc_4x5_m12.qsim", "01" * 10, "--json"]
    one, _ = qsimdist_cli(0, *args, "--memory-limit", "none")
    two, _ = qsimdist_cli(2, *args, "--memory-limit", "2MB", env={"QSIMDIST_REUSE": reuse})
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    a, b = amplitudes_of(one.stdout), amplitudes_of(two.stdout)
    assert abs(a["01" * 10] - b["01" * 10]) <= 1e-5 * abs(a["01" * 10])
    stats = json.loads(two.stdout)["stats"]
    assert stats["n_slices"] >= 8
    for r in stats["ranks"]:
        assert r["slices"] in (stats["n_slices"], stats["n_slices"] // 2)  # groups of 2 or 1
        assert r["measured_peak_bytes"] <= r["predicted_peak_bytes"] <= 2_000_000
        if reuse == "on":
            assert r["kept_outputs"] > 0
            assert r["step_runs"] < 0.8 * r["step_runs_without_reuse"]
        else:
            assert r["kept_outputs"] == 0
            assert r["step_runs"] == r["step_runs_without_reuse"]


def _unset_threads() -> dict:
    from qsimdist.executors.rank_checks import THREAD_VARIABLES

    return dict.fromkeys(THREAD_VARIABLES)


UNSET_THREADS = _unset_threads()


@pytest.mark.parametrize("env,want", [(UNSET_THREADS, "share"),
                                      (dict(UNSET_THREADS, OPENBLAS_NUM_THREADS="2"), 0)])
def test_ranks_share_the_cores_between_their_blas_threads(env, want):
    """Two ranks on one host each cap BLAS at half its cores (at least one); a thread
    count set by hand is left alone (reported as 0)."""
    proc, _ = qsimdist_cli(2, "amplitude", "circuits/rqc_4x5_m12.qsim", "0" * 20,
                           "--memory-limit", "2MB", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    cores = len(os.sched_getaffinity(0))
    expect = max(1, cores // 2) if want == "share" else want
    ranks = json.loads(proc.stdout)["stats"]["ranks"]
    assert [r["blas_threads"] for r in ranks] == [expect, expect]


def test_cli_bad_reuse_setting_is_one_line():
    proc, _ = qsimdist_cli(2, "amplitude", "circuits/rqc_4x5_m12.qsim", "0" * 20,
                           "--memory-limit", "2MB", env={"QSIMDIST_REUSE": "maybe"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines and all(ln.startswith("qsimdist: error: QSIMDIST_REUSE is 'maybe'")
                         for ln in lines)


def test_cli_run_under_mpiexec_equals_single_process(distributed_plan):
    one, _ = qsimdist_cli(0, "run", str(distributed_plan), "--json")
    two, _ = qsimdist_cli(2, "run", str(distributed_plan), "--json")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    a, b = amplitudes_of(one.stdout), amplitudes_of(two.stdout)
    norm = max(abs(v) for v in a.values())
    assert max(abs(a[k] - b[k]) for k in a) <= 1e-5 * norm
    # one process has no ranks; under mpiexec every rank reports what it measured
    assert "ranks" not in json.loads(one.stdout)["stats"]
    ranks = json.loads(two.stdout)["stats"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["slices"] >= 1 and r["step_runs"] >= 1 and r["measured_peak_bytes"] > 0
               and r["seconds"] > 0 for r in ranks)


def test_cli_memory_guard_refuses_with_one_line(distributed_plan):
    proc, _ = qsimdist_cli(2, "run", str(distributed_plan), "--memory-limit", "1KiB")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qsimdist: error: rank 0: the schedule needs")
    assert "1.00 KiB" in lines[0] or "1 KiB" in lines[0] or "1024" in lines[0]


def test_cli_wrong_rank_count_is_refused(distributed_plan):
    proc, _ = qsimdist_cli(4, "run", str(distributed_plan))
    assert proc.returncode == 2
    assert "the schedule is for 2 ranks but 4 are running" in proc.stderr


def test_cli_fault_names_the_rank(distributed_plan):
    proc, secs = qsimdist_cli(2, "run", str(distributed_plan),
                              env={"QSIMDIST_FAULT_INJECT": "rank=1,step=2"}, timeout=60)
    assert proc.returncode != 0 and secs < 30
    assert "qsimdist: error: rank 1: fault injected at step 2" in proc.stderr


def test_trace_and_calibration_from_it(distributed_plan, tmp_path):
    trace = tmp_path / "t.json"
    proc, _ = qsimdist_cli(2, "run", str(distributed_plan), "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(trace.read_text())
    assert data["ranks"] == 2 and len(data["steps"]) > 3
    assert all(s["measured_s"] > 0 for s in data["steps"])
    assert data["measured_peak_bytes"] <= 1.25 * data["predicted_peak_bytes"]
    out = tmp_path / "fitted.toml"
    proc, _ = qsimdist_cli(0, "calibrate", "--from-trace", str(trace), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    from qsimdist.hardware import load_profile

    fitted = load_profile(out)
    assert fitted.step_overhead > 0  # python executes every step for some microseconds


def test_fit_profile_recovers_known_rates():
    import random as _random

    from qsimdist.hardware import load_profile
    from qsimdist.hardware.calibrate import fit_profile

    rng = _random.Random(0)
    rows = []
    for _ in range(60):
        f, s, m = rng.uniform(1e6, 1e9), rng.choice([0, rng.uniform(1e3, 1e8)]), 0
        m = 1 if s else 0
        t = f / 2e10 + 3e-5 + s / 1e9 + m * 5e-6 + 2 * s / 8e9
        rows.append({"flops_per_device": f, "sent_bytes": s, "messages": m,
                     "pack_bytes": 2 * s, "measured_s": t})
    prof = fit_profile(load_profile("local-cpu"), rows, "complex64")
    assert abs(prof.flops["complex64"] / 2e10 - 1) < 1e-3
    assert abs(prof.step_overhead / 3e-5 - 1) < 1e-2
