"""Lattice-dynamics generators (qsimdist.lattice), their bundled files and saved benchmark plans.

References are independent: Qiskit circuits built here from plain ``rzz``/``rx``
gates and simulated by ``Statevector``; lattice edges checked against
closed-form counts, geometric neighbour rules and Euler's formula.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

import qsimdist
from qsimdist.errors import InvalidInputError, QsimdistError
from qsimdist.lattice import (
    DEFAULT_THETA_H,
    DEFAULT_THETA_J,
    make_lattice,
    tfim_gate_circuit,
    tfim_network,
    tfim_qiskit_circuit,
)

ROOT = Path(__file__).resolve().parents[1]
LATTICE_DIR = ROOT / "circuits" / "lattice"
PLANS = ROOT / "benchmarks" / "plans"


def reference_state(lat, steps: int, theta_j: float, theta_h: float) -> np.ndarray:
    """Statevector of the Trotter circuit built from plain Qiskit gates on ``lat``'s edges."""
    from qiskit import QuantumCircuit
    from qiskit.quantum_info import Statevector

    qc = QuantumCircuit(lat.n_sites)
    for _ in range(steps):
        for a, b in lat.edges:
            qc.rzz(theta_j, a, b)
        for q in range(lat.n_sites):
            qc.rx(theta_h, q)
    return Statevector(qc).data


# ------------------------------------------------------------------ lattices


def expected_edges(kind: str, lx: int, ly: int) -> set[tuple[int, int]]:
    """Edges from the geometric neighbour rule of each lattice."""
    steps = {"rectangular": [(1, 0), (0, 1)], "triangular": [(1, 0), (0, 1), (1, 1)],
             "hexagonal": [(1, 0), (0, 1)]}[kind]
    out = set()
    for y in range(ly):
        for x in range(lx):
            for dx, dy in steps:
                if kind == "hexagonal" and dy == 1 and (x + y) % 2:
                    continue  # brick wall: every other vertical bond
                if x + dx < lx and y + dy < ly:
                    out.add((y * lx + x, (y + dy) * lx + x + dx))
    return out


@pytest.mark.parametrize("kind", ["rectangular", "hexagonal", "triangular"])
@pytest.mark.parametrize("lx,ly", [(1, 2), (2, 1), (2, 2), (3, 3), (4, 3), (5, 4), (6, 6), (7, 5)])
def test_edges_counts_and_colours(kind, lx, ly):
    lat = make_lattice(kind, lx, ly)
    edges = lat.edges
    assert len(set(edges)) == len(edges)
    assert set(edges) == expected_edges(kind, lx, ly)
    rect = (lx - 1) * ly + lx * (ly - 1)
    if kind == "rectangular":
        assert len(edges) == rect
    elif kind == "triangular":
        assert len(edges) == rect + (lx - 1) * (ly - 1)
    else:
        verticals = sum((lx + 1) // 2 if y % 2 == 0 else lx // 2 for y in range(ly - 1))
        assert len(edges) == (lx - 1) * ly + verticals
    for layer in lat.colours:  # each colour is a matching
        sites = [q for e in layer for q in e]
        assert len(sites) == len(set(sites))
    assert len(lat.colours) <= {"rectangular": 4, "hexagonal": 3, "triangular": 6}[kind]


@pytest.mark.parametrize("lx,ly", [(3, 3), (4, 4), (6, 5), (8, 8)])
def test_degrees(lx, ly):
    def interior(lat):
        return [lat.degrees()[lat.site(x, y)] for x in range(1, lx - 1) for y in range(1, ly - 1)]

    rect, tri, hexa = (make_lattice(k, lx, ly) for k in ("rect", "tri", "hex"))
    assert max(rect.degrees()) == 4 and set(interior(rect)) == {4}
    assert max(tri.degrees()) == 6 and set(interior(tri)) == {6}
    assert max(hexa.degrees()) <= 3 and set(interior(hexa)) == {3}
    # degree sums: 2 |E|
    for lat in (rect, tri, hexa):
        assert sum(lat.degrees()) == 2 * len(lat.edges)


@pytest.mark.parametrize("lx,ly", [(4, 3), (5, 4), (8, 8), (9, 6)])
def test_honeycomb_is_bipartite_with_hexagonal_faces(lx, ly):
    lat = make_lattice("hexagonal", lx, ly)
    # bipartite: colour by x + y parity
    for a, b in lat.edges:
        assert (a % lx + a // lx) % 2 != (b % lx + b // lx) % 2
    # Euler (connected planar patch): inner faces = E - V + 1, all of them bricks of 6 sites
    bricks = sum(1 for y in range(ly - 1) for x in range(lx - 2) if (x + y) % 2 == 0)
    assert len(lat.edges) - lat.n_sites + 1 == bricks


# ------------------------------------------------------------- amplitudes


@pytest.mark.parametrize("kind,lx,ly,steps", [
    ("rectangular", 3, 3, 3),
    ("hexagonal", 4, 3, 3),
    ("triangular", 3, 3, 2),
    ("hexagonal", 3, 4, 2),
])
def test_all_amplitudes_match_statevector(kind, lx, ly, steps):
    tj, th = 0.73, -0.41
    lat = make_lattice(kind, lx, ly)
    want = reference_state(lat, steps, tj, th)
    gc = tfim_gate_circuit(kind, lx, ly, steps, theta_j=tj, theta_h=th)
    got = np.asarray(qsimdist.amplitudes(gc, "*" * lat.n_sites, dtype="complex128").amplitudes)
    assert got.reshape(-1).shape == want.shape
    assert np.abs(got.reshape(-1) - want).max() <= 1e-10
    assert abs(np.linalg.norm(want) - 1) < 1e-12


def test_qiskit_circuit_and_network_agree_with_reference():
    lat = make_lattice("triangular", 3, 2)
    want = reference_state(lat, 2, DEFAULT_THETA_J, DEFAULT_THETA_H)
    qc = tfim_qiskit_circuit("tri", 3, 2, 2)
    assert qc.count_ops() == {"rzz": 2 * len(lat.edges), "rx": 2 * lat.n_sites}
    got = np.asarray(qsimdist.amplitudes(qc, "******", dtype="complex128").amplitudes)
    assert np.abs(got.reshape(-1) - want).max() <= 1e-10
    # the network of one bitstring (Qiskit order: rightmost character is qubit 0)
    b = "100110"
    net = tfim_network("tri", 3, 2, 2, b)
    value = complex(qsimdist.contract(net, dtype="complex128"))
    assert abs(value - want[int(b, 2)]) <= 1e-10


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("call", [
    lambda: make_lattice("square", 3, 3),
    lambda: make_lattice(3, 3, 3),
    lambda: make_lattice("rect", 0, 3),
    lambda: make_lattice("rect", 2.5, 3),
    lambda: make_lattice("rect", True, 3),
    lambda: make_lattice("rect", 1, 1),
    lambda: make_lattice("rect", 100, 100),
    lambda: tfim_gate_circuit("hex", 4, 4, 0),
    lambda: tfim_gate_circuit("hex", 4, 4, "2"),
    lambda: tfim_gate_circuit("hex", 4, 4, 2, theta_j=math.nan),
    lambda: tfim_gate_circuit("hex", 4, 4, 2, theta_h="x"),
    lambda: tfim_qiskit_circuit("tri", 4, 4, 10**9),
    lambda: tfim_network("rect", 2, 2, 1, "01"),
])
def test_bad_arguments_raise_one_line(call):
    with pytest.raises(QsimdistError) as info:
        call()
    assert "\n" not in str(info.value)


def test_unknown_lattice_lists_valid():
    with pytest.raises(InvalidInputError, match="rectangular.*hexagonal.*triangular"):
        make_lattice("kagome", 3, 3)


# ------------------------------------------------------- bundled circuits


def _generator():
    spec = importlib.util.spec_from_file_location("generate_lattice",
                                                  ROOT / "circuits" / "generate_lattice.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUNDLED = json.loads((LATTICE_DIR / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("entry", BUNDLED, ids=[e["file"] for e in BUNDLED])
def test_bundled_file_matches_statevector(entry):
    lat = make_lattice(entry["lattice"], entry["lx"], entry["ly"])
    want = reference_state(lat, entry["steps"], entry["theta_j"], entry["theta_h"])
    ref = entry["reference"]
    assert abs(complex(ref["re"], ref["im"]) - want[0]) <= 1e-12
    got = qsimdist.amplitude(LATTICE_DIR / entry["file"], "0" * lat.n_sites, dtype="complex128")
    assert abs(got - want[0]) <= 1e-10


def test_regenerating_bundled_files_is_identical(tmp_path):
    written = _generator().generate(tmp_path)
    assert [e["file"] for e in written] == [e["file"] for e in BUNDLED]
    for e in written:
        assert (tmp_path / e["file"]).read_bytes() == (LATTICE_DIR / e["file"]).read_bytes()
    on_disk = sorted(p.name for p in LATTICE_DIR.glob("*.qasm"))
    assert on_disk == sorted(e["file"] for e in BUNDLED)


# ------------------------------------------------------------ saved plans


SAVED = sorted(PLANS.glob("tfim_*-*.json"))


@pytest.mark.skipif(not SAVED, reason="no saved tfim schedules in benchmarks/plans")
@pytest.mark.parametrize("path", SAVED, ids=[p.stem for p in SAVED])
def test_saved_schedules_load_and_replay(path):
    """Each saved dp schedule loads (validated) and replays on shapes within its profile."""
    from qsimdist.hardware import load_profile
    from qsimdist.planner.distribution import replay
    from qsimdist.planner.plan import Plan

    plan = Plan.load(path)
    sch = plan.schedule
    assert sch is not None
    profile = load_profile(sch.profile)
    rep = replay(plan, sch, profile)
    assert 0 < rep.peak_bytes <= profile.usable_memory
    wl = plan.meta["workload"]
    lat = make_lattice(wl["lattice"], wl["lx"], wl["ly"])
    assert plan.network.meta.get("n_qubits", lat.n_sites) == lat.n_sites
    assert path.stem.startswith(f"tfim_{lat.short_name}_{wl['lx']}x{wl['ly']}_t{wl['steps']}_")
