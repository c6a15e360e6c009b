"""Tests of the circuit frontends: OpenQASM 2/3 files, .qsim files, Qiskit and quimb objects.

References are independent of qsimdist: Qiskit's ``Statevector``, quimb's own
``Circuit.amplitude`` and, for .qsim, a small numpy state-vector simulator
written here from qsim's gate definitions.
"""

from __future__ import annotations

import cmath
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2, qasm3
from qiskit.circuit.library import UnitaryGate
from qiskit.quantum_info import Statevector, random_unitary

import qsimdist
from qsimdist import CircuitParseError, UnsupportedInstructionError
from qsimdist.frontends import load

TOL = 1e-10  # complex128 everywhere in this file


def all_bits(n: int) -> list[str]:
    return ["".join(p) for p in itertools.product("01", repeat=n)]


def qiskit_amps(circuit, sv: np.ndarray) -> np.ndarray:
    """qsimdist amplitudes of every bitstring in Qiskit order, one batched contraction."""
    n = int(round(math.log2(sv.size)))
    res = qsimdist.amplitudes(circuit, "*" * n, dtype="complex128")
    assert res.bitstrings == all_bits(n)  # leftmost * most significant = Statevector index
    return np.asarray(res.amplitudes)


def assert_state(circuit, sv: np.ndarray) -> None:
    np.testing.assert_allclose(qiskit_amps(circuit, sv), sv, atol=TOL)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def rich_circuit() -> QuantumCircuit:
    """Uses gates Qiskit writes as u, sx, rzz, custom gate definitions, and a 3-qubit gate."""
    sub = QuantumCircuit(2, name="entangle")
    sub.h(0)
    sub.cx(0, 1)
    sub.rz(0.7, 1)
    sub.sx(0)
    qc = QuantumCircuit(4)
    qc.u(0.1, 0.2, 0.3, 0)
    qc.sx(1)
    qc.h(2)
    qc.rzz(0.5, 1, 2)
    qc.append(sub.to_gate(), [3, 1])
    qc.ry(0.3, 3)
    qc.cswap(0, 1, 3)
    qc.rxx(0.8, 0, 2)
    qc.cp(0.45, 2, 0)
    qc.sdg(3)
    qc.crx(1.2, 3, 0)
    return qc


# ---------------------------------------------------------------- OpenQASM 2/3
def test_qasm2_written_by_qiskit(tmp_path):
    qc = rich_circuit()
    text = qasm2.dumps(qc)
    # the file really exercises the non-qelib1 gates and a custom definition
    assert "sx " in text and "rzz(" in text and "gate entangle" in text
    assert any(line.startswith("u(") for line in text.splitlines())
    path = write(tmp_path / "rich.qasm", text)
    loaded = qasm2.load(str(path), custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    sv_loaded = Statevector(loaded).data
    assert_state(path, sv_loaded)
    # and the round trip is exact, so the original circuit agrees too
    assert_state(path, Statevector(qc).data)


def test_qasm2_suffix_variants(tmp_path):
    qc = rich_circuit()
    sv = Statevector(qc).data
    assert_state(write(tmp_path / "rich.qasm2", qasm2.dumps(qc)), sv)
    assert_state(write(tmp_path / "RICH.QASM", qasm2.dumps(qc)), sv)


def test_qasm3_written_by_qiskit(tmp_path):
    qc = rich_circuit()
    text = qasm3.dumps(qc)
    assert text.lstrip().startswith("OPENQASM 3")
    path = write(tmp_path / "rich.qasm3", text)
    loaded = qasm3.load(str(path))
    assert_state(path, Statevector(loaded).data)
    assert_state(path, Statevector(qc).data)


def test_qasm3_in_dot_qasm_file_is_read_by_header(tmp_path):
    qc = rich_circuit()
    path = write(tmp_path / "v3.qasm", qasm3.dumps(qc))
    assert_state(path, Statevector(qc).data)


def test_qasm2_unitary_gate_and_measure(tmp_path):
    qc = QuantumCircuit(3, 3)
    qc.h(0)
    qc.append(UnitaryGate(random_unitary(4, seed=11)), [2, 0])
    qc.cx(0, 1)
    qc.barrier()
    qc.measure([0, 1, 2], [0, 1, 2])
    path = write(tmp_path / "u.qasm", qasm2.dumps(qc))
    loaded = qasm2.load(str(path), custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    sv = Statevector(loaded.remove_final_measurements(inplace=False)).data
    assert_state(path, sv)


def test_qasm_comments_before_header(tmp_path):
    text2 = (
        "// written by hand\n// OPENQASM 3.0; (this is a comment, not the header)\n\n"
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\ncx q[0],q[1];\nry(0.3) q[1];\n'
    )
    text3 = (
        "// a comment\n/* a block\n   OPENQASM 2.0;\n   comment */\n"
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nh q[0];\ncx q[0], q[1];\nry(0.3) q[1];\n'
    )
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    qc.ry(0.3, 1)
    sv = Statevector(qc).data
    assert_state(write(tmp_path / "c2.qasm", text2), sv)
    assert_state(write(tmp_path / "c3.qasm3", text3), sv)


@pytest.mark.parametrize(
    "text",
    [
        'include "qelib1.inc";\nqreg q[2];\nh q[0];\n',
        '// OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\n',
        "",
    ],
    ids=["no-header", "header-only-in-comment", "empty"],
)
def test_qasm_without_header_is_refused(tmp_path, text):
    path = write(tmp_path / "nohdr.qasm", text)
    with pytest.raises(CircuitParseError) as info:
        qsimdist.amplitudes(path, "00")
    msg = str(info.value)
    assert "nohdr.qasm" in msg
    assert "OPENQASM" in msg and "header" in msg
    assert isinstance(info.value, ValueError)


def test_qasm_unsupported_version(tmp_path):
    path = write(tmp_path / "v4.qasm", "OPENQASM 4.0;\nqreg q[1];\n")
    with pytest.raises(CircuitParseError, match=r"version 4.*2, 3"):
        load(path)


def test_qasm2_parse_error_names_line(tmp_path):
    path = write(
        tmp_path / "bad.qasm",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\nnotagate q[1];\n',
    )
    with pytest.raises(CircuitParseError) as info:
        load(path)
    assert "line 5" in str(info.value)
    assert "notagate" in str(info.value)


# ------------------------------------------------------------------ .qsim files
S2 = math.sqrt(2)
QSIM_REF_1Q = {
    "h": np.array([[1, 1], [1, -1]]) / S2,
    "x_1_2": np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2,
    "y_1_2": np.array([[1 + 1j, -1 - 1j], [1 + 1j, 1 + 1j]]) / 2,
    "hz_1_2": np.array([[1 + 1j, -1j * S2], [S2, 1 + 1j]]) / 2,
}


def ref_rz(p: float) -> np.ndarray:
    return np.diag([cmath.exp(-0.5j * p), cmath.exp(0.5j * p)])


def ref_fs(t: float, p: float) -> np.ndarray:
    c, s = math.cos(t), math.sin(t)
    return np.array(
        [[1, 0, 0, 0], [0, c, -1j * s, 0], [0, -1j * s, c, 0], [0, 0, 0, cmath.exp(-1j * p)]]
    )


REF_CZ = np.diag([1, 1, 1, -1]).astype(complex)


def ref_qsim_state(n: int, gates: list[tuple[str, tuple[int, ...], tuple[float, ...]]]) -> np.ndarray:
    """State vector, index big-endian with qubit 0 most significant (qsim's natural order)."""
    psi = np.zeros((2,) * n, dtype=complex)  # axis i is qubit i
    psi[(0,) * n] = 1
    for name, qubits, params in gates:
        if name in QSIM_REF_1Q:
            m = QSIM_REF_1Q[name]
        elif name == "rz":
            m = ref_rz(*params)
        elif name == "fs":
            m = ref_fs(*params)
        elif name == "cz":
            m = REF_CZ
        else:
            raise AssertionError(name)
        k = len(qubits)
        m = m.reshape((2,) * (2 * k))
        # contract the gate's input axes with the state's qubit axes; outputs come first
        psi = np.tensordot(m, psi, axes=(list(range(k, 2 * k)), list(qubits)))
        psi = np.moveaxis(psi, list(range(k)), list(qubits))
    return psi.reshape(-1)


QSIM_GATES = [
    ("h", (0,), ()),
    ("h", (1,), ()),
    ("h", (2,), ()),
    ("x_1_2", (0,), ()),
    ("y_1_2", (1,), ()),
    ("hz_1_2", (2,), ()),
    ("fs", (0, 1), (0.3, 0.7)),
    ("rz", (2,), (0.4,)),
    ("cz", (1, 2), ()),
    ("fs", (2, 0), (1.1, -0.5)),
    ("hz_1_2", (0,), ()),
    ("x_1_2", (1,), ()),
    ("y_1_2", (2,), ()),
    ("fs", (1, 2), (0.25, 0.9)),
    ("cz", (0, 2), ()),
    ("rz", (0,), (-1.3,)),
    ("hz_1_2", (1,), ()),
]

QSIM_TEXT = """3
# a hand-written qsim circuit
0 h 0
0 h 1
0 h 2

1 x_1_2 0
1 y_1_2 1
1 hz_1_2 2
2 fs 0 1 0.3 0.7   # fSim(theta, phi)
3 rz 2 0.4
4 cz 1 2
5 fs 2 0 1.1 -0.5
6 hz_1_2 0
6 x_1_2 1
6 y_1_2 2
7 fs 1 2 0.25 0.9
8 cz 0 2
9 rz 0 -1.3
9 hz_1_2 1
10 m 0 1 2
"""


def test_qsim_reference_simulator_is_sane():
    """The reference itself: unitary gates, normalised state, fs/cz are symmetric-aware."""
    for m in [*QSIM_REF_1Q.values(), ref_rz(0.3), ref_fs(0.4, 0.2)]:
        np.testing.assert_allclose(m @ m.conj().T, np.eye(len(m)), atol=1e-12)
    psi = ref_qsim_state(3, QSIM_GATES)
    assert abs(np.linalg.norm(psi) - 1) < 1e-12
    # |100> (qubit 0 set) is index 4 in natural order
    x = ref_qsim_state(3, [("x_1_2", (0,), ()), ("x_1_2", (0,), ())])
    np.testing.assert_allclose(np.abs(x), [0, 0, 0, 0, 1, 0, 0, 0], atol=1e-12)


def test_qsim_file_matches_numpy_reference(tmp_path):
    path = write(tmp_path / "hand.qsim", QSIM_TEXT)
    ref = ref_qsim_state(3, QSIM_GATES)
    bits = all_bits(3)  # natural order: character i = qubit i, qubit 0 most significant
    res = qsimdist.amplitudes(path, bits, order="natural", dtype="complex128")
    assert res.bitstrings == bits
    np.testing.assert_allclose(res.amplitudes, ref, atol=TOL)
    batched = qsimdist.amplitudes(path, "***", order="natural", dtype="complex128")
    assert batched.bitstrings == bits
    np.testing.assert_allclose(batched.amplitudes, ref, atol=TOL)


def test_qsim_file_in_qiskit_order(tmp_path):
    path = write(tmp_path / "hand.qsim", QSIM_TEXT)
    ref = ref_qsim_state(3, QSIM_GATES)
    for b in ["001", "110", "100"]:
        got = qsimdist.amplitude(path, b, order="qiskit", dtype="complex128")
        # Qiskit order: rightmost character is qubit 0 -> natural string reversed
        assert abs(got - ref[int(b[::-1], 2)]) <= TOL


def test_qsim_load_gate_list(tmp_path):
    gc = load(write(tmp_path / "hand.qsim", QSIM_TEXT))
    assert gc.n_qubits == 3
    assert [g.name for g in gc.gates] == [g[0] for g in QSIM_GATES]  # 'm' is skipped
    assert [g.qubits for g in gc.gates] == [g[1] for g in QSIM_GATES]


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("3\n0 h 0\n0 cz 0\n", 3, ["cz", "2 qubit"]),
        ("3\n0 h 0\n\n# c\n1 rz 1\n", 5, ["rz", "parameter"]),
        ("3\n0 h 0\n0 fs 0 1 0.2\n", 3, ["fs"]),
        ("3\n0 h 0\n1 sqrt_q 0\n", 3, ["sqrt_q", "x_1_2", "fs"]),
        ("3\n0 h 0\n0 h 1\n1 cz 1 3\n", 4, ["3", "0..2"]),
        ("3\n0 h 0\n1 cz 1 1\n", 3, ["distinct"]),
        ("3\n0 h -1\n", 2, ["-1"]),
        ("3\n0 rz 0 abc\n", 2, ["abc"]),
        ("3\n0\n", 2, []),
        ("three\n0 h 0\n", 1, ["three"]),
    ],
    ids=["arity-2q", "missing-param", "fs-param", "unknown-gate", "out-of-range", "repeated",
         "negative", "bad-param", "no-gate", "bad-count"],
)
def test_qsim_errors_name_the_line(tmp_path, text, line, words):
    path = write(tmp_path / "bad.qsim", text)
    with pytest.raises(CircuitParseError) as info:
        load(path)
    msg = str(info.value)
    assert "bad.qsim" in msg
    assert f"line {line}:" in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def test_qsim_empty_file(tmp_path):
    with pytest.raises(CircuitParseError, match="empty"):
        load(write(tmp_path / "empty.qsim", "\n# only a comment\n"))


# ------------------------------------------------------------------------ quimb
def test_quimb_circuit_matches_quimb_amplitudes():
    import quimb.tensor as qtn

    circ = qtn.Circuit(4)
    circ.apply_gate("H", 0)
    circ.apply_gate("CNOT", 0, 1)
    circ.apply_gate("RZ", 0.3, 1)
    circ.apply_gate("U3", 0.1, 0.2, 0.3, 2)
    circ.apply_gate("CNOT", 2, 3)
    circ.apply_gate("H", 3)
    circ.apply_gate("CNOT", 3, 0)
    circ.apply_gate("U3", 0.5, -0.2, 0.9, 1)
    circ.apply_gate("RZ", -0.8, 3)
    circ.apply_gate("CNOT", 1, 2)
    bits = all_bits(4)
    ref = np.array([complex(circ.amplitude(b)) for b in bits])
    assert abs(np.linalg.norm(ref) - 1) < 1e-10
    res = qsimdist.amplitudes(circ, "****", order="natural", dtype="complex128")
    assert res.bitstrings == bits
    np.testing.assert_allclose(res.amplitudes, ref, atol=TOL)
    for b in ["0110", "1011"]:
        got = qsimdist.amplitude(circ, b, order="natural", dtype="complex128")
        assert abs(got - complex(circ.amplitude(b))) <= TOL


# ----------------------------------------------------------------------- Qiskit
def test_qiskit_global_phase_is_included():
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.cx(0, 1)
    qc.ry(0.6, 2)
    qc.cx(2, 0)
    no_phase = Statevector(qc).data
    qc.global_phase = 1.234
    sv = Statevector(qc).data
    got = qiskit_amps(qc, sv)
    np.testing.assert_allclose(got, sv, atol=TOL)
    k = int(np.argmax(np.abs(no_phase)))
    assert abs(got[k] / no_phase[k] - cmath.exp(1.234j)) < 1e-10


def test_qiskit_barriers_and_delays_are_ignored():
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.barrier()
    qc.delay(100, 1)
    qc.cx(0, 1)
    qc.barrier([1, 2])
    qc.delay(5, 2, unit="us")
    qc.rx(0.4, 2)
    qc.cx(1, 2)
    ref = QuantumCircuit(3)
    ref.h(0)
    ref.cx(0, 1)
    ref.rx(0.4, 2)
    ref.cx(1, 2)
    assert_state(qc, Statevector(ref).data)
    assert len(load(qc).gates) == 4


def test_qiskit_final_measurements_are_allowed():
    qc = QuantumCircuit(3, 3)
    qc.h(0)
    qc.cx(0, 1)
    qc.ry(0.9, 2)
    sv = Statevector(qc).data
    qc.measure([0, 1, 2], [0, 1, 2])
    assert_state(qc, sv)

    qc2 = QuantumCircuit(3)
    qc2.h(0)
    qc2.cx(0, 2)
    qc2.rz(0.3, 2)
    sv2 = Statevector(qc2).data
    qc2.measure_all()
    assert_state(qc2, sv2)


def test_qiskit_measure_then_gate_on_other_qubit_is_allowed():
    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.measure(0, 0)
    qc.h(1)
    ref = QuantumCircuit(2)
    ref.h(0)
    ref.h(1)
    assert_state(qc, Statevector(ref).data)


def test_qiskit_custom_gate_and_unitary_gate():
    sub = QuantumCircuit(3, name="blk")
    sub.h(0)
    sub.cx(0, 2)
    sub.ry(0.35, 1)
    sub.ccx(0, 1, 2)
    sub.rz(0.8, 2)
    qc = QuantumCircuit(5)
    qc.h(range(5))
    qc.append(sub.to_gate(), [4, 0, 2])  # non-adjacent, out of order
    qc.append(UnitaryGate(random_unitary(4, seed=3)), [3, 1])
    qc.append(UnitaryGate(random_unitary(8, seed=4), label="u8"), [2, 4, 0])
    qc.cx(1, 4)
    qc.append(sub.to_gate(), [1, 3, 0])
    assert_state(qc, Statevector(qc).data)


def test_qiskit_nested_custom_gate_with_phase():
    inner = QuantumCircuit(2, name="inner", global_phase=0.4)
    inner.cx(1, 0)
    inner.s(1)
    outer = QuantumCircuit(3, name="outer")
    outer.h(2)
    outer.append(inner.to_gate(), [2, 0])
    outer.t(1)
    qc = QuantumCircuit(3)
    qc.x(1)
    qc.append(outer.to_gate(), [1, 2, 0])
    qc.append(outer.to_gate().inverse(), [0, 1, 2])
    qc.append(outer.to_gate(), [0, 1, 2])
    assert_state(qc, Statevector(qc).data)


def test_qiskit_bound_parameters_work():
    from qiskit.circuit import Parameter

    a, b = Parameter("a"), Parameter("b")
    qc = QuantumCircuit(2)
    qc.rx(a, 0)
    qc.cx(0, 1)
    qc.rzz(b, 0, 1)
    qc.global_phase = a / 2
    bound = qc.assign_parameters({a: 0.7, b: -0.3})
    assert_state(bound, Statevector(bound).data)


@pytest.mark.parametrize("kind", ["mid-measure", "reset", "if_test", "param", "initialize"])
def test_qiskit_unsupported_instructions(kind):
    from qiskit.circuit import Parameter

    qc = QuantumCircuit(2, 1)
    qc.h(0)
    if kind == "mid-measure":
        qc.measure(1, 0)
        qc.cx(0, 1)
        words = ["'cx'", "position 2", "measurement"]
    elif kind == "reset":
        qc.reset(0)  # after use (a reset on a fresh qubit is the identity, accepted)
        words = ["'reset'", "position 1"]
    elif kind == "if_test":
        qc.measure(0, 0)
        with qc.if_test((qc.clbits[0], 1)):
            qc.x(1)
        words = ["position 2", "classically controlled"]
    elif kind == "param":
        qc.ry(Parameter("phi"), 1)
        words = ["phi", "unbound"]
    else:
        qc.initialize([0, 1], [1])
        words = ["'initialize'", "position 1"]
    with pytest.raises(UnsupportedInstructionError) as info:
        load(qc)
    assert isinstance(info.value, NotImplementedError)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# ----------------------------------------------------------------- load() itself
def test_load_rejects_unknown_objects():
    with pytest.raises(qsimdist.InvalidInputError) as info:
        load(42)
    msg = str(info.value)
    assert "int" in msg and "QuantumCircuit" in msg and ".qasm" in msg


def test_load_unknown_suffix_lists_valid(tmp_path):
    path = write(tmp_path / "c.cirq", "whatever")
    with pytest.raises(CircuitParseError) as info:
        load(path)
    for s in (".qasm", ".qasm3", ".qsim", ".json"):
        assert s in str(info.value)


def test_defined_gate_matrices_are_composed_like_qiskits():
    """OpenQASM 2 ``gate`` bodies (nested, with parameters and a controlled phase) give
    the matrix Qiskit's Operator gives, and the cache keeps one per parameter set."""
    import qiskit.qasm2 as qasm2
    from qiskit.quantum_info import Operator

    from qsimdist.frontends.qiskit_circuit import from_qiskit
    from qsimdist.frontends.qiskit_instructions import composed_matrix

    text = (
        'OPENQASM 2.0; include "qelib1.inc";\n'
        "gate inner(a) x, y { rz(a) x; cx x, y; u3(a, 0.3, -a) y; }\n"
        "gate outer(a, b) x, y, z { inner(a) z, x; h y; barrier x, y; inner(b) y, z; "
        "cu1(a+b) x, z; }\n"
        "qreg q[3]; outer(0.4, -1.1) q[2], q[0], q[1]; outer(0.2, 0.3) q[0], q[1], q[2];\n"
        "outer(0.4, -1.1) q[1], q[2], q[0];\n"
    )
    qc = qasm2.loads(text)
    for inst in qc.data:
        m = composed_matrix(inst.operation)
        ref = Operator(inst.operation).data
        assert m is not None and np.abs(m - ref).max() < 1e-12
        assert np.abs(m - np.eye(8)).max() > 0.1  # not trivially the identity
    assert len(from_qiskit(qc).gates) == 3
    assert_state(qc, Statevector(qc).data)  # through qsimdist's own amplitudes
