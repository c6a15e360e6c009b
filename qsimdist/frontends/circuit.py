"""A frontend-neutral gate list and its conversion to an amplitude network.

Every circuit frontend (Qiskit, OpenQASM, .qsim, quimb) produces a
:class:`GateCircuit`; :func:`amplitude_network` turns one into the network
whose contraction is ``<b|U|0...0>``, with ``*`` characters left open.

Matrix convention: a gate acting on ``qubits = (q0, q1, ...)`` has its matrix
indexed big-endian over that tuple (``q0`` is the most significant bit), the
convention of qsim and quimb. Qiskit's little-endian matrices are converted
by reversing their qubit tuple.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..config import check_order, reorder_bits
from ..errors import BitstringError, InvalidInputError, shorten
from ..network import Network

#: the most qubits a circuit *file* may declare; a larger declaration is refused
#: before any parser allocates registers for it
MAX_QUBITS = 4096
#: the most classical bits an OpenQASM file may declare
MAX_CLBITS = 65536
#: the most qubits one gate may act on (its matrix has 4^k entries: 256 MiB at 12)
MAX_GATE_QUBITS = 12


@dataclass
class Gate:
    """One unitary: a ``2^k x 2^k`` matrix on ``k`` distinct qubits."""

    matrix: np.ndarray
    qubits: tuple[int, ...]
    name: str = "unitary"


@dataclass
class ControlledGate:
    """A gate on its targets, applied where its controls hold ``ctrl_state``: the
    statevector route's form of a multi-controlled gate (``MCXGate``, ``MCPhaseGate``),
    whose cost is a pass over the ``2^(n - controls)`` amplitudes the controls select
    rather than a ``4^k``-entry matrix or a definition of hundreds of gates.

    ``qubits`` lists the controls first, then the targets; ``target`` is the targets'
    ``2^t x 2^t`` matrix, big-endian over ``qubits[controls:]`` like :class:`Gate`'s.
    Only :attr:`GateCircuit.compact` holds these; the tensor-network routes see the
    same gate expanded (:attr:`GateCircuit.gates`).
    """

    target: np.ndarray
    qubits: tuple[int, ...]
    controls: int
    ctrl_state: tuple[int, ...]
    name: str = "controlled"

    @property
    def matrix(self) -> np.ndarray:
        """The dense ``2^k x 2^k`` matrix (identity except the block the controls select);
        only for gates of at most :data:`MAX_GATE_QUBITS` qubits."""
        k, c = len(self.qubits), self.controls
        if k > MAX_GATE_QUBITS:
            raise InvalidInputError(f"controlled gate {shorten(self.name)} on {k} qubits has no "
                                    f"dense matrix (at most {MAX_GATE_QUBITS} qubits)")
        t = k - c
        full = np.eye(1 << k, dtype=complex)
        sel = 0
        for bit in self.ctrl_state:
            sel = (sel << 1) | int(bit)
        lo = sel << t
        full[lo:lo + (1 << t), lo:lo + (1 << t)] = self.target
        return full


def is_controlled(gate) -> bool:
    """Whether ``gate`` is a :class:`ControlledGate` (any gate with controls)."""
    return bool(getattr(gate, "controls", 0))


class LightCone(NamedTuple):
    """The backward light cone of some qubits: gate positions (ascending) and qubits (sorted).

    A tuple, so ``gates, qubits = circuit.light_cone(measured)`` unpacks it.
    """

    gates: tuple[int, ...]
    qubits: tuple[int, ...]


@dataclass
class GateCircuit:
    """A circuit as a list of unitaries plus a global phase (radians)."""

    n_qubits: int
    gates: list[Gate] = field(default_factory=list)
    global_phase: float = 0.0
    name: str = "circuit"
    #: the same unitary for the statevector route, multi-controlled gates kept as
    #: :class:`ControlledGate` (``None``: :attr:`gates` as they are); a circuit derived
    #: from this one (a light cone, a relabelling) does not carry it
    compact: GateCircuit | None = field(default=None, repr=False, compare=False)
    #: gates of the source circuit applied through a definition that is not their exact
    #: operator (:func:`~qsimdist.frontends.qiskit_circuit.recording_definitions`); a
    #: derived circuit does not carry it
    by_definition: list = field(default_factory=list, repr=False, compare=False)

    def statevector_form(self) -> GateCircuit:
        """The circuit the statevector route runs: :attr:`compact` where there is one."""
        return self if self.compact is None else self.compact

    def append(self, matrix: np.ndarray, qubits: Sequence[int], name: str = "unitary") -> None:
        qubits = tuple(int(q) for q in qubits)
        k = len(qubits)
        matrix = np.asarray(matrix, dtype=complex)
        if matrix.shape != (2**k, 2**k):
            raise InvalidInputError(
                f"gate {shorten(name)} on {k} qubits needs a {2**k}x{2**k} matrix, "
                f"got {shorten(matrix.shape)}"
            )
        if len(set(qubits)) != k or not all(0 <= q < self.n_qubits for q in qubits):
            raise InvalidInputError(
                f"gate {shorten(name)} acts on qubits {shorten(qubits)}; they must be distinct "
                f"and in 0..{self.n_qubits - 1}"
            )
        if not np.isfinite(matrix).all():
            raise InvalidInputError(
                f"gate {shorten(name)} on qubits {shorten(qubits)} has NaN or infinite matrix "
                "entries; its parameters must be finite numbers"
            )
        self.gates.append(Gate(matrix, qubits, name))

    @property
    def depth(self) -> int:
        level = [0] * self.n_qubits
        for g in self.gates:
            d = max(level[q] for q in g.qubits) + 1
            for q in g.qubits:
                level[q] = d
        return max(level, default=0)

    def light_cone(self, qubits: Iterable[int]) -> LightCone:
        """The gates (positions, ascending) in the backward light cone of ``qubits``, and
        the cone's qubits (sorted: ``qubits`` and every qubit of those gates).

        Walking the gates from the last, a gate is kept when it touches a qubit
        already in the cone, and then adds its qubits to the cone. Every other
        gate cancels against its adjoint in ``<psi|O|psi>`` for any ``O`` on
        ``qubits``, and no gate after it can reach them. The order and
        repetitions of ``qubits`` do not matter; no qubits give an empty cone.
        """
        cone = {int(q) for q in qubits}
        kept: list[int] = []
        for k in range(len(self.gates) - 1, -1, -1):
            g = self.gates[k]
            if not cone.isdisjoint(g.qubits):
                kept.append(k)
                cone.update(g.qubits)
        kept.reverse()
        return LightCone(tuple(kept), tuple(sorted(cone)))


def parse_bitstring(bitstring: str, n_qubits: int, order: str = "qiskit") -> list[str]:
    """Validate ``bitstring`` and return one character per qubit, qubit 0 first.

    In ``qiskit`` order the rightmost character is qubit 0; in ``natural``
    order character i is qubit i. ``*`` leaves a qubit open.
    """
    check_order(order)
    if not isinstance(bitstring, str):
        raise BitstringError(f"bitstring must be a string of 0, 1 and *, got {bitstring!r}")
    if len(bitstring) != n_qubits:
        raise BitstringError(
            f"bitstring {bitstring!r} has {len(bitstring)} characters; the circuit has "
            f"{n_qubits} qubits"
        )
    bad = sorted(set(bitstring) - set("01*"))
    if bad:
        raise BitstringError(
            f"bitstring {bitstring!r} has invalid characters {''.join(bad)!r}; valid: 0, 1, *"
        )
    # one character per qubit, qubit 0 first: the natural order (config's one bit-order helper)
    return list(reorder_bits(bitstring, "natural") if order == "qiskit" else bitstring)


def open_qubits(bitstring: str, order: str = "qiskit") -> list[int]:
    """Qubits left open by ``*``, in the order their characters appear in ``bitstring``.

    This is the axis order of the batched result: the leftmost ``*`` is the
    most significant bit of the flattened output.
    """
    n = len(bitstring)
    positions = [k for k, c in enumerate(bitstring) if c == "*"]
    return [n - 1 - k for k in positions] if order == "qiskit" else positions


def expand_bitstring(bitstring: str) -> list[str]:
    """All bitstrings a starred pattern stands for, in the batched result's order."""
    stars = [k for k, c in enumerate(bitstring) if c == "*"]
    out = []
    for j in range(2 ** len(stars)):
        chars = list(bitstring)
        for pos, k in enumerate(stars):
            chars[k] = "1" if (j >> (len(stars) - 1 - pos)) & 1 else "0"
        out.append("".join(chars))
    return out


def amplitude_network(circuit: GateCircuit, bitstring: str, order: str = "qiskit") -> Network:
    """The network for ``<bitstring| U |0...0>``; ``*`` qubits become output indices.

    The global phase is folded into the first tensor, so contracting the
    network gives the amplitude exactly. The output indices follow
    :func:`open_qubits`.
    """
    n = circuit.n_qubits
    per_qubit = parse_bitstring(bitstring, n, order)
    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    size_dict: dict[str, int] = {}
    wire = [f"q{q}.0" for q in range(n)]
    layer = [0] * n
    ket0 = np.array([1.0, 0.0], dtype=complex)
    for q in range(n):
        inputs.append((wire[q],))
        arrays.append(ket0.copy())
        size_dict[wire[q]] = 2
    for g in circuit.gates:
        k = len(g.qubits)
        outs = []
        for q in g.qubits:
            layer[q] += 1
            outs.append(f"q{q}.{layer[q]}")
            size_dict[outs[-1]] = 2
        inputs.append((*outs, *(wire[q] for q in g.qubits)))
        arrays.append(g.matrix.reshape((2,) * (2 * k)))
        for q, o in zip(g.qubits, outs):
            wire[q] = o
    bra = {"0": np.array([1.0, 0.0], dtype=complex), "1": np.array([0.0, 1.0], dtype=complex)}
    for q in range(n):
        if per_qubit[q] != "*":
            inputs.append((wire[q],))
            arrays.append(bra[per_qubit[q]].copy())
    output = tuple(wire[q] for q in open_qubits(bitstring, order))
    if circuit.global_phase:
        arrays[0] = arrays[0] * np.exp(1j * circuit.global_phase)
    return Network(
        inputs,
        output,
        size_dict,
        arrays,
        meta={"n_qubits": n, "bitstring": bitstring, "order": order, "name": circuit.name},
    )
