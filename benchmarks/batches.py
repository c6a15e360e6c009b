"""Amplitude batches priced: the batcher's grouping against the same bitstrings one by one.

For each case (a set of bitstrings of the n30 circuit and a ``--memory-limit``),
``qsimdist.amplitudes(N30, bits, order="natural", memory_limit=L, batch=B)`` runs
with ``batch=True`` (the router picks the grouping by predicted cost) and with
``batch=False`` (one contraction per bitstring), each call in a fresh process,
alternating, ``--repeats`` times. Seconds are the call alone (imports and the
circuit's parse done before it). The row keeps both sides' median seconds, their
contractions and FLOPs, the amplitudes' largest relative difference, and the
grouping the batched call chose (``stats["batching"]``: the open qubits, the
contractions, and the router's predicted seconds of the chosen grouping and of
one contraction per distinct bitstring, labelled predicted).

Cases: ``pair`` (issue 24's two bitstrings that differ in 15 characters) at the
default limit and at 1GiB, 64MiB and 8MiB; ``random1000`` (1,000 bitstrings from
``numpy.random.default_rng(2024)``, default limit; minutes per call). The first
call at a limit also pays the path search; run the same command twice to see
warm path caches.

Run::

    python -m benchmarks.batches --data ../shared/data [--cases pair random1000]
        [--limits default 1GiB 64MiB 8MiB] [--repeats 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import positive_int

N30 = "circuits/circuit_n30_m14_s0_e0_pEFGH.qsim"
PAIR = ["0" * 30, "101100111000111100001111000011"]
LIMITS = ["default", "1GiB", "64MiB", "8MiB"]

_CALL = r"""
import json, sys, time
import numpy as np
import qsimdist
path, case, limit, batch = {path!r}, {case!r}, {limit!r}, {batch!r}
if case == "pair":
    bits = {pair!r}
else:
    rng = np.random.default_rng(2024)
    bits = ["".join(map(str, row)) for row in rng.integers(0, 2, (1000, 30))]
kw = {{}} if limit == "default" else {{"memory_limit": limit}}
t = time.perf_counter()
res = qsimdist.amplitudes(path, bits, order="natural", batch=batch, **kw)
sec = time.perf_counter() - t
st = res.stats
amps = np.asarray(res.amplitudes, dtype=np.complex128).reshape(-1)
out = {{"seconds": sec, "contractions": st.get("contractions"), "flops": st.get("flops"),
        "batching": st.get("batching"), "amplitudes": [[a.real, a.imag] for a in amps]}}
print("@@" + json.dumps(out, default=str))
"""


def _call(data: Path, case: str, limit: str, batch: bool, timeout: float) -> dict:
    code = _CALL.format(path=str(data / N30), case=case, limit=limit, batch=batch, pair=PAIR)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:300]}


def compare(data: Path, case: str, limit: str, repeats: int = 3,
            timeout: float = 1200.0) -> dict:
    """One row: the batched call against one by one, alternating, ``repeats`` each."""
    if case not in ("pair", "random1000"):
        raise ValueError(f"unknown case {case!r}; valid: pair, random1000")
    if not (data / N30).is_file():
        raise FileNotFoundError(f"{data / N30} is missing (the shared data folder)")
    sides: dict[str, list[dict]] = {"batched": [], "one_by_one": []}
    for _ in range(repeats):
        sides["batched"].append(_call(data, case, limit, True, timeout))
        sides["one_by_one"].append(_call(data, case, limit, False, timeout))
    row: dict = {"case": case, "limit": limit, "repeats": repeats}
    amps = {}
    for side, runs in sides.items():
        bad = [r for r in runs if "error" in r]
        if bad:
            row[side] = {"error": bad[0]["error"]}
            continue
        first = runs[0]
        amps[side] = first.pop("amplitudes")
        for r in runs[1:]:
            r.pop("amplitudes", None)
        row[side] = {"seconds": statistics.median(r["seconds"] for r in runs),
                     "runs_seconds": [r["seconds"] for r in runs],
                     "contractions": first["contractions"], "flops": first["flops"],
                     "batching": first.get("batching")}
    if len(amps) == 2:
        a, b = amps["batched"], amps["one_by_one"]
        row["max_rel_diff"] = max(
            abs(complex(*x) - complex(*y)) / max(abs(complex(*y)), 1e-30) for x, y in zip(a, b))
        row["ratio"] = row["batched"]["seconds"] / row["one_by_one"]["seconds"]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("QSIMDIST_SHARED_DATA", "../shared/data"))
    ap.add_argument("--cases", nargs="+", default=["pair"], choices=["pair", "random1000"])
    ap.add_argument("--limits", nargs="+", default=LIMITS)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not (data / N30).is_file():
        print(f"error: {data / N30} is missing; pass --data (the shared data folder)",
              file=sys.stderr)
        return 2
    rows = []
    print("| bitstrings | limit | batched: s (runs), contractions, FLOPs | one by one | "
          "batched / one by one | grouping (predicted batched / one by one) | max rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases:
        for limit in (args.limits if case == "pair" else ["default"]):
            row = compare(data, case, limit, args.repeats, args.timeout)
            rows.append(row)
            print(_line(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.batches",
                                  *(argv if argv is not None else sys.argv[1:])]),
             "rows": rows}, indent=1, default=str) + "\n")
    return 0


def _side(s: dict) -> str:
    if "error" in s:
        return s["error"]
    runs = "/".join(f"{x:.2f}" for x in s["runs_seconds"])
    return f"{s['seconds']:.2f} ({runs}), {s['contractions']}, {float(s['flops']):.3g}"


def _line(row: dict) -> str:
    b = row.get("batched", {})
    g = b.get("batching") or {}
    pred = ""
    if g:
        pred = f"{g.get('open_qubits')} open, {g.get('contractions')} contractions"
        if "predicted_seconds" in g:
            pred += (f"; {g['predicted_seconds']:.4g} / "
                     f"{g['one_by_one_predicted_seconds']:.4g} s predicted")
    ratio = f"{row['ratio']:.2f}" if "ratio" in row else "—"
    diff = f"{row['max_rel_diff']:.1e}" if "max_rel_diff" in row else "—"
    label = "the issue's pair" if row["case"] == "pair" else "1,000 random"
    return (f"| {label} | {row['limit']} | {_side(b)} | {_side(row.get('one_by_one', {}))} | "
            f"{ratio} | {pred} | {diff} |")


if __name__ == "__main__":
    sys.exit(main())
