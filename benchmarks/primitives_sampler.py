"""Time per sampler call for small circuits: qsimdist SamplerV2 beside StatevectorSampler and Aer.

Run::

    python -m benchmarks.primitives_sampler [--repeats 5] [--shots 1000] [--json]

For each circuit, every repeat times, interleaved: a *cold* qsimdist call (a
new ``SamplerV2`` with the in-memory and on-disk path caches emptied, so the
path search runs), a *warm* call (the same sampler again: plans reused), and
a cold (new instance) and warm call of ``StatevectorSampler`` and of Aer's
``SamplerV2``. Medians are printed with the ratios to StatevectorSampler's
warm time. Wall-clock seconds, measured on this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time


def _circuits() -> dict:
    import numpy as np
    from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
    from qiskit.circuit import Parameter
    from qiskit.circuit.random import random_circuit

    out = {}
    ghz = QuantumCircuit(12)
    ghz.h(0)
    for i in range(11):
        ghz.cx(i, i + 1)
    ghz.measure_all()
    out["ghz12"] = (ghz, None)
    rc = random_circuit(10, 8, max_operands=2, seed=5, measure=False)
    rc.measure_all()
    out["random10_d8"] = (rc, None)
    n = 8
    pc = QuantumCircuit(n)
    thetas = [Parameter(f"t{k}") for k in range(n)]
    for k in range(n):
        pc.ry(thetas[k], k)
    for k in range(n - 1):
        pc.cx(k, k + 1)
    pc.measure_all()
    values = np.random.default_rng(0).uniform(0, np.pi, (16, n))
    out["param8_x16"] = (pc, values)
    dyn = QuantumCircuit(QuantumRegister(4, "q"), ClassicalRegister(5, "c"))
    dyn.h(0)
    dyn.cx(0, 1)
    dyn.measure(0, 4)
    with dyn.if_test((dyn.clbits[4], 1)):
        dyn.x(2)
    dyn.reset(0)
    dyn.ry(0.3, 0)
    dyn.cx(1, 3)
    dyn.measure([0, 1, 2, 3], [0, 1, 2, 3])
    out["dynamic4"] = (dyn, None)
    return out


def _wide(shots: int, as_json: bool) -> dict:
    """Cold (new sampler, empty path caches) and warm calls on circuits too wide for a vector."""
    import numpy as np
    from qiskit import QuantumCircuit

    import qsimdist.planner.path_cache as path_cache
    from qsimdist.qiskit import SamplerV2

    ghz = QuantumCircuit(40)
    ghz.h(0)
    for i in range(39):
        ghz.cx(i, i + 1)
    ghz.measure_all()
    rng = np.random.default_rng(1)
    brick = QuantumCircuit(30)
    for d in range(4):
        for q in range(30):
            brick.ry(rng.uniform(0, 2 * np.pi), q)
            brick.rz(rng.uniform(0, 2 * np.pi), q)
        for q in range(d % 2, 29, 2):
            brick.cz(q, q + 1)
    brick.measure_all()
    rows = {}
    for name, qc in (("ghz40", ghz), ("brickwork30_d4", brick)):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["QSIMDIST_CACHE_DIR"] = cache
            path_cache._MEMORY_CACHE.clear()
            sampler = SamplerV2(seed=1)
            cold = _time(sampler, (qc,), shots)
            warm = _time(sampler, (qc,), shots)
            info = sampler.run([qc], shots=shots).result()[0].metadata["sampling"]
        rows[name] = {"cold": cold, "warm": warm, "method": info["method"],
                      "contractions": info["contractions"],
                      "predicted_flops": info["predicted_flops"]}
        if not as_json:
            print(f"{name:<15} {info['method']:<7} cold {cold:8.2f} s  warm {warm:8.2f} s  "
                  f"{info['contractions']} contractions, predicted {info['predicted_flops']:.3g} "
                  f"FLOPs, shots={shots}", flush=True)
    if as_json:
        print(json.dumps(rows, indent=1))
    return rows


def _time(sampler, pub, shots: int) -> float:
    """Seconds of one ``sampler.run([pub], shots=shots).result()``."""
    t = time.perf_counter()
    sampler.run([pub], shots=shots).result()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shots", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--wide", action="store_true",
                        help="instead: qsimdist alone on wide circuits (GHZ-40, 30-qubit brickwork "
                        "of depth 4), cold and warm, with the method and predicted FLOPs")
    args = parser.parse_args(argv)
    if args.wide:
        return _wide(args.shots, args.json)

    from qiskit import transpile
    from qiskit.primitives import StatevectorSampler
    from qiskit_aer import AerSimulator
    from qiskit_aer.primitives import SamplerV2 as AerSampler

    import qsimdist.planner.path_cache as path_cache
    from qsimdist.qiskit import SamplerV2

    aer_backend = AerSimulator()
    rows = {}
    for name, (qc, values) in _circuits().items():
        pub = (qc,) if values is None else (qc, values)
        # Aer's sampler takes circuits in its own gate set (transpiled here, not timed)
        isa = transpile(qc, aer_backend, optimization_level=0)
        aer_pub = (isa,) if values is None else (isa, values)
        dynamic = any(i.operation.name in ("reset", "if_else") for i in qc.data)
        times: dict[str, list[float]] = {k: [] for k in (
            "qsimdist_cold", "qsimdist_warm", "statevector_cold", "statevector_warm",
            "aer_cold", "aer_warm")}
        method = None
        for rep in range(args.repeats + 1):  # the first round warms imports and is dropped
            with tempfile.TemporaryDirectory() as cache:
                os.environ["QSIMDIST_CACHE_DIR"] = cache
                path_cache._MEMORY_CACHE.clear()
                ours = SamplerV2(seed=rep)
                cold = _time(ours, pub, args.shots)
                warm = _time(ours, pub, args.shots)
                method = ours.run([pub], shots=10).result()[0].metadata["sampling"]["method"]
            sv = StatevectorSampler(seed=rep)  # it refuses mid-circuit measurement: n/a
            sv_cold = math.nan if dynamic else _time(sv, pub, args.shots)
            sv_warm = math.nan if dynamic else _time(sv, pub, args.shots)
            aer = AerSampler(seed=rep)
            aer_cold = _time(aer, aer_pub, args.shots)
            aer_warm = _time(aer, aer_pub, args.shots)
            if rep == 0:
                continue
            for key, value in zip(times, (cold, warm, sv_cold, sv_warm, aer_cold, aer_warm)):
                times[key].append(value)
        med = {k: statistics.median(v) for k, v in times.items()}
        med["method"] = method
        rows[name] = med
    if args.json:
        print(json.dumps(rows, indent=1))
        return rows
    head = (f"{'circuit':<13} {'method':<9} {'qsd cold':>9} {'qsd warm':>9} {'SV cold':>9} "
            f"{'SV warm':>9} {'Aer cold':>9} {'Aer warm':>9} {'warm/SV':>8} {'warm/Aer':>9}")
    print(f"median seconds per sampler.run([pub], shots={args.shots}).result(), "
          f"{args.repeats} interleaved repeats")
    print(head)
    for name, r in rows.items():
        print(f"{name:<13} {r['method']:<9} {r['qsimdist_cold']:9.4f} {r['qsimdist_warm']:9.4f} "
              f"{r['statevector_cold']:9.4f} {r['statevector_warm']:9.4f} {r['aer_cold']:9.4f} "
              f"{r['aer_warm']:9.4f} {r['qsimdist_warm'] / r['statevector_warm']:8.1f}x "
              f"{r['qsimdist_warm'] / r['aer_warm']:8.1f}x")
    return rows


if __name__ == "__main__":
    main()
