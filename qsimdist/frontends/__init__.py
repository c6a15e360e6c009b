"""Frontends: everything users hand qsimdist, turned into a :class:`GateCircuit` or a Network.

A registry maps file suffixes and object types to readers; unknown inputs
raise with the list of what is accepted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import CircuitParseError, InvalidInputError, shorten
from ..network import Network, load_network
from .circuit import (
    Gate,
    GateCircuit,
    amplitude_network,
    open_qubits,
    parse_bitstring,
)

#: most bitstrings :func:`expand_bitstring` lists; wider patterns are read lazily
#: with :func:`iter_bitstrings` or :func:`bitstring_at`
MAX_EXPANDED = 1 << 22


def _star_positions(pattern: str) -> list[int]:
    return [k for k, c in enumerate(pattern) if c == "*"]


def bitstring_at(pattern: str, index: int) -> str:
    """The ``index``-th bitstring a starred pattern stands for (leftmost ``*`` most significant)."""
    stars = _star_positions(pattern)
    if not 0 <= index < 1 << len(stars):
        raise IndexError(f"index {index} is outside 0..{(1 << len(stars)) - 1} for {pattern!r}")
    chars = list(pattern)
    for pos, k in enumerate(stars):
        chars[k] = "1" if (index >> (len(stars) - 1 - pos)) & 1 else "0"
    return "".join(chars)


def bitstring_chunks(pattern: str, start: int = 0, stop: int | None = None,
                     chunk: int = 1 << 12):
    """Lists of at most ``chunk`` bitstrings of ``pattern``, indices ``start..stop-1`` in order.

    Memory stays bounded by one chunk whatever the number of ``*``.
    """
    import numpy as np

    stars = _star_positions(pattern)
    k = len(stars)
    total = 1 << k
    stop = total if stop is None else min(stop, total)
    template = np.frombuffer(pattern.encode("ascii"), dtype=np.uint8)
    width = len(pattern)
    for a in range(start, stop, chunk):
        b = min(stop, a + chunk)
        idx = np.arange(a, b, dtype=np.int64)
        rows = np.broadcast_to(template, (b - a, width)).copy()
        for pos, col in enumerate(stars):
            rows[:, col] = ((idx >> (k - 1 - pos)) & 1) + ord("0")
        raw = rows.tobytes().decode("ascii")
        yield [raw[i:i + width] for i in range(0, len(raw), width)] if width else [""] * (b - a)


def iter_bitstrings(pattern: str):
    """Every bitstring of a starred pattern, lazily, in the batched result's order."""
    for block in bitstring_chunks(pattern):
        yield from block


def expand_bitstring(bitstring: str) -> list[str]:
    """All bitstrings a starred pattern stands for, in the batched result's order.

    Refuses patterns over :data:`MAX_EXPANDED` bitstrings (use :func:`iter_bitstrings`).
    """
    from ..errors import BitstringError

    k = bitstring.count("*")
    if (1 << k) > MAX_EXPANDED:
        raise BitstringError(
            f"pattern with {k} '*' stands for 2^{k} bitstrings, over the {MAX_EXPANDED} a list "
            "may hold; iterate with iter_bitstrings() or index with bitstring_at()"
        )
    return list(iter_bitstrings(bitstring))


def _read_qasm(path: Path) -> GateCircuit:
    from .qasm import read_qasm

    return read_qasm(path)


def _read_qsim(path: Path) -> GateCircuit:
    from .qsim import read_qsim

    return read_qsim(path)


#: file suffix -> reader returning a GateCircuit or a Network
FILE_READERS: dict[str, Callable[[Path], GateCircuit | Network]] = {
    ".qasm": _read_qasm,
    ".qasm2": _read_qasm,
    ".qasm3": _read_qasm,
    ".qsim": _read_qsim,
    ".json": load_network,
}


def load(source) -> GateCircuit | Network:
    """Turn ``source`` into a :class:`GateCircuit` (circuits) or :class:`Network`.

    Accepted: a path to ``.qasm``/``.qasm2``/``.qasm3`` (OpenQASM 2 or 3, from
    the header), ``.qsim``, or ``.json`` (cotengra-style network, arrays from a
    sibling ``.npz``); the name of a bundled circuit where no such file exists
    (``"ghz_n12"`` is the bundled ``ghz_n12.qasm``); a Qiskit ``QuantumCircuit``; a
    quimb ``Circuit`` or ``TensorNetwork``; a ``GateCircuit`` or ``Network``.
    """
    if isinstance(source, (GateCircuit, Network)):
        return source
    if isinstance(source, (str, os.PathLike)):
        from ..bundled import resolve_circuit_path

        path = resolve_circuit_path(Path(source))
        reader = FILE_READERS.get(path.suffix.lower())
        if reader is None:
            valid = ", ".join(FILE_READERS)
            if not path.suffix:
                from ..bundled import bundled_names

                raise CircuitParseError(
                    f"no file or bundled circuit {shorten(str(path))}; give a file ending in "
                    f"{valid}, or a bundled circuit: {', '.join(bundled_names())}"
                )
            raise CircuitParseError(
                f"cannot tell the format of {shorten(str(path))}: suffix must be one of {valid}"
            )
        # Each reader opens the file itself through qsimdist._fileio, which reads
        # regular files only (no FIFO or device), under the size cap, and tells a
        # missing file from a folder or a symlink loop.
        return reader(path)
    module = type(source).__module__ or ""
    if module.startswith("qiskit"):
        from .qiskit_circuit import from_qiskit

        return from_qiskit(source)
    if module.startswith("quimb"):
        import quimb.tensor as qtn

        if isinstance(source, qtn.Circuit):
            from .quimb_circuit import from_quimb

            return from_quimb(source)
        if isinstance(source, qtn.TensorNetwork):
            return network_from_quimb(source)
    raise InvalidInputError(
        f"cannot use an object of type {type(source).__name__} as a circuit; valid: a path to "
        f"{', '.join(FILE_READERS)}, qiskit.QuantumCircuit, quimb Circuit or TensorNetwork, "
        "qsimdist GateCircuit or Network"
    )


def network_from_quimb(tn, output_inds=None) -> Network:
    """A quimb ``TensorNetwork`` (or ``Tensor``, or list of them) as a Network.

    The same conversion as :func:`qsimdist.quimb.contract` and the
    :func:`qsimdist.quimb.use` hook (:func:`~qsimdist.frontends.quimb_network.prepare_quimb`):
    the output is ``output_inds`` in the order given, or by default quimb's
    (indices on exactly one tensor, in order of first appearance; a network
    with hyper-indices needs ``output_inds``); a repeated index on one tensor
    is its diagonal; the network's ``exponent`` (log10) is kept as
    ``meta["exponent"]``, which :func:`qsimdist.contract` applies.
    """
    from .quimb_network import prepare_quimb

    return prepare_quimb(tn, output_inds).network


__all__ = [
    "FILE_READERS",
    "Gate",
    "GateCircuit",
    "amplitude_network",
    "bitstring_at",
    "bitstring_chunks",
    "expand_bitstring",
    "iter_bitstrings",
    "load",
    "network_from_quimb",
    "open_qubits",
    "parse_bitstring",
]
