"""One engine object per door (issue 53): ``qsimdist.engine.Engine(run)``.

Every door builds one :class:`~qsimdist.engine.Engine` (the primitives, the backend and the
QEC decoder in their constructor, the quimb hook per ``use`` block, the ``api`` functions
per call), so ``RunOptions.resolve`` runs once however many runs follow; what a result
reports as its statistics and route is the engine's; and no module of the Qiskit door
reaches past the engine's face.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import qsimdist
from qsimdist.engine import Engine, RunOptions
from qsimdist.frontends import GateCircuit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def resolves(monkeypatch):
    """Counts the calls of ``RunOptions.resolve`` (the one place options are resolved)."""
    calls: list[dict] = []
    original = RunOptions.resolve.__func__

    def counting(cls, **kwargs):
        calls.append(kwargs)
        return original(cls, **kwargs)

    monkeypatch.setattr(RunOptions, "resolve", classmethod(counting))
    return calls


def _bell(measure: bool = False):
    from qiskit import QuantumCircuit

    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    if measure:
        qc.measure_all()
    return qc


def _ladder(n: int = 6):
    from qiskit import QuantumCircuit
    from qiskit.circuit import Parameter

    qc = QuantumCircuit(n)
    theta = Parameter("t")
    for q in range(n):
        qc.ry(theta * (q + 1), q)
    for q in range(n - 1):
        qc.cx(q, q + 1)
    return qc


# ----------------------------------------------------------------------- the verbs
def test_the_four_verbs_agree_with_the_functions_behind_them():
    from qiskit.quantum_info import SparsePauliOp, Statevector

    from qsimdist.frontends import load

    qc = _bell()
    gc = load(qc)
    engine = Engine(RunOptions.resolve(dtype="complex128", memory_limit="none"))
    want = Statevector(qc).data
    amps = engine.amplitudes(gc, ["00", "11", "01"]).amplitudes
    np.testing.assert_allclose(amps, [want[0], want[3], want[1]], atol=1e-12)
    assert engine.route is not None and engine.route["method"] in ("statevector",
                                                                   "tensor-network")
    labels = ["ZZ", "XX", "ZI"]
    values = engine.expectation(gc, labels)
    ref = [Statevector(qc).expectation_value(SparsePauliOp(lb)).real for lb in labels]
    np.testing.assert_allclose(values, ref, atol=1e-12)
    assert engine.stats.terms == 3 and engine.route == engine.terms.route
    drawn = engine.sample(gc, [0, 1], 200, np.random.default_rng(3))
    assert drawn.bits.shape == (200, 2) and set(map(tuple, drawn.bits.tolist())) <= {(0, 0),
                                                                                    (1, 1)}
    assert engine.route == drawn.info.extra["route"]
    from qsimdist.frontends import amplitude_network

    value = engine.contract(amplitude_network(gc, "11"))
    assert abs(complex(value) - want[3]) < 1e-12 and engine.plan is not None
    again = engine.contract(engine.plan)  # a plan runs as it is
    assert abs(complex(again) - want[3]) < 1e-12
    costs = engine.cost(gc, labels)
    assert [c.label for c in costs] == labels
    assert engine.stats.terms == 3  # pricing leaves the statistics as they were


def test_the_engine_owns_its_route_and_options():
    engine = Engine(RunOptions.resolve(memory_limit="none"))
    with pytest.raises(AttributeError):
        engine.route = {"method": "elsewhere"}
    with pytest.raises(AttributeError):
        engine.stats = None
    # the services are built from the engine's one resolved options, never resolved again
    assert engine.contractor.options is engine.run
    assert engine.terms.run is engine.run
    assert engine.budget is engine.run.memory


def test_an_engine_refuses_a_bad_method_in_one_line():
    from qsimdist.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unknown method 'nope'; valid: auto"):
        Engine(method="nope")
    with pytest.raises(InvalidInputError, match="state_max_qubits must be in 1..40"):
        Engine(state_max_qubits=0)


# ----------------------------------------------------------------------- one per door
def test_the_estimator_resolves_its_options_once(resolves):
    from qsimdist.qiskit import EstimatorV2

    est = EstimatorV2(options={"memory_limit": "none"})
    assert len(resolves) == 1
    for k in range(3):
        est.run([(_ladder(), "ZIIIIZ", [0.1 * k]), (_bell(), ["ZZ", "XI"])]).result()
    est.cost([(_bell(), "ZZ")])
    assert len(resolves) == 1


def test_the_sampler_resolves_its_options_once(resolves):
    from qsimdist.qiskit import SamplerV2

    sampler = SamplerV2(seed=1, options={"memory_limit": "none", "return_amplitudes": True})
    assert len(resolves) == 1
    qc = _ladder(4)
    qc.measure_all()
    for k in range(3):
        sampler.run([(qc, [0.2 * k]), _bell(measure=True)], shots=50).result()
    assert len(resolves) == 1


def test_the_backend_builds_one_engine_for_its_options(resolves):
    from qsimdist.qiskit import QsimdistBackend

    backend = QsimdistBackend()
    assert len(resolves) == 1
    for seed in range(3):
        backend.run(_bell(measure=True), shots=20, seed_simulator=seed).result()
    assert len(resolves) == 1
    backend.run(_bell(measure=True), shots=20, dtype="complex128").result()  # this run's own
    assert len(resolves) == 2
    backend.set_options(memory_limit="none")  # the backend's options changed: built once more
    for _ in range(2):
        backend.run(_bell(measure=True), shots=20).result()
    assert len(resolves) == 3


def test_the_decoder_resolves_its_options_once(resolves):
    stim = pytest.importorskip("stim")
    from qsimdist.qec.decoder import MLDecoder

    circuit = stim.Circuit.generated("repetition_code:memory", distance=3, rounds=2,
                                     after_clifford_depolarization=0.01)
    dem = circuit.detector_error_model()
    dec = MLDecoder(dem, batch_size=2)
    assert len(resolves) == 1
    assert dec.budget is dec.engine.run.memory and dec.memory_limit == 1 << 30
    syndromes = np.zeros((5, dem.num_detectors), dtype=np.uint8)
    dec.probabilities(syndromes)
    dec.predict(syndromes)
    assert len(resolves) == 1 and dec.stats["contractions"] == 6


def test_a_quimb_use_block_builds_one_engine(monkeypatch):
    qtn = pytest.importorskip("quimb.tensor")
    import qsimdist.quimb as qq

    built: list = []
    original = Engine.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "__init__", counting)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    with qq.use(memory_limit="none") as stats:
        assert len(built) == 1
        for _ in range(3):
            ta, tb = qtn.Tensor(a, ("i", "j")), qtn.Tensor(b, ("j", "k"))
            got = (ta & tb).contract(all, output_inds=("i", "k")).data
            np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    assert stats.routed >= 3 and len(built) == 1


def test_api_functions_build_one_engine_per_call(resolves):
    qc = _bell()
    for _ in range(2):
        qsimdist.amplitudes(qc, ["00", "11"], memory_limit="none")
    assert len(resolves) == 2
    from qsimdist.network import Network

    net = Network([("a",), ("a",)], (), {"a": 2}, [np.ones(2), np.arange(2.0)])
    assert complex(qsimdist.contract(net, memory_limit="none")) == 1
    assert len(resolves) == 3


# ----------------------------------------------------------------------- what results report
def test_the_estimators_metadata_is_its_engines_statistics_and_route():
    from qsimdist.qiskit import EstimatorV2

    est = EstimatorV2()
    before = est.engine.stats.to_dict()
    result = est.run([(_ladder(), ["ZIIIIZ", "XXIIII"], [[0.3], [0.7]])]).result()[0]
    after = est.engine.stats.to_dict()
    meta = result.metadata
    assert meta["route"] == est.engine.route
    spent = {k: after[k] - before[k] for k in after if k != "max_light_cone_qubits"}
    assert meta["qsimdist"] == spent and spent["terms"] == 2  # (set, observable) pairs


def test_the_samplers_metadata_is_its_engines_route():
    from qsimdist.qiskit import SamplerV2

    sampler = SamplerV2(seed=5)
    qc = _ladder(5)
    qc.measure_all()
    result = sampler.run([(qc, [0.4])], shots=100).result()[0]
    route = result.metadata["sampling"]["route"]
    assert route is not None and route == sampler.engine.route


# ----------------------------------------------------------------------- the door's imports
def _door_imports(folder: Path, package: list[str]) -> list[tuple[str, int, str]]:
    """``(file, line, module)`` of every import in the modules under ``folder`` (the package
    ``package``) of an engine submodule or of ``qsimdist.executors`` (face or module),
    anywhere in a file (inside functions too)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        here = package + list(path.relative_to(folder).parent.parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                names = [module] + [f"{module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                bad = (name.startswith("qsimdist.engine.")
                       and name.split(".")[2] not in _engine_face_names()) or (
                    name == "qsimdist.executors" or name.startswith("qsimdist.executors."))
                if bad:
                    found.append((path.name, node.lineno, name))
                    break
    return found


def _engine_face_names() -> set[str]:
    import qsimdist.engine as face

    return set(face.__all__)


def test_the_qiskit_door_imports_only_the_engines_face():
    """No module under ``qsimdist/qiskit/`` imports an engine submodule or the executors
    (face or module): it translates, and the engine's face names what it calls."""
    assert _door_imports(ROOT / "qsimdist" / "qiskit", ["qsimdist", "qiskit"]) == []


def test_the_door_import_check_sees_a_planted_import(tmp_path):
    door = tmp_path / "qiskit"
    door.mkdir()
    (door / "fine.py").write_text("from ..engine import Engine, SamplePub\n"
                                  "from ..frontends.lowering import lower_circuit\n")
    (door / "planted.py").write_text(
        "def f():\n    from ..engine.expectation import ExpectationEngine\n"
        "    from ..executors import bind_executor\n    from .. import executors\n")
    found = _door_imports(door, ["qsimdist", "qiskit"])
    assert [(f, m) for f, _, m in found] == [
        ("planted.py", "qsimdist.engine.expectation"), ("planted.py", "qsimdist.executors"),
        ("planted.py", "qsimdist.executors")]


def test_the_engine_takes_a_gate_circuit_of_its_own():
    gc = GateCircuit(1)
    gc.append(np.array([[0, 1], [1, 0]], dtype=complex), (0,), "x")
    engine = Engine(RunOptions.resolve(dtype="complex128", memory_limit="none"))
    assert engine.expectation(gc, "Z")[0] == pytest.approx(-1.0)
