"""Trotterized transverse-field Ising dynamics on 2-D lattices (the paper's lattice workloads).

Three lattices on an ``lx x ly`` patch of sites with open boundaries, site
``(x, y)`` being qubit ``y * lx + x``:

- ``rectangular``: nearest neighbours ``(x, y)-(x+1, y)`` and ``(x, y)-(x, y+1)``;
  ``(lx-1)*ly + lx*(ly-1)`` edges, interior degree 4.
- ``hexagonal`` (honeycomb) in its brick-wall form: every horizontal edge
  ``(x, y)-(x+1, y)`` and the vertical edges ``(x, y)-(x, y+1)`` with ``x + y``
  even; every site has degree at most 3 (interior sites exactly 3), and the
  faces are hexagons (bricks of six sites).
- ``triangular``: the rectangular edges plus one diagonal ``(x, y)-(x+1, y+1)``
  per plaquette; ``(lx-1)*ly + lx*(ly-1) + (lx-1)*(ly-1)`` edges, interior degree 6.

Edges come grouped into colours: sets of disjoint edges (a proper edge
colouring with 4, 3 and 6 colours), one gate layer each. All ``RZZ`` gates
commute, so the grouping sets the layering of the circuit, not its unitary.

One first-order Trotter step of ``H = -J sum_<ij> Z_i Z_j - h sum_i X_i`` over
a time step ``dt`` is ``RZZ(theta_j)`` on every edge (colour by colour) then
``RX(theta_h)`` on every site, with ``theta_j = -2 J dt`` and
``theta_h = -2 h dt`` (``RZZ(t) = exp(-i t ZZ / 2)``, ``RX(t) = exp(-i t X / 2)``).
The paper's angles were not found in what is known of it (see PAPER.md); the
defaults are ``J = h = 1`` and ``dt = 0.1``, i.e. ``theta_j = theta_h = -0.2``.
The state starts in ``|0...0>``.

Example:
    >>> from qsimdist.lattice import tfim_network, make_lattice
    >>> lat = make_lattice("hexagonal", 4, 3)
    >>> lat.n_sites, len(lat.edges), max(lat.degrees())
    (12, 13, 3)
    >>> net = tfim_network("hexagonal", 4, 3, steps=2)   # <0...0| U |0...0>
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .errors import InvalidInputError, shorten
from .frontends.circuit import MAX_QUBITS, GateCircuit, amplitude_network
from .network import Network

#: canonical lattice names, each with the short name used in file names
LATTICES: dict[str, str] = {"rectangular": "rect", "hexagonal": "hex", "triangular": "tri"}
_ALIASES: dict[str, str] = {
    **{name: name for name in LATTICES},
    **{short: name for name, short in LATTICES.items()},
    "honeycomb": "hexagonal",
}
#: most Trotter steps a generator accepts (the gate list grows linearly with them)
MAX_STEPS = 10_000
#: default angles: J = h = 1, dt = 0.1 for H = -J sum ZZ - h sum X
DEFAULT_THETA_J = -0.2
DEFAULT_THETA_H = -0.2

Edge = tuple[int, int]


@dataclass(frozen=True)
class Lattice:
    """Sites and edges of one lattice patch.

    Attributes:
        kind: ``"rectangular"``, ``"hexagonal"`` or ``"triangular"``.
        lx: Sites per row.
        ly: Rows.
        colours: Edge layers; the edges of one layer share no site.
    """

    kind: str
    lx: int
    ly: int
    colours: tuple[tuple[Edge, ...], ...]

    @property
    def n_sites(self) -> int:
        """Number of sites (qubits)."""
        return self.lx * self.ly

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge ``(a, b)`` with ``a < b``, colour by colour."""
        return tuple(e for layer in self.colours for e in layer)

    @property
    def short_name(self) -> str:
        """The lattice's short name (``rect``, ``hex``, ``tri``)."""
        return LATTICES[self.kind]

    def site(self, x: int, y: int) -> int:
        """Qubit index of site ``(x, y)``."""
        return y * self.lx + x

    def degrees(self) -> list[int]:
        """Number of edges at each site, in qubit order."""
        deg = [0] * self.n_sites
        for a, b in self.edges:
            deg[a] += 1
            deg[b] += 1
        return deg


def lattice_kind(kind: object) -> str:
    """The canonical name of a lattice kind (accepts ``rect``, ``hex``/``honeycomb``, ``tri``)."""
    if isinstance(kind, str) and kind.strip().lower() in _ALIASES:
        return _ALIASES[kind.strip().lower()]
    raise InvalidInputError(
        f"unknown lattice {shorten(kind)}; valid: {', '.join(_ALIASES)}"
    )


def _positive_int(value: object, what: str, limit: int) -> int:
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or not 1 <= int(value) <= limit):
        raise InvalidInputError(
            f"{what} must be an integer from 1 to {limit}, got {shorten(value)}"
        )
    return int(value)


def _angle(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(
            float(value)):
        raise InvalidInputError(f"{what} must be a finite real number (radians), got "
                                f"{shorten(value)}")
    return float(value)


def make_lattice(kind: str, lx: int, ly: int) -> Lattice:
    """The ``lx x ly`` patch of a lattice with its edges grouped into colours.

    Args:
        kind: ``rectangular``/``rect``, ``hexagonal``/``hex``/``honeycomb`` or
            ``triangular``/``tri``.
        lx: Sites per row (at least 1).
        ly: Rows (at least 1); ``lx * ly`` must be 2 to 4096.

    Raises:
        InvalidInputError: an unknown kind or a size out of range.
    """
    kind = lattice_kind(kind)
    lx = _positive_int(lx, "lx", MAX_QUBITS)
    ly = _positive_int(ly, "ly", MAX_QUBITS)
    if not 2 <= lx * ly <= MAX_QUBITS:
        raise InvalidInputError(
            f"a {lx}x{ly} lattice has {lx * ly} sites; lx * ly must be from 2 to {MAX_QUBITS}"
        )

    def s(x: int, y: int) -> int:
        return y * lx + x

    def horizontal(parity: int) -> tuple[Edge, ...]:
        return tuple((s(x, y), s(x + 1, y)) for y in range(ly) for x in range(parity, lx - 1, 2))

    def vertical(parity: int) -> tuple[Edge, ...]:
        return tuple((s(x, y), s(x, y + 1)) for y in range(parity, ly - 1, 2) for x in range(lx))

    def diagonal(parity: int) -> tuple[Edge, ...]:
        return tuple((s(x, y), s(x + 1, y + 1))
                     for y in range(ly - 1) for x in range(parity, lx - 1, 2))

    if kind == "rectangular":
        colours = (horizontal(0), horizontal(1), vertical(0), vertical(1))
    elif kind == "triangular":
        colours = (horizontal(0), horizontal(1), vertical(0), vertical(1),
                   diagonal(0), diagonal(1))
    else:  # brick-wall honeycomb: one vertical edge at most per site
        bricks = tuple((s(x, y), s(x, y + 1))
                       for y in range(ly - 1) for x in range(lx) if (x + y) % 2 == 0)
        colours = (horizontal(0), horizontal(1), bricks)
    return Lattice(kind, lx, ly, tuple(c for c in colours if c))


def _rzz(theta: float) -> np.ndarray:
    phase = np.exp(-0.5j * theta)
    return np.diag([phase, phase.conjugate(), phase.conjugate(), phase])


def _rx(theta: float) -> np.ndarray:
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array([[c, -1j * s], [-1j * s, c]])


def _check(kind: str, lx: int, ly: int, steps: int, theta_j: float, theta_h: float
           ) -> tuple[Lattice, int, float, float]:
    lat = make_lattice(kind, lx, ly)
    return (lat, _positive_int(steps, "steps", MAX_STEPS), _angle(theta_j, "theta_j"),
            _angle(theta_h, "theta_h"))


def tfim_name(kind: str, lx: int, ly: int, steps: int) -> str:
    """The family's instance name, e.g. ``tfim_hex_8x8_t6``."""
    return f"tfim_{LATTICES[lattice_kind(kind)]}_{lx}x{ly}_t{steps}"


def tfim_gate_circuit(kind: str, lx: int, ly: int, steps: int, *,
                      theta_j: float = DEFAULT_THETA_J,
                      theta_h: float = DEFAULT_THETA_H) -> GateCircuit:
    """The Trotter circuit as a qsimdist :class:`GateCircuit` (no Qiskit needed).

    Args:
        kind: Lattice kind (see :func:`make_lattice`).
        lx: Sites per row.
        ly: Rows.
        steps: Trotter steps, 1 to ``MAX_STEPS``.
        theta_j: ``RZZ`` angle on every edge per step.
        theta_h: ``RX`` angle on every site per step.

    Raises:
        InvalidInputError: a bad kind, size, step count or angle.
    """
    lat, steps, theta_j, theta_h = _check(kind, lx, ly, steps, theta_j, theta_h)
    gc = GateCircuit(lat.n_sites, name=tfim_name(kind, lx, ly, steps))
    zz, x = _rzz(theta_j), _rx(theta_h)
    for _ in range(steps):
        for a, b in lat.edges:
            gc.append(zz, (a, b), "rzz")
        for q in range(lat.n_sites):
            gc.append(x, (q,), "rx")
    return gc


def tfim_qiskit_circuit(kind: str, lx: int, ly: int, steps: int, *,
                        theta_j: float = DEFAULT_THETA_J, theta_h: float = DEFAULT_THETA_H):
    """The same Trotter circuit as a ``qiskit.QuantumCircuit`` (``rzz`` and ``rx`` gates).

    Arguments as for :func:`tfim_gate_circuit`.
    """
    from qiskit import QuantumCircuit

    lat, steps, theta_j, theta_h = _check(kind, lx, ly, steps, theta_j, theta_h)
    qc = QuantumCircuit(lat.n_sites, name=tfim_name(kind, lx, ly, steps))
    for _ in range(steps):
        for a, b in lat.edges:
            qc.rzz(theta_j, a, b)
        for q in range(lat.n_sites):
            qc.rx(theta_h, q)
    return qc


def tfim_network(kind: str, lx: int, ly: int, steps: int, bitstring: str | None = None, *,
                 theta_j: float = DEFAULT_THETA_J, theta_h: float = DEFAULT_THETA_H,
                 order: str = "qiskit") -> Network:
    """The amplitude network ``<bitstring| U |0...0>`` of the Trotter circuit (unsimplified).

    Args:
        kind: Lattice kind (see :func:`make_lattice`).
        lx: Sites per row.
        ly: Rows.
        steps: Trotter steps.
        bitstring: ``0``/``1``/``*`` per qubit (``*`` left open); default all zeros.
        theta_j: ``RZZ`` angle.
        theta_h: ``RX`` angle.
        order: ``qiskit`` (rightmost character is qubit 0) or ``natural``.
    """
    gc = tfim_gate_circuit(kind, lx, ly, steps, theta_j=theta_j, theta_h=theta_h)
    if bitstring is None:
        bitstring = "0" * gc.n_qubits
    return amplitude_network(gc, bitstring, order)


def kicked_ising_circuit(n_qubits: int, edges, theta_h: float, steps: int):
    """The kicked-Ising circuit of IBM's utility experiment (Kim et al., Nature 2023) as a
    ``qiskit.QuantumCircuit``: per Trotter step, ``RX(theta_h)`` on every qubit, then
    ``RZZ(-pi/2)`` on every edge (``edges``: pairs of qubits, e.g. the 127-qubit heavy-hex
    coupling map of ``../shared/data/circuits/kicked_ising``)."""
    from qiskit import QuantumCircuit

    n_qubits = _positive_int(n_qubits, "n_qubits", MAX_QUBITS)
    steps = _positive_int(steps, "steps", MAX_STEPS)
    theta_h = _angle(theta_h, "theta_h")
    pairs = []
    for edge in edges:
        a, b = (int(q) for q in edge)
        if not (0 <= a < n_qubits and 0 <= b < n_qubits) or a == b:
            raise InvalidInputError(f"edge {shorten(edge)} is not a pair of distinct qubits "
                                    f"in 0..{n_qubits - 1}")
        pairs.append((a, b))
    qc = QuantumCircuit(n_qubits, name=f"kicked_ising_{n_qubits}q_{steps}s")
    for _ in range(steps):
        for q in range(n_qubits):
            qc.rx(theta_h, q)
        for a, b in pairs:
            qc.rzz(-math.pi / 2, a, b)
    return qc


def pauli_label(ops: dict[int, str], n_qubits: int) -> str:
    """A Pauli label in Qiskit's order (qubit 0 rightmost) from ``{qubit: "X" | "Y" | "Z"}``."""
    from .config import reorder_bits

    chars = ["I"] * n_qubits
    for q, c in ops.items():
        chars[q] = c
    return reorder_bits("".join(chars), "natural")  # natural (qubit 0 first) -> Qiskit's


__all__ = [
    "DEFAULT_THETA_H", "DEFAULT_THETA_J", "LATTICES", "Lattice", "MAX_STEPS",
    "kicked_ising_circuit", "lattice_kind", "make_lattice", "pauli_label", "tfim_gate_circuit",
    "tfim_name", "tfim_network", "tfim_qiskit_circuit",
]
