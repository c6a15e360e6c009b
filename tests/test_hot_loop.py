"""The variational hot loop (issue 52): one conversion per pub, many parameter sets at once.

References are Qiskit's own: ``StatevectorEstimator`` for values (to 1e-12),
``Operator``/``to_matrix`` for gate matrices, ``from_qiskit`` of each bound circuit
for the template's gates, and the per-set path itself (templates switched off) for
the sampler's bitstrings. Conversions are counted by wrapping the converters, never
timed.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit import Gate, Parameter, ParameterVector
from qiskit.circuit import library as lib
from qiskit.circuit.library import efficient_su2, real_amplitudes, zz_feature_map
from qiskit.primitives import StatevectorEstimator
from qiskit.quantum_info import SparsePauliOp

import qsimdist.frontends.templates as templates_module
import qsimdist.qiskit.estimator as estimator_module
from qsimdist.engine.binding_sweep import SweepPlan, terms_on_states
from qsimdist.engine.pauli_terms import parse_term
from qsimdist.frontends.gate_models import matrix_model, numeric_matrix
from qsimdist.frontends.parametric import parametric_from_qiskit, same_circuit
from qsimdist.frontends.qiskit_circuit import from_qiskit
from qsimdist.qiskit import EstimatorV2, SamplerV2

EXACT = 1e-12


def random_op(n: int, terms: int, seed: int) -> SparsePauliOp:
    rng = np.random.default_rng(seed)
    labels: set[str] = set()
    while len(labels) < terms:
        labels.add("".join(rng.choice(list("IXYZ"), n)))
    return SparsePauliOp(sorted(labels), rng.normal(size=terms))


def reference(pubs) -> list[np.ndarray]:
    return [r.data.evs for r in StatevectorEstimator().run(pubs).result()]


def mixed_circuit() -> QuantumCircuit:
    """Parameters as bare columns, affine and nonlinear expressions, a parametrised global
    phase, controlled rotations (one with control state 0), u (three parameters), cu (four:
    Qiskit's matrix per set), fixed gates and a final measurement."""
    a, b, c = Parameter("a"), Parameter("b"), Parameter("c")
    qc = QuantumCircuit(3, 3)
    qc.h(0)
    qc.rx(a, 0)
    qc.cx(0, 1)
    qc.u(a, 2 * b, 0.3 - b, 2)
    qc.append(lib.CRZGate(a * b, ctrl_state=0), [1, 2])
    qc.rzz(b / 2, 0, 2)
    qc.p((a + c).sin(), 1)
    qc.cu(a, b, c, 0.2, 2, 0)
    qc.append(lib.XXPlusYYGate(c, a), [0, 1])
    qc.t(2)
    qc.global_phase = a / 3 + 0.1
    qc.measure(range(3), range(3))
    return qc


# ------------------------------------------------------------------ gate matrices
@pytest.mark.parametrize("name", sorted(
    k for k, v in lib.get_standard_gate_name_mapping().items() if v.params and k != "delay"))
def test_matrix_models_are_qiskits_matrices(name):
    """Every parametrised standard gate's fitted model equals Qiskit's matrix at random
    angles (or has no model: Qiskit's matrix is then taken per set)."""
    gate = lib.get_standard_gate_name_mapping()[name]
    model = matrix_model(gate)
    if len(gate.params) > 3:
        assert model is None
        return
    assert model is not None, name
    rng = np.random.default_rng(len(name))
    values = rng.uniform(-9, 9, (20, len(gate.params)))
    got = model(values)
    for v, m in zip(values, got):
        np.testing.assert_allclose(m, numeric_matrix(gate, v), rtol=0, atol=1e-14)
    diagonal = all(np.allclose(m, np.diag(np.diag(m))) for m in got)
    assert model.diagonal == diagonal


@pytest.mark.parametrize("build", [
    lambda: efficient_su2(4, reps=2),
    lambda: zz_feature_map(3).compose(real_amplitudes(3, reps=1)),
    lambda: lib.EfficientSU2(3, reps=1),  # a blueprint: one plain gate, expanded
    mixed_circuit,
])
def test_template_binds_as_the_whole_conversion(build):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        qc = build()
    template = parametric_from_qiskit(qc)
    assert template is not None and template.slots
    rng = np.random.default_rng(2)
    rows = rng.uniform(-4, 4, (6, qc.num_parameters))
    bound = template.bound_gates(rows)
    assert bound.ok.all()
    for i, row in enumerate(rows):
        whole = from_qiskit(qc.assign_parameters(row))
        assert same_circuit(template.circuit_of(bound, i), whole, atol=1e-13)


# ------------------------------------------------------------------ values
@pytest.mark.parametrize("n, terms", [(2, 5), (6, 11)])
def test_many_bindings_in_one_pub_match_statevector_estimator(n, terms):
    qc = efficient_su2(n, reps=2)
    op = random_op(n, terms, n)
    values = np.random.default_rng(n).uniform(-np.pi, np.pi, (50, qc.num_parameters))
    est = EstimatorV2()
    got = est.run([(qc, op, values)]).result()[0]
    np.testing.assert_allclose(got.data.evs, reference([(qc, op, values)])[0], rtol=0,
                               atol=EXACT)
    route = got.metadata["route"]
    assert route["method"] == "statevector" and route["kernel"] == "batched"
    live = sum(1 for p in op.paulis if str(p) != "I" * n)
    assert got.metadata["qsimdist"]["statevector_terms"] == 50 * live


def test_one_binding_per_call_matches_and_reuses_the_template():
    qc = efficient_su2(2, reps=2)
    op = random_op(2, 4, 1)
    est = EstimatorV2()
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = rng.uniform(-np.pi, np.pi, qc.num_parameters)
        got = est.run([(qc, op, v)]).result()[0].data.evs
        np.testing.assert_allclose(got, reference([(qc, op, v)])[0], rtol=0, atol=EXACT)
    assert est._templates.built == 1 and est._templates.reused == 19


def test_a_cycle_of_many_circuits_converts_each_once():
    """A client cycling through more circuits than a few dozen (qiskit-algorithms'
    LinCombQGT sends 52 for VarQITE) finds every one's template on the second round; a
    cache of 32 templates, least recently used dropped, missed every time."""
    circuits = []
    for k in range(60):
        qc = real_amplitudes(2, reps=1)
        qc.rz(0.01 * k, 0)  # 60 different circuits
        circuits.append(qc)
    op = SparsePauliOp(["ZZ", "XI"], [0.5, -1.0])
    est = EstimatorV2()
    v = np.linspace(0.1, 0.8, circuits[0].num_parameters)
    for _ in range(2):
        got = est.run([(qc, op, v) for qc in circuits]).result()
    np.testing.assert_allclose([r.data.evs for r in got],
                               reference([(qc, op, v) for qc in circuits]), rtol=0,
                               atol=EXACT)
    assert est._templates.built == 60 and est._templates.reused == 60


def test_pubs_of_one_circuit_in_a_call_run_as_one_batched_pass(monkeypatch):
    """A QNN's backward pass sends one pub per sample, each the same circuit and
    observable with its own shifted sets: the call runs them as one batched pass, each
    pub's values those of the reference (to 1e-12) and its metadata counting its own
    terms; a pub with another observable, one of another circuit and one with noise keep
    their own values."""
    import qsimdist.engine.binding_sweep as sweep_module

    passes = []
    real = sweep_module.sweep_term_values

    def counting(engine, template, rows, terms):
        passes.append(len(rows))
        return real(engine, template, rows, terms)

    monkeypatch.setattr(sweep_module, "sweep_term_values", counting)
    qc = efficient_su2(2, reps=1)
    op = SparsePauliOp(["ZZ", "XI", "IY"], [0.5, -1.0, 0.25])
    other = SparsePauliOp(["XX"], [2.0])
    rng = np.random.default_rng(3)
    pubs = [(qc, op, rng.uniform(-np.pi, np.pi, (k + 1, qc.num_parameters)))
            for k in range(6)]
    pubs.append((qc, other, rng.uniform(-np.pi, np.pi, (2, qc.num_parameters))))
    pubs.append((real_amplitudes(2, reps=1), op, rng.uniform(-1, 1, 4)))
    est = EstimatorV2()
    got = est.run(pubs).result()
    want = reference(pubs)
    for r, w in zip(got, want):
        np.testing.assert_allclose(r.data.evs, w, rtol=0, atol=EXACT)
    # the six pubs of (qc, op): one pass of 21 sets; the others alone
    assert passes[0] == 21 and sorted(passes[1:]) == [1, 2]
    for k in range(6):
        meta = got[k].metadata
        assert meta["qsimdist"]["statevector_terms"] == 3 * (k + 1)
        assert meta["route"]["kernel"] == "batched"
    assert est.engine.stats.statevector_terms == 3 * 21 + 2 + 3
    noisy = EstimatorV2(seed=5).run(pubs[:2], precision=0.1).result()
    alone = [EstimatorV2(seed=5).run([p], precision=0.1).result()[0] for p in pubs[:2]]
    for a, b in zip(noisy, alone):
        np.testing.assert_allclose(a.data.evs, b.data.evs, rtol=0, atol=EXACT)


def test_barriers_and_measurements_do_not_change_a_circuits_key():
    """Qiskit makes a new barrier object at each reading of a circuit's data: keyed by
    identity, a SamplerQNN's circuit (``measure_all``: a barrier) missed its template every
    call. Named instead, the same circuit finds it; a different directive does not."""
    qc = real_amplitudes(2, reps=1)
    qc.measure_all()
    qc = qc.copy()  # (a copy's barrier is made anew at each reading)
    assert qc.data[-3].operation is not qc.data[-3].operation
    assert templates_module.circuit_key(qc)[0] == templates_module.circuit_key(qc)[0]
    sampler = SamplerV2(seed=3)
    v = np.linspace(0.1, 0.7, qc.num_parameters)
    for _ in range(3):
        sampler.run([(qc, v)], shots=16).result()
    assert sampler._templates.built == 1 and sampler._templates.reused == 2
    reset = qc.copy()  # a reset where qubit 1 was measured: another circuit
    reset.data = [*reset.data[:-1], reset.data[-1].replace(operation=lib.Reset(), clbits=())]
    assert templates_module.circuit_key(reset)[0] != templates_module.circuit_key(qc)[0]


def test_template_cache_keeps_within_its_instruction_budget():
    """Templates of more instructions than the budget: the least recently used go, the
    newest always stays, and the count of instructions held follows."""
    cache = templates_module.TemplateCache(size=100, instructions=30)
    small = [real_amplitudes(2, reps=1) for _ in range(3)]  # 6 instructions each
    for k, qc in enumerate(small):
        qc.rz(0.1 * k, 0)
        cache.template(qc)
    assert len(cache.entries) == 3 and cache.held == 3 * len(small[0].data)
    big = real_amplitudes(4, reps=6)  # more than the budget alone
    cache.template(big)
    assert len(cache.entries) == 1 and cache.held == len(big.data)
    cache.template(small[0])
    assert len(cache.entries) == 1 and cache.held == len(small[0].data)
    cache.template(small[1])
    assert len(cache.entries) == 2 and cache.built == 6


def test_broadcast_shapes_and_mixed_gates_match():
    """Bindings (4, 1) against observables (1, 3), expressions, controlled and
    multi-parameter gates, a parametrised phase and measurements."""
    qc = mixed_circuit()
    rng = np.random.default_rng(7)
    values = rng.uniform(-3, 3, (4, 1, qc.num_parameters))
    obs = [[random_op(3, 4, 1), "XYZ", SparsePauliOp(["ZZI", "IXX"], [0.5, -1.0])]]
    pub = (qc, obs, values)
    got = EstimatorV2().run([pub]).result()[0].data.evs
    assert got.shape == (4, 3)
    plain = qc.remove_final_measurements(inplace=False)  # the reference refuses them
    np.testing.assert_allclose(got, reference([(plain, obs, values)])[0], rtol=0, atol=EXACT)


def test_bindings_paired_with_their_own_observables():
    """Elementwise pairing (bindings (3,), observables (3,)): each set its own labels."""
    qc = efficient_su2(3, reps=1)
    values = np.random.default_rng(3).uniform(-3, 3, (3, qc.num_parameters))
    obs = ["ZZZ", "XIX", random_op(3, 5, 2)]
    got = EstimatorV2().run([(qc, obs, values)]).result()[0].data.evs
    np.testing.assert_allclose(got, reference([(qc, obs, values)])[0], rtol=0, atol=EXACT)


class MaybeRX(Gate):
    """RX whose definition has no gate at all where the angle is 0: a binding that changes
    the gate structure."""

    def __init__(self, theta):
        super().__init__("maybe_rx", 1, [theta])

    def _define(self):
        qc = QuantumCircuit(1)
        theta = self.params[0]
        if not (isinstance(theta, (int, float)) and theta == 0):
            qc.rx(theta, 0)
        self.definition = qc


def test_a_binding_that_changes_the_structure_is_converted_alone(monkeypatch):
    t = ParameterVector("t", 3)
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.append(MaybeRX(t[0]), [0])
    qc.cx(0, 1)
    qc.ry(t[1], 1)
    qc.rz(t[2], 0)
    values = np.random.default_rng(4).uniform(-3, 3, (12, 3))
    values[[2, 7], 0] = 0.0  # MaybeRX has no gate here
    op = SparsePauliOp(["XX", "ZI", "YZ"], [1.0, -0.5, 0.25])
    whole = []
    real = estimator_module.from_qiskit

    def counting(circuit):
        whole.append(circuit)
        return real(circuit)

    monkeypatch.setattr(estimator_module, "from_qiskit", counting)
    est = EstimatorV2()
    got = est.run([(qc, op, values)]).result()[0].data.evs
    want = [reference([(qc.assign_parameters(v), op)])[0] for v in values]
    np.testing.assert_allclose(got, np.ravel(want), rtol=0, atol=EXACT)
    assert len(whole) == 2  # the two sets at angle 0, converted whole; the rest batched
    template = est._templates.template(qc)
    assert len(template.pieces) == 1
    assert not template.bound_gates(values).ok[[2, 7]].any()


def test_non_finite_values_still_raise():
    """A NaN set is not taken from the template: binding it raises as Qiskit raises."""
    qc = efficient_su2(2, reps=1)
    values = np.zeros((3, qc.num_parameters))
    values[1, 0] = np.nan
    assert not parametric_from_qiskit(qc).bound_gates(values).ok[1]
    with pytest.raises(RuntimeError, match="NaN"):
        EstimatorV2().run([(qc, "ZZ", values)]).result()


# ------------------------------------------------------------------ once per pub
def test_the_conversion_runs_once_per_pub(monkeypatch):
    """50 sets: one template made (one conversion checks it), no bound circuit converted;
    new values of the same circuit: nothing converted; the circuit changed in place:
    converted again."""
    made, whole = [], []
    real_make, real_whole = templates_module.make_template, estimator_module.from_qiskit

    def counting_make(qc, probe=None):
        made.append(qc)
        return real_make(qc, probe)

    def counting_whole(qc):
        whole.append(qc)
        return real_whole(qc)

    monkeypatch.setattr(templates_module, "make_template", counting_make)
    monkeypatch.setattr(estimator_module, "from_qiskit", counting_whole)
    qc = efficient_su2(3, reps=2)
    est = EstimatorV2()
    rng = np.random.default_rng(0)
    for _ in range(3):
        est.run([(qc, "XYZ", rng.uniform(-3, 3, (50, qc.num_parameters)))]).result()
    assert len(made) == 1 and whole == []
    qc.rx(0.3, 0)  # changed in place: a new template
    values = rng.uniform(-3, 3, (5, qc.num_parameters))
    got = est.run([(qc, "XYZ", values)]).result()[0].data.evs
    assert len(made) == 2
    np.testing.assert_allclose(got, reference([(qc, "XYZ", values)])[0], rtol=0, atol=EXACT)


def test_fusion_runs_once_per_call(monkeypatch):
    """The statevector route fuses from the block structures its price was made on: no
    width's blocks are worked out twice in one call."""
    import qsimdist.frontends.fusion as fusion

    qc = efficient_su2(14, reps=4)
    qc = qc.assign_parameters(np.random.default_rng(0).uniform(size=qc.num_parameters))
    labels = ["".join(np.random.default_rng(i).choice(list("XYZ"), 14)) for i in range(8)]
    est = EstimatorV2(options={"method": "statevector"})
    est.run([(qc, labels)]).result()
    widths = []
    real = fusion.fusion_blocks

    def counting(circuit, max_qubits, **kwargs):
        widths.append(max_qubits)
        return real(circuit, max_qubits, **kwargs)

    monkeypatch.setattr(fusion, "fusion_blocks", counting)
    got = est.run([(qc, labels)]).result()[0]
    assert got.metadata["route"]["method"] == "statevector"
    assert sorted(widths) == sorted(set(widths)), widths


def test_the_qsim_probe_runs_once_per_process(monkeypatch):
    import importlib.util

    from qsimdist.engine import router

    router.qsim_installed.cache_clear()
    calls = []
    real = importlib.util.find_spec

    def counting(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", counting)
    for _ in range(3):
        router.qsim_installed()
    assert calls.count("qsimcirq") == 1


# ------------------------------------------------------------------ sampler
def test_sampler_converts_once_and_draws_as_per_set(monkeypatch):
    """The sampler's bitstrings with templates equal those of the per-set path (the same
    routes, the same draws), and the circuit is lowered and converted once."""
    qc = efficient_su2(3, reps=1)
    qc.measure_all()
    values = np.random.default_rng(5).uniform(-3, 3, (6, qc.num_parameters))
    fast = SamplerV2(seed=11)
    got = fast.run([(qc, values)], shots=300).result()[0].data.meas
    assert fast._templates.built == 1
    fast.run([(qc, values)], shots=10).result()
    assert fast._templates.built == 1 and fast._templates.reused == 1
    monkeypatch.setattr(templates_module.TemplateCache, "lowered", lambda *a, **k: None)
    slow = SamplerV2(seed=11).run([(qc, values)], shots=300).result()[0].data.meas
    assert np.array_equal(got.array, slow.array)


def test_sampler_sets_of_a_pub_are_drawn_from_one_batched_pass(monkeypatch):
    """A pub of many sets (a SamplerQNN's batch) is drawn from one batched statevector
    pass: the route says so, the draws are those of the statevector route set by set
    (the same states, one ``rng.random(shots)`` each), registers of some of the qubits
    included, and the counts follow the exact probabilities."""
    from qiskit import ClassicalRegister
    from qiskit.quantum_info import Statevector

    import qsimdist.engine.binding_sweep as sweep_module

    qc = efficient_su2(3, reps=1)
    a, b = ClassicalRegister(2, "a"), ClassicalRegister(1, "b")
    qc.add_register(a)
    qc.add_register(b)
    qc.measure([2, 0], a)
    qc.measure(1, b)
    values = np.random.default_rng(8).uniform(-3, 3, (12, qc.num_parameters))
    res = SamplerV2(seed=4).run([(qc, values)], shots=4000).result()[0]
    route = res.metadata["sampling"]["route"]
    assert route["method"] == "statevector" and route["kernel"] == "batched"
    passes = []
    real = sweep_module.sweep_states

    def counting(*args):
        passes.append(1)
        return real(*args)

    monkeypatch.setattr(sweep_module, "sweep_states", counting)
    again = SamplerV2(seed=4).run([(qc, values)], shots=4000).result()[0]
    assert len(passes) == 1 and np.array_equal(again.data.a.array, res.data.a.array)
    monkeypatch.setattr(sweep_module, "sampling_sweep_route", lambda *a, **k: None)
    alone = SamplerV2(seed=4, options={"method": "statevector"}).run(
        [(qc, values)], shots=4000).result()[0]
    assert "kernel" not in alone.metadata["sampling"]["route"] or \
        alone.metadata["sampling"]["route"]["kernel"] != "batched"
    assert np.array_equal(res.data.a.array, alone.data.a.array)
    assert np.array_equal(res.data.b.array, alone.data.b.array)
    bare = qc.remove_final_measurements(inplace=False)
    for k in range(len(values)):
        probs = Statevector(bare.assign_parameters(values[k])).probabilities_dict(qargs=[2, 0])
        counts = res.data.a.get_counts(k)
        for key, p in probs.items():
            # key over qargs [2, 0] is "q0 q2"; register a's bits are (q2, q0): "q0 q2"
            assert abs(counts.get(key, 0) / 4000 - p) < 5 * np.sqrt(p * (1 - p) / 4000) + 1e-9


# ------------------------------------------------------------------ the batched pass
def test_terms_on_states_is_the_expectation_value():
    from qiskit.quantum_info import Statevector

    rng = np.random.default_rng(9)
    n = 5
    states = rng.normal(size=(4, 2**n)) + 1j * rng.normal(size=(4, 2**n))
    states /= np.linalg.norm(states, axis=1)[:, None]
    labels = ["".join(rng.choice(list("IXYZ"), n)) for _ in range(30)] + ["I" * n]
    got = terms_on_states(states, [parse_term(lb, n) for lb in labels])
    for s, row in zip(states, got):
        sv = Statevector(s)
        want = [sv.expectation_value(SparsePauliOp(lb)).real for lb in labels]
        np.testing.assert_allclose(row, want, rtol=0, atol=1e-14)


def test_the_plan_fuses_where_sets_share_the_calls():
    """Many sets of a 6-qubit circuit: blocks of several gates; every gate in one block."""
    template = parametric_from_qiskit(efficient_su2(6, reps=2))
    terms = [parse_term("ZZIIII", 6)]
    many = SweepPlan.of(template, 50, terms)
    covered = sorted(k for members, *_ in many.blocks for k in members)
    assert covered == list(range(len(template.gates)))
    assert len(many.blocks) < len(template.gates)


def test_cost_prices_the_batched_pass():
    qc = efficient_su2(2, reps=2)
    values = np.random.default_rng(0).uniform(-3, 3, (10, qc.num_parameters))
    est = EstimatorV2()
    op = SparsePauliOp(["ZZ", "XI", "II"], [1.0, 0.5, -0.2])
    (priced,) = est.cost([(qc, op, values)])
    assert len(priced["terms"]) == 30
    methods = {t["label"]: t["method"] for t in priced["terms"]}
    assert methods == {"ZZ": "statevector", "XI": "statevector", "II": "trivial"}
    assert priced["flops"] == 0 and priced["predicted_seconds"] > 0
    run = est.run([(qc, op, values)]).result()[0]
    assert run.metadata["route"]["kernel"] == "batched"


def test_wide_circuits_keep_their_route():
    """Past the batched pass's width the sets are routed one by one, each from the
    template (a 30-qubit brickwork: its light cones, not a state vector)."""
    n = 30
    p = ParameterVector("p", 2 * n)
    qc = QuantumCircuit(n)
    for q in range(n):
        qc.ry(p[q], q)
    for q in range(0, n - 1, 2):
        qc.cz(q, q + 1)
    for q in range(n):
        qc.rx(p[n + q], q)
    values = np.random.default_rng(1).uniform(-3, 3, (3, 2 * n))
    label = "I" * (n - 2) + "ZZ"
    got = EstimatorV2().run([(qc, label, values)]).result()[0]
    assert got.metadata["route"]["method"] != "statevector"
    from qiskit.quantum_info import Statevector

    for v, ev in zip(values, got.data.evs):  # the light cone of Z0 Z1: qubits 0 and 1
        sub = QuantumCircuit(2)
        sub.ry(v[0], 0)
        sub.ry(v[1], 1)
        sub.cz(0, 1)
        sub.rx(v[n], 0)
        sub.rx(v[n + 1], 1)
        want = Statevector(sub).expectation_value(SparsePauliOp("ZZ")).real
        assert abs(ev - want) < EXACT


def test_sets_run_in_chunks(monkeypatch):
    """Sets past a chunk's size run chunk after chunk (states and slot matrices bounded),
    each set's values where they belong."""
    import qsimdist.engine.binding_sweep as binding_sweep

    monkeypatch.setattr(binding_sweep, "SWEEP_CHUNK_ELEMENTS", 1 << 9)
    qc = efficient_su2(4, reps=2)
    values = np.random.default_rng(8).uniform(-3, 3, (70, qc.num_parameters))
    op = random_op(4, 6, 8)
    got = EstimatorV2().run([(qc, op, values)]).result()[0]
    assert got.metadata["route"]["kernel"] == "batched"
    np.testing.assert_allclose(got.data.evs, reference([(qc, op, values)])[0], rtol=0,
                               atol=EXACT)
