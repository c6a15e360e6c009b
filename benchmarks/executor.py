"""Executor vs cotengra's own contractor on the same path, side by side.

    python -m benchmarks.executor CIRCUIT.qsim [--bitstring B] [--order natural] [--repeats 3]
        [--untiled] [--steps]

Plans the circuit once (the planning time is reported end to end), then times
``Plan.execute`` and ``cotengra.ContractionTree.contract`` on the same SSA path
and the same complex64 arrays, alternating runs so machine noise hits both.
Also measures this machine's complex64 GEMM rate to report the achieved
fraction, and the share of steps with no transposed bytes.

``--untiled`` also times, in the same alternation, the same path planned with
the tiled kernel switched off (the kernels before it existed), so a before/after
ratio comes from one run. ``--steps`` runs the plan step by step once more and
reports seconds and GB/s (bytes read and written over the step's time) per kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def gemm_rate(n: int = 2048, dtype: str = "complex64", repeats: int = 3) -> float:
    """Real FLOP/s of one n x n x n complex GEMM through numpy (best of ``repeats``)."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(dtype)
    b = a.copy()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 8.0 * n**3 / best


def kernel_of(step) -> str:
    """The kernel a step runs on the CPU: gemm, transpose, broadcast, loop or tiled."""
    if step.loop:
        return "tiled" if getattr(step, "tiled", False) else "loop"
    return step.kernel


def kernel_breakdown(plan) -> dict:
    """Seconds and GB/s per kernel of one step-by-step run of ``plan`` (first slice)."""
    from qsimdist.executors import kernels, local

    xp, dtype = np, np.dtype(plan.dtype)
    compiled = kernels.worthwhile(plan.stats.flops)
    pool = local.BufferPool(xp, dtype, limit=2 * plan.stats.peak_bytes)
    assignment = {i: 0 for i in plan.sliced}
    nodes = {k: local.load_leaf(plan, k, assignment, xp, dtype)
             for k in range(plan.network.num_tensors)}
    seconds: dict[str, float] = {}
    moved: dict[str, int] = {}
    count: dict[str, int] = {}
    for step in plan.steps:
        a, b = nodes.pop(step.lhs), nodes.pop(step.rhs)
        t = time.perf_counter()
        nodes[step.out] = local.run_step(step, a, b, xp, pool, compiled)
        kind = kernel_of(step)
        seconds[kind] = seconds.get(kind, 0.0) + time.perf_counter() - t
        moved[kind] = moved.get(kind, 0) + step.bytes
        count[kind] = count.get(kind, 0) + 1
        pool.put(a)
        pool.put(b)
    return {kind: {"steps": count[kind], "seconds": seconds[kind],
                   "gb_per_s": moved[kind] / max(seconds[kind], 1e-12) / 1e9}
            for kind in seconds}


def main(argv: list[str] | None = None) -> dict:
    import cotengra as ctg

    import qsimdist

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("circuit")
    ap.add_argument("--bitstring", default=None)
    ap.add_argument("--order", default="natural")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-repeats", type=int, default=None)
    ap.add_argument("--untiled", action="store_true",
                    help="also time the same path with the tiled kernel switched off")
    ap.add_argument("--steps", action="store_true", help="per-kernel seconds and GB/s")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    from qsimdist.frontends import load

    gc = load(args.circuit)
    bits = args.bitstring or "0" * gc.n_qubits
    plan = qsimdist.plan(gc, bitstrings=bits, order=args.order, max_repeats=args.max_repeats,
                         memory_limit="none")
    t_plan = time.perf_counter() - t0
    net = plan.network
    inputs, output, size_dict, _ = net.symbolic()
    tree = ctg.ContractionTree.from_path(inputs, output, size_dict, ssa_path=plan.path)
    arrays = [np.asarray(a, dtype=plan.dtype) for a in net.arrays]
    untiled = None
    if args.untiled:
        from qsimdist.hardware.costs import LocalCosts
        from qsimdist.planner.plan import build_plan

        untiled = build_plan(net, plan.path, plan.sliced, plan.dtype,
                             costs=LocalCosts(tiled_byte=float("inf")))
    t_ours, t_ctg, t_untiled = [], [], []
    ours = theirs = None
    for _ in range(args.repeats):
        t = time.perf_counter()
        ours = plan.execute()
        t_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        theirs = tree.contract(arrays)
        t_ctg.append(time.perf_counter() - t)
        if untiled is not None:
            t = time.perf_counter()
            untiled.execute()
            t_untiled.append(time.perf_counter() - t)
    steps = plan.steps
    zero = sum(1 for s in steps if s.transposed_bytes == 0)
    rate = gemm_rate()
    best_ours, best_ctg = min(t_ours), min(t_ctg)
    result = {
        "circuit": args.circuit,
        "plan_seconds_end_to_end": t_plan,
        "log10_cost": plan.stats.log10_cost,
        "flops": plan.stats.flops,
        "largest_intermediate_log2": float(np.log2(plan.stats.max_intermediate)),
        "steps": len(steps),
        "kernel_counts": plan.stats.kernel_counts,
        "steps_without_transpose": zero,
        "steps_without_transpose_share": zero / max(len(steps), 1),
        "transposed_bytes": plan.stats.transposed_bytes,
        "expanded_bytes": plan.stats.expanded_bytes,
        "steps_without_any_copy": sum(
            1 for s in steps if s.transposed_bytes == 0 and s.expanded_bytes == 0
        ),
        "execute_seconds": t_ours,
        "cotengra_seconds": t_ctg,
        "speedup_vs_cotengra": best_ctg / best_ours,
        "speedup_vs_cotengra_median": statistics.median(t_ctg) / statistics.median(t_ours),
        "speedup_vs_cotengra_pairwise_median": statistics.median(
            c / o for c, o in zip(t_ctg, t_ours)),
        "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
        "achieved_gflops": plan.stats.flops / best_ours / 1e9,
        "gemm_gflops_measured": rate / 1e9,
        "achieved_fraction_of_gemm": plan.stats.flops / best_ours / rate,
        "relative_difference": float(abs(complex(np.ravel(ours)[0]) - complex(np.ravel(theirs)[0]))
                                     / abs(complex(np.ravel(theirs)[0]))),
    }
    if untiled is not None:
        result["untiled_seconds"] = t_untiled
        result["untiled_kernel_counts"] = untiled.stats.kernel_counts
        result["untiled_speedup_vs_cotengra_pairwise_median"] = statistics.median(
            c / u for c, u in zip(t_ctg, t_untiled))
        result["tiled_over_untiled_pairwise_median"] = statistics.median(
            u / o for u, o in zip(t_untiled, t_ours))
    result["tiled_steps"] = sum(1 for s in steps if getattr(s, "tiled", False))
    if args.steps:
        result["kernels"] = kernel_breakdown(plan)
        if untiled is not None:
            result["untiled_kernels"] = kernel_breakdown(untiled)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
