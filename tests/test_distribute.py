"""The distribution planner: cost model, DP vs exhaustive search, strategies compared."""

from __future__ import annotations

import math
import random

import pytest

from qsimdist.hardware import HardwareProfile
from qsimdist.planner.distribute import (
    ChainStep,
    CostModel,
    block_elements,
    compare_strategies,
    exhaustive_chain,
    leading_bits,
    schedule,
    solve_chain,
)


def toy_profile(**kw) -> HardwareProfile:
    base = dict(
        name="toy", description="test", devices_per_node=4, memory_bytes=2**20,
        usable_memory_fraction=1.0, flops={"complex64": 1e9, "complex128": 5e8},
        mem_bandwidth=1e10, intra_bandwidth=1e9, intra_latency=1e-5,
        inter_bandwidth=1e8, inter_latency=1e-4, max_nodes=None,
    )
    base.update(kw)
    return HardwareProfile(**base)


def test_leading_bits_and_blocks():
    size = {"a": 4, "b": 2, "c": 3, "d": 2}
    assert leading_bits(("a", "b"), size, 2) == (("a", 0), ("a", 1))
    assert leading_bits(("a", "b"), size, 3) == (("a", 0), ("a", 1), ("b", 0))
    assert leading_bits(("c", "a"), size, 1) is None  # extent 3 cannot be split
    assert leading_bits(("a", "b"), size, 1, exclude={"a"}) == (("b", 0),)
    # moving the last bit of a layout gives pieces of one element
    assert block_elements(("a", "b", "d"), size, {("a", 0)}, {("d", 0)}) == 1
    # moving a leading bit gives pieces spanning everything after it
    assert block_elements(("a", "b", "d"), size, {("a", 0)}, {("a", 1)}) == 4


def test_fragmented_redistribution_costs_latency():
    model = CostModel(toy_profile())
    size = {m: 2 for m in "abcdefgh"}
    modes = tuple("abcdefgh")
    coarse, _ = model.redistribute(256, modes, size, [("a", 0)], [("b", 0)], 2)
    fine, _ = model.redistribute(256, modes, size, [("a", 0)], [("h", 0)], 2)
    assert fine > coarse  # same bytes, many more blocks


def random_chain(rng: random.Random, length: int, q: int):
    size = {f"m{k}": 2 for k in range(12)}
    modes = list(size)
    steps = []
    for k in range(length):
        rng.shuffle(modes)
        layout = tuple(modes[:8])
        reduced = frozenset(rng.sample(layout, rng.randint(0, 3)))
        target = leading_bits(layout, size, q, exclude=set(reduced))
        steps.append(ChainStep(k, rng.uniform(1e-3, 1e-1), 2 ** rng.randint(10, 30), layout,
                               reduced, target))
    start = leading_bits(tuple(modes[:8]), size, q)
    return start, steps, size


@pytest.mark.parametrize("seed", range(40))
def test_dp_equals_exhaustive_search(seed):
    rng = random.Random(seed)
    q = rng.choice([1, 2, 3])
    start, steps, size = random_chain(rng, rng.randint(1, 9), q)
    model = CostModel(toy_profile(devices_per_node=2 ** q))
    dp = solve_chain(start, steps, 2**q, model, size).seconds
    brute = exhaustive_chain(start, steps, 2**q, model, size)
    if math.isinf(brute):
        assert math.isinf(dp)
    else:
        assert dp == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_forced_only_never_beats_dp(seed):
    rng = random.Random(100 + seed)
    start, steps, size = random_chain(rng, 8, 2)
    model = CostModel(toy_profile())
    dp = solve_chain(start, steps, 4, model, size).seconds
    forced = solve_chain(start, steps, 4, model, size, elective=False).seconds
    assert dp <= forced


def _circuit_plan(n=16, depth=10, star=10):
    from qiskit.circuit.random import random_circuit

    import qsimdist

    qc = random_circuit(n, depth, max_operands=2, seed=3)
    return qsimdist.plan(qc, bitstrings="*" * star + "0" * (n - star), simplify_sequence="R",
                         max_repeats=4, memory_limit="none")


def test_strategies_on_a_circuit():
    plan = _circuit_plan()
    biggest = plan.stats.max_intermediate * 8
    prof = toy_profile(memory_bytes=biggest // 2)  # forces slicing on one device
    report, scheds = compare_strategies(plan, prof, 4)
    s = report["strategies"]
    assert s["dp"]["time_s"] <= s["forced_only"]["time_s"] + 1e-15
    assert s["dp"]["time_s"] <= s["slice_only"]["time_s"] + 1e-15
    assert s["slice_only"]["E_P"] == pytest.approx(1.0)
    assert report["R_P"] >= 1.0 - 1e-12
    for sch in scheds.values():
        assert sch.peak_bytes_per_device <= prof.usable_memory
    assert len(scheds["dp"].annotations) == len(plan.steps)


def test_nothing_fits():
    from qsimdist import PlanError

    plan = _circuit_plan()
    prof = toy_profile(memory_bytes=64)
    with pytest.raises(PlanError, match="nothing fits"):
        schedule(plan, prof, 4)


# ------------------------------------------------------------------ CLI


def _cli(capsys, *args):
    from qsimdist.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def saved_plan(tmp_path_factory):
    from qsimdist.bundled import bundled_circuit

    path = tmp_path_factory.mktemp("plans") / "rqc.json"
    from qsimdist.cli import main

    assert main(["plan", str(bundled_circuit("rqc_3x4_m8.qsim")), "--order", "natural",
                 "-b", "*" * 8 + "0000", "-o", str(path), "--max-repeats", "4"]) == 0
    return path


def test_cli_profile_report_json(capsys, saved_plan, tmp_path):
    import json

    png = tmp_path / "s.png"
    code, out, err = _cli(capsys, "plan", str(saved_plan), "--profile", "dgx-h100",
                          "--devices", "8", "--json", "--plot", str(png))
    assert code == 0, err
    report = json.loads(out)
    assert report["devices"] == 8 and report["profile"] == "dgx-h100"
    assert set(report["strategies"]) == {"dp", "forced_only", "slice_only"}
    for entry in report["strategies"].values():
        for key in ("time_s", "E_P", "comm_bytes", "peak_bytes_per_device", "n_redistributions"):
            assert key in entry
    assert report["strategies"]["dp"]["time_s"] <= report["strategies"]["slice_only"]["time_s"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_profile_report_text_and_annotated_plan(capsys, saved_plan, tmp_path):
    import json

    out_plan = tmp_path / "annotated.json"
    code, out, err = _cli(capsys, "plan", str(saved_plan), "--profile", "h100-ib",
                          "--devices", "64", "-o", str(out_plan))
    assert code == 0, err
    assert "R_P" in out and "forced_only" in out and "slice_only" in out
    data = json.loads(out_plan.read_text())
    assert data["version"] == 2
    dist = data["meta"]["distribution"]
    assert dist["devices"] == 64 and len(dist["steps"]) == len(data["steps"])
    assert {s["action"] for s in dist["steps"]} <= {
        "local", "activate", "keep", "redistribute", "gather"}


@pytest.mark.parametrize(
    "args,words",
    [
        (["--profile", "nope"], ["unknown hardware profile", "dgx-h100", "h100-ib"]),
        (["--profile", "dgx-h100", "--devices", "6"], ["power of two"]),
        (["--profile", "dgx-h100", "--devices", "16"], ["16", "8"]),
        (["--devices", "8"], ["--profile"]),
    ],
)
def test_cli_profile_bad_input(capsys, saved_plan, args, words):
    code, out, err = _cli(capsys, "plan", str(saved_plan), *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qsimdist: error:")
    for w in words:
        assert w in lines[0]


def test_cli_nothing_fits(capsys, saved_plan, tmp_path):
    prof = tmp_path / "tiny.toml"
    from qsimdist.hardware import save_profile

    save_profile(toy_profile(name="tiny", memory_bytes=64), prof)
    code, out, err = _cli(capsys, "plan", str(saved_plan), "--profile", str(prof),
                          "--devices", "4")
    assert code == 2 and "nothing fits" in err and "Traceback" not in err
