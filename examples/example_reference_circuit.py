"""One amplitude of a bundled Sycamore-style circuit (.qsim, natural bit order).

Run: python examples/example_reference_circuit.py
"""

from __future__ import annotations

import qsimdist
from qsimdist.bundled import bundled_circuit, manifest


def main() -> None:
    entry = next(e for e in manifest() if e["file"] == "rqc_4x5_m12.qsim")
    ref = entry["reference"]
    amp = qsimdist.amplitude(
        bundled_circuit(entry["file"]), ref["bitstring"], order="natural", dtype="complex64"
    )
    want = complex(ref["re"], ref["im"])
    print(f"{entry['file']} <{ref['bitstring']}|U|0> = {amp:.6e} (reference {want:.6e})")
    assert abs(amp - want) <= 1e-5 * abs(want) + 1e-7


def test_example() -> None:
    main()


if __name__ == "__main__":
    main()
