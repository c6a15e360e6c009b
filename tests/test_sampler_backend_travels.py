"""A CuPy request reaches the sampler's amplitude pass with ``backend`` intact (issue 44).

The sampler resolves its options once (:class:`~qsimdist.engine.options.RunOptions`, held
by its :class:`~qsimdist.engine.Engine`); the amplitude pass
(``return_amplitudes``, and the amplitudes behind ``method="rejection"``) takes those
options whole instead of rebuilding them from the limit and the executor, which dropped
``backend`` and ran the pass on NumPy. No GPU here: ``backend="cupy"`` resolves to the
array-module stand-in of ``tests/array_standin.py``, whose arrays refuse to meet NumPy
arrays, and every step of the pass is checked to run on its device arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qiskit")

from qiskit import QuantumCircuit  # noqa: E402
from qiskit.quantum_info import Statevector  # noqa: E402

import qsimdist.engine.amplitudes as amplitudes_module  # noqa: E402
from qsimdist.executors import local  # noqa: E402
from qsimdist.qiskit import SamplerV2  # noqa: E402

from . import array_standin  # noqa: E402
from .array_standin import DeviceArray  # noqa: E402


@pytest.fixture
def standin(monkeypatch):
    return array_standin.install_into(monkeypatch, nccl=False)


@pytest.fixture
def amplitude_pass(monkeypatch):
    """Records each amplitude pass: the options it was given and the steps it ran on device
    arrays (every step of a pass on the stand-in must take and give DeviceArrays)."""
    passes: list[dict] = []
    inside: list[dict] = []
    run_amplitudes, run_step = amplitudes_module.run_amplitudes, local.run_step

    def spy(circuit, labels, run, **kwargs):
        record = {"options": run, "device_steps": 0, "host_steps": 0}
        inside.append(record)
        try:
            record["result"] = run_amplitudes(circuit, labels, run, **kwargs)
        finally:
            inside.pop()
        passes.append(record)
        return record["result"]

    def checked_step(step, a, b, xp, *args, **kwargs):
        out = run_step(step, a, b, xp, *args, **kwargs)
        if inside:
            on_device = all(type(x) is DeviceArray for x in (a, b, out))
            inside[-1]["device_steps" if on_device else "host_steps"] += 1
        return out

    monkeypatch.setattr(amplitudes_module, "run_amplitudes", spy)
    monkeypatch.setattr(local, "run_step", checked_step)
    return passes


def _circuit() -> QuantumCircuit:
    """Five qubits in a uniform-magnitude state with varied phases (rejection accepts it)."""
    qc = QuantumCircuit(5)
    for q in range(5):
        qc.h(q)
    qc.cx(0, 1)
    qc.t(1)
    qc.cx(1, 2)
    qc.cz(2, 3)
    qc.rz(0.7, 4)
    qc.cx(3, 4)
    qc.s(0)
    return qc


def _reference(qc: QuantumCircuit) -> np.ndarray:
    return Statevector(qc).data


@pytest.mark.parametrize("method", ["auto", "rejection"])
def test_a_cupy_request_reaches_the_amplitude_pass(standin, amplitude_pass, method):
    qc = _circuit()
    ref = _reference(qc)
    measured = qc.copy()
    measured.measure_all()
    sampler = SamplerV2(seed=5, options={"backend": "cupy", "return_amplitudes": True,
                                         "dtype": "complex128", "memory_limit": "none",
                                         "method": method})
    result = sampler.run([measured], shots=64).result()[0]
    resolved = sampler.engine.run
    # rejection draws its candidates' amplitudes in a pass too; return_amplitudes adds one
    assert len(amplitude_pass) == (2 if method == "rejection" else 1)
    for record in amplitude_pass:
        run = record["options"]
        assert run is resolved  # the engine's resolved options, whole, never rebuilt
        assert run.backend == "cupy" and local.array_module(run.backend) is standin
        assert record["result"].stats["method"] == "tensor-network"
        assert record["device_steps"] > 0 and record["host_steps"] == 0
    amps = result.metadata["amplitudes"]
    assert amps and set(amps) == set(result.data.meas.get_counts())
    for bits, value in amps.items():
        assert abs(value - ref[int(bits, 2)]) <= 1e-12
    if method == "rejection":
        assert result.metadata["sampling"]["method"] == "rejection"


def test_the_pass_on_numpy_is_unchanged(amplitude_pass):
    """Without the stand-in the same request on NumPy gives the same amplitudes, through the
    same options object (the check above is not vacuous: the backend is what differs)."""
    qc = _circuit()
    ref = _reference(qc)
    qc.measure_all()
    sampler = SamplerV2(seed=5, options={"return_amplitudes": True, "dtype": "complex128",
                                         "memory_limit": "none"})
    result = sampler.run([qc], shots=64).result()[0]
    (record,) = amplitude_pass
    assert record["options"].backend == "numpy" and record["device_steps"] == 0
    for bits, value in result.metadata["amplitudes"].items():
        assert abs(value - ref[int(bits, 2)]) <= 1e-12
