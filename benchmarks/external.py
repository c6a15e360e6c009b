"""The external corpora in one command, each beside the best peer for it.

    python -m benchmarks.external --data ../shared/data --out DIR
        [--mqt-sizes 5 10 16 20] [--mqt-only NAME ...] [--observables Z62 W10 W17]
        [--theta 0.8 1.2] [--no-sum-z] [--revlib-rounds 3]
        [--skip kicked_ising|mqt_bench|revlib ...] [--dry-run]

Runs, one after the other (never two at once: two threaded simulators on a few cores
slow each other down several times), each harness in its own process:

1. ``benchmarks.kicked_ising``: IBM's 127-qubit kicked-Ising observables (facts and
   published values read from the data folder) through ``EstimatorV2`` beside quimb's
   reverse light cone, each contender per observable in a fresh process, then the sum of
   the 127 single-qubit Z terms;
2. ``benchmarks.mqt_bench``: MQT Bench circuits made by ``mqt-bench`` at run time, through
   ``qsimdist.amplitudes``, ``SamplerV2`` and ``EstimatorV2`` beside Aer, warm
   (``--aer-timeout 300``: where Aer does not return, qsimdist is timed alone);
3. ``benchmarks.revlib``: the shared RevLib files, four bitstrings each, each contender in
   a fresh process, Aer on one thread.

Each harness's own output goes to ``DIR/<harness>.log`` (and ``.json`` where it writes
one); ``DIR/summary.md`` gathers the headline numbers. ``--dry-run`` prints the commands.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HARNESSES = ("kicked_ising", "mqt_bench", "revlib")


def commands(args) -> dict[str, list[str]]:
    """The command of each harness to run, by name."""
    out = Path(args.out)
    py = [sys.executable, "-u", "-m"]
    cmds = {
        "kicked_ising": py + ["benchmarks.kicked_ising", "--data", str(args.data),
                              "--theta", *map(str, args.theta),
                              "--observables", *args.observables,
                              *(["--sum-z"] if args.sum_z else []), "--timeout", "600",
                              "--json", str(out / "kicked_ising.json")],
        "mqt_bench": py + ["benchmarks.mqt_bench", "--sizes", *map(str, args.mqt_sizes),
                           "--levels", "indep", "alg", "--repeats", str(args.mqt_repeats),
                           "--dynamic-shots", "100", "--aer-timeout", "300",
                           "--json", str(out / "mqt_bench.json")]
        + (["--only", *args.mqt_only] if args.mqt_only else []),
        "revlib": py + ["benchmarks.revlib", "--data", str(args.data), "--rounds",
                        str(args.revlib_rounds), "--aer-threads", "1"],
    }
    return {name: cmd for name, cmd in cmds.items() if name not in args.skip}


def summary(out: Path) -> str:
    """Markdown of the headline numbers of the harnesses that ran."""
    lines = ["# External corpora", ""]
    ki = out / "kicked_ising.json"
    if ki.exists():
        lines += ["## Kicked Ising (127 qubits) beside quimb", "",
                  "| observable | θ_h | qsimdist | abs. error | qsimdist s | quimb s | ratio |",
                  "|---|---|---|---|---|---|---|"]
        for r in json.loads(ki.read_text()):
            q, p = r.get("qsimdist", {}), r.get("quimb", {})

            def f(x, spec):
                return "-" if x is None else format(x, spec)

            lines.append(f"| {r['observable']} | {r['theta']} | {f(q.get('value'), '.9g')} | "
                         f"{f(r.get('abs_error'), '.1e')} | {f(q.get('seconds'), '.2f')} | "
                         f"{f(p.get('seconds'), '.2f')} | {f(r.get('ratio'), '.1f')} |")
        lines.append("")
    mqt = out / "mqt_bench.json"
    if mqt.exists():
        from .mqt_bench import PRIMITIVES, median_ratios

        rows = json.loads(mqt.read_text())
        medians = median_ratios(rows)
        lines += ["## MQT Bench beside Aer (median qsimdist / Aer time per size)", "",
                  "| size | amplitudes | sampler | estimator | refusals or wrong values |",
                  "|---|---|---|---|---|"]
        for size in sorted({r["size"] for r in rows}):
            by_prim = medians.get(size, {})
            cells = [f"{by_prim[p][0]:.2f} ({by_prim[p][1]})" if p in by_prim else "-"
                     for p in PRIMITIVES]
            bad = sum(1 for r in rows if r["size"] == size
                      and ("refused" in r or r.get("ok") is False))
            lines.append(f"| {size} | " + " | ".join(cells) + f" | {bad} |")
        lines.append("")
    rev = out / "revlib.log"
    if rev.exists():
        table = [ln for ln in rev.read_text().splitlines() if ln.startswith("|")]
        if table:
            lines += ["## RevLib, four bitstrings, beside Aer", "", *table, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from . import positive_int

    ap = argparse.ArgumentParser(prog="python -m benchmarks.external",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data", help="the shared data folder")
    ap.add_argument("--out", default="external-results", help="folder for logs and JSON")
    ap.add_argument("--mqt-sizes", type=positive_int, nargs="+", default=[5, 10, 16, 20])
    ap.add_argument("--mqt-only", nargs="+", default=None, metavar="NAME")
    ap.add_argument("--mqt-repeats", type=positive_int, default=1)
    ap.add_argument("--observables", nargs="+", default=["Z62", "W10", "W17"],
                    choices=["Z62", "W10", "W17"])
    ap.add_argument("--theta", type=float, nargs="+", default=[0.8, 1.2])
    ap.add_argument("--no-sum-z", dest="sum_z", action="store_false",
                    help="leave out the sum of the 127 Z terms (quimb takes minutes)")
    ap.add_argument("--revlib-rounds", type=positive_int, default=3)
    ap.add_argument("--skip", nargs="+", default=[], choices=HARNESSES)
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args(argv)
    todo = commands(args)
    if args.dry_run:
        for cmd in todo.values():
            print(" ".join(cmd))
        return 0
    if "kicked_ising" in todo or "revlib" in todo:
        facts = Path(args.data) / "circuits"
        if not facts.is_dir():
            print(f"the shared data folder {args.data!r} has no circuits/ folder; pass "
                  "--data DIR, or --skip kicked_ising revlib", file=sys.stderr)
            return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name, cmd in todo.items():
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(cmd[2:])}", flush=True)
        with open(out / f"{name}.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        if rc:
            failed.append(f"{name} (exit {rc}, see {out / (name + '.log')})")
    (out / "summary.md").write_text(summary(out))
    print(f"[{time.strftime('%H:%M:%S')}] summary: {out / 'summary.md'}", flush=True)
    if failed:
        print("failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
