"""How a path search meets a memory limit, on a kicked-Ising doubled network.

    python -m benchmarks.search_slicing --data ../shared/data [--steps 7] [--observable W17]
        [--seconds 120] [--target-log2 26] [--modes plain slicing_opts slicing_reconf qsimdist]

Side by side, each from scratch on the same network (the term's doubled network as the
engine builds it, complex128): cotengra's ``HyperOptimizer`` for ``--seconds`` searching
unsliced trees (then sliced to ``2^target-log2`` elements by ``slice`` and
``slice_and_reconfigure``), with every trial sliced (``slicing_opts``), with every trial
sliced and reconfigured (``slicing_reconf_opts``), and qsimdist's ``make_plan`` at 4 GiB.
Prints log10 multiply-adds, slices and seconds per mode.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from .kicked_ising import OBSERVABLES, kicked_ising, load_edges, pauli_label
from .kicked_ising_frontier import k_network

MODES = ("plain", "slicing_opts", "slicing_reconf", "qsimdist")


def _row(mode: str, seconds: float, tree) -> str:
    return (f"{mode:<15} {seconds:7.1f} s  10^{math.log10(tree.contraction_cost()):.2f} madds"
            f"  2^{math.log2(tree.max_size()):.0f} largest  {tree.nslices} slices")


def main(argv=None) -> int:
    import cotengra as ctg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--observable", choices=sorted(OBSERVABLES), default="W17")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--target-log2", type=int, default=26)
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = ap.parse_args(argv)

    qc = kicked_ising(load_edges(args.data), args.theta, args.steps)
    net = k_network(qc, pauli_label(OBSERVABLES[args.observable]), "4GiB")
    inputs, output, size_dict, _ = net.symbolic()
    target = 2 ** args.target_log2
    print(f"{len(inputs)} tensors; slicing target 2^{args.target_log2} elements", flush=True)
    base = dict(max_time=args.seconds, max_repeats=10**6, minimize="flops", parallel=False,
                progbar=False)
    extra = {"plain": {}, "slicing_opts": {"slicing_opts": {"target_size": target}},
             "slicing_reconf": {"slicing_reconf_opts": {"target_size": target}}}
    for mode in args.modes:
        t0 = time.perf_counter()
        if mode == "qsimdist":
            from qsimdist.planner.path import PathOptions
            from qsimdist.planner.plan import make_plan

            plan = make_plan(net, dtype="complex128", memory_limit=4 << 30,
                             path_options=PathOptions(cache=False))
            print(f"{mode:<15} {time.perf_counter() - t0:7.1f} s  "
                  f"10^{math.log10(plan.stats.flops / 8):.2f} madds  "
                  f"{plan.stats.n_slices} slices  peak {plan.stats.peak_bytes / 2**30:.2f} GiB",
                  flush=True)
            continue
        tree = ctg.HyperOptimizer(**base, **extra[mode]).search(inputs, output, size_dict)
        print(_row(mode, time.perf_counter() - t0, tree), flush=True)
        if mode == "plain" and tree.max_size() > target:
            for how in ("slice", "slice_and_reconfigure"):
                t1 = time.perf_counter()
                kw = {"max_repeats": 16, "seed": 0} if how == "slice" else {}
                cut = getattr(tree, how)(target_size=target, allow_outer=False, **kw)
                print(_row(f"  {how}", time.perf_counter() - t1, cut), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
