"""CuPy on a GPU: the local executor and the mpi executor with host-staged collectives.

Skipped with its reason where cupy or a CUDA device is absent (as on the
project's CPU machines). One GPU cannot test NCCL between ranks; it can test
CuPy arrays under two host-staged MPI ranks sharing the device.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu]


def _gpu_reason() -> str | None:
    try:
        import cupy
    except ImportError:
        return "cupy is not installed (pip install 'qsimdist[gpu]')"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as exc:  # noqa: BLE001 - any CUDA failure means no usable device
        return f"no usable CUDA device ({type(exc).__name__})"
    return None


REASON = _gpu_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

HERE = Path(__file__).resolve().parent


def test_local_executor_on_cupy_equals_numpy():
    from qiskit.circuit.random import random_circuit

    import qsimdist

    qc = random_circuit(14, 10, max_operands=2, seed=5)
    plan = qsimdist.plan(qc, bitstrings="*" * 6 + "0" * 8, memory_limit="none",
                         dtype="complex128")
    import cupy

    got = cupy.asnumpy(plan.execute(backend="cupy"))
    ref = plan.execute()
    assert np.allclose(got, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found")
def test_mpi_executor_on_cupy_two_host_staged_ranks():
    code = (
        "import sys, json, numpy as np, cupy; from mpi4py import MPI;"
        "sys.argv=['x','circuit:16:12:3:3:1.0:sharded:c128'];"
        "sys.path.insert(0, 'tests');"
        "exec(open('tests/mpi_cases.py').read().split('def main()')[0]);"
        "from qsimdist.executors.mpi import execute;"
        "from qsimdist.planner.plan import Plan;"
        "comm=MPI.COMM_WORLD; base, sp = make(sys.argv[1], comm.size) if comm.rank == 0 "
        "else (None, None);"
        "d=comm.bcast(sp.to_dict() if comm.rank == 0 else None, root=0);"
        "p=Plan.from_dict(d); out=cupy.asnumpy(execute(p, backend='cupy', comm=comm));"
        "print(json.dumps(float(np.abs(out-base.execute()).max()/np.abs(base.execute()).max()))"
        " if comm.rank == 0 else '')"
    )
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", "-c", code],
                          capture_output=True, text=True, timeout=300, cwd=HERE.parent,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-2000:]
    err = float([ln for ln in proc.stdout.splitlines() if ln.strip()][-1])
    assert err <= 1e-12
