"""Lifetime ordering, plans and the local executor on random networks with hyper-indices."""

from __future__ import annotations

import json
import math

import cotengra as ctg
import numpy as np
import pytest

from qsimdist import Network, PlanError
from qsimdist.errors import PlanFormatError
from qsimdist.planner.lifetime import lifetime_order
from qsimdist.planner.path import PathOptions
from qsimdist.planner.plan import Plan, build_plan, make_plan

from .conftest import rel_err


def random_network(seed: int, n: int = 14, n_out: int = 3, n_hyper: int = 2) -> Network:
    inputs, output, shapes, size_dict = ctg.utils.rand_equation(
        n, 3, n_out=n_out, n_hyper_in=n_hyper, n_hyper_out=1 if n_out else 0,
        d_min=2, d_max=3, seed=seed,
    )
    return Network(inputs, output, size_dict).with_random_arrays(seed)


def reference(net: Network) -> np.ndarray:
    return np.einsum(net.einsum_equation(), *net.arrays, optimize="greedy")


@pytest.mark.parametrize("seed", range(8))
def test_random_networks_match_einsum(seed):
    net = random_network(seed)
    assert net.hyper_indices(), "the generator should give hyper-indices"
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    out = plan.execute()
    assert out.shape == tuple(net.size_dict[i] for i in net.output)
    assert rel_err(out, reference(net)) < 1e-10


@pytest.mark.parametrize("seed", range(6))
def test_layout_invariants(seed):
    """Every step reads [retained | reduced] in both operands; the root is the output order."""
    net = random_network(seed)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    legs_out = {}
    for step in plan.steps:
        a, b, c = step.lhs_modes, step.rhs_modes, step.out_modes
        reduced = [i for i in a if i in b and i not in c]
        assert list(a[len(a) - len(reduced):]) == reduced, "reduced modes must trail in lhs"
        assert list(b[len(b) - len(reduced):]) == reduced, "and in rhs, in the same order"
        # retained modes keep the output's relative order (no permutation needed)
        for operand in (a, b):
            kept = [i for i in operand if i in c]
            assert kept == [i for i in c if i in operand]
        legs_out[step.out] = c
        if step.kernel in ("gemm", "broadcast"):
            assert step.transposed_bytes == 0  # no permutation on these kernels
            assert (step.expanded_bytes > 0) == bool(step.expand)
    if plan.steps:
        assert plan.steps[-1].out_modes == net.output


def test_cotengra_accepts_plan_path():
    net = random_network(3, n_out=0)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    pn = plan.network
    tree = ctg.ContractionTree.from_path(pn.inputs, pn.output, pn.size_dict, ssa_path=plan.path)
    ours = plan.execute()
    theirs = tree.contract(pn.arrays)
    assert abs(ours - theirs) / abs(theirs) < 1e-10


def test_slicing_under_memory_limit_gives_same_result():
    net = random_network(5, n=30, n_out=2)
    full = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    limit = full.stats.peak_bytes // 3
    sliced = make_plan(
        net, dtype="complex128", memory_limit=limit, path_options=PathOptions(max_repeats=4)
    )
    assert sliced.stats.n_slices > 1
    assert sliced.stats.peak_bytes <= limit
    assert rel_err(sliced.execute(), full.execute()) < 1e-10


def test_memory_limit_too_small():
    net = random_network(5)
    with pytest.raises(PlanError, match="too small"):
        make_plan(net, memory_limit=16)


def test_plan_json_roundtrip(tmp_path):
    net = random_network(2)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    path = plan.save(tmp_path / "p.json")
    again = Plan.load(path)
    assert again.path == plan.path
    assert [s.out_modes for s in again.steps] == [s.out_modes for s in plan.steps]
    assert rel_err(again.execute(), plan.execute()) < 1e-12
    assert not list(tmp_path.glob(".*tmp")), "atomic write left a temporary file"


def test_plan_refuses_tampering(tmp_path):
    net = random_network(2)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    data = plan.to_dict()
    data["version"] = 999
    with pytest.raises(PlanFormatError, match="version 999"):
        Plan.from_dict(data)
    data = plan.to_dict()
    data["path"][0] = [0, 0]
    with pytest.raises(PlanFormatError, match="path step 0"):
        Plan.from_dict(data)
    data = plan.to_dict()
    data["steps"][-1]["out_modes"] = list(reversed(data["steps"][-1]["out_modes"])) + ["zz"]
    with pytest.raises(PlanFormatError, match="steps"):
        Plan.from_dict(data)
    data = plan.to_dict()
    data["network"]["arrays"][0]["data"] = "not base64!"
    with pytest.raises(PlanFormatError, match="arrays"):
        Plan.from_dict(data)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PlanFormatError, match="not valid JSON"):
        Plan.load(tmp_path / "bad.json")
    json.dumps(plan.to_dict())  # plain data


def test_flops_and_peak_accounting():
    """Step FLOPs are 8 per complex multiply-add; the peak counts all live tensors."""
    inputs = [("a", "b"), ("b", "c"), ("c", "d")]
    size = {"a": 2, "b": 3, "c": 4, "d": 5}
    lay = lifetime_order(inputs, ("a", "d"), size, [(0, 1), (2, 3)], itemsize=16)
    s0, s1 = lay.steps
    assert s0.flops == 8 * 2 * 3 * 4  # (a,b)x(b,c) -> (a,c)
    assert s1.flops == 8 * 2 * 4 * 5
    leaves = (6 + 12 + 20) * 16
    assert lay.peak_bytes == max(leaves + 8 * 16, leaves - 18 * 16 + 8 * 16 + 10 * 16)
    assert s1.out_modes == ("a", "d")


def test_single_leaf_sums_dangling_modes():
    net = Network([("a", "b", "c")], ("c", "a"), {"a": 2, "b": 3, "c": 4}).with_random_arrays(1)
    plan = build_plan(net, [], dtype="complex128")
    assert plan.leaf_sum == [("b",)]
    assert rel_err(plan.execute(), net.arrays[0].sum(axis=1).T) < 1e-12


def test_outer_product_and_scalars():
    net = Network([("a",), ("b",), ()], ("b", "a"), {"a": 2, "b": 3}).with_random_arrays(4)
    plan = make_plan(net, dtype="complex128")
    want = np.einsum("a,b,->ba", *net.arrays)
    assert rel_err(plan.execute(), want) < 1e-12
    assert math.isclose(plan.stats.flops, sum(s.flops for s in plan.steps))


@pytest.mark.parametrize("seed", range(4))
def test_slice_from_a_preferred_set(seed):
    """Re-slicing a searched slicing for another target restores or adds indices, never
    exceeds the target, and the fast cost evaluator agrees with the built plan."""
    import math

    from qsimdist.planner.plan import build_plan
    from qsimdist.planner.slicing import SliceCosts, slice_from, slice_path

    net = random_network(seed, n=24, n_out=2)
    plan = make_plan(net, dtype="complex128", path_options=PathOptions(max_repeats=4))
    width = plan.stats.max_intermediate
    prefer = slice_path(net, plan.path, max(2, width // 8))
    costs = SliceCosts(net, plan.path)
    # no slicing goes below the largest tensor over output indices alone
    floor = max(
        math.prod(net.size_dict[costs.names[j]] for j in row.nonzero()[0]
                  if costs.names[j] in net.output)
        for row in costs.nodes
    )
    for target in (width, max(floor, width // 4), max(floor, width // 32)):
        got = slice_from(net, plan.path, target, prefer=prefer)
        sliced_plan = build_plan(net, plan.path, got, "complex128")
        log2_width, log2_total = costs.evaluate(set(got))
        assert log2_width <= math.log2(target) + 1e-9
        assert log2_width == pytest.approx(math.log2(sliced_plan.stats.max_intermediate))
        assert log2_total == pytest.approx(sliced_plan.stats.log10_cost * math.log2(10))
        if costs.evaluate(set(prefer))[0] <= math.log2(target) + 1e-9:
            assert set(got) <= set(prefer)  # only restored from the preferred set
        else:
            assert set(prefer) <= set(got)  # only added to it
        if target == width:
            assert got == []
        if sliced_plan.stats.n_slices <= 64:
            assert rel_err(sliced_plan.execute(), reference(net)) < 1e-10


def test_cheap_networks_skip_the_hyper_search_whatever_max_repeats(monkeypatch):
    """A greedy path of at most NO_SEARCH_COST multiply-adds is kept: a search would cost
    more than the contraction; a network above the bound still gets its trials."""
    import qsimdist.planner.path as path_mod

    calls = []
    real = path_mod._hyper_search

    def counting(*args, **kwargs):
        calls.append(args[4])  # repeats
        return real(*args, **kwargs)

    monkeypatch.setattr(path_mod, "_hyper_search", counting)
    opts = PathOptions(max_repeats=4, cache=False)
    cheap = random_network(3, n=30)
    inputs, output, size_dict, _ = cheap.symbolic()
    greedy = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    assert greedy.contraction_cost() <= path_mod.NO_SEARCH_COST
    result = path_mod.find_path(cheap, opts)
    assert calls == [] and len(result.ssa_path) == cheap.num_tensors - 1
    monkeypatch.setattr(path_mod, "NO_SEARCH_COST", greedy.contraction_cost() / 2)
    path_mod.find_path(cheap, opts)
    assert calls == [4]


@pytest.mark.parametrize("seed", range(3))
def test_route_greedy_cost_is_cotengras_greedy(seed):
    """The route choice prices the tensor-network route by cotengrust's greedy path directly
    (no cotengra import); it must be the cost of cotengra's own 'greedy' path."""
    from qsimdist.engine.router import greedy_cost as _greedy_cost

    net = random_network(seed, n=40, n_out=2)
    inputs, output, size_dict, _ = net.symbolic()
    tree = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
    assert _greedy_cost(net) == pytest.approx(float(tree.contraction_cost()), rel=1e-12)
