"""Exact maximum-likelihood decoding against PyMatching on stim's rotated surface code.

For each configuration, stim samples ``--shots`` detector records (fixed seed);
PyMatching (built from the graphlike decomposition of the same circuit's
model) and qsimdist's ML decoder (:class:`qsimdist.qec.decoder.MLDecoder`)
decode the same shots, in interleaved chunks so both see the same machine
load. The table gives each logical error rate with its binomial standard
error, the paired difference ML - PM with its standard error (from the shots
where the two disagree), and the decode seconds per shot. The ML decoder's
one-off plan time is reported apart.

Configurations ``circuit`` use stim's circuit-level noise with every knob at
``p`` (after_clifford_depolarization, before_round_data_depolarization,
before_measure_flip_probability, after_reset_flip_probability); ``capacity``
uses ``before_round_data_depolarization=p`` alone with one round (code
capacity). ``PREDICT_ONLY`` configurations report the sweep path's predicted
cost per shot without decoding.

The ``detectors`` column says what the ML decoder reads: ``all`` is exact
maximum likelihood given the whole syndrome; ``observables`` is exact maximum
likelihood given the observable's graphlike sector (the Z-stabiliser detectors
of ``rotated_memory_z``, the others summed over), which is what PyMatching's
prediction depends on (checked per row: ``pm_sector_only``). The d=5
circuit-level rows run only in that mode: with every detector, the sweep is
predicted at 10^12.3 multiply-adds and 2^29 elements per shot.

    python -m benchmarks.qec --shots 10000 --json bench_qec.json
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

#: (noise model, distance, rounds, p, detectors the ML decoder reads)
DEFAULT_CONFIGS = (
    ("circuit", 3, 3, 0.001, "all"),
    ("circuit", 3, 3, 0.005, "all"),
    ("circuit", 3, 3, 0.001, "observables"),
    ("circuit", 3, 3, 0.005, "observables"),
    ("circuit", 5, 5, 0.001, "observables"),
    ("circuit", 5, 5, 0.005, "observables"),
    ("capacity", 5, 1, 0.001, "all"),
    ("capacity", 5, 1, 0.005, "all"),
    ("capacity", 5, 1, 0.05, "all"),
)
#: configurations whose exact ML cost is only predicted (too costly to run here)
PREDICT_ONLY = (
    ("circuit", 5, 5, 0.005, "all"),
    ("circuit", 5, 5, 0.005, "observables"),
    ("phenomenological", 5, 5, 0.005, "all"),
)


def circuit(noise: str, distance: int, rounds: int, p: float):
    """stim's ``surface_code:rotated_memory_z`` with the named noise at strength ``p``."""
    import stim

    knobs = {
        "circuit": dict(after_clifford_depolarization=p, before_round_data_depolarization=p,
                        before_measure_flip_probability=p, after_reset_flip_probability=p),
        "phenomenological": dict(before_round_data_depolarization=p,
                                 before_measure_flip_probability=p),
        "capacity": dict(before_round_data_depolarization=p),
    }[noise]
    return stim.Circuit.generated("surface_code:rotated_memory_z", distance=distance,
                                  rounds=rounds, **knobs)


def predicted_cost(circ, detectors: str = "all") -> dict:
    """Per-shot cost of the sweep path (cotengra's multiply-adds and largest intermediate)."""
    import cotengra as ctg

    from qsimdist.qec.decoder import MLDecoder
    from qsimdist.qec.network import build_network, sweep_path

    model = MLDecoder(circ, detectors=detectors).model
    net = build_network(model, batch=1)
    inputs, output, size_dict, _ = net.symbolic()
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict,
                                         ssa_path=sweep_path(net, model))
    return {"detectors_read": model.num_detectors, "mechanisms": model.num_mechanisms,
            "tensors": net.num_tensors,
            "predicted_log10_madds_per_shot": round(math.log10(tree.contraction_cost()), 2),
            "predicted_log2_largest_intermediate": round(math.log2(tree.max_size()), 1)}


def run_config(noise: str, distance: int, rounds: int, p: float, detectors: str, shots: int,
               seed: int, chunk: int) -> dict:
    """Decode one configuration's shots with both decoders; returns the table row."""
    import pymatching

    from qsimdist.qec.decoder import MLDecoder

    circ = circuit(noise, distance, rounds, p)
    det, obs = circ.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True)
    row = {"noise": noise, "distance": distance, "rounds": rounds, "p": p, "shots": shots,
           "detectors": detectors, **predicted_cost(circ, detectors)}
    matching = pymatching.Matching.from_detector_error_model(
        circ.detector_error_model(decompose_errors=True))
    ml = MLDecoder(circ, detectors=detectors)
    if ml.kept is not None:  # does PyMatching read only the detectors the ML decoder reads?
        masked = np.zeros_like(det)
        masked[:, list(ml.kept)] = det[:, list(ml.kept)]
        row["pm_sector_only"] = bool((matching.decode_batch(masked)
                                      == matching.decode_batch(det)).all())
    t0 = time.perf_counter()
    ml.prepare(min(shots, chunk))  # plan once, timed apart
    row["ml_plan_seconds"] = time.perf_counter() - t0
    pm_pred = np.zeros_like(obs, dtype=np.uint8)
    ml_pred = np.zeros_like(obs, dtype=np.uint8)
    pm_s = ml_s = 0.0
    for start in range(0, shots, chunk):  # interleaved: same load for both
        part = slice(start, start + chunk)
        t0 = time.perf_counter()
        pm_pred[part] = matching.decode_batch(det[part])
        t1 = time.perf_counter()
        ml_pred[part] = ml.predict(det[part])
        t2 = time.perf_counter()
        pm_s += t1 - t0
        ml_s += t2 - t1
    pm_err = (pm_pred != obs).any(axis=1)
    ml_err = (ml_pred != obs).any(axis=1)
    n = float(shots)
    pm_rate, ml_rate = pm_err.mean(), ml_err.mean()
    # paired difference: only shots where exactly one decoder fails move it
    d = ml_err.astype(float) - pm_err.astype(float)
    row.update(
        pm_errors=int(pm_err.sum()), ml_errors=int(ml_err.sum()),
        pm_rate=pm_rate, pm_se=math.sqrt(pm_rate * (1 - pm_rate) / n),
        ml_rate=ml_rate, ml_se=math.sqrt(ml_rate * (1 - ml_rate) / n),
        diff=float(d.mean()), diff_se=float(d.std(ddof=1) / math.sqrt(n)) if shots > 1 else 0.0,
        ml_only_fails=int((ml_err & ~pm_err).sum()), pm_only_fails=int((pm_err & ~ml_err).sum()),
        pm_seconds_per_shot=pm_s / n, ml_seconds_per_shot=ml_s / n,
        ml_batch=ml.stats["batch_size"], ml_flops_per_contraction=ml.stats["flops"],
    )
    row["ml_within_sampling_error"] = row["diff"] <= 2 * row["diff_se"]
    return row


def _table(rows: list[dict]) -> str:
    head = ("noise | d | rounds | p | ML reads | shots | PM LER ± se | ML LER ± se | ML−PM ± se | "
            "ML ≤ PM (2σ) | PM s/shot | ML s/shot | ML plan s")
    lines = [head, "|".join("---" for _ in head.split("|"))]
    for r in rows:
        lines.append(
            f"{r['noise']} | {r['distance']} | {r['rounds']} | {r['p']} | "
            f"{r['detectors']} ({r['detectors_read']}) | {r['shots']} | "
            f"{r['pm_rate']:.2e} ± {r['pm_se']:.1e} | {r['ml_rate']:.2e} ± {r['ml_se']:.1e} | "
            f"{r['diff']:+.1e} ± {r['diff_se']:.1e} | "
            f"{'yes' if r['ml_within_sampling_error'] else 'NO'} | "
            f"{r['pm_seconds_per_shot']:.2e} | {r['ml_seconds_per_shot']:.2e} | "
            f"{r['ml_plan_seconds']:.2f}")
    return "\n".join("| " + ln + " |" for ln in lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shots", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--chunk", type=int, default=1000, help="shots per interleaved chunk")
    ap.add_argument("--only", default=None,
                    help="run only configurations whose 'noise:d:rounds:p' contains this text")
    ap.add_argument("--json", default=None, help="write the rows here too")
    args = ap.parse_args(argv)
    rows, predicted = [], []
    for cfg in PREDICT_ONLY:
        row = {"noise": cfg[0], "distance": cfg[1], "rounds": cfg[2], "p": cfg[3],
               "detectors": cfg[4], **predicted_cost(circuit(*cfg[:4]), cfg[4])}
        predicted.append(row)
        print("predicted only:", json.dumps(row), flush=True)
    for cfg in DEFAULT_CONFIGS:
        if args.only and args.only not in ":".join(map(str, cfg)):
            continue
        row = run_config(*cfg, shots=args.shots, seed=args.seed, chunk=args.chunk)
        rows.append(row)
        print(json.dumps(row, default=float), flush=True)
    print(_table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "predicted": predicted}, fh, default=float, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
