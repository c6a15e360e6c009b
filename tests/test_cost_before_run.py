"""The cost of a term before it runs: Python, the primitives and ``qsimdist expect --cost``.

What is priced is what runs: the engine makes the plans it would run and keeps
them, so the run afterwards makes no plan and executes exactly the FLOPs priced.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2
from qiskit.circuit import Parameter

import qsimdist
from qsimdist import expectation_values
from qsimdist.cli import main
from qsimdist.engine.expectation import ExpectationEngine
from qsimdist.errors import InvalidInputError, ProfileError
from qsimdist.hardware.costs import LOAD_SECONDS, STARTUP_SECONDS
from qsimdist.planner.estimate import plan_cost, predicted_local_seconds, seconds_text
from qsimdist.planner.path import PathOptions, find_path
from qsimdist.planner.plan import build_plan, make_plan


def brickwork(n: int, layers: int, theta=0.4) -> QuantumCircuit:
    qc = QuantumCircuit(n)
    for layer in range(layers):
        for q in range(n):
            qc.rx(theta, q)
            qc.rz(0.3 + 0.1 * q, q)
        for q in range(layer % 2, n - 1, 2):
            qc.rzz(0.7, q, q + 1)
    return qc


def label(n: int, ops: dict[int, str]) -> str:
    return "".join(ops.get(q, "I") for q in reversed(range(n)))


N = 40
LABELS = [label(N, {20: "Z"}), label(N, {10: "X", 11: "Y", 12: "Z"}), "I" * N]


def test_priced_flops_are_the_executed_flops_and_the_run_plans_nothing():
    qc = brickwork(N, 6)
    engine = ExpectationEngine(memory_limit="256MiB")
    costs = qsimdist.expectation_costs(qc, LABELS, engine=engine)
    assert [c.method for c in costs] == ["doubled", "doubled", "trivial"]
    assert engine.stats.plans_made == 0 and engine.stats.flops == 0  # left as they were
    for c in costs[:2]:
        k = c.contraction
        assert k.flops > 0 and k.slices >= 1 and k.steps > 0
        assert 0 < k.largest_intermediate_bytes <= k.peak_bytes
        # the contraction's time, plus this process's first load of the compiled kernels
        # on the first term that runs them, where they are not loaded yet
        assert 0 < k.predicted_seconds <= c.predicted_seconds < 60
        assert c.predicted_seconds - k.predicted_seconds in (0.0, STARTUP_SECONDS, LOAD_SECONDS)
    assert costs[2].contraction is None and costs[2].predicted_seconds == 0
    values = expectation_values(qc, LABELS, engine=engine)
    assert engine.stats.plans_made == 0 and engine.stats.plans_reused == 2
    assert engine.stats.flops == sum(c.contraction.flops for c in costs[:2])
    fresh = expectation_values(qc, LABELS, memory_limit="256MiB")
    np.testing.assert_allclose(values, fresh, atol=1e-12)


def test_a_fresh_process_prices_the_first_load_of_the_compiled_kernels():
    # in a fresh process the first contraction also imports numba and reads the kernels'
    # cached machine code (~0.7 s): the first term that runs them carries it, once
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from test_cost_before_run import N, LABELS, brickwork\n"
        "import qsimdist\n"
        "from qsimdist.engine.expectation import ExpectationEngine\n"
        # 16 layers: both terms past the FLOPs from which the compiled kernels run
        "qc = brickwork(N, 16); engine = ExpectationEngine(memory_limit='256MiB')\n"
        "cold = qsimdist.expectation_costs(qc, LABELS, engine=engine)\n"
        "qsimdist.expectation_values(qc, LABELS, engine=engine)\n"
        "warm = qsimdist.expectation_costs(qc, LABELS, engine=engine)\n"
        "print([c.predicted_seconds - (c.contraction.predicted_seconds if c.contraction "
        "else 0) for c in cold + warm], [c.contraction.compiled_steps for c in cold[:2]], "
        "cold[0].summary())\n"
    )
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    extra, compiled, summary = out.split("] ", 2)
    extra = [float(x) for x in extra.strip("[").split(",")]
    compiled = [int(x) for x in compiled.strip("[]").split(",")]
    assert compiled[0] > 0  # the brickwork's doubled terms run the compiled loop
    assert extra[0] == STARTUP_SECONDS and extra[1:] == [0.0] * 5
    assert "first load of the compiled kernels" in summary


def test_a_profile_adds_the_dp_schedule_on_its_devices():
    qc = brickwork(N, 6)
    (c,) = qsimdist.expectation_costs(qc, LABELS[1], profile="dgx-h100", devices=8)
    d = c.contraction.distributed
    assert d.profile == "dgx-h100" and d.devices == 8
    assert 0 < d.predicted_seconds <= d.slice_only_seconds * 1.0000001
    assert d.flops_executed >= c.contraction.flops * 0.999  # devices repeat, never skip, work
    assert d.E_P == pytest.approx(d.slice_only_seconds / d.predicted_seconds)
    text = c.summary()
    assert "predicted" in text and "dgx-h100 x 8" in text


def test_bad_profile_and_devices_are_refused_in_one_line():
    qc = brickwork(6, 2)
    with pytest.raises(ProfileError):
        qsimdist.expectation_costs(qc, "ZIIIII", profile="no-such-machine")
    with pytest.raises(InvalidInputError, match="devices needs a profile"):
        qsimdist.expectation_costs(qc, "ZIIIII", devices=8)
    with pytest.raises(ProfileError):
        qsimdist.expectation_costs(qc, "ZIIIII", profile="dgx-h100", devices=3)


def test_routes_that_contract_nothing_carry_their_predicted_time():
    qc = brickwork(8, 3)
    costs = qsimdist.expectation_costs(qc, ["ZIIIIIII", "IIIXXIII"], method="statevector")
    assert {c.method for c in costs} == {"statevector"}
    assert all(c.contraction is None and c.predicted_seconds > 0 for c in costs)
    engine = ExpectationEngine(method="state")  # one light-cone state shared by the terms
    costs = qsimdist.expectation_costs(qc, ["ZIIIIIII", "IIIXXIII"], engine=engine)
    assert [c.method for c in costs] == ["state", "state"]
    assert costs[0].contraction is costs[1].contraction
    assert sum(c.predicted_seconds for c in costs) == pytest.approx(
        costs[0].contraction.predicted_seconds)
    expectation_values(qc, ["ZIIIIIII", "IIIXXIII"], engine=engine)
    assert engine.stats.flops == costs[0].contraction.flops
    ghz = QuantumCircuit(60)
    ghz.h(0)
    for q in range(59):
        ghz.cx(q, q + 1)
    (c,) = qsimdist.expectation_costs(ghz, "Z" * 60)
    assert c.method == "stabilizer" and c.contraction is None


def test_plan_cost_counts_the_plan_and_slicing_multiplies_the_time():
    qc = brickwork(12, 4)
    net = qsimdist.api.simplified_network(qc, bitstrings="*" * 4 + "0" * 8)
    plan = make_plan(net, dtype="complex128")
    c = plan_cost(plan)
    assert c.flops == plan.stats.flops and c.slices == plan.stats.n_slices == 1
    assert c.largest_intermediate_bytes == plan.stats.max_intermediate * 16
    assert c.peak_bytes == plan.stats.peak_bytes
    biggest = max(plan.network.inputs, key=len)  # slice two indices along the same path
    sliced = build_plan(net, plan.path, [i for i in biggest if i not in net.output][:2],
                        "complex128")
    assert sliced.stats.n_slices == 4
    assert predicted_local_seconds(sliced) > 2 * predicted_local_seconds(plan)
    assert math.isclose(plan_cost(sliced).log10_flops, math.log10(sliced.stats.flops))


def test_seconds_text_picks_a_readable_unit():
    assert seconds_text(0.5) == "0.5 s"
    assert seconds_text(90) == "1.5 min"
    assert seconds_text(3 * 86400) == "3 days"
    assert seconds_text(math.inf) == "inf"
    assert "years" in seconds_text(1e12)


def test_estimator_cost_matches_the_run_of_the_same_pub():
    from qsimdist.qiskit import EstimatorV2

    theta = Parameter("t")
    qc = brickwork(30, 4, theta)
    pub = (qc, ["Z" + "I" * 29, "I" * 14 + "XX" + "I" * 14], [[0.1], [0.2]])
    est = EstimatorV2(options={"memory_limit": "1GiB"})
    (cost,) = est.cost([pub], profile="dgx-h100")
    assert [t["binding"] for t in cost["terms"]] == [(0,), (1,)]
    assert all(t["contraction"]["distributed"]["devices"] == 8 for t in cost["terms"])
    result = est.run([pub]).result()[0]
    spent = result.metadata["qsimdist"]
    assert spent["plans_made"] == 0
    assert spent["flops"] == cost["flops"] > 0
    assert cost["predicted_seconds"] == pytest.approx(
        sum(t["predicted_seconds"] for t in cost["terms"]))


def test_estimator_cost_refuses_a_dynamic_circuit():
    from qiskit.exceptions import QiskitError

    from qsimdist.qiskit import EstimatorV2

    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.measure(0, 0)
    qc.cx(0, 1)
    with pytest.raises(QiskitError, match="static circuits"):
        EstimatorV2().cost([(qc, "ZZ")])


def test_cli_expect_cost(tmp_path, capsys):
    path = tmp_path / "brick.qasm"
    path.write_text(qasm2.dumps(brickwork(N, 6)))
    rc = main(["expect", str(path), "-O", LABELS[1], "-O", LABELS[0], "--cost", "--json",
               "--profile", "dgx-h100", "--devices", "8"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["predicted"] is True
    assert [c["observable"] for c in doc["costs"]] == [LABELS[1], LABELS[0]]
    assert all("value" not in c for c in doc["costs"])
    assert all(c["contraction"]["distributed"]["devices"] == 8 for c in doc["costs"])
    rc = main(["expect", str(path), "-O", LABELS[0], "--cost"])
    out, err = capsys.readouterr()
    assert rc == 0 and "predicted" in out and "FLOPs" in out
    assert "nothing was contracted" in err
    rc = main(["expect", str(path), "-O", LABELS[0], "--devices", "8"])
    out, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and "--devices is for --cost" in err


# ------------------------------------------------------------- search effort by cost
def _rqc_network():
    from qsimdist.api import simplified_network

    return simplified_network("rqc_4x5_m12", bitstrings="0" * 20)


def test_a_costly_contraction_earns_a_longer_search(monkeypatch, caplog):
    import logging

    import cotengra as ctg

    from qsimdist.hardware import costs
    from qsimdist.planner import path

    net = _rqc_network()
    inputs, output, size_dict, _ = net.symbolic()
    greedy = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    opt = ctg.HyperOptimizer(max_repeats=1, methods=["greedy"], progbar=False)
    # a search of 2 s so far, on a contraction predicted at a fraction of a second: no more
    assert path._search_more(greedy, opt, inputs, output, size_dict, None, 2.0) is greedy
    assert not opt.scores  # the optimiser never ran
    # every contraction counts as costly here: 2 s more are earned, in rounds of 1 s
    monkeypatch.setattr(costs, "SEARCH_SHARE", 1e12)
    monkeypatch.setattr(costs, "MAX_SCALED_SEARCH_SECONDS", 2.0)
    monkeypatch.setattr(costs, "MIN_SCALED_SEARCH_SECONDS", 0.5)
    monkeypatch.setattr(costs, "SEARCH_ROUND_SECONDS", 1.0)
    with caplog.at_level(logging.INFO, logger="qsimdist.planner.path"):
        longer = path._search_more(greedy, opt, inputs, output, size_dict, None, 0.0)
    assert "searching 2.0 s more" in caplog.text
    assert caplog.text.count("s more") >= 2  # rounds (the budget priced again after each)
    assert longer.contraction_cost() < greedy.contraction_cost()  # greedy is easily beaten
    # with a slicing target, the tree kept is the cheapest once sliced, and fits it
    target = int(greedy.max_size()) // 8
    sliced = path._search_more(greedy.slice(target_size=target, allow_outer=False), opt,
                               inputs, output, size_dict, target, 0.0)
    assert sliced.max_size() <= target and sliced.nslices > 1
    caplog.clear()  # a budget the user set is the budget
    with caplog.at_level(logging.INFO, logger="qsimdist.planner.path"):
        path.find_path(net, PathOptions(cache=False, max_repeats=2))
    assert "more" not in caplog.text


def test_a_round_that_saved_more_than_it_took_earns_another(monkeypatch, caplog):
    import logging

    import cotengra as ctg

    from qsimdist.hardware import costs
    from qsimdist.planner import path

    net = _rqc_network()
    inputs, output, size_dict, _ = net.symbolic()
    greedy = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    # a slow machine (one multiply-add a second): every saving is worth hours; the share
    # pays for the first round of 1 s only
    monkeypatch.setattr(costs, "SEARCH_RATE", 1.0)
    monkeypatch.setattr(costs, "SEARCH_SHARE", 1.0 / float(greedy.contraction_cost()))
    monkeypatch.setattr(costs, "SEARCH_ROUND_SECONDS", 1.0)
    monkeypatch.setattr(costs, "MIN_SCALED_SEARCH_SECONDS", 0.2)
    monkeypatch.setattr(costs, "MAX_SCALED_SEARCH_SECONDS", 4.0)
    opt = ctg.HyperOptimizer(max_repeats=1, methods=["greedy"], progbar=False)
    started = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="qsimdist.planner.path"):
        better = path._search_more(greedy, opt, inputs, output, size_dict, None, 0.0)
    rounds = caplog.text.count("s more")
    assert better.contraction_cost() < greedy.contraction_cost()
    assert rounds >= 2  # the first round's saving paid for a second
    assert time.perf_counter() - started < 4.0 + 2.0  # within the cap (and one trial)


def test_a_plan_that_slicing_made_costly_is_searched_again_by_its_sliced_cost(monkeypatch):
    from qsimdist.hardware import costs

    net = _rqc_network()
    opts = PathOptions(cache=False)
    whole = make_plan(net, dtype="complex64", path_options=opts)
    limit = whole.stats.peak_bytes // 16  # slicing along the path multiplies the work
    monkeypatch.setattr(costs, "SLICED_RESEARCH_SECONDS", math.inf)
    along = make_plan(net, dtype="complex64", memory_limit=limit, path_options=opts)
    assert along.stats.n_slices > 1
    monkeypatch.setattr(costs, "SLICED_RESEARCH_SECONDS", 0.0)
    monkeypatch.setattr(costs, "SLICED_RESEARCH_OVERHEAD", 1.0)
    aware = make_plan(net, dtype="complex64", memory_limit=limit, path_options=opts)
    assert aware.stats.peak_bytes <= limit
    assert aware.stats.flops <= along.stats.flops
    np.testing.assert_allclose(aware.execute(), along.execute(), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("slicing", ["after", "aware"])
def test_a_search_with_a_slicing_target_fits_it_either_way(slicing):
    import cotengra as ctg

    net = _rqc_network()
    whole = find_path(net, PathOptions(cache=False, max_repeats=4))
    inputs, output, size_dict, _ = net.symbolic()
    biggest = ctg.ContractionTree.from_path(inputs, output, size_dict,
                                            ssa_path=whole.ssa_path).max_size()
    target = int(biggest) // 4
    res = find_path(net, PathOptions(cache=False, max_repeats=4, slicing=slicing), target)
    plan = build_plan(net, res.ssa_path, res.sliced, "complex64")
    assert res.sliced and plan.stats.max_intermediate <= target


def test_an_unknown_slicing_mode_is_refused():
    with pytest.raises(InvalidInputError, match="slicing must be one of after, aware"):
        PathOptions(slicing="inside")


def test_a_search_with_nothing_left_to_find_stops_early(monkeypatch, caplog):
    """30 vectors on a tensor of 2^30 elements: every sensible tree costs about the same
    (about 2 s predicted). With the share of the predicted run paying for the whole
    10-minute cap, rounds that save less predicted time than they take (STALLED_ROUNDS in a
    row, each as long as the search so far) end the search in seconds."""
    import logging

    from qsimdist.hardware import costs
    from qsimdist.network import Network

    n = 30
    monkeypatch.setattr(costs, "SEARCH_SHARE", 1e6)
    net = Network([tuple(f"i{k}" for k in range(n))] + [(f"i{k}",) for k in range(n)], (),
                  {f"i{k}": 2 for k in range(n)})
    started = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="qsimdist.planner.path"):
        find_path(net, PathOptions(cache=False))
    assert time.perf_counter() - started < costs.MAX_SCALED_SEARCH_SECONDS / 10
    assert caplog.text.count("s more") == costs.STALLED_ROUNDS
