"""One kicked-Ising term over ``mpiexec -n 2``: sharded by the dp schedule, equal to one process.

``tests/mpi_term_case.py`` runs the doubled light-cone network of one Pauli term of a
small kicked-Ising circuit (hexagonal 6x4 patch, 5 steps) with a per-rank limit far
below its largest intermediate: the dp schedule (``local-cpu`` profile) must
put both ranks in one group (sharded, not only sliced) and its value must equal the
one-process ``plan.execute()`` to 1e-10; the expectation engine's distributed route
(``executor="mpi"``, one term for two ranks) must equal a one-process engine to 1e-10.
The measured numbers at 127 qubits are ``python -m benchmarks.mpi --workload
kicked-ising`` (docs/benchmarks/history.md, section 44).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

pytestmark = [pytest.mark.mpi]

if shutil.which("mpiexec") is None:  # pragma: no cover - the test extra installs mpich
    pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'", allow_module_level=True)

#: hexagonal 6x4 patch, 5 steps: largest intermediate 32 MiB (complex128); limit 512 KiB
#: (4 steps became too cheap to need the ranks once the doubled networks had the E pass)
CASE = "hex:6:4:5:524288"


def run_term(nranks: int, case: str) -> dict:
    cmd = ["mpiexec", "-n", str(nranks), sys.executable, "-m", "mpi4py",
           str(HERE / "mpi_term_case.py"), case]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                          env=dict(os.environ), cwd=HERE.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout  # rank 0 prints, the other ranks print nothing
    return json.loads(lines[0])


def test_kicked_ising_term_sharded_over_two_ranks_equals_one_process():
    res = run_term(2, CASE)
    # the per-rank limit is below the largest intermediate: one rank alone must slice
    assert res["largest_intermediate_bytes"] > res["limit_bytes"] == 524288
    # the dp schedule shards: one group spanning both ranks, with collective steps
    assert res["strategy"] == "dp"
    assert res["group_size"] == 2, res
    assert set(res["actions"]) - {"local"}, res["actions"]
    # ... and equals the one-process value of the same network
    assert abs(complex(*res["one_process"])) > 1e-3  # a value worth comparing
    assert res["abs_diff"] <= 1e-10, res["abs_diff"]
    # every rank ran every slice (one group) within the per-rank limit
    assert [st["rank"] for st in res["stats"]] == [0, 1]
    for st in res["stats"]:
        assert st["slices"] == res["n_slices"]
        assert 0 < st["peak_bytes"] <= res["predicted_peak"] <= res["usable"] == 524288
    # the engine's distributed route (one term, two ranks) agrees with one process too
    eng = res["engine"]
    assert eng["group_size"] is not None  # a schedule was made for the ranks
    assert eng["abs_diff"] <= 1e-10, eng
    assert abs(eng["one_process"] - complex(*res["one_process"]).real) <= 1e-10
