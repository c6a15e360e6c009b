"""quimb ``Circuit`` -> :class:`GateCircuit` (quimb's gate arrays are big-endian already)."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedInstructionError
from .circuit import GateCircuit


def from_quimb(circ) -> GateCircuit:  # circ: quimb.tensor.Circuit
    """Convert a quimb circuit through each gate's array."""
    gc = GateCircuit(circ.N, name=type(circ).__name__)
    for pos, gate in enumerate(circ.gates):
        arr = getattr(gate, "array", None)
        if arr is None:
            raise UnsupportedInstructionError(
                f"quimb gate {gate.label!r} at position {pos} has no array"
            )
        k = len(gate.qubits)
        gc.append(np.asarray(arr, dtype=complex).reshape(2**k, 2**k), gate.qubits, str(gate.label))
    return gc
