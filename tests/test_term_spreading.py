"""Many Pauli terms under ``mpiexec``: each rank values its share alone and every rank gets
every value (qsimdist.engine.term_spreading), equal to one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi]

_SCRIPT = r"""
import json, sys
import numpy as np
from mpi4py import MPI
from qiskit import QuantumCircuit
from qsimdist.engine.expectation import ExpectationEngine
from qsimdist.engine.pauli_terms import parse_term
from qsimdist.frontends.qiskit_circuit import from_qiskit

n = 30
rng = np.random.default_rng(11)
qc = QuantumCircuit(n)
for layer in range(3):
    for q in range(n):
        qc.u(*rng.uniform(0, 2 * np.pi, 3), q)
    for q in range(layer % 2, n - 1, 2):
        qc.cx(q, q + 1)
gc = from_qiskit(qc)
labels = ["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)] + ["I" * n]
terms = [parse_term(label, n) for label in labels]
out = {}
for spread in (True, False):
    engine = ExpectationEngine(executor="mpi", spread_terms=spread)
    values = engine.term_values(gc, terms)
    every = MPI.COMM_WORLD.allgather(values.tolist())
    out[str(spread)] = {"values": values.tolist(), "same": all(v == every[0] for v in every),
                        "spread_terms": engine.stats.spread_terms}
few = ExpectationEngine(executor="mpi").term_values(gc, terms[:1])
out["few"] = few.tolist()
if MPI.COMM_WORLD.rank == 0:
    print(json.dumps(out))
"""


def test_terms_spread_over_two_ranks_equal_one_process(tmp_path):
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'")
    script = tmp_path / "spread.py"
    script.write_text(_SCRIPT)
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root),
                                                        os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", str(script)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][0])
    from qiskit import QuantumCircuit

    from qsimdist.engine.expectation import ExpectationEngine
    from qsimdist.engine.pauli_terms import parse_term
    from qsimdist.frontends.qiskit_circuit import from_qiskit

    n = 30
    rng = np.random.default_rng(11)
    qc = QuantumCircuit(n)
    for layer in range(3):
        for q in range(n):
            qc.u(*rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, n - 1, 2):
            qc.cx(q, q + 1)
    labels = ["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)] + ["I" * n]
    local = ExpectationEngine().term_values(from_qiskit(qc), [parse_term(lb, n) for lb in labels])
    spread, whole = got["True"], got["False"]
    assert spread["same"] and whole["same"]  # every rank returns every value
    assert spread["spread_terms"] == len(labels)  # each rank valued its share alone
    assert whole["spread_terms"] == 0  # turned off: the terms were contracted distributed
    np.testing.assert_allclose(spread["values"], local, atol=1e-10)
    np.testing.assert_allclose(whole["values"], local, atol=1e-10)
    np.testing.assert_allclose(got["few"], local[:1], atol=1e-10)  # fewer terms than ranks
