"""The GPU check: every CuPy case, NCCL, cuTensorNet beside qsimdist, GEMM modes, E_P on CPU ranks.

    python -m benchmarks.gpu [--out DIR] [--data DIR] [--json FILE] [--budget 540]
    python -m benchmarks.gpu --dry-run        # on the CPU, numpy standing in for cupy

On a GPU machine (``scripts/gpu_check.sh`` installs the ``gpu`` extra and runs
this), each part runs in its own process with a time limit (the run as a whole
stays within ``--budget`` seconds, about nine minutes by default) and writes
``gpu_<part>.json`` under ``--out`` (default ``$OUT``, else a ``gpu-parts`` folder
beside ``--json``, else ``./gpu-check``);
``gpu_summary.json`` (and ``--json FILE``) gathers them:

* ``tests``: ``tests/test_gpu.py`` (every CuPy case: the local and MPI executors
  on the GPU, NCCL with one rank, TF32's error), with each failure's message;
* ``cupy``: local plans on CuPy against NumPy on every bundled circuit, both dtypes,
  and each GEMM mode's error against complex128;
* ``n30``: 100 of the n30 reference amplitudes on CuPy, against the reference up
  to one common phase;
* ``statevector``: the statevector route (NumPy, this machine's cores) at 28 and 30
  qubits beside the tensor network on CuPy;
* ``mpi_gpu``: two MPI ranks sharing the one GPU (host-staged) against one
  process; NCCL with one rank (``--comm auto`` picks it); whether NCCL itself
  accepts two ranks on one device (qsimdist refuses it: it says which NCCL did);
* ``same_path``: qsimdist beside cuTensorNet (the same path, and cuTensorNet's
  own) and cotengra on n53m10 and n30m14, alternating, best of 5, with TFLOP/s
  as a fraction of the measured CGEMM rate;
* ``gemm``: the CGEMM rate on square matrices and on the largest step shapes
  of the n53m10 plan (the paper's workload family), for each GEMM mode, with
  each mode's error against complex128;
* ``cpu_mpi``: with the machine's CPU cores, distributed against slice-only on
  n30 under ``mpiexec -n 8`` and ``-n 16``: measured E_P, R_P and E_P/R_P beside
  the prediction.

Without cupy or a device it exits with code 2 and one line saying so.
``--dry-run`` runs every part on the CPU at tiny sizes (numpy for cupy; the
MPI part with the CuPy stand-in of ``tests/array_standin.py`` and its NCCL on
MPI; cotengra's einsum in cuTensorNet's place; ``mpiexec -n 2``), in about a
minute, so the script is checked before GPU time is spent. A dry run measures
nothing about a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
N53M10 = "circuits/circuit_n53_m10_s0_e0_pABCDCDAB.qsim"
N30 = "circuits/circuit_n30_m14_s0_e0_pEFGH.qsim"
N12 = "circuits/circuit_n12_m14_s0_e0_pEFGH.qsim"
N30_AMPLITUDES = "circuits/amplitudes_n30_m14_s0_e0_pEFGH_10000.txt"
#: the parts, in the order they run (the most wanted first: a run cut short keeps them)
PARTS = ("tests", "cupy", "n30", "same_path", "gemm", "mpi_gpu", "statevector", "cpu_mpi")
#: seconds each part may take on a GPU machine (the run's --budget caps the sum)
PART_SECONDS = {"tests": 180, "cupy": 90, "n30": 90, "same_path": 180, "gemm": 90,
                "mpi_gpu": 120, "statevector": 150, "cpu_mpi": 240}
#: set in the parts' environment, so that tests/test_gpu.py does not start a dry run inside one
NESTED_ENV = "QSIMDIST_GPU_CHECK_NESTED"


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
        return {"name": f"CPU dry run: {m['cpu_model']}", "memory_bytes": m["memory_bytes"],
                "cores": m["cores"]}
    dev = xp.cuda.Device()
    props = xp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    free, total = dev.mem_info
    return {"name": name.decode() if isinstance(name, bytes) else str(name),
            "memory_bytes": int(total), "free_bytes_at_start": int(free),
            "compute_capability": dev.compute_capability,
            "cuda_runtime": xp.cuda.runtime.runtimeGetVersion(), "cores": os.cpu_count()}


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


def executor_gemm_modes(xp) -> list[str]:
    """The executor's GEMM modes besides ``complex`` that this array module can run."""
    modes = ["3m"]
    if _tf32_available(xp):
        modes += ["tf32", "3m-tf32"]
    return modes


def _host(x, xp):
    return xp.asnumpy(x) if xp.__name__ == "cupy" else np.asarray(x)


# ------------------------------------------------------------- cuTensorNet beside us


def cutensornet_contenders(eq: str, arrays, path, sliced, xp, dry_run: bool):
    """``({name: callable}, {name: why it did not run})`` contracting ``eq`` with
    cuTensorNet: along ``path`` (our path and slicing) and along its own path. In a dry run,
    cotengra's einsum along ``path`` stands in (there is no cuTensorNet on the CPU)."""
    if dry_run:
        import cotengra as ctg

        return {"cutensornet stand-in (cotengra einsum, same path)":
                lambda: ctg.einsum(eq, *arrays, optimize=path)}, {}
    try:
        try:
            from cuquantum.tensornet import Network
        except ImportError:
            from cuquantum import Network
    except ImportError as exc:
        return {}, {"cutensornet": f"cuquantum is not installed ({exc}): pip install "
                                   "cuquantum-python-cu12"}
    found, failed = {}, {}
    for label, optimize in (("cutensornet (same path)",
                             {"path": [tuple(p) for p in path],
                              **({"slicing": list(sliced)} if sliced else {})}),
                            ("cutensornet (own path)", {"samples": 8})):
        try:  # each variant on its own: one failing leaves the other measured
            net = Network(eq, *arrays)
            net.contract_path(optimize=optimize)
            net.autotune(iterations=3)
        except Exception as exc:  # noqa: BLE001 - cuTensorNet failing is a result
            failed[label] = f"{type(exc).__name__}: {exc}"[:300]
            continue

        def run(net=net):
            out = net.contract()
            synchronize(xp)
            return out

        found[label] = run
    return found, failed


def same_path(label: str, source: Path, xp, backend: str, memory_limit: int | None,
              repeats: int, ceiling: float, search_repeats: int, max_time: float | None,
              dry_run: bool = True) -> dict:
    """qsimdist (``backend``) beside cuTensorNet and cotengra on the plan's own tree, one
    amplitude, alternating rounds; ``best_s`` is the best of ``repeats``."""
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
    extra, skipped = cutensornet_contenders(tree.get_eq(), arrays, tree.get_path(),
                                            tuple(tree.sliced_inds), xp, dry_run)
    contenders.update(extra)
    times, results = interleaved(contenders, repeats)
    summ = ratio_summary(times, "qsimdist", "cotengra")
    a = complex(np.ravel(_host(results["qsimdist"], xp))[0])
    b = complex(np.ravel(_host(results["cotengra"], xp))[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
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
    others = {}
    for name in extra:
        v = complex(np.ravel(_host(results[name], xp))[0])
        others[name] = {"best_s": best[name], "median_s": med[name],
                        "qsimdist_speedup_best": best[name] / best["qsimdist"],
                        "relative_difference": abs(v - a) / max(abs(a), 1e-300)}
    return {"case": label, "file": str(source), "n_qubits": n, "plan_seconds": plan_s,
            "flops": plan.stats.flops, "n_slices": plan.stats.n_slices,
            "peak_bytes": plan.stats.peak_bytes, "memory_limit": memory_limit,
            "seconds": times, **summ, "best_of": repeats, "best_seconds": best,
            "achieved_tflops": {k: plan.stats.flops / v / 1e12 for k, v in med.items()},
            "achieved_tflops_best": {k: plan.stats.flops / v / 1e12 for k, v in best.items()},
            "fraction_of_ceiling": {k: plan.stats.flops / v / ceiling for k, v in med.items()},
            "gemm_modes": modes, "cutensornet": others, "cutensornet_skipped": skipped,
            "amplitude": [a.real, a.imag],
            "relative_difference": abs(a - b) / max(abs(b), 1e-300)}


# ------------------------------------------------------------------- the parts


def _limit(args, dev: dict) -> int | None:
    """Plans are sliced to this many bytes (a fraction of the device's memory; dry run: none)."""
    return None if args.dry_run else int(args.memory_fraction * dev["memory_bytes"])


def _data(args) -> Path:
    from .suite import default_data_dir

    return Path(args.data) if args.data else default_data_dir()


def _run(cmd: list[str], timeout: float, cwd: Path = ROOT) -> dict:
    """A subprocess's exit code, seconds and output tails (a timeout is reported, not raised)."""
    env = dict(os.environ, **{NESTED_ENV: "1"})
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env=env)
    except subprocess.TimeoutExpired as exc:
        return {"command": " ".join(cmd), "returncode": None, "timed_out": True,
                "seconds": time.perf_counter() - t,
                "stderr_tail": (exc.stderr or b"")[-1500:].decode(errors="replace")
                if isinstance(exc.stderr, bytes) else (exc.stderr or "")[-1500:]}
    return {"command": " ".join(cmd), "returncode": proc.returncode, "timed_out": False,
            "seconds": time.perf_counter() - t, "stdout": proc.stdout,
            "stderr_tail": proc.stderr[-1500:]}


def part_tests(args, xp, backend, dev) -> dict:
    """``tests/test_gpu.py`` (skipped with their reasons in a dry run), failures listed."""
    import xml.etree.ElementTree as ET

    xml = Path(args.out) / "gpu_tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
           "tests/test_gpu.py", "-k", "not dry_run", f"--junitxml={xml}"]
    run = _run(cmd, timeout=PART_SECONDS["tests"] - 10)
    out: dict = {"command": run["command"], "returncode": run["returncode"],
                 "seconds": run["seconds"], "timed_out": run["timed_out"]}
    if not xml.is_file():
        out["error"] = run["stderr_tail"]
        return out
    suite = ET.parse(xml).getroot()
    suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
    out.update({k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")})
    out["passed"] = out["tests"] - out["failures"] - out["errors"] - out["skipped"]
    out["failed"] = []
    out["skip_reasons"] = []
    for case in suite.iter("testcase"):
        for kind in ("failure", "error"):
            for node in case.findall(kind):
                out["failed"].append({"test": case.get("name"), "kind": kind,
                                      "message": (node.get("message") or "")[:600]})
        for node in case.findall("skipped"):
            out["skip_reasons"].append({"test": case.get("name"),
                                        "reason": (node.get("message") or "")[:300]})
    return out


def _bundled_cases(dry_run: bool) -> list[tuple[str, Path, str, str]]:
    """(name, file, order, pattern) for each bundled circuit (a .qsim where there is one)."""
    from qsimdist.bundled import circuits_dir
    from qsimdist.frontends import load

    chosen: dict[str, Path] = {}
    for path in sorted(circuits_dir().glob("*.q*")):
        if path.suffix in (".qsim", ".qasm") and (path.stem not in chosen
                                                  or path.suffix == ".qsim"):
            chosen[path.stem] = path
    cases = []
    for name, path in sorted(chosen.items()):
        n = load(str(path)).n_qubits
        opened = min(n, 2 if dry_run else 6)
        order = "natural" if path.suffix == ".qsim" else "qiskit"
        cases.append((name, path, order, "*" * opened + "0" * (n - opened)))
    return cases[:3] if dry_run else cases


def part_cupy(args, xp, backend, dev) -> dict:
    """Local plans on ``backend`` against NumPy on the bundled circuits, both dtypes; each
    GEMM mode's error against complex128."""
    import qsimdist

    rows = []
    for name, path, order, pattern in _bundled_cases(args.dry_run):
        row: dict = {"circuit": name, "pattern": pattern}
        refs = {}
        for dtype in ("complex128", "complex64"):
            plan = qsimdist.plan(str(path), bitstrings=pattern, order=order, dtype=dtype,
                                 memory_limit=_limit(args, dev) or "none",
                                 max_repeats=args.search_repeats)
            refs[dtype] = plan.execute()
            t = time.perf_counter()
            got = plan.execute(backend=backend)
            synchronize(xp)
            row[f"{dtype}_seconds"] = time.perf_counter() - t
            row[f"{dtype}_result_type"] = f"{type(got).__module__}.{type(got).__name__}"
            row[f"{dtype}_rel_error_vs_numpy"] = relative_error(_host(got, xp), refs[dtype], np)
            if dtype == "complex64":
                row["gemm_rel_error_vs_complex128"] = {
                    mode: relative_error(_host(plan.execute(backend=backend, gemm=mode), xp),
                                         refs["complex128"], np)
                    for mode in ["complex"] + executor_gemm_modes(xp)}
        rows.append(row)
    worst = {d: max(r[f"{d}_rel_error_vs_numpy"] for r in rows)
             for d in ("complex64", "complex128")}
    return {"circuits": rows, "worst_rel_error_vs_numpy": worst,
            "equal_to_numpy": worst["complex64"] <= 1e-5 and worst["complex128"] <= 1e-10}


def _dry_reference(folder: Path, count: int) -> tuple[Path, Path]:
    """A 12-qubit stand-in for the n30 reference: ``count`` seeded bitstrings of the bundled
    rqc_3x4_m12 with their statevector-route amplitudes times ``-i`` (a common phase, as
    the n30 file's convention differs from qsim's), in the reference file's format."""
    import qsimdist
    from qsimdist.bundled import bundled_circuit

    circuit = bundled_circuit("rqc_3x4_m12.qsim")
    rng = np.random.default_rng(30)
    bits = ["".join(rng.choice(["0", "1"], 12)) for _ in range(count)]
    res = qsimdist.amplitudes(str(circuit), bits, order="natural", dtype="complex128",
                              method="statevector", memory_limit="none")
    ref = folder / "amplitudes_dry_run.txt"
    ref.write_text("".join(f"{b} {(-1j * a).real:.9e} {(-1j * a).imag:.9e}\n"
                           for b, a in zip(bits, res.amplitudes)))
    return Path(circuit), ref


def part_n30(args, xp, backend, dev) -> dict:
    """The first ``--n30-count`` reference amplitudes of circuit_n30_m14 on ``backend``
    (dry run: a 12-qubit stand-in reference made here, same code path)."""
    import tempfile

    import qsimdist

    from .reference_n30 import compare, read_reference

    data = _data(args)
    count = args.n30_count or (4 if args.dry_run else 100)
    with tempfile.TemporaryDirectory(prefix="qsimdist-gpu-n30-") as tmp:
        if args.dry_run:
            circuit, reference = _dry_reference(Path(tmp), count)
        elif (data / N30_AMPLITUDES).is_file():
            circuit, reference = data / N30, data / N30_AMPLITUDES
        else:
            return {"skipped": f"{data / N30_AMPLITUDES} not found (--data DIR)"}
        bits, ref = read_reference(reference)
    bits, ref = bits[:count], ref[:count]
    t = time.perf_counter()
    res = qsimdist.amplitudes(str(circuit), bits, order="natural", dtype="complex64",
                              backend=backend, method="tensor-network",
                              memory_limit=_limit(args, dev), max_repeats=args.search_repeats)
    seconds = time.perf_counter() - t
    got = np.array([res.get(b) for b in bits])
    return {"circuit": str(circuit), "reference": str(reference)
            if not args.dry_run else "made here by the statevector route (dry run)",
            "amplitudes": count, "backend": backend, "seconds": seconds,
            "contractions": res.stats.get("contractions"), **compare(got, ref)}


def part_statevector(args, xp, backend, dev) -> dict:
    """The statevector route (NumPy, on this machine's cores) beside the tensor network on
    ``backend``, one amplitude per circuit: 28 and 30 qubits (dry run: 12)."""
    import tempfile

    import qsimdist
    from qsimdist.bundled import bundled_circuit

    from .suite import generated_rqc

    data = _data(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="qsimdist-gpu-sv-") as tmp:
        if args.dry_run:
            cases = [("rqc_3x4_m12 (12 qubits)", bundled_circuit("rqc_3x4_m12.qsim"))]
            if (data / N12).is_file():
                cases.append(("circuit_n12_m14", data / N12))
        else:
            cases = [("rqc 4x7 m14 (28 qubits)",
                      generated_rqc(4, 7, 14, seed=28, folder=Path(tmp))["qsim"])]
            if (data / N30).is_file():
                cases.append(("circuit_n30_m14", data / N30))
        for label, path in cases:
            from qsimdist.frontends import load

            n = load(str(path)).n_qubits
            bits = ["0" * n]
            row: dict = {"case": label, "n_qubits": n}
            try:
                t = time.perf_counter()
                sv = qsimdist.amplitudes(str(path), bits, order="natural", dtype="complex64",
                                         method="statevector", memory_limit="none")
                row["statevector_seconds"] = time.perf_counter() - t
                row["statevector_route"] = sv.stats.get("method")
                t = time.perf_counter()
                tn = qsimdist.amplitudes(str(path), bits, order="natural", dtype="complex64",
                                         method="tensor-network", backend=backend,
                                         memory_limit=_limit(args, dev),
                                         max_repeats=args.search_repeats)
                row["tensor_network_seconds"] = time.perf_counter() - t
                a, b = complex(sv.amplitudes[0]), complex(tn.amplitudes[0])
                row["amplitude_statevector"] = [a.real, a.imag]
                row["relative_difference"] = abs(a - b) / max(abs(a), 1e-300)
            except Exception as exc:  # noqa: BLE001 - one case failing is its result
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            rows.append(row)
    return {"cases": rows, "statevector_backend": "numpy (the statevector route runs on "
            "the CPU)", "tensor_network_backend": backend}


def part_mpi_gpu(args, xp, backend, dev) -> dict:
    """Two ranks on one GPU (host-staged) against one process, NCCL with one rank, and
    whether NCCL accepts two ranks on one device (``tests/comm_cases.py``)."""
    import shutil

    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        return {"skipped": "mpiexec not found (pip install 'qsimdist[mpi]')"}
    if args.dry_run:  # the CuPy stand-in, its NCCL on MPI
        runs = [("two ranks, CuPy stand-in, each --comm choice", 2, "executor"),
                ("one rank, CuPy stand-in, each --comm choice", 1, "executor"),
                ("collectives against numpy, two ranks", 2, "interface")]
    else:
        runs = [("two ranks sharing the GPU, each --comm choice", 2, "gpu_executor"),
                ("one rank, each --comm choice (auto: NCCL)", 1, "gpu_executor"),
                ("NCCL collectives against numpy, one rank", 1, "gpu_interface"),
                ("NCCL itself, two ranks on one device", 2, "gpu_nccl_shared_device")]
    out = {"runs": []}
    for label, n, case in runs:
        run = _run([mpiexec, "-n", str(n), sys.executable, "-m", "mpi4py", "comm_cases.py",
                    case], timeout=60 if case == "gpu_nccl_shared_device" else 100,
                   cwd=ROOT / "tests")
        row = {"what": label, "ranks": n, "case": case, "returncode": run["returncode"],
               "timed_out": run["timed_out"], "seconds": run["seconds"]}
        lines = [ln for ln in run.get("stdout", "").splitlines() if ln.startswith(("{", "["))]
        if run["returncode"] == 0 and len(lines) == 1:
            row["result"] = json.loads(lines[0])
        else:
            row["stderr_tail"] = run["stderr_tail"]
        out["runs"].append(row)
    return out


def part_same_path(args, xp, backend, dev) -> dict:
    """qsimdist beside cuTensorNet and cotengra on the same path (n53m10, n30m14)."""
    import tempfile

    from .suite import generated_rqc

    data = _data(args)
    gemm_n = args.gemm_n or (256 if args.dry_run else 8192)
    ceiling = gemm_variants(xp, gemm_n, 2)["ceiling_flops"]
    repeats = args.repeats or (2 if args.dry_run else 5)
    result: dict = {"ceiling_flops": ceiling, "ceiling_gemm_n": gemm_n, "same_path": [],
                    "skipped": []}
    with tempfile.TemporaryDirectory(prefix="qsimdist-gpu-") as tmp:
        if args.dry_run:
            from qsimdist.bundled import bundled_circuit

            files = generated_rqc(3, 3, 4, seed=36, folder=Path(tmp))
            cases = [("rqc 3x3 m4 (for n53m10)", files["qsim"]),
                     ("rqc_3x4_m8 (for n30m14)", bundled_circuit("rqc_3x4_m8.qsim"))]
        else:
            cases = []
            for label, rel in (("circuit_n53_m10", N53M10), ("circuit_n30_m14", N30)):
                if (data / rel).is_file():
                    cases.append((label, data / rel))
                else:
                    result["skipped"].append({"case": label,
                                              "reason": f"{data / rel} not found (--data DIR)"})
        for label, path in cases:
            print(f"[gpu check] {label}: planning and timing", file=sys.stderr, flush=True)
            try:
                result["same_path"].append(same_path(
                    label, path, xp, backend, _limit(args, dev), repeats, ceiling,
                    args.search_repeats, args.max_time, dry_run=args.dry_run))
            except Exception as exc:  # noqa: BLE001 - record and go on to the next case
                result["skipped"].append({"case": label,
                                          "reason": f"{type(exc).__name__}: {exc}"[:300]})
    return result


def step_rates(plan, xp, backend: str, modes: list[str], top: int, repeats: int,
               ceiling: float) -> list[dict]:
    """The ``top`` steps of ``plan`` with the most FLOPs, each run alone on random operands
    in every GEMM mode: FLOP rate, its fraction of ``ceiling``, error against complex128."""
    from qsimdist.executors.local import BufferPool, gemm_context, run_step

    size = plan.network.size_dict

    def flops(s) -> float:  # 8 real FLOPs per complex multiply-add
        return 8.0 * math.prod(size[m] for m in s.out_modes) * math.prod(
            size[m] for m in set(s.lhs_modes) & set(s.rhs_modes) - set(s.out_modes))

    rows = []
    for s in sorted(plan.steps, key=flops, reverse=True)[:top]:
        shapes = [tuple(size[m] for m in modes_) for modes_ in (s.lhs_modes, s.rhs_modes)]
        a64, b64 = (_random_complex(np, sh, np.complex64, k) for k, sh in enumerate(shapes))
        ref_pool = BufferPool(np, np.complex128)
        ref = run_step(s, a64.astype(np.complex128), b64.astype(np.complex128), np, ref_pool,
                       compiled=False)
        a, b = xp.asarray(a64), xp.asarray(b64)
        row = {"kernel": s.kernel, "x_view": s.x_view, "y_view": s.y_view,
               "out_view": s.out_view, "m": s.m, "n": s.n, "k": s.k, "flops": flops(s),
               "modes": {}}
        for mode in ["complex"] + modes:
            pool = BufferPool(xp, np.complex64)

            def once(s=s, a=a, b=b, pool=pool, mode=mode) -> None:
                pool.put(run_step(s, a, b, xp, pool, False, mode))

            with gemm_context(mode, xp):
                secs = _best_seconds(once, xp, repeats)
                out = run_step(s, a, b, xp, pool, False, mode)
            row["modes"][mode] = {"seconds": secs, "tflops": row["flops"] / secs / 1e12,
                                  "fraction_of_ceiling": row["flops"] / secs / ceiling,
                                  "rel_error_vs_complex128": relative_error(_host(out, xp),
                                                                            ref, np)}
        rows.append(row)
    return rows


def part_gemm(args, xp, backend, dev) -> dict:
    """CGEMM on square matrices and on the n53m10 plan's largest step shapes, per GEMM mode."""
    import qsimdist
    from qsimdist.bundled import bundled_circuit
    from qsimdist.frontends import load

    gemm_n = args.gemm_n or (256 if args.dry_run else 16384)
    repeats = args.repeats or (1 if args.dry_run else 3)
    square = gemm_variants(xp, gemm_n, repeats)
    data = _data(args)
    if args.dry_run or not (data / N53M10).is_file():
        source, label = bundled_circuit("rqc_4x5_m12.qsim"), "rqc_4x5_m12 (stand-in)"
    else:
        source, label = data / N53M10, "circuit_n53_m10"
    n = load(str(source)).n_qubits
    plan = qsimdist.plan(str(source), bitstrings="0" * n, order="natural", memory_limit="none",
                         max_repeats=args.search_repeats, max_time=args.max_time)
    steps = step_rates(plan, xp, backend, executor_gemm_modes(xp), 3 if args.dry_run else 8,
                       repeats, square["ceiling_flops"])
    return {"square": square, "steps_of": label, "steps": steps}


def part_cpu_mpi(args, xp, backend, dev) -> dict:
    """Distributed against slice-only with CPU ranks: ``mpiexec -n P`` for each P."""
    import shutil

    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        return {"skipped": "mpiexec not found (pip install 'qsimdist[mpi]')"}
    data = _data(args)
    if args.dry_run:
        from qsimdist.bundled import bundled_circuit

        circuit, ranks = str(bundled_circuit("rqc_3x4_m12.qsim")), [2]
    elif (data / N30).is_file():
        circuit, ranks = str(data / N30), [8, 16]
    else:
        return {"skipped": f"{data / N30} not found (--data DIR)"}
    out = {"circuit": circuit, "rows": []}
    for p in ranks:
        target = Path(args.out) / f"gpu_cpu_mpi_{p}.json"
        run = _run([mpiexec, "-n", str(p), sys.executable, "-m", "mpi4py", "-m",
                    "benchmarks.gpu", "--rank-job", "ep", "--circuit", circuit, "--json",
                    str(target), "--repeats", str(args.repeats or (1 if args.dry_run else 3)),
                    "--search-repeats", str(args.search_repeats)],
                   timeout=(PART_SECONDS["cpu_mpi"] - 20) / len(ranks))
        if run["returncode"] == 0 and target.is_file():
            out["rows"].append(json.loads(target.read_text()))
        else:
            out["rows"].append({"ranks": p, "returncode": run["returncode"],
                                "timed_out": run["timed_out"],
                                "stderr_tail": run["stderr_tail"]})
    return out


def rank_job_ep(args) -> None:
    """Under ``mpiexec -n P``: slice-only and distributed schedules of one amplitude of
    ``--circuit``, calibrated as ``benchmarks.mpi`` does, then alternated ``--repeats``
    times; rank 0 writes measured E_P, R_P and the prediction to ``--json``."""
    from mpi4py import MPI

    import qsimdist
    from qsimdist.executors.run_stats import trace_rows
    from qsimdist.frontends import load
    from qsimdist.hardware import load_profile
    from qsimdist.hardware.calibrate import fit_profile

    from .mpi import broadcast_plans, make_plans, timed_runs

    comm = MPI.COMM_WORLD
    t0 = time.perf_counter()
    base = None
    if comm.rank == 0:
        n = load(args.circuit).n_qubits
        base = qsimdist.plan(args.circuit, bitstrings="0" * n, order="natural",
                             memory_limit="none", max_repeats=args.search_repeats)
    info: dict = {}

    def build(profile):
        def run():
            a, b, limit, biggest = make_plans(base, 0.6, comm.size, profile)
            info.update(limit=limit, biggest=biggest)
            return {"slice_only": a.to_dict(), "distributed": b.to_dict()}
        return run

    plans = broadcast_plans(comm, build(load_profile("local-cpu")))
    _, gathered, _ = timed_runs(comm, plans, 1)
    fitted = None
    if comm.rank == 0:
        rows = [r for k, p in plans.items() for r in trace_rows(p, gathered[k])]
        fitted = fit_profile(load_profile("local-cpu"), rows, base.dtype, "local-cpu-fitted")
    fitted = comm.bcast(fitted, root=0)
    plans = broadcast_plans(comm, build(fitted))
    times, gathered, results = timed_runs(comm, plans, args.repeats or 3)
    if comm.rank != 0:
        return
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    so, di = plans["slice_only"].schedule, plans["distributed"].schedule
    r_p = so.predicted.flops_executed / di.predicted.flops_executed
    e_p = med["slice_only"] / med["distributed"]
    e_pred = so.predicted.seconds / di.predicted.seconds
    err = float(np.abs(results["slice_only"] - results["distributed"]).max()
                / max(np.abs(results["slice_only"]).max(), 1e-30))
    out = {"ranks": comm.size, "circuit": args.circuit, "wall_s": time.perf_counter() - t0,
           "limit_bytes": info["limit"], "largest_intermediate_bytes": info["biggest"],
           "measured_seconds": med, "all_seconds": times,
           "predicted_seconds": {"slice_only": so.predicted.seconds,
                                 "distributed": di.predicted.seconds},
           "E_P_measured": e_p, "E_P_predicted": e_pred, "R_P": r_p, "E_P_over_R_P": e_p / r_p,
           "group_size_distributed": di.group_size,
           "slices": {"slice_only": so.n_slices, "distributed": di.n_slices},
           "comm": sorted({st["comm"] for v in gathered.values() for st in v}),
           "rel_diff_between_results": err}
    Path(args.json).write_text(json.dumps(out, indent=1))


PART_FUNCTIONS = {"tests": part_tests, "cupy": part_cupy, "n30": part_n30,
                  "statevector": part_statevector, "mpi_gpu": part_mpi_gpu,
                  "same_path": part_same_path, "gemm": part_gemm, "cpu_mpi": part_cpu_mpi}


def _module(args):
    """(array module, backend name) of the run: numpy in a dry run, else cupy."""
    if args.dry_run:
        return np, "numpy"
    import cupy

    return cupy, "cupy"


def run_part(args) -> int:
    """One part in this process: its JSON to ``--out``/gpu_<part>.json."""
    xp, backend = _module(args)
    dev = device_info(xp)
    t = time.perf_counter()
    try:
        body = PART_FUNCTIONS[args.part](args, xp, backend, dev)
        status = "skipped" if "skipped" in body and len(body) == 1 else "done"
    except Exception as exc:  # noqa: BLE001 - the part's failure is its result
        import traceback

        body, status = {"error": f"{type(exc).__name__}: {exc}"[:600],
                        "traceback": traceback.format_exc()[-3000:]}, "failed"
    record = {"part": args.part, "status": status, "dry_run": args.dry_run,
              "seconds": time.perf_counter() - t, "device": dev, **body}
    path = Path(args.out) / f"gpu_{args.part}.json"
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    return 0


# ----------------------------------------------------------------- the whole run


def _part_line(rec: dict) -> str:
    """One line per part for the table printed last."""
    name, status = rec["part"], rec.get("status")
    if status != "done":
        why = rec.get("skipped") or rec.get("error") or rec.get("reason") or ""
        return f"{name:<12} {status}: {why}"[:200]
    if name == "tests":
        fails = ", ".join(f["test"] for f in rec.get("failed", [])[:4])
        return (f"{name:<12} {rec.get('passed', 0)} passed, {rec.get('failures', 0)} failed, "
                f"{rec.get('errors', 0)} errors, {rec.get('skipped', 0)} skipped"
                + (f" ({fails})" if fails else ""))
    if name == "cupy":
        w = rec["worst_rel_error_vs_numpy"]
        return (f"{name:<12} {len(rec['circuits'])} circuits; worst error vs numpy "
                f"{w['complex64']:.1e} (c64), {w['complex128']:.1e} (c128)")
    if name == "n30":
        return (f"{name:<12} {rec['amplitudes']} amplitudes in {rec['seconds']:.2f} s; max "
                f"relative deviation {rec['max_relative_deviation']:.1e}")
    if name == "statevector":
        parts = [f"{c['case']}: " + (f"sv {c['statevector_seconds']:.2f} s, tn "
                                     f"{c['tensor_network_seconds']:.2f} s, diff "
                                     f"{c['relative_difference']:.1e}" if "error" not in c
                                     else c["error"][:60]) for c in rec["cases"]]
        return f"{name:<12} " + "; ".join(parts)
    if name == "mpi_gpu":
        bits = []
        for r in rec["runs"]:
            res = r.get("result")
            if isinstance(res, list):
                chosen = ",".join(f"{x['choice']}->{x.get('comm') or 'refused'}" for x in res)
                bits.append(f"-n {r['ranks']}: {chosen}")
            elif isinstance(res, dict):
                bits.append(f"-n {r['ranks']} {r['case']}: ok")
            else:
                bits.append(f"-n {r['ranks']} {r['case']}: exit {r['returncode']}")
        return f"{name:<12} " + "; ".join(bits)
    if name == "same_path":
        bits = [f"{c['case']}: qsimdist {c['achieved_tflops_best']['qsimdist']:.3g} TF/s "
                f"({100 * c['fraction_of_ceiling']['qsimdist']:.0f}% of CGEMM)"
                + "".join(f", {k} x{v['qsimdist_speedup_best']:.2f}"
                          for k, v in c["cutensornet"].items())
                + "".join(f", {k} not run ({why[:80]})"
                          for k, why in (c.get("cutensornet_skipped") or {}).items())
                for c in rec["same_path"]]
        return f"{name:<12} " + "; ".join(bits or ["no case ran"])
    if name == "gemm":
        sq = rec["square"]
        return (f"{name:<12} CGEMM {sq['ceiling_flops'] / 1e12:.3g} TF/s (n={sq['n']}); "
                f"{len(rec['steps'])} step shapes of {rec['steps_of']}")
    if name == "cpu_mpi":
        bits = [f"P={r['ranks']}: E_P {r['E_P_measured']:.2f} (pred. {r['E_P_predicted']:.2f}),"
                f" R_P {r['R_P']:.2f}, E_P/R_P {r['E_P_over_R_P']:.2f}" if "R_P" in r
                else f"P={r['ranks']}: exit {r.get('returncode')}" for r in rec["rows"]]
        return f"{name:<12} " + "; ".join(bits)
    return f"{name:<12} done"


def table_lines(result: dict) -> list[str]:
    """The short table printed last: one line per part, then the GEMM and same-path rows."""
    lines = [f"qsimdist GPU check -- {result['device']['name']} -- {result['date']}"
             + (" (CPU DRY RUN: numpy stands in for cupy; not a GPU measurement)"
                if result["dry_run"] else "")]
    lines += [_part_line(rec) for rec in result.get("parts", [])]
    g = result.get("gemm")
    if g:
        lines.append(f"{'measured':<34}{'value':>14}  note")
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
    for s in result.get("skipped", []):
        lines.append(f"{s['case']:<34}{'skipped':>14}  {s['reason']}")
    for r in result.get("same_path", []):
        lines.append(f"{r['case'] + ' qsimdist':<34}{r['achieved_tflops']['qsimdist']:>11.3g} TF/s"
                     f"  {100 * r['fraction_of_ceiling']['qsimdist']:.1f}% of ceiling, "
                     f"{r['median_s']['qsimdist']:.3f} s, {r['n_slices']} slices")
        for name, c in r.get("cutensornet", {}).items():
            lines.append(f"{r['case'] + ' ' + name.split(' (')[0]:<34}"
                         f"{r['achieved_tflops_best'][name]:>11.3g} TF/s  best of "
                         f"{r.get('best_of', '?')} {c['best_s']:.3f} s ({name}); qsimdist "
                         f"x{c['qsimdist_speedup_best']:.2f}, rel. diff. "
                         f"{c['relative_difference']:.1e}")
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
    return lines


def _common_args(args) -> list[str]:
    out = ["--out", str(args.out), "--memory-fraction", str(args.memory_fraction),
           "--search-repeats", str(args.search_repeats)]
    for flag, value in (("--data", args.data), ("--repeats", args.repeats),
                        ("--gemm-n", args.gemm_n), ("--max-time", args.max_time),
                        ("--n30-count", args.n30_count)):
        if value is not None:
            out += [flag, str(value)]
    return out + (["--dry-run"] if args.dry_run else [])


def run_all(args, argv) -> int:
    """Every part of ``--parts`` in its own process, within ``--budget`` seconds."""
    import datetime

    from .suite import library_versions

    xp, _ = _module(args)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    parts = []
    for name in args.parts:
        left = args.budget - (time.perf_counter() - started)
        cap = PART_SECONDS[name] if not args.dry_run else 120
        if left < 15:
            parts.append({"part": name, "status": "not run",
                          "reason": f"the run's budget of {args.budget:.0f} s was spent"})
            continue
        print(f"[gpu check] part {name} (at most {min(cap, left):.0f} s)", file=sys.stderr,
              flush=True)
        path = Path(args.out) / f"gpu_{name}.json"
        path.unlink(missing_ok=True)
        run = _run([sys.executable, "-m", "benchmarks.gpu", "--part", name,
                    *_common_args(args)], timeout=min(cap, left))
        if path.is_file():
            parts.append(json.loads(path.read_text()))
        else:
            parts.append({"part": name, "status": "timed out" if run["timed_out"] else "failed",
                          "seconds": run["seconds"], "error": run["stderr_tail"][-600:]})
            path.write_text(json.dumps(parts[-1], indent=1) + "\n")
    by_name = {p["part"]: p for p in parts}
    same = by_name.get("same_path", {})
    result = {"schema": "benchmarks.gpu", "version": 2, "dry_run": args.dry_run,
              "command": " ".join(["python -m benchmarks.gpu",
                                   *(sys.argv[1:] if argv is None else argv)]),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "wall_seconds": time.perf_counter() - started,
              "device": device_info(xp), "versions": library_versions(), "parts": parts,
              "gemm": by_name.get("gemm", {}).get("square"),
              "same_path": same.get("same_path", []), "skipped": same.get("skipped", [])}
    text = json.dumps(result, indent=1, default=str) + "\n"
    (Path(args.out) / "gpu_summary.json").write_text(text)
    if args.json:
        from qsimdist._fileio import atomic_write_text

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json, text)
    print()
    for line in table_lines(result):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the GPU check (or its CPU dry run); prints the table last. Returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true",
                    help="run every part on the CPU with numpy and tiny sizes")
    ap.add_argument("--out", default=None,
                    help="folder for the parts' JSON (default $OUT, else beside --json, "
                    "else ./gpu-check)")
    ap.add_argument("--json", default=None, help="also write the summary here")
    ap.add_argument("--data", default=None, help="reference data folder")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole run (default 540; dry run 300)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--gemm-n", type=int, default=None, help="square GEMM size")
    ap.add_argument("--memory-fraction", type=float, default=0.4,
                    help="plans are sliced to this fraction of the device's memory")
    ap.add_argument("--search-repeats", type=int, default=None)
    ap.add_argument("--max-time", type=float, default=None, help="path search seconds per plan")
    ap.add_argument("--n30-count", type=int, default=None, help="reference amplitudes of n30")
    ap.add_argument("--part", default=None, help=argparse.SUPPRESS)  # one part, in a child
    ap.add_argument("--rank-job", default=None, help=argparse.SUPPRESS)  # under mpiexec
    ap.add_argument("--circuit", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not 0 < args.memory_fraction <= 1:
        print("benchmarks.gpu: error: --memory-fraction must be in (0, 1]", file=sys.stderr)
        return 2
    if args.search_repeats is None:
        args.search_repeats = 2 if args.dry_run else 16
    if args.max_time is None:
        args.max_time = 5.0 if args.dry_run else 30.0
    if args.rank_job == "ep":
        rank_job_ep(args)
        return 0
    # the parts' files: --out, else $OUT, else beside --json, else ./gpu-check
    args.out = (args.out or os.environ.get("OUT")
                or (str(Path(args.json).parent / "gpu-parts") if args.json else "gpu-check"))
    args.parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        print(f"benchmarks.gpu: error: unknown part {unknown[0]!r}; valid: {', '.join(PARTS)}",
              file=sys.stderr)
        return 2
    if args.budget is None:
        args.budget = 300.0 if args.dry_run else 540.0
    if not args.dry_run:
        reason = gpu_reason()
        if reason is not None:
            print(f"benchmarks.gpu: error: no GPU to measure: {reason}. "
                  "Use --dry-run to check the script on the CPU.", file=sys.stderr)
            return 2
    if args.part is not None:
        return run_part(args)
    return run_all(args, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
