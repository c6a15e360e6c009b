"""Kicked-Ising Trotter circuits on heavy-hex lattices: the doubled route keeps RZZ diagonal.

The lattice is built here (a patch of the heavy-hex map: rows of qubits joined by bridge
qubits), so only the last test needs the shared data folder (the 127-qubit Eagle map).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from qiskit.quantum_info import Pauli, SparsePauliOp, Statevector

from qsimdist import expectation_values
from qsimdist.engine.doubled import DoubledCircuit, diagonal_light_cone
from qsimdist.engine.expectation import ExpectationEngine
from qsimdist.engine.pauli_terms import SINGLE_QUBIT_OPERATORS, parse_term
from qsimdist.errors import PlanError
from qsimdist.frontends import load
from qsimdist.lattice import kicked_ising_circuit, pauli_label
from qsimdist.qiskit import EstimatorV2


def heavy_hex_patch(rows: int, length: int) -> tuple[int, list[tuple[int, int]]]:
    """``rows`` lines of ``length`` qubits; between lines r and r+1 a bridge qubit joins
    the columns ``c = 0 (mod 4)`` (r even) or ``c = 2 (mod 4)`` (r odd), as on Eagle."""
    edges = []
    for r in range(rows):
        edges += [(r * length + c, r * length + c + 1) for c in range(length - 1)]
    n = rows * length
    for r in range(rows - 1):
        for c in range(0 if r % 2 == 0 else 2, length, 4):
            edges += [(r * length + c, n), ((r + 1) * length + c, n)]
            n += 1
    return n, edges


kicked_ising = kicked_ising_circuit
label = pauli_label


def test_the_builders_follow_the_experiment():
    """RX(theta_h) on every qubit, then RZZ(-pi/2) per edge, per step; labels in Qiskit's
    order; bad edges refused in one line."""
    from qsimdist.errors import InvalidInputError

    qc = kicked_ising_circuit(3, [(0, 1), (1, 2)], 0.8, 2)
    names = [inst.operation.name for inst in qc.data]
    assert names == ["rx"] * 3 + ["rzz"] * 2 + ["rx"] * 3 + ["rzz"] * 2
    assert qc.data[3].operation.params[0] == pytest.approx(-math.pi / 2)
    assert pauli_label({0: "Z", 2: "X"}, 4) == "IXIZ"
    with pytest.raises(InvalidInputError, match="not a pair of distinct qubits"):
        kicked_ising_circuit(3, [(0, 3)], 0.8, 1)


N, EDGES = heavy_hex_patch(2, 9)  # 21 qubits: a Statevector is 32 MiB
TERMS = [{4: "Z"}, {3: "X", 4: "Y", 5: "Z", 18: "Z"}, {0: "Z", 9: "X", 18: "Z"}]


@pytest.mark.parametrize("theta", [0.8, 1.2])
def test_patch_matches_statevector(theta):
    qc = kicked_ising(N, EDGES, theta, 3)
    labels = [label(t, N) for t in TERMS]
    sv = Statevector(qc)
    ref = [sv.expectation_value(Pauli(lb)).real for lb in labels]
    est = EstimatorV2(options={"method": "doubled"})
    got = est.run([(qc, labels)]).result()[0]
    np.testing.assert_allclose(got.data.evs, ref, atol=1e-10, rtol=0)
    assert got.metadata["route"]["method"] == "doubled"
    assert np.std(ref) > 0.01


def test_diagonal_gates_stay_diagonal():
    qc = kicked_ising(N, EDGES, 0.8, 3)
    prepared = DoubledCircuit.of(load(qc))
    two = [k for k, g in enumerate(prepared.circuit.gates) if len(g.qubits) == 2]
    assert len(two) == 3 * len(EDGES)
    assert all(prepared.diagonal[k] for k in two)  # no RX folded into an RZZ
    term = parse_term(label(TERMS[1], N), N)
    net = prepared.network(term.qubits, term.ops, SINGLE_QUBIT_OPERATORS)
    # RZZ are tensors on two (hyper-)indices, RX on two: nothing wider than a matrix
    assert max(len(t) for t in net.inputs) == 2
    assert net.hyper_indices()


def test_diagonal_light_cone_is_tighter():
    gc = load(kicked_ising(N, EDGES, 0.8, 3))
    prepared = DoubledCircuit.of(gc)
    term = parse_term(label({4: "Z"}, N), N)
    cone = diagonal_light_cone(prepared.circuit, term.qubits, term.ops, prepared.diagonal)
    plain = prepared.circuit.light_cone(term.qubits)
    assert set(cone.gates) < set(plain.gates)
    # the last RZZ layer commutes with Z_4: none of the last layer's gates is kept
    last_layer = set(range(len(prepared.circuit.gates) - len(EDGES),
                           len(prepared.circuit.gates)))
    assert not last_layer & set(cone.gates)


def test_the_doubled_route_is_priced_on_the_cones_it_contracts(monkeypatch):
    """The engine prices the doubled route on each term's diagonal cone of the circuit the
    route prepares (fused keeping diagonals), and contracts those very cones: tighter, so
    cheaper, than the plain cones of the circuit fused into neighbours."""
    from qsimdist.engine import doubled
    from qsimdist.engine.term_networks import state_flops
    from qsimdist.frontends.one_qubit_fusion import fuse_into_neighbours

    qc = kicked_ising(N, EDGES, 0.8, 3)
    labels = [label(t, N) for t in TERMS]
    priced, contracted = [], []
    real_price, real_simplified = doubled.doubled_price, doubled.DoubledCircuit.simplified

    def price(prepared, terms):
        priced.append((prepared, real_price(prepared, terms)))
        return priced[-1][1]

    def simplified(self, *args, cone=None, **kwargs):
        contracted.append((self, cone))
        return real_simplified(self, *args, cone=cone, **kwargs)

    monkeypatch.setattr("qsimdist.engine.expectation.doubled_price", price)
    monkeypatch.setattr(doubled.DoubledCircuit, "simplified", simplified)
    got = expectation_values(qc, labels, engine=ExpectationEngine(method="doubled"))
    ref = expectation_values(qc, labels, engine=ExpectationEngine(method="statevector"))
    np.testing.assert_allclose(got, ref, atol=1e-10, rtol=0)
    (prepared, p), = priced
    assert [cone for _, cone in contracted] == list(p.cones)
    assert all(ran is prepared for ran, _ in contracted)
    two = [k for k, g in enumerate(prepared.circuit.gates) if len(g.qubits) == 2]
    assert all(prepared.diagonal[k] for k in two)  # the circuit fused keeping diagonals
    terms = [parse_term(lb, N) for lb in labels]
    assert list(p.cones) == [prepared.cone(t.qubits, t.ops) for t in terms]
    plain = fuse_into_neighbours(load(qc))
    plain_flops = 0.0
    for t in terms:
        kept = plain.light_cone(t.qubits).gates
        qubits = set(t.qubits).union(*(plain.gates[k].qubits for k in kept))
        plain_flops += 2 * state_flops(plain, kept, len(qubits)) + 8.0 * 2.0 ** len(qubits) \
            * t.weight
    assert 0 < p.flops < plain_flops


def test_tiny_memory_limit_slices_and_gives_the_same_value():
    qc = kicked_ising(N, EDGES, 1.2, 4)
    labels = [label(TERMS[1], N)]
    free = ExpectationEngine(method="doubled", memory_limit="none")
    ref = expectation_values(qc, labels, engine=free)
    tight = ExpectationEngine(method="doubled", memory_limit="6KiB")
    got = expectation_values(qc, labels, engine=tight)
    assert free.stats.slices == 1 < tight.stats.slices
    np.testing.assert_allclose(got, ref, atol=1e-10, rtol=0)
    sv = Statevector(qc).expectation_value(Pauli(labels[0])).real
    np.testing.assert_allclose(got, [sv], atol=1e-10, rtol=0)


def test_impossible_memory_limit_is_refused_in_one_line():
    qc = kicked_ising(N, EDGES, 1.2, 4)
    engine = ExpectationEngine(method="doubled", memory_limit=64)
    with pytest.raises(PlanError, match="memory limit") as info:
        expectation_values(qc, [label(TERMS[1], N)], engine=engine)
    assert "\n" not in str(info.value)


def test_sum_of_z_terms_shares_plans():
    qc = kicked_ising(N, EDGES, 0.8, 2)
    obs = SparsePauliOp([label({q: "Z"}, N) for q in range(N)])
    est = EstimatorV2(options={"method": "doubled"})
    got = est.run([(qc, [obs])]).result()[0]
    ref = Statevector(qc).expectation_value(obs).real
    np.testing.assert_allclose(got.data.evs, [ref], atol=1e-9, rtol=0)
    stats = got.metadata["qsimdist"]
    assert stats["doubled_terms"] == N
    assert stats["plans_made"] < N  # translated light cones share plans


def test_eagle_127_two_steps_matches_quimb(shared_data):
    """The 127-qubit Eagle map, 2 steps: qsimdist (auto route) against quimb's own
    reverse-light-cone contraction."""
    import quimb.tensor as qtn

    edges = json.loads((shared_data / "circuits" / "kicked_ising"
                        / "eagle127_edges.json").read_text())
    n, theta, steps = 127, 0.8, 2
    qc = kicked_ising(n, edges, theta, steps)
    terms = [{62: "Z"}, {13: "X", 9: "Y", 12: "Z", 17: "Z"}]
    got = EstimatorV2().run([(qc, [label(t, n) for t in terms])]).result()[0]
    circ = qtn.Circuit(n)
    for _ in range(steps):
        for q in range(n):
            circ.apply_gate("RX", theta, q)
        for a, b in edges:
            circ.apply_gate("RZZ", -math.pi / 2, a, b)
    mats = {c: SINGLE_QUBIT_OPERATORS[c] for c in "XYZ"}
    ref = []
    for t in terms:
        where = sorted(t)
        ket = circ.get_psi_reverse_lightcone(where)
        bra = ket.conj().reindex({circ.ket_site_ind(q): circ.bra_site_ind(q) for q in where})
        tn = bra | ket
        for q in where:
            tn |= qtn.Tensor(mats[t[q]], (circ.bra_site_ind(q), circ.ket_site_ind(q)))
        ref.append(complex(tn.contract(all, optimize="greedy", output_inds=())).real)
    np.testing.assert_allclose(got.data.evs, ref, atol=1e-10, rtol=0)
    assert got.metadata["route"]["method"] == "doubled"


def test_a_wide_doubled_call_needs_no_quimb():
    """A 4-row heavy-hex patch (48 qubits, too wide for a state): the doubled route's
    simplification runs on qsimdist's own passes, so the call never imports quimb
    (its import was half of a 127-qubit <W10> call), and the value matches the same
    network contracted without simplification."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from test_kicked_ising import heavy_hex_patch\n"
        "from qsimdist import expectation_values\n"
        "from qsimdist.lattice import kicked_ising_circuit, pauli_label\n"
        "from qsimdist.qiskit import EstimatorV2\n"
        "n, edges = heavy_hex_patch(4, 11)\n"
        "qc = kicked_ising_circuit(n, edges, 0.8, 4)\n"
        "term = pauli_label({12: 'X', 13: 'Y', 14: 'Z', 23: 'Z'}, n)\n"
        "res = EstimatorV2().run([(qc, [term])]).result()[0]\n"
        "assert res.metadata['route']['method'] == 'doubled', res.metadata['route']\n"
        "print('quimb' in sys.modules, float(res.data.evs[0]))\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, value = done.stdout.split()
    assert imported == "False"
    # the same term's doubled network as built (no simplification), contracted by cotengra
    import cotengra as ctg

    n, edges = heavy_hex_patch(4, 11)
    prepared = DoubledCircuit.of(load(kicked_ising_circuit(n, edges, 0.8, 4)))
    ops = {12: "X", 13: "Y", 14: "Z", 23: "Z"}
    net = prepared.network(sorted(ops), "".join(ops[q] for q in sorted(ops)),
                           SINGLE_QUBIT_OPERATORS)
    inputs, output, size_dict, _ = net.symbolic()
    opt = ctg.HyperOptimizer(max_repeats=16, methods=["greedy"], seed=1, progbar=False)
    want = complex(ctg.array_contract(net.arrays, inputs, output, optimize=opt)).real
    assert abs(float(value) - want) < 1e-10
    assert abs(want) > 1e-3  # a term whose value tells a wrong network apart
