"""Reproduce Google's 10,000 reference amplitudes of circuit_n30_m14 with wildcards.

    python -m benchmarks.reference_n30 [DATA_DIR] [--fixed 2] [--dtype complex64] [--auto]

The reference bitstrings are grouped by their values on ``--fixed`` qubits;
each group is one contraction with every other qubit open (``*``), so all
10,000 amplitudes come from ``2^fixed`` contractions at most. With
``--auto`` the 10,000 bitstrings go to ``qsimdist.amplitudes`` as they are
and its own batching chooses the open qubits (as ``qsimdist amplitude
--bitstrings-file`` does). Prints the
common phase, the per-amplitude relative deviation (max and median), the
deviation relative to the RMS amplitude, and the time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

CIRCUIT = "circuit_n30_m14_s0_e0_pEFGH.qsim"
AMPLITUDES = "amplitudes_n30_m14_s0_e0_pEFGH_10000.txt"


def read_reference(path: Path) -> tuple[list[str], np.ndarray]:
    bits, vals = [], []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 3:
            bits.append(fields[0])
            vals.append(complex(float(fields[1]), float(fields[2])))
    return bits, np.array(vals)


def group_patterns(bits: list[str], fixed: tuple[int, ...]) -> dict[str, list[int]]:
    """Pattern (fixed qubits set, others '*') -> indices of the bitstrings it covers."""
    groups: dict[str, list[int]] = defaultdict(list)
    n = len(bits[0])
    for k, b in enumerate(bits):
        pattern = "".join(b[i] if i in fixed else "*" for i in range(n))
        groups[pattern].append(k)
    return dict(groups)


def compare(got: np.ndarray, ref: np.ndarray) -> dict:
    """Deviation after removing the one common phase (least squares)."""
    phase = np.vdot(ref, got)
    phase /= abs(phase)
    dev = np.abs(got / phase - ref)
    return {
        "common_phase": [float(phase.real), float(phase.imag)],
        "max_relative_deviation": float(np.max(dev / np.abs(ref))),
        "median_relative_deviation": float(np.median(dev / np.abs(ref))),
        "max_deviation_over_rms": float(np.max(dev) / np.sqrt(np.mean(np.abs(ref) ** 2))),
    }


def main(argv: list[str] | None = None) -> dict:
    import qsimdist

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", default="../shared/data/circuits")
    ap.add_argument("--fixed", type=int, default=2, help="qubits fixed per contraction")
    ap.add_argument("--dtype", default="complex64")
    ap.add_argument("--auto", action="store_true",
                    help="pass the bitstrings as they are; qsimdist batches them itself")
    args = ap.parse_args(argv)
    data = Path(args.data)
    bits, ref = read_reference(data / AMPLITUDES)
    groups = group_patterns(bits, tuple(range(args.fixed)))
    t0 = time.perf_counter()
    res = qsimdist.amplitudes(data / CIRCUIT, bits if args.auto else list(groups),
                              order="natural", dtype=args.dtype)
    elapsed = time.perf_counter() - t0
    got = np.array([res.get(b) for b in bits])
    out = {
        "amplitudes": len(bits),
        "contractions": res.stats["contractions"],
        "open_qubits": None if args.auto else 30 - args.fixed,
        "dtype": args.dtype,
        "seconds": elapsed,
        **compare(got, ref),
        "stats": res.stats,
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
