"""The statevector kernel against another version of it, side by side in one process.

    git show REV:qsimdist/executors/statevector.py > /tmp/sv_old.py
    python scripts/statevector_vs.py /tmp/sv_old.py [--repeats 7] [FILE ...]

For each circuit (default: the bundled 16-qubit TFIM lattices, rqc_4x5_m12,
rqc_3x4_m12, qft_n10, ghz_n12) fused at widths 2-5, both kernels run
alternately, complex64; prints the best time of each and the median of the
round-by-round ratios (old / new), with the fusion cost model's prediction.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from qsimdist.executors import statevector as current
from qsimdist.frontends import load
from qsimdist.frontends.fusion import diagonal_flags, fuse, gate_seconds

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["circuits/lattice/tfim_rect_4x4_t3.qasm", "circuits/lattice/tfim_hex_4x4_t3.qasm",
           "circuits/lattice/tfim_tri_4x4_t3.qasm", "circuits/rqc_4x5_m12.qsim",
           "circuits/rqc_3x4_m12.qsim", "circuits/qft_n10.qasm", "circuits/ghz_n12.qasm"]


def _other(path: str):
    source = Path(path).read_text().replace("from ..errors", "from qsimdist.errors")
    namespace: dict = {"__name__": "statevector_other"}
    exec(compile(source, path, "exec"), namespace)  # noqa: S102 - a file the user names
    return namespace["simulate"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("other", help="another statevector.py (e.g. from git show)")
    ap.add_argument("files", nargs="*", default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    old = _other(args.other)
    print("| circuit | width | gates | other (s) | current (s) | other / current | predicted (s) |")
    print("|---|---|---|---|---|---|---|")
    for f in args.files:
        gc = load(str(ROOT / f) if not Path(f).exists() else f)
        for w in (2, 3, 4, 5):
            fused = fuse(gc, w, keep_diagonal=False)
            flags = diagonal_flags(fused)
            times: dict[str, list[float]] = {"other": [], "current": []}
            for _ in range(args.repeats):
                for name, fn in (("other", old), ("current", current.simulate)):
                    t = time.perf_counter()
                    fn(gc.n_qubits, fused.gates, fused.global_phase, "complex64", diagonal=flags)
                    times[name].append(time.perf_counter() - t)
            ratio = statistics.median(a / b for a, b in zip(times["other"], times["current"]))
            predicted = sum(gate_seconds(gc.n_qubits, len(g.qubits), d)
                            for g, d in zip(fused.gates, flags))
            print(f"| {Path(f).name} | {w} | {len(fused.gates)} | {min(times['other']):.4f} | "
                  f"{min(times['current']):.4f} | {ratio:.2f} | {predicted:.4f} |", flush=True)


if __name__ == "__main__":
    main()
