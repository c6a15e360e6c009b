"""``python -m benchmarks.external``: the three external harnesses in one command."""

from __future__ import annotations

import json

from benchmarks.external import main, summary


def test_dry_run_lists_each_harness_with_its_options(capsys):
    assert main(["--dry-run", "--data", "D", "--out", "O", "--mqt-sizes", "5", "10",
                 "--mqt-only", "qft", "--observables", "W10", "--theta", "1.2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    ki, mqt, rev = lines
    assert "benchmarks.kicked_ising --data D --theta 1.2 --observables W10 --sum-z" in ki
    assert "--json O/kicked_ising.json" in ki
    assert "benchmarks.mqt_bench --sizes 5 10 --levels indep alg" in mqt
    assert mqt.endswith("--only qft") and "--aer-timeout 300" in mqt
    assert "benchmarks.revlib --data D --rounds 3 --aer-threads 1" in rev
    assert main(["--dry-run", "--skip", "revlib", "mqt_bench", "--no-sum-z"]) == 0
    only = capsys.readouterr().out.splitlines()
    assert len(only) == 1 and "benchmarks.kicked_ising" in only[0]
    assert "--sum-z" not in only[0]


def test_a_missing_data_folder_is_one_line(tmp_path, capsys):
    rc = main(["--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--skip kicked_ising revlib" in err[0]
    assert not (tmp_path / "o").exists()


def test_summary_gathers_the_harnesses_results(tmp_path):
    (tmp_path / "kicked_ising.json").write_text(json.dumps([
        {"observable": "W10", "theta": 0.8, "abs_error": 4.1e-7, "ratio": 6.125,
         "qsimdist": {"value": -0.007989414, "seconds": 0.3},
         "quimb": {"value": -0.007989414, "seconds": 1.8375}}]))
    rows = [{"size": 5, "primitive": "sampler", "qsimdist_s": s, "aer_s": 1.0, "ok": True}
            for s in (0.2, 0.4, 0.9)]
    rows += [{"size": 5, "primitive": "estimator", "refused": "no"}]
    (tmp_path / "mqt_bench.json").write_text(json.dumps(rows))
    (tmp_path / "revlib.log").write_text("noise\n| file | ratio |\n|---|---|\n| a | 0.5 |\n")
    text = summary(tmp_path)
    assert "| W10 | 0.8 | -0.007989414 | 4.1e-07 | 0.30 | 1.84 | 6.1 |" in text
    assert "| 5 | - | 0.40 (3) | - | 1 |" in text
    assert "| a | 0.5 |" in text and "noise" not in text
