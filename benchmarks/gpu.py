"""GPU benchmark: CGEMM ceiling, qsimdist against cotengra + CuPy on the same path, TF32 / 3M GEMM.

    python -m benchmarks.gpu [--json FILE] [--data DIR] [--repeats 3]
    python -m benchmarks.gpu --dry-run        # on the CPU, numpy standing in for cupy

Measured, on one CUDA device (``scripts/gpu_check.sh`` runs this after the
GPU tests):

* the complex64 GEMM ceiling: ``cupy.matmul`` on two large square matrices;
* complex GEMM variants against complex64, with their relative error (to the
  complex64 result and to a complex128 reference): the *3M* (Gauss) product
  from three real float32 GEMMs, and cuBLAS's TF32 compute type where CuPy
  offers it;
* qsimdist's executor (``backend="cupy"``) against
  ``cotengra.ContractionTree.contract`` on the plan's own tree and arrays, for
  a Sycamore-style 6x6 grid at 14 cycles and for circuit_n53_m12 (one
  amplitude each, sliced to fit a fraction of the device's memory): achieved
  TFLOP/s and its fraction of the measured ceiling.

Without cupy or a device it exits with code 2 and one line saying so;
``--dry-run`` runs every step with numpy on small sizes (a 3x3 grid, a
bundled 12-qubit circuit) so the script can be checked before GPU time is spent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

N53M12 = "circuits/circuit_n53_m12_s0_e0_pABCDCDAB.qsim"


class NoGpu(Exception):
    """No usable CUDA device (the message says why)."""


def gpu_reason() -> str | None:
    """Why no GPU can be used here, or ``None`` when cupy sees a device."""
    try:
        import cupy
    except ImportError as exc:
        return f"cupy is not installed ({exc}); install it with: pip install -e '.[gpu]'"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "cupy found no CUDA device"
    except Exception as exc:  # noqa: BLE001 - any CUDA failure means no usable device
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None


def synchronize(xp) -> None:
    """Wait for the device (no-op for numpy)."""
    if xp.__name__ == "cupy":
        xp.cuda.Device().synchronize()


def device_info(xp) -> dict:
    """Name, memory and compute capability of the current device (numpy: the CPU)."""
    if xp.__name__ != "cupy":
        from .suite import machine_info

        m = machine_info()
        return {"name": f"CPU dry run: {m['cpu_model']}", "memory_bytes": m["memory_bytes"]}
    dev = xp.cuda.Device()
    props = xp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    free, total = dev.mem_info
    return {"name": name.decode() if isinstance(name, bytes) else str(name),
            "memory_bytes": int(total), "free_bytes_at_start": int(free),
            "compute_capability": dev.compute_capability,
            "cuda_runtime": xp.cuda.runtime.runtimeGetVersion()}


def _random_complex(xp, shape: tuple[int, ...], dtype, seed: int):
    rng = np.random.default_rng(seed)
    host = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return xp.asarray(host)


def gauss(a, b, xp):
    """``a @ b`` for complex64 ``a``, ``b`` by the executor's 3M product (three real GEMMs)."""
    from qsimdist.executors.local import gauss_matmul

    if a.dtype != np.complex64 or b.dtype != np.complex64:
        raise TypeError(f"gauss takes complex64 operands, got {a.dtype} and {b.dtype}")
    return gauss_matmul(a, b, xp.empty(a.shape[:-1] + b.shape[-1:], dtype=np.complex64), xp)


def relative_error(x, ref, xp) -> float:
    """``||x - ref|| / ||ref||`` (Frobenius), computed in complex128."""
    x = x.astype(np.complex128)
    ref = ref.astype(np.complex128)
    return float(xp.linalg.norm(x - ref) / xp.linalg.norm(ref))


def _best_seconds(fn, xp, repeats: int) -> float:
    fn()
    synchronize(xp)  # warm-up (cuBLAS handles, kernel selection) outside the timing
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        synchronize(xp)
        best = min(best, time.perf_counter() - t)
    return best


def _tf32_available(xp) -> bool:
    """Whether the executor can switch this array module's GEMMs to TF32 (CuPy only)."""
    if xp.__name__ != "cupy":
        return False
    from qsimdist.executors.local import tf32_setter

    return tf32_setter(xp) is not None


def gemm_variants(xp, n: int, repeats: int = 3) -> dict:
    """CGEMM ceiling and the TF32 / 3M variants, each with its rate and error.

    Rates count 8 n^3 real FLOPs for every variant (the complex product's
    work), so a faster variant shows as a higher "effective" rate.
    """
    a = _random_complex(xp, (n, n), np.complex64, 1)
    b = _random_complex(xp, (n, n), np.complex64, 2)
    flops = 8.0 * n**3
    c64 = a @ b
    ref = a.astype(np.complex128) @ b.astype(np.complex128)
    rows = {"complex64": {"seconds": _best_seconds(lambda: a @ b, xp, repeats),
                          "rel_error_vs_complex128": relative_error(c64, ref, xp),
                          "rel_error_vs_complex64": 0.0}}
    g = gauss(a, b, xp)
    rows["3M (3 real GEMMs)"] = {
        "seconds": _best_seconds(lambda: gauss(a, b, xp), xp, repeats),
        "rel_error_vs_complex128": relative_error(g, ref, xp),
        "rel_error_vs_complex64": relative_error(g, c64, xp)}
    skipped = {}
    if not _tf32_available(xp):
        skipped["TF32"] = ("numpy has no TF32 (dry run)" if xp.__name__ != "cupy"
                           else "this CuPy has no set_compute_type")
    else:
        from qsimdist.executors.local import gemm_context

        with gemm_context("tf32", xp):
            t = _best_seconds(lambda: a @ b, xp, repeats)
            c = a @ b
            rows["complex64, TF32 compute"] = {
                "seconds": t, "rel_error_vs_complex128": relative_error(c, ref, xp),
                "rel_error_vs_complex64": relative_error(c, c64, xp)}
            t = _best_seconds(lambda: gauss(a, b, xp), xp, repeats)
            c = gauss(a, b, xp)
            rows["3M, TF32 compute"] = {
                "seconds": t, "rel_error_vs_complex128": relative_error(c, ref, xp),
                "rel_error_vs_complex64": relative_error(c, c64, xp)}
    for r in rows.values():
        r["effective_tflops"] = flops / r["seconds"] / 1e12
    return {"n": n, "ceiling_flops": flops / rows["complex64"]["seconds"], "variants": rows,
            "skipped": skipped}


def same_path(label: str, source: Path, xp, backend: str, memory_limit: int | None,
              repeats: int, ceiling: float, search_repeats: int, max_time: float | None) -> dict:
    """qsimdist (``backend``) against cotengra on the plan's own tree, one amplitude."""
    import qsimdist
    from qsimdist.frontends import load

    from .suite import interleaved, ratio_summary

    n = load(str(source)).n_qubits
    t = time.perf_counter()
    plan = qsimdist.plan(str(source), bitstrings="0" * n, order="natural",
                         memory_limit=memory_limit if memory_limit is not None else "none",
                         max_repeats=search_repeats, max_time=max_time)
    plan_s = time.perf_counter() - t
    tree, host_arrays = plan.contraction_tree()
    arrays = [xp.asarray(a) for a in host_arrays]

    def ours():
        r = plan.execute(backend=backend)
        synchronize(xp)
        return r

    def theirs():
        r = tree.contract(arrays, backend=backend)
        synchronize(xp)
        return r

    contenders = {"qsimdist": ours, "cotengra": theirs}
    for mode in executor_gemm_modes(xp):  # the executor's faster, less exact GEMM modes
        def run(mode=mode):
            r = plan.execute(backend=backend, gemm=mode)
            synchronize(xp)
            return r
        contenders[f"qsimdist gemm={mode}"] = run
    times, results = interleaved(contenders, repeats)
    summ = ratio_summary(times, "qsimdist", "cotengra")
    a = complex(np.ravel(_host(results["qsimdist"], xp))[0])
    b = complex(np.ravel(_host(results["cotengra"], xp))[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    modes = {}
    for name in contenders:
        if name.startswith("qsimdist gemm="):
            v = _host(results[name], xp)
            ref = _host(results["qsimdist"], xp)
            modes[name.split("=", 1)[1]] = {
                "median_s": med[name],
                "speedup_vs_complex_gemm": ratio_summary(times, name, "qsimdist")[
                    "speedup_median_of_pairwise"],
                "rel_error_vs_complex64": relative_error(v, ref, np)}
    return {"case": label, "file": str(source), "n_qubits": n, "plan_seconds": plan_s,
            "flops": plan.stats.flops, "n_slices": plan.stats.n_slices,
            "peak_bytes": plan.stats.peak_bytes, "memory_limit": memory_limit,
            "seconds": times, **summ,
            "achieved_tflops": {k: plan.stats.flops / v / 1e12 for k, v in med.items()},
            "fraction_of_ceiling": {k: plan.stats.flops / v / ceiling for k, v in med.items()},
            "gemm_modes": modes,
            "amplitude": [a.real, a.imag],
            "relative_difference": abs(a - b) / max(abs(b), 1e-300)}


def executor_gemm_modes(xp) -> list[str]:
    """The executor's GEMM modes besides ``complex`` that this array module can run."""
    modes = ["3m"]
    if _tf32_available(xp):
        modes += ["tf32", "3m-tf32"]
    return modes


def _host(x, xp):
    return xp.asnumpy(x) if xp.__name__ == "cupy" else np.asarray(x)


def table_lines(result: dict) -> list[str]:
    """The short table printed last."""
    g = result["gemm"]
    lines = [f"qsimdist GPU check -- {result['device']['name']} -- {result['date']}"
             + (" (CPU DRY RUN: numpy stands in for cupy; not a GPU measurement)"
                if result["dry_run"] else ""),
             f"{'measured':<34}{'value':>14}  note"]
    lines.append(f"{'CGEMM ceiling (complex64)':<34}{g['ceiling_flops'] / 1e12:>11.3g} TF/s"
                 f"  n = {g['n']}")
    own = g["variants"]["complex64"]["rel_error_vs_complex128"]
    for name, v in g["variants"].items():
        if name == "complex64":
            continue
        lines.append(f"{name:<34}{v['effective_tflops']:>11.3g} TF/s  rel. error "
                     f"{v['rel_error_vs_complex64']:.1e} vs complex64, "
                     f"{v['rel_error_vs_complex128']:.1e} vs complex128 "
                     f"(complex64 itself {own:.1e})")
    for k, reason in g["skipped"].items():
        lines.append(f"{k:<34}{'—':>14}  {reason}")
    for r in result["same_path"]:
        lines.append(f"{r['case'] + ' qsimdist':<34}{r['achieved_tflops']['qsimdist']:>11.3g} TF/s"
                     f"  {100 * r['fraction_of_ceiling']['qsimdist']:.1f}% of ceiling, "
                     f"{r['median_s']['qsimdist']:.3f} s, {r['n_slices']} slices")
        lines.append(f"{r['case'] + ' cotengra':<34}{r['achieved_tflops']['cotengra']:>11.3g} TF/s"
                     f"  {100 * r['fraction_of_ceiling']['cotengra']:.1f}% of ceiling, "
                     f"{r['median_s']['cotengra']:.3f} s; qsimdist x"
                     f"{r['speedup_median_of_pairwise']:.2f} (median pairwise), "
                     f"rel. diff. {r['relative_difference']:.1e}")
        for mode, m in r.get("gemm_modes", {}).items():
            lines.append(f"{r['case'] + ' gemm=' + mode:<34}"
                         f"{r['achieved_tflops']['qsimdist gemm=' + mode]:>11.3g} TF/s"
                         f"  x{m['speedup_vs_complex_gemm']:.2f} vs complex GEMM, rel. error "
                         f"{m['rel_error_vs_complex64']:.1e} vs complex64")
    for s in result["skipped"]:
        lines.append(f"{s['case']:<34}{'skipped':>14}  {s['reason']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the GPU benchmark (or its CPU dry run); prints the table last. Returns the exit code."""
    from .suite import default_data_dir, generated_rqc, library_versions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true",
                    help="run every step on the CPU with numpy and small sizes")
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--data", default=None, help="reference data folder (circuit_n53_m12)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gemm-n", type=int, default=None, help="square GEMM size (default 16384)")
    ap.add_argument("--memory-fraction", type=float, default=0.4,
                    help="plans are sliced to this fraction of the device's memory")
    ap.add_argument("--search-repeats", type=int, default=32)
    ap.add_argument("--max-time", type=float, default=120.0, help="path search seconds per case")
    args = ap.parse_args(argv)
    if not 0 < args.memory_fraction <= 1:
        print("benchmarks.gpu: error: --memory-fraction must be in (0, 1]", file=sys.stderr)
        return 2
    if args.dry_run:
        xp, backend = np, "numpy"
    else:
        reason = gpu_reason()
        if reason is not None:
            print(f"benchmarks.gpu: error: no GPU to measure: {reason}. "
                  "Use --dry-run to check the script on the CPU.", file=sys.stderr)
            return 2
        import cupy as xp

        backend = "cupy"
    import datetime
    import tempfile

    data = Path(args.data) if args.data else default_data_dir()
    dev = device_info(xp)
    gemm_n = args.gemm_n or (256 if args.dry_run else 16384)
    result = {"schema": "benchmarks.gpu", "version": 1, "dry_run": args.dry_run,
              "command": " ".join(["python -m benchmarks.gpu", *(argv or sys.argv[1:])]),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": dev, "versions": library_versions(), "same_path": [], "skipped": []}
    result["gemm"] = gemm_variants(xp, gemm_n, args.repeats)
    ceiling = result["gemm"]["ceiling_flops"]
    limit = None if args.dry_run else int(args.memory_fraction * dev["memory_bytes"])
    with tempfile.TemporaryDirectory(prefix="qsimdist-gpu-") as tmp:
        grid = (3, 3, 4) if args.dry_run else (6, 6, 14)
        files = generated_rqc(*grid, seed=36, folder=Path(tmp))
        cases = [(f"rqc {grid[0]}x{grid[1]} m{grid[2]}", files["qsim"])]
        if args.dry_run:
            from qsimdist.bundled import bundled_circuit

            cases.append(("rqc_3x4_m8 (for n53m12)", bundled_circuit("rqc_3x4_m8.qsim")))
        elif (data / N53M12).is_file():
            cases.append(("circuit_n53_m12", data / N53M12))
        else:
            result["skipped"].append({"case": "circuit_n53_m12",
                                      "reason": f"{data / N53M12} not found (--data DIR)"})
        for label, path in cases:
            print(f"[gpu bench] {label}: planning and timing", file=sys.stderr, flush=True)
            try:
                result["same_path"].append(same_path(
                    label, path, xp, backend, limit, args.repeats, ceiling,
                    args.search_repeats, args.max_time))
            except Exception as exc:  # noqa: BLE001 - record and go on to the next case
                result["skipped"].append({"case": label,
                                          "reason": f"{type(exc).__name__}: {exc}"[:300]})
    if args.json:
        from qsimdist._fileio import atomic_write_text

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json, json.dumps(result, indent=1, default=str) + "\n")
    print()
    for line in table_lines(result):
        print(line)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
