"""Operator Loschmidt echoes f = 2^-n Tr(O W^dag O W) (qsimdist.engine.echo) against dense
unitaries from qiskit.quantum_info.Operator, and the tracker's OpenQASM 3 files read as
they are (156 declared qubits, a custom ``sxdg``, barriers)."""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator, SparsePauliOp

from qsimdist.engine.echo import (
    cone_network,
    echo_cone,
    echo_network,
    echo_plan,
    echo_value,
    parse_observable,
)
from qsimdist.errors import InvalidInputError, QsimdistError
from qsimdist.frontends import GateCircuit, load
from qsimdist.network import Network

TRACKER = "circuits/tracker"
SMALLEST = "49Q_OLE_circuit_L_3_b_0.25_delta0.15.qasm"


def dense_echo(qc: QuantumCircuit, obs: dict[int, str]) -> float:
    """2^-n Tr(O W^dag O W) from the full unitary."""
    n = qc.num_qubits
    w = Operator(qc).data
    label = ["I"] * n
    for q, op in obs.items():
        label[n - 1 - q] = op
    o = SparsePauliOp("".join(label)).to_matrix()
    value = np.trace(o @ w.conj().T @ o @ w) / 2**n
    assert abs(value.imag) < 1e-10
    return float(value.real)


def trotter(n: int, steps: int, rng, edges=None) -> QuantumCircuit:
    """A Trotterised Ising-like U: rx/rz on every qubit, then CZ on a brickwork of edges."""
    edges = edges or [(q, q + 1) for q in range(n - 1)]
    qc = QuantumCircuit(n)
    for s in range(steps):
        for q in range(n):
            qc.rx(rng.uniform(-np.pi, np.pi), q)
            qc.rz(rng.uniform(-np.pi, np.pi), q)
        for a, b in edges[s % 2::2] + edges[(s + 1) % 2::2]:
            qc.cz(a, b)
    return qc


def echo_circuit(n: int, steps: int, sites, delta: float, seed: int) -> QuantumCircuit:
    """W = U^dag V U with V = exp(-i delta sum_{j in sites} X_j) (a perturbation layer)."""
    u = trotter(n, steps, np.random.default_rng(seed))
    qc = u.copy()
    for j in sites:
        qc.rx(2 * delta, j)
    return qc.compose(u.inverse())


@pytest.mark.parametrize("n,steps,sites,obs,seed", [
    (6, 3, (0, 3), {1: "Z", 4: "Z"}, 0),
    (7, 4, (2,), {0: "Z", 5: "Z", 6: "Z"}, 1),
    (8, 3, (1, 5, 6), {3: "X", 4: "Y"}, 2),
    (10, 2, (0, 4, 9), {2: "Z", 7: "Z"}, 3),
    (9, 5, (4,), {4: "Y"}, 4),
])
def test_echo_matches_the_dense_unitary(n, steps, sites, obs, seed):
    qc = echo_circuit(n, steps, sites, 0.15, seed)
    ref = dense_echo(qc, obs)
    assert abs(echo_value(qc, obs) - ref) < 1e-10
    # the network as built, before simplification, contracted by cotengra directly
    raw = echo_network(qc, obs).contract_reference()
    assert abs(complex(raw) - ref) < 1e-10
    assert abs(echo_value(qc, obs, dtype="complex64") - ref) < 1e-4
    # the time-ordered sweep path gives the same value
    assert abs(echo_value(qc, obs, method="sweep") - ref) < 1e-10


@pytest.mark.parametrize("seed", range(4))
def test_echo_of_random_circuits_with_any_paulis(seed):
    """Not of the U^dag V U shape: random one-qubit unitaries and CZ / CX / RZZ."""
    rng = np.random.default_rng(100 + seed)
    n = 7
    qc = QuantumCircuit(n)
    for _ in range(6):
        for q in range(n):
            qc.u(*rng.uniform(-np.pi, np.pi, 3), q)
        for _ in range(3):
            a, b = rng.choice(n, 2, replace=False)
            [qc.cz, qc.cx, lambda x, y: qc.rzz(0.7, x, y)][rng.integers(3)](int(a), int(b))
    qc.global_phase = 0.3
    qubits = rng.choice(n, 3, replace=False)
    obs = {int(q): "XYZ"[rng.integers(3)] for q in qubits}
    assert abs(echo_value(qc, obs) - dense_echo(qc, obs)) < 1e-10


def test_trivial_echoes():
    """O on an idle qubit, O = I, W = I: f = 1; a CZ meeting its inverse leaves no gate."""
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.cz(0, 1)
    assert echo_value(qc, {2: "X"}) == pytest.approx(1.0, abs=1e-12)
    assert echo_value(qc, "III") == pytest.approx(1.0, abs=1e-12)
    assert echo_value(QuantumCircuit(2), "X1") == pytest.approx(1.0, abs=1e-12)
    u = QuantumCircuit(3)
    u.rx(0.4, 0)
    u.cz(0, 1)
    u.cz(1, 2)
    w = u.compose(u.inverse())
    assert echo_cone(w, "Z1").gates == 0
    assert echo_value(w, "Z1") == pytest.approx(1.0, abs=1e-12)


def test_the_reduction_keeps_only_the_cone():
    """Gates after which nothing reaches O cancel; so do gates before which nothing does;
    CZ commutes with Z and is dropped next to it."""
    qc = QuantumCircuit(5)
    qc.h(4)  # before anything reaches O's qubits: cancels (forward cone)
    qc.rx(0.3, 0)
    qc.cx(0, 1)
    qc.rx(0.2, 3)  # never meets the cone
    qc.cz(1, 2)  # diagonal next to Z1 at the end: commutes with the Heisenberg operator
    cone = echo_cone(qc, "Z1")
    assert cone.gates_in == 5
    assert cone.qubits == (0, 1)
    assert cone.two_qubit_gates == 1
    assert abs(echo_value(qc, "Z1") - dense_echo(qc, {1: "Z"})) < 1e-12


def test_observable_forms_and_bad_input():
    assert parse_observable("Z52 Z59 Z72", 156) == ((52, 59, 72), "ZZZ")
    assert parse_observable({3: "x", 1: "Z", 2: "I"}, 4) == ((1, 3), "ZX")
    assert parse_observable("XIZI", 4) == ((1, 3), "ZX")
    for bad, match in [("Z5", "qubits 0..3"), ("Q1", "cannot read observable token"),
                       ({1: "Z", 1.5: "X"}, "not an integer"), ({0: "W"}, "valid: I, X, Y, Z"),
                       (["Z0"], "cannot use an object of type list"),
                       ("Z1 X1", "names qubit 1 twice")]:
        with pytest.raises(InvalidInputError, match=match) as info:
            parse_observable(bad, 4)
        assert "\n" not in str(info.value)
    net = Network([("a",)], (), {"a": 2}, [np.ones(2, dtype=complex)])
    with pytest.raises(QsimdistError, match="needs a circuit"):
        echo_network(net, "Z0")
    with pytest.raises(InvalidInputError, match="valid: best, search, sweep"):
        echo_value(QuantumCircuit(1), "Z0", method="fast")
    with pytest.raises(QsimdistError, match="memory size"):
        echo_value(QuantumCircuit(1), "Z0", memory_limit="lots")


def test_qasm3_custom_sxdg_and_barriers_keep_numbering():
    """The tracker files' constructs in a small text: a declared register wider than the
    gates use, a file-defined ``sxdg``, barriers over every qubit."""
    from qiskit.circuit.library import SXdgGate

    text = """OPENQASM 3.0;
include "stdgates.inc";
gate sxdg _gate_q_0 {
  s _gate_q_0;
  h _gate_q_0;
  s _gate_q_0;
}
qubit[9] q;
rx(3*pi/8) q[5];
barrier q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8];
sxdg q[5];
cz q[5], q[7];
"""
    from qsimdist.frontends.qasm import qiskit_from_qasm
    from qsimdist.frontends.qiskit_circuit import from_qiskit

    gc = from_qiskit(qiskit_from_qasm(text))
    assert gc.n_qubits == 9
    assert {q for g in gc.gates for q in g.qubits} == {5, 7}
    ref = QuantumCircuit(1)
    ref.rx(3 * np.pi / 8, 0)
    ref.append(SXdgGate(), [0])
    m = np.eye(2, dtype=complex)
    for g in gc.gates:
        if g.qubits == (5,):
            m = g.matrix @ m
    want = Operator(ref).data
    phase = want[0, 0] / m[0, 0]
    assert abs(abs(phase) - 1) < 1e-12 and np.allclose(m * phase, want, atol=1e-12)


@pytest.fixture(scope="module")
def tracker_qc(shared_data):
    """The smallest tracker circuit as Qiskit reads it (about 10 s)."""
    from qsimdist.frontends.qasm import qiskit_from_qasm

    path = shared_data / TRACKER / SMALLEST
    return qiskit_from_qasm(path.read_text(), str(path))


def test_tracker_file_loads_as_it_is(shared_data):
    """qsimdist.frontends.load on the file as it is: 156 declared qubits, numbering kept,
    the README's qubit and CZ counts."""
    gc = load(shared_data / TRACKER / SMALLEST)
    assert isinstance(gc, GateCircuit) and gc.n_qubits == 156
    used = {q for g in gc.gates for q in g.qubits}
    assert len(used) == 49 and {52, 59, 72} <= used and max(used) < 156
    assert sum(1 for g in gc.gates if g.name == "cz") == 648


def test_small_instance_of_the_tracker_shape(tracker_qc):
    """The 49x648 circuit restricted to 10 qubits around O (two of them perturbed): still
    U^dag V U with U the Trotterised evolution; the echo on the 156-qubit numbering against
    the dense 10-qubit unitary."""
    keep = (48, 49, 50, 51, 52, 53, 54, 58, 71, 72)
    local = {q: j for j, q in enumerate(keep)}
    wide = QuantumCircuit(156)
    small = QuantumCircuit(len(keep))
    for inst in tracker_qc.data:
        qs = [tracker_qc.find_bit(q).index for q in inst.qubits]
        if inst.operation.name == "barrier" or not set(qs) <= set(keep):
            continue
        wide.append(inst.operation, qs)
        small.append(inst.operation, [local[q] for q in qs])
    assert small.count_ops().get("cz", 0) > 100
    ref = dense_echo(small, {local[52]: "Z", local[72]: "Z"})
    assert abs(ref - 1.0) > 1e-3  # the perturbation on 48 and 49 reaches O
    got = echo_value(wide, "Z52 Z59 Z72")  # Z59 on an idle qubit: Tr(Z Z) / 2 = 1
    assert abs(got - ref) < 1e-10
    plan, cone, net = echo_plan(wide, "Z52 Z72")
    assert plan.meta["echo_path"]["taken"] in ("search", "sweep")
    sweep = plan.meta["echo_path"]["sweep"]
    assert sweep["largest_elements"] <= 4 ** len(cone.qubits)
    assert cone.n_qubits == 156 and set(cone.qubits) <= set(keep)
    assert cone.gates < cone.gates_in
    assert net.num_tensors <= cone_network(cone).num_tensors


def test_greedy_slicing_and_slice_within_keep_the_value():
    """The coarse slicer reaches its target and the sliced plan gives the same f; too few
    allowed indices is refused in one line."""
    import math

    from qsimdist.engine.echo import greedy_slicing, slice_within, sweep_path
    from qsimdist.errors import PlanError
    from qsimdist.planner.plan import build_plan

    qc = echo_circuit(9, 3, (0, 4, 8), 0.15, 7)
    obs = {3: "Z", 5: "Z"}
    ref = dense_echo(qc, obs)
    cone = echo_cone(qc, obs)
    net = cone_network(cone)
    path = sweep_path(net, cone)
    whole = build_plan(net, path, (), "complex128")
    top = math.log2(whole.stats.max_intermediate)
    cut = greedy_slicing(net, path, top - 4)
    sliced = build_plan(net, path, cut, "complex128")
    assert sliced.stats.max_intermediate <= 2 ** (top - 4)
    assert abs(complex(sliced.execute()).real - ref) < 1e-10
    fitted = slice_within(net, path, whole.stats.peak_bytes // 8, "complex128")
    assert fitted.stats.peak_bytes <= whole.stats.peak_bytes // 8
    assert abs(complex(fitted.execute()).real - ref) < 1e-10
    with pytest.raises(PlanError, match="more than 1 sliced indices") as info:
        greedy_slicing(net, path, top - 6, max_indices=1)
    assert "\n" not in str(info.value)
