"""Distribution planner benchmark: R_P and predicted E_P of dp, forced-only and slice-only.

    python -m benchmarks.distribution [--data ../shared/data] [--search-seconds 120]
                                          [--only NAME] [--json OUT]

Workloads: the n60m24 and n53m20 amplitude networks, cotengra's benchmark
networks (seeded arrays; only the structure matters here), the bundled PEPS
and random circuit. Paths are searched once with cotengra's hyper-optimiser
(``--search-seconds`` each) and kept as plan files in
``benchmarks/plans/`` so later runs report without searching. Each
workload is planned for dgx-h100 at P = 8 and h100-ib at P = 64 and 1024;
the time the distribution planning takes is reported too.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

PLANS = Path(__file__).resolve().parent / "plans"
TARGETS = (("dgx-h100", 8), ("h100-ib", 64), ("h100-ib", 1024))


def workloads(data: Path) -> dict[str, tuple[str, dict]]:
    """name -> (source, plan keywords)."""
    from qsimdist.bundled import bundled_circuit

    c = data / "circuits"
    n = data / "networks"
    return {
        "n60m24": (str(c / "circuit_n60_m24_s0_e0_pABCDCDAB.qsim"),
                   {"bitstrings": "0" * 60, "order": "natural"}),
        "n53m20": (str(c / "circuit_n53_m20_s0_e0_pABCDCDAB.qsim"),
                   {"bitstrings": "0" * 53, "order": "natural"}),
        "sycamore_n53_m20_net": (str(n / "sycamore_n53_m20_s0_e0_pABCDCDAB.json"), {}),
        "qucirc_rrzz_n56_d13": (str(n / "qucirc_rrzz_n56_d13.json"), {}),
        "peps_cluster_r2_D10": (str(n / "peps_cluster_r2_D10_a.json"), {}),
        "cubic_6x6x10": (str(n / "cubic_6x6x10.json"), {}),
        "rqc_4x5_m12": (str(bundled_circuit("rqc_4x5_m12.qsim")),
                        {"bitstrings": "0" * 20, "order": "natural"}),
    }


def workload_network(source: str, kw: dict):
    """The (simplified) network of a workload: a network file as is, a circuit's amplitude
    (simplified by quimb's passes: the shipped plans were searched on those networks)."""
    from qsimdist.frontends import amplitude_network, load
    from qsimdist.network import Network
    from qsimdist.planner.simplify import simplify

    obj = load(source)
    if isinstance(obj, Network):
        return obj
    return simplify(amplitude_network(obj, kw["bitstrings"], kw.get("order", "qiskit")),
                    engine="quimb")


def get_plan(name: str, source: str, kw: dict, seconds: float, dtype: str = "complex64",
             target_log2: int = 33, objective: str = "flops", processes: int = 1):
    """The saved plan of a workload, or a new one from a slicing-aware path search.

    The search (cotengra's hyper-optimiser with slicing reconfiguration
    towards ``2^target_log2`` elements, one H100's worth of complex64) looks
    for trees that stay cheap once sliced; this plan is saved unsliced, so the
    distribution planner slices it afresh for each device count.
    ``benchmarks.pathsearch`` saves plans with their slicing instead.
    """
    from qsimdist.planner.path import PathOptions, find_path
    from qsimdist.planner.plan import Plan, build_plan

    path = PLANS / f"{name}.json"
    if path.exists():
        return Plan.load(path), 0.0
    t = time.perf_counter()
    net = workload_network(source, kw)
    opts = PathOptions(max_repeats=100_000, max_time=seconds, minimize=objective,
                       parallel=processes if processes > 1 else False)
    res = find_path(net, opts, target_size=2**target_log2)
    plan = build_plan(net, res.ssa_path, [], dtype)
    elapsed = time.perf_counter() - t
    plan.meta["search_seconds"] = elapsed
    plan.meta["search"] = (
        f"cotengra hyper-optimiser, {objective}, {seconds:.0f} s on {processes} process(es), "
        f"slicing-aware to 2^{target_log2}"
    )
    plan.save(path)
    return plan, elapsed


def fraction_study(plan, prof, p: int) -> dict:
    """Predicted dp seconds with the sharding threshold fixed at each fraction, and swept."""
    from qsimdist.planner.distribution import BIG_FRACTIONS, schedule

    out = {}
    cache: dict = {}
    views: dict = {}
    for frac in BIG_FRACTIONS:
        try:
            out[str(frac)] = schedule(plan, prof, p, "dp", big_fractions=(frac,),
                                      sliced_cache=cache, view_caches=views).predicted.seconds
        except Exception:  # noqa: BLE001 - a threshold that fits nothing
            out[str(frac)] = float("inf")
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    from qsimdist.hardware import load_profile
    from qsimdist.planner.distribution import compare_strategies, replay, scheduled_plan
    from qsimdist.planner.slicing import SliceCosts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--search-seconds", type=float, default=120.0)
    ap.add_argument("--objective", default="flops", help="cotengra objective, e.g. flops, combo")
    ap.add_argument("--processes", type=int, default=1, help="path-search processes")
    ap.add_argument("--only", action="append", default=None)
    ap.add_argument("--study", action="store_true",
                    help="also report dp with the sharding threshold fixed at each fraction")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for name, (source, kw) in workloads(Path(args.data)).items():
        if args.only and name not in args.only:
            continue
        plan, searched = get_plan(name, source, kw, args.search_seconds,
                                  objective=args.objective, processes=args.processes)
        log2_w, log2_c = SliceCosts(plan.network, plan.path).evaluate(set())
        unsliced_cost, unsliced_width = log2_c * math.log10(2), round(log2_w)
        for prof_name, p in TARGETS:
            prof = load_profile(prof_name)
            t = time.perf_counter()
            report, scheds = compare_strategies(plan, prof, p)
            planning = time.perf_counter() - t
            for sch in scheds.values():  # every schedule reported must replay
                replay(scheduled_plan(plan, sch), sch, prof)
            s = report["predicted"]["strategies"]
            dp = s["dp"]
            row = {
                "workload": name,
                "profile": prof_name,
                "devices": p,
                "log10_cost_search": plan.stats.log10_cost,
                "log10_cost_unsliced": unsliced_cost,
                "log2_width_unsliced": unsliced_width,
                "log10_cost_slice_only": s["slice_only"]["log10_cost"],
                "log10_cost_dp": dp["log10_cost"],
                "predicted_R_P": dp["R_P"],
                "predicted_E_P_dp": dp["E_P"],
                "predicted_E_P_forced_only": s["forced_only"]["E_P"],
                "predicted_seconds": {k: v["seconds"] for k, v in s.items()},
                "predicted_dp_split": {k: dp[k] for k in ("compute_seconds", "comm_seconds",
                                                          "pack_seconds")},
                "predicted_tflops_per_device_dp": dp["tflops_per_device"],
                "predicted_peak_bytes_per_device": {k: v["peak_bytes_per_device"]
                                                    for k, v in s.items()},
                "usable_memory": prof.usable_memory,
                "replicated_flops_share_dp": dp["flops_executed"] / dp["flops_counted"] - 1,
                "comm_bytes_per_device_dp": dp["comm_bytes_per_device"],
                "redistributions_dp": dp["n_redistributions"],
                "group_size_dp": dp["group_size"],
                "big_fraction_dp": dp["big_fraction"],
                "slices_dp": dp["n_slices"],
                "slices_1gpu": s["slice_only"]["n_slices"],
                "distribution_planning_s": planning,
                "path_search_s": searched,
            }
            if args.study:
                row["predicted_dp_seconds_by_fraction"] = fraction_study(plan, prof, p)
            rows.append(row)
            print(
                f"{name:<22}{prof_name:>10}{p:>6}  log10C slice-only "
                f"{row['log10_cost_slice_only']:6.2f} dp {row['log10_cost_dp']:6.2f} "
                f"(unsliced {unsliced_cost:.2f}, 2^{unsliced_width})  predicted: "
                f"R_P {row['predicted_R_P']:9.3g}  E_P dp {row['predicted_E_P_dp']:9.3g}  forced "
                f"{row['predicted_E_P_forced_only']:9.3g}  "
                f"{row['predicted_tflops_per_device_dp']:.1f} TF/dev  peak "
                f"{row['predicted_peak_bytes_per_device']['dp'] / 1e9:.1f} GB of "
                f"{prof.usable_memory / 1e9:.1f}  d={row['group_size_dp']} "
                f"big>{row['big_fraction_dp']:g}  plan {planning:.1f}s",
                flush=True,
            )
            if args.study:
                print("    dp predicted seconds by fixed threshold:",
                      {k: f"{v:.3g}" for k, v in row["predicted_dp_seconds_by_fraction"].items()},
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
