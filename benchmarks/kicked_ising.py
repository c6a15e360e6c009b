"""IBM's 127-qubit kicked-Ising expectation values: qsimdist ``EstimatorV2`` beside quimb.

    python -m benchmarks.kicked_ising --data ../shared/data [--theta 0.8 1.2]
        [--observables Z62 W10 W17] [--steps 5] [--final-rx] [--cold] [--memory-limit 4GiB]
        [--sum-z] [--timeout S] [--json FILE]

The circuit (Kim et al., Nature 618, 500 (2023); ``circuits/kicked_ising/README.md`` of the
data folder) is built from ``eagle127_edges.json``: per Trotter step ``RX(theta_h)`` on every
qubit, then ``RZZ(-pi/2)`` on every coupler. Each contender runs **in a fresh process per
observable**, the two alternating:

- **qsimdist**: ``EstimatorV2().run([(qc, [label])])`` (``--memory-limit`` sets
  ``QSIMDIST_MEMORY_LIMIT`` for it);
- **quimb**: ``qtn.Circuit`` with the same gates, the reverse light cone of the
  observable's qubits (``get_psi_reverse_lightcone``), ``<psi|P|psi>`` with the Pauli
  string attached as one-qubit tensors, ``full_simplify("ADCRS")`` and the ``auto-hq``
  path, as the data folder's README describes.

``call s`` is the contender's own work, timed inside its process after its imports and
its native circuit object are ready (qsimdist: the Qiskit circuit; quimb: the
``qtn.Circuit``); quimb's import inside qsimdist's call counts against qsimdist.
``process s`` is the whole child process. ``peak MB`` is the child's maximum resident
memory (``os.wait4``'s rusage, i.e. ``RUSAGE_CHILDREN`` for that child alone).
``--sum-z`` adds the sum of the 127 one-qubit ``Z`` terms: one qsimdist call with a
127-term ``SparsePauliOp`` against 127 ``local_expectation`` calls of quimb in one process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the observables of the paper (qubit -> Pauli), from the data folder's README
OBSERVABLES: dict[str, dict[int, str]] = {
    "Z62": {62: "Z"},
    "W10": {**{q: "X" for q in (13, 29, 31)}, **{q: "Y" for q in (9, 30)},
            **{q: "Z" for q in (8, 12, 17, 28, 32)}},
    "W17": {**{q: "X" for q in (37, 41, 52, 56, 57, 58, 62, 79)}, 75: "Y",
            **{q: "Z" for q in (38, 40, 42, 63, 72, 80, 90, 91)}},
}
#: published exact values after 5 steps (README of the data folder), by theta_h
PUBLISHED: dict[float, dict[str, float]] = {
    0.8: {"Z62": 0.498165, "W10": -7.989e-3, "W17": -7.884e-5},
    1.2: {"Z62": 0.048772, "W10": 0.357995, "W17": -0.167750},
}
N_QUBITS = 127


def term_arguments(parser, steps: list[int]) -> None:
    """The options the kicked-Ising term benchmarks share (``cost_check``, ``..._frontier``)."""
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--steps", type=int, nargs="+", default=steps)
    parser.add_argument("--theta", type=float, nargs="+", default=[0.8, 1.2])
    parser.add_argument("--observables", nargs="+", default=["Z62", "W10", "W17"],
                        choices=sorted(OBSERVABLES))
    parser.add_argument("--final-rx", action="store_true",
                        help="the k+1 variant: one more RX layer after the last step")
    parser.add_argument("--memory-limit", default="4GiB")


def load_edges(data: str | Path) -> list[tuple[int, int]]:
    path = Path(data) / "circuits" / "kicked_ising" / "eagle127_edges.json"
    return [(int(a), int(b)) for a, b in json.loads(path.read_text())]


def kicked_ising(edges, theta: float, steps: int, n: int = N_QUBITS, final_rx: bool = False):
    """The Qiskit circuit (:func:`qsimdist.lattice.kicked_ising_circuit`); ``final_rx``: the
    "k+1" variant of Kim et al.'s Fig. 4, one more ``RX(theta)`` layer after the last step."""
    from qsimdist.lattice import kicked_ising_circuit

    qc = kicked_ising_circuit(n, edges, theta, steps)
    if final_rx:
        for q in range(n):
            qc.rx(theta, q)
    return qc


def pauli_label(ops: dict[int, str], n: int = N_QUBITS) -> str:
    """``ops`` as a label in Qiskit order (rightmost character = qubit 0)."""
    from qsimdist.lattice import pauli_label as label

    return label(ops, n)


def quimb_circuit(edges, theta: float, steps: int, n: int = N_QUBITS, final_rx: bool = False):
    import quimb.tensor as qtn

    circ = qtn.Circuit(n)
    for _ in range(steps):
        for q in range(n):
            circ.apply_gate("RX", theta, q)
        for a, b in edges:
            circ.apply_gate("RZZ", -math.pi / 2, a, b)
    if final_rx:
        for q in range(n):
            circ.apply_gate("RX", theta, q)
    return circ


def quimb_expectation(circ, ops: dict[int, str]) -> float:
    """quimb's reverse-light-cone ``<psi|P|psi>``: ADCRS, then the ``auto-hq`` path."""
    import numpy as np
    import quimb.tensor as qtn

    mats = {"X": np.array([[0, 1], [1, 0]], dtype=complex),
            "Y": np.array([[0, -1j], [1j, 0]], dtype=complex),
            "Z": np.array([[1, 0], [0, -1]], dtype=complex)}
    where = sorted(ops)
    ket = circ.get_psi_reverse_lightcone(where)
    bra = ket.conj().reindex({circ.ket_site_ind(q): circ.bra_site_ind(q) for q in where})
    tn = bra | ket
    for q in where:
        tn |= qtn.Tensor(mats[ops[q]], (circ.bra_site_ind(q), circ.ket_site_ind(q)))
    tn.full_simplify_("ADCRS", output_inds=(), atol=1e-12)
    return complex(tn.contract(all, optimize="auto-hq", output_inds=())).real


# ---------------------------------------------------------------------------------- child
def child(args) -> dict:
    edges = load_edges(args.data)
    if args.contender == "qsimdist":
        from qiskit.quantum_info import SparsePauliOp

        from qsimdist.qiskit import EstimatorV2

        qc = kicked_ising(edges, args.theta, args.steps, final_rx=args.final_rx)
        if args.observable == "sumZ":
            obs = SparsePauliOp([pauli_label({q: "Z"}) for q in range(N_QUBITS)])
        else:
            obs = pauli_label(OBSERVABLES[args.observable])
        t0 = time.perf_counter()
        result = EstimatorV2().run([(qc, [obs])]).result()[0]
        seconds = time.perf_counter() - t0
        value = float(result.data.evs[0])
        extra = {"route": result.metadata["route"], "stats": result.metadata["qsimdist"]}
    else:
        import quimb.tensor  # noqa: F401  (imported before the timer starts)

        circ = quimb_circuit(edges, args.theta, args.steps, final_rx=args.final_rx)
        t0 = time.perf_counter()
        if args.observable == "sumZ":
            import quimb

            z = quimb.pauli("Z")
            value = sum(float(complex(circ.local_expectation(z, q)).real)
                        for q in range(N_QUBITS))
        else:
            value = quimb_expectation(circ, OBSERVABLES[args.observable])
        seconds = time.perf_counter() - t0
        extra = {}
    return {"value": value, "seconds": seconds, **extra}


def run_child(contender: str, observable: str, theta: float, args) -> dict:
    env = dict(os.environ)
    if contender == "qsimdist" and args.memory_limit:
        env["QSIMDIST_MEMORY_LIMIT"] = args.memory_limit
    if contender == "qsimdist" and args.cold:  # an empty path cache of its own
        env["QSIMDIST_CACHE_DIR"] = tempfile.mkdtemp(prefix="qsimdist-cold-")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    cmd = [sys.executable, "-m", "benchmarks.kicked_ising", "--data", str(args.data),
           "--child", contender, "--child-observable", observable, "--child-theta", str(theta),
           "--steps", str(args.steps), "--child-out", out] + (
               ["--final-rx"] if args.final_rx else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    timer = None
    if args.timeout:  # a contender still running then is stopped, and the row says so
        import threading

        timer = threading.Timer(args.timeout, proc.kill)
        timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if timer is not None:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        got = json.loads(Path(out).read_text()) if proc.returncode == 0 else {}
    except (OSError, ValueError):
        got = {}
    finally:
        Path(out).unlink(missing_ok=True)
    got.update(process_seconds=wall, peak_bytes=usage.ru_maxrss * 1024, rc=proc.returncode)
    if args.timeout and proc.returncode != 0 and wall >= args.timeout:
        got["unfinished_after_s"] = wall
        print(f"{contender} {observable} theta {theta}: unfinished after {wall:.0f} s, stopped",
              flush=True)
    return got


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data", help="the shared data folder")
    p.add_argument("--theta", type=float, nargs="+", default=[0.8])
    p.add_argument("--observables", nargs="+", default=["Z62", "W10", "W17"],
                   choices=sorted(OBSERVABLES))
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--final-rx", action="store_true",
                   help="the k+1 variant: one more RX layer after the last step")
    p.add_argument("--cold", action="store_true",
                   help="each qsimdist process starts with an empty path cache of its own")
    p.add_argument("--memory-limit", default=None, help="QSIMDIST_MEMORY_LIMIT for qsimdist")
    p.add_argument("--sum-z", action="store_true", help="also the sum of the 127 Z terms")
    p.add_argument("--only", choices=["qsimdist", "quimb"], default=None)
    p.add_argument("--timeout", type=float, default=None,
                   help="stop a contender's process after this many seconds")
    p.add_argument("--json", default=None)
    p.add_argument("--child", choices=["qsimdist", "quimb"], help=argparse.SUPPRESS)
    p.add_argument("--child-observable", help=argparse.SUPPRESS)
    p.add_argument("--child-theta", type=float, help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        args.contender, args.observable, args.theta = (args.child, args.child_observable,
                                                       args.child_theta)
        got = child(args)
        Path(args.child_out).write_text(json.dumps(got, default=str))
        return 0
    contenders = [args.only] if args.only else ["qsimdist", "quimb"]
    names = list(args.observables) + (["sumZ"] if args.sum_z else [])
    rows = []
    header = (f"{'obs':5} {'theta':>5} {'published':>11} {'qsimdist':>14} {'|error|':>8} "
              f"{'quimb':>14} {'qsd call s':>10} {'quimb call s':>12} {'ratio':>6} "
              f"{'qsd proc s':>10} {'quimb proc s':>12} {'qsd peak MB':>11} {'quimb peak MB':>13}")
    print(header, flush=True)
    for theta in args.theta:
        for name in names:
            got = {c: run_child(c, name, theta, args) for c in contenders}
            q, r = got.get("qsimdist", {}), got.get("quimb", {})
            pub = (PUBLISHED.get(theta, {}).get(name)
                   if args.steps == 5 and not args.final_rx else None)
            err = abs(q["value"] - pub) if pub is not None and "value" in q else None
            ratio = (r["seconds"] / q["seconds"]) if "seconds" in q and "seconds" in r else None

            def f(x, fmt):
                return format(x, fmt) if x is not None else "-"

            print(f"{name:5} {theta:5.2f} {f(pub, '11.6g')} {f(q.get('value'), '14.9f')} "
                  f"{f(err, '8.1e')} {f(r.get('value'), '14.9f')} {f(q.get('seconds'), '10.2f')} "
                  f"{f(r.get('seconds'), '12.2f')} {f(ratio, '6.1f')} "
                  f"{f(q.get('process_seconds'), '10.1f')} {f(r.get('process_seconds'), '12.1f')} "
                  f"{f(q.get('peak_bytes', 0) / 2**20 if q else None, '11.0f')} "
                  f"{f(r.get('peak_bytes', 0) / 2**20 if r else None, '13.0f')}", flush=True)
            rows.append({"observable": name, "theta": theta, "steps": args.steps,
                         "final_rx": args.final_rx, "cold": args.cold,
                         "published": pub, "abs_error": err, "ratio": ratio,
                         "memory_limit": args.memory_limit, **{c: got[c] for c in got}})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
