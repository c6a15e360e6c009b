"""Searched trees beside the paper: R_P and E_P against a competitive one-device baseline.

    python -m benchmarks.trees [--data ../shared/data] [--only n60m24 ...]
        [--search 45m --targets dgx-h100:8 dgx-h100:1] [--reuse] [--json OUT]

For each workload (n60m24, n56m20, n53m20 and the three lattice networks of
:mod:`benchmarks.lattice`) and target (dgx-h100 at P = 8, h100-ib at
P = 1024):

* the dp schedule of the tree searched for that target
  (``plans/trees/<workload>_<profile>-<P>.json``, written by
  :func:`qsimdist.planner.search.search`, or ``qsimdist search``), scored by
  its predicted seconds;
* the competitive one-device baseline: the tree the same search found for
  P = 1 (``..._dgx-h100-1.json``) with the same budget and the same memory
  per device, on one device;
* each side takes the best, for its own target, of the two searched trees and
  every other tree shipped for the workload (``plans/trees/<workload>_*.json``;
  the row names which), so the baseline draws on every search the dp side does;
* R_P and E_P against that baseline, beside today's definition (slice-only on
  the P-device tree), the per-device peak and the budget both searches spent;
* the paper's numbers (PAPER.md, Tables 1 and 2).

A target without its own searched tree is scored on the tree searched for
dgx-h100 at P = 8 (one score at P = 1024 takes 20-90 s, so few workloads have
a search of their own there), and the row says so; a workload without
searched trees uses its saved plan for both sides, and the row says "not
searched". ``--search BUDGET`` runs the missing searches of ``--targets``
first (``--seed``; with ``--reuse`` scored with reuse and written to
``..._reuse.json``). A one-DGX-node target and its baseline start from the
saved plan's tree, so both start from the same place; any other target (h100-ib
x 1024) starts from the tree searched for one DGX node, where there is one.
``--reuse`` scores both sides with each group keeping step outputs across
slices (:mod:`qsimdist.planner.distribution.reuse`), on the trees searched
that way (``..._reuse.json``) where they exist. **Every number is a
cost-model prediction** except the budgets.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from qsimdist.errors import InvalidInputError

from .distribution import PLANS

TREES = PLANS / "trees"
TARGETS = (("dgx-h100", 8), ("h100-ib", 1024))
BASELINE = ("dgx-h100", 1)  # the same H100 memory per device as h100-ib
#: the target whose searched tree a larger target without its own search is scored on
SEARCHED_FOR_LARGE_P = ("dgx-h100", 8)
#: the paper's rows (PAPER.md): R_P, E_P; n60m24's one-GPU FLOPs rebuilt from Table 2
#: (S_1024 t_1024 2^20 x 28.1 TFLOP/s = 10^25.41)
PAPER = {
    "n60m24": {8: (18.5, 18.5), 1024: (418.0, 41.8), "log10_flops_1": 25.41},
    "hex": {8: (197.8, 172.9), 1024: (1.49e6, 67_869.0)},
    "rect": {8: (9.3, 9.4), 1024: (3154.0, 216.0)},
    "tri": {8: (7.4, 7.0), 1024: (986.0, 132.6)},
}
WORKLOADS = ("n60m24", "n56m20", "n53m20", "rect", "hex", "tri")


def network_and_start(name: str, data: Path):
    """(network, start tree, saved-plan file) of a workload."""
    from qsimdist.planner.trees import load_tree

    if name in ("rect", "hex", "tri"):
        from . import lattice

        net = lattice.workload_network(name)
        saved = lattice.plan_path(name)
    else:
        from .distribution import workload_network, workloads

        source, kw = dict(workloads(data), **searched_only(data))[name]
        net = workload_network(source, kw)
        saved = PLANS / f"{name}.json"
    # a workload without a saved plan (n56m20) starts its searches from cotengra's
    # hyper-optimiser (``start`` None)
    return net, (load_tree(saved, net) if saved.exists() else None), saved


def searched_only(data: Path) -> dict[str, tuple[str, dict]]:
    """Workloads with searched trees but no saved plan: n56m20, from n60m24's family."""
    c = data / "circuits"
    return {"n56m20": (str(c / "circuit_n56_m20_s0_e0_pABCDCDAB.qsim"),
                       {"bitstrings": "0" * 56, "order": "natural"})}


def tree_file(name: str, profile: str, devices: int, reuse: bool = False) -> Path:
    """The shipped tree searched for a target (``_reuse``: scored with reuse across slices)."""
    return TREES / f"{name}_{profile}-{devices}{'_reuse' if reuse else ''}.json"


def run_search(name: str, data: Path, profile: str, devices: int, budget: float,
               reuse: bool = False, seed: int = 0) -> None:
    """Search a tree for one target, written to its shipped tree file. A target other
    than one DGX node starts from the tree searched for one DGX node where there is one
    (a score at P = 1024 costs tens of seconds, so few rounds fit a budget there),
    else from the saved plan's tree."""
    from qsimdist.hardware import load_profile
    from qsimdist.planner.search import Target, search

    net, start, _ = network_and_start(name, data)
    if (profile, devices) != SEARCHED_FOR_LARGE_P:
        node, _, _ = _searched(name, net, *SEARCHED_FOR_LARGE_P, reuse)
        start = node if node is not None else start
    TREES.mkdir(parents=True, exist_ok=True)

    def say(state) -> None:
        sc = state.score
        print(f"  {name} {profile} x {devices} round {state.rounds}: {state.spent_seconds:.0f} s"
              f", 10^{math.log10(sc.flops_executed):.3f} FLOPs, {sc.seconds:.4g} s predicted",
              flush=True)

    search(net, Target(load_profile(profile), devices, reuse=reuse), budget,
           out=tree_file(name, profile, devices, reuse), start=start, seed=seed, on_round=say)


def _searched(name: str, net, profile: str, devices: int, reuse: bool = False):
    """(tree, its search record) of the shipped search for the target; with ``reuse`` the
    one searched with reuse where there is one."""
    from qsimdist.planner.trees import load_tree

    path = tree_file(name, profile, devices, reuse)
    if not path.exists():  # the tree searched the other way (n56m20: with reuse only)
        path = tree_file(name, profile, devices, not reuse)
    if not path.exists():
        return None, None, None
    tree = load_tree(path, net)
    return tree, tree.meta.get("search", {}), path


def _best(net, trees: list, target):
    """(score, plan, index, schedule) of the tree in ``trees`` whose dp schedule on ``target``
    is fastest."""
    from qsimdist.errors import PlanError
    from qsimdist.planner.search import score_tree

    best = None
    for k, tree in enumerate(trees):
        try:
            sc, sch, plan = score_tree(net, tree, target)
        except PlanError:
            continue
        if best is None or sc.seconds < best[0].seconds:
            best = (sc, plan, k, sch)
    if best is None:
        raise PlanError(f"no tree fits {target.describe()}")
    return best


def row(name: str, data: Path, profile: str, devices: int, reuse: bool = False) -> dict:
    from qsimdist.hardware import load_profile
    from qsimdist.planner.distribution import schedule
    from qsimdist.planner.search import Target

    net, start, saved = network_and_start(name, data)
    prof = load_profile(profile)
    tree_p, info_p, path_p = _searched(name, net, profile, devices, reuse)
    label = "searched"
    if tree_p is None and (profile, devices) != SEARCHED_FOR_LARGE_P:
        # no search for this target (one score at P = 1024 takes tens of seconds):
        # the tree searched for one DGX node stands in, and the row says so
        tree_p, info_p, path_p = _searched(name, net, *SEARCHED_FOR_LARGE_P, reuse)
        label = "searched for {} x {}".format(*SEARCHED_FOR_LARGE_P)
    tree_1, info_1, path_1 = _searched(name, net, *BASELINE, reuse)
    searched = tree_p is not None and tree_1 is not None
    if not searched:
        if start is None:
            raise InvalidInputError(f"{name} has neither searched trees nor a saved plan; "
                                    f"search them first (--search BUDGET)")
        tree_p = tree_1 = start
    t0 = time.perf_counter()
    # each side takes the best tree for its own target: the same search budget on both
    # sides (a short search for P devices can land on a tree worse than the one found for
    # one device, and the other way round)
    candidates = [tree_p] if tree_1 is tree_p else [tree_p, tree_1]
    names = ["P", "P=1"]
    if searched:
        # every other tree shipped for the workload is a candidate too, for both sides
        # alike (searched with or without reuse, in other sessions or from other starts):
        # the baseline is the best one-device tree there is
        from qsimdist.planner.trees import load_tree

        for path in sorted(TREES.glob(f"{name}_*.json")):
            if path in (path_p, path_1):
                continue
            candidates.append(load_tree(path, net))
            names.append(path.stem)
    # with ``reuse`` both sides keep outputs across slices (the baseline as much as the dp)
    dp, plan_p, which_p, sched_p = _best(net, candidates, Target(prof, devices, reuse=reuse))
    base, plan_1, which_1, sched_1 = _best(net, candidates,
                                           Target(load_profile(BASELINE[0]), 1, reuse=reuse))
    today = schedule(plan_p, prof, devices, "slice_only").predicted
    planning = time.perf_counter() - t0
    paper = PAPER.get(name, {})
    out = {
        "workload": name, "profile": profile, "devices": devices, "reuse": reuse,
        "trees": label if searched else f"not searched (the saved plan {saved.name})",
        "tree_used": {"P": names[which_p], "P=1": names[which_1]},
        # the search record of each tree used (its own search, not the lineage before it)
        "tree_used_cpu_seconds": {
            side: candidates[k].meta.get("search", {}).get("cpu_seconds")
            for side, k in (("P", which_p), ("P=1", which_1))},
        "search_budget_seconds": {
            "P": info_p.get("spent_seconds") if searched else 0,
            "P=1": info_1.get("spent_seconds") if searched else 0},
        "search_cpu_seconds": {
            "P": info_p.get("cpu_seconds") if searched else 0,
            "P=1": info_1.get("cpu_seconds") if searched else 0},
        "log10_flops_baseline_1": math.log10(base.flops_executed),
        "log10_flops_dp": math.log10(dp.flops_executed),
        "predicted_seconds_dp": dp.seconds,
        "predicted_seconds_baseline_1": base.seconds,
        "R_P_competitive": base.flops_executed / dp.flops_executed,
        "E_P_competitive": base.seconds / devices / dp.seconds,
        "R_P_today": today.flops_executed / dp.flops_executed,
        "E_P_today": today.seconds / dp.seconds,
        "peak_bytes_per_device": dp.peak_bytes_per_device,
        "usable_memory": prof.usable_memory,
        "group_size": dp.group_size,
        "n_slices": dp.n_slices,
        "paper_R_P": paper.get(devices, (None, None))[0],
        "paper_E_P": paper.get(devices, (None, None))[1],
        "planning_seconds": planning,
    }
    if reuse:  # where each side's executed FLOPs go (reuse.breakdown, reuse.order_loss)
        from qsimdist.planner.distribution import scheduled_plan
        from qsimdist.planner.distribution.reuse import breakdown, order_loss

        out["log10_flops_breakdown"], out["order_loss"] = {}, {}
        for side, plan, sch in (("P", plan_p, sched_p), ("P=1", plan_1, sched_1)):
            sp = scheduled_plan(plan, sch)
            out["log10_flops_breakdown"][side] = {
                k: math.log10(max(v, 1.0)) for k, v in breakdown(sp, sch, plan.stats.flops).items()}
            out["order_loss"][side] = order_loss(sp, sch, top=3)
    if "log10_flops_1" in paper:
        out["paper_log10_flops_1"] = paper["log10_flops_1"]
        out["paper_log10_flops_P"] = paper["log10_flops_1"] - math.log10(paper[devices][0])
    return out


def markdown(rows: list[dict]) -> str:
    def f(x, spec="{:.3g}"):
        return "—" if x is None else spec.format(x)

    def used(r):
        u = r.get("tree_used")
        if not u or r["trees"].startswith("not searched"):
            return ""
        return f" (dp on the {u['P']} tree, baseline on the {u['P=1']} tree)"

    lines = ["| workload | target | trees | one-device FLOPs (competitive) | dp FLOPs | R_P "
             "competitive | E_P competitive | R_P today | E_P today | peak / usable per "
             "device | search budget spent (P, P=1) | own search CPU s of the trees used "
             "(P, P=1) | paper R_P | paper E_P |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["search_budget_seconds"]
        # the budget of the target's own search file can differ from the tree that won:
        # each side takes the best of every shipped tree
        u = r.get("tree_used_cpu_seconds") or {}
        lines.append(
            f"| {r['workload']} | {r['profile']} x {r['devices']}"
            f"{' (reuse)' if r.get('reuse') else ''} | {r['trees']}{used(r)} | "
            f"10^{r['log10_flops_baseline_1']:.2f} | 10^{r['log10_flops_dp']:.2f} | "
            f"{f(r['R_P_competitive'])} | {f(r['E_P_competitive'])} | {f(r['R_P_today'])} | "
            f"{f(r['E_P_today'])} | {r['peak_bytes_per_device'] / 1e9:.1f} / "
            f"{r['usable_memory'] / 1e9:.0f} GB | {f(b['P'], '{:.0f}')} s, "
            f"{f(b['P=1'], '{:.0f}')} s | {f(u.get('P'), '{:.0f} s')}, "
            f"{f(u.get('P=1'), '{:.0f} s')} | {f(r['paper_R_P'])} | {f(r['paper_E_P'])} |")
    split = [r for r in rows if r.get("log10_flops_breakdown")]
    if split:
        lines += ["", "Where the executed FLOPs go (log10, predicted; reuse.breakdown):", "",
                  "| workload | target | side | unsliced | each step once per value of its "
                  "sliced indices | every output kept (schedule's order) | schedule's kept "
                  "outputs | nothing kept |", "|---|---|---|---|---|---|---|---|"]
        for r in split:
            for side, v in r["log10_flops_breakdown"].items():
                lines.append(
                    f"| {r['workload']} | {r['profile']} x {r['devices']} | "
                    f"{'dp' if side == 'P' else 'one device'} | {v['unsliced']:.2f} | "
                    f"{v['once_per_value']:.2f} | {v['every_kept']:.2f} | {v['kept']:.2f} | "
                    f"{v['nothing_kept']:.2f} |")
        lines += ["", "The order's cost (predicted; reuse.order_loss): the FLOPs above once per "
                  "value, the step carrying most of it, and the copies per value that would "
                  "spare it:", "",
                  "| workload | target | side | above once per value | top step: share, "
                  "reruns for, copies x bytes per device | share in steps whose copies fit |",
                  "|---|---|---|---|---|---|"]
        for r in split:
            for side, o in r.get("order_loss", {}).items():
                if not o["steps"]:
                    continue
                t = o["steps"][0]
                lines.append(
                    f"| {r['workload']} | {r['profile']} x {r['devices']} | "
                    f"{'dp' if side == 'P' else 'one device'} | "
                    f"10^{math.log10(o['extra_flops']):.2f} | step {t['step']}: "
                    f"{t['share']:.0%}, {len(t['reruns_for'])} outer index(es), "
                    f"{t['versions']:.3g} x {t['bytes_per_version'] / 1e9:.3g} GB | "
                    f"{o['fits_share']:.2%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    from qsimdist.commands.search import parse_budget

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--only", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    ap.add_argument("--search", default=None, help="run the missing searches of --targets "
                    "first, each with this budget (e.g. 45m)")
    ap.add_argument("--targets", nargs="+", default=["dgx-h100:8", "dgx-h100:1"],
                    help="PROFILE:P for --search")
    ap.add_argument("--reuse", action="store_true", help="score both sides with each group "
                    "keeping step outputs across slices where memory allows")
    ap.add_argument("--seed", type=int, default=0, help="seed of --search's random choices")
    ap.add_argument("--devices", nargs="+", type=int, default=None,
                    help="only these P of the rows' targets")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    data = Path(args.data)
    if args.search is not None:
        budget = parse_budget(args.search)
        for name in args.only:
            for spec in args.targets:
                prof, p = spec.split(":")
                if not tree_file(name, prof, int(p), args.reuse).exists():
                    run_search(name, data, prof, int(p), budget, args.reuse, args.seed)
    rows = []
    for name in args.only:
        for prof, p in TARGETS:
            if args.devices is not None and p not in args.devices:
                continue
            r = row(name, data, prof, p, reuse=args.reuse)
            rows.append(r)
            print(f"{name:8} {prof:>9} x {p:<5} dp 10^{r['log10_flops_dp']:.2f} vs one device "
                  f"10^{r['log10_flops_baseline_1']:.2f}: R_P {r['R_P_competitive']:.3g} "
                  f"(today {r['R_P_today']:.3g}), E_P {r['E_P_competitive']:.3g} (today "
                  f"{r['E_P_today']:.3g}); {r['trees']}; {r['planning_seconds']:.0f} s",
                  flush=True)
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
