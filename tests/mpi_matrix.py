"""The CLI under ``mpiexec``, case by case, against one process at the same per-rank limit.

A case is (circuit, bitstrings, limit, ranks). Each runs
``mpiexec -n P qsimdist amplitude CIRCUIT BITS... --profile local-cpu
[--memory-limit L] --json`` and ``qsimdist amplitude CIRCUIT BITS...
[--memory-limit L] --json`` in one process, and compares amplitudes
(rtol 1e-5, complex64) and wall times. Where the distributed executor ran, the
MPI case runs once more with ``QSIMDIST_TRACE_MEMORY=1`` (untimed) for each
rank's memory:

* ``guarded_bytes``: the per-rank peak the memory guard checked;
* ``array_peak_bytes``: arrays the run held, with the buffer pool's free buffers;
* ``traced_peak_bytes``: what tracemalloc saw the run add, Python objects included;
* ``traced_array_bytes``: numpy's traced bytes after the step with the largest predicted
  live bytes, in the first and last slice (the pool's free buffers included), less what
  numpy held before the run;
* ``rss_growth_bytes``: resident high-water mark less the resident size at the
  run's start (an upper bound on what the run added), from one more untimed run with
  ``QSIMDIST_TRACE_MEMORY=rss``: the same warm-up slice, without tracemalloc, whose
  own tables the traced run's resident size includes (``rss_growth_traced_bytes``).

Limits: ``none`` (the default: the host's available memory shared by the
ranks), ``ample`` (1 GiB per rank) and ``forcing`` (a per-rank limit under
which the distributed schedule redistributes: the largest of the unsliced
plan's peak / 2^k, k = 1..15, whose dp schedule for P ranks has an all-to-all;
the halving continues while the statevector route would still fit, and stops
where the schedule would have more than ``MAX_FORCING_SLICES`` slices or
``MAX_FORCING_FLOPS`` times the unsliced FLOPs: where no limit above that
redistributes, the tightest limit within it).

Run the whole matrix (writes JSON lines to stdout, a summary to stderr)::

    python tests/mpi_matrix.py [--ranks 2 4] [--circuits NAME ...] > matrix.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = Path(os.environ.get("QSIMDIST_SHARED_DATA", ROOT.parent / "shared" / "data"))
N30 = DATA / "circuits" / "circuit_n30_m14_s0_e0_pEFGH.qsim"
QSIMDIST = shutil.which("qsimdist") or "qsimdist"

#: every bundled circuit, once each (the .qasm3 and .qsim twins hold the same circuits)
BUNDLED = ["ghz_n5.qasm", "ghz_n12.qasm", "qft_n6.qasm", "qft_n10.qasm", "rqc_3x4_m8.qasm",
           "rqc_3x4_m12.qasm", "rqc_4x5_m12.qasm", "lattice/tfim_hex_4x3_t2.qasm",
           "lattice/tfim_hex_4x4_t3.qasm", "lattice/tfim_rect_3x3_t2.qasm",
           "lattice/tfim_rect_4x4_t3.qasm", "lattice/tfim_tri_3x3_t2.qasm",
           "lattice/tfim_tri_4x4_t3.qasm"]
KINDS = ("one", "two", "stars")
LIMITS = ("none", "ample", "forcing")
AMPLE = "1GiB"
RTOL = 1e-5


def circuit_path(name: str) -> Path:
    return N30 if name == "n30" else ROOT / "circuits" / name


def circuit_args(name: str) -> list[str]:
    return [str(circuit_path(name))] + (["--order", "natural"] if name == "n30" else [])


def n_qubits(name: str) -> int:
    import qsimdist
    from qsimdist.engine.amplitudes import load_circuit as _circuit

    del qsimdist
    return _circuit(str(circuit_path(name))).n_qubits


def bitstrings(name: str, kind: str) -> list[str]:
    """Seeded inputs: one bitstring, two that differ in 3 characters, a pattern with 3 ``*``."""
    n = n_qubits(name)
    rng = random.Random(f"{name}:{kind}")
    first = "".join(rng.choice("01") for _ in range(n))
    if kind == "one":
        return [first]
    where = rng.sample(range(n), min(3, n))
    if kind == "two":
        second = list(first)
        for j in where:
            second[j] = "1" if first[j] == "0" else "0"
        return [first, "".join(second)]
    pattern = list(first)
    for j in where:
        pattern[j] = "*"
    return ["".join(pattern)]


def forcing_limit(name: str, bits: list[str], ranks: int) -> tuple[int | None, bool]:
    """``(limit, redistributes)``: the largest per-rank limit (unsliced plan peak / 2^k)
    whose dp schedule for ``ranks`` redistributes; where none does (small circuits,
    whose dp schedules slice instead), the tightest limit that still plans in at most
    ``MAX_FORCING_SLICES`` slices and ``MAX_FORCING_FLOPS`` times the FLOPs; where
    the statevector route fits every such limit (a few qubits), the tightest limit
    that still holds the statevector; where not even half the unsliced peak plans,
    the peak itself."""
    import qsimdist
    from qsimdist.api import choose_route, covering_pattern
    from qsimdist.engine.amplitudes import load_circuit as _circuit
    from qsimdist.engine.coordination import distribute, profile_for
    from qsimdist.errors import QsimdistError

    order = "natural" if name == "n30" else "qiskit"
    gc = _circuit(str(circuit_path(name)))
    pattern = covering_pattern(bits)
    base = qsimdist.plan(gc, bitstrings=pattern, order=order, memory_limit="none")
    peak = base.stats.peak_bytes
    tightest = statevector = None
    for k in range(1, 16):
        limit = max(peak >> k, 64)
        route = choose_route(gc, bits, order=order, memory_limit=limit)
        if route.method == "statevector":
            statevector = limit
            continue
        try:
            sched = distribute(base, profile_for("local-cpu", limit), ranks).schedule
        except QsimdistError:
            break
        if (sched.n_slices > MAX_FORCING_SLICES
                or sched.predicted.flops_counted > MAX_FORCING_FLOPS * base.stats.flops):
            break
        if sched.predicted.n_redistributions > 0:
            return limit, True
        tightest = limit
    if tightest is None and statevector is None:  # even half the unsliced peak does not plan
        tightest = max(peak, 64)
    return (tightest if tightest is not None else statevector), False


#: forcing limits stop where the schedule has more slices than this: below it the
#: dp redistributes only at a few KiB per rank (rqc_3x4_m12: 3,729 B, 131,072 slices,
#: 58 s in one process and 49 s under mpiexec -n 2 for what takes 1.4 s unsliced), and
#: such a case measures the per-slice overhead of both executors, not distribution
MAX_FORCING_SLICES = 1 << 14
#: ... or where slicing multiplies the plan's FLOPs by more than this (n30, two bitstrings:
#: 4,096 slices at 512 KiB per rank cost 64x the unsliced FLOPs, predicted 3 s, and ran
#: past 8 minutes in one process)
MAX_FORCING_FLOPS = 16

_ONE_PROCESS: dict[tuple, tuple] = {}


def one_process(args: list[str]):
    """``qsimdist ARGS`` in one process, run once per argument list (the -n 2 and -n 4 cases
    of the same circuit, bitstrings and limit compare with the same run)."""
    key = tuple(args)
    if key not in _ONE_PROCESS:
        _ONE_PROCESS[key] = run_cli(1, args)
    return _ONE_PROCESS[key]


#: runs that a signal ended and that were run again (command, signal, the crash's stderr):
#: a test warns with them, so a rare crash stays visible without failing the matrix
CRASHES: list[dict] = []


def _crashed(proc) -> int | None:
    """The signal that ended ``proc`` (one process: a negative return code; mpiexec: its
    report of a rank's signal), or None."""
    if proc.returncode < 0:
        return -proc.returncode
    match = re.search(r"EXIT STRING: .*\(signal (\d+)\)", proc.stdout or "")
    return int(match.group(1)) if match else None


def run_cli(ranks: int, args: list[str], env: dict | None = None, timeout: float = 900):
    cmd = ([QSIMDIST] if ranks == 1 else ["mpiexec", "-n", str(ranks), QSIMDIST]) + args
    # a crash in compiled code prints where it happened (Python's fault handler)
    full_env = dict(os.environ, PYTHONFAULTHANDLER="1", **(env or {}))
    t0 = time.monotonic()
    for attempt in range(2):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=ROOT, env=full_env)
        except subprocess.TimeoutExpired as exc:  # a failed case, not the end of the matrix
            out = exc.stdout or ""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            proc = subprocess.CompletedProcess(cmd, 124, out,
                                               f"timed out after {timeout:.0f} s")
        signum = _crashed(proc)
        if signum is None or attempt == 1:
            break
        # a rare crash (twice in many full CI runs, never alone): run once more, keep it
        CRASHES.append({"command": " ".join(cmd[-12:]), "signal": signum,
                        "stderr": (proc.stderr or "")[-4000:]})
        t0 = time.monotonic()
    return proc, time.monotonic() - t0


def parse(proc) -> tuple[np.ndarray, dict]:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or len(lines) != 1:
        raise AssertionError(f"exit {proc.returncode}; stdout {proc.stdout[-500:]!r}; "
                             f"stderr {proc.stderr[-1500:]!r}")
    data = json.loads(lines[0])
    amps = np.array([a["re"] + 1j * a["im"] for a in data["amplitudes"]])
    return amps, data["stats"]


def run_case(name: str, kind: str, limit_kind: str, ranks: int) -> dict:
    """One case of the matrix; returns its record (``ok`` False with a reason on failure)."""
    bits = bitstrings(name, kind)
    rec: dict = {"circuit": name, "bitstrings": kind, "limit": limit_kind, "ranks": ranks}
    limit = None
    if limit_kind == "ample":
        limit = AMPLE
    elif limit_kind == "forcing":
        limit, rec["forces_redistribution"] = forcing_limit(name, bits, ranks)
        if limit is None:
            rec.update(ok=False, reason="no per-rank limit below the statevector's plans")
            return rec
        limit = str(limit)
    args = ["amplitude", *circuit_args(name), *bits, "--json"]
    args += ["--memory-limit", limit] if limit is not None else []
    rec["memory_limit"] = limit
    one, t_one = one_process(args)
    many, t_many = run_cli(ranks, [*args, "--profile", "local-cpu"])
    rec.update(seconds_one=round(t_one, 2), seconds_mpi=round(t_many, 2),
               time_ratio=round(t_many / t_one, 2))
    try:
        a1, s1 = parse(one)
        a2, s2 = parse(many)
    except AssertionError as exc:
        rec.update(ok=False, reason=str(exc))
        return rec
    err = float(np.linalg.norm(a1 - a2) / max(np.linalg.norm(a1), 1e-300))
    rec.update(rel_err=err, shape_one=list(a1.shape), shape_mpi=list(a2.shape),
               method_one=s1.get("method"), method_mpi=s2.get("method"))
    ranks_stats = s2.get("ranks", [])
    if ranks_stats:  # the distributed executor ran: its memory, measured in a traced run
        traced, _ = run_cli(ranks, [*args, "--profile", "local-cpu"],
                            env={"QSIMDIST_TRACE_MEMORY": "1"})
        try:
            ranks_stats = parse(traced)[1].get("ranks", [])
        except AssertionError as exc:
            rec.update(ok=False, reason=f"traced run: {exc}")
            return rec
        untraced, _ = run_cli(ranks, [*args, "--profile", "local-cpu"],
                              env={"QSIMDIST_TRACE_MEMORY": "rss"})
        try:
            resident = {r["rank"]: r["rss_growth_bytes"]
                        for r in parse(untraced)[1].get("ranks", [])}
        except AssertionError as exc:
            rec.update(ok=False, reason=f"resident-size run: {exc}")
            return rec
    rec["redistributions"] = sum(r["redistributions"] for r in ranks_stats)
    rec["memory"] = [{**{k: r[k] for k in ("rank", "guarded_bytes", "predicted_peak_bytes",
                                            "measured_peak_bytes", "array_peak_bytes",
                                            "traced_peak_bytes", "traced_array_bytes")},
                      "rss_growth_traced_bytes": r["rss_growth_bytes"],
                      "rss_growth_bytes": resident.get(r["rank"], -1)}
                     for r in ranks_stats]
    rec["ok"] = err <= RTOL and a1.shape == a2.shape
    if not rec["ok"]:
        rec["reason"] = f"relative error {err:.2e} or shapes {a1.shape} / {a2.shape}"
    return rec


def _mib(b) -> str:
    return "—" if b is None or b < 0 else f"{b / 2**20:.3g}"


def report(lines: list[str]) -> str:
    """The matrix as a markdown table (memory in MiB, the largest over ranks)."""
    rows = [json.loads(ln) for ln in lines if ln.strip()]
    ok = sum(r["ok"] for r in rows)
    ratios = [r["time_ratio"] for r in rows if "time_ratio" in r]
    out = [f"{len(rows)} cases, {ok} equal to one process (rtol {RTOL}), "
           f"{len(rows) - ok} not; time under mpiexec / one process: median "
           f"{sorted(ratios)[len(ratios) // 2]:.2f}, largest {max(ratios):.2f}.", "",
           "| circuit | bitstrings | limit | P | route | all-to-alls | one process (s) | "
           "mpiexec (s) | ratio | rel. err | guarded | traced arrays | RSS growth | "
           "traced, all objects |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mem = r.get("memory") or []

        def top(key, mem=mem):
            return max((m[key] for m in mem), default=None)

        lim = r.get("memory_limit")
        lim = "default" if lim is None else (lim if lim == AMPLE else f"{int(lim):,} B")
        out.append(
            f"| {r['circuit']} | {r['bitstrings']} | {r['limit']} ({lim}) | {r['ranks']} | "
            f"{r.get('method_mpi', '—')} | {r.get('redistributions', '—')} | "
            f"{r.get('seconds_one', '—')} | {r.get('seconds_mpi', '—')} | "
            f"{r.get('time_ratio', '—')} | "
            + (f"{r['rel_err']:.1e}" if "rel_err" in r else r.get("reason", "—")[:60])
            + f" | {_mib(top('guarded_bytes'))} | {_mib(top('traced_array_bytes'))} | "
            f"{_mib(top('rss_growth_bytes'))} | {_mib(top('traced_peak_bytes'))} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--circuits", nargs="+", default=BUNDLED + ["n30"])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS))
    ap.add_argument("--limits", nargs="+", default=list(LIMITS))
    ap.add_argument("--resume", type=Path, help="skip the cases recorded as ok in this file")
    ap.add_argument("--report", type=Path, help="print this JSON-lines file as markdown, run "
                    "nothing")
    ns = ap.parse_args(argv)
    if ns.report is not None:
        print(report(ns.report.read_text().splitlines()))
        return 0
    done = set()
    if ns.resume is not None and ns.resume.exists():
        for line in ns.resume.read_text().splitlines():
            r = json.loads(line)
            if r.get("ok") and "reason" not in r:
                done.add((r["circuit"], r["bitstrings"], r["limit"], r["ranks"]))
    failed = 0
    for name in ns.circuits:
        if name == "n30" and not N30.exists():
            print(f"skip n30: {N30} not found", file=sys.stderr)
            continue
        for ranks in ns.ranks:
            for kind in ns.kinds:
                for lim in ns.limits:
                    if (name, kind, lim, ranks) in done:
                        continue
                    rec = run_case(name, kind, lim, ranks)
                    failed += not rec["ok"]
                    print(json.dumps(rec), flush=True)
                    print(f"{name} {kind} {lim} -n {ranks}: "
                          f"{'ok' if rec['ok'] else 'FAILED'} "
                          f"{rec.get('time_ratio', '')} {rec.get('skipped', '')}"
                          f"{rec.get('reason', '')[:300]}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
