"""The Quantum Advantage Tracker's operator Loschmidt echoes: exact cost, and value where cheap.

    python -m benchmarks.tracker --data ../shared/data [--search-seconds 120] [--json OUT]
        [--only NAME] [--compute-below 600] [--memory-limit 4GiB] [--no-kicked-ising]

For each OpenQASM 3 file of ``circuits/tracker/`` of the data folder (read as it is:
156 declared qubits, a file-defined ``sxdg``, barriers) the quantity is
``f = 2^-n Tr(O W^dag O W)`` with ``O = Z52 Z59 Z72`` (device qubit numbers). Its closed
network comes from :mod:`qsimdist.engine.echo` (W reduced to its two-sided diagonal-aware
light cone, then qsimdist's ``ADCRS`` simplification); one path is searched per network
(cotengra's hyper-optimiser, ``--search-seconds`` of wall time on one process, kept in the
qsimdist path cache so a second run reports without searching) and costed:

- contraction FLOPs (real, a complex multiply-add = 8) and the largest intermediate
  (bytes in complex128 and complex64) of the unsliced path;
- slices when every intermediate must fit ``--memory-limit`` (4 GiB), FLOPs then;
- **predicted** seconds of the dp schedule (:func:`qsimdist.report.distribution_report`) on
  ``local-cpu`` x 1, ``dgx-h100`` x 8 and ``h100-ib`` x 1024 (complex128, and complex64
  on the GPU profiles), with the per-device peak memory.

Where the predicted complex128 time on this machine (local-cpu x 1) is under
``--compute-below`` seconds, f is also contracted (complex128, sliced to fit
``--memory-limit``), and the measured time is printed beside the local executor's
prediction for that sliced plan. Every cost-model number is labelled predicted.

The same costing runs for ``<Z62>`` after 20 steps of the 127-qubit kicked-Ising circuit
(theta_h = 0.8; :mod:`benchmarks.kicked_ising`), on the doubled network the estimator
contracts (``DoubledCircuit.of(...).simplified(...)``); no value is computed for it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

#: the tracker's files and the names its board uses for them
FILES = {
    "49x648": "49Q_OLE_circuit_L_3_b_0.25_delta0.15.qasm",
    "49x1296": "49Q_OLE_circuit_L_6_b_0.25_delta0.15.qasm",
    "70x1872": "70Q_OLE_circuit_L_6_b_0.25_delta0.15.qasm",
}
#: the observable of all three instances (tracker README)
OBSERVABLE = "Z52 Z59 Z72"
#: (profile, devices) of the predicted times
TARGETS = (("local-cpu", 1), ("dgx-h100", 8), ("h100-ib", 1024))
KICKED_ISING = "kicked_ising_Z62_t20"


def _log10(x: float) -> float:
    return math.log10(x) if x > 0 else float("-inf")


def _seconds(t: float | None) -> str:
    from qsimdist.planner.estimate import seconds_text

    return "-" if t is None else seconds_text(t)


def _bytes(n: float) -> str:
    from qsimdist.config import format_bytes

    return format_bytes(int(n)) if n < 2**62 else f"2^{math.log2(n):.1f} B"


#: the slicing handed to the distribution planner as its starting point: every
#: intermediate at most 2^PREFER_LOG2 elements (1 GiB complex128), below every profile's
#: first target, so each target restores indices from it instead of slicing afresh
PREFER_LOG2 = 26


def preferred_slicing(net, path, largest: int) -> list[str] | None:
    """Indices that bring ``path`` to 2^PREFER_LOG2 elements per intermediate: none,
    cotengra's slicer where few are needed, else the coarse greedy one; ``None`` where no
    slicing within :data:`qsimdist.engine.echo.MAX_SLICED_INDICES` indices was found."""
    from qsimdist.engine.echo import FEW_SLICES_LOG2, greedy_slicing
    from qsimdist.errors import PlanError
    from qsimdist.planner.slicing import slice_path

    excess = math.log2(max(largest, 1)) - PREFER_LOG2
    if excess <= 0:
        return []
    try:
        if excess <= FEW_SLICES_LOG2:
            return slice_path(net, path, 2**PREFER_LOG2)
        return greedy_slicing(net, path, PREFER_LOG2)
    except PlanError:
        return None


def predicted(plan, profile: str, devices: int) -> dict:
    """The dp schedule's predicted seconds and per-device peak (the cost model's); where
    no slicing fits (``plan.meta["search_sliced"]`` is None), the compute-only bound:
    FLOPs over the devices' summed FLOP rate, memory ignored."""
    from qsimdist.errors import QsimdistError
    from qsimdist.hardware import load_profile
    from qsimdist.report import distribution_report

    head = {"profile": profile, "devices": devices, "dtype": plan.dtype}
    if plan.meta.get("search_sliced") is None:
        rate = load_profile(profile).flops[plan.dtype] * devices
        return {**head, "predicted_compute_bound_seconds": plan.stats.flops / rate,
                "error": "no slicing fits memory (none found within "
                         "MAX_SLICED_INDICES sliced indices)"}
    t0 = time.perf_counter()
    try:
        report, _ = distribution_report(plan, profile, devices)
    except QsimdistError as exc:  # nothing fits the devices' memory
        return {**head, "error": str(exc), "planning_seconds": time.perf_counter() - t0}
    dp = report["predicted"]["strategies"]["dp"]
    return {**head, "predicted_seconds": dp["seconds"], "predicted_peak_bytes_per_device":
            dp["peak_bytes_per_device"], "slices": dp["n_slices"], "group_size": dp["group_size"],
            "log10_flops_executed": _log10(dp["flops_executed"]),
            "planning_seconds": time.perf_counter() - t0}


def cost(net, plan, memory_limit: int, compute_below: float | None) -> dict:
    """FLOPs, sizes, slices and predicted times of ``plan`` (unsliced, complex128) on the
    simplified network ``net``; its value where the predicted local time is under
    ``compute_below`` seconds."""
    import cotengra as ctg

    from qsimdist.engine.echo import slice_within
    from qsimdist.errors import PlanError
    from qsimdist.planner.estimate import predicted_local_seconds
    from qsimdist.planner.plan import build_plan

    inputs, output, size_dict, _ = net.symbolic()
    greedy = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    row: dict = {"tensors_simplified": net.num_tensors,
                 "greedy_log10_flops": _log10(8 * float(greedy.contraction_cost())),
                 "greedy_log2_largest": math.log2(float(greedy.max_size())),
                 "path_from_cache": plan.stats.path_from_cache}
    s = plan.stats
    row.update(log10_flops=_log10(s.flops), log10_cost=s.log10_cost,
               largest_elements=s.max_intermediate,
               largest_bytes_complex128=16 * s.max_intermediate,
               largest_bytes_complex64=8 * s.max_intermediate)
    for dtype in ("complex128", "complex64"):
        t0 = time.perf_counter()
        try:
            fitted = slice_within(net, plan.path, memory_limit, dtype)
            row[f"slices_{dtype}"] = fitted.stats.n_slices
            row[f"log2_slices_{dtype}"] = len(fitted.sliced)
            row[f"log10_flops_sliced_{dtype}"] = _log10(fitted.stats.flops)
        except PlanError as exc:
            row[f"slices_{dtype}"] = None
            row[f"slicing_error_{dtype}"] = str(exc)
        row[f"slicing_seconds_{dtype}"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    prefer = preferred_slicing(net, plan.path, s.max_intermediate)
    row["preferred_slicing"] = None if prefer is None else len(prefer)
    row["preferred_slicing_seconds"] = time.perf_counter() - t0
    row["predicted"] = []
    for dtype in ("complex128", "complex64"):
        base = build_plan(net, plan.path, [], dtype, meta={"search_sliced": prefer})
        for profile, devices in TARGETS:
            if dtype == "complex128" or profile != "local-cpu":
                row["predicted"].append(predicted(base, profile, devices))
    local = row["predicted"][0].get("predicted_seconds")
    row["computed"] = None
    if compute_below is not None and local is not None and local < compute_below:
        run = slice_within(net, plan.path, memory_limit, "complex128")
        t0 = time.perf_counter()
        value = complex(run.execute().reshape(-1)[0])
        row["computed"] = {"value": value.real, "imag": value.imag,
                           "measured_seconds": time.perf_counter() - t0,
                           "predicted_local_executor_seconds": predicted_local_seconds(run),
                           "slices": run.stats.n_slices, "peak_bytes": run.stats.peak_bytes,
                           "dtype": "complex128"}
    return row


def _options(args):
    from qsimdist.planner.path import PathOptions

    return PathOptions(max_repeats=1_000_000, max_time=args.search_seconds)


def echo_row(name: str, path: Path, args) -> dict:
    from qsimdist.engine.echo import cone_network, echo_cone, echo_plan
    from qsimdist.frontends import load

    t0 = time.perf_counter()
    gc = load(path)
    read = time.perf_counter() - t0
    t0 = time.perf_counter()
    cone = echo_cone(gc, OBSERVABLE)
    built = cone_network(cone)
    reduce_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan, _, net = echo_plan(cone, None, dtype="complex128", path_options=_options(args))
    planning = time.perf_counter() - t0
    choice = plan.meta["echo_path"]
    row = {"name": name, "file": path.name, "quantity": f"2^-n Tr(O W^dag O W), O = {OBSERVABLE}",
           "declared_qubits": gc.n_qubits, "qubits": cone.used_qubits, "gates": cone.gates_in,
           "two_qubit_gates": sum(1 for g in gc.gates if len(g.qubits) > 1),
           "gates_kept": cone.gates, "two_qubit_gates_kept": cone.two_qubit_gates,
           "cone_qubits": len(cone.qubits), "reduction_rounds": cone.rounds,
           "tensors_built": built.num_tensors, "read_seconds": read,
           "reduce_seconds": reduce_seconds, "search_seconds": planning,
           "path_taken": choice["taken"],
           "path_candidates": {k: {"log10_flops": _log10(8 * v["multiply_adds"]),
                                   "log2_largest": math.log2(v["largest_elements"])}
                               for k, v in choice.items() if k != "taken"}}
    row.update(cost(net, plan, args.limit, args.compute_below))
    return row


def kicked_ising_row(args) -> dict:
    from benchmarks.kicked_ising import kicked_ising, load_edges
    from qsimdist.engine.doubled import DoubledCircuit
    from qsimdist.engine.pauli_terms import SINGLE_QUBIT_OPERATORS
    from qsimdist.frontends import load
    from qsimdist.planner.plan import make_plan

    qc = kicked_ising(load_edges(args.data), 0.8, 20)
    gc = load(qc)
    t0 = time.perf_counter()
    prepared = DoubledCircuit.of(gc)
    cone = prepared.cone((62,), "Z")
    built = prepared.network((62,), "Z", SINGLE_QUBIT_OPERATORS, cone=cone)
    net = prepared.simplified((62,), "Z", SINGLE_QUBIT_OPERATORS, limit=None, dtype="complex128")
    reduce_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan = make_plan(net, dtype="complex128", path_options=_options(args))
    planning = time.perf_counter() - t0
    row = {"name": KICKED_ISING, "file": "eagle127_edges.json (theta_h 0.8, 20 steps)",
           "quantity": "<0|U^dag Z62 U|0>", "declared_qubits": gc.n_qubits,
           "qubits": gc.n_qubits, "gates": len(gc.gates),
           "two_qubit_gates": sum(1 for g in gc.gates if len(g.qubits) > 1),
           "gates_kept": len(cone.gates),
           "two_qubit_gates_kept": sum(1 for k in cone.gates
                                       if len(prepared.circuit.gates[k].qubits) > 1),
           "cone_qubits": len(cone.qubits), "tensors_built": built.num_tensors,
           "reduce_seconds": reduce_seconds, "search_seconds": planning,
           "path_taken": "search", "path_candidates": {}}
    row.update(cost(net, plan, args.limit, None))
    return row


def print_row(row: dict) -> None:
    print(f"\n== {row['name']} ({row['file']}): {row['quantity']}", flush=True)
    print(f"qubits {row['qubits']} (declared {row['declared_qubits']}), gates {row['gates']} "
          f"({row['two_qubit_gates']} two-qubit); kept {row['gates_kept']} "
          f"({row['two_qubit_gates_kept']} two-qubit) on {row['cone_qubits']} qubits; tensors "
          f"{row['tensors_built']} built, {row['tensors_simplified']} after simplification")
    cands = ", ".join(f"{k} 10^{v['log10_flops']:.2f} FLOPs / 2^{v['log2_largest']:.0f}"
                      for k, v in row["path_candidates"].items())
    print(f"path: {row['search_seconds']:.0f} s of planning"
          f"{' (search from the path cache)' if row['path_from_cache'] else ''}, "
          f"{row['path_taken']} taken{' (' + cands + ')' if cands else ''}; cotengra greedy "
          f"alone 10^{row['greedy_log10_flops']:.2f} FLOPs / 2^{row['greedy_log2_largest']:.0f}")
    print(f"contraction 10^{row['log10_flops']:.2f} FLOPs, largest intermediate "
          f"2^{math.log2(max(row['largest_elements'], 1)):.1f} elements = "
          f"{_bytes(row['largest_bytes_complex128'])} complex128, "
          f"{_bytes(row['largest_bytes_complex64'])} complex64")
    sl = []
    for dtype in ("complex128", "complex64"):
        if row[f"slices_{dtype}"] is None:
            sl.append(f"{dtype}: no slicing found ({row[f'slicing_error_{dtype}']})")
        else:
            sl.append(f"{dtype}: 2^{row[f'log2_slices_{dtype}']} slices "
                      f"(10^{row[f'log10_flops_sliced_{dtype}']:.2f} FLOPs)")
    print(f"at {args_limit_text} per slice: " + "; ".join(sl))
    for p in row["predicted"]:
        head = f"  PREDICTED {p['profile']} x{p['devices']} {p['dtype']}:"
        if "predicted_compute_bound_seconds" in p:
            print(f"{head} no schedule (no slicing fits memory); compute-only bound "
                  f"{_seconds(p['predicted_compute_bound_seconds'])}, memory ignored")
        elif "error" in p:
            print(f"{head} no schedule fits ({p['error']})")
        else:
            print(f"{head} {_seconds(p['predicted_seconds'])} (dp, 2^"
                  f"{math.log2(p['slices']):.0f} slices, groups of {p['group_size']}, "
                  f"predicted peak {_bytes(p['predicted_peak_bytes_per_device'])} per device)")
    c = row.get("computed")
    if c:
        print(f"  COMPUTED f = {c['value']:.12f} (imag {c['imag']:.1e}), complex128, "
              f"{c['slices']} slices: measured {c['measured_seconds']:.1f} s, predicted "
              f"(local executor) {_seconds(c['predicted_local_executor_seconds'])}")
    elif row["name"] != KICKED_ISING:
        print("  not computed (predicted local time over --compute-below)")


args_limit_text = "4 GiB"


def main(argv: list[str] | None = None) -> list[dict]:
    global args_limit_text
    from qsimdist.config import format_bytes, parse_memory

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data", help="the shared data folder")
    ap.add_argument("--search-seconds", type=float, default=120.0,
                    help="wall-clock budget of each path search")
    ap.add_argument("--memory-limit", default="4GiB", help="per-slice memory for the slice "
                    "count and for the contraction when one is run")
    ap.add_argument("--compute-below", type=float, default=600.0,
                    help="contract f where the predicted local-cpu x1 time is under this (s)")
    ap.add_argument("--only", action="append", choices=[*FILES, KICKED_ISING], default=None)
    ap.add_argument("--no-kicked-ising", action="store_true")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    args.limit = parse_memory(args.memory_limit)
    args_limit_text = format_bytes(args.limit)
    data = Path(args.data)
    folder = data / "circuits" / "tracker"
    if not folder.is_dir():
        ap.error(f"no folder {folder}: give --data the shared data folder")
    rows = []
    names = args.only or [*FILES, *([] if args.no_kicked_ising else [KICKED_ISING])]
    for name in names:
        row = kicked_ising_row(args) if name == KICKED_ISING else echo_row(
            name, folder / FILES[name], args)
        print_row(row)
        rows.append(row)
        if args.json:  # after every row: an interrupted run keeps what it measured
            Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    print("\n(PREDICTED: cost-model outputs, not measurements; COMPUTED: contracted here)")
    return rows


if __name__ == "__main__":
    main()
    sys.exit(0)
