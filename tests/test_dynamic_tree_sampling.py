"""``SamplerV2`` on dynamic circuits as a tree of trajectories
(:mod:`qsimdist.engine.tree_sampling`).

The reference is the exact joint distribution of every clbit, read off the
deferred-measurement circuit's ``Statevector`` (Qiskit's, complex128); the tree's
shots must pass a chi-square test against it (p > 1e-3), as must the lowered route's. The
tree's price decides when it runs; here it is forced (``force_tree``) on circuits
of 3-4 qubits where the lowered route is as cheap, and left to decide on MQT
Bench's iterative phase estimation, where it wins.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit
from qiskit.quantum_info import Statevector

from qsimdist.engine import dynamic_prices
from qsimdist.engine.tree_sampling import tree_program
from qsimdist.errors import QsimdistError
from qsimdist.frontends.dynamic import may_be_dynamic
from qsimdist.frontends.lowering import lower_circuit
from qsimdist.qiskit import SamplerV2

from .test_dynamic_trajectory import CIRCUITS
from .test_qiskit_sampler import assert_chisquare

SHOTS = 20_000


def with_final(qc: QuantumCircuit) -> QuantumCircuit:
    """``qc`` with every qubit measured at the end into a register ``out``."""
    out = qc.copy()
    reg = ClassicalRegister(qc.num_qubits, "out")
    out.add_register(reg)
    out.measure(range(qc.num_qubits), reg)
    return out


def exact(qc: QuantumCircuit) -> dict[str, float]:
    """{every clbit's value, clbit 0 rightmost: probability} from the lowered circuit."""
    lowered = lower_circuit(qc)
    sources = lowered.clbit_sources
    qargs = sorted({q for q in sources if q is not None})
    probs = Statevector(lowered.circuit).probabilities(qargs)
    out: dict[str, float] = {}
    for k, p in enumerate(probs):
        if p > 1e-14:
            bit = {q: k >> i & 1 for i, q in enumerate(qargs)}
            key = "".join(str(0 if q is None else bit[q]) for q in reversed(sources))
            out[key] = out.get(key, 0.0) + float(p)
    return out


def drawn(result, qc: QuantumCircuit) -> list[str]:
    """Each shot's clbits as one string, clbit 0 rightmost."""
    per_reg = {reg.name: getattr(result.data, reg.name).get_bitstrings() for reg in qc.cregs}
    index = {bit: (reg.name, reg.size - 1 - k) for reg in qc.cregs
             for k, bit in enumerate(reg)}
    rows = []
    for s in range(result.data[qc.cregs[0].name].num_shots):
        rows.append("".join(per_reg[index[b][0]][s][index[b][1]]
                            for b in reversed(qc.clbits)))
    return rows


def chi_square(rows: list[str], probs: dict[str, float]) -> float:
    """The shots' chi-square p-value against ``probs``, asserted above 1e-3 (and no
    impossible outcome drawn)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r] = counts.get(r, 0) + 1
    return assert_chisquare(counts, probs, len(rows))


@pytest.fixture
def force_tree(monkeypatch):
    """Try the tree whatever its price, and never abandon it."""
    monkeypatch.setattr(dynamic_prices, "TRY_SHARE", float("inf"))
    monkeypatch.setattr(dynamic_prices, "ABANDON_SHARE", float("inf"))


def sample(qc, seed=7, shots=SHOTS, **options):
    return SamplerV2(seed=seed, options=options or None).run([qc], shots=shots).result()[0]


@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_tree_draws_the_exact_joint_distribution(name, force_tree, monkeypatch):
    qc = with_final(CIRCUITS[name]())
    probs = exact(qc)
    assert len(probs) > 4  # several branches and outcomes, else the test shows little
    tree = sample(qc, dtype="complex128")
    route = tree.metadata["sampling"]["route"]
    assert tree.metadata["sampling"]["method"] == "trajectory"
    assert route["leaves"] > 1 and route["qubits"] == qc.num_qubits
    chi_square(drawn(tree, qc), probs)
    monkeypatch.setattr(dynamic_prices, "ENABLED", False)
    other = sample(qc, dtype="complex128")
    assert other.metadata["sampling"]["method"] != "trajectory"
    chi_square(drawn(other, qc), probs)


def test_same_seed_same_shots_and_held_copies_change_nothing(force_tree, monkeypatch):
    """One seed gives the same shots; with no room to hold a copy per level, the second
    outcomes are replayed from the start and the shots are still the same."""
    qc = with_final(CIRCUITS["register_and_expressions"]())
    first = drawn(sample(qc, seed=3, shots=2000), qc)
    assert drawn(sample(qc, seed=3, shots=2000), qc) == first
    assert drawn(sample(qc, seed=4, shots=2000), qc) != first
    monkeypatch.setattr(dynamic_prices, "CACHE_BYTES", 0)
    assert drawn(sample(qc, seed=3, shots=2000), qc) == first


def test_shots_come_in_a_random_order(force_tree):
    """The leaves' rows are shuffled: a fair mid-circuit coin's bit changes between
    consecutive shots about half the time (grouped by leaf, it would change once)."""
    qc = QuantumCircuit(2, 2)
    qc.h(0)
    qc.t(0)  # not Clifford: else the stabilizer route samples it
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(1)
    qc.h(0)
    qc.measure(1, 1)
    res = sample(qc, shots=4000)
    assert res.metadata["sampling"]["method"] == "trajectory"
    bits = [int(r[-1]) for r in drawn(res, qc)]
    changes = sum(a != b for a, b in zip(bits, bits[1:]))
    assert 1800 < changes < 2200
    assert all(r[0] == r[1] for r in drawn(res, qc))  # qubit 1 copies the coin


def test_price_picks_the_tree_for_phase_estimation_and_not_for_a_dynamic_qft():
    """Iterative phase estimation on two qubits with 14 measurements of the one
    ancilla (a lowered circuit of 15 qubits), of a phase just off a 14-bit fraction
    (a few likely outcomes, as in MQT Bench's, whose phase is exact): the tree. Six
    qubits whose every measurement is random and whose lowered circuit has no more
    qubits: the lowered route."""
    k_max = 14
    iqpe = QuantumCircuit(2, k_max)
    iqpe.x(1)
    for k in range(k_max):
        iqpe.h(0)
        iqpe.cp(2 * np.pi * (0.3125 + 2e-6) * 2 ** (k_max - 1 - k), 0, 1)
        for j in range(k):
            with iqpe.if_test((iqpe.clbits[j], 1)):
                iqpe.p(-np.pi / 2 ** (k - j), 0)
        iqpe.h(0)
        iqpe.measure(0, k)
    res = sample(iqpe, shots=1000, dtype="complex128")
    route = res.metadata["sampling"]["route"]
    assert res.metadata["sampling"]["method"] == "trajectory"
    assert route["lowered_qubits"] == 2 + k_max - 1  # the last measurement is final
    assert route["predicted_seconds"] < route["statevector_seconds"]
    assert 1 < route["leaves"] < 50
    chi_square(drawn(res, iqpe), exact(iqpe))

    qft = QuantumCircuit(6, 6)
    qft.h(range(6))
    qft.ry(0.3, range(6))
    for k in range(6):
        qft.h(k)
        qft.measure(k, k)
        for j in range(k + 1, 6):
            with qft.if_test((qft.clbits[k], 1)):
                qft.p(np.pi / 2 ** (j - k), j)
    res = sample(qft, shots=4000, dtype="complex128")
    assert res.metadata["sampling"]["method"] != "trajectory"
    chi_square(drawn(res, qft), exact(qft))


def test_abandoned_tree_falls_back_to_the_lowered_route(monkeypatch):
    """Tried on a circuit whose every outcome is random, with a budget below its work:
    abandoned, and the lowered route's shots are returned (still exact)."""
    monkeypatch.setattr(dynamic_prices, "TRY_SHARE", float("inf"))
    monkeypatch.setattr(dynamic_prices, "ABANDON_SHARE", 1e-6)
    qc = with_final(CIRCUITS["clbit_and_reset"]())
    res = sample(qc, dtype="complex128")
    assert res.metadata["sampling"]["method"] != "trajectory"
    chi_square(drawn(res, qc), exact(qc))


def test_no_tree_for_clifford_or_static_circuits_or_other_methods(force_tree):
    ghz = QuantumCircuit(3, 3)
    ghz.h(0)
    ghz.measure(0, 0)
    with ghz.if_test((ghz.clbits[0], 1)):
        ghz.x([1, 2])
    ghz.measure([1, 2], [1, 2])
    # forced to try the tree (force_tree), a Clifford circuit still keeps the lowered
    # routes (stabilizer, or for so few qubits the statevector where the router says so)
    assert tree_program(ghz).may_be_clifford()
    assert sample(ghz, shots=100).metadata["sampling"]["method"] in ("stabilizer",
                                                                       "statevector")
    static = QuantumCircuit(2, 2)
    static.h(0)
    static.ry(0.3, 1)
    static.measure([0, 1], [0, 1])
    assert not may_be_dynamic(static)
    dynamic = with_final(CIRCUITS["nested_conditions"]())
    assert may_be_dynamic(dynamic)
    named = sample(dynamic, shots=100, method="statevector")
    assert named.metadata["sampling"]["method"] == "statevector"


def test_return_amplitudes_refused_for_a_tree_in_one_line(force_tree):
    qc = with_final(CIRCUITS["clbit_and_reset"]())
    with pytest.raises(QsimdistError) as info:
        sample(qc, shots=10, return_amplitudes=True)
    assert "mid-circuit measurement or reset" in str(info.value)
    assert "\n" not in str(info.value)
