"""The default install carries the routes the primitives price (issue 52).

stim is a core dependency: a Clifford circuit reaches the stabilizer route without any
extra. Where stim is missing anyway, the other routes run and each pub's metadata names
the absent route and what installs it. The availability probe runs once per process.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit

from qsimdist.engine import stabilizer
from qsimdist.qiskit import EstimatorV2, SamplerV2

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def ghz(n: int, measured: bool = False) -> QuantumCircuit:
    qc = QuantumCircuit(n)
    qc.h(0)
    for q in range(n - 1):
        qc.cx(q, q + 1)
    if measured:
        qc.measure_all()
    return qc


def test_stim_is_a_core_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("=")[0].split(";")[0].strip()
             for d in project["dependencies"]]
    assert "stim" in names
    assert any(d.startswith("stim") for d in project["optional-dependencies"]["qec"])


def test_the_probe_runs_once_per_process(monkeypatch):
    import importlib.util

    stabilizer.stabilizer_available.cache_clear()
    calls = []
    real = importlib.util.find_spec

    def counting(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", counting)
    for _ in range(5):
        stabilizer.stabilizer_available()
    assert calls.count("stim") == 1


def test_thousand_qubit_ghz_takes_the_stabilizer_route():
    pytest.importorskip("stim")
    assert stabilizer.stabilizer_available()
    n = 1000
    estimator = EstimatorV2()
    obs = ["Z" * n, "X" * n, "I" * (n - 2) + "ZZ", "ZZ" + "I" * (n - 2), "I" * (n - 1) + "Z"]
    estimator.run([(ghz(8), ["ZZZZZZZZ"])]).result()  # imports stim and warms the caches
    start = time.perf_counter()
    result = estimator.run([(ghz(n), obs)]).result()[0]
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(result.data.evs, [1.0, 1.0, 1.0, 1.0, 0.0], rtol=0, atol=1e-12)
    assert result.metadata["route"]["method"] == "stabilizer"
    assert result.metadata["routes_absent"] == {}
    assert seconds < 10, seconds  # about 0.1 s; a 2^1000 state would never return

    start = time.perf_counter()
    sampled = SamplerV2(seed=5).run([ghz(n, measured=True)], shots=2000).result()[0]
    seconds = time.perf_counter() - start
    counts = sampled.data.meas.get_counts()
    assert set(counts) == {"0" * n, "1" * n}
    assert 800 < counts["0" * n] < 1200
    assert sampled.metadata["sampling"]["route"]["method"] == "stabilizer"
    assert sampled.metadata["routes_absent"] == {}
    assert seconds < 10, seconds


def test_without_stim_the_metadata_names_the_missing_extra(monkeypatch):
    monkeypatch.setattr(stabilizer, "stabilizer_available", lambda: False)
    monkeypatch.setattr(stabilizer, "_LAST", [])  # no verdict kept from an earlier circuit
    n = 12
    result = EstimatorV2().run([(ghz(n), ["Z" * n, "X" * n])]).result()[0]
    np.testing.assert_allclose(result.data.evs, [1.0, 1.0], rtol=0, atol=1e-12)
    assert result.metadata["route"]["method"] != "stabilizer"
    absent = result.metadata["routes_absent"]
    assert set(absent) == {"stabilizer"}
    assert "stim" in absent["stabilizer"] and "qsimdist[qec]" in absent["stabilizer"]

    sampled = SamplerV2(seed=1).run([ghz(n, measured=True)], shots=100).result()[0]
    assert set(sampled.data.meas.get_counts()) <= {"0" * n, "1" * n}
    assert sampled.metadata["sampling"]["route"]["method"] != "stabilizer"
    assert sampled.metadata["routes_absent"] == absent
    # asking for the route by name says what to install
    with pytest.raises(ImportError, match=r"qsimdist\[qec\]"):
        EstimatorV2(options={"method": "stabilizer"}).run([(ghz(n), ["Z" * n])]).result()
