"""``python -m benchmarks run``: qsimdist side by side with what users would otherwise pick.

    python -m benchmarks run [--suite tiny|quick|full] [--sections NAME,...] [--json FILE] [--out DIR]
        [--report]

Every comparison runs in this one process (the MPI one in an ``mpiexec``
subprocess, the cold first-amplitude runs in fresh subprocesses), contenders
alternating: one warm-up round, then ``repeats`` rounds, each contender once per
round. Reported: medians, the median of the pairwise ratios (round by round),
and every raw time, so a noisy machine shows as spread rather than bias.

Comparisons:

* **same path** -- :meth:`Plan.execute` against ``cotengra.ContractionTree.contract``
  on the plan's own tree and arrays (NumPy), with the achieved GFLOP/s beside
  this run's measured complex64 GEMM rate and copy bandwidth, and per-step
  times of one slice;
* **end to end** -- one amplitude from a circuit file: qsimdist against quimb's
  ``Circuit.amplitude`` with the same hyper-optimiser budget (trials), and
  against Qiskit Aer's statevector (up to 28 qubits);
* **mpi** -- ``python -m benchmarks.mpi`` under ``mpiexec -n P``: measured
  E_P and R_P, the communication share, predicted against measured time;
* **planning** -- planning with an empty path cache against re-planning with
  the structure cache warm, and the time to the first amplitude in a fresh
  process (``python -m qsimdist amplitude``) with empty caches;
* **primitives** -- Qiskit SamplerV2 / EstimatorV2 of qsimdist against Qiskit
  Aer's, each contender in its own subprocess
  (:func:`.primitives_vs_aer.compare_case`; the wide cases qsimdist only);
* **deep amplitude** -- one amplitude of qsim's deep circuits (``circuit_q24``)
  from qsimdist, qsimcirq and Aer, each in its own process
  (:func:`.statevector.compare_circuit`).

A contender that is not installed (Qiskit Aer, qsimcirq) is recorded as an error
with the reason; ``--sections`` (``only=``) runs the named sections alone
(:data:`SECTIONS`).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qsimdist.errors import InvalidInputError, QsimdistError
from .primitives_vs_aer import CASES as PRIMITIVE_CASES
from .primitives_vs_aer import WIDE as PRIMITIVE_WIDE
from .result import SCHEMA, SCHEMA_VERSION, load_json, write_json

#: targets of issue 11 (benchmarks, not timed tests)
TARGET_SAME_PATH = 3.0  # same path, median of pairwise ratios against cotengra
TARGET_END_TO_END = 1.5  # one amplitude end to end against quimb, same search budget
TARGET_FIRST_AMPLITUDE_S = 1.0  # cold, <= 20 qubits
#: Qiskit primitives against Aer's: median of Aer / qsimdist over the cases, and the smallest
TARGET_PRIMITIVES_MEDIAN = 1.2
TARGET_PRIMITIVES_MIN = 1.0
AER_MAX_QUBITS = 28

#: the sections of a run, in the order they run (``only=`` / ``--sections`` names)
SECTIONS = ("same_path", "end_to_end", "mpi", "planning", "first_amplitude", "primitives",
            "deep_amplitude")
PRIMITIVES = ("sampler", "estimator")

N53M10 = "circuits/circuit_n53_m10_s0_e0_pABCDCDAB.qsim"
N30 = "circuits/circuit_n30_m14_s0_e0_pEFGH.qsim"


@dataclass(frozen=True)
class Case:
    """One circuit of a comparison.

    Attributes:
        label: short name in tables.
        source: ``bundled:FILE`` (``circuits/``), ``shared:PATH`` (under the
            reference-data folder) or ``rqc:ROWSxCOLS:CYCLES:SEED`` (made with
            ``circuits/generate.py``, written as OpenQASM 2 and qsim files).
        open_qubits: how many leading characters of the bitstring are ``*``.
    """

    label: str
    source: str
    open_qubits: int = 0


@dataclass(frozen=True)
class SuiteSpec:
    """What one suite runs."""

    name: str
    repeats: int
    search_repeats: int  # hyper-optimiser trials, the same for qsimdist and quimb
    same_path: tuple[Case, ...]
    end_to_end: tuple[Case, ...]
    planning: tuple[Case, ...]
    first_amplitude: tuple[Case, ...]
    mpi_ranks: tuple[int, ...] = ()
    mpi_repeats: int = 3
    gemm_n: int = 2048
    copy_mib: int = 256
    per_step: bool = True
    #: rounds of the same-path comparison (cheap rounds; small plans need more of them:
    #: cotengra's time on rqc_4x5_m12 moves between 0.10 and 0.16 s from round to round)
    same_path_repeats: int | None = None  # None: ``repeats``
    #: cases of :mod:`.primitives_vs_aer` (``rc20``, ``qft20``, ...; a wide case runs for its
    #: own primitive only), each for SamplerV2 and EstimatorV2
    primitives: tuple[str, ...] = ()
    primitive_shots: int = 2000
    #: calls per contender and case, alternating, each in its own process (medians compared)
    primitive_repeats: int = 1
    #: qsim's deep circuits (``q24``, ``q30``: ``circuits/qsim/circuit_q24.qsim`` of the data)
    deep_amplitude: tuple[str, ...] = ()

    @property
    def same_path_rounds(self) -> int:
        return self.same_path_repeats if self.same_path_repeats is not None else self.repeats


SUITES: dict[str, SuiteSpec] = {
    "tiny": SuiteSpec(
        name="tiny", repeats=2, search_repeats=4,
        same_path=(Case("rqc_3x4_m8", "bundled:rqc_3x4_m8.qasm", 2),),
        end_to_end=(Case("ghz_n5", "bundled:ghz_n5.qasm"),
                    Case("qft_n6", "bundled:qft_n6.qasm")),
        planning=(Case("rqc_3x4_m8", "bundled:rqc_3x4_m8.qasm"),),
        first_amplitude=(Case("ghz_n5", "bundled:ghz_n5.qasm"),),
        gemm_n=256, copy_mib=8,
    ),
    "quick": SuiteSpec(
        name="quick", repeats=3, search_repeats=8,
        same_path=(Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm"),
                   Case("n30m14", f"shared:{N30}")),
        end_to_end=(Case("ghz_n12", "bundled:ghz_n12.qasm"),
                    Case("qft_n10", "bundled:qft_n10.qasm"),
                    Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm")),
        planning=(Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm"),
                  Case("n30m14", f"shared:{N30}")),
        first_amplitude=(Case("ghz_n12", "bundled:ghz_n12.qasm"),
                         Case("qft_n10", "bundled:qft_n10.qasm"),
                         Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm")),
        mpi_ranks=(2,), mpi_repeats=3, same_path_repeats=9,
        primitives=("rc20", "qft20"),
    ),
    "full": SuiteSpec(
        name="full", repeats=5, search_repeats=16,
        same_path=(Case("rqc_4x5_m12 (4 open)", "bundled:rqc_4x5_m12.qasm", 4),
                   Case("n30m14", f"shared:{N30}"),
                   Case("n53m10", f"shared:{N53M10}")),
        end_to_end=(Case("ghz_n12", "bundled:ghz_n12.qasm"),
                    Case("qft_n10", "bundled:qft_n10.qasm"),
                    Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm"),
                    Case("rqc_5x5_m12", "rqc:5x5:12:11")),
        planning=(Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm"),
                  Case("n30m14", f"shared:{N30}"),
                  Case("n53m10", f"shared:{N53M10}")),
        first_amplitude=(Case("ghz_n12", "bundled:ghz_n12.qasm"),
                         Case("qft_n10", "bundled:qft_n10.qasm"),
                         Case("rqc_4x5_m12", "bundled:rqc_4x5_m12.qasm"),
                         Case("n53m10", f"shared:{N53M10}")),
        mpi_ranks=(2, 4), mpi_repeats=5, same_path_repeats=9,
        primitives=(*PRIMITIVE_CASES, *(c for p in PRIMITIVES for c in PRIMITIVE_WIDE[p])),
        primitive_repeats=3,
        deep_amplitude=("q24",),
    ),
}


def get_suite(name: str) -> SuiteSpec:
    """The suite called ``name``; unknown names raise with the valid list."""
    try:
        return SUITES[name]
    except KeyError:
        raise InvalidInputError(
            f"unknown suite {name!r}; valid: {', '.join(SUITES)}"
        ) from None


class Skip(Exception):
    """A comparison that cannot run here; the message is the stated reason."""


# --------------------------------------------------------------------------- environment


def default_data_dir() -> Path:
    """The reference-data folder: ``$QSIMDIST_SHARED_DATA`` or ``../shared/data``."""
    return Path(os.environ.get("QSIMDIST_SHARED_DATA", "../shared/data"))


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """CPU model, cores, memory, OS and load average of this machine."""
    from qsimdist.engine.memory import machine_memory

    info = {"cpu_model": _cpu_model(), "cores": os.cpu_count(), "memory_bytes": machine_memory(),
            "platform": platform.platform(), "hostname_hash": hash(platform.node()) & 0xFFFF}
    with contextlib.suppress(OSError):
        info["load_average_at_start"] = list(os.getloadavg())
    return info


def source_commit() -> str | None:
    """The git commit of the qsimdist source that ran (``+dirty`` with local changes), if any."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "qsimdist"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def library_versions() -> dict:
    """Versions of the libraries the comparisons use (``None``: not installed)."""
    out = {"python": platform.python_version(), "qsimdist_commit": source_commit()}
    for dist in ("qsimdist", "numpy", "cotengra", "quimb", "qiskit", "qiskit-aer", "numba",
                 "mpi4py", "matplotlib", "cupy-cuda12x"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    with contextlib.suppress(Exception):
        cfg = np.show_config(mode="dicts")  # numpy >= 1.25
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        out["numpy_blas"] = f"{blas.get('name')} {blas.get('version')}"
    return out


# --------------------------------------------------------------------------- circuits


def _generator():
    """``circuits/generate.py`` as a module (the bundled circuits' generator)."""
    import importlib.util

    from qsimdist.bundled import circuits_dir

    path = circuits_dir() / "generate.py"
    if not path.is_file():
        raise Skip("circuits/generate.py is not installed with this qsimdist")
    spec = importlib.util.spec_from_file_location("qsimdist_circuit_generator", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def generated_rqc(rows: int, cols: int, cycles: int, seed: int, folder: Path) -> dict[str, Path]:
    """Write a Sycamore-style random circuit as ``.qasm`` and ``.qsim``; returns both paths."""
    gen = _generator()
    circ = gen.make_rqc(rows, cols, cycles, seed)
    folder.mkdir(parents=True, exist_ok=True)
    qasm = folder / f"{circ.name}_s{seed}.qasm"
    qsim = folder / f"{circ.name}_s{seed}.qsim"
    qasm.write_text(gen.rqc_to_qasm(circ, 2))
    qsim.write_text(gen.rqc_to_qsim(circ))
    return {"qasm": qasm, "qsim": qsim}


def resolve(case: Case, data: Path, scratch: Path) -> Path:
    """The circuit file of ``case``; raises :class:`Skip` with the reason when it is absent."""
    kind, _, rest = case.source.partition(":")
    if kind == "bundled":
        from qsimdist.bundled import bundled_circuit

        return bundled_circuit(rest)
    if kind == "shared":
        path = data / rest
        if not path.is_file():
            raise Skip(f"reference data {path} not found (set $QSIMDIST_SHARED_DATA or --data)")
        return path
    if kind == "rqc":
        grid, cycles, seed = rest.split(":")
        rows, cols = (int(v) for v in grid.split("x"))
        return generated_rqc(rows, cols, int(cycles), int(seed), scratch)["qasm"]
    raise InvalidInputError(f"unknown case source {case.source!r}; valid: bundled:, shared:, rqc:")


def n_qubits_of(path: Path) -> int:
    """Qubit count of a circuit file (through qsimdist's frontends)."""
    from qsimdist.frontends import load

    return load(str(path)).n_qubits


def pattern_for(n: int, open_qubits: int) -> str:
    """``open_qubits`` stars then zeros (natural order: character i is qubit i)."""
    return "*" * open_qubits + "0" * (n - open_qubits)


# --------------------------------------------------------------------------- timing


def interleaved(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                tick: Callable[[], None] | None = None) -> tuple[dict[str, list[float]], dict]:
    """Time each contender once per round, alternating, for ``warmup + repeats`` rounds.

    Returns the timed seconds (warm-up rounds dropped) per contender and each
    contender's last result.
    """
    times: dict[str, list[float]] = {k: [] for k in contenders}
    results: dict = {}
    for r in range(warmup + repeats):
        for name, fn in contenders.items():
            t = time.perf_counter()
            results[name] = fn()
            dt = time.perf_counter() - t
            if r >= warmup:
                times[name].append(dt)
        if tick is not None:
            tick()
    return times, results


def ratio_summary(times: dict[str, list[float]], ours: str, theirs: str) -> dict:
    """Medians, best times and the median of round-by-round ratios ``theirs / ours``."""
    a, b = times[ours], times[theirs]
    pairs = [y / x for x, y in zip(a, b) if x > 0]
    return {
        "median_s": {ours: statistics.median(a), theirs: statistics.median(b)},
        "best_s": {ours: min(a), theirs: min(b)},
        "speedup_median_of_pairwise": statistics.median(pairs) if pairs else None,
        "speedup_median_over_median": statistics.median(b) / statistics.median(a),
        "pairwise_ratios": pairs,
    }


def copy_bandwidth(mib: int = 256, repeats: int = 3) -> float:
    """Bytes per second of a contiguous copy (read + write counted), best of ``repeats``."""
    n = mib * (1 << 20) // 8
    src = np.ones(n, np.complex64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch the pages outside the timing
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2.0 * src.nbytes / best


def measure_ceilings(spec: SuiteSpec) -> dict:
    """This run's complex64 GEMM rate and copy bandwidth (the two floors of a step)."""
    from .executor import gemm_rate

    return {"gemm_flops": gemm_rate(spec.gemm_n, "complex64", 3), "gemm_n": spec.gemm_n,
            "copy_bytes_per_s": copy_bandwidth(spec.copy_mib), "copy_mib": spec.copy_mib}


def step_times(plan, passes: int = 2) -> list[dict]:
    """Per-step seconds of the plan's first slice, run step by step (best of ``passes``).

    The local executor reports progress per slice only, so the steps are
    driven here through its own ``load_leaf`` and ``run_step`` (the same
    kernels :meth:`Plan.execute` runs), with a buffer pool as it makes one.
    """
    from qsimdist.executors import kernels, local

    xp, dtype = np, np.dtype(plan.dtype)
    compiled = kernels.worthwhile(plan.stats.flops)
    pool = local.BufferPool(xp, dtype, limit=2 * plan.stats.peak_bytes)
    assignment = {i: 0 for i in plan.sliced}
    best = [float("inf")] * len(plan.steps)
    for _ in range(passes):
        nodes = {k: local.load_leaf(plan, k, assignment, xp, dtype)
                 for k in range(plan.network.num_tensors)}
        for j, step in enumerate(plan.steps):
            a, b = nodes.pop(step.lhs), nodes.pop(step.rhs)
            t = time.perf_counter()
            nodes[step.out] = local.run_step(step, a, b, xp, pool, compiled)
            best[j] = min(best[j], time.perf_counter() - t)
            pool.put(a)
            pool.put(b)
    return [{"step": j, "kernel": s.kernel + ("/loop" if s.loop else ""), "seconds": best[j],
             "flops": s.flops, "bytes": s.bytes, "live_bytes": s.live_bytes,
             "transposed_bytes": s.transposed_bytes, "m": s.m, "n": s.n, "k": s.k,
             "batch": s.batch} for j, s in enumerate(plan.steps)]


def _rel(a: complex | np.ndarray, b: complex | np.ndarray) -> float:
    a, b = np.ravel(np.asarray(a)), np.ravel(np.asarray(b))
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


# --------------------------------------------------------------------------- comparisons


def _path_options(spec: SuiteSpec, cache: bool = False):
    from qsimdist.planner.path import PathOptions

    return PathOptions(max_repeats=spec.search_repeats, cache=cache, parallel=False)


def same_path(case: Case, spec: SuiteSpec, ceilings: dict, data: Path, scratch: Path,
              tick: Callable[[], None]) -> dict:
    """qsimdist's executor against cotengra's contractor on the plan's own tree and arrays."""
    import qsimdist

    path = resolve(case, data, scratch)
    n = n_qubits_of(path)
    pattern = pattern_for(n, case.open_qubits)
    t = time.perf_counter()
    # path cache off: the planning comparison below must find no path of this run cached
    plan = qsimdist.plan(str(path), bitstrings=pattern, order="natural",
                         path_options=_path_options(spec, cache=False), memory_limit=None)
    plan_s = time.perf_counter() - t
    tree, arrays = plan.contraction_tree()
    # "qsimdist" keeps its buffers between runs of the plan, as Plan.execute does by default;
    # "qsimdist_fresh" starts every run from a new buffer pool, as a one-shot call would
    times, results = interleaved(
        {"qsimdist": plan.execute,
         "qsimdist_fresh": lambda: plan.execute(reuse_workspace=False),
         "cotengra": lambda: tree.contract(arrays)}, spec.same_path_rounds, tick=tick)
    out = {"case": case.label, "file": str(path), "n_qubits": n, "bitstring": pattern,
           "plan_seconds": plan_s, "flops": plan.stats.flops, "log10_cost": plan.stats.log10_cost,
           "n_slices": plan.stats.n_slices, "steps": plan.stats.n_steps,
           "kernel_counts": plan.stats.kernel_counts,
           "transposed_bytes": plan.stats.transposed_bytes,
           "expanded_bytes": plan.stats.expanded_bytes,
           "steps_without_transpose": sum(1 for s in plan.steps if s.transposed_bytes == 0),
           "peak_bytes": plan.stats.peak_bytes,
           "largest_intermediate_log2": float(np.log2(max(plan.stats.max_intermediate, 1))),
           "seconds": times, **ratio_summary(times, "qsimdist", "cotengra"),
           "fresh_workspace": ratio_summary(times, "qsimdist_fresh", "cotengra"),
           "relative_difference": _rel(results["qsimdist"], results["cotengra"])}
    med = out["median_s"]
    out["achieved_gflops"] = {k: plan.stats.flops / v / 1e9 for k, v in med.items()}
    out["fraction_of_gemm"] = {k: plan.stats.flops / v / ceilings["gemm_flops"]
                               for k, v in med.items()}
    # floors (bytes of every step read and written once at copy bandwidth; FLOPs at the GEMM rate)
    total_bytes = sum(s.bytes for s in plan.steps) * plan.stats.n_slices
    out["floor_seconds"] = {"gemm": plan.stats.flops / ceilings["gemm_flops"],
                            "bytes": total_bytes / ceilings["copy_bytes_per_s"]}
    if spec.per_step:
        try:
            out["per_step"] = step_times(plan)
        except (TypeError, AttributeError) as exc:  # the executor's internals changed shape
            out["per_step_skipped"] = f"stepping the local executor failed: {exc}"
    tick()
    return out


def _quimb_amplitude(path: Path, bits: str, spec: SuiteSpec):
    import cotengra as ctg
    import quimb.tensor as qtn

    if path.suffix == ".qsim":
        circ = qtn.Circuit.from_qsim_file(str(path))
    else:
        circ = qtn.Circuit.from_openqasm2_file(str(path))
    opt = ctg.HyperOptimizer(max_repeats=spec.search_repeats, parallel=False,
                             reconf_opts={}, progbar=False)
    return circ.amplitude(bits, optimize=opt, dtype="complex64")


def _aer_amplitude(path: Path, bits: str):
    from qiskit import QuantumCircuit, transpile
    from qiskit_aer import AerSimulator

    qc = QuantumCircuit.from_qasm_file(str(path))
    qc.save_amplitudes([int(bits[::-1], 2)])  # natural-order bitstring -> Qiskit index
    sim = AerSimulator(method="statevector", precision="single")
    return sim.run(transpile(qc, sim)).result().data()["amplitudes"][0]


def end_to_end(case: Case, spec: SuiteSpec, data: Path, scratch: Path,
               tick: Callable[[], None]) -> dict:
    """One amplitude from the file: qsimdist, quimb (same search trials), Qiskit Aer."""
    import qsimdist

    path = resolve(case, data, scratch)
    n = n_qubits_of(path)
    bits = "0" * n
    opts = _path_options(spec, cache=False)
    routes: dict[str, str] = {}

    def ours(**extra):
        res = qsimdist.amplitudes(str(path), [bits], order="natural", path_options=opts, **extra)
        routes["qsimdist (tensor network)" if extra else "qsimdist"] = res.stats.get(
            "method", "tensor-network")
        return res.amplitudes[0]

    contenders: dict[str, Callable[[], object]] = {
        "qsimdist": ours, "quimb": lambda: _quimb_amplitude(path, bits, spec)}
    if "method" in inspect.signature(qsimdist.amplitudes).parameters:
        # qsimdist may take a statevector route for small circuits: time its
        # tensor-network route too, the like-for-like comparison with quimb
        contenders["qsimdist (tensor network)"] = lambda: ours(method="tensor-network")
    skipped = {}
    if n > AER_MAX_QUBITS:
        skipped["qiskit-aer"] = f"{n} qubits > {AER_MAX_QUBITS}: statevector too wide here"
    elif path.suffix not in (".qasm", ".qasm2"):
        skipped["qiskit-aer"] = "not an OpenQASM 2 file"
    else:
        try:
            import qiskit_aer  # noqa: F401
        except ImportError:
            skipped["qiskit-aer"] = "qiskit-aer is not installed (pip install 'qsimdist[aer]')"
        else:
            contenders["qiskit-aer"] = lambda: _aer_amplitude(path, bits)
    times, results = interleaved(contenders, spec.repeats, tick=tick)
    out = {"case": case.label, "file": str(path), "n_qubits": n, "bitstring": bits,
           "search_repeats": spec.search_repeats, "seconds": times,
           "median_s": {k: statistics.median(v) for k, v in times.items()},
           "skipped": skipped, "amplitude": _cplx(results["qsimdist"]),
           "qsimdist_route": routes,
           "relative_difference": {k: _rel(results["qsimdist"], v)
                                   for k, v in results.items() if k != "qsimdist"}}
    keys = ("speedup_median_of_pairwise", "speedup_median_over_median", "pairwise_ratios")
    for other in contenders:
        if not other.startswith("qsimdist"):
            r = ratio_summary(times, "qsimdist", other)
            out[f"vs_{other}"] = {k: r[k] for k in keys}
    if "qsimdist (tensor network)" in contenders:
        r = ratio_summary(times, "qsimdist (tensor network)", "quimb")
        out["tensor_network_vs_quimb"] = {k: r[k] for k in keys}
    return out


def _cplx(z) -> list[float]:
    z = complex(np.ravel(np.asarray(z))[0])
    return [z.real, z.imag]


def planning(case: Case, spec: SuiteSpec, data: Path, scratch: Path,
             tick: Callable[[], None]) -> dict:
    """Planning with an empty path cache, then re-planning with the structure cache warm."""
    import qsimdist

    path = resolve(case, data, scratch)
    n = n_qubits_of(path)
    bits = "0" * n
    cache_dir = Path(tempfile.mkdtemp(prefix="qsimdist-bench-cache-", dir=scratch))
    with _env(QSIMDIST_CACHE_DIR=str(cache_dir)):
        t = time.perf_counter()
        cold = qsimdist.plan(str(path), bitstrings=bits, order="natural",
                             path_options=_path_options(spec, cache=True))
        cold_s = time.perf_counter() - t
        tick()
        warm_s = []
        hits = []
        for _ in range(spec.repeats):
            t = time.perf_counter()
            warm = qsimdist.plan(str(path), bitstrings=bits, order="natural",
                                 path_options=_path_options(spec, cache=True))
            warm_s.append(time.perf_counter() - t)
            hits.append(bool(warm.stats.path_from_cache))
        tick()
    return {"case": case.label, "file": str(path), "n_qubits": n,
            "plan_cold_cache_s": cold_s, "cold_path_from_cache": bool(cold.stats.path_from_cache),
            "replan_warm_cache_s": warm_s,
            "replan_warm_cache_median_s": statistics.median(warm_s),
            "replan_path_from_cache": hits, "log10_cost": cold.stats.log10_cost,
            "same_cost_when_replanned": bool(abs(warm.stats.log10_cost - cold.stats.log10_cost)
                                             < 1e-9)}


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def first_amplitude(case: Case, spec: SuiteSpec, data: Path, scratch: Path,
                    tick: Callable[[], None], timeout: float = 600.0) -> dict:
    """Wall time of ``python -m qsimdist amplitude FILE 0..0`` in fresh processes.

    *cold*: empty path and numba caches (a newcomer's first command);
    *warm caches*: a fresh process again, the caches the cold run filled kept.
    qsimdist's modules are compiled to bytecode beside their sources first
    (``compileall``), as ``pip install .`` compiles them and every other
    installed library already is; where ``PYTHONDONTWRITEBYTECODE`` is set
    and an editable install has none, every start would otherwise compile
    them from source. ``bytecode`` in the record says whether that worked.
    """
    import compileall

    import qsimdist

    path = resolve(case, data, scratch)
    n = n_qubits_of(path)
    caches = Path(tempfile.mkdtemp(prefix="qsimdist-bench-first-", dir=scratch))
    env = dict(os.environ, QSIMDIST_CACHE_DIR=str(caches / "paths"),
               NUMBA_CACHE_DIR=str(caches / "numba"))
    package = Path(qsimdist.__file__).parent
    try:
        bytecode = bool(compileall.compile_dir(str(package), quiet=2))
    except OSError:
        bytecode = False
    cmd = [sys.executable, "-m", "qsimdist", "amplitude", str(path), "0" * n,
           "--order", "natural", "--json"]
    runs = {}
    for label in ("cold", "warm_caches"):
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        runs[label] = time.perf_counter() - t
        if proc.returncode != 0:
            raise Skip(f"the amplitude command failed: {proc.stderr.strip()[-300:]}")
        tick()
    payload = json.loads(proc.stdout)
    return {"case": case.label, "file": str(path), "n_qubits": n, "bytecode": bytecode,
            "command": " ".join(cmd[1:]), "wall_s": runs,
            "stats": payload.get("stats", {}) if isinstance(payload, dict) else {}}


def mpi_comparison(ranks: int, spec: SuiteSpec, data: Path, scratch: Path,
                   timeout: float = 900.0) -> dict:
    """``benchmarks.mpi`` under ``mpiexec -n ranks``, folded into one record."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise Skip("mpiexec not found (pip install 'qsimdist[mpi]')")
    try:
        import mpi4py  # noqa: F401 - only checks it is installed; MPI starts in the subprocess
    except ImportError:
        raise Skip("mpi4py is not installed (pip install 'qsimdist[mpi]')") from None
    if not (data / N30).is_file():
        raise Skip(f"reference data {data / N30} not found")
    out_json = scratch / f"mpi_{ranks}.json"
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", "benchmarks.mpi",
           "--data", str(data), "--repeats", str(spec.mpi_repeats), "--json", str(out_json)]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Skip(f"mpiexec -n {ranks} ran past {timeout:.0f} s") from None
    wall = time.perf_counter() - t
    if proc.returncode != 0 or not out_json.is_file():
        raise Skip(f"mpiexec -n {ranks} failed (exit {proc.returncode}): "
                   f"{proc.stderr.strip()[-300:]}")
    raw = json.loads(out_json.read_text())
    rows = raw.get("steps_distributed", [])
    comm_s = sum(r["measured_s"] for r in rows if r.get("sent_bytes", 0) or r.get("messages", 0))
    all_s = sum(r["measured_s"] for r in rows)
    pred = raw["predicted_seconds"]
    meas = raw["measured_seconds"]
    return {
        "ranks": ranks, "wall_s": wall,
        "command": f"mpiexec -n {ranks} python -m mpi4py -m benchmarks.mpi --data {data} "
                   f"--repeats {spec.mpi_repeats}",
        "E_P_measured": raw["measured_E_2"], "R_P": raw["R_2"],
        "E_P_over_R_P": raw["E_2_over_R_2"],
        "E_P_predicted": pred["slice_only"] / pred["distributed"],
        "comm_share_measured": comm_s / all_s if all_s > 0 else None,
        "measured_seconds": meas, "predicted_seconds": pred,
        "predicted_over_measured": {k: pred[k] / meas[k] for k in meas},
        "slices": raw.get("slices"), "group_size_distributed": raw.get("group_size_distributed"),
        "rel_diff_between_results": raw.get("rel_diff_between_results"),
        "limit_bytes": raw.get("limit_bytes"), "fitted_profile": raw.get("fitted_profile"),
        "measured_peak_bytes": raw.get("measured_peak_bytes"),
        "predicted_peak_bytes": raw.get("predicted_peak_bytes"),
    }


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def primitive_jobs(spec: SuiteSpec) -> list[tuple[str, str]]:
    """The (primitive, case) pairs of the primitives section: every case for both
    primitives, except that a wide case runs for its own primitive only."""
    wide = {c for cases in PRIMITIVE_WIDE.values() for c in cases}
    return [(p, c) for p in PRIMITIVES for c in spec.primitives
            if c not in wide or c in PRIMITIVE_WIDE[p]]


def primitives_comparison(primitive: str, case: str, spec: SuiteSpec,
                          timeout: float = 900.0) -> dict:
    """SamplerV2 or EstimatorV2 of qsimdist against Aer's on one case, each in a subprocess."""
    from . import primitives_vs_aer

    if not _importable("qiskit"):
        raise Skip("qiskit is not installed (pip install qiskit)")
    wide = case in PRIMITIVE_WIDE[primitive]
    aer = _importable("qiskit_aer")
    row = primitives_vs_aer.compare_case(primitive, case, shots=spec.primitive_shots,
                                         timeout=timeout, with_aer=aer and not wide,
                                         repeats=spec.primitive_repeats)
    if wide:
        row["aer"] = {"error": "not run: a wide case (qsimdist only; Aer's statevector "
                               "cannot hold it)"}
    elif not aer:
        row["aer"] = {"error": "qiskit-aer is not installed (pip install 'qsimdist[aer]')"}
    row["shots"] = spec.primitive_shots
    row["command"] = (f"python -m benchmarks.primitives_vs_aer --primitives {primitive} "
                      f"--cases {case} --shots {spec.primitive_shots} "
                      f"--repeats {spec.primitive_repeats}")
    return row


def deep_amplitude(circuit: str, data: Path, timeout: float = 1800.0) -> dict:
    """One amplitude of qsim's ``circuit_<circuit>.qsim``: qsimdist, qsimcirq, Aer (a process each).

    Raises :class:`Skip` naming the file when it is not under ``data``; a
    contender that is not installed is a row with the reason as its error.
    """
    from . import statevector

    missing = {}
    if not _importable("qsimcirq"):
        missing["qsimcirq"] = "qsimcirq is not installed (pip install 'qsimdist[qsim]')"
    if not _importable("qiskit_aer"):
        missing["Qiskit Aer"] = "qiskit-aer is not installed (pip install 'qsimdist[aer]')"
    try:
        rows = statevector.compare_circuit(
            circuit, data, [c for c in statevector.CONTENDERS if c not in missing], timeout)
    except statevector.CircuitAbsent as exc:
        raise Skip(f"reference data {exc.filename} not found (set $QSIMDIST_SHARED_DATA or "
                   "--data)") from None
    by_name = {r["contender"]: r for r in rows}
    by_name.update({k: {"contender": k, "error": v, "circuit": circuit}
                    for k, v in missing.items()})
    path = statevector.circuit_path(circuit, data)
    return {"circuit": circuit, "file": str(path),
            "n_qubits": int(path.read_text().split("\n", 1)[0]),
            "command": f"python -m benchmarks.statevector --data {data} --circuits {circuit}",
            "rows": [by_name[k] for k in statevector.CONTENDERS if k in by_name]}


# --------------------------------------------------------------------------- targets


def targets(result: dict) -> list[dict]:
    """Each target of the issue beside the measured value, and whether it is met."""
    rows = []
    for r in result.get("same_path", []):
        if "speedup_median_of_pairwise" in r:
            v = r["speedup_median_of_pairwise"]
            rows.append({"target": f"same path vs cotengra, {r['case']}",
                         "goal": f">= {TARGET_SAME_PATH:g}x (median of pairwise ratios)",
                         "measured": v, "met": v >= TARGET_SAME_PATH})
            fresh = r.get("fresh_workspace", {}).get("speedup_median_of_pairwise")
            if fresh is not None:
                rows.append({"target": f"same path vs cotengra, {r['case']}, fresh workspace",
                             "goal": f">= {TARGET_SAME_PATH:g}x (median of pairwise ratios)",
                             "measured": fresh, "met": fresh >= TARGET_SAME_PATH})
    for r in result.get("end_to_end", []):
        if "vs_quimb" in r:
            v = r["vs_quimb"]["speedup_median_of_pairwise"]
            route = r.get("qsimdist_route", {}).get("qsimdist", "tensor-network")
            rows.append({"target": f"end to end vs quimb, {r['case']} (qsimdist: {route})",
                         "goal": f">= {TARGET_END_TO_END:g}x (same search trials)",
                         "measured": v, "met": v >= TARGET_END_TO_END})
        if "tensor_network_vs_quimb" in r and r.get("qsimdist_route", {}).get(
                "qsimdist") != "tensor-network":
            v = r["tensor_network_vs_quimb"]["speedup_median_of_pairwise"]
            rows.append({"target": f"end to end vs quimb, {r['case']} (qsimdist: tensor-network "
                                   "forced)",
                         "goal": f">= {TARGET_END_TO_END:g}x (same search trials)",
                         "measured": v, "met": v >= TARGET_END_TO_END})
    for r in result.get("first_amplitude", []):
        if "wall_s" in r and r["n_qubits"] <= 20:
            v = r["wall_s"]["cold"]
            rows.append({"target": f"first amplitude cold, {r['case']}",
                         "goal": f"< {TARGET_FIRST_AMPLITUDE_S:g} s (fresh process, empty caches)",
                         "measured": v, "met": v < TARGET_FIRST_AMPLITUDE_S})
    ratios = [r["ratio"] for r in result.get("primitives", []) if "ratio" in r]
    if ratios:
        v, low = statistics.median(ratios), min(ratios)
        rows.append({"target": f"primitives vs Qiskit Aer, {len(ratios)} rows with a ratio "
                               f"(smallest {low:.2f})",
                     "goal": f"median Aer / qsimdist >= {TARGET_PRIMITIVES_MEDIAN:.1f}x and "
                             f"none below {TARGET_PRIMITIVES_MIN:.1f}x",
                     "measured": v,
                     "met": v >= TARGET_PRIMITIVES_MEDIAN and low >= TARGET_PRIMITIVES_MIN})
    return rows


# --------------------------------------------------------------------------- driver


@contextlib.contextmanager
def progress_bar(total: int, quiet: bool = False) -> Iterator[tuple[Callable, Callable]]:
    """``(describe(text), tick())`` driving a rich progress bar on stderr.

    When stderr is no terminal (a log file), each stage is one plain line with
    the seconds elapsed instead.
    """
    if quiet:
        yield (lambda text: None), (lambda: None)
        return
    if not sys.stderr.isatty():
        t0 = time.perf_counter()

        def describe(text: str) -> None:
            print(f"[{time.perf_counter() - t0:7.1f} s] {text}", file=sys.stderr, flush=True)

        yield describe, (lambda: None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True)) as bar:
        task = bar.add_task("bench", total=total)
        yield (lambda text: bar.update(task, description=text)), (lambda: bar.advance(task))


def _count_ticks(spec: SuiteSpec) -> int:
    per_same = 1 + spec.same_path_rounds + 1
    per_e2e = 1 + spec.repeats
    return (1 + len(spec.same_path) * per_same + len(spec.end_to_end) * per_e2e
            + 2 * len(spec.planning) + 2 * len(spec.first_amplitude) + len(spec.mpi_ranks)
            + len(primitive_jobs(spec)) + len(spec.deep_amplitude))


def run_suite(spec: SuiteSpec | str, data: Path | None = None, command: str | None = None,
              quiet: bool = False, only: tuple[str, ...] | None = None) -> dict:
    """Run every comparison of ``spec``; returns the JSON-ready result.

    A comparison that cannot run here is recorded under ``skipped`` with its
    reason; ``only`` restricts the run to the named sections.
    """
    spec = get_suite(spec) if isinstance(spec, str) else spec
    data = data if data is not None else default_data_dir()
    sections = SECTIONS
    if only is not None:
        bad = [s for s in only if s not in sections]
        if bad:
            raise InvalidInputError(f"unknown sections {bad}; valid: {', '.join(sections)}")
    wanted = set(only) if only is not None else set(sections)
    result: dict = {
        "schema": SCHEMA, "version": SCHEMA_VERSION, "suite": spec.name,
        "command": command or " ".join(["python -m benchmarks run --suite", spec.name]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(), "versions": library_versions(),
        "environment": {k: os.environ.get(k) for k in ("OPENBLAS_THREAD_TIMEOUT",
                                                       "OPENBLAS_NUM_THREADS",
                                                       "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")},
        "data_dir": str(data),
        "settings": {"repeats": spec.repeats, "same_path_repeats": spec.same_path_rounds,
                     "warmup_rounds": 1,
                     "search_repeats": spec.search_repeats, "mpi_repeats": spec.mpi_repeats,
                     "primitive_shots": spec.primitive_shots,
                     "primitive_repeats": spec.primitive_repeats},
        "same_path": [], "end_to_end": [], "mpi": [], "planning": [], "first_amplitude": [],
        "primitives": [], "deep_amplitude": [], "skipped": [],
    }
    t_start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="qsimdist-bench-"))
    try:
        with progress_bar(_count_ticks(spec), quiet) as (describe, tick):
            describe("ceilings: GEMM rate, copy bandwidth")
            result["ceilings"] = measure_ceilings(spec)
            tick()
            jobs: list[tuple[str, str, Callable[[], dict]]] = []
            if "same_path" in wanted:
                for c in spec.same_path:
                    jobs.append(("same_path", c.label, lambda c=c: same_path(
                        c, spec, result["ceilings"], data, scratch, tick)))
            if "end_to_end" in wanted:
                for c in spec.end_to_end:
                    jobs.append(("end_to_end", c.label,
                                 lambda c=c: end_to_end(c, spec, data, scratch, tick)))
            if "mpi" in wanted:
                for p in spec.mpi_ranks:
                    jobs.append(("mpi", f"P={p}", lambda p=p: mpi_comparison(p, spec, data,
                                                                              scratch)))
            if "planning" in wanted:
                for c in spec.planning:
                    jobs.append(("planning", c.label,
                                 lambda c=c: planning(c, spec, data, scratch, tick)))
            if "first_amplitude" in wanted:
                for c in spec.first_amplitude:
                    jobs.append(("first_amplitude", c.label,
                                 lambda c=c: first_amplitude(c, spec, data, scratch, tick)))
            if "primitives" in wanted:
                for p, c in primitive_jobs(spec):
                    jobs.append(("primitives", f"{p} {c}",
                                 lambda p=p, c=c: primitives_comparison(p, c, spec)))
            if "deep_amplitude" in wanted:
                for c in spec.deep_amplitude:
                    jobs.append(("deep_amplitude", c, lambda c=c: deep_amplitude(c, data)))
            for section, label, job in jobs:
                describe(f"{section.replace('_', ' ')}: {label}")
                t_job = time.perf_counter()
                try:
                    record = job()
                    record["section_wall_s"] = time.perf_counter() - t_job
                    result[section].append(record)
                except Skip as exc:
                    result["skipped"].append({"section": section, "case": label,
                                              "reason": str(exc)})
                if section in ("mpi", "primitives", "deep_amplitude"):  # one tick per job
                    tick()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["targets"] = targets(result)
    result["wall_s"] = time.perf_counter() - t_start
    return result


# --------------------------------------------------------------------------- text table


def summary_lines(result: dict) -> list[str]:
    """The table printed at the end of a run (plain text)."""
    lines = [f"python -m benchmarks run --suite {result['suite']}  ({result['date']}, "
             f"{result['machine']['cpu_model']}, {result['machine']['cores']} cores, "
             f"{result.get('wall_s', 0):.0f} s)"]
    c = result.get("ceilings", {})
    if c:
        lines.append(f"ceilings: complex64 GEMM {c['gemm_flops'] / 1e9:.1f} GFLOP/s, "
                     f"copy {c['copy_bytes_per_s'] / 1e9:.1f} GB/s")
    for r in result["same_path"]:
        m = r["median_s"]
        fresh = r.get("fresh_workspace", {}).get("speedup_median_of_pairwise")
        lines.append(f"same path  {r['case']:<24} qsimdist {m['qsimdist']:.3f} s  cotengra "
                     f"{m['cotengra']:.3f} s  x{r['speedup_median_of_pairwise']:.2f}  "
                     + (f"(fresh workspace x{fresh:.2f})  " if fresh is not None else "") +
                     f"{r['achieved_gflops']['qsimdist']:.1f} GFLOP/s "
                     f"({100 * r['fraction_of_gemm']['qsimdist']:.1f}% of GEMM)  transposed "
                     f"{r['transposed_bytes'] / 1e6:.1f} MB")
    for r in result["end_to_end"]:
        m = r["median_s"]
        parts = [f"{k} {v:.3f} s" for k, v in m.items()]
        ratios = [f"vs {k[3:]} x{v['speedup_median_of_pairwise']:.2f}"
                  for k, v in r.items() if k.startswith("vs_")]
        lines.append(f"end to end {r['case']:<24} " + "  ".join(parts + ratios))
    for r in result["mpi"]:
        lines.append(f"mpi P={r['ranks']:<2} E_P {r['E_P_measured']:.2f} (predicted "
                     f"{r['E_P_predicted']:.2f})  R_P {r['R_P']:.2f}  comm share "
                     f"{100 * (r['comm_share_measured'] or 0):.0f}%  predicted/measured "
                     + ", ".join(f"{k} {v:.2f}" for k, v in r["predicted_over_measured"].items()))
    for r in result["planning"]:
        lines.append(f"planning   {r['case']:<24} cold cache {r['plan_cold_cache_s']:.2f} s  "
                     f"warm cache {r['replan_warm_cache_median_s']:.3f} s")
    for r in result["first_amplitude"]:
        w = r["wall_s"]
        lines.append(f"first amp  {r['case']:<24} cold {w['cold']:.2f} s  warm caches "
                     f"{w['warm_caches']:.2f} s (fresh process)")
    for r in result.get("primitives", []):
        q, a = r["qsimdist"], r["aer"]
        how = f" ({q.get('method')}, {q.get('engine')})" if "error" not in q else ""
        agree = (f"max abs diff {r['max_abs_diff']:.1e}" if "max_abs_diff" in r
                 else f"max z {r['max_z']:.1f}" if "max_z" in r else "")
        lines.append(f"primitive  {r['primitive']:<9} {r['case']:<14} qsimdist "
                     + (q["error"] if "error" in q else f"{q['seconds']:.3f} s") + how
                     + "  Aer " + (a["error"] if "error" in a else f"{a['seconds']:.3f} s")
                     + (f"  Aer/qsimdist x{r['ratio']:.2f}" if "ratio" in r else "")
                     + (f"  {agree}" if agree else ""))
    for rec in result.get("deep_amplitude", []):
        for r in rec["rows"]:
            head = f"deep amp   {rec['circuit']:<4} {r['contender']:<34} "
            if "error" in r:
                lines.append(head + r["error"])
                continue
            ratio = r.get("qsimcirq_seconds_over_this")
            diff = r.get("rel_diff_to_qsimcirq")
            lines.append(head + f"{r['seconds']:.3f} s (process {r['process_seconds']:.2f} s)"
                         + (f"  qsimcirq/this x{ratio:.2f}" if ratio is not None else "")
                         + (f"  rel diff {diff:.1e}" if diff is not None else ""))
    for s in result["skipped"]:
        lines.append(f"skipped    {s['section']} {s['case']}: {s['reason']}")
    for t in result.get("targets", []):
        lines.append(f"target     {t['target']}: {t['goal']}; measured {t['measured']:.3g} -> "
                     f"{'met' if t['met'] else 'NOT met'}")
    return lines


def bench_command(suite: str, json_path: Path | None, out: Path, report: bool,
                  benchmarks: Path, data: Path | None, quiet: bool = False,
                  only: tuple[str, ...] | None = None) -> dict:
    """What ``python -m benchmarks run`` does: run, print the table, write JSON and the report.

    ``only``: the sections to run (``None``: all of them).
    """
    spec = get_suite(suite)
    command = (" ".join(["python -m benchmarks", *sys.argv[1:]])
               if sys.argv[1:2] == ["run"] else None)
    result = run_suite(spec, data=data, command=command, quiet=quiet, only=only)
    for line in summary_lines(result):
        print(line)
    if json_path is not None:
        write_json(result, json_path)
        print(f"JSON written to {json_path}")
    if report:
        from .report_md import write_report

        written = write_report(result, benchmarks, out, json_path)
        print(f"report written to {benchmarks} and {', '.join(str(p) for p in written)}")
    return result


__all__ = ["SECTIONS", "SUITES", "Case", "QsimdistError", "SuiteSpec", "bench_command",
           "get_suite", "load_json", "run_suite", "summary_lines", "targets", "write_json"]
