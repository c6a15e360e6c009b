"""Every door on one circuit: the route each entry point takes, timed beside Aer.

The circuit is issue 23's: ``random_circuit(N, 12, max_operands=2, seed=5,
measure=True)`` (default N = 24), 1,000 shots; the estimator's observable is
41 seeded random Pauli strings on the same circuit without measurements.
Each contender runs in its own process, one after the other:

* ``SamplerV2`` (qsimdist) and Aer's ``SamplerV2``;
* ``EstimatorV2`` (qsimdist) and Aer's ``EstimatorV2`` (exact: precision 0);
  Aer is handed the circuit transpiled for ``AerSimulator`` (it refuses
  ``iswap``/``csdg``) at optimisation level 1, the transpile timed apart (level
  2, the default, elides the circuit's swaps into a final layout that Aer's
  primitives ignore: the 16-qubit estimate came out 0.01715 where the exact
  value is 0.02194);
* ``qsimdist sample FILE --json`` and ``qsimdist expect FILE -O ... --json``;
* ``qsimdist.amplitudes(circuit, "0" * N)``.

Each qsimdist door reports the route its router took and the predicted
seconds of both routes (labelled predicted); wall-clock seconds are measured
around the call (the process's imports excluded), on this machine. The
estimator's values are compared with Aer's (largest absolute difference).

Run::

    python -m benchmarks.doors [--qubits 24] [--shots 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_SETUP = """
import json, time, numpy as np
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import SparsePauliOp
n, shots = {n}, {shots}
qc = random_circuit(n, 12, max_operands=2, seed=5, measure=True)
bare = qc.remove_final_measurements(inplace=False)
rng = np.random.default_rng(7)
labels = ["".join(rng.choice(list("IXYZ"), n)) for _ in range(41)]
obs = SparsePauliOp(labels)
"""

_CONTENDERS = {
    "qsimdist SamplerV2": """
from qsimdist.qiskit import SamplerV2
t = time.perf_counter(); res = SamplerV2(seed=1).run([qc], shots=shots).result()[0]
sec = time.perf_counter() - t
info = res.metadata["sampling"]
out = {"seconds": sec, "route": info.get("route"), "method": info["method"]}
""",
    "Aer SamplerV2": """
from qiskit import transpile
from qiskit_aer import AerSimulator
from qiskit_aer.primitives import SamplerV2
t = time.perf_counter(); tqc = transpile(qc, AerSimulator(), optimization_level=1); tr = time.perf_counter() - t
t = time.perf_counter(); res = SamplerV2(seed=1).run([tqc], shots=shots).result()[0]
out = {"seconds": time.perf_counter() - t, "transpile_seconds": tr}
""",
    "qsimdist EstimatorV2": """
from qsimdist.qiskit import EstimatorV2
t = time.perf_counter(); res = EstimatorV2().run([(bare, obs)]).result()[0]
sec = time.perf_counter() - t
out = {"seconds": sec, "route": res.metadata.get("route"), "value": float(res.data.evs),
       "method": (res.metadata.get("route") or {}).get("method")}
""",
    "Aer EstimatorV2": """
from qiskit import transpile
from qiskit_aer import AerSimulator
from qiskit_aer.primitives import EstimatorV2
t = time.perf_counter(); tqc = transpile(bare, AerSimulator(), optimization_level=1); tr = time.perf_counter() - t
t = time.perf_counter(); res = EstimatorV2().run([(tqc, obs)]).result()[0]
out = {"seconds": time.perf_counter() - t, "value": float(res.data.evs), "transpile_seconds": tr}
""",
    "qsimdist.amplitudes": """
import qsimdist
t = time.perf_counter(); res = qsimdist.amplitudes(bare, "0" * n)
out = {"seconds": time.perf_counter() - t, "route": res.stats["route"],
       "method": res.stats["method"]}
""",
}


def _run(code: str, timeout: float) -> dict:
    wrapped = code + "\nprint('@@' + json.dumps(out))\n"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return dict(json.loads(line[2:]), process_seconds=wall)
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:300]}


def _cli(args: list[str], timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(["qsimdist", *args, "--json"], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[:300]}
    obj = json.loads(proc.stdout)
    return {"process_seconds": wall, "route": obj.get("route"),
            "method": (obj.get("route") or {}).get("method") or obj.get("method")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qubits", type=int, default=24)
    ap.add_argument("--shots", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", type=str, default=None, help="write the rows here")
    ns = ap.parse_args(argv)
    setup = _SETUP.format(n=ns.qubits, shots=ns.shots)
    rows: dict[str, dict] = {}
    for name, code in _CONTENDERS.items():
        rows[name] = _run(setup + code, ns.timeout)
        print(name, json.dumps(rows[name]), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "circuit.qasm")
        labels = _run(setup + """
from qiskit import qasm2
open(%r, "w").write(qasm2.dumps(qc))
out = {"labels": labels}
""" % path, ns.timeout)["labels"]
        rows["qsimdist sample"] = _cli(["sample", path, "--shots", str(ns.shots), "--seed", "1"],
                                       ns.timeout)
        print("qsimdist sample", json.dumps(rows["qsimdist sample"]), file=sys.stderr)
        rows["qsimdist expect"] = _cli(["expect", path, *sum((["-O", lab] for lab in labels),
                                                            [])], ns.timeout)
        print("qsimdist expect", json.dumps(rows["qsimdist expect"]), file=sys.stderr)
    q, a = rows.get("qsimdist EstimatorV2", {}), rows.get("Aer EstimatorV2", {})
    if "value" in q and "value" in a:
        rows["estimator |qsimdist - Aer|"] = {"value": abs(q["value"] - a["value"])}
    report = {"qubits": ns.qubits, "shots": ns.shots, "rows": rows,
              "note": "route seconds are the router's predictions; seconds are measured"}
    text = json.dumps(report, indent=1)
    if ns.json:
        with open(ns.json, "w") as fh:
            fh.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
