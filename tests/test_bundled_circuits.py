"""qsimdist reproduces the reference amplitude of every bundled circuit."""

from __future__ import annotations

import pytest

import qsimdist
from qsimdist.bundled import bundled_circuit, manifest

ENTRIES = manifest()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_reference_amplitude(entry):
    ref = entry["reference"]
    want = complex(ref["re"], ref["im"])
    order = entry.get("bitstring_order", "qiskit")
    got = qsimdist.amplitude(
        bundled_circuit(entry["file"]), ref["bitstring"], order=order, dtype="complex128"
    )
    assert abs(got - want) <= 1e-10 * max(abs(want), 1e-3)


def test_unknown_bundled_circuit_lists_valid():
    with pytest.raises(qsimdist.InvalidInputError, match="ghz_n12.qasm"):
        bundled_circuit("nope.qasm")
