"""``python -m benchmarks.trees``: one row scored on the shipped lattice trees.

The rect workload is built here (no reference data needed); its searched
trees ship under ``benchmarks/plans/trees``. The row's ratios follow from
its own predicted totals, and with reuse each side's breakdown and order's
cost agree with each other and appear in the markdown.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.trees import markdown, row


@pytest.fixture(scope="module")
def rect_row():
    return row("rect", Path("/nonexistent"), "dgx-h100", 8, reuse=True)


def test_row_ratios_follow_from_its_totals(rect_row):
    r = rect_row
    assert r["trees"].startswith("searched")
    assert r["R_P_competitive"] == pytest.approx(
        10 ** (r["log10_flops_baseline_1"] - r["log10_flops_dp"]), rel=1e-9)
    assert r["E_P_competitive"] == pytest.approx(
        r["predicted_seconds_baseline_1"] / 8 / r["predicted_seconds_dp"], rel=1e-9)
    assert r["peak_bytes_per_device"] <= r["usable_memory"]


def test_breakdown_and_order_loss_agree_and_are_shown(rect_row):
    r = rect_row
    for side in ("P", "P=1"):
        b, o = r["log10_flops_breakdown"][side], r["order_loss"][side]
        assert b["kept"] == pytest.approx(
            r["log10_flops_dp" if side == "P" else "log10_flops_baseline_1"], abs=1e-9)
        gap = 10 ** b["every_kept"] - 10 ** b["once_per_value"]
        assert o["extra_flops"] == pytest.approx(gap, rel=1e-6, abs=1e-6 * 10 ** b["kept"])
        assert 0.0 <= o["fits_share"] <= 1.0 and len(o["steps"]) <= 3
    text = markdown([r])
    assert "| rect | dgx-h100 x 8 (reuse) | searched" in text
    # the own search CPU seconds of the trees each side used, beside the targets' budgets
    used = r["tree_used_cpu_seconds"]
    assert all(v is None or v > 0 for v in used.values())
    shown_used = ", ".join("—" if used[k] is None else f"{used[k]:.0f} s" for k in ("P", "P=1"))
    assert f"| {shown_used} | " in text
    assert "Where the executed FLOPs go" in text and "The order's cost" in text
    shown = [ln for ln in text.splitlines() if ln.startswith("| rect | dgx-h100 x 8 | ")]
    assert len(shown) == 2 + sum(1 for o in r["order_loss"].values() if o["steps"])
    top = r["order_loss"]["P"]["steps"]
    if top:
        assert f"10^{math.log10(r['order_loss']['P']['extra_flops']):.2f} | step {top[0]['step']}:" \
            in text


def test_search_for_another_target_starts_from_the_one_node_tree(tmp_path, monkeypatch):
    """``--search`` with ``--reuse`` for a target other than one DGX node starts from
    the tree searched for one DGX node, scores with reuse and writes ``..._reuse.json``."""
    import json
    import shutil

    from benchmarks import trees
    from qsimdist.hardware import load_profile
    from qsimdist.planner.search import Target, score_tree
    from qsimdist.planner.trees import load_tree

    node = trees.TREES / "rect_dgx-h100-8.json"
    monkeypatch.setattr(trees, "TREES", tmp_path)
    shutil.copy(node, tmp_path / node.name)
    trees.run_search("rect", Path("/nonexistent"), "dgx-h100", 2, 1.0, reuse=True, seed=7)
    out = tmp_path / "rect_dgx-h100-2_reuse.json"
    info = json.loads(out.read_text())["meta"]["search"]
    assert info["seed"] == 7 and info["target"]["devices"] == 2 and info["target"]["reuse"]
    net, _, _ = trees.network_and_start("rect", Path("/nonexistent"))
    start, _, _ = score_tree(net, load_tree(node, net), Target(load_profile("dgx-h100"), 2,
                                                               reuse=True))
    assert info["history"][0]["what"] == "start"
    assert info["history"][0]["predicted_seconds"] == pytest.approx(start.seconds, rel=1e-9)
