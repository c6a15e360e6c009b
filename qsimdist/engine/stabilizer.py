"""The stabilizer route: Clifford circuits on stim's tableau and Pauli-frame simulators.

A :class:`~qsimdist.frontends.GateCircuit` is *Clifford* when every gate maps
Pauli operators to Pauli operators under conjugation. That is decided on each
gate's matrix, not its name (:func:`clifford_images`): ``U G U^dag`` is
computed for every generator ``G`` (``X`` and ``Z`` on each of the gate's
qubits) and expanded in the Pauli basis; the gate is Clifford when each image
is one Pauli string with coefficient ``+1`` or ``-1`` within
:data:`CLIFFORD_TOLERANCE`. So ``H``, ``S``, ``SX``, ``CX``, ``iSWAP``, ``ECR``,
``RZZ(-pi/2)``, ``RX(pi)``, ``U(pi/2, 0, pi)``, a fused product of Cliffords or
a ``UnitaryGate`` holding one are all recognised, and the global phase (of a
gate or of the circuit) is ignored: it changes no sample and no expectation
value. Gates on more than :data:`MAX_CLIFFORD_GATE_QUBITS` qubits are taken as
non-Clifford. The verdict and stim's form of each distinct matrix are cached.

Mid-circuit measurements, resets and simple classical conditions reach this
module already lowered (:mod:`qsimdist.frontends.lowering`: a measurement copies
its qubit onto an ancilla with a CX, a reset swaps in a fresh qubit, a
condition on Pauli gates becomes a controlled Pauli); those rewritings are
Clifford, so such circuits take this route too.

Each Clifford gate becomes a named stim gate where one matches its images
(all 24 one-qubit Cliffords, CX, CZ, SWAP, ISWAP, SQRT_ZZ, ...), else the
tableau's own decomposition; stim qubit ``q`` is qubit ``q`` of the circuit
(Qiskit's qubit ``q``; the rightmost character of a bitstring).

- Samples: the circuit with ``M`` on the measured qubits, compiled to stim's
  frame sampler (one reference sample on the tableau, then every shot is a
  Pauli frame), seeded from the caller's generator, so the same seed gives the
  same bitstrings.
- Expectation values: the tableau simulator's
  ``peek_observable_expectation`` gives ``<P>`` exactly (``+1``, ``-1`` or
  ``0``); projectors (``0 1 + - r l``) in a term are postselected one by one,
  each contributing its probability (``1``, ``0`` or ``1/2``).

stim is a dependency of qsimdist (it is also what the ``qec`` extra brings).
Where it is missing nothing is detected, the other routes run, and the
primitives' metadata names the absent route and how to install it
(:func:`absent_routes`). Its price (:func:`stabilizer_seconds`) sits beside theirs in
the router (:func:`qsimdist.engine.router.route_stabilizer`).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..frontends import GateCircuit
from ..hardware import costs

#: a conjugated generator's Pauli coefficient must be within this of +1 or -1
CLIFFORD_TOLERANCE = 1e-8
#: gates on more qubits than this are taken as non-Clifford (4^k Pauli strings are tried)
MAX_CLIFFORD_GATE_QUBITS = 3
#: distinct gate matrices whose verdict is remembered
MATRIX_CACHE_SIZE = 4096

_PAULI = (
    np.eye(2, dtype=complex),
    np.array([[0, 1], [1, 0]], dtype=complex),
    np.array([[0, -1j], [1j, 0]], dtype=complex),
    np.array([[1, 0], [0, -1]], dtype=complex),
)
_LETTER = "_XYZ"


@functools.cache
def stabilizer_available() -> bool:
    """Whether stim can be imported: a dependency of qsimdist (and of its ``qec`` extra),
    so absent only where it was removed or has no wheel. Probed once per process (the
    probe, ``importlib.util.find_spec``, took 0.27 ms, and ran for every circuit)."""
    from .._optional import available

    return available("stim")


#: how the metadata names the stabilizer route's absence
STABILIZER_ABSENT = ("stim is not installed, so Clifford circuits take the statevector or "
                     "tensor-network routes; install it with: pip install 'qsimdist[qec]' "
                     "(or pip install stim)")


def absent_routes() -> dict[str, str]:
    """The routes the primitives price that this installation lacks, each with what
    brings it (``{}`` where every one is there). The Qiskit primitives put it in each
    pub's metadata under ``"routes_absent"``."""
    return {} if stabilizer_available() else {"stabilizer": STABILIZER_ABSENT}


def stabilizer_seconds(n_qubits: int, n_gates: int, *, terms: int = 0, shots: int = 0,
                       measured: int = 0) -> float:
    """Predicted seconds of the stabilizer route (the router's unit).

    The tableau costs ``O(n)`` per gate (a column update of ``2n`` bits); the terms
    ``O(n^2)`` once (the inverse tableau) and ``O(n)`` each (for a term of bounded
    weight: its Pauli string conjugated by the inverse tableau); the frame sampler's
    reference sample ``O(n^2)`` per measurement, then ``O(1)`` per shot per operation
    (64+ shots per machine word).
    """
    n = float(n_qubits)
    seconds = (costs.STABILIZER_START_SECONDS
               + n_gates * (costs.STABILIZER_SECONDS_PER_GATE
                            + n * costs.STABILIZER_SECONDS_PER_GATE_QUBIT))
    if terms:
        seconds += (n * n * costs.STABILIZER_SECONDS_PER_QUBIT2
                    + terms * (costs.STABILIZER_SECONDS_PER_TERM
                               + n * costs.STABILIZER_SECONDS_PER_TERM_QUBIT))
    if measured:
        seconds += measured * n * n * costs.STABILIZER_SECONDS_PER_MEASUREMENT_QUBIT2
        seconds += shots * ((n_gates + measured) * costs.STABILIZER_SECONDS_PER_SHOT_OP
                            + measured * costs.STABILIZER_SECONDS_PER_SHOT_BIT)
    return seconds


# --------------------------------------------------------------------------- detection
_BASES: dict[int, tuple[np.ndarray, np.ndarray, list[str]]] = {}


def _basis(k: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The ``4^k`` Pauli strings on ``k`` qubits (position 0 most significant, as gate
    matrices are indexed), the ``2k`` generators ``X_0..X_{k-1}, Z_0..Z_{k-1}``, and each
    string's letters."""
    found = _BASES.get(k)
    if found is None:
        strings, letters = [], []
        for codes in itertools.product(range(4), repeat=k):
            m = np.ones((1, 1), dtype=complex)
            for c in codes:
                m = np.kron(m, _PAULI[c])
            strings.append(m)
            letters.append("".join(_LETTER[c] for c in codes))
        gens = []
        for which in (1, 3):
            for j in range(k):
                m = np.ones((1, 1), dtype=complex)
                for pos in range(k):
                    m = np.kron(m, _PAULI[which if pos == j else 0])
                gens.append(m)
        found = _BASES[k] = (np.array(strings), np.array(gens), letters)
    return found


def clifford_images(matrix: np.ndarray) -> tuple[str, ...] | None:
    """The images ``U X_j U^dag`` then ``U Z_j U^dag`` of a gate matrix (big-endian over
    its qubits, position ``j`` being its ``j``-th qubit) as signed Pauli strings in stim's
    form (``"+X_"``, ``"-ZY"``), or ``None`` where ``matrix`` is not a Clifford unitary
    (within :data:`CLIFFORD_TOLERANCE`; the global phase does not matter)."""
    d = matrix.shape[0]
    k = d.bit_length() - 1
    if k < 1 or k > MAX_CLIFFORD_GATE_QUBITS or matrix.shape != (d, d) or d != 1 << k:
        return None
    tol = CLIFFORD_TOLERANCE
    u = np.asarray(matrix, dtype=complex)
    if not np.allclose(u @ u.conj().T, np.eye(d), rtol=0.0, atol=tol):
        return None
    strings, gens, letters = _basis(k)
    images = u @ gens @ u.conj().T                                    # (2k, d, d)
    # coefficient of Pauli string p in image g: Tr(p^dag image) / d (Pauli strings are
    # Hermitian, so p^dag = p and Tr(p image) = sum_ij p_ji image_ij)
    coeffs = np.einsum("pji,gij->gp", strings, images) / d
    best = np.argmax(np.abs(coeffs), axis=1)
    rows = np.arange(2 * k)
    top = coeffs[rows, best]
    # the rest is first order in a rotation angle's distance from a Clifford angle (the top
    # coefficient's distance from +-1 only second order)
    coeffs[rows, best] = 0.0
    if not (np.all(np.abs(top.imag) < tol) and np.all(np.abs(np.abs(top.real) - 1.0) < tol)
            and np.all(np.abs(coeffs) < tol)):
        return None
    if np.any(best == 0):  # the identity is no image of a generator (not unitary)
        return None
    return tuple(("+" if c.real > 0 else "-") + letters[b] for c, b in zip(top, best))


_NAMED: dict[tuple[str, ...], str] | None = None


def _named_gates() -> dict[tuple[str, ...], str]:
    """stim's unitary one- and two-qubit gates by their images (the same form as
    :func:`clifford_images`)."""
    global _NAMED
    if _NAMED is None:
        import stim

        named: dict[tuple[str, ...], str] = {}
        for _, data in sorted(stim.gate_data().items()):
            if not data.is_unitary or not (data.is_single_qubit_gate or data.is_two_qubit_gate):
                continue
            tab = data.tableau
            k = len(tab)
            key = tuple(str(tab.x_output(j)) for j in range(k)) + tuple(
                str(tab.z_output(j)) for j in range(k))
            named.setdefault(key, data.name)
        _NAMED = named
    return _NAMED


#: a Clifford gate as stim instructions on its positions: ((name, (position, ...)), ...)
_Program = tuple[tuple[str, tuple[int, ...]], ...]
_MATRICES: dict[tuple, _Program | None] = {}
_LOCK = threading.Lock()


def _program_of(images: tuple[str, ...]) -> _Program:
    """stim instructions (on the gate's positions 0..k-1) with these images."""
    k = len(images) // 2
    identity = tuple("+" + "".join(w if p == j else "_" for p in range(k))
                     for w in "XZ" for j in range(k))
    if images == identity:
        return ()  # the identity (up to phase)
    name = _named_gates().get(images)
    if name is not None:
        return ((name, tuple(range(k))),)
    import stim

    tab = stim.Tableau.from_conjugated_generators(
        xs=[stim.PauliString(s) for s in images[:k]],
        zs=[stim.PauliString(s) for s in images[k:]])
    out = []
    for inst in tab.to_circuit("elimination"):
        targets = [t.value for t in inst.targets_copy()]
        width = 2 if stim.gate_data(inst.name).is_two_qubit_gate else 1
        for a in range(0, len(targets), width):
            out.append((inst.name, tuple(targets[a:a + width])))
    return tuple(out)


def gate_program(matrix: np.ndarray) -> _Program | None:
    """stim instructions for one gate matrix (positions = the gate's qubit order), or
    ``None`` where it is not Clifford; cached per distinct matrix."""
    key = (matrix.shape[0], matrix.tobytes())
    if key in _MATRICES:
        return _MATRICES[key]
    images = clifford_images(matrix)
    program = None if images is None else _program_of(images)
    with _LOCK:  # the primitives run jobs on threads
        while len(_MATRICES) >= MATRIX_CACHE_SIZE:
            _MATRICES.pop(next(iter(_MATRICES)))
        _MATRICES[key] = program
    return program


@dataclass(frozen=True)
class StabilizerCircuit:
    """A Clifford circuit as a stim program.

    Attributes:
        n_qubits: qubits (stim qubit ``q`` is the circuit's qubit ``q``).
        n_gates: gates of the source circuit (for the price).
        text: the stim program (gates only), one instruction per line.
    """

    n_qubits: int
    n_gates: int
    text: str
    _simulator: list = field(default_factory=list, repr=False, compare=False)

    def circuit(self, measured: Sequence[int] = ()):
        """The ``stim.Circuit``, with ``M`` on ``measured`` (in that order) at the end."""
        import stim

        text = self.text
        if measured:
            text += "\nM " + " ".join(str(int(q)) for q in measured)
        c = stim.Circuit(text)
        return c

    def tableau_simulator(self):
        """A ``stim.TableauSimulator`` holding the circuit's final state (made once; the
        caller must not change it: peek, or work on a ``copy()``)."""
        if not self._simulator:
            import stim

            sim = stim.TableauSimulator()
            sim.set_num_qubits(self.n_qubits)
            sim.do_circuit(self.circuit())
            self._simulator[:] = [sim, None]
        return self._simulator[0]

    def inverse_tableau(self):
        """The tableau of ``U^dag`` (``U`` the circuit), made once."""
        sim = self.tableau_simulator()
        if self._simulator[1] is None:
            self._simulator[1] = sim.current_inverse_tableau()
        return self._simulator[1]

    def sample(self, measured: Sequence[int], shots: int, seed: int) -> np.ndarray:
        """``shots x len(measured)`` uint8 bits from stim's frame sampler (column ``j`` is
        qubit ``measured[j]``)."""
        if shots == 0 or not measured:
            return np.zeros((shots, len(measured)), dtype=np.uint8)
        sampler = self.circuit(measured).compile_sampler(seed=int(seed))
        return sampler.sample(int(shots)).view(np.uint8)


_LAST: list = []  # [(weakref to the GateCircuit, its gate count, StabilizerCircuit | None)]


def to_stabilizer(gc: GateCircuit) -> StabilizerCircuit | None:
    """``gc`` as a :class:`StabilizerCircuit`, or ``None`` where a gate is not Clifford or
    stim is not installed. The last circuit's answer is kept (a request asks again for
    every branch or binding of the same circuit)."""
    if _LAST:
        ref, count, found = _LAST[0]
        if ref() is gc and count == len(gc.gates):
            return found
    found = _convert(gc) if stabilizer_available() else None
    _LAST[:] = [(weakref.ref(gc), len(gc.gates), found)]
    return found


def _convert(gc: GateCircuit) -> StabilizerCircuit | None:
    lines: list[str] = []
    for g in gc.gates:
        program = gate_program(g.matrix)
        if program is None:
            return None
        qs = g.qubits
        for name, positions in program:
            lines.append(name + " " + " ".join(str(qs[p]) for p in positions))
    return StabilizerCircuit(gc.n_qubits, len(gc.gates), "\n".join(lines))


# --------------------------------------------------------------------------- running
#: projector character -> (basis, stim's desired_value: False is the +1 eigenstate)
_PROJECTORS = {"0": ("z", False), "1": ("z", True), "+": ("x", False), "-": ("x", True),
               "r": ("y", False), "l": ("y", True)}


def term_values(sc: StabilizerCircuit, terms: Sequence, live: Sequence[int],
                values: np.ndarray) -> None:
    """``values[i] = <psi|term_i|psi>`` for each ``i`` in ``live`` (terms are
    :class:`~qsimdist.engine.pauli_terms.PauliTerm`: Paulis and projectors), exactly."""
    import stim

    sim = sc.tableau_simulator()
    n = sc.n_qubits
    for i in live:
        t = terms[i]
        chars = ["_"] * n
        projectors = []
        for q, op in zip(t.qubits, t.ops):
            if op in "XYZ":
                chars[q] = op
            elif op in _PROJECTORS:
                projectors.append((q, op))
            else:
                raise InvalidInputError(
                    f"term character {op!r} on qubit {q}; valid: I X Y Z 0 1 + - r l")
        pauli = stim.PauliString("".join(chars))
        if not projectors:
            values[i] = _pauli_value(sc.inverse_tableau(), pauli, sim)
            continue
        state, prob = sim.copy(), 1.0
        for q, op in projectors:
            basis, bit = _PROJECTORS[op]
            now = getattr(state, f"peek_{basis}")(q)
            if now == 0:
                prob *= 0.5
                getattr(state, f"postselect_{basis}")(q, desired_value=bit)
            elif (now < 0) != bit:
                prob = 0.0
                break
        values[i] = prob * float(state.peek_observable_expectation(pauli)) if prob else 0.0


def _pauli_value(inverse, pauli, sim) -> float:
    """``<psi|P|psi>`` with ``psi = U|0>`` and ``inverse`` the tableau of ``U^dag``:
    ``U^dag P U`` is a signed Pauli string, whose value on ``|0...0>`` is its sign where it
    holds only ``I`` and ``Z``, else 0. Conjugating costs ``O(weight n)``, where stim's
    ``peek_observable_expectation`` works on a copy of the whole tableau (``O(n^2)``:
    0.45 ms a term at 1,000 qubits against 5 us here)."""
    q = inverse(pauli)
    if not hasattr(q, "pauli_indices"):  # stim < 1.13
        return float(sim.peek_observable_expectation(pauli))
    return 0.0 if q.pauli_indices("XY") else float(q.sign.real)


def seed_from(rng: np.random.Generator) -> int:
    """A seed for stim drawn from the caller's generator (so a seeded run repeats)."""
    return int(rng.integers(0, 1 << 63))


# --------------------------------------------------------------------------- routing
def _clifford_or_refuse(gc: GateCircuit, method: str) -> StabilizerCircuit | None:
    """``gc`` as a stim program; where it cannot be one and ``method="stabilizer"`` was
    asked for, :class:`InvalidInputError` saying why."""
    sc = to_stabilizer(gc)
    if sc is None and method == "stabilizer":
        if not stabilizer_available():
            from ..errors import MissingDependencyError

            raise MissingDependencyError(f"method 'stabilizer' needs stim: {STABILIZER_ABSENT}")
        where = next((f"{g.name!r} on qubits {g.qubits} (gate {k})"
                      for k, g in enumerate(gc.gates) if gate_program(g.matrix) is None), "")
        raise InvalidInputError(
            f"method 'stabilizer' needs a Clifford circuit, but {where} is not Clifford; "
            "use method 'auto'")
    return sc


def _read_floor(n: int, seconds) -> float:
    """The statevector's reading price (``seconds()``), or infinity where no state fits."""
    from .router import MAX_STATEVECTOR_QUBITS

    return seconds() if n <= MAX_STATEVECTOR_QUBITS else math.inf


@dataclass
class StabilizerChoice:
    """A Clifford request's stim program, its price, and the route where it was taken
    before the other routes were priced (``None``: price them, then
    :func:`~qsimdist.engine.router.prefer_stabilizer` with :attr:`seconds`)."""

    circuit: StabilizerCircuit
    seconds: float
    route: object = None


def choose_for_sampling(gc: GateCircuit, measured: Sequence[int], shots: int, method: str,
                        executor: str, backend: str) -> StabilizerChoice | None:
    """The stabilizer route's side of a sampling request (``None``: ``gc`` not Clifford)."""
    sc = _clifford_or_refuse(gc, method)
    if sc is None:
        return None
    from .router import route_stabilizer

    n = gc.n_qubits
    price = stabilizer_seconds(n, len(gc.gates), shots=shots, measured=len(measured))
    read = _read_floor(n, lambda: costs.MARGINAL_SECONDS_PER_ELEMENT * 2.0**n
                       + costs.DRAW_SECONDS_PER_SHOT * shots)
    route = route_stabilizer(price, method=method, n_qubits=n, n_gates=len(gc.gates),
                             executor=executor, backend=backend, read_seconds=read)
    return StabilizerChoice(sc, price, route)


def choose_for_terms(gc: GateCircuit, terms: Sequence, method: str, executor: str,
                     backend: str) -> StabilizerChoice | None:
    """The stabilizer route's side of an expectation request (``None``: not Clifford)."""
    sc = _clifford_or_refuse(gc, method)
    if sc is None:
        return None
    from .router import route_stabilizer

    n = gc.n_qubits
    price = stabilizer_seconds(n, len(gc.gates), terms=len(terms))
    read = _read_floor(n, lambda: costs.PAULI_PASS_SECONDS_PER_ELEMENT * 2.0**n)
    route = route_stabilizer(price, method=method, n_qubits=n, n_gates=len(gc.gates),
                             executor=executor, backend=backend, read_seconds=read)
    return StabilizerChoice(sc, price, route)


def _fit() -> None:  # pragma: no cover - a measurement, run by hand
    """Print measured seconds beside :func:`stabilizer_seconds` for GHZ circuits (each
    twice: the first of n=24 includes importing stim)."""
    import time
    from types import SimpleNamespace as PauliTerm  # qubits, ops (as engine.pauli_terms')

    h = np.array([[1, 1], [1, -1]], dtype=complex) / math.sqrt(2)
    cx = np.eye(4, dtype=complex)[[0, 1, 3, 2]]
    for n in (24, 24, 200, 1000, 1000):
        gc = GateCircuit(n)
        gc.append(h, (0,))
        for q in range(n - 1):
            gc.append(cx, (q, q + 1))
        terms = [PauliTerm(qubits=(q, q + 1), ops="ZZ") for q in range(min(n - 1, 100))]
        values = np.zeros(len(terms))
        _MATRICES.clear()
        t0 = time.perf_counter()
        term_values(_convert(gc), terms, range(len(terms)), values)
        t1 = time.perf_counter()
        _convert(gc).sample(list(range(n)), 1024, 1)
        t2 = time.perf_counter()
        print(f"n={n}: {len(terms)} terms {t1 - t0:.2e} s (predicted "
              f"{stabilizer_seconds(n, n, terms=len(terms)):.2e}); 1024 shots {t2 - t1:.2e} s "
              f"(predicted {stabilizer_seconds(n, n, shots=1024, measured=n):.2e})")


if __name__ == "__main__":  # pragma: no cover
    _fit()


__all__ = [
    "CLIFFORD_TOLERANCE",
    "STABILIZER_ABSENT",
    "absent_routes",
    "StabilizerChoice",
    "choose_for_sampling",
    "choose_for_terms",
    "MAX_CLIFFORD_GATE_QUBITS",
    "StabilizerCircuit",
    "clifford_images",
    "gate_program",
    "seed_from",
    "stabilizer_available",
    "stabilizer_seconds",
    "term_values",
    "to_stabilizer",
]
