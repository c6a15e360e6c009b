"""The stabilizer route: Clifford circuits through stim, exact at any width.

References: Qiskit's ``Statevector`` for 24 qubits (built from the states' closed
forms, checked against Qiskit's own evolution at 10 qubits), analytic values for
1,000 qubits, an exact branch-by-branch
enumeration (``Statevector``) for dynamic circuits, checked against Aer's samples.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("stim")

from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister  # noqa: E402
from qiskit.circuit.library import ECRGate, UnitaryGate, iSwapGate  # noqa: E402
from qiskit.exceptions import QiskitError  # noqa: E402
from qiskit.quantum_info import (  # noqa: E402
    Operator,
    SparsePauliOp,
    Statevector,
    random_clifford,
)

from qsimdist.frontends.qiskit_circuit import from_qiskit  # noqa: E402
from qsimdist.qiskit import EstimatorV2, SamplerV2  # noqa: E402

SHOTS = 4000


# ----------------------------------------------------------------------------- circuits
def ghz(n: int, measure: bool = False) -> QuantumCircuit:
    qc = QuantumCircuit(n)
    qc.h(0)
    for q in range(n - 1):
        qc.cx(q, q + 1)
    if measure:
        qc.measure_all()
    return qc


def ring_edges(n: int) -> list[tuple[int, int]]:
    return [(q, (q + 1) % n) for q in range(n)]


def random_edges(n: int, seed: int, p: float = 0.15) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < p]


def graph_state(n: int, edges, x_basis: bool = False, measure: bool = False) -> QuantumCircuit:
    qc = QuantumCircuit(n)
    qc.h(range(n))
    for a, b in edges:
        qc.cz(a, b)
    if x_basis:
        qc.h(range(n))
    if measure:
        qc.measure_all()
    return qc


def label(n: int, ops: dict[int, str]) -> str:
    """A Qiskit label (qubit 0 rightmost) with ``ops[q]`` on qubit ``q``."""
    chars = ["I"] * n
    for q, op in ops.items():
        chars[n - 1 - q] = op
    return "".join(chars)


def ghz_state(n: int) -> Statevector:
    """``(|0...0> + |1...1>) / sqrt(2)`` as a ``Statevector`` (Qiskit's own evolution of a
    24-qubit circuit takes ~40 s, Aer's statevector method ~12 s on these machines)."""
    data = np.zeros(1 << n, dtype=complex)
    data[0] = data[-1] = 2**-0.5
    return Statevector(data)


def graph_state_vector(n: int, edges, x_basis: bool = False) -> Statevector:
    """``prod CZ |+>^n``: amplitude ``2^(-n/2) (-1)^(sum over edges of x_a x_b)`` (qubit
    ``q`` is bit ``q`` of the index, as in Qiskit); ``x_basis``: then ``H`` on every qubit
    (a Walsh-Hadamard transform)."""
    nbrs = [0] * n  # bit a of nbrs[b]: edge (a, b) with a < b
    for a, b in edges:
        lo, hi = min(a, b), max(a, b)
        nbrs[hi] |= 1 << lo
    parity = np.zeros(1, dtype=np.uint8)  # over the qubits added so far
    for k in range(n):
        linear = np.zeros(1, dtype=np.uint8)  # (x & nbrs[k]) mod 2 over those qubits
        for j in range(k):
            linear = np.concatenate([linear, linear ^ ((nbrs[k] >> j) & 1)])
        parity = np.concatenate([parity, parity ^ linear])
    data = 1.0 - 2.0 * parity
    if x_basis:  # Walsh-Hadamard transform, in place
        for q in range(n):
            v = data.reshape(-1, 2, 1 << q)
            first = v[:, 0].copy()
            v[:, 0] += v[:, 1]
            np.subtract(first, v[:, 1], out=v[:, 1])
        data *= 2.0**-n
    else:
        data *= 2.0 ** (-n / 2)
    return Statevector(data.astype(complex))


def counts_of(result) -> dict[str, int]:
    return result.data.meas.get_counts()


def assert_samples_follow(counts: dict[str, int], probs: np.ndarray, tvd: float) -> None:
    """Every drawn bitstring has positive exact probability; the frequencies are close."""
    shots = sum(counts.values())
    total = 0.0
    for bits, c in counts.items():
        p = probs[int(bits, 2)]
        assert p > 1e-12, f"drawn {bits[:40]}... has exact probability {p}"
        total += abs(c / shots - p)
    total += float(probs.sum()) - sum(probs[int(b, 2)] for b in counts)  # never drawn
    assert 0.5 * total < tvd


def route_of_sampler(result) -> str:
    return result.metadata["sampling"]["route"]["method"]


# ----------------------------------------------------------------------------- detection
@pytest.mark.parametrize("build", [
    lambda qc: (qc.h(0), qc.s(1), qc.sdg(2), qc.x(0), qc.y(1), qc.z(2), qc.sx(0),
                qc.sxdg(1), qc.cx(0, 1), qc.cy(1, 2), qc.cz(2, 0), qc.swap(0, 2),
                qc.append(iSwapGate(), [1, 0]), qc.append(ECRGate(), [2, 1]), qc.dcx(0, 1)),
    lambda qc: (qc.rz(np.pi / 2, 0), qc.rx(np.pi, 1), qc.rzz(-np.pi / 2, 0, 2),
                qc.ry(-3 * np.pi / 2, 2), qc.rxx(np.pi / 2, 1, 2), qc.p(np.pi, 0),
                qc.u(np.pi / 2, 0, np.pi, 1), qc.rz(np.pi / 2 + 1e-12, 2)),
    lambda qc: (qc.append(UnitaryGate(random_clifford(2, seed=3).to_operator()), [2, 0]),
                qc.append(random_clifford(3, seed=4).to_circuit().to_gate(), [1, 2, 0])),
])
def test_clifford_family_is_detected_by_matrix(build):
    """Named gates, rotations by multiples of pi/2 (within a tolerance) and matrices that
    happen to be Clifford all convert; the values agree with the state vector."""
    from qsimdist.engine.stabilizer import to_stabilizer

    qc = QuantumCircuit(3)
    qc.h([0, 1, 2])
    qc.s(0)
    build(qc)
    assert to_stabilizer(from_qiskit(qc)) is not None
    labels = ["".join(p) for p in itertools.product("IXYZ", repeat=3)]
    got = EstimatorV2(options={"method": "stabilizer"}).run([(qc, labels)]).result()[0]
    sv = Statevector(qc)
    want = [sv.expectation_value(SparsePauliOp(lb)).real for lb in labels]
    np.testing.assert_allclose(got.data.evs, want, atol=1e-9)  # RZ(pi/2 + 1e-12) is rounded
    assert got.metadata["route"]["method"] == "stabilizer"


@pytest.mark.parametrize("gate", ["t", "rz", "ccx", "ch", "rx_off"])
def test_non_clifford_gates_are_not_detected(gate):
    from qsimdist.engine.stabilizer import to_stabilizer

    qc = QuantumCircuit(3)
    qc.h(0)
    {"t": lambda: qc.t(1), "rz": lambda: qc.rz(0.3, 1), "ccx": lambda: qc.ccx(0, 1, 2),
     "ch": lambda: qc.ch(0, 2), "rx_off": lambda: qc.rx(np.pi / 2 + 1e-4, 1)}[gate]()
    assert to_stabilizer(from_qiskit(qc)) is None


# ----------------------------------------------------------------------------- 24 qubits
N24 = 24
GRAPH24 = random_edges(N24, seed=5)


@pytest.fixture(scope="module")
def ghz24_state():
    return ghz_state(N24)


@pytest.fixture(scope="module")
def graph24_state():
    return graph_state_vector(N24, GRAPH24)


def test_closed_forms_match_qiskit_evolution():
    edges = random_edges(10, seed=1, p=0.3)
    assert ghz_state(10).equiv(Statevector(ghz(10)))
    assert graph_state_vector(10, edges).equiv(Statevector(graph_state(10, edges)))
    assert graph_state_vector(10, edges, x_basis=True).equiv(
        Statevector(graph_state(10, edges, x_basis=True)))


def test_ghz24_estimator_matches_statevector(ghz24_state):
    n = N24
    labels = ["X" * n, "Y" * n, "Z" * n, label(n, {0: "Z"}), label(n, {3: "Z", 17: "Z"}),
              label(n, {0: "X", 1: "X"}), label(n, {5: "Y", 9: "Y"} | {q: "X" for q in
                                                                      range(10, 24)})]
    obs = SparsePauliOp(labels, coeffs=[0.5, -1.5, 2.0, 3.0, -0.25, 1.0, 0.75])
    res = EstimatorV2().run([(ghz(n), [obs, *labels])]).result()[0]
    want = [ghz24_state.expectation_value(obs).real] + [
        ghz24_state.expectation_value(SparsePauliOp(lb)).real for lb in labels]
    np.testing.assert_allclose(res.data.evs, want, atol=1e-12)
    assert res.metadata["route"]["method"] == "stabilizer"
    assert res.metadata["route"]["stabilizer_seconds"] > 0
    assert res.metadata["qsimdist"]["stabilizer_terms"] == len(labels)


def test_graph24_estimator_matches_statevector(graph24_state):
    n = N24
    nbrs = {v: set() for v in range(n)}
    for a, b in GRAPH24:
        nbrs[a].add(b)
        nbrs[b].add(a)
    stabilizers = [label(n, {v: "X"} | {u: "Z" for u in nbrs[v]}) for v in (0, 7, 23)]
    others = [label(n, {0: "Z"}), label(n, {0: "X"}), label(n, {1: "Y", 2: "Y"}),
              "X" * n]
    labels = stabilizers + others
    res = EstimatorV2().run([(graph_state(n, GRAPH24), labels)]).result()[0]
    want = [graph24_state.expectation_value(SparsePauliOp(lb)).real for lb in labels]
    np.testing.assert_allclose(res.data.evs, want, atol=1e-12)
    np.testing.assert_allclose(res.data.evs[:3], 1.0)
    assert res.metadata["route"]["method"] == "stabilizer"


def test_ghz24_sampler_matches_statevector(ghz24_state):
    res = SamplerV2(seed=11).run([ghz(N24, measure=True)], shots=SHOTS).result()[0]
    counts = counts_of(res)
    assert set(counts) == {"0" * N24, "1" * N24}
    assert_samples_follow(counts, ghz24_state.probabilities(), tvd=0.04)
    assert route_of_sampler(res) == "stabilizer"
    assert res.metadata["sampling"]["method"] == "stabilizer"


def test_graph24_sampler_matches_statevector():
    """In the X basis a graph state's outcomes are uniform on a subspace: every drawn
    bitstring has the same exact probability, and rarely repeats."""
    qc = graph_state(N24, GRAPH24, x_basis=True)
    probs = graph_state_vector(N24, GRAPH24, x_basis=True).probabilities()
    support = probs > 1e-12
    res = SamplerV2(seed=2).run([qc.measure_all(inplace=False)], shots=SHOTS).result()[0]
    counts = counts_of(res)
    drawn = np.array([int(b, 2) for b in counts])
    assert support[drawn].all()
    np.testing.assert_allclose(probs[drawn], 1.0 / support.sum(), rtol=1e-9)
    assert route_of_sampler(res) == "stabilizer"
    # each qubit's marginal is 1/2 unless fixed (then the drawn value is the fixed one)
    bits = res.data.meas.to_bool_array(order="little")
    for q in range(N24):
        p1 = float(probs.reshape(-1, 2, 1 << q)[:, 1, :].sum())
        assert abs(bits[:, q].mean() - p1) < 0.04


# ----------------------------------------------------------------------------- 1,000 qubits
N1000 = 1000


def test_ghz1000_both_primitives():
    n = N1000
    res = SamplerV2(seed=4).run([ghz(n, measure=True)], shots=1000).result()[0]
    counts = counts_of(res)
    assert set(counts) == {"0" * n, "1" * n}
    assert 400 < counts["0" * n] < 600
    assert route_of_sampler(res) == "stabilizer"
    labels = ["X" * n, "Z" * n, label(n, {0: "Z", 999: "Z"}), label(n, {17: "Z", 555: "Z"}),
              label(n, {3: "Z"}), label(n, {0: "X"}), label(n, {0: "Y", 1: "Y"}),
              "Y" * n]
    est = EstimatorV2().run([(ghz(n), labels)]).result()[0]
    # <Y^n> on GHZ: (i^n + (-i)^n) / 2 = 1 for n = 0 mod 4; <Y Y I...> = 0 (odd weight of
    # X/Y flips all qubits only when the weight is n)
    np.testing.assert_array_equal(est.data.evs, [1, 1, 1, 1, 0, 0, 0, 1])
    assert est.metadata["route"]["method"] == "stabilizer"


def test_graph1000_both_primitives():
    n = N1000
    edges = ring_edges(n) + [(q, (q + 500) % n) for q in range(0, 500, 7)]
    nbrs = {v: set() for v in range(n)}
    for a, b in edges:
        nbrs[a].add(b)
        nbrs[b].add(a)
    vertices = [0, 1, 7, 500, 998, 999]
    labels = [label(n, {v: "X"} | {u: "Z" for u in nbrs[v]}) for v in vertices]
    labels += [label(n, {v: "Z"}) for v in vertices]
    obs = SparsePauliOp(labels[:3], coeffs=[1.0, 2.0, -0.5])
    est = EstimatorV2().run([(graph_state(n, edges), [*labels, obs])]).result()[0]
    np.testing.assert_array_equal(est.data.evs, [1.0] * 6 + [0.0] * 6 + [2.5])
    assert est.metadata["route"]["method"] == "stabilizer"
    # a ring's product of all stabilizers is X^n (n even): X-basis outcomes have even parity
    ring = graph_state(n, ring_edges(n), x_basis=True, measure=True)
    res = SamplerV2(seed=9).run([ring], shots=500).result()[0]
    bits = res.data.meas.to_bool_array(order="little")
    assert (bits.sum(axis=1) % 2 == 0).all()
    assert 0.4 < bits.mean() < 0.6 and len(set(map(bytes, bits))) == 500
    assert route_of_sampler(res) == "stabilizer"
    # in the Z basis a graph state's outcomes are uniform
    z = graph_state(n, edges, measure=True)
    bits = SamplerV2(seed=9).run([z], shots=500).result()[0].data.meas.to_bool_array()
    assert np.abs(bits.mean(axis=0) - 0.5).max() < 0.12


# ----------------------------------------------------------------------------- random, routes
def test_random_clifford_matches_statevector():
    qc = random_clifford(8, seed=12).to_circuit()
    sv = Statevector(qc)
    rng = np.random.default_rng(3)
    labels = ["".join(rng.choice(list("IXYZ"), 8)) for _ in range(200)]
    labels += [label(8, {q: p}) for q in range(8) for p in "XYZ"]
    obs = SparsePauliOp(labels[:50], coeffs=rng.normal(size=50))
    est = EstimatorV2().run([(qc, [obs, *labels])]).result()[0]
    want = [sv.expectation_value(obs).real] + [
        sv.expectation_value(SparsePauliOp(lb)).real for lb in labels]
    np.testing.assert_allclose(est.data.evs, want, atol=1e-10)
    assert set(np.round(est.data.evs[1:], 12)) <= {-1.0, 0.0, 1.0}
    assert est.metadata["route"]["method"] == "stabilizer"
    measured = qc.measure_all(inplace=False)
    res = SamplerV2(seed=1, options={"method": "stabilizer"}).run(
        [measured], shots=20000).result()[0]
    assert_samples_follow(counts_of(res), sv.probabilities(), tvd=0.06)


def test_bit_order_and_registers():
    """Deterministic outcomes spread over two registers, measured out of order."""
    qr = QuantumRegister(5)
    a, b = ClassicalRegister(3, "a"), ClassicalRegister(2, "b")
    qc = QuantumCircuit(qr, a, b)
    qc.x(0)
    qc.h(3)
    qc.s(3)
    qc.s(3)
    qc.h(3)  # H Z H = X: qubit 3 is |1>
    qc.swap(0, 1)  # qubit 1 is |1>, qubit 0 |0>
    qc.measure([1, 3, 4], [a[0], a[2], b[1]])
    qc.measure(0, b[0])
    # forced: at 5 qubits and 50 shots the statevector is about as cheap, and the router
    # may take either (its price depends on whether the compiled kernels are warm)
    res = SamplerV2(seed=0, options={"method": "stabilizer"}).run([qc], shots=50).result()[0]
    assert res.data.a.get_counts() == {"101": 50}
    assert res.data.b.get_counts() == {"00": 50}
    assert res.metadata["sampling"]["method"] == "stabilizer"


def test_one_t_gate_leaves_the_route():
    qc = ghz(6)
    qc.t(2)
    est = EstimatorV2().run([(qc, ["ZZIIII", "XXXXXX"])]).result()[0]
    assert est.metadata["route"]["method"] != "stabilizer"
    assert est.metadata["route"]["stabilizer_seconds"] is None
    np.testing.assert_allclose(est.data.evs, [1.0, np.cos(np.pi / 4)], atol=1e-10)
    res = SamplerV2(seed=3).run([qc.measure_all(inplace=False)], shots=100).result()[0]
    assert res.metadata["sampling"]["method"] != "stabilizer"
    with pytest.raises(QiskitError, match="not Clifford"):
        EstimatorV2(options={"method": "stabilizer"}).run([(qc, ["ZZIIII"])]).result()
    with pytest.raises(QiskitError, match="not Clifford"):
        SamplerV2(options={"method": "stabilizer"}).run(
            [qc.measure_all(inplace=False)]).result()


def test_seeds_give_reproducible_samples():
    qc = graph_state(30, random_edges(30, seed=8), x_basis=True, measure=True)
    first = SamplerV2(seed=123).run([qc], shots=300).result()[0].data.meas
    again = SamplerV2(seed=123).run([qc], shots=300).result()[0].data.meas
    other = SamplerV2(seed=124).run([qc], shots=300).result()[0].data.meas
    assert first == again and first != other
    sampler = SamplerV2(seed=123)  # an int seed: every run starts afresh
    assert sampler.run([qc], shots=300).result()[0].data.meas == first
    assert sampler.run([qc], shots=300).result()[0].data.meas == first
    gen = SamplerV2(seed=np.random.default_rng(5))  # a generator: drawn from as it is
    x = gen.run([qc], shots=300).result()[0].data.meas
    y = gen.run([qc], shots=300).result()[0].data.meas
    assert x != y


# ----------------------------------------------------------------------------- dynamic
def exact_counts_distribution(qc: QuantumCircuit) -> dict[str, float]:
    """The exact distribution of ``qc``'s classical bits (one register), branch by branch:
    measurements and resets project the state, ``if_test`` blocks run on their bit."""
    n, k = qc.num_qubits, qc.num_clbits
    branches = [(Statevector.from_int(0, 2**n), (0,) * k, 1.0)]
    proj = [Operator(np.diag([1.0, 0.0])), Operator(np.diag([0.0, 1.0]))]
    for inst in qc.data:
        op, qs = inst.operation, [qc.find_bit(q).index for q in inst.qubits]
        new = []
        for sv, bits, p in branches:
            if op.name in ("measure", "reset"):
                for out in (0, 1):
                    w = sv.probabilities([qs[0]])[out]
                    if w < 1e-12:
                        continue
                    s = sv.evolve(proj[out], [qs[0]])
                    s = Statevector(s.data / np.sqrt(w))
                    nb = list(bits)
                    if op.name == "measure":
                        nb[qc.find_bit(inst.clbits[0]).index] = out
                    elif out:
                        s = s.evolve(Operator([[0, 1], [1, 0]]), [qs[0]])
                    new.append((s, tuple(nb), p * w))
            elif op.name == "if_else":
                clbit, value = op.condition
                body = op.blocks[0]
                if bits[qc.find_bit(clbit).index] == value:
                    sv = sv.evolve(Operator(body), qs)
                new.append((sv, bits, p))
            elif op.name != "barrier":
                new.append((sv.evolve(Operator(op), qs), bits, p))
        branches = new
    dist: dict[str, float] = {}
    for _, bits, p in branches:
        key = "".join(str(b) for b in reversed(bits))
        dist[key] = dist.get(key, 0.0) + p
    return dist


def dynamic_circuit(final: bool = True) -> QuantumCircuit:
    qc = QuantumCircuit(3, 5)
    qc.h(0)
    qc.cx(0, 1)
    qc.measure(0, 0)
    qc.reset(0)
    qc.h(0)
    qc.s(0)
    qc.cx(0, 2)
    qc.measure(1, 1)
    with qc.if_test((qc.clbits[1], 1)):
        qc.x(2)
    qc.reset(1)
    qc.h(1)
    qc.cz(1, 2)
    qc.h(2)
    if final:
        qc.measure(2, 2)
        qc.measure(0, 3)
        qc.measure(1, 4)
    return qc


def test_mid_circuit_measurement_and_reset_match_aer():
    aer = pytest.importorskip("qiskit_aer.primitives")
    qc = dynamic_circuit()
    exact = exact_counts_distribution(qc)
    assert abs(sum(exact.values()) - 1) < 1e-12 and len(exact) >= 4
    shots = 20000
    ours = SamplerV2(seed=7).run([qc], shots=shots).result()[0]
    theirs = aer.SamplerV2(seed=7).run([qc], shots=shots).result()[0]
    assert ours.metadata["sampling"]["method"] == "stabilizer"
    assert ours.metadata["sampling"]["dynamic"]
    for counts in (ours.data.c.get_counts(), theirs.data.c.get_counts()):
        assert set(counts) <= set(exact)
        tvd = 0.5 * sum(abs(counts.get(b, 0) / shots - p) for b, p in exact.items())
        assert tvd < 0.02


def test_estimator_branches_of_a_dynamic_circuit_match_the_other_routes():
    """Resets and mid-circuit measurements: each element samples a branch, and the terms
    carry projectors on the branch wires; the same seed gives the same values as the
    tensor-network route."""
    qc = dynamic_circuit(final=False)
    labels = ["ZZZ", "XIX", "IYZ", "ZII", "IIX"]
    obs = [labels] * 8
    ours = EstimatorV2(seed=5).run([(qc, obs)]).result()[0]
    other = EstimatorV2(seed=5, options={"method": "state"}).run([(qc, obs)]).result()[0]
    np.testing.assert_allclose(ours.data.evs, other.data.evs, atol=1e-9)
    assert ours.metadata["route"]["method"] == "stabilizer"
    assert set(np.round(ours.data.evs.ravel(), 9)) <= {-1.0, 0.0, 1.0}


def test_cli_and_options_name_the_method():
    from qsimdist.engine.expectation import METHODS as EXPECTATION_METHODS
    from qsimdist.engine.sampling import METHODS as SAMPLING_METHODS

    assert "stabilizer" in SAMPLING_METHODS and "stabilizer" in EXPECTATION_METHODS


def test_route_falls_back_without_stim(monkeypatch):
    """Without stim nothing is detected: the other routes run."""
    import qsimdist.engine.stabilizer as stabilizer

    monkeypatch.setattr(stabilizer, "stabilizer_available", lambda: False)
    monkeypatch.setattr(stabilizer, "_LAST", [])
    qc = ghz(5)
    est = EstimatorV2().run([(qc, ["ZZIII"])]).result()[0]
    assert est.metadata["route"]["method"] != "stabilizer" and float(est.data.evs[0]) == (
        pytest.approx(1.0))
    res = SamplerV2(seed=1).run([ghz(5, measure=True)], shots=50).result()[0]
    assert res.metadata["sampling"]["method"] != "stabilizer"
    assert set(counts_of(res)) <= {"00000", "11111"}
