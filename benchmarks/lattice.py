"""Lattice-dynamics workloads: predicted R_P and E_P beside the paper's Tables 1 and 2.

    python -m benchmarks.lattice [--only rect] [--search-seconds 60] [--json OUT]

Three amplitude networks ``<0...0| U |0...0>`` of Trotterized transverse-field
Ising dynamics (:mod:`qsimdist.lattice`), simplified as every qsimdist
amplitude is (quimb; the diagonal ``RZZ`` gates become hyper-indices, so each
network is a space-time factor graph of 2x2 tensors on (site, time)
variables). The paper's sizes ("Hexagonal 8x8", "Rectangular 49x20",
"Triangular 49x24") are not explained in what is known of it (PAPER.md); the
sizes here (rectangular 7x7 sites, 8 steps; hexagonal 8x8 sites, 10 steps;
triangular 7x7 sites, 8 steps) are ours, chosen so that a path search fits a
couple of minutes on a shared 2-core machine while one device needs 19-26
sliced bonds (hexagonal 8x8 with 8 steps needs none; with 12 it needed 70,
at a slicing overhead of 10^16.6).

Each network's path is searched once, bounded, and saved in
``benchmarks/plans/tfim_<lattice>_<lx>x<ly>_t<steps>.json`` sliced to
2^31 elements (one H100's usable memory for three complex64 operands, the
distribution planner's one-device target); later runs read it and search
nothing. The search runs cotengrust's random greedy for ``--search-seconds``
(cotengra's kahypar hyper-optimiser managed one trial in 90-130 s here, and
a worse tree), logs the time-ordered elimination of the (site, time)
variables (a Schrodinger-style sweep, width about 2^sites) for comparison,
and slices the three cheapest greedy trees with qsimdist's greedy slicer; the
best is also sliced by cotengra's ``slice`` and the cheaper slicing is kept
(``--anneal`` adds cotengra's slicing-aware annealing, not time-bounded).

Then the distribution planner compares dp, forced-only and slice-only at
P = 8 on ``dgx-h100`` and P = 1024 on ``h100-ib``; every schedule replays,
and the P = 8 dp schedule is saved beside the plan as
``tfim_..._dgx-h100-8.json`` (plan schema v3; ``qsimdist plan PLAN --profile
h100-ib --devices 1024`` re-derives the other from the saved plan). **Every R_P, E_P, time and
peak printed is a prediction of the cost model**, none is a measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import warnings
from pathlib import Path

PLANS = Path(__file__).resolve().parent / "plans"
TARGETS = (("dgx-h100", 8), ("h100-ib", 1024))
#: device counts whose dp schedule is saved beside the plan (each file is about 2 MB)
SAVED_SCHEDULES = (8,)
#: one-device slicing target: 2^31 complex64 elements per intermediate
TARGET_LOG2 = 31

#: short name -> (lattice, lx, ly, Trotter steps)
WORKLOADS: dict[str, tuple[str, int, int, int]] = {
    "rect": ("rectangular", 7, 7, 8),
    "hex": ("hexagonal", 8, 8, 10),
    "tri": ("triangular", 7, 7, 8),
}

#: the paper's rows (PAPER.md, Tables 1 and 2; measured on H100s)
PAPER: dict[str, dict] = {
    "hex": {"label": "Hexagonal 8x8", "R_8": 197.8, "E_8": 172.9, "R_1024": 1.49e6,
            "E_1024": 67_869, "b_1024": 6, "b_1": 37},
    "rect": {"label": "Rectangular 49x20", "R_8": 9.3, "E_8": 9.4, "R_1024": 3154,
             "E_1024": 216.0, "b_1024": 14, "b_1": None},
    "tri": {"label": "Triangular 49x24", "R_8": 7.4, "E_8": 7.0, "R_1024": 986,
            "E_1024": 132.6, "b_1024": 14, "b_1": None},
}


def plan_path(short: str) -> Path:
    """Where the workload's searched plan is kept."""
    from qsimdist.lattice import tfim_name

    return PLANS / f"{tfim_name(*WORKLOADS[short])}.json"


def workload_network(short: str):
    """The simplified amplitude network of a workload (by quimb's passes: the shipped plans
    and trees were searched on those networks)."""
    from qsimdist.lattice import tfim_network
    from qsimdist.planner.simplify import simplify

    kind, lx, ly, steps = WORKLOADS[short]
    return simplify(tfim_network(kind, lx, ly, steps), engine="quimb")


def time_order(net, short: str) -> list[str]:
    """The network's indices in time order: ``q<qubit>.<layer>`` by layer / gates per step.

    Qubit ``q`` takes ``degree(q) + 1`` gates per Trotter step, so its
    ``layer`` over that is its time; indices of other names come last.
    """
    from qsimdist.lattice import make_lattice

    kind, lx, ly, _ = WORKLOADS[short]
    deg = make_lattice(kind, lx, ly).degrees()

    def key(ix: str) -> tuple[float, int]:
        m = re.fullmatch(r"q(\d+)\.(\d+)", ix)
        if m is None or int(m[1]) >= len(deg):
            return (math.inf, 0)
        return (int(m[2]) / (deg[int(m[1])] + 1), int(m[1]))

    return sorted(net.size_dict, key=key)


def random_greedy(inputs, output, size_dict, seconds: float, seed: int) -> dict:
    """Best tree of each batch of 4 cotengrust random-greedy trials, batches for ``seconds``."""
    import cotengra as ctg
    import cotengrust

    out = {}
    t0 = time.perf_counter()
    batch = 0
    while not out or time.perf_counter() - t0 < seconds:
        path = cotengrust.optimize_random_greedy_track_flops(
            inputs, output, size_dict, ntrials=4, seed=seed + batch)[0]
        out[f"random greedy batch {batch}"] = ctg.ContractionTree.from_path(
            inputs, output, size_dict, path=path)
        batch += 1
    return out


def cotengra_slicing(net, ssa, seed: int = 0, repeats: int = 4) -> tuple[list[str], float]:
    """Sliced indices for ``ssa`` by cotengra's ``slice`` to ``2^TARGET_LOG2``, with their
    log2 total cost as qsimdist counts it."""
    import cotengra as ctg

    from qsimdist.planner.slicing import SliceCosts, sliced_names

    inputs, output, size_dict, _ = net.symbolic()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20 * len(inputs)))  # cotengra recurses down deep trees
    try:
        tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=ssa)
        tree = tree.slice(target_size=2**TARGET_LOG2, max_repeats=repeats, seed=seed)
        names = sliced_names(net, tree)
    finally:
        sys.setrecursionlimit(limit)
    costs = SliceCosts(net, ssa)
    names = costs.extend(names, TARGET_LOG2, set(net.output))  # our width on hyper-indices
    return names, costs.evaluate(set(names))[1]


def search(net, short: str, seconds: float, seed: int = 0, anneal: tuple[int, int] | None = None):
    """A sliced plan of the network from a bounded random-greedy search.

    The three cheapest unsliced trees are sliced to ``2^TARGET_LOG2`` by qsimdist's
    greedy slicer (the one the distribution planner extends) and, when
    ``anneal = (temperature steps, sweeps)`` is given, also by cotengra's
    slicing-aware annealing (unbounded in time: on 2,478 tensors a 40 x 20
    anneal ran over 9 minutes on this shared machine without finishing).
    """
    import cotengra as ctg
    from cotengra.pathfinders.path_simulated_annealing import simulated_anneal_tree

    from qsimdist.planner.plan import build_plan
    from qsimdist.planner.slicing import SliceCosts, sliced_names

    inputs, output, size_dict, sym = net.symbolic()
    to_sym = dict(zip(net.canonical_names(), sym))
    target = 2**TARGET_LOG2
    log: list[str] = []
    t0 = time.perf_counter()

    def note(line: str) -> None:
        log.append(line)
        print(f"  [{time.perf_counter() - t0:5.0f} s] {line}", flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        candidates = {"time sweep": ctg.ContractionTree.from_path(
            inputs, output, size_dict, edge_path=[to_sym[i] for i in time_order(net, short)])}
        if seconds > 0:
            candidates.update(random_greedy(inputs, output, size_dict, seconds, seed))
        # a time sweep renews every site's index each step, so slicing it to 2^31 takes
        # many indices per step: slice the cheapest few greedy trees and keep the best
        greedy = sorted((k for k in candidates if k != "time sweep"),
                        key=lambda k: candidates[k].total_flops())[:3] or ["time sweep"]
        note(f"{len(candidates) - 1} random-greedy batches")
        for label in ["time sweep", *greedy[:3]]:
            tree = candidates[label]
            note(f"{label}: unsliced log10 flops {math.log10(tree.total_flops()):.2f}, "
                 f"width 2^{math.log2(tree.max_size()):.0f}")
        sliced = {}
        for label in greedy:
            tree = candidates[label]
            ssa = [tuple(int(v) for v in p) for p in tree.get_ssa_path()]
            costs = SliceCosts(net, ssa)
            names = costs.restore(costs.extend([], TARGET_LOG2, set(net.output)), TARGET_LOG2)
            _, log2_cost = costs.evaluate(set(names))
            note(f"{label} sliced to 2^{TARGET_LOG2} greedily (qsimdist's slicer): log10 "
                 f"flops {log2_cost * math.log10(2):.2f}, {len(names)} sliced")
            sliced[f"{label}, qsimdist greedy slicing"] = (ssa, names, log2_cost)
        label = min(greedy, key=lambda k: sliced[f"{k}, qsimdist greedy slicing"][2])
        ssa = sliced[f"{label}, qsimdist greedy slicing"][0]
        names, log2_cost = cotengra_slicing(net, ssa, seed)
        note(f"{label} sliced to 2^{TARGET_LOG2} by cotengra's slice: log10 flops "
             f"{log2_cost * math.log10(2):.2f}, {len(names)} sliced")
        sliced[f"{label}, cotengra slice"] = (ssa, names, log2_cost)
        if anneal:
            label = min(greedy, key=lambda k: sliced[f"{k}, qsimdist greedy slicing"][2])
            tree = candidates[label]
            t = simulated_anneal_tree(tree, tsteps=anneal[0], numiter=anneal[1],
                                      minimize="flops", target_size=target,
                                      slice_mode="basic", seed=seed)
            a_ssa = [tuple(int(v) for v in p) for p in t.get_ssa_path()]
            a_sliced = sliced_names(net, t)
            _, a_cost = SliceCosts(net, a_ssa).evaluate(set(a_sliced))
            sliced[f"{label}, cotengra annealing"] = (a_ssa, a_sliced, a_cost)
            note(f"{label} annealed to 2^{TARGET_LOG2}: log10 flops "
                 f"{a_cost * math.log10(2):.2f}, {len(a_sliced)} sliced")
    how, (ssa, names, _) = min(sliced.items(), key=lambda kv: kv[1][2])
    note(f"kept: {how}")
    plan = build_plan(net, ssa, names, "complex64")
    spent = time.perf_counter() - t0
    plan.meta.update({
        "search": (f"{how}; {'; '.join(log)}; cotengrust random greedy "
                   f"{seconds:g} s from seed {seed}; "
                   f"annealing {anneal or 'not run'}; {spent:.0f} s in all"),
        "search_seconds": spent,
        "search_target_log2": TARGET_LOG2,
        "workload": dict(zip(("lattice", "lx", "ly", "steps"), WORKLOADS[short])),
    })
    return plan


def get_plan(short: str, seconds: float, seed: int = 0, anneal: tuple[int, int] | None = None):
    """The saved plan of a workload, or a new one from a bounded search (then saved)."""
    from qsimdist.planner.plan import Plan

    path = plan_path(short)
    if path.exists():
        return Plan.load(path), 0.0
    t = time.perf_counter()
    t0 = time.perf_counter()
    net = workload_network(short)
    print(f"  simplified in {time.perf_counter() - t0:.0f} s: {net.num_tensors} tensors",
          flush=True)
    plan = search(net, short, seconds, seed, anneal)
    plan.save(path)
    return plan, time.perf_counter() - t


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.3g}".replace("e+0", "e").replace("e+", "e")


def main(argv: list[str] | None = None) -> list[dict]:
    """Plan each workload (or read its saved plan) and print the predicted rows."""
    from qsimdist.hardware import load_profile
    from qsimdist.planner.distribution import compare_strategies, replay, scheduled_plan
    from qsimdist.planner.slicing import SliceCosts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(WORKLOADS), default=None)
    ap.add_argument("--search-seconds", type=float, default=60.0,
                    help="hyper-optimiser time per workload when no plan is saved")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--anneal", type=int, nargs=2, default=None, metavar=("TSTEPS", "SWEEPS"),
                    help="also slice by cotengra's annealing (not time-bounded)")
    ap.add_argument("--no-save-schedules", action="store_true",
                    help="do not write the dp schedules beside the plans")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for short in WORKLOADS:
        if args.only and short not in args.only:
            continue
        plan, searched = get_plan(short, args.search_seconds, args.seed, args.anneal)
        log2_w, log2_c = SliceCosts(plan.network, plan.path).evaluate(set())
        name = plan_path(short).stem
        print(f"{name}: {plan.network.num_tensors} tensors, unsliced log10 cost "
              f"{log2_c * math.log10(2):.2f} width 2^{round(log2_w)}; saved plan "
              f"{len(plan.sliced)} sliced, log10 cost {plan.stats.log10_cost:.2f}"
              + (f" (searched in {searched:.0f} s)" if searched else ""), flush=True)
        for prof_name, p in TARGETS:
            prof = load_profile(prof_name)
            t = time.perf_counter()
            report, scheds = compare_strategies(plan, prof, p)
            planning = time.perf_counter() - t
            for sch in scheds.values():  # every schedule reported must replay
                replay(scheduled_plan(plan, sch), sch, prof)
            if not args.no_save_schedules and p in SAVED_SCHEDULES:
                scheduled_plan(plan, scheds["dp"]).save(PLANS / f"{name}_{prof_name}-{p}.json")
            s = report["predicted"]["strategies"]
            dp = s["dp"]
            paper = PAPER[short]
            row = {
                "workload": name,
                "paper_label": paper["label"],
                "profile": prof_name,
                "devices": p,
                "log10_cost_unsliced": log2_c * math.log10(2),
                "log2_width_unsliced": round(log2_w),
                "log10_cost_slice_only": s["slice_only"]["log10_cost"],
                "log10_cost_dp": dp["log10_cost"],
                "sliced_bonds_1": len(scheds["slice_only"].sliced),
                "sliced_bonds_dp": len(scheds["dp"].sliced),
                "predicted_R_P": dp["R_P"],
                "predicted_E_P_dp": dp["E_P"],
                "predicted_E_P_forced_only": s["forced_only"]["E_P"],
                "predicted_seconds": {k: v["seconds"] for k, v in s.items()},
                "predicted_dp_split": {k: dp[k] for k in ("compute_seconds", "comm_seconds",
                                                          "pack_seconds")},
                "predicted_tflops_per_device_dp": dp["tflops_per_device"],
                "predicted_peak_bytes_per_device_dp": dp["peak_bytes_per_device"],
                "usable_memory": prof.usable_memory,
                "group_size_dp": dp["group_size"],
                "big_fraction_dp": dp["big_fraction"],
                "redistributions_dp": dp["n_redistributions"],
                "paper_R_P": paper[f"R_{p}"],
                "paper_E_P": paper[f"E_{p}"],
                "paper_sliced_bonds_P": paper["b_1024"] if p == 1024 else None,
                "paper_sliced_bonds_1": paper["b_1"],
                "distribution_planning_s": planning,
                "path_search_s": searched,
            }
            rows.append(row)
            print(
                f"  {prof_name:>9} P={p:<5} predicted: R_P {_fmt(row['predicted_R_P']):>8} "
                f"E_P dp {_fmt(row['predicted_E_P_dp']):>8} forced-only "
                f"{_fmt(row['predicted_E_P_forced_only']):>8}  sliced bonds 1 device "
                f"{row['sliced_bonds_1']}, dp {row['sliced_bonds_dp']} (d={row['group_size_dp']})"
                f"  peak {row['predicted_peak_bytes_per_device_dp'] / 1e9:.1f} GB  "
                f"| paper ({paper['label']}, measured): R_P {_fmt(row['paper_R_P'])} "
                f"E_P {_fmt(row['paper_E_P'])}  [planned in {planning:.0f} s]",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
