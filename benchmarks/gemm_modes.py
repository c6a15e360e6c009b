"""The executor's GEMM modes side by side: speed against the complex GEMM, error against
complex64 and complex128.

    python -m benchmarks.gemm_modes [FILE ...] [--open K] [--backend numpy|cupy]
                                        [--repeats R] [--json OUT]

For each circuit (default: the bundled rqc_4x5_m12 with 4 open qubits, and
``circuit_n30_m14`` from the reference data when it is there), one plan is
made (complex64) and run with every GEMM mode this backend offers
(``complex``, ``3m``; on CuPy also ``tf32`` and ``3m-tf32``), alternating, for
``--repeats`` rounds after a warm-up. The same plan's path run in complex128
is the reference. Reports per mode: median seconds, the median of pairwise
speed ratios against ``complex``, how many steps the mode changed, and the
relative error (2-norm over the output) against the complex64 result and
against complex128.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from qsimdist.errors import QsimdistError
from .suite import default_data_dir, interleaved, library_versions, ratio_summary

N30 = "circuits/circuit_n30_m14_s0_e0_pEFGH.qsim"


#: a network whose GEMMs are large enough for the 3M product (circuit amplitudes here are
#: thin GEMMs, min(m, n, k) <= 8): cotengra's random 3-regular equation, 12 tensors,
#: bonds 16-32, seed 1; one step holds 87% of its 1.3e10 FLOPs
SYNTHETIC = ("random_reg3_n12_d16-32", dict(n=12, reg=3, d_min=16, d_max=32, seed=1))


def _cases(files: list[str], data: Path) -> list[tuple[str, object]]:
    if files:
        return [(Path(f).name, Path(f)) for f in files]
    from qsimdist.bundled import bundled_circuit

    cases: list[tuple[str, object]] = [("rqc_4x5_m12", bundled_circuit("rqc_4x5_m12.qasm"))]
    if (data / N30).is_file():
        cases.append(("circuit_n30_m14", data / N30))
    else:
        print(f"[gemm modes] {data / N30} not found: circuit_n30_m14 not measured",
              file=sys.stderr)
    cases.append(SYNTHETIC)
    return cases


def _synthetic(spec: dict):
    import cotengra as ctg

    from qsimdist.network import Network

    inputs, output, _, size_dict = ctg.utils.rand_equation(
        spec["n"], spec["reg"], n_out=0, d_min=spec["d_min"], d_max=spec["d_max"],
        seed=spec["seed"])
    return Network(inputs, output, size_dict).with_random_arrays(spec["seed"])


def measure(label: str, source, open_qubits: int, backend: str, repeats: int,
            search_repeats: int) -> dict:
    """``source``: a circuit file, or a :data:`SYNTHETIC` spec (dict)."""
    import qsimdist
    from qsimdist.executors.local import array_module, gauss_applies
    from qsimdist.frontends import load
    from qsimdist.planner.path import PathOptions
    from qsimdist.planner.plan import make_plan

    from .gpu import executor_gemm_modes, relative_error, synchronize

    xp = array_module(backend)
    opts = PathOptions(max_repeats=search_repeats, cache=True, parallel=False)
    if isinstance(source, dict):
        net = _synthetic(source)
        n, open_qubits = 0, 0
        plan = make_plan(net, dtype="complex64", path_options=opts)
        exact = make_plan(net, dtype="complex128", path_options=opts)
    else:
        n = load(str(source)).n_qubits
        pattern = "*" * open_qubits + "0" * (n - open_qubits)
        plan = qsimdist.plan(str(source), bitstrings=pattern, order="natural",
                             path_options=opts, memory_limit=None)
        exact = qsimdist.plan(str(source), bitstrings=pattern, order="natural",
                              path_options=opts, memory_limit=None, dtype="complex128")
    host = (lambda a: xp.asnumpy(a)) if backend == "cupy" else np.asarray
    reference = host(exact.execute(backend=backend))
    modes = ["complex", *executor_gemm_modes(xp)]

    def runner(mode):
        def run():
            r = plan.execute(backend=backend, gemm=mode)
            synchronize(xp)
            return r
        return run

    times, results = interleaved({m: runner(m) for m in modes}, repeats)
    base = host(results["complex"])
    changed = sum(1 for s in plan.steps if not s.loop and gauss_applies(s))
    rows = {}
    for m in modes:
        out = host(results[m])
        rows[m] = {"median_s": statistics.median(times[m]),
                   "speedup_vs_complex": (ratio_summary(times, m, "complex")
                                          ["speedup_median_of_pairwise"]),
                   "steps_changed": 0 if m == "complex" else (
                       changed if m.startswith("3m") else len(plan.steps)),
                   "rel_error_vs_complex64": relative_error(out, base, np),
                   "rel_error_vs_complex128": relative_error(out, reference, np)}
    return {"case": label, "file": str(source), "n_qubits": n, "open_qubits": open_qubits,
            "flops": plan.stats.flops, "steps": len(plan.steps), "backend": backend,
            "seconds": times, "modes": rows}


def table(results: list[dict]) -> list[str]:
    lines = ["| case | mode | median (s) | speed vs complex (median pairwise) | steps changed "
             "| rel. error vs complex64 | rel. error vs complex128 |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        for m, v in r["modes"].items():
            what = f" ({r['open_qubits']} open)" if r["n_qubits"] else ""
            lines.append(f"| {r['case']}{what} | {m} | "
                         f"{v['median_s']:.3f} | {v['speedup_vs_complex']:.2f} | "
                         f"{v['steps_changed']}/{r['steps']} | "
                         f"{v['rel_error_vs_complex64']:.1e} | "
                         f"{v['rel_error_vs_complex128']:.1e} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gemm_modes",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="circuit files (default: see the module doc)")
    ap.add_argument("--open", type=int, default=None,
                    help="open qubits per circuit (default 4 for the bundled circuit, 0 else)")
    ap.add_argument("--backend", default="numpy", help="numpy or cupy")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--search-repeats", type=int, default=16)
    ap.add_argument("--data", default=None, help="reference data folder")
    ap.add_argument("--json", default=None, help="write every number here")
    args = ap.parse_args(argv)
    if args.repeats < 1 or (args.open is not None and args.open < 0):
        print("benchmarks.gemm_modes: error: --repeats must be >= 1 and --open >= 0",
              file=sys.stderr)
        return 2
    data = Path(args.data) if args.data else default_data_dir()
    results = []
    try:
        for label, path in _cases(args.files, data):
            k = args.open if args.open is not None else (4 if label == "rqc_4x5_m12" else 0)
            print(f"[gemm modes] {label}: planning and timing", file=sys.stderr, flush=True)
            results.append(measure(label, path, k, args.backend, args.repeats,
                                   args.search_repeats))
    except QsimdistError as exc:
        print(f"benchmarks.gemm_modes: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"schema": "benchmarks.gemm_modes", "version": 1,
             "command": " ".join(["python -m benchmarks.gemm_modes", *(argv or sys.argv[1:])]),
             "versions": library_versions(), "results": results}, indent=1))
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
