"""Estimator primitives side by side: qsimdist ``EstimatorV2``, ``StatevectorEstimator``, Aer.

    python -m benchmarks.primitives_estimator [--repeats 5] [--warm 3] [--json out.json]

For each case (a parametrised circuit of at most 20 qubits and a Hamiltonian,
plus a 50-qubit brickwork only qsimdist runs), every primitive answers one pub
of ``--batch`` parameter sets:

- **cold**: the first call on a new primitive object (qsimdist: new estimator,
  path cache off, so the path search is paid; library imports and compiled
  kernels are loaded once before timing, for every primitive);
- **warm**: later calls on the same object with new parameter values
  (qsimdist reuses its plans).

Repeats alternate the primitives so machine noise hits each alike; medians
are printed with the ratio to qsimdist. Every call's values are checked
against StatevectorEstimator's (or, at 50 qubits, a light-cone window
Statevector) before its time counts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def hea(n: int, reps: int):
    """Hardware-efficient ansatz: RY/RZ layers and a CX ladder (``reps`` entangling layers)."""
    from qiskit.circuit.library import n_local

    return n_local(n, ["ry", "rz"], "cx", entanglement="linear", reps=reps)


def ising(n: int):
    """Transverse-field Ising Hamiltonian: sum Z_i Z_{i+1} + 0.5 sum X_i."""
    from qiskit.quantum_info import SparsePauliOp

    terms = [("ZZ", [i, i + 1], 1.0) for i in range(n - 1)] + [("X", [i], 0.5) for i in range(n)]
    return SparsePauliOp.from_sparse_list(terms, num_qubits=n)


def brickwork(n: int, depth: int, seed: int = 0):
    """Brickwork of parametrised two-qubit blocks (RZZ + RY + RX) on neighbours."""
    from qiskit import QuantumCircuit
    from qiskit.circuit import ParameterVector

    qc = QuantumCircuit(n)
    p = ParameterVector("p", depth * n * 2)
    k = 0
    for d in range(depth):
        for a in range(d % 2, n - 1, 2):
            qc.ry(p[k], a)
            qc.rx(p[k + 1], a + 1)
            qc.rzz(p[k + 2], a, a + 1)
            k += 3
    return qc


#: (name, builder, primitives): the first primitive listed gives the reference values;
#: StatevectorEstimator simulates once per observable, so it sits out where that takes minutes
CASES = [
    ("hea n=10 reps=2, Ising (29 terms)", lambda: (hea(10, 2), ising(10)),
     ["statevector", "qsimdist", "aer"]),
    ("hea n=16 reps=3, Ising (47 terms)", lambda: (hea(16, 3), ising(16)),
     ["statevector", "qsimdist", "aer"]),
    ("hea n=20 reps=2, Ising (59 terms)", lambda: (hea(20, 2), ising(20)),
     ["aer", "qsimdist"]),
    ("brickwork n=16 depth 4, ZZ each pair (15 obs)", lambda: (brickwork(16, 4), _zz_list(16)),
     ["statevector", "qsimdist", "aer"]),
    ("brickwork n=20 depth 4, ZZ each pair (19 obs)", lambda: (brickwork(20, 4), _zz_list(20)),
     ["aer", "qsimdist"]),
]
WIDE = ("brickwork n=50 depth 4, ZZ each pair (49 obs)", lambda: (brickwork(50, 4), _zz_list(50)))


def _zz_list(n: int) -> list[str]:
    return ["I" * (n - 2 - i) + "ZZ" + "I" * i for i in range(n - 1)]


def _make(kind: str):
    if kind == "qsimdist":
        from qsimdist.qiskit import EstimatorV2

        return EstimatorV2(options={"path_options": {"cache": False}})
    if kind == "statevector":
        from qiskit.primitives import StatevectorEstimator

        return StatevectorEstimator()
    from qiskit_aer.primitives import EstimatorV2 as AerEstimator

    return AerEstimator()


def _call(est, pub) -> tuple[float, np.ndarray]:
    t = time.perf_counter()
    evs = est.run([pub]).result()[0].data.evs
    return time.perf_counter() - t, np.asarray(evs)


def _window_reference(qc, i: int, depth: int) -> float:
    """<Z_i Z_{i+1}> from the Statevector of the gates inside [i-depth, i+1+depth] (light cone)."""
    from qiskit import QuantumCircuit
    from qiskit.quantum_info import Pauli, Statevector

    lo, hi = max(0, i - depth), min(qc.num_qubits - 1, i + 1 + depth)
    sub = QuantumCircuit(hi - lo + 1)
    for inst in qc.data:
        qs = [qc.find_bit(q).index for q in inst.qubits]
        if all(lo <= q <= hi for q in qs):
            sub.append(inst.operation, [q - lo for q in qs])
    label = ["I"] * sub.num_qubits
    label[i - lo] = label[i + 1 - lo] = "Z"
    return float(Statevector(sub).expectation_value(Pauli("".join(reversed(label)))).real)


def run_case(name: str, build, kinds: list[str], repeats: int, warm: int, batch: int,
             rng: np.random.Generator, wide: bool = False) -> dict:
    qc, obs = build()
    times: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in kinds}
    worst = 0.0
    for _ in range(repeats):
        values = [rng.uniform(-np.pi, np.pi, (batch, qc.num_parameters)) for _ in range(warm + 1)]
        ref = []
        if wide:
            for v in values:
                bound = qc.assign_parameters(v[0])
                ref.append(np.array([[_window_reference(bound, i, 4) for i in range(len(obs))]]))
        for kind in kinds:
            est = _make(kind)
            for j, v in enumerate(values):
                pub = (qc, obs, v[:, None] if wide else v)
                seconds, evs = _call(est, pub)
                if kind == kinds[0] and not wide and len(ref) <= j:
                    ref.append(evs)
                if len(ref) > j:
                    check = ref[j][: evs.shape[0]] if wide else ref[j]
                    worst = max(worst, float(np.max(np.abs(evs - check))))
                times[kind]["cold" if j == 0 else "warm"].append(seconds)
    out = {"case": name, "qubits": qc.num_qubits, "batch": batch, "max_abs_deviation": worst}
    for kind in kinds:
        out[kind] = {phase: statistics.median(ts) for phase, ts in times[kind].items()}
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="alternating repeats (medians)")
    ap.add_argument("--warm", type=int, default=3, help="warm calls per repeat")
    ap.add_argument("--batch", type=int, default=1, help="parameter sets per pub")
    ap.add_argument("--no-wide", action="store_true", help="skip the 50-qubit case")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    # imports and compiled kernels loaded before anything is timed
    run_case("warm-up", lambda: (hea(4, 1), ising(4)), ["statevector", "qsimdist", "aer"], 1, 1,
             1, rng)
    rows = [run_case(name, build, kinds, args.repeats, args.warm, args.batch, rng)
            for name, build, kinds in CASES]
    if not args.no_wide:
        rows.append(run_case(WIDE[0], WIDE[1], ["qsimdist"], args.repeats, args.warm, 1, rng,
                             wide=True))
    print("| case | batch | qsimdist cold | qsimdist warm | Statevector cold / warm | "
          "Aer cold / warm | warm: SV / qsimdist, Aer / qsimdist | max dev |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        q = r["qsimdist"]
        sv, aer = r.get("statevector"), r.get("aer")
        cell = lambda d: f"{d['cold'] * 1e3:.1f} / {d['warm'] * 1e3:.1f} ms" if d else "—"  # noqa: E731
        ratio = ", ".join(f"{d['warm'] / q['warm']:.2f}" if d else "—" for d in (sv, aer))
        print(f"| {r['case']} | {r['batch']} | {q['cold'] * 1e3:.1f} ms | {q['warm'] * 1e3:.1f} ms "
              f"| {cell(sv)} | {cell(aer)} | {ratio} | {r['max_abs_deviation']:.1e} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
