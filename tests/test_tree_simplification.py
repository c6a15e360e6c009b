"""``plan --tree`` plans on the network a tree was made for, however it was simplified.

qsimdist's own simplification passes and quimb's give equal networks of different
structure (rqc_4x5_m12: 78 tensors either way, two structure hashes). A tree file
written by the search records how its network was simplified, and is planned on
that network; a file without the record (the shipped n60m24 trees, searched on
quimb's networks) is tried on quimb's network where the default one is not its
network; a tree of another network is refused with one line naming every hash tried.
"""

from __future__ import annotations

import json
import logging

import cotengra as ctg
import numpy as np
import pytest

from qsimdist import api
from qsimdist.bundled import bundled_circuit
from qsimdist.cli import main
from qsimdist.errors import PlanFormatError, QsimdistError
from qsimdist.hardware import load_profile
from qsimdist.planner.plan import Plan
from qsimdist.planner.search import Target, search
from qsimdist.planner.trees import (
    Simplification,
    Tree,
    TreeNetworkError,
    load_tree,
    save_tree,
)

CIRCUIT = str(bundled_circuit("rqc_4x5_m12.qsim"))
OTHER = str(bundled_circuit("rqc_3x4_m8.qsim"))


def cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def nets():
    """(the default network, quimb's network) of CIRCUIT, as ``plan --profile`` builds them."""
    own = api.simplified_network(CIRCUIT, memory_limit="none")
    by_quimb = api.simplified_network(CIRCUIT, memory_limit="none", simplify_engine="quimb")
    # the premise: the same circuit, two structures (otherwise nothing here is tested)
    assert own.structure_hash() != by_quimb.structure_hash()
    assert own.num_tensors > 2 and by_quimb.num_tensors > 2
    return own, by_quimb


def greedy_tree(net) -> Tree:
    inputs, output, size_dict, _ = net.symbolic()
    t = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    return Tree([tuple(int(x) for x in p) for p in t.get_ssa_path()], [], {"from": "test"})


def unrecorded_quimb_tree(tmp_path, nets):
    """A tree file like the shipped ones: made on quimb's network, no simplification kept."""
    _, by_quimb = nets
    tree = greedy_tree(by_quimb)
    path = save_tree(tmp_path / "quimb_tree.json", by_quimb, tree)
    assert "simplify" not in json.loads(path.read_text())["network"]
    return path, tree


def test_an_unrecorded_quimb_tree_loads_through_the_cli_and_api(tmp_path, capsys, caplog, nets):
    own, by_quimb = nets
    path, tree = unrecorded_quimb_tree(tmp_path, nets)
    with pytest.raises(TreeNetworkError):  # the default network alone refuses it
        load_tree(path, own)
    out = tmp_path / "plan.json"
    rc, _, err = cli(capsys, "-v", "plan", CIRCUIT, "--tree", path, "--profile", "local-cpu",
                     "--devices", "1", "-o", out, "--json")
    assert rc == 0, err
    assert "quimb's passes" in err and "INFO qsimdist.api" in err  # one INFO line says so
    saved = Plan.load(out)
    assert saved.network.structure_hash() == by_quimb.structure_hash()
    assert saved.path == tree.ssa_path
    with caplog.at_level(logging.INFO, logger="qsimdist.api"):
        p = api.plan(CIRCUIT, tree=path, memory_limit="none")
    assert p.network.structure_hash() == by_quimb.structure_hash()
    assert p.path == tree.ssa_path
    assert any("quimb" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    # the network quimb's passes make is the circuit's: the same amplitude
    want = api.amplitude(CIRCUIT, "0" * 20)
    assert complex(np.asarray(p.execute()).reshape(-1)[0]) == pytest.approx(want, abs=1e-5)


def test_a_default_tree_takes_no_detour(tmp_path, caplog, nets):
    own, _ = nets
    path = save_tree(tmp_path / "own.json", own, greedy_tree(own))
    with caplog.at_level(logging.INFO, logger="qsimdist.api"):
        p = api.plan(CIRCUIT, tree=path, memory_limit="none")
    assert p.network.structure_hash() == own.structure_hash()
    assert not any("quimb" in r.getMessage() for r in caplog.records)


def test_the_search_records_its_simplification_and_it_decides(tmp_path, capsys, nets):
    own, by_quimb = nets
    out = tmp_path / "searched.json"
    rc, _, err = cli(capsys, "search", CIRCUIT, "--profile", "local-cpu", "--devices", "1",
                     "--output", out, "--budget", "1")
    assert rc == 0, err
    d = json.loads(out.read_text())
    assert d["version"] == 1 and d["network"]["structure_hash"] == own.structure_hash()
    assert d["network"]["simplify"] == {"engine": "qsimdist", "sequence": "ADCRS"}
    assert load_tree(out, own).simplification == Simplification("qsimdist", "ADCRS")
    rc, _, err = cli(capsys, "plan", CIRCUIT, "--tree", out, "--json")
    assert rc == 0, err

    # the Python search on quimb's network records quimb, kept when the search resumes
    target = Target(load_profile("local-cpu"), 1)
    q = tmp_path / "quimb_searched.json"
    search(by_quimb, target, 0.5, out=q, start=greedy_tree(by_quimb), round_seconds=0.2,
           simplification=Simplification("quimb", "ADCRS"))
    search(by_quimb, target, 1.0, out=q, round_seconds=0.2)  # resumed, nothing passed
    assert json.loads(q.read_text())["network"]["simplify"] == {"engine": "quimb",
                                                                "sequence": "ADCRS"}
    p = api.plan(CIRCUIT, tree=q, memory_limit="none")
    assert p.network.structure_hash() == by_quimb.structure_hash()
    # a resumed CLI search keeps planning on the network its file records
    rc, _, err = cli(capsys, "search", CIRCUIT, "--profile", "local-cpu", "--devices", "1",
                     "--output", q, "--budget", "1.5")
    assert rc == 0, err
    assert json.loads(q.read_text())["network"]["simplify"]["engine"] == "quimb"

    # the record decides: no detour to another engine's network when it names one
    d = json.loads(q.read_text())
    d["network"]["simplify"]["engine"] = "qsimdist"
    lying = tmp_path / "lying.json"
    lying.write_text(json.dumps(d))
    rc, _, err = cli(capsys, "plan", CIRCUIT, "--tree", lying)
    assert rc == 2 and err.startswith("qsimdist: error:") and len(err.splitlines()) == 1, err
    assert "another network" in err
    d["network"]["simplify"]["engine"] = "numpy"
    lying.write_text(json.dumps(d))
    rc, _, err = cli(capsys, "plan", CIRCUIT, "--tree", lying)
    assert rc == 2 and len(err.splitlines()) == 1 and "network.simplify.engine" in err, err


def test_a_tree_of_another_network_is_one_line_naming_both_hashes(tmp_path, capsys, nets):
    own, by_quimb = nets
    other = api.simplified_network(OTHER, memory_limit="16MiB")  # simplified: 25 tensors
    path = save_tree(tmp_path / "other.json", other, greedy_tree(other))
    rc, out, err = cli(capsys, "plan", CIRCUIT, "--tree", path, "--profile", "local-cpu")
    assert rc == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("qsimdist: error:"), err
    for h in (other.structure_hash(), own.structure_hash(), by_quimb.structure_hash()):
        assert h[:12] in lines[0], (h[:12], lines[0])
    with pytest.raises(TreeNetworkError) as info:
        api.plan(CIRCUIT, tree=path)
    assert isinstance(info.value, PlanFormatError) and isinstance(info.value, QsimdistError)
