"""The statevector route on Google's qsim (``qsimcirq``, the optional ``qsim`` extra).

qsim applies fused gates with hand-vectorised kernels on every core; on
qsim's own ``circuit_q24`` it ran 4x faster than qsimdist's compiled kernel
(docs/benchmarks/history.md, "The statevector route near qsim"). It computes
in single precision only, so the router takes it for ``complex64`` requests
where it is installed and predicted faster (``QSIMDIST_STATEVECTOR_ENGINE`` chooses by hand).

The gates (already fused by :func:`qsimdist.frontends.fusion.fuse`) go
straight to qsim's compiled module (the one ``qsimcirq`` itself picks for
this processor), loaded from qsimcirq's folder without running qsimcirq's
``__init__``: that imports cirq, with sympy, pandas and matplotlib behind it
(1.3-1.6 s of a process's start, where qsim's whole run of ``circuit_q24``
takes 1.3 s). Each gate is a matrix gate on qsim qubit ``q`` = qubit ``q``
(qsim's state index is little-endian over its qubit numbers, so the
returned vector is in Qiskit's order with no copy), timed by an ASAP
layering as cirq's ``EARLIEST`` insertion would. Where that module cannot
be loaded so, the gates go through cirq (``cirq.MatrixGate`` on
``cirq.LineQubit(n - 1 - q)``). Gates are taken by duck typing
(``.matrix`` big-endian over ``.qubits``), as in :mod:`.statevector`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from .._optional import require

#: the widest gate qsim applies (wider gates keep qsimdist's own kernel)
MAX_GATE_QUBITS = 6
#: qsim's own fusion width on top of qsimdist's (3 ran fastest on circuit_q24: 1.9 s,
#: against 3.1 s at 2 and 2.3 s at 4)
FUSED_GATE_QUBITS = 3


def threads() -> int:
    """Cores this process may run on."""
    from .statevector import pass_threads

    return pass_threads()


_direct: object = None  # qsim's compiled module once loaded; False: not loadable directly


def _extension(folder: str, name: str):
    """qsimcirq's compiled module ``name`` from ``folder``, without qsimcirq's ``__init__``
    (registered under its own name, so a later ``import qsimcirq`` reuses it)."""
    import importlib.machinery
    import importlib.util
    import sys

    full = f"qsimcirq.{name}"
    if full in sys.modules:
        return sys.modules[full]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, name + suffix)
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location(full, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[full] = module
            return module
    raise ImportError(f"no {name} in {folder}")


def direct_module():
    """qsim's compiled module for this processor (as qsimcirq picks it), or None where it
    cannot be loaded without cirq."""
    global _direct
    if _direct is None:
        import importlib.util

        try:
            spec = importlib.util.find_spec("qsimcirq")
            folder = list(spec.submodule_search_locations)[0]
            instr = _extension(folder, "qsim_decide").detect_instructions()
            name = {0: "qsim_avx512", 1: "qsim_avx2", 2: "qsim_sse"}.get(instr, "qsim_basic")
            module = _extension(folder, name)
            for attr in ("Circuit", "add_matrix_gate", "qsim_simulate_fullstate"):
                getattr(module, attr)
            _direct = module
        except Exception:  # noqa: BLE001 - any layout this loader does not know: use cirq
            _direct = False
    return _direct or None


def loaded() -> bool:
    """Whether this process has loaded qsim's compiled module directly."""
    return bool(_direct)


def direct_failed() -> bool:
    """Whether qsim's compiled module was tried and could not be loaded without cirq."""
    return _direct is False


def _asap_times(gates: list) -> list[int]:
    """Each gate's layer, as cirq's ``EARLIEST`` insertion places it."""
    free: dict[int, int] = {}
    times = []
    for g in gates:
        t = max((free.get(int(q), 0) for q in g.qubits), default=0)
        times.append(t)
        for q in g.qubits:
            free[int(q)] = t + 1
    return times


def simulate(n_qubits: int, gates: Iterable, global_phase: float = 0.0) -> np.ndarray:
    """The state ``U|0...0>`` (complex64, flat, Qiskit's order, global phase included)."""
    gates = list(gates)
    qsim = direct_module()
    if qsim is not None:
        circuit = qsim.Circuit()
        circuit.num_qubits = n_qubits
        times = _asap_times(gates)
        for k in sorted(range(len(gates)), key=times.__getitem__):  # stable: in time order
            g = gates[k]
            m = np.asarray(g.matrix, dtype=np.complex128).reshape(-1)
            flat = np.empty(2 * m.size)
            flat[0::2], flat[1::2] = m.real, m.imag
            qsim.add_matrix_gate(times[k], [int(q) for q in g.qubits], flat.tolist(), circuit)
        options = {"f": FUSED_GATE_QUBITS, "t": threads(), "r": 1, "g": False, "gmode": 0,
                   "gsst": 512, "gdb": 16, "v": 0, "z": False, "c": circuit, "s": 0}
        state = np.asarray(qsim.qsim_simulate_fullstate(options, 0)).view(np.complex64)
    else:
        state = _through_cirq(n_qubits, gates)
    state = state.reshape(-1)
    if state.dtype != np.complex64:
        state = state.astype(np.complex64)
    if global_phase:
        state *= np.complex64(np.exp(1j * global_phase))
    return state


def _through_cirq(n_qubits: int, gates: list) -> np.ndarray:
    qsimcirq = require("qsimcirq")  # raises the install hint where qsimcirq is missing
    cirq = require("cirq")
    line = [cirq.LineQubit(n_qubits - 1 - q) for q in range(n_qubits)]
    ops = []
    for g in gates:
        qubits = [line[int(q)] for q in g.qubits]
        ops.append(cirq.MatrixGate(np.asarray(g.matrix, dtype=np.complex128),
                                   qid_shape=(2,) * len(qubits)).on(*qubits))
    circuit = cirq.Circuit(ops, strategy=cirq.InsertStrategy.EARLIEST)
    options = qsimcirq.QSimOptions(cpu_threads=threads(), max_fused_gate_size=FUSED_GATE_QUBITS)
    # (params, state, qubit order); the state is qsim's own buffer, not a copy of it
    _, state, _ = qsimcirq.QSimSimulator(options).simulate_into_1d_array(
        circuit, qubit_order=cirq.LineQubit.range(n_qubits))
    return np.asarray(state)
