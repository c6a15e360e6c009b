"""Micro-benchmark of one step shape on the three local kernels, side by side.

    python -m benchmarks.kernels [--repeats 3] [--more] [--no-baselines]

A gate-sized operand ``x`` contracted with a 2^26-element tensor ``y`` whose
output interleaves their modes (shapes taken from the circuit_n53_m10 plan):
the compiled small-GEMM loop, the row-tiled GEMM with a compiled scatter
(``tiled_gemm``), one ``numpy.matmul`` with broadcasting (BLAS once per outer
index), and GEMM followed by a permutation into place. The loop and the tiled
kernel run alternately, ``--repeats`` times each; their bytes (operands read,
output written) over the median time give the achieved GB/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

CASES = [
    ((1, 2, 1, 2, 4), (8, 1, 1048576, 2, 4), (8, 2, 1048576, 2, 2)),
    ((1, 4, 4), (1048576, 16, 4), (1048576, 4, 16)),
]
#: further step shapes of circuit_n53_m10 plans (``--more``): large n, the small operand
#: on either side, k up to 16
MORE_CASES = [
    ((1, 4, 1, 2, 8), (32768, 1, 2, 128, 8), (32768, 4, 2, 2, 128)),
    ((16384, 1, 4, 1, 128, 8), (1, 2, 1, 2, 2, 8), (16384, 2, 4, 2, 128, 2)),
    ((1, 2, 1, 2, 1, 2, 16), (2048, 1, 64, 1, 2, 16, 16), (2048, 2, 64, 2, 2, 2, 16)),
    ((1048576, 1, 2, 1, 2, 8), (1, 2, 1, 2, 2, 8), (1048576, 2, 2, 2, 2, 2)),
]


def _best(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure_case(xv, yv, ov, repeats: int = 3, baselines: bool = True,
                 seed: int = 0) -> dict:
    """Time one step shape (complex64) on the local kernels; returns one report row."""
    from qsimdist.executors.kernels import small_gemm, tiled_gemm

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xv).astype(np.complex64)
    y = rng.standard_normal(yv).astype(np.complex64)
    out = np.empty(ov, np.complex64)
    small_gemm(x, y, out, xv, yv, ov)  # compile outside the timing
    tiled_gemm(x, y, out, xv, yv, ov)
    t_loop, t_tiled = [], []
    for _ in range(repeats):
        t_loop.append(_best(lambda: small_gemm(x, y, out, xv, yv, ov), 1))
        t_tiled.append(_best(lambda: tiled_gemm(x, y, out, xv, yv, ov), 1))
    ref = np.matmul(x, np.swapaxes(y, -1, -2))
    assert np.allclose(out, ref, rtol=1e-4, atol=1e-4)
    moved = x.nbytes + y.nbytes + out.nbytes
    loop, tiled = statistics.median(t_loop), statistics.median(t_tiled)
    row = {"x": xv, "y": yv, "out": ov, "loop_s": loop, "tiled_s": tiled,
           "loop_over_tiled": loop / tiled,
           "loop_over_tiled_pairwise_median": statistics.median(
               a / b for a, b in zip(t_loop, t_tiled)),
           "loop_gb_s": moved / loop / 1e9, "tiled_gb_s": moved / tiled / 1e9}
    if not baselines:
        return row
    blas = _best(lambda: np.matmul(x, np.swapaxes(y, -1, -2), out=out), repeats=1)
    # GEMM over the flattened operands, then permute [y-rows | x-rows] into place
    k = xv[-1]
    x2 = x.reshape(-1, k)
    y2 = y.reshape(-1, k)
    n_outer = len(ov) - 2
    y_axes = [d for d in range(n_outer) if yv[d] != 1]  # these cases have no batch axes
    x_axes = [d for d in range(n_outer) if yv[d] == 1]
    dims = [yv[d] for d in y_axes] + [ov[-1]] + [xv[d] for d in x_axes] + [ov[-2]]
    src = y_axes + ["n"] + x_axes + ["m"]
    axes = [src.index(d) for d in list(range(n_outer)) + ["m", "n"]]

    def gemm_permute():
        tmp = y2 @ x2.T  # (y rows, x rows): one BLAS call
        out[...] = tmp.reshape(dims).transpose(axes)

    perm = _best(gemm_permute)
    gemm_permute()
    assert np.allclose(out, ref, rtol=1e-4, atol=1e-4)
    return {**row, "blas_broadcast_s": blas, "gemm_permute_s": perm}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--more", action="store_true", help="also the shapes in MORE_CASES")
    ap.add_argument("--no-baselines", action="store_true",
                    help="time only the loop and the tiled kernel (skip BLAS broadcast, permute)")
    args = ap.parse_args([] if argv is None else argv)
    rows = []
    for xv, yv, ov in CASES + (MORE_CASES if args.more else []):
        rows.append(measure_case(xv, yv, ov, args.repeats, not args.no_baselines))
        print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
