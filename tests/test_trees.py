"""Trees as data: ``qsimdist plan --tree`` and ``qsimdist search``.

A cotengra ``ContractionTree`` (pickled, sliced) and qsimdist's own saved tree
both round-trip: the plan made along them has exactly their path and slicing,
and its amplitude equals Qiskit's statevector. The search writes its budget
and score history, resumes, and refuses another target's file.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import cotengra as ctg
import numpy as np
import pytest
from qiskit import qasm2
from qiskit.quantum_info import Statevector

from qsimdist.api import simplified_network
from qsimdist.cli import main
from qsimdist.commands.search import parse_budget
from qsimdist.errors import InvalidInputError, PlanFormatError
from qsimdist.planner.plan import Plan
from qsimdist.planner.trees import (
    Tree,
    from_cotengra,
    linear_to_ssa,
    load_tree,
    save_tree,
    to_cotengra,
)

ROOT = Path(__file__).resolve().parent.parent
CIRCUIT = ROOT / "circuits" / "rqc_3x4_m8.qasm"
BITS = "010011010110"


def cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error_line(rc, err, *words):
    """Exit code 2 and one stderr line (under --json: one JSON object) holding every word."""
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    if line.startswith("{"):
        obj = json.loads(line)
        assert obj["exit_code"] == 2, err
        line = obj["error"]["message"]
    else:
        assert line.startswith("qsimdist: error:"), err
    for w in words:
        assert w in line, (w, line)


def reference(bits: str) -> complex:
    sv = Statevector(qasm2.load(str(CIRCUIT))).data
    return complex(sv[int(bits, 2)])


@pytest.fixture(scope="module")
def net():
    return simplified_network(str(CIRCUIT), bitstrings=BITS, memory_limit="none")


def sliced_cotengra_tree(net, seed=3):
    inputs, output, size_dict, _ = net.symbolic()
    opt = ctg.HyperOptimizer(methods=["greedy"], max_repeats=4, seed=seed, progbar=False)
    tree = opt.search(inputs, output, size_dict)
    return tree.slice(target_size=max(2, tree.max_size() // 8), allow_outer=False)


def amplitude_of_plan(capsys, path: Path) -> complex:
    rc, out, err = cli(capsys, "run", path, "--json")
    assert rc == 0, err
    obj = json.loads(out)
    (entry,) = obj["amplitudes"]
    assert entry["bitstring"] == BITS
    return complex(entry["re"], entry["im"])


def test_cotengra_tree_round_trips_through_plan_tree(tmp_path, capsys, net):
    ctree = sliced_cotengra_tree(net)
    assert ctree.sliced_inds, "the test needs a sliced tree"
    pkl = tmp_path / "tree.pkl"
    pkl.write_bytes(pickle.dumps(ctree))
    out = tmp_path / "plan.json"
    rc, _, err = cli(capsys, "plan", CIRCUIT, "-b", BITS, "--tree", pkl, "-o", out, "--json")
    assert rc == 0, err
    plan = Plan.load(out)
    assert plan.path == [tuple(p) for p in ctree.get_ssa_path()]
    # the same sliced indices, by their symbol in Network.symbolic()
    _, _, _, sym = plan.network.symbolic()
    names = plan.network.canonical_names()
    by_sym = {sym[k]: names[k] for k in range(len(names))}
    assert sorted(plan.sliced) == sorted(by_sym[s] for s in ctree.sliced_inds)
    assert plan.stats.n_slices == ctree.multiplicity
    assert amplitude_of_plan(capsys, out) == pytest.approx(reference(BITS), abs=1e-5)
    # and back: the plan's tree as a cotengra tree is the tree given
    back = to_cotengra(net, Tree(plan.path, plan.sliced))
    assert back.get_ssa_path() == ctree.get_ssa_path()
    assert set(back.sliced_inds) == set(ctree.sliced_inds)


def test_own_tree_round_trips(tmp_path, capsys, net):
    tree = from_cotengra(net, sliced_cotengra_tree(net, seed=5))
    path = save_tree(tmp_path / "t.json", net, Tree(tree.ssa_path, tree.sliced, {"k": 1}))
    again = load_tree(path, net)
    assert again.ssa_path == tree.ssa_path and sorted(again.sliced) == sorted(tree.sliced)
    assert again.meta == {"k": 1}
    out = tmp_path / "plan.json"
    rc, _, err = cli(capsys, "plan", CIRCUIT, "-b", BITS, "--tree", path, "-o", out, "--json")
    assert rc == 0, err
    plan = Plan.load(out)
    assert plan.path == tree.ssa_path and sorted(plan.sliced) == sorted(tree.sliced)
    assert amplitude_of_plan(capsys, out) == pytest.approx(reference(BITS), abs=1e-5)
    # a saved plan is a tree too
    assert load_tree(out, net).ssa_path == tree.ssa_path


def test_paths_as_json_lists(tmp_path, net):
    tree = from_cotengra(net, sliced_cotengra_tree(net))
    ssa = tmp_path / "ssa.json"
    ssa.write_text(json.dumps([list(p) for p in tree.ssa_path]))
    assert load_tree(ssa, net).ssa_path == tree.ssa_path
    ctree = to_cotengra(net, Tree(tree.ssa_path, []))
    lin = tmp_path / "linear.json"
    lin.write_text(json.dumps({"path": [list(p) for p in ctree.get_path()]}))
    assert load_tree(lin, net).ssa_path == [tuple(p) for p in ctree.get_ssa_path()]
    assert linear_to_ssa([[0, 1], [0, 1]], 3, "x") == [(0, 1), (2, 3)]


def test_bad_trees_are_one_line(tmp_path, capsys, net):
    other = simplified_network(str(ROOT / "circuits" / "ghz_n12.qasm"), memory_limit="none")
    wrong = save_tree(tmp_path / "wrong.json", other,
                      from_cotengra(other, sliced_cotengra_tree(other)))
    rc, _, err = cli(capsys, "plan", CIRCUIT, "-b", BITS, "--tree", wrong)
    one_error_line(rc, err, "another network")
    short = tmp_path / "short.json"
    short.write_text("[[0, 1]]")
    rc, _, err = cli(capsys, "plan", CIRCUIT, "-b", BITS, "--tree", short)
    one_error_line(rc, err, "steps")
    reuse = tmp_path / "reuse.json"
    n = net.num_tensors
    reuse.write_text(json.dumps([[0, 1], [0, 2]] + [[k, k + 1] for k in range(3, n)]))
    with pytest.raises(PlanFormatError, match="not used before"):
        load_tree(reuse, net)
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(pickle.dumps({"not": "a tree"}))
    rc, _, err = cli(capsys, "plan", CIRCUIT, "-b", BITS, "--tree", junk)
    one_error_line(rc, err, "ContractionTree")
    rc, _, err = cli(capsys, "plan", CIRCUIT, "-b", BITS, "--tree", tmp_path / "none.json")
    one_error_line(rc, err, "no such tree file")


def test_search_writes_history_and_resumes(tmp_path, capsys, net):
    out = tmp_path / "search.json"
    args = ["search", CIRCUIT, "-b", BITS, "--profile", "local-cpu", "--devices", "1",
            "--output", out, "--json"]
    rc, stdout, err = cli(capsys, *args, "--budget", "4")
    assert rc == 0, err
    first = json.loads(stdout)
    assert first["budget_seconds"] == 4.0 and first["spent_seconds"] > 0
    assert first["history"][0]["what"] == "start" and first["history"][-1]["what"] == "end"
    scores = [h["predicted_seconds"] for h in first["history"]]
    assert scores == sorted(scores, reverse=True)  # the best only improves
    assert "round" in err and "this round's tree: " in err  # a line per round
    # the file is a tree: plan along it
    tree = load_tree(out, net)
    assert tree.meta["search"]["score"] == first["score"]
    # resuming counts the time already spent and keeps the history
    rc, stdout, err = cli(capsys, *args, "--budget", "8", "--narrower", "2")
    assert rc == 0, err
    second = json.loads(stdout)
    assert second["spent_seconds"] >= first["spent_seconds"]
    assert second["history"][:len(first["history"])] == first["history"]
    assert any(h["what"] == "resumed" for h in second["history"])
    # every round's candidate is kept with the width offset it was annealed at
    assert second["tries"][:len(first["tries"])] == first["tries"]
    assert len(second["tries"]) == second["rounds"]
    for t in second["tries"]:
        assert t["anneal_offset"] in (0, 1, 2) and isinstance(t["better"], bool)
    assert all(t["anneal_offset"] == 0 for t in first["tries"])  # at the width by default
    assert second["narrower"] == 2
    rc, _, err = cli(capsys, *args, "--budget", "9", "--narrower", "9")
    one_error_line(rc, err, "--narrower must be 0..8")
    assert second["score"]["predicted_seconds"] <= first["score"]["predicted_seconds"]
    # another target's file is refused
    rc, _, err = cli(capsys, "search", CIRCUIT, "-b", BITS, "--profile", "local-cpu",
                     "--devices", "2", "--output", out, "--budget", "2")
    one_error_line(rc, err, "holds a search for")


def test_anneal_width_odds_follow_the_rounds_that_won(net):
    """Offsets that produced better trees are drawn more often; untried ones stay possible."""
    from qsimdist.hardware import load_profile
    from qsimdist.planner.search import Score, SearchState, Target

    st = SearchState(Tree([], []), Score(1.0, 1.0, 1.0, 1, 1, 10.0),
                     Target(load_profile("local-cpu"), 1), 10.0)
    assert st.offset_odds() == {0: 0.5}
    assert set(st.offset_odds(3).values()) == {0.5}
    st.tries = [{"anneal_offset": 2, "better": True}] * 3 + [{"anneal_offset": 0,
                                                             "better": False}] * 3
    odds = st.offset_odds(3)
    assert odds[2] == 0.8 and odds[0] == 0.2 and odds[1] == odds[3] == 0.5


def test_budget_parsing():
    assert parse_budget("90") == 90.0 and parse_budget("30m") == 1800.0
    assert parse_budget("1.5h") == 5400.0 and parse_budget("20s") == 20.0
    for bad in ("", "0", "-3", "ten", "5d"):
        with pytest.raises(InvalidInputError):
            parse_budget(bad)


def test_search_scores_the_target(net):
    """The score is the dp schedule's predicted seconds, smaller with more devices' memory
    only where distribution pays: here both are finite and the one-device score fits."""
    from qsimdist.hardware import load_profile
    from qsimdist.planner.search import Target, score_tree

    tree = from_cotengra(net, sliced_cotengra_tree(net))
    one, sch, _ = score_tree(net, tree, Target(load_profile("dgx-h100"), 1))
    assert np.isfinite(one.seconds) and one.group_size == 1
    assert one.peak_bytes_per_device <= load_profile("dgx-h100").usable_memory
    assert one.flops_executed == sch.predicted.flops_executed


def test_search_for_a_per_device_memory(tmp_path, capsys):
    """--memory-limit replaces the profile's memory per device: the best schedule fits it,
    and a resumed search must name the same memory."""
    out = tmp_path / "small.json"
    args = ["search", CIRCUIT, "-b", BITS, "--profile", "local-cpu", "--devices", "2",
            "--output", out, "--memory-limit", "4KiB"]
    rc, stdout, err = cli(capsys, *args, "--budget", "3", "--json")
    assert rc == 0, err
    got = json.loads(stdout)
    assert got["target"]["usable_memory_per_device"] == 4096
    assert 0 < got["score"]["peak_bytes_per_device"] <= 4096
    rc, _, err = cli(capsys, *args[:-1], "8KiB", "--budget", "4")
    one_error_line(rc, err, "holds a search for")
    rc, _, err = cli(capsys, *args[:-1], "none", "--budget", "4")
    one_error_line(rc, err, "needs a size")


def test_search_starts_from_the_greedy_tree_or_the_hyper_optimiser(tmp_path, capsys, net):
    """Without --tree a search starts from cotengra's greedy tree (the default) or, with
    --start hyper, from its hyper-optimiser; the saved tree says which."""
    for kind, origin in ((None, "cotengra greedy"), ("hyper", "cotengra hyper-optimiser")):
        out = tmp_path / f"{kind}.json"
        extra = [] if kind is None else ["--start", kind]
        rc, stdout, err = cli(capsys, "search", CIRCUIT, "-b", BITS, "--profile", "local-cpu",
                              "--devices", "1", "--output", out, "--budget", "3", *extra)
        assert rc == 0, err
        assert origin in load_tree(out, net).meta["from"]
    rc, _, err = cli(capsys, "search", CIRCUIT, "-b", BITS, "--profile", "local-cpu",
                     "--output", tmp_path / "x.json", "--budget", "3", "--start", "kahypar")
    one_error_line(rc, err, "greedy, hyper", "'kahypar'")
    assert not (tmp_path / "x.json").exists()
