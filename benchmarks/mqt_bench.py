"""MQT Bench through qsimdist's three doors beside Qiskit Aer, in one process, warm.

The circuits are made by ``mqt-bench`` when this runs (``get_benchmark(name, level,
size)``; none is stored here). A family whose sizes are constrained (adders, codes,
Shor) takes the nearest size it accepts within 4 of the one asked, and the row says
which. For every circuit, side by side:

* ``amplitudes``: ``qsimdist.amplitudes`` of 4 bitstrings (the 3 likeliest and one
  drawn at random) in complex64 (timed) and complex128, against Aer's statevector
  (``save_statevector`` on the circuit transpiled for ``AerSimulator``, timed):
  within 5e-5 and 1e-10. Dynamic circuits are left out (no single state).
* ``sampler``: ``SamplerV2`` with 4,000 shots (dynamic circuits: ``--dynamic-shots``). Exact distribution: Aer's statevector
  marginal on the measured qubits. qsimdist passes where its total-variation distance
  from it is within twice Aer's (same shots) plus 0.01, or a chi-square test of its
  counts gives p > 1e-3. Dynamic circuits: the reference is Aer at 40,000 shots.
* ``estimator``: ``EstimatorV2`` on every Z_i, every Z_i Z_i+1 and X...XY, against
  Aer's exact ``EstimatorV2`` (precision 0) within 1e-8. Dynamic circuits: both sample
  one branch of the measurements, so values are not compared (timed only).

Timing: each contender's primitive is called once to warm up, then ``--repeats``
times alternating with the other; the median of each is kept. Aer runs the circuit
transpiled once for ``AerSimulator`` (optimisation level 1, timed apart as
``aer_transpile_s``). A qsimdist refusal or failure is recorded with its first line.

Run (from a source checkout)::

    python -m benchmarks.mqt_bench --sizes 5 10 16 20 --levels indep alg \\
        [--only qft grover ...] [--json FILE] [--repeats 3] [--dynamic-shots 4000]

Prints each row, then per size the median of qsimdist/Aer per primitive, the worst
ratios and every call over 3x Aer's (unless within 50 ms of it).

``--aer-timeout S`` first runs Aer once on each circuit in a child process (its
statevector, or for a dynamic circuit its sampler and estimator) and, where that has not
returned in ``S`` seconds, times qsimdist's doors alone (``aer_timeout`` rows: the
ratio is below ``qsimdist_s / S``; their only check is qsimdist's complex64
amplitudes against its complex128 ones). 20-qubit Grover searches take Aer's
statevector more than 25 minutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings

import numpy as np

from . import positive_int

SHOTS = 4000
REFERENCE_SHOTS = 40_000
TOLERANCE = {"complex64": 5e-5, "complex128": 1e-10}
ESTIMATOR_TOLERANCE = 1e-8
SLOW_RATIO, SLOW_MARGIN_S = 3.0, 0.05


def make_circuit(name: str, level: str, size: int):
    """``(circuit, size used)``: the benchmark at ``size`` or the nearest size within 4
    that the family accepts; ``(None, reason)`` where none is."""
    from mqt.bench import BenchmarkLevel, get_benchmark

    first_error = ""
    for delta in (0, 1, -1, 2, -2, 3, -3, 4, -4):
        n = size + delta
        if n < 2:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return get_benchmark(name, BenchmarkLevel[level.upper()], n), n
        except Exception as exc:  # noqa: BLE001 - a size the family does not take
            first_error = first_error or " ".join(str(exc).split())[:160]
    return None, first_error


def is_dynamic(qc) -> bool:
    """Control flow, resets, or a gate after a measurement on the same qubit."""
    from qiskit.circuit import ControlFlowOp

    measured = set()
    for inst in qc.data:
        op = inst.operation
        qubits = {qc.find_bit(q).index for q in inst.qubits}
        if isinstance(op, ControlFlowOp) or op.name == "reset":
            return True
        if op.name == "measure":
            measured |= qubits
        elif op.name not in ("barrier", "delay") and measured & qubits:
            return True
    return False


def measured_qubits(qc) -> list[int]:
    """The qubit each clbit is measured from, clbit 0 first (final measurements)."""
    source = {}
    for inst in qc.data:
        if inst.operation.name == "measure":
            source[qc.find_bit(inst.clbits[0]).index] = qc.find_bit(inst.qubits[0]).index
    return [source[c] for c in sorted(source)]


def observables(n: int):
    from qiskit.quantum_info import SparsePauliOp

    labels = [("Z", [i]) for i in range(n)] + [("ZZ", [i, i + 1]) for i in range(n - 1)]
    labels.append(("Y" + "X" * (n - 1), list(range(n))))
    return [SparsePauliOp.from_sparse_list([(p, q, 1.0)], n) for p, q in labels]


def counts_of(pub_result) -> dict[str, int]:
    return pub_result.join_data().get_counts()


def tvd(counts: dict[str, int], probs: dict[str, float]) -> float:
    shots = sum(counts.values())
    keys = set(counts) | set(probs)
    return 0.5 * sum(abs(counts.get(k, 0) / shots - probs.get(k, 0.0)) for k in keys)


def chi_square_p(counts: dict[str, int], probs: dict[str, float]) -> float:
    """p-value of Pearson's test, outcomes expected fewer than 5 times pooled."""
    from scipy.stats import chi2

    shots = sum(counts.values())
    stat, cells, pool_obs, pool_exp = 0.0, 0, 0.0, 0.0
    for k in set(counts) | set(probs):
        expected, observed = shots * probs.get(k, 0.0), counts.get(k, 0)
        if expected < 5:
            pool_obs, pool_exp = pool_obs + observed, pool_exp + expected
            continue
        stat += (observed - expected) ** 2 / expected
        cells += 1
    if pool_exp > 0:
        stat += (pool_obs - pool_exp) ** 2 / pool_exp
        cells += 1
    elif pool_obs > 0:
        return 0.0
    return float(chi2.sf(stat, max(cells - 1, 1)))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:240]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


#: where a contender's warm-up call took longer than this, one timed call each is kept
#: (a 20-qubit dynamic circuit's 4,000 shots take Aer minutes per call)
LONG_CALL_S = 20.0
#: seconds the reference run of a dynamic circuit may take (fewer shots where Aer is slow)
REFERENCE_BUDGET_S = 60.0


def race(mine, theirs, repeats: int) -> tuple[float, float, object, object]:
    """Warm both, then ``repeats`` alternating calls (one where a warm-up took longer than
    :data:`LONG_CALL_S`); medians and the last outputs."""
    warm_m, out_m = timed(mine)
    warm_t, out_t = timed(theirs)
    if max(warm_m, warm_t) > LONG_CALL_S:
        repeats = 1
    tm, tt = [], []
    for _ in range(repeats):
        s, out_m = timed(mine)
        tm.append(s)
        s, out_t = timed(theirs)
        tt.append(s)
    return statistics.median(tm), statistics.median(tt), out_m, out_t


def compare(name: str, level: str, size: int, repeats: int, seed: int = 7,
            dynamic_shots: int = SHOTS) -> list[dict]:
    """One circuit's rows (one per primitive); a dynamic circuit's sampler rows draw
    ``dynamic_shots`` (Aer runs those shot by shot)."""
    from qiskit import transpile
    from qiskit_aer import AerSimulator
    from qiskit_aer.primitives import EstimatorV2 as AerEstimator
    from qiskit_aer.primitives import SamplerV2 as AerSampler

    import qsimdist
    from qsimdist.qiskit import EstimatorV2, SamplerV2

    qc, used = make_circuit(name, level, size)
    base = {"name": name, "level": level, "size": size}
    if qc is None:
        return [{**base, "primitive": "all", "skipped": f"no size near {size}: {used}"}]
    base.update(used=used, qubits=qc.num_qubits)
    dynamic = is_dynamic(qc)
    base["dynamic"] = dynamic
    shots = dynamic_shots if dynamic else SHOTS
    n = qc.num_qubits
    sim = AerSimulator(method="statevector")
    unitary = qc if dynamic else qc.remove_final_measurements(inplace=False)
    t0 = time.perf_counter()
    aer_unitary = transpile(unitary, sim, optimization_level=1)
    aer_measured = transpile(qc, sim, optimization_level=1) if qc.num_clbits else None
    base["aer_transpile_s"] = time.perf_counter() - t0
    rows = []

    exact = None
    if not dynamic:
        saved = aer_unitary.copy()
        saved.save_statevector()

        def aer_state():
            return np.asarray(sim.run(saved).result().get_statevector(), dtype=complex)

        exact = aer_state()
        rng = np.random.default_rng(seed)
        probs = np.abs(exact) ** 2
        picks = [int(i) for i in np.argsort(probs)[::-1][:3]] + [int(rng.integers(1 << n))]
        bitstrings = [format(i, f"0{n}b") for i in picks]
        row = {**base, "primitive": "amplitudes"}
        try:
            t0 = time.perf_counter()
            qsimdist.amplitudes(unitary, bitstrings, dtype="complex64")
            row["qsimdist_cold_s"] = time.perf_counter() - t0
            q_s, a_s, mine, _ = race(
                lambda: np.asarray(qsimdist.amplitudes(unitary, bitstrings, dtype="complex64").amplitudes),
                aer_state, repeats)
            wide = np.asarray(qsimdist.amplitudes(unitary, bitstrings, dtype="complex128").amplitudes)
            ref = exact[picks]
            err64, err128 = float(np.max(np.abs(mine - ref))), float(np.max(np.abs(wide - ref)))
            row.update(qsimdist_s=q_s, aer_s=a_s, error_c64=err64, error_c128=err128,
                       ok=err64 <= TOLERANCE["complex64"] and err128 <= TOLERANCE["complex128"])
        except Exception as exc:  # noqa: BLE001 - recorded as a refusal
            row["refused"] = first_line(exc)
        rows.append(row)

    if qc.num_clbits and measured_qubits(qc):
        row = {**base, "primitive": "sampler"}
        mine_s, theirs_s = SamplerV2(seed=seed), AerSampler(seed=seed)
        try:
            q_s, a_s, mine, theirs = race(
                lambda: counts_of(mine_s.run([qc], shots=shots).result()[0]),
                lambda: counts_of(theirs_s.run([aer_measured], shots=shots).result()[0]),
                repeats)
            if dynamic:
                # 10x the shots, or as many as REFERENCE_BUDGET_S of Aer's time allows
                ref_shots = int(min(10 * shots, max(
                    shots, shots * REFERENCE_BUDGET_S / max(a_s, 1e-9))))
                ref_counts = counts_of(AerSampler(seed=seed + 1).run(
                    [aer_measured], shots=ref_shots).result()[0])
                ref = {k: v / ref_shots for k, v in ref_counts.items()}
                row["reference_shots"] = ref_shots
            else:
                marg = np.abs(exact.reshape((2,) * n)) ** 2  # axis a <-> qubit n-1-a
                qs = measured_qubits(qc)
                keep = [n - 1 - q for q in qs[::-1]]  # clbit m-1 first
                rest = tuple(a for a in range(n) if a not in keep)
                p = np.transpose(marg, keep + list(rest)).reshape(1 << len(qs), -1).sum(1)
                m = len(qs)
                ref = {format(i, f"0{m}b"): float(v) for i, v in enumerate(p) if v > 1e-14}
                if len(next(iter(mine), "") or "") != m:  # several registers: joined width
                    ref = None
            if ref is None:
                row.update(qsimdist_s=q_s, aer_s=a_s, ok=None, note="no reference")
            else:
                d_mine, d_aer = tvd(mine, ref), tvd(theirs, ref)
                p_value = chi_square_p(mine, ref)
                row.update(qsimdist_s=q_s, aer_s=a_s, tvd=d_mine, aer_tvd=d_aer,
                           chi2_p=p_value, ok=d_mine <= 2 * d_aer + 0.01 or p_value > 1e-3)
        except Exception as exc:  # noqa: BLE001
            row["refused"] = first_line(exc)
        rows.append(row)

    row = {**base, "primitive": "estimator"}
    obs = observables(n)
    mine_e = EstimatorV2()
    theirs_e = AerEstimator(options={"default_precision": 0.0})
    try:
        q_s, a_s, mine, theirs = race(
            lambda: np.asarray(mine_e.run([(unitary, obs)]).result()[0].data.evs),
            lambda: np.asarray(theirs_e.run([(aer_unitary, [o.apply_layout(
                aer_unitary.layout) for o in obs])]).result()[0].data.evs),
            repeats)
        err = float(np.max(np.abs(mine - theirs)))
        row.update(qsimdist_s=q_s, aer_s=a_s, error=err,
                   ok=None if dynamic else err <= ESTIMATOR_TOLERANCE)
    except Exception as exc:  # noqa: BLE001
        row["refused"] = first_line(exc)
    rows.append(row)
    return rows


def _aer_probe(name: str, level: str, size: int, shots: int, queue) -> None:
    """In a child process: one Aer call on the circuit (its statevector, or for a dynamic
    circuit its sampler and then its estimator), transpilation included; puts the seconds
    on ``queue``."""
    from qiskit import transpile
    from qiskit_aer import AerSimulator
    from qiskit_aer.primitives import EstimatorV2 as AerEstimator
    from qiskit_aer.primitives import SamplerV2 as AerSampler

    qc, _ = make_circuit(name, level, size)
    t0 = time.perf_counter()
    sim = AerSimulator(method="statevector")
    if is_dynamic(qc):
        measured = transpile(qc, sim, optimization_level=1)
        AerSampler(seed=7).run([measured], shots=shots).result()
        obs = [o.apply_layout(measured.layout) for o in observables(qc.num_qubits)]
        AerEstimator(options={"default_precision": 0.0}).run([(measured, obs)]).result()
    else:
        t = transpile(qc.remove_final_measurements(inplace=False), sim, optimization_level=1)
        t.save_statevector()
        sim.run(t).result()
    queue.put(time.perf_counter() - t0)


def aer_returns(name: str, level: str, size: int, shots: int, timeout: float) -> bool:
    """Whether one Aer call on the circuit returns within ``timeout`` seconds (run in a
    child process, stopped where it does not)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_aer_probe, args=(name, level, size, shots, queue))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.terminate()
        child.join()
        return False
    return child.exitcode == 0 and not queue.empty()


def qsimdist_alone(name: str, level: str, size: int, repeats: int, timeout: float,
                   seed: int = 7, dynamic_shots: int = SHOTS) -> list[dict]:
    """qsimdist's rows where Aer's call did not return in ``timeout`` seconds: warm
    medians of ``repeats`` calls; amplitudes checked complex64 against complex128."""
    import qsimdist
    from qsimdist.qiskit import EstimatorV2, SamplerV2

    qc, used = make_circuit(name, level, size)
    base = {"name": name, "level": level, "size": size, "used": used,
            "qubits": qc.num_qubits, "aer_timeout": timeout}
    dynamic = is_dynamic(qc)
    base["dynamic"] = dynamic
    unitary = qc if dynamic else qc.remove_final_measurements(inplace=False)
    n = qc.num_qubits

    def median_of(fn):
        timed(fn)
        return statistics.median(timed(fn)[0] for _ in range(repeats))

    rows = []
    if not dynamic:
        rng = np.random.default_rng(seed)
        bitstrings = [format(int(rng.integers(1 << n)), f"0{n}b") for _ in range(4)]
        q_s = median_of(lambda: qsimdist.amplitudes(unitary, bitstrings, dtype="complex64"))
        a64 = np.asarray(qsimdist.amplitudes(unitary, bitstrings, dtype="complex64").amplitudes)
        a128 = np.asarray(qsimdist.amplitudes(unitary, bitstrings,
                                              dtype="complex128").amplitudes)
        err = float(np.max(np.abs(a64 - a128)))
        rows.append({**base, "primitive": "amplitudes", "qsimdist_alone_s": q_s,
                     "self_error_c64": err, "ok": err <= TOLERANCE["complex64"]})
    if qc.num_clbits and measured_qubits(qc):
        shots = dynamic_shots if dynamic else SHOTS
        sampler = SamplerV2(seed=seed)
        q_s = median_of(lambda: sampler.run([qc], shots=shots).result())
        rows.append({**base, "primitive": "sampler", "qsimdist_alone_s": q_s, "ok": None})
    estimator = EstimatorV2()
    obs = observables(n)
    q_s = median_of(lambda: estimator.run([(unitary, obs)]).result())
    rows.append({**base, "primitive": "estimator", "qsimdist_alone_s": q_s, "ok": None})
    return rows


def fmt_row(r: dict) -> str:
    head = f"{r['name']:26s} {r['level']:5s} {r.get('used', r['size']):>3} {r['primitive']:10s}"
    if "skipped" in r:
        return f"{head} skipped: {r['skipped']}"
    if "aer_timeout" in r:
        check = {True: "ok", False: "WRONG", None: "-"}[r.get("ok")]
        detail = (f"c64 vs c128 {r['self_error_c64']:.1e}" if "self_error_c64" in r
                  else "no reference")
        return (f"{head} qsimdist {r['qsimdist_alone_s'] * 1e3:9.1f} ms  aer > "
                f"{r['aer_timeout']:g} s (did not return)  {check:5s} {detail}")
    if "refused" in r:
        return f"{head} REFUSED {r['refused']}"
    ratio = r["qsimdist_s"] / max(r["aer_s"], 1e-9)
    check = {True: "ok", False: "WRONG", None: "-"}[r.get("ok")]
    detail = ""
    if "tvd" in r:
        detail = f"tvd {r['tvd']:.3f} (aer {r['aer_tvd']:.3f}, p {r['chi2_p']:.2g})"
    elif "error_c64" in r:
        detail = f"err c64 {r['error_c64']:.1e} c128 {r['error_c128']:.1e}"
    elif "error" in r:
        detail = f"err {r['error']:.1e}"
    return (f"{head} qsimdist {r['qsimdist_s'] * 1e3:9.1f} ms  aer {r['aer_s'] * 1e3:9.1f} ms"
            f"  ratio {ratio:6.2f}  {check:5s} {detail}")


PRIMITIVES = ("amplitudes", "sampler", "estimator")


def median_ratios(rows: list[dict]) -> dict[int, dict[str, tuple[float, int]]]:
    """Per size and primitive, the median qsimdist / Aer time and the number of calls
    (primitives without a timed call left out)."""
    timed_rows = [r for r in rows if "qsimdist_s" in r]
    out: dict[int, dict[str, tuple[float, int]]] = {}
    for size in sorted({r["size"] for r in timed_rows}):
        for prim in PRIMITIVES:
            ratios = [r["qsimdist_s"] / r["aer_s"] for r in timed_rows
                      if r["size"] == size and r["primitive"] == prim]
            if ratios:
                out.setdefault(size, {})[prim] = (statistics.median(ratios), len(ratios))
    return out


def summary(rows: list[dict]) -> str:
    timed_rows = [r for r in rows if "qsimdist_s" in r]
    lines = ["", "median qsimdist/Aer warm time ratio (calls):",
             f"{'size':>5} {'amplitudes':>16} {'sampler':>16} {'estimator':>16}"]
    for size, by_prim in median_ratios(rows).items():
        cells = [f"{by_prim[p][0]:8.2f} ({by_prim[p][1]:3d})" if p in by_prim
                 else f"{'-':>14}" for p in PRIMITIVES]
        lines.append(f"{size:>5} " + " ".join(f"{c:>16}" for c in cells))
    worst = sorted(timed_rows, key=lambda r: r["qsimdist_s"] / r["aer_s"], reverse=True)[:8]
    lines += ["", "worst ratios:"] + [fmt_row(r) for r in worst]
    slow = [r for r in timed_rows if r["qsimdist_s"] > SLOW_RATIO * r["aer_s"]
            and r["qsimdist_s"] - r["aer_s"] > SLOW_MARGIN_S]
    lines += ["", f"calls over {SLOW_RATIO:g}x Aer's and {SLOW_MARGIN_S * 1e3:g} ms over it: "
              f"{len(slow)}"] + [fmt_row(r) for r in slow]
    alone = [r for r in rows if "aer_timeout" in r]
    if alone:
        lines += ["", f"calls where Aer did not return in time: {len(alone)}"] + [
            fmt_row(r) for r in alone]
    bad = [r for r in rows if "refused" in r or r.get("ok") is False]
    lines += ["", f"refusals and wrong values: {len(bad)}"] + [fmt_row(r) for r in bad]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mqt_bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[5, 10, 16, 20])
    parser.add_argument("--levels", nargs="+", default=["indep", "alg"],
                        choices=["indep", "alg"])
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--json", default=None, metavar="FILE")
    parser.add_argument("--dynamic-shots", type=positive_int, default=SHOTS,
                        help="shots of dynamic circuits' sampler rows (Aer runs them shot by "
                             f"shot; default {SHOTS})")
    parser.add_argument("--aer-timeout", type=float, default=None, metavar="SECONDS",
                        help="first run Aer once on each circuit in a child process; where "
                             "it does not return in SECONDS, time qsimdist alone")
    args = parser.parse_args(argv)
    try:
        from mqt.bench.benchmarks import get_available_benchmark_names
    except ImportError:
        print("mqt-bench is not installed (pip install 'mqt-bench>=2')", file=sys.stderr)
        return 2
    names = get_available_benchmark_names()
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            print(f"unknown benchmark(s) {unknown}; valid: {', '.join(names)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in args.only]
    rows: list[dict] = []
    for size in args.sizes:
        for level in args.levels:
            for name in names:
                try:
                    if args.aer_timeout and make_circuit(name, level, size)[0] is not None \
                            and not aer_returns(name, level, size, args.dynamic_shots,
                                                args.aer_timeout):
                        new = qsimdist_alone(name, level, size, args.repeats,
                                             args.aer_timeout,
                                             dynamic_shots=args.dynamic_shots)
                    else:
                        new = compare(name, level, size, args.repeats,
                                      dynamic_shots=args.dynamic_shots)
                except Exception as exc:  # noqa: BLE001 - e.g. Aer refusing the circuit
                    new = [{"name": name, "level": level, "size": size, "primitive": "all",
                            "skipped": first_line(exc)}]
                for r in new:
                    print(fmt_row(r), flush=True)
                rows += new
    print(summary(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
