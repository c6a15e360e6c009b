"""Fit the local kernel choice (``LocalCosts``) to step shapes timed on this machine.

    python -m benchmarks.kernel_fit collect CIRCUIT... --json SHAPES.json
        [--max-repeats 8] [--against OLD_KERNELS.py]
    python -m benchmarks.kernel_fit fit SHAPES.json

``collect`` plans each circuit (all-zero amplitude, natural order, the bench
suite's path budget), keeps every distinct step shape whose operands share no
outer axis (the steps the loop, tiled and BLAS-broadcast kernels compete
for) and times each on random complex64 operands: the compiled loop (where
its inner GEMM is small enough), the tiled kernel and ``numpy.matmul`` with
broadcasting, alternating, best of several. ``--against FILE`` also times
``tiled_gemm`` from another copy of ``qsimdist/executors/kernels.py`` (for
example ``git show REV:qsimdist/executors/kernels.py > old.py``), so a kernel
change is measured before and after in one run.

``fit`` fits the loop and tiled constants by least squares on log time and
reports, for the current ``LocalCosts`` and for the fit, how far the total
time of the kernels each would choose lies above the best kernel per shape.
Every number is a measurement of isolated steps (warm operands), not of
whole plans.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time

import numpy as np

KINDS = ("loop", "tiled", "broadcast")


def step_shapes(circuits: list[str], max_repeats: int = 8, min_elements: int = 256) -> dict:
    """Distinct ``(x_view, y_view, out_view)`` of no-shared-axis steps -> the circuit's name."""
    import qsimdist
    from qsimdist.executors import kernels
    from qsimdist.frontends import load
    from qsimdist.planner.path import PathOptions

    shapes: dict = {}
    for src in circuits:
        n = load(src).n_qubits
        plan = qsimdist.plan(src, bitstrings="0" * n, order="natural", memory_limit=None,
                             path_options=PathOptions(max_repeats=max_repeats, cache=True,
                                                      parallel=False))
        for s in plan.steps:
            if kernels.tiled_shape(s.x_view, s.y_view, s.out_view) is None:
                continue
            if math.prod(s.out_view) >= min_elements:
                shapes.setdefault((s.x_view, s.y_view, s.out_view), src.rsplit("/", 1)[-1])
    return shapes


def _module_from(path: str):
    name = "qsimdist_kernels_against"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's on-disk cache finds the module by name
    spec.loader.exec_module(module)
    return module


def time_shape(xv, yv, ov, against=None, seed: int = 0) -> dict:
    """Best-of times of one step shape on each applicable kernel (alternating)."""
    from qsimdist.executors import kernels

    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(xv) + 1j * rng.standard_normal(xv)).astype(np.complex64)
    y = (rng.standard_normal(yv) + 1j * rng.standard_normal(yv)).astype(np.complex64)
    out = np.empty(ov, np.complex64)
    k, m, n = xv[-1], ov[-2], ov[-1]
    fns = {"tiled": lambda: kernels.tiled_gemm(x, y, out, xv, yv, ov),
           "broadcast": lambda: np.matmul(x, np.swapaxes(y, -1, -2), out=out)}
    if m * n * k <= kernels.SMALL_INNER:
        fns["loop"] = lambda: kernels.small_gemm(x, y, out, xv, yv, ov)
    if against is not None:
        fns["tiled_before"] = lambda: against.tiled_gemm(x, y, out, xv, yv, ov)
    want = np.matmul(x, np.swapaxes(y, -1, -2))
    for name, fn in fns.items():  # warm-up (compiles), and every kernel checked
        out[...] = np.nan
        fn()
        if not np.allclose(out, want, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name} gives a wrong result on {xv} x {yv}")
    repeats = 5 if out.size > 1 << 20 else 9
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {"x": list(xv), "y": list(yv), "out": list(ov),
            **{name: min(v) for name, v in times.items()}}


def _features(row: dict) -> tuple[int, int, int, int, int]:
    """(rows, cols, k, batch, n) of a timed shape."""
    xv, yv, ov = row["x"], row["y"], row["out"]
    k = xv[-1]
    xs, ys = math.prod(xv) // k, math.prod(yv) // k
    return max(xs, ys), min(xs, ys), k, math.prod(ov[:-2]), ov[-1]


def choice(row: dict, costs) -> str:
    """The kernel the planner's ``gemm_step`` picks for this shape under ``costs``.

    The step is rebuilt from its views (one mode per outer axis, owned by the
    operand that varies along it, then ``m``, ``n`` and ``k``) and planned with
    run-time permutations priced out, since only the permutation-free kernels
    are timed here; a plain GEMM (no outer axis) counts as ``broadcast``, the
    one ``matmul`` timed.
    """
    import dataclasses

    from qsimdist.planner.lifetime import gemm_step

    xv, yv, ov = row["x"], row["y"], row["out"]
    outer = [f"o{d}" for d in range(len(ov) - 2)]
    size = {mode: ov[d] for d, mode in enumerate(outer)}
    size.update(m=ov[-2], n=ov[-1], k=xv[-1])
    la = tuple(mode for d, mode in enumerate(outer) if xv[d] != 1) + ("m", "k")
    lb = tuple(mode for d, mode in enumerate(outer) if yv[d] != 1) + ("n", "k")
    free = dataclasses.replace(costs, transpose_margin=float("inf"))
    step = gemm_step(0, 1, 2, la, lb, tuple(outer) + ("m", "n"), size, 8, free)
    if step.loop:
        return "tiled" if step.tiled else "loop"
    return "broadcast"  # broadcast, or a plain GEMM: one matmul either way


def regret(rows: list[dict], costs) -> dict:
    """Total time of the chosen kernels against the best kernel per shape."""
    chosen = sum(r[choice(r, costs)] for r in rows)
    best = sum(min(r[k] for k in KINDS if k in r) for r in rows)
    return {"chosen_s": chosen, "best_s": best, "above_best": chosen / best - 1}


def fit(rows: list[dict]) -> dict:
    """Least-squares (log time) fit of the tiled and loop constants."""
    from scipy.optimize import least_squares

    from qsimdist.hardware.costs import LocalCosts

    f = np.array([_features(r) for r in rows], dtype=float)
    t_tiled = np.array([r["tiled"] for r in rows])

    def tiled(p):
        setup, half, gb_s, gf_s = np.exp(p)
        r, c, k = f[:, 0], f[:, 1], f[:, 2]
        eff = c / (c + half) * k / (k + half)
        return setup + 8 * r * c * k / (gf_s * 1e9) / eff + (r * k + r * c) * 8 / (gb_s * 1e9)

    tf = least_squares(lambda p: np.log(tiled(p) / t_tiled), np.log([30e-6, 4.0, 15.0, 100.0]))
    looped = [r for r in rows if "loop" in r]
    lf = np.array([_features(r) for r in looped], dtype=float)
    t_loop = np.array([r["loop"] for r in looped])
    probe = LocalCosts()
    unrolled = np.array([int(n) in probe.loop_unrolled_n and int(k) in probe.loop_unrolled_k
                         for _, _, k, _, n in lf])
    flops = np.array([8.0 * math.prod(r["out"]) * r["x"][-1] for r in looped])

    def loop(p):
        setup, gf_fast, gf_generic = np.exp(p)
        return setup + flops / np.where(unrolled, gf_fast, gf_generic) / 1e9

    lfit = least_squares(lambda p: np.log(loop(p) / t_loop), np.log([10e-6, 8.0, 6.0]))
    setup, half, gb_s, gf_s = np.exp(tf.x)
    l_setup, gf_fast, gf_generic = np.exp(lfit.x)
    fitted = LocalCosts(tiled_setup=float(setup), tiled_half=float(half),
                        tiled_byte=float(1 / (gb_s * 1e9)), tiled_flop=float(1 / (gf_s * 1e9)),
                        loop_setup=float(l_setup), loop_flop=float(1 / (gf_fast * 1e9)),
                        loop_flop_generic=float(1 / (gf_generic * 1e9)))
    return {"tiled": {"setup_s": setup, "half": half, "gb_per_s": gb_s, "gflop_per_s": gf_s,
                      "rms_log_error": float(np.sqrt(np.mean(tf.fun ** 2)))},
            "loop": {"setup_s": l_setup, "gflop_per_s_unrolled": gf_fast,
                     "gflop_per_s_generic": gf_generic,
                     "rms_log_error": float(np.sqrt(np.mean(lfit.fun ** 2)))},
            "regret_current": regret(rows, LocalCosts()),
            "regret_fitted": regret(rows, fitted)}


def main(argv: list[str] | None = None) -> dict | list:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("circuits", nargs="+")
    c.add_argument("--json", required=True)
    c.add_argument("--max-repeats", type=int, default=8)
    c.add_argument("--against", default=None, help="another kernels.py to time beside")
    f = sub.add_parser("fit")
    f.add_argument("shapes")
    args = ap.parse_args(argv)
    if args.cmd == "collect":
        against = _module_from(args.against) if args.against else None
        shapes = step_shapes(args.circuits, args.max_repeats)
        print(f"{len(shapes)} step shapes", file=sys.stderr, flush=True)
        rows = []
        for j, ((xv, yv, ov), src) in enumerate(shapes.items(), start=1):
            rows.append({**time_shape(xv, yv, ov, against), "circuit": src})
            print(f"[{j}/{len(shapes)}] {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
        with open(args.json, "w") as fh:
            json.dump({"command": " ".join(sys.argv), "rows": rows}, fh, indent=1)
        return rows
    rows = json.load(open(args.shapes))["rows"]
    result = fit(rows)
    if any("tiled_before" in r for r in rows):
        big = [r for r in rows if r["tiled"] > 1e-3]
        ratios = sorted(r["tiled_before"] / r["tiled"] for r in big)
        result["tiled_before_over_after"] = {
            "shapes_over_1ms": len(big), "median": ratios[len(ratios) // 2],
            "min": ratios[0], "max": ratios[-1],
            "total_before_s": sum(r["tiled_before"] for r in rows),
            "total_after_s": sum(r["tiled"] for r in rows)}
    print(json.dumps(result, indent=1, default=float))
    return result


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, KeyError) as exc:  # a missing or malformed file
        print(f"kernel_fit: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)
