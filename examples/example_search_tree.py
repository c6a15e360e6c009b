"""Search a contraction tree for a target, beside the one-device baseline searched alike.

The same thing as

    qsimdist search circuits/rqc_4x5_m12.qsim --profile local-cpu --devices 4 \\
        --memory-limit 64KiB --reuse --budget 3 --output tree4.json
    qsimdist search circuits/rqc_4x5_m12.qsim --profile local-cpu --devices 1 \\
        --memory-limit 64KiB --reuse --budget 3 --output tree1.json
    qsimdist plan circuits/rqc_4x5_m12.qsim --tree tree4.json --profile local-cpu \\
        --devices 4 --reuse

from Python: both searches are scored by the dp schedule's predicted seconds on
their own target; R_P and E_P are taken against the best one-device schedule of
either tree (every number printed is a cost-model prediction). Then the
amplitude is computed along the searched tree and checked against a plan made
without it.

On this 20-qubit circuit R_4 comes out at about 1 for any memory from 16 KiB to
512 KiB: the searched trees slice almost for free (the breakdown's columns
agree), so four devices gain nothing over four independent slices. Where
distribution pays, the slices cost a lot: n60m24 at 8 H100s, BENCHMARKS.md.

Run: python examples/example_search_tree.py
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import qsimdist
from qsimdist.api import simplified_network
from qsimdist.hardware import load_profile
from qsimdist.planner.distribution import scheduled_plan
from qsimdist.planner.distribution.reuse import breakdown, order_loss
from qsimdist.planner.search import Target, score_tree, search

CIRCUIT = Path(__file__).resolve().parents[1] / "circuits" / "rqc_4x5_m12.qsim"
ZEROS = "0" * 20
P = 4
MEMORY = 512 * 1024  # bytes per device: one device slices more than four do


def main(budget: float = 3.0) -> None:
    net = simplified_network(str(CIRCUIT), bitstrings=ZEROS, memory_limit="none")
    prof = load_profile("local-cpu")
    many = Target.with_memory(prof, P, "complex64", MEMORY, reuse=True)
    one = Target.with_memory(prof, 1, "complex64", MEMORY, reuse=True)
    with tempfile.TemporaryDirectory() as tmp:
        states = {}
        for name, target in (("P", many), ("1", one)):
            states[name] = search(net, target, budget, out=Path(tmp) / f"tree{name}.json",
                                  seed=7)
            h = states[name].meta()["search"]
            print(f"search for {target.devices} device(s): {h['rounds']} rounds in "
                  f"{h['spent_seconds']:.1f} s, best {h['score']['predicted_seconds']:.3g} s")
        trees = [states["P"].tree, states["1"].tree]
        # each side takes the better of the two trees for its own target
        dp, sched, plan = min((score_tree(net, t, many) for t in trees),
                              key=lambda s: s[0].seconds)
        base, _, _ = min((score_tree(net, t, one) for t in trees), key=lambda s: s[0].seconds)
        print(f"dp on {P} devices: 10^{math.log10(dp.flops_executed):.2f} FLOPs, "
              f"{dp.n_slices} slice(s) in groups of {dp.group_size}")
        print(f"one device:      10^{math.log10(base.flops_executed):.2f} FLOPs, "
              f"{base.n_slices} slice(s)")
        print(f"R_{P} = {base.flops_executed / dp.flops_executed:.3g}, "
              f"E_{P} = {base.seconds / P / dp.seconds:.3g} (predicted)")
        sp = scheduled_plan(plan, sched)
        b = breakdown(sp, sched, plan.stats.flops)
        print("where the dp's FLOPs go (log10): " + ", ".join(
            f"{k} {math.log10(max(v, 1.0)):.2f}" for k, v in b.items()))
        if sched.n_slices > 1:
            loss = order_loss(sp, sched)
            print(f"the slices' order costs 10^{math.log10(max(loss['extra_flops'], 1.0)):.2f} "
                  f"FLOPs above once per value")
        assert b["kept"] == dp.flops_executed or abs(b["kept"] / dp.flops_executed - 1) < 1e-9

        # plan along the searched tree (re-sliced for this process's memory) and run it
        tree_file = Path(tmp) / "treeP.json"
        along = qsimdist.plan(CIRCUIT, bitstrings=ZEROS, tree=tree_file)
        value = complex(along.execute().reshape(-1)[0])
        ref = qsimdist.amplitude(CIRCUIT, ZEROS)
        print(f"<{ZEROS}|C|0> = {value:.6e} along the searched tree")
        assert abs(value - ref) <= 1e-5 * max(abs(ref), 1e-30)


def test_example() -> None:
    main(budget=2.0)


if __name__ == "__main__":
    main()
