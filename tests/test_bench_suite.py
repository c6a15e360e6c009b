"""``qsimdist bench``: its JSON, the report made from it, and the GPU script's CPU part.

Correctness only: no timing is asserted (speed lives in BENCHMARKS.md).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import gpu, report_md, suite
from benchmarks.command import main
from qsimdist.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[1]

SPEC = suite.SuiteSpec(
    name="tiny", repeats=1, search_repeats=2,
    same_path=(suite.Case("rqc_3x4_m8", "bundled:rqc_3x4_m8.qasm", 2),
               suite.Case("absent", "shared:circuits/no_such_circuit.qsim")),
    end_to_end=(suite.Case("ghz_n5", "bundled:ghz_n5.qasm"),),
    planning=(suite.Case("qft_n6", "bundled:qft_n6.qasm"),),
    first_amplitude=(suite.Case("ghz_n5", "bundled:ghz_n5.qasm"),),
    mpi_ranks=(), gemm_n=64, copy_mib=1,
)


@pytest.fixture(scope="module")
def bench_result(tmp_path_factory) -> dict:
    data = tmp_path_factory.mktemp("no-data")  # no reference data: shared cases are skipped
    return suite.run_suite(SPEC, data=data, command="qsimdist bench --suite tiny", quiet=True)


def _statevector(path: Path) -> np.ndarray:
    from qiskit import QuantumCircuit
    from qiskit.quantum_info import Statevector

    return Statevector(QuantumCircuit.from_qasm_file(str(path))).data


def test_json_schema_and_values(bench_result, tmp_path):
    r = bench_result
    for key in ("schema", "version", "suite", "command", "date", "machine", "versions",
                "ceilings", "settings", "same_path", "end_to_end", "mpi", "planning",
                "first_amplitude", "skipped", "targets", "wall_s"):
        assert key in r, key
    assert r["command"] == "qsimdist bench --suite tiny"
    for lib in ("python", "numpy", "cotengra", "quimb", "qiskit", "qiskit-aer"):
        assert r["versions"][lib], lib
    assert r["machine"]["cores"] >= 1 and r["machine"]["cpu_model"]
    assert r["ceilings"]["gemm_flops"] > 0 and r["ceilings"]["copy_bytes_per_s"] > 0

    # the absent reference circuit is skipped with its reason, the rest ran
    assert [s["case"] for s in r["skipped"]] == ["absent"]
    assert "not found" in r["skipped"][0]["reason"]
    (sp,) = r["same_path"]
    assert sp["relative_difference"] < 1e-4  # cotengra's contraction of the same tree
    assert len(sp["seconds"]["qsimdist"]) == len(sp["seconds"]["cotengra"]) == SPEC.repeats
    pairs = [b / a for a, b in zip(sp["seconds"]["qsimdist"], sp["seconds"]["cotengra"])]
    assert sp["speedup_median_of_pairwise"] == pytest.approx(statistics.median(pairs))
    assert sp["achieved_gflops"]["qsimdist"] == pytest.approx(
        sp["flops"] / statistics.median(sp["seconds"]["qsimdist"]) / 1e9)
    steps = sp["per_step"]
    assert len(steps) == sp["steps"] and all(s["seconds"] >= 0 for s in steps)
    assert sum(s["flops"] for s in steps) * sp["n_slices"] == pytest.approx(sp["flops"])

    # end to end: qsimdist's amplitude is the statevector's; quimb and Aer agree with it
    (e2e,) = r["end_to_end"]
    from qsimdist.bundled import bundled_circuit

    ref = _statevector(bundled_circuit("ghz_n5.qasm"))[0]
    assert complex(*e2e["amplitude"]) == pytest.approx(ref, abs=1e-6)
    assert {"qsimdist", "quimb", "qiskit-aer"} <= set(e2e["median_s"])
    assert all(v < 1e-5 for v in e2e["relative_difference"].values())
    assert e2e["qsimdist_route"]["qsimdist"] in ("statevector", "tensor-network")
    if "qsimdist (tensor network)" in e2e["median_s"]:  # the route forced where it is offered
        assert e2e["qsimdist_route"]["qsimdist (tensor network)"] == "tensor-network"
        assert "qsimdist (tensor network)" in e2e["relative_difference"]

    (pl,) = r["planning"]
    assert all(pl["replan_path_from_cache"]) and pl["same_cost_when_replanned"]
    assert pl["cold_path_from_cache"] is False
    (fa,) = r["first_amplitude"]
    assert set(fa["wall_s"]) == {"cold", "warm_caches"} and fa["bytecode"] is True

    # targets are the issue's, judged from the numbers above
    same = [t for t in r["targets"] if t["target"].startswith("same path")]
    assert same[0]["met"] == (sp["speedup_median_of_pairwise"] >= suite.TARGET_SAME_PATH)
    cold = [t for t in r["targets"] if t["target"].startswith("first amplitude")]
    assert cold[0]["measured"] == fa["wall_s"]["cold"]

    path = tmp_path / "b.json"
    suite.write_json(r, path)
    assert suite.load_json(path) == json.loads(json.dumps(r))
    assert any("rqc_3x4_m8" in line for line in suite.summary_lines(r))


def test_report_touches_only_the_marked_section(bench_result, tmp_path):
    before = "# Benchmarks\n\nhand-written ✓ text\r\nkept as is\n\n## 8. Benchmark command\n\n"
    after = "\n\n## 9. Someone else's section\n\ntrailing text without newline"
    md = tmp_path / "BENCHMARKS.md"
    md.write_bytes((before + report_md.BEGIN + "\nold body\n" + report_md.END + after).encode())
    out = tmp_path / "docs" / "bench"
    json_path = tmp_path / "quick.json"
    suite.write_json(bench_result, json_path)

    written = report_md.report_command(json_path, md, out)
    text = md.read_bytes().decode()
    assert text.startswith(before + report_md.BEGIN) and text.endswith(report_md.END + after)
    body = text[len(before + report_md.BEGIN):-len(report_md.END + after)]
    assert "old body" not in body
    sp = bench_result["same_path"][0]
    assert f"**{sp['speedup_median_of_pairwise']:.2f}**" in body
    assert "predicted" not in body or "E_P predicted" in body or "no" in body
    assert "docs/bench/steps_gflops.png" in body and "quick.json" in body
    assert {p.name for p in written} == {"steps_time_memory.png", "steps_gflops.png"}
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report_md.report_command(json_path, md, out)  # regenerating gives the same file
    assert md.read_bytes().decode() == text


def test_markers_are_appended_or_refused():
    b, e = report_md.BEGIN, report_md.END
    assert report_md.replace_section("abc", "X") == f"abc\n\n{b}\nX\n{e}\n"
    with pytest.raises(InvalidInputError, match="marker"):
        report_md.replace_section(f"{report_md.BEGIN}{report_md.BEGIN}{report_md.END}", "X")
    with pytest.raises(InvalidInputError, match="before"):
        report_md.replace_section(f"{report_md.END} {report_md.BEGIN}", "X")


def test_ep_plot_from_mpi_records(bench_result, tmp_path):
    r = json.loads(json.dumps(bench_result))
    r["mpi"] = [{"ranks": 2, "E_P_measured": 1.8, "E_P_predicted": 2.1, "R_P": 2.6,
                 "E_P_over_R_P": 0.69, "comm_share_measured": 0.1,
                 "measured_seconds": {"slice_only": 2.0, "distributed": 1.1},
                 "predicted_seconds": {"slice_only": 2.5, "distributed": 1.2},
                 "rel_diff_between_results": 1e-7, "command": "mpiexec -n 2 ..."}]
    images = report_md.make_plots(r, tmp_path)
    assert images["ep"].read_bytes()[:4] == b"\x89PNG"
    body = report_md.render(r, images, tmp_path)
    assert "| 2 | **1.80** | 2.10 | 2.60 | 0.69 | 10% |" in body


def test_bad_suite_exits_2_with_one_line(capsys):
    assert main(["run", "--suite", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["benchmarks: error: unknown suite 'nope'; valid: tiny, quick, full"]


PRIMITIVES_SPEC = dataclasses.replace(SPEC, primitives=("rc6",), primitive_shots=200,
                                      primitive_repeats=2, deep_amplitude=("q24",))


#: the keys summary_lines and report_md.render read, with no section run
_EMPTY_RESULT = {"suite": "tiny", "date": "now", "machine": {"cpu_model": "cpu", "cores": 1},
                 "same_path": [], "end_to_end": [], "mpi": [], "planning": [],
                 "first_amplitude": [], "skipped": []}


@pytest.fixture(scope="module")
def primitives_result(tmp_path_factory) -> dict:
    data = tmp_path_factory.mktemp("no-data-primitives")
    return suite.run_suite(PRIMITIVES_SPEC, data=data, quiet=True, only=("primitives",))


def test_primitives_section(primitives_result, tmp_path):
    r = primitives_result
    assert not r["skipped"] and not r["same_path"] and not r["deep_amplitude"]
    rows = {x["primitive"]: x for x in r["primitives"]}
    assert len(r["primitives"]) == 2 and set(rows) == {"sampler", "estimator"}
    for x in rows.values():
        assert x["case"] == "rc6" and x["shots"] == 200
        assert x["qsimdist"]["seconds"] > 0 and x["aer"]["seconds"] > 0, x
        assert x["ratio"] == pytest.approx(x["aer"]["seconds"] / x["qsimdist"]["seconds"])
        for side in ("qsimdist", "aer"):  # two alternating calls, their median compared
            runs = x[side]["runs_seconds"]
            assert len(runs) == 2 and x[side]["seconds"] == pytest.approx(statistics.median(runs))
        assert "marginal" not in x["qsimdist"] and "marginal" not in x["aer"]
    assert rows["estimator"]["max_abs_diff"] < 1e-6
    assert rows["sampler"]["max_z"] < 6

    lines = suite.summary_lines(r)
    assert sum(line.startswith("primitive ") and "rc6" in line for line in lines) == 2
    (target,) = [t for t in r["targets"] if t["target"].startswith("primitives")]
    ratios = [x["ratio"] for x in r["primitives"]]
    assert target["measured"] == pytest.approx(statistics.median(ratios))
    assert target["met"] == (statistics.median(ratios) >= suite.TARGET_PRIMITIVES_MEDIAN
                             and min(ratios) >= suite.TARGET_PRIMITIVES_MIN)
    assert any(line.startswith("target     primitives vs Qiskit Aer") for line in lines)

    body = report_md.render(r, {}, tmp_path)
    assert "| sampler | rc6 |" in body and "| estimator | rc6 |" in body
    assert "--primitives estimator --cases rc6 --shots 200 --repeats 2" in body
    assert "deep circuits" not in body


def test_primitive_jobs_run_wide_cases_for_their_primitive_only():
    spec = dataclasses.replace(SPEC, primitives=("rc6", "ghz40", "brick50"))
    assert suite.primitive_jobs(spec) == [("sampler", "rc6"), ("sampler", "ghz40"),
                                          ("estimator", "rc6"), ("estimator", "brick50")]
    full = suite.SUITES["full"]
    assert "ghz40" in full.primitives and "brick50" in full.primitives
    assert full.deep_amplitude == ("q24",) and suite.SUITES["tiny"].primitives == ()


def test_primitives_without_aer_say_so(monkeypatch):
    monkeypatch.setattr(suite, "_importable", lambda module: module != "qiskit_aer")
    spec = dataclasses.replace(SPEC, primitive_shots=50)
    row = suite.primitives_comparison("sampler", "rc6", spec)
    assert row["qsimdist"]["seconds"] > 0 and "ratio" not in row
    assert "qiskit-aer is not installed" in row["aer"]["error"]
    assert any("qiskit-aer is not installed" in line
               for line in suite.summary_lines(dict(_EMPTY_RESULT, primitives=[row])))


def test_deep_amplitude_skips_an_absent_circuit(tmp_path):
    r = suite.run_suite(PRIMITIVES_SPEC, data=tmp_path, quiet=True, only=("deep_amplitude",))
    assert r["deep_amplitude"] == [] and r["primitives"] == []
    (skip,) = r["skipped"]
    assert skip["section"] == "deep_amplitude" and skip["case"] == "q24"
    assert str(tmp_path / "circuits" / "qsim" / "circuit_q24.qsim") in skip["reason"]
    assert any("circuit_q24.qsim" in line for line in suite.summary_lines(r))


def test_deep_amplitude_rows(tmp_path, monkeypatch):
    folder = tmp_path / "circuits" / "qsim"
    folder.mkdir(parents=True)
    gates = ["0 h 0", "0 h 1", "0 h 2", "0 h 3", "1 cz 0 1", "1 cz 2 3", "2 t 0", "2 x_1_2 1",
             "2 y_1_2 2", "2 t 3", "3 cz 1 2", "4 h 0", "4 t 2", "4 y_1_2 3"]
    (folder / "circuit_q4.qsim").write_text("4\n" + "\n".join(gates) + "\n")
    monkeypatch.setattr(suite, "_importable", lambda module: module != "qsimcirq")
    rec = suite.deep_amplitude("q4", tmp_path)
    from benchmarks import statevector

    assert [x["contender"] for x in rec["rows"]] == list(statevector.CONTENDERS)
    assert rec["n_qubits"] == 4 and all(x["circuit"] == "q4" for x in rec["rows"])
    by = {x["contender"]: x for x in rec["rows"]}
    assert "qsimcirq is not installed" in by["qsimcirq"]["error"]
    amps = [complex(*x["amp"]) for x in rec["rows"] if "amp" in x]
    assert len(amps) == 4 and all(x["seconds"] > 0 for x in rec["rows"] if "amp" in x)
    assert max(abs(a - amps[0]) for a in amps) < 1e-5 and abs(amps[0]) > 1e-3
    assert all(x["rel_diff_to_complex128"] < 1e-5 for x in rec["rows"] if "amp" in x)
    result = dict(_EMPTY_RESULT, deep_amplitude=[rec], settings={})
    lines = [line for line in suite.summary_lines(result) if line.startswith("deep amp")]
    assert len(lines) == 5 and "qsimcirq is not installed" in lines[3]
    body = report_md.render(dict(result, command="c", versions={}, settings={
        "warmup_rounds": 1, "repeats": 1, "search_repeats": 1}), {}, tmp_path)
    assert "| q4 | Qiskit Aer |" in body and "--circuits q4" in body


def test_bad_sections_exit_2_with_one_line(capsys):
    assert main(["run", "--suite", "tiny", "--sections", "primitives,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0] and err[0].startswith("benchmarks: error: ")
    assert err[0].endswith("valid: " + ", ".join(suite.SECTIONS))


def test_sections_option_is_passed_through(monkeypatch):
    seen = {}
    monkeypatch.setattr(suite, "bench_command", lambda *a, **k: seen.update(k))
    assert main(["run", "--suite", "tiny", "--sections", "primitives, deep_amplitude",
                 "--sections", "mpi"]) == 0
    assert seen["only"] == ("primitives", "deep_amplitude", "mpi")


def test_bench_report_refuses_other_json(capsys, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "qsimdist.plan"}')
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a qsimdist bench result" in err[0]


def test_gauss_matmul_against_complex128():
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((40, 30)) + 1j * rng.standard_normal((40, 30))).astype(np.complex64)
    b = (rng.standard_normal((30, 20)) + 1j * rng.standard_normal((30, 20))).astype(np.complex64)
    ref = a.astype(np.complex128) @ b.astype(np.complex128)
    got = gpu.gauss(a, b, np)
    assert got.dtype == np.complex64
    assert gpu.relative_error(got, ref, np) < 1e-5
    with pytest.raises(TypeError):
        gpu.gauss(a.astype(np.complex128), b, np)


def test_gemm_variants_report_errors():
    g = gpu.gemm_variants(np, 48, repeats=1)
    v = g["variants"]
    assert v["complex64"]["rel_error_vs_complex128"] < 1e-5
    assert 0 < v["3M (3 real GEMMs)"]["rel_error_vs_complex64"] < 1e-4
    assert "TF32" in g["skipped"]


@pytest.mark.skipif(gpu.gpu_reason() is None, reason="a GPU is present")
def test_gpu_script_without_gpu_says_so():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no GPU to measure" in proc.stderr


@pytest.mark.slow
def test_gpu_script_dry_run(tmp_path):
    out = tmp_path / "gpu.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--dry-run", "--gemm-n",
                           "64", "--repeats", "1", "--search-repeats", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert r["dry_run"] and len(r["same_path"]) == 2 and not r["skipped"]
    assert all(c["relative_difference"] < 1e-4 for c in r["same_path"])
    lines = proc.stdout.strip().splitlines()
    header = [line for line in lines if line.startswith("qsimdist GPU check")]
    assert len(header) == 1 and "CPU DRY RUN" in header[0]
    # per case: qsimdist, cotengra, then one line per GEMM mode (3m on numpy)
    assert any("cotengra" in line and "median pairwise" in line for line in lines)
    assert "gemm=3m" in lines[-1] and "vs complex GEMM" in lines[-1]
    assert all(set(c["gemm_modes"]) == {"3m"} for c in r["same_path"])


def test_gemm_modes_bench(tmp_path, monkeypatch, capsys):
    """The GEMM-mode bench: every mode's time, the steps it changed and its errors."""
    from benchmarks import gemm_modes
    from qsimdist.executors import local

    monkeypatch.setattr(local, "GAUSS_MIN_EXTENT", 2)  # small network: let 3M run somewhere
    r = gemm_modes.measure("small", dict(n=8, reg=3, d_min=4, d_max=8, seed=1), 0, "numpy",
                           repeats=1, search_repeats=2)
    assert set(r["modes"]) == {"complex", "3m"}  # no TF32 on numpy
    c, g = r["modes"]["complex"], r["modes"]["3m"]
    assert c["rel_error_vs_complex64"] == 0 and c["steps_changed"] == 0
    assert 0 < g["steps_changed"] <= r["steps"]
    assert 0 < g["rel_error_vs_complex64"] < 1e-4 and g["rel_error_vs_complex128"] < 1e-4
    assert any("| small | 3m |" in line for line in gemm_modes.table([r]))
    assert gemm_modes.main(["--repeats", "0"]) == 2
    assert "--repeats must be >= 1" in capsys.readouterr().err
    out = tmp_path / "gm.json"
    from qsimdist.bundled import bundled_circuit

    assert gemm_modes.main([str(bundled_circuit("rqc_3x4_m8.qasm")), "--repeats", "1",
                            "--search-repeats", "2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "benchmarks.gemm_modes" and doc["results"][0]["modes"]


@pytest.mark.slow
def test_batches_bench_row_compares_the_grouping_with_one_by_one(shared_data):
    """bench.batches: the issue's n30 pair at 64MiB, batched and one by one in fresh
    processes; the row holds both sides, equal amplitudes, the grouping and its price."""
    from benchmarks import batches

    row = batches.compare(shared_data, "pair", "64MiB", repeats=1)
    for side in ("batched", "one_by_one"):
        assert row[side]["seconds"] > 0 and row[side]["contractions"] >= 1, row
        assert len(row[side]["runs_seconds"]) == 1
    assert row["max_rel_diff"] < 1e-4
    assert row["ratio"] == pytest.approx(row["batched"]["seconds"]
                                         / row["one_by_one"]["seconds"])
    grouping = row["batched"]["batching"]
    assert grouping["bitstrings"] == 2 and grouping["contractions"] == row["batched"][
        "contractions"]
    assert row["one_by_one"]["batching"] is None
    line = batches._line(row)
    assert line.startswith("| the issue's pair | 64MiB |") and "contractions" in line


def test_batches_bench_refuses_a_missing_data_folder(tmp_path, capsys):
    from benchmarks import batches

    assert batches.main(["--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pass --data" in err[0]
    with pytest.raises(ValueError, match="valid: pair, random1000"):
        batches.compare(tmp_path, "nope", "default")


@pytest.mark.parametrize("module", ["batches", "primitives_vs_aer"])
def test_bench_repeats_below_one_are_refused_with_one_line(module, capsys):
    import importlib

    mod = importlib.import_module(f"benchmarks.{module}")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--repeats", "0"])
    assert exc.value.code == 2
    assert "--repeats: must be an integer >= 1, not '0'" in capsys.readouterr().err
