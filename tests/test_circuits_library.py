"""Tests of the bundled circuit library in ``circuits/`` and of its generator.

The qsim files are checked with a small statevector simulator written here,
independently of the one in ``circuits/generate.py``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import qiskit.qasm2
import qiskit.qasm3
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator, Statevector

CIRCUITS = Path(__file__).resolve().parents[1] / "circuits"
MANIFEST: list[dict[str, Any]] = json.loads((CIRCUITS / "manifest.json").read_text(encoding="utf-8"))
BY_FILE = {entry["file"]: entry for entry in MANIFEST}
QASM_FILES = [e["file"] for e in MANIFEST if e["format"] in ("qasm2", "qasm3")]
QASM2_FILES = [e["file"] for e in MANIFEST if e["format"] == "qasm2"]
RQC_STEMS = [e["file"].removesuffix(".qsim") for e in MANIFEST if e["format"] == "qsim"]
CIRCUIT_SUFFIXES = {".qasm": "qasm2", ".qasm3": "qasm3", ".qsim": "qsim"}

S2 = math.sqrt(2)
QSIM_1Q = {
    "x_1_2": np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2,
    "y_1_2": np.array([[1 + 1j, -1 - 1j], [1 + 1j, 1 + 1j]]) / 2,
    "hz_1_2": np.array([[1 + 1j, -1j * S2], [S2, 1 + 1j]]) / 2,
}
QASM_TO_QSIM = {"sqrt_x": "x_1_2", "sqrt_y": "y_1_2", "sqrt_w": "hz_1_2", "fsim": "fs"}
QsimGate = tuple[int, str, tuple[int, ...], tuple[float, ...]]


def fsim(theta: float, phi: float) -> np.ndarray:
    """qsim's ``fs`` gate; basis order |q1 q2> with the first qubit as high bit."""
    c, s = math.cos(theta), -1j * math.sin(theta)
    return np.array([[1, 0, 0, 0], [0, c, s, 0], [0, s, c, 0], [0, 0, 0, np.exp(-1j * phi)]])


def parse_qsim(text: str) -> tuple[int, list[QsimGate]]:
    """Parse qsim text: returns the qubit count and ``(moment, name, qubits, params)`` per gate."""
    first, *rest = text.splitlines()
    gates = []
    for line in rest:
        moment, name, *fields = line.split()
        n_qubits = 2 if name == "fs" else 1
        qubits = tuple(int(f) for f in fields[:n_qubits])
        gates.append((int(moment), name, qubits, tuple(float(f) for f in fields[n_qubits:])))
    return int(first), gates


def simulate_qsim(text: str) -> np.ndarray:
    """Simulate qsim text from |0...0>; returns a little-endian (Qiskit-ordered) vector."""
    n, gates = parse_qsim(text)
    psi = np.zeros((2,) * n, dtype=complex)  # axis i <-> qubit i
    psi[(0,) * n] = 1
    for _, name, qubits, params in gates:
        matrix = fsim(*params) if name == "fs" else QSIM_1Q[name]
        front = np.moveaxis(psi, qubits, range(len(qubits)))
        shape = front.shape
        front = (matrix @ front.reshape(2 ** len(qubits), -1)).reshape(shape)
        psi = np.moveaxis(front, range(len(qubits)), qubits)
    return psi.transpose(range(n - 1, -1, -1)).reshape(-1)


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """|<a|b>| for normalised states; 1 iff they agree up to a global phase."""
    return float(abs(np.vdot(a, b)))


def coupler_pairs(rows: int, cols: int, pattern: str) -> set[tuple[int, int]]:
    """Expected couplers: A/B horizontal, C/D vertical, split by the parity of r + c."""
    pairs = set()
    for r in range(rows):
        for c in range(cols):
            q = r * cols + c
            if pattern in "AB" and c + 1 < cols and (r + c) % 2 == "AB".index(pattern):
                pairs.add((q, q + 1))
            if pattern in "CD" and r + 1 < rows and (r + c) % 2 == "CD".index(pattern):
                pairs.add((q, q + cols))
    return pairs


@functools.cache
def load_qasm(file: str, legacy: bool = True) -> QuantumCircuit:
    """Load a bundled QASM file; ``legacy=False`` uses only the original qelib1.inc."""
    path = CIRCUITS / file
    if file.endswith(".qasm3"):
        return qiskit.qasm3.load(str(path))
    custom = qiskit.qasm2.LEGACY_CUSTOM_INSTRUCTIONS if legacy else ()
    return qiskit.qasm2.load(path, custom_instructions=custom)


@functools.cache
def qasm_state(file: str) -> np.ndarray:
    """Qiskit statevector of a bundled QASM file (little-endian vector).

    Each instruction is applied as one dense ``Operator``; ``Statevector(circuit)``
    would instead apply every gate of the custom definitions to the full state,
    which is several times slower for the QASM 3 circuits.
    """
    circuit = load_qasm(file)
    state = Statevector.from_int(0, 2**circuit.num_qubits)
    for inst in circuit.data:
        state = state.evolve(Operator(inst.operation), [circuit.find_bit(q).index for q in inst.qubits])
    return state.data * np.exp(1j * float(circuit.global_phase))


def equal_up_to_phase(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Whether two matrices agree up to one global phase (to 1e-12)."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    phase = np.vdot(e, a) / np.vdot(e, e)
    return bool(abs(abs(phase) - 1) < 1e-12 and np.allclose(a, phase * e, rtol=0, atol=1e-12))


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    """``circuits/generate.py`` imported as a module."""
    spec = importlib.util.spec_from_file_location("circuits_generate", CIRCUITS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_regeneration_is_deterministic(generator: ModuleType, tmp_path: Path) -> None:
    """Regenerating gives byte-identical circuit files and the same manifest."""
    generator.generate(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*BY_FILE, "manifest.json"])
    for file in BY_FILE:
        assert (tmp_path / file).read_bytes() == (CIRCUITS / file).read_bytes(), file
    # The reference amplitudes are floating-point results whose last bits may
    # depend on the platform, so the manifest is compared with a tolerance.
    written = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert len(written) == len(MANIFEST)
    for new, old in zip(written, MANIFEST):
        new_ref, old_ref = new.pop("reference"), old["reference"]
        assert new == {key: value for key, value in old.items() if key != "reference"}
        assert new_ref["bitstring"] == old_ref["bitstring"]
        new_amplitude = complex(new_ref["re"], new_ref["im"])
        assert new_amplitude == pytest.approx(complex(old_ref["re"], old_ref["im"]), rel=1e-12, abs=0)


def test_manifest_describes_every_file() -> None:
    """Every circuit file has exactly one well-formed entry, and the library stays small."""
    on_disk = sorted(p.name for p in CIRCUITS.iterdir() if p.suffix in CIRCUIT_SUFFIXES)
    assert on_disk == sorted(BY_FILE)
    assert len(BY_FILE) == len(MANIFEST)
    for entry in MANIFEST:
        n = entry["n_qubits"]
        assert entry["format"] == CIRCUIT_SUFFIXES[Path(entry["file"]).suffix]
        assert entry["source"] == "generated by circuits/generate.py"
        assert entry["bitstring_order"] == ("natural" if entry["format"] == "qsim" else "qiskit")
        assert entry["family"] in ("ghz", "qft", "rqc")
        assert (entry["seed"] is None) == (entry["family"] == "ghz")
        if entry["family"] == "rqc":
            rows, cols = entry["grid"]
            assert rows * cols == n
            assert entry["depth"] == 2 * entry["cycles"] + 1
        ref = entry["reference"]
        assert len(ref["bitstring"]) == n and set(ref["bitstring"]) <= {"0", "1"}
        # The reference is the most probable outcome, so at least as likely as average.
        assert abs(complex(ref["re"], ref["im"])) ** 2 >= 2.0**-n * (1 - 1e-9)
    total = sum(p.stat().st_size for p in CIRCUITS.iterdir() if p.is_file())
    assert total < 500_000


@pytest.mark.parametrize("file", QASM_FILES)
def test_qasm_reproduces_reference_amplitude(file: str) -> None:
    """Each QASM file loads with Qiskit and reproduces the manifest amplitude."""
    entry = BY_FILE[file]
    circuit = load_qasm(file)
    assert circuit.num_qubits == entry["n_qubits"]
    assert circuit.depth() == entry["depth"]
    ref = entry["reference"]
    amplitude = qasm_state(file)[int(ref["bitstring"], 2)]
    assert amplitude == pytest.approx(complex(ref["re"], ref["im"]), rel=1e-10, abs=0)


@pytest.mark.parametrize("file", QASM2_FILES)
def test_qasm2_and_qasm3_agree(file: str) -> None:
    """The QASM 2 and QASM 3 versions of a circuit give the same statevector."""
    np.testing.assert_allclose(qasm_state(file + "3"), qasm_state(file), rtol=0, atol=1e-10)


@pytest.mark.parametrize("file", QASM2_FILES)
def test_qasm2_needs_only_original_qelib1(file: str) -> None:
    """Without Qiskit's legacy gates (rz is then qelib1's u1) every gate is the same up to phase."""
    legacy, plain = load_qasm(file), load_qasm(file, legacy=False)
    assert len(legacy.data) == len(plain.data)
    for a, b in zip(legacy.data, plain.data):
        assert a.operation.name == b.operation.name
        assert [legacy.find_bit(q).index for q in a.qubits] == [plain.find_bit(q).index for q in b.qubits]
        assert equal_up_to_phase(Operator(b.operation).data, Operator(a.operation).data), a.operation.name


@pytest.mark.parametrize("stem", RQC_STEMS)
def test_qsim_matches_qasm(stem: str) -> None:
    """The qsim file gives the QASM state up to one global phase and the manifest amplitude."""
    text = (CIRCUITS / f"{stem}.qsim").read_text(encoding="utf-8")
    state = simulate_qsim(text)
    assert overlap(state, qasm_state(f"{stem}.qasm")) == pytest.approx(1, abs=1e-10)
    ref = BY_FILE[f"{stem}.qsim"]["reference"]
    assert ref["bitstring"] == BY_FILE[f"{stem}.qasm"]["reference"]["bitstring"][::-1]
    amplitude = state[int(ref["bitstring"][::-1], 2)]
    assert amplitude == pytest.approx(complex(ref["re"], ref["im"]), rel=1e-10, abs=0)


def test_qsim_comparison_detects_a_changed_gate() -> None:
    """Guard for the test above: changing one gate breaks the agreement."""
    stem = RQC_STEMS[0]
    text = (CIRCUITS / f"{stem}.qsim").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if " x_1_2 " in line)
    changed = text.replace(line + "\n", line.replace("x_1_2", "y_1_2") + "\n", 1)
    assert changed != text
    assert overlap(simulate_qsim(changed), qasm_state(f"{stem}.qasm")) < 0.99


@pytest.mark.parametrize("stem", RQC_STEMS)
def test_rqc_structure(stem: str) -> None:
    """Layers alternate as specified and the QASM file holds the same gate sequence."""
    entry = BY_FILE[f"{stem}.qsim"]
    rows, cols = entry["grid"]
    n, gates = parse_qsim((CIRCUITS / f"{stem}.qsim").read_text(encoding="utf-8"))
    assert n == rows * cols
    assert [g[0] for g in gates] == sorted(g[0] for g in gates)
    moments: dict[int, list[QsimGate]] = {}
    for gate in gates:
        moments.setdefault(gate[0], []).append(gate)
    assert sorted(moments) == list(range(2 * entry["cycles"] + 1))
    previous: dict[int, str] = {}
    angles: dict[tuple[int, ...], tuple[float, ...]] = {}
    for index, layer in sorted(moments.items()):
        if index % 2 == 0:
            assert sorted(q for _, _, (q,), _ in layer) == list(range(n))
            for _, name, (q,), params in layer:
                assert name in QSIM_1Q and not params
                assert previous.get(q) != name, f"moment {index}: {name} repeated on qubit {q}"
                previous[q] = name
        else:
            pattern = "ABCDCDAB"[(index // 2) % 8]
            assert all(name == "fs" for _, name, _, _ in layer)
            assert {qubits for _, _, qubits, _ in layer} == coupler_pairs(rows, cols, pattern)
            for _, _, qubits, (theta, phi) in layer:
                assert abs(theta - math.pi / 2) <= 0.05 and abs(phi - math.pi / 6) <= 0.05
                assert angles.setdefault(qubits, (theta, phi)) == (theta, phi)
    assert len(set(angles.values())) == len(angles)  # jittered per coupler
    circuit = load_qasm(f"{stem}.qasm")
    from_qasm = [
        (
            QASM_TO_QSIM[inst.operation.name],
            tuple(circuit.find_bit(q).index for q in inst.qubits),
            tuple(float(p) for p in inst.operation.params),
        )
        for inst in circuit.data
    ]
    assert from_qasm == [(name, qubits, params) for _, name, qubits, params in gates]


@pytest.mark.parametrize(
    ("file", "legacy"),
    [(f"{RQC_STEMS[0]}.qasm", True), (f"{RQC_STEMS[0]}.qasm", False), (f"{RQC_STEMS[0]}.qasm3", True)],
)
def test_qasm_gate_definitions_match_qsim(file: str, legacy: bool) -> None:
    """sqrt_x/sqrt_y/sqrt_w/fsim equal qsim's gates up to a global phase."""
    seen = set()
    swap = np.eye(4)[[0, 2, 1, 3]]
    for inst in load_qasm(file, legacy).data:
        op = inst.operation
        if op.name == "fsim":
            # Qiskit is little-endian (first qubit = low bit): reorder qsim's basis.
            expected = swap @ fsim(*map(float, op.params)) @ swap
        else:
            expected = QSIM_1Q[QASM_TO_QSIM[op.name]]
        assert equal_up_to_phase(Operator(op).data, expected), op.name
        seen.add(op.name)
    assert seen == set(QASM_TO_QSIM)


@pytest.mark.parametrize("file", [f for f in QASM_FILES if BY_FILE[f]["family"] == "ghz"])
def test_ghz_state(file: str) -> None:
    """GHZ files prepare (|0...0> + |1...1>) / sqrt(2)."""
    expected = np.zeros(2 ** BY_FILE[file]["n_qubits"], dtype=complex)
    expected[[0, -1]] = 1 / S2
    np.testing.assert_allclose(qasm_state(file), expected, atol=1e-12)


@pytest.mark.parametrize("file", [f for f in QASM_FILES if BY_FILE[f]["family"] == "qft"])
def test_qft_state(file: str) -> None:
    """QFT files prepare sum_y exp(2 pi i x y / N) |y> / sqrt(N) for some x != 0."""
    state = qasm_state(file)
    size = len(state)
    x = round(np.angle(state[1] / state[0]) * size / (2 * math.pi)) % size
    assert x != 0
    expected = np.exp(2j * math.pi * x * np.arange(size) / size) / math.sqrt(size)
    np.testing.assert_allclose(state, expected * state[0] / abs(state[0]), atol=1e-10)
