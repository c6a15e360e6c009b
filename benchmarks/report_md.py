"""The suite's section of the benchmark history, regenerated from a ``python -m benchmarks run`` JSON.

The history is ``docs/benchmarks/history.md`` (``--benchmarks`` names another file).
Only the text between :data:`BEGIN` and :data:`END` is replaced (the rest of
the file is written by hand and stays byte-identical); the file is
written to a temporary name and renamed. Plots are matplotlib PNGs:

* ``steps_time_memory.png`` -- per-step time and live memory of one plan;
* ``steps_gflops.png`` -- achieved GFLOP/s per step against the two
  ceilings measured in the same run (GEMM rate; copy bandwidth times the
  step's FLOPs per byte);
* ``ep.png`` -- E_P against P, measured and predicted.

The primitives and deep-amplitude sections get a table each when the run has them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from qsimdist.errors import InvalidInputError

BEGIN = "<!-- qsimdist-bench:begin -->"
END = "<!-- qsimdist-bench:end -->"


# --------------------------------------------------------------------------- markers


def replace_section(text: str, body: str) -> str:
    """``text`` with the part between the markers replaced by ``body``.

    Without markers, they are appended (with ``body``) at the end, so the
    existing text stays a byte-identical prefix. Markers out of order or
    repeated raise :class:`InvalidInputError`.
    """
    nb, ne = text.count(BEGIN), text.count(END)
    if nb == 0 and ne == 0:
        sep = "" if text.endswith("\n") or not text else "\n"
        return f"{text}{sep}\n{BEGIN}\n{body.rstrip()}\n{END}\n"
    if nb != 1 or ne != 1:
        raise InvalidInputError(f"expected one {BEGIN} and one {END} marker, found {nb} and {ne}")
    i, j = text.index(BEGIN), text.index(END)
    if j < i:
        raise InvalidInputError(f"{END} comes before {BEGIN}")
    return text[: i + len(BEGIN)] + "\n" + body.rstrip() + "\n" + text[j:]


def update_file(path: Path, body: str) -> None:
    """Replace the marked section of ``path`` (created if absent) atomically."""
    from qsimdist._fileio import atomic_write_text

    # bytes, decoded without newline translation, so the text outside the markers stays exact
    text = path.read_bytes().decode("utf-8") if path.exists() else ""
    atomic_write_text(path, replace_section(text, body))


# --------------------------------------------------------------------------- plots


def _largest_stepped(result: dict) -> dict | None:
    cases = [r for r in result.get("same_path", []) if r.get("per_step")]
    return max(cases, key=lambda r: r["flops"]) if cases else None


def make_plots(result: dict, out: Path) -> dict[str, Path]:
    """Write the PNGs into ``out``; returns {plot name: path} (a plot without data is left out)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from qsimdist.errors import MissingDependencyError

        raise MissingDependencyError(
            "the report's plots need matplotlib; install it with: pip install 'qsimdist[plot]'"
        ) from None
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    case = _largest_stepped(result)
    ceil = result.get("ceilings", {})
    if case is not None:
        steps = case["per_step"]
        idx = [s["step"] for s in steps]
        fig, ax = plt.subplots(figsize=(9, 4))
        ax.bar(idx, [s["seconds"] * 1e3 for s in steps], color="tab:blue", label="time (ms)")
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("measured time per slice (ms)", color="tab:blue")
        ax2 = ax.twinx()
        ax2.plot(idx, [s["live_bytes"] / 2**20 for s in steps], color="tab:red",
                 label="live memory (MiB, plan)")
        ax2.set_ylabel("live memory during the step (MiB)", color="tab:red")
        ax.set_title(f"{case['case']}: per-step time (measured) and live memory (plan)")
        fig.tight_layout()
        written["steps_time_memory"] = _save(fig, out / "steps_time_memory.png")
        plt.close(fig)

        if ceil:
            fig, ax = plt.subplots(figsize=(9, 4))
            gemm = ceil["gemm_flops"] / 1e9
            bw = ceil["copy_bytes_per_s"]
            achieved = [s["flops"] / s["seconds"] / 1e9 if s["seconds"] > 0 else 0 for s in steps]
            roof = [min(gemm, bw * s["flops"] / max(s["bytes"], 1) / 1e9) for s in steps]
            ax.scatter(idx, achieved, s=10, color="tab:blue", label="achieved (measured)")
            ax.scatter(idx, roof, s=10, marker="_", color="tab:gray",
                       label="ceiling: min(GEMM, FLOP/byte x copy bandwidth)")
            ax.axhline(gemm, color="tab:red", ls="--",
                       label=f"complex64 GEMM {gemm:.0f} GFLOP/s (measured)")
            ax.set_yscale("log")
            ax.set_xlabel("step")
            ax.set_ylabel("GFLOP/s")
            ax.set_title(f"{case['case']}: achieved GFLOP/s per step against the ceilings")
            ax.legend(fontsize=8, loc="lower right")
            fig.tight_layout()
            written["steps_gflops"] = _save(fig, out / "steps_gflops.png")
            plt.close(fig)
    mpi = result.get("mpi", [])
    if mpi:
        ps = [1] + [r["ranks"] for r in mpi]
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.plot(ps, ps, color="tab:gray", ls=":", label="E_P = P")
        ax.plot(ps, [1.0] + [r["E_P_measured"] for r in mpi], "o-", label="E_P measured")
        ax.plot(ps, [1.0] + [r["E_P_predicted"] for r in mpi], "s--",
                label="E_P predicted (cost model)")
        ax.plot(ps, [1.0] + [r["R_P"] for r in mpi], "^:", label="R_P (FLOP counts)")
        ax.set_xlabel("P (MPI ranks)")
        ax.set_ylabel("speed-up over slice-only")
        ax.set_xticks(ps)
        ax.set_title("distributed against slice-only (n30m14)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        written["ep"] = _save(fig, out / "ep.png")
        plt.close(fig)
    return written


def _save(fig, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.png")
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- markdown


def _f(v, fmt: str = ".2f") -> str:
    return "—" if v is None else format(v, fmt)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def _cell(text: str) -> str:
    """``text`` (an error message) safe inside a table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _times(xs: list[float]) -> str:
    return ", ".join(f"{x:.3g}" for x in xs)


def render(result: dict, images: dict[str, Path], base: Path,
           json_path: Path | None = None) -> str:
    """The markdown between the markers; image links are relative to ``base``."""
    m, v, c = result["machine"], result["versions"], result.get("ceilings", {})
    cmd = result["command"]
    lines = [
        "*Generated by `python -m benchmarks run` from its JSON; do not edit by hand — rerun "
        "`python -m benchmarks report FILE.json` instead.*",
        "",
        "```bash",
        cmd,
        "```",
        "",
        f"Run {result['date']} on {m['cpu_model']} ({m['cores']} cores"
        + (f", load average {m['load_average_at_start'][0]:.1f} at the start"
           if m.get("load_average_at_start") else "")
        + f"), suite `{result['suite']}`, {result.get('wall_s', 0):.0f} s in all. "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
    ]
    if json_path is not None:
        lines.append(f"Every number below is in `{_rel(json_path, base)}`.")
    s = result["settings"]
    from qsimdist.planner.path import NO_SEARCH_COST

    no_search = f"{NO_SEARCH_COST:.0e}".replace("e+0", "e")
    lines += ["", f"Contenders alternate in one process: {s['warmup_rounds']} warm-up round "
              f"(dropped), then {s['repeats']} rounds ("
              f"{s.get('same_path_repeats', s['repeats'])} for the same-path comparison); "
              "tables give medians and the median of "
              "the round-by-round ratios (> 1: qsimdist faster). Path searches get at most "
              f"{s['search_repeats']} hyper-optimiser trials on both sides (quimb runs all "
              f"of them; qsimdist none where the greedy path needs at most {no_search} "
              "multiply-adds, `planner.path.NO_SEARCH_COST`)."]
    if c:
        lines += ["", f"Ceilings measured in this run: complex64 GEMM "
                  f"{c['gemm_flops'] / 1e9:.1f} GFLOP/s ({c['gemm_n']}³ through numpy), "
                  f"contiguous copy {c['copy_bytes_per_s'] / 1e9:.2f} GB/s (read + write, "
                  f"{c['copy_mib']} MiB)."]
    lines += ["", "**Targets of issue 11** (measured beside the goal):", ""]
    lines += _table(["target", "goal", "measured", "met"],
                    [[t["target"], t["goal"], f"{t['measured']:.3g}",
                      "yes" if t["met"] else "**no**"] for t in result.get("targets", [])])
    if any(r["n_qubits"] <= 20 for r in result["first_amplitude"]) is False:
        lines += ["", "No ≤ 20-qubit first-amplitude run in this suite."]
    lines += ["", "This suite measures the CPU only. The GPU target (≥ 50% of the measured "
              "complex64 GEMM rate on the 6×6×14 amplitude) is measured by "
              "`scripts/gpu_check.sh` on a GPU machine, not here."]

    if result["same_path"]:
        lines += ["", "**Contraction on the same path** (`Plan.execute` against "
                  "`cotengra.ContractionTree.contract`, NumPy, the plan's own tree and arrays):",
                  ""]
        rows = []
        for r in result["same_path"]:
            rows.append([r["case"], str(r["n_qubits"]), f"{r['flops']:.3g}", str(r["steps"]),
                         str(r["n_slices"]), _times(r["seconds"]["qsimdist"]),
                         _times(r["seconds"]["cotengra"]),
                         f"**{r['speedup_median_of_pairwise']:.2f}**",
                         f"{r['speedup_median_over_median']:.2f}",
                         _f(r.get("fresh_workspace", {}).get("speedup_median_of_pairwise")),
                         f"{r['achieved_gflops']['qsimdist']:.1f} / "
                         f"{r['achieved_gflops']['cotengra']:.1f}",
                         f"{100 * r['fraction_of_gemm']['qsimdist']:.1f}%",
                         f"{r['floor_seconds']['gemm']:.3g} / {r['floor_seconds']['bytes']:.3g}",
                         f"{r['transposed_bytes'] / 1e6:.1f}",
                         f"{r['steps_without_transpose']}/{r['steps']}",
                         f"{r['relative_difference']:.1e}"])
        lines += _table(["case", "qubits", "real FLOPs", "steps", "slices", "qsimdist (s)",
                         "cotengra (s)", "ratio (median pairwise)", "median/median",
                         "ratio, fresh workspace",
                         "GFLOP/s qsimdist / cotengra", "of GEMM rate", "floors GEMM / bytes (s)",
                         "transposed MB", "steps without transpose", "rel. diff."], rows)
        lines += ["", "The bytes floor counts each step's operands and output once at the "
                  "measured copy bandwidth; the GEMM floor its FLOPs at the measured GEMM rate. "
                  "`Plan.execute` keeps its free buffers between runs of a plan (up to 256 MiB); "
                  "*fresh workspace* is the same executor with a new buffer pool every run "
                  "(`reuse_workspace=False`), as a one-shot call meets it, timed in the same "
                  "rounds."]
    if result["end_to_end"]:
        lines += ["", "**End to end, one amplitude from the file** (parse, simplify, path "
                  "search, contract; qsimdist's path cache off, a fresh quimb circuit and "
                  "optimiser each round; Qiskit Aer: statevector, single precision, "
                  "`save_amplitudes`):", ""]
        rows = []
        for r in result["end_to_end"]:
            med = r["median_s"]
            vq, va = r.get("vs_quimb", {}), r.get("vs_qiskit-aer", {})
            tq = r.get("tensor_network_vs_quimb", {})
            route = r.get("qsimdist_route", {}).get("qsimdist", "tensor-network")
            rows.append([r["case"], str(r["n_qubits"]),
                         f"{_f(med.get('qsimdist'), '.3f')} ({route})",
                         _f(med.get("qsimdist (tensor network)"), ".3f"),
                         _f(med.get("quimb"), ".3f"), _f(med.get("qiskit-aer"), ".3f"),
                         f"**{_f(vq.get('speedup_median_of_pairwise'))}**",
                         _f(tq.get("speedup_median_of_pairwise")),
                         _f(va.get("speedup_median_of_pairwise")),
                         ", ".join(f"{k} {x:.1e}" for k, x in r["relative_difference"].items()),
                         "; ".join(f"{k}: {x}" for k, x in r["skipped"].items()) or "—"])
        lines += _table(["case", "qubits", "qsimdist (s, route)",
                         "qsimdist tensor network forced (s)", "quimb (s)", "Aer (s)",
                         "vs quimb", "tensor network vs quimb", "vs Aer",
                         "rel. diff. to qsimdist", "not run"], rows)
    if result["mpi"]:
        lines += ["", "**Distributed against slice-only under MPI** (n30m14, one amplitude, a "
                  "per-rank memory limit below the largest intermediate; "
                  "`benchmarks.mpi` after calibrating the profile on its own first run):",
                  ""]
        rows = []
        for r in result["mpi"]:
            ms, ps = r["measured_seconds"], r["predicted_seconds"]
            rows.append([str(r["ranks"]), f"**{r['E_P_measured']:.2f}**",
                         f"{r['E_P_predicted']:.2f}", f"{r['R_P']:.2f}",
                         f"{r['E_P_over_R_P']:.2f}",
                         f"{100 * r['comm_share_measured']:.0f}%"
                         if r["comm_share_measured"] is not None else "—",
                         f"{ms['slice_only']:.3f} / {ps['slice_only']:.3f}",
                         f"{ms['distributed']:.3f} / {ps['distributed']:.3f}",
                         f"{r['rel_diff_between_results']:.1e}"])
        lines += _table(["P", "E_P measured", "E_P predicted", "R_P", "E_P / R_P",
                         "comm. share of distributed (measured)",
                         "slice-only measured / predicted (s)",
                         "distributed measured / predicted (s)", "results agree to"], rows)
        lines += ["", "Commands: " + "; ".join(f"`{_shown(r['command'])}`"
                                             for r in result["mpi"]) + "."]
    if result["planning"]:
        lines += ["", "**Planning** (in-process, numba warm; empty path cache, then the same "
                  "circuit re-planned with the structure cache warm):", ""]
        lines += _table(["case", "qubits", "plan, empty cache (s)",
                         "re-plan, warm cache (s, median)", "path from cache (warm runs)"],
                        [[r["case"], str(r["n_qubits"]),
                          f"{r['plan_cold_cache_s']:.2f}"
                          + (" (path was cached!)" if r.get("cold_path_from_cache") else ""),
                          f"{r['replan_warm_cache_median_s']:.3f}",
                          f"{sum(r['replan_path_from_cache'])}/{len(r['replan_path_from_cache'])}"]
                         for r in result["planning"]])
    if result["first_amplitude"]:
        lines += ["", "**Time to first amplitude** (wall time of `python -m qsimdist amplitude "
                  "FILE 0…0 --order natural --json` in a fresh process; *cold*: empty path "
                  "and numba caches, qsimdist's modules compiled to bytecode beforehand as "
                  "`pip install .` does; then again with the caches it filled):", ""]
        lines += _table(["case", "qubits", "cold (s)", "fresh process, warm caches (s)",
                         "bytecode", "plan (s)", "execute (s)"],
                        [[r["case"], str(r["n_qubits"]), f"{r['wall_s']['cold']:.2f}",
                          f"{r['wall_s']['warm_caches']:.2f}",
                          {True: "compiled", False: "**not compiled**"}.get(r.get("bytecode"),
                                                                           "—"),
                          _f(r["stats"].get("plan_seconds")),
                          _f(r["stats"].get("execute_seconds"))]
                         for r in result["first_amplitude"]])
    if result.get("primitives"):
        prim = result["primitives"]
        lines += ["", "**Qiskit primitives against Qiskit Aer's** (measured: SamplerV2 / "
                  "EstimatorV2, each contender in its own process, the `run(...).result()` call "
                  "alone, the median of the calls when repeated (alternating); Aer's transpile timed apart and left out of the ratio; agreement: the "
                  "estimator's largest absolute difference, the sampler's largest z-score of a "
                  "qubit's marginal):", ""]
        rows = []
        for r in prim:
            q, a = r["qsimdist"], r["aer"]
            rows.append([r["primitive"], r["case"],
                         _cell(q["error"]) if "error" in q else f"{q['seconds']:.2f}",
                         f"{q.get('method')}, {q.get('engine')}" if "error" not in q else "—",
                         _cell(a["error"]) if "error" in a else f"{a['seconds']:.2f}",
                         _f(a.get("transpile_seconds")),
                         f"**{r['ratio']:.2f}**" if "ratio" in r else "—",
                         f"max abs diff {r['max_abs_diff']:.1e}" if "max_abs_diff" in r
                         else f"max z {r['max_z']:.1f}" if "max_z" in r else "—"])
        lines += _table(["primitive", "case", "qsimdist (s)", "route, engine", "Aer (s)",
                         "Aer transpile (s)", "Aer / qsimdist", "agreement"], rows)
        commands = {}
        for r in prim:  # one command per primitive, its cases in the order they ran
            commands.setdefault(r["primitive"], []).append(r["case"])
        shots = result["settings"].get("primitive_shots", 2000)
        repeats = result["settings"].get("primitive_repeats", 1)
        again = f" --repeats {repeats}" if repeats > 1 else ""
        lines += ["", "Commands (the same rows alone): " + "; ".join(
            f"`python -m benchmarks.primitives_vs_aer --primitives {p} --cases "
            f"{' '.join(cs)} --shots {shots}{again}`" for p, cs in commands.items()) + "."]
    if result.get("deep_amplitude"):
        deep = result["deep_amplitude"]
        lines += ["", "**One amplitude of qsim's deep circuits** (measured: the amplitude of "
                  "0…0, each contender in its own process; *in the call*: the amplitude call "
                  "alone, the circuit already read; *whole process*: interpreter start and "
                  "imports included):", ""]
        rows = []
        for rec in deep:
            for r in rec["rows"]:
                if "error" in r:
                    rows.append([rec["circuit"], r["contender"], _cell(r["error"])] + ["—"] * 5)
                    continue
                rows.append([rec["circuit"], r["contender"], f"{r['seconds']:.2f}",
                             f"{r['process_seconds']:.2f}",
                             _f(r.get("qsimcirq_seconds_over_this")),
                             _f(r.get("qsimcirq_process_over_this")),
                             _f(r.get("rel_diff_to_qsimcirq"), ".1e"),
                             f"{r['engine']}, {r['fusion_width']}" if "engine" in r else "—"])
        lines += _table(["circuit", "contender", "in the call (s)", "whole process (s)",
                         "qsimcirq / this, call", "qsimcirq / this, process",
                         "rel. diff. to qsimcirq", "engine, fusion width"], rows)
        lines += ["", "Commands: " + "; ".join(f"`{_shown(rec['command'])}`" for rec in deep)
                  + "."]
    if result["skipped"]:
        lines += ["", "Not run here:"]
        lines += [f"- {s['section'].replace('_', ' ')}, {s['case']}: {s['reason']}"
                  for s in result["skipped"]]
    if images:
        lines += [""]
        captions = {"steps_time_memory": "per-step time (measured, one slice) and live memory "
                    "(plan)", "steps_gflops": "achieved GFLOP/s per step against the ceilings",
                    "ep": "E_P against P, measured and predicted"}
        for name, path in images.items():
            lines.append(f"![{captions.get(name, name)}]({_rel(path, base)})")
    return "\n".join(lines) + "\n"


def _shown(command: str) -> str:
    """A command as someone would type it: ``python`` for the interpreter, no scratch files."""
    command = re.sub(r" --json \S+", "", command)
    return re.sub(r"\S*/python[\d.]*(?=\s)", "python", command)


def _rel(path: Path, base: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def write_report(result: dict, benchmarks: Path, out: Path,
                 json_path: Path | None = None) -> list[Path]:
    """Plots into ``out`` and the marked section of ``benchmarks``; returns the PNG paths."""
    images = make_plots(result, out)
    body = render(result, images, benchmarks.parent, json_path)
    update_file(benchmarks, body)
    return list(images.values())


def report_command(json_file: Path, benchmarks: Path, out: Path) -> list[Path]:
    """What ``python -m benchmarks report FILE.json`` does."""
    from .result import load_json

    return write_report(load_json(json_file), benchmarks, out, json_file)
