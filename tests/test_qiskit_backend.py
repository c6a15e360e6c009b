"""QsimdistBackend (BackendV2) against Aer, and the ``qsimdist sample`` command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister, transpile
from qiskit.circuit.library import QFTGate
from qiskit.circuit.random import random_circuit
from scipy.stats import chi2_contingency

from qsimdist.errors import QsimdistError
from qsimdist.qiskit import QsimdistBackend, QsimdistProvider

aer = pytest.importorskip("qiskit_aer")
SHOTS = 10_000


def assert_same_distribution(a: dict[str, int], b: dict[str, int]) -> float:
    """Two-sample chi-square on the counts (bins under 10 in total merged); p must exceed 1e-3."""
    keys = sorted(set(a) | set(b), key=lambda k: -(a.get(k, 0) + b.get(k, 0)))
    rows = [[], []]
    rest = [0, 0]
    for k in keys:
        if a.get(k, 0) + b.get(k, 0) >= 10:
            rows[0].append(a.get(k, 0))
            rows[1].append(b.get(k, 0))
        else:
            rest[0] += a.get(k, 0)
            rest[1] += b.get(k, 0)
    if sum(rest):
        rows[0].append(rest[0])
        rows[1].append(rest[1])
    if len(rows[0]) < 2:
        assert set(a) == set(b)
        return 1.0
    p = chi2_contingency(np.array(rows)).pvalue
    assert p > 1e-3, (p, a, b)
    return p


def circuits() -> list[QuantumCircuit]:
    out = []
    q = QuantumRegister(4, "q")
    a, b = ClassicalRegister(3, "a"), ClassicalRegister(2, "b")
    qc = QuantumCircuit(q, a, b, name="qft_two_registers")
    qc.h(0)
    qc.ry(0.4, 2)
    qc.append(QFTGate(4), q)  # not in the target: transpile decomposes it
    qc.measure([0, 1, 2], a)
    qc.measure([3, 0], b)
    out.append(qc)
    rc = random_circuit(7, 5, max_operands=3, seed=17, measure=True)
    rc.name = "random7"
    out.append(rc)
    dyn = QuantumCircuit(QuantumRegister(3, "q"), ClassicalRegister(4, "c"), name="dynamic")
    dyn.h(0)
    dyn.rx(1.2, 1)
    dyn.cx(0, 2)
    dyn.measure(0, 0)
    with dyn.if_test((dyn.clbits[0], 1)) as else_:
        dyn.ry(0.9, 1)
    with else_:
        dyn.h(2)
    dyn.reset(0)
    dyn.cx(1, 0)
    dyn.measure([0, 1, 2], [1, 2, 3])
    out.append(dyn)
    return out


@pytest.mark.parametrize("index", [0, 1, 2])
def test_transpile_and_run_reproduce_aer(index):
    qc = circuits()[index]
    backend = QsimdistBackend()
    ours = backend.run(transpile(qc, backend, seed_transpiler=1), shots=SHOTS,
                       seed_simulator=3).result()
    sim = aer.AerSimulator()
    ref = sim.run(transpile(qc, sim, seed_transpiler=1), shots=SHOTS, seed_simulator=3).result()
    assert ours.get_counts().keys() <= ref.get_counts().keys() | ours.get_counts().keys()
    assert sum(ours.get_counts().values()) == SHOTS
    # same key format as Aer (registers separated by spaces, last register first)
    assert {len(k) for k in ours.get_counts()} == {len(k) for k in ref.get_counts()}
    assert_same_distribution(ours.get_counts(), ref.get_counts())


def test_memory_seed_and_provider():
    backend = QsimdistProvider().get_backend("qsimdist_sampler")
    assert [b.name for b in QsimdistProvider().backends()] == ["qsimdist_sampler"]
    qc = transpile(circuits()[0], backend)
    one = backend.run(qc, shots=300, seed_simulator=5, memory=True).result()
    two = backend.run([qc, qc], shots=300, seed_simulator=5, memory=True).result()
    mem = one.get_memory()
    assert len(mem) == 300 and mem == two.get_memory(0)
    assert Counter(mem) == one.get_counts()
    assert len(two.get_counts()) == 2
    sim = aer.AerSimulator()
    ref = sim.run(qc, shots=5, memory=True).result().get_memory()
    assert {len(m) for m in mem} == {len(m) for m in ref}
    with pytest.raises(QsimdistError, match="no backend named"):
        QsimdistProvider().get_backend("nope")
    with pytest.raises(QsimdistError, match="unknown run options"):
        backend.run(qc, shots=3, bogus=1)


def test_cli_sample_json_and_errors(tmp_path, capsys):
    from qiskit import qasm2

    from qsimdist.cli import main

    qc = QuantumCircuit(3)
    qc.h(0)
    qc.cx(0, 1)
    qc.cx(1, 2)  # no measurement: every qubit is measured
    path = tmp_path / "ghz3.qasm"
    path.write_text(qasm2.dumps(qc))
    args = ["sample", str(path), "--shots", "400", "--seed", "3"]
    out = subprocess.run([sys.executable, "-m", "qsimdist", *args, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["shots"] == 400 and set(data["counts"]) == {"000", "111"}
    assert sum(data["counts"].values()) == 400 and data["method"]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == data["counts"]  # same seed
    assert main(args) == 0
    text = capsys.readouterr().out
    assert f"000 {data['counts']['000']}" in text and f"111 {data['counts']['111']}" in text
    assert main(["sample", str(path), "--shots", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qsimdist: error:") and "--shots" in err and "Traceback" not in err
