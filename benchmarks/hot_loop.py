"""The variational hot loop: small circuits, many parameter sets, qsimdist beside the reference.

    python -m benchmarks.hot_loop [--rounds 7] [--calls 50] [--bindings 50] [--no-aer]
        [--only CASE ...] [--kicked-ising ../shared/data] [--json out.json]

What variational algorithms (VQE, VQD, QNN training) send the primitives: thousands of
calls on circuits of a few qubits. Each case times, side by side in one process,
qsimdist's ``EstimatorV2`` / ``SamplerV2``, Qiskit's ``StatevectorEstimator`` /
``StatevectorSampler`` (the reference) and, where ``qiskit_aer`` is installed, Aer's
``EstimatorV2`` / ``SamplerV2``:

- ``per call``: ``--calls`` calls of one pub with one parameter set each (a VQE step);
- ``one pub``: one call of one pub with ``--bindings`` parameter sets (a gradient's or a
  batch's points).

The circuits are ``efficient_su2`` (2 reps) on 2 and 6 qubits; the observables H2's
two-qubit Hamiltonian (5 terms) and a random 11-term Pauli sum on 6 qubits; the sampler
measures every qubit (1,024 shots). Every primitive object is made once and warmed by
one round before timing (imports, compiled kernels, qsimdist's template of the
circuit), then ``--rounds`` rounds alternate the primitives so the machine's noise hits
each alike. Reported: the median per parameter set of each primitive, and its ratio to
the reference (below 1: faster). Every estimator value is checked against the
reference's to 1e-12 before its time counts.

``--kicked-ising DATA`` adds the wide end of the same loop, which only qsimdist runs: IBM's
127-qubit kicked-Ising circuit (5 steps) with ``θ_h`` a parameter, one ``EstimatorV2`` pub
of 8 values for ⟨Z62⟩ and one for ⟨W17⟩, three calls on one estimator; reported: seconds
per point of the first call and the median of the later two (plans and template kept).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

#: H2 at bond length 0.735 A (STO-3G, parity mapping, two qubits), as qiskit-algorithms' VQE
#: tutorial uses it
H2 = [("II", -1.052373245772859), ("IZ", 0.39793742484318045),
      ("ZI", -0.39793742484318045), ("ZZ", -0.01128010425623538),
      ("XX", 0.18093119978423156)]
TOLERANCE = 1e-12


def ansatz(n: int):
    from qiskit.circuit.library import efficient_su2

    return efficient_su2(n, reps=2)


def observable(n: int):
    from qiskit.quantum_info import SparsePauliOp

    if n == 2:
        return SparsePauliOp.from_list(H2)
    rng = np.random.default_rng(11)
    labels: set[str] = set()
    while len(labels) < 11:
        labels.add("".join(rng.choice(list("IXYZ"), n)))
    return SparsePauliOp(sorted(labels), rng.normal(size=11))


#: name -> (primitive kind, qubits, one pub of many sets?)
CASES = {
    "estimator 2q per call": ("estimator", 2, False),
    "estimator 2q one pub": ("estimator", 2, True),
    "estimator 6q per call": ("estimator", 6, False),
    "estimator 6q one pub": ("estimator", 6, True),
    "sampler 2q per call": ("sampler", 2, False),
    "sampler 2q one pub": ("sampler", 2, True),
}


def _make(kind: str, who: str):
    if who == "qsimdist":
        from qsimdist.qiskit import EstimatorV2, SamplerV2

        return EstimatorV2() if kind == "estimator" else SamplerV2(seed=1)
    if who == "reference":
        from qiskit.primitives import StatevectorEstimator, StatevectorSampler

        return StatevectorEstimator() if kind == "estimator" else StatevectorSampler(seed=1)
    from qiskit_aer.primitives import EstimatorV2, SamplerV2

    return EstimatorV2() if kind == "estimator" else SamplerV2(seed=1)


def _round(prim, kind: str, qc, obs, values: np.ndarray, one_pub: bool) -> tuple[float, list]:
    """Seconds per parameter set of one round, and the values (estimator) or counts."""
    out = []
    t0 = time.perf_counter()
    if kind == "estimator":
        if one_pub:
            out.append(prim.run([(qc, obs, values)]).result()[0].data.evs)
        else:
            for v in values:
                out.append(prim.run([(qc, obs, v)]).result()[0].data.evs)
    else:
        if one_pub:
            out.append(prim.run([(qc, values)], shots=1024).result()[0].data.meas)
        else:
            for v in values:
                out.append(prim.run([(qc, v)], shots=1024).result()[0].data.meas)
    return (time.perf_counter() - t0) / len(values), out


def run_case(name: str, rounds: int, calls: int, bindings: int, aer: bool) -> dict:
    kind, n, one_pub = CASES[name]
    qc = ansatz(n)
    obs = observable(n)
    if kind == "sampler":
        qc = qc.copy()
        qc.measure_all()
    who = ["reference", "qsimdist"] + (["aer"] if aer else [])
    prims = {w: _make(kind, w) for w in who}
    rng = np.random.default_rng(5)
    sets = bindings if one_pub else calls
    times: dict[str, list[float]] = {w: [] for w in who}
    worst = 0.0
    for r in range(rounds + 1):  # round 0 warms every primitive up, untimed
        values = rng.uniform(-np.pi, np.pi, (sets, qc.num_parameters))
        got = {}
        for w in who if r % 2 else reversed(who):
            seconds, got[w] = _round(prims[w], kind, qc, obs, values, one_pub)
            if r:
                times[w].append(seconds)
        if kind == "estimator":
            ref = np.ravel(got["reference"])
            dev = float(np.max(np.abs(np.ravel(got["qsimdist"]) - ref)))
            if dev > TOLERANCE:
                raise AssertionError(f"{name}: qsimdist deviates {dev:.2e} from the reference")
            worst = max(worst, dev)
    medians = {w: statistics.median(ts) for w, ts in times.items()}
    row = {"case": name, "qubits": n, "sets": sets,
           "calls": 1 if one_pub else calls, "rounds": rounds,
           "max_abs_deviation": worst if kind == "estimator" else None}
    for w in who:
        row[w] = {"seconds_per_set": medians[w],
                  "ratio_to_reference": medians[w] / medians["reference"]}
    return row


def kicked_ising_sweep(data: str, steps: int = 5, calls: int = 3) -> list[dict]:
    """Seconds per point of 8 ``θ_h`` values in one pub, ⟨Z62⟩ and ⟨W17⟩ (see the module
    docstring)."""
    import math

    from qiskit import QuantumCircuit
    from qiskit.circuit import Parameter

    from benchmarks.kicked_ising import OBSERVABLES, load_edges
    from qsimdist.lattice import pauli_label
    from qsimdist.qiskit import EstimatorV2

    edges = load_edges(data)
    theta = Parameter("theta_h")
    qc = QuantumCircuit(127)
    for _ in range(steps):
        for q in range(127):
            qc.rx(theta, q)
        for a, b in edges:
            qc.rzz(-math.pi / 2, a, b)
    values = np.linspace(0.2, 1.6, 8)[:, None]
    rows = []
    for name in ("Z62", "W17"):
        est = EstimatorV2()
        label = pauli_label(OBSERVABLES[name], 127)
        seconds = []
        for _ in range(calls):
            t0 = time.perf_counter()
            evs = est.run([(qc, label, values)]).result()[0].data.evs
            seconds.append((time.perf_counter() - t0) / len(values))
        rows.append({"case": f"kicked Ising {steps} steps, <{name}>, 8 theta_h in one pub",
                     "first_seconds_per_point": seconds[0],
                     "warm_seconds_per_point": statistics.median(seconds[1:]),
                     "values": np.asarray(evs).tolist()})
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds (medians)")
    ap.add_argument("--calls", type=int, default=50, help="calls per round, per-call cases")
    ap.add_argument("--bindings", type=int, default=50, help="parameter sets, one-pub cases")
    ap.add_argument("--no-aer", action="store_true", help="leave Aer out")
    ap.add_argument("--only", nargs="+", choices=sorted(CASES), default=None)
    ap.add_argument("--kicked-ising", metavar="DATA", default=None,
                    help="also the 127-qubit kicked-Ising sweep (the shared data folder)")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    aer = not args.no_aer
    if aer:
        try:
            import qiskit_aer  # noqa: F401
        except ImportError:
            aer = False
    rows = [run_case(name, args.rounds, args.calls, args.bindings, aer)
            for name in (args.only or CASES)]
    print("| case | sets | qsimdist | reference | Aer | qsimdist / reference | "
          "Aer / reference | max dev |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        q, ref, a = r["qsimdist"], r["reference"], r.get("aer")
        dev = "—" if r["max_abs_deviation"] is None else f"{r['max_abs_deviation']:.1e}"
        aer_time = f"{a['seconds_per_set'] * 1e3:.3f} ms" if a else "—"
        aer_ratio = f"{a['ratio_to_reference']:.2f}" if a else "—"
        print(f"| {r['case']} | {r['sets']} | {q['seconds_per_set'] * 1e3:.3f} ms "
              f"| {ref['seconds_per_set'] * 1e3:.3f} ms | {aer_time} "
              f"| {q['ratio_to_reference']:.2f} | {aer_ratio} | {dev} |")
    if args.kicked_ising:
        sweep = kicked_ising_sweep(args.kicked_ising)
        print()
        print("| sweep | first call, s per point | later calls, s per point |")
        print("|---|---|---|")
        for r in sweep:
            print(f"| {r['case']} | {r['first_seconds_per_point']:.4f} "
                  f"| {r['warm_seconds_per_point']:.4f} |")
        rows += sweep
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
