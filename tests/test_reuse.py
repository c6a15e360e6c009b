"""Reuse across slices: kept step outputs, priced by the planner and run by the executors.

The planner's run counts are checked against a brute-force walk of the
slices (which nodes each slice has to compute given what is kept and still
valid); the local executor is checked to run exactly those steps and to
give the result of a run without reuse; replay refuses schedules whose
kept outputs are not step outputs or do not fit; the kept outputs survive
plan schema v3. The mpi executor's runs are in tests/test_mpi.py.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from qsimdist.errors import PlanFormatError
from qsimdist.planner.distribution import replay, schedule, scheduled_plan
from qsimdist.planner.distribution.reuse import kept_bytes, predicted_totals, with_reuse
from qsimdist.planner.plan import Plan
from qsimdist.planner.reuse import check_kept, slice_order, step_counts
from tests.test_distribute import _circuit_plan, simulate, toy_profile


@pytest.fixture(scope="module")
def base_plan():
    return _circuit_plan(n=18, depth=12, star=0, seed=5)


def _reused(plan, frac: int, devices: int):
    prof = toy_profile(memory_bytes=plan.stats.max_intermediate * 8 // frac + 2**14)
    plain = schedule(plan, prof, devices)
    sched = schedule(plan, prof, devices, reuse=True)
    return prof, plain, sched


def _walk(plan: Plan, sched, kept) -> list[int]:
    """Per step: the runs of the busiest group, by walking each group's slices one by one."""
    from qsimdist.executors.carry import Carry

    busiest = [0] * len(plan.steps)
    for g in range(sched.groups):
        carry = Carry(plan, kept)
        runs = [0] * len(plan.steps)
        for s in sched.slices_of_group(g):
            need = carry.needed(plan, s)
            for j, step in enumerate(plan.steps):
                if step.out in need:
                    runs[j] += 1
                    if step.out in carry.kept:
                        carry.put(step.out, s, None)
        busiest = [max(a, b) for a, b in zip(busiest, runs)]
    return busiest


@pytest.mark.parametrize("frac,devices", [(8, 1), (32, 2), (128, 4)])
def test_reuse_is_priced_below_and_counted_as_the_slices_run(base_plan, frac, devices):
    prof, plain, sched = _reused(base_plan, frac, devices)
    assert sched.kept, "a sliced circuit with free memory keeps something"
    assert sched.predicted.seconds < plain.predicted.seconds
    assert sched.predicted.flops_executed < plain.predicted.flops_executed
    sp = scheduled_plan(base_plan, sched)
    assert sp.sliced == list(sched.sliced)
    runs = step_counts(sp, sched.sliced, sched.groups, frozenset(sched.kept))
    assert runs == _walk(sp, sched, sched.kept)
    rounds = math.ceil(sched.n_slices / sched.groups)
    assert runs[-1] == rounds and min(runs) >= 1 and sum(runs) < rounds * len(runs)
    # the prediction is the records times the runs, plus the kept bytes on the peak
    flops = sum(r.flops_per_device * c for r, c in zip(sched.steps, runs))
    assert sched.predicted.flops_per_device == pytest.approx(flops, rel=1e-12)
    rep = replay(sp, sched, prof)
    assert rep.peak_bytes == sched.predicted.peak_bytes_per_device <= prof.usable_memory
    assert kept_bytes(sp, sched) > 0


def test_nothing_kept_leaves_the_schedule_alone(base_plan):
    prof = toy_profile(memory_bytes=2**30)  # fits unsliced: one slice, nothing to reuse
    assert schedule(base_plan, prof, 2, reuse=True) == schedule(base_plan, prof, 2)


def test_local_executor_runs_what_was_priced_and_agrees(base_plan, monkeypatch):
    from qsimdist.executors import local

    _, plain, sched = _reused(base_plan, 32, 1)
    sp = scheduled_plan(base_plan, sched)
    ran: dict[int, int] = {}
    real = local.run_step

    def counting(step, *a, **k):
        ran[step.out] = ran.get(step.out, 0) + 1
        return real(step, *a, **k)

    monkeypatch.setattr(local, "run_step", counting)
    got = sp.execute()
    monkeypatch.setattr(local, "run_step", real)
    runs = step_counts(sp, sched.sliced, 1, frozenset(sched.kept))
    assert [ran.get(s.out, 0) for s in sp.steps] == runs
    ref = scheduled_plan(base_plan, plain).execute()
    assert np.allclose(got, ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max())
    # and twice in a row on one plan (the kept outputs start afresh each run)
    assert np.allclose(sp.execute(), got, rtol=1e-6, atol=0)


def test_sharded_groups_with_reuse_simulate_right(base_plan):
    _, _, sched = _reused(base_plan, 128, 4)
    sp = scheduled_plan(base_plan, sched)
    ref = base_plan.execute()
    assert np.allclose(simulate(sp), ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max())


def test_order_is_a_permutation_and_repeatable(base_plan):
    _, _, sched = _reused(base_plan, 32, 1)
    sp = scheduled_plan(base_plan, sched)
    w = [r.predicted_compute_seconds for r in sched.steps]
    a = slice_order(sp, 1, w)
    assert sorted(a) == sorted(sp.sliced) and a == slice_order(sp, 1, w)


def test_replay_refuses_bad_kept(base_plan):
    prof, _, sched = _reused(base_plan, 32, 2)
    sp = scheduled_plan(base_plan, sched)
    root = sp.steps[-1].out
    assert check_kept(sp, (root,)) is not None
    assert check_kept(sp, (0,)) is not None  # a leaf
    bad = dataclasses.replace(sched, kept=(0,))
    with pytest.raises(PlanFormatError, match="kept node 0"):
        replay(sp, bad, prof)
    # a kept output that is not priced: the totals no longer follow from the records
    extra = next(s.out for s in sp.steps[:-1] if s.out not in sched.kept)
    more = dataclasses.replace(sched, kept=tuple(sorted((*sched.kept, extra))))
    with pytest.raises(PlanFormatError):
        replay(sp, more, prof)
    # kept outputs that do not fit the device
    small = dataclasses.replace(sched, usable_memory=sched.predicted.peak_bytes_per_device - 1)
    with pytest.raises(PlanFormatError):
        replay(sp, small, dataclasses.replace(prof, memory_bytes=small.usable_memory))


def test_kept_survives_schema_v3(base_plan, tmp_path):
    prof, _, sched = _reused(base_plan, 32, 2)
    sp = scheduled_plan(base_plan, sched)
    path = sp.save(tmp_path / "p.json")
    back = Plan.load(path)
    assert back.schedule.kept == sched.kept and back.sliced == sp.sliced
    assert predicted_totals(back, back.schedule)["seconds"] == pytest.approx(
        sched.predicted.seconds, rel=1e-12)
    assert np.allclose(back.execute(), sp.execute(), rtol=1e-6, atol=0)


def test_with_reuse_without_free_memory_is_unchanged(base_plan):
    prof, plain, _ = _reused(base_plan, 32, 2)
    sp = scheduled_plan(base_plan, plain)
    full = dataclasses.replace(plain, usable_memory=plain.predicted.peak_bytes_per_device)
    assert with_reuse(sp, full) is full


def test_cli_plan_reuse(capsys, tmp_path):
    import json

    from qsimdist.cli import main

    src = "circuits/rqc_3x4_m12.qasm"
    code = main(["plan", src, "--profile", "local-cpu", "--devices", "2", "--reuse",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, None) and out["reuse"] is True
    assert "kept_outputs" in out["predicted"]["strategies"]["dp"]
    assert main(["plan", src, "--profile", "local-cpu", "--devices", "2", "--reuse"]) in (0, None)
    assert "reuse across slices: step outputs kept per group: slice_only" in \
        capsys.readouterr().out
    assert main(["plan", src, "--reuse"]) == 2
    assert "--reuse need --profile" in capsys.readouterr().err


def test_trace_rows_time_each_run_of_a_step(base_plan):
    """A --trace row is seconds per run of the step: a reused step ran on fewer slices."""
    from qsimdist.executors.run_stats import trace_rows

    _, _, sched = _reused(base_plan, 32, 1)
    sp = scheduled_plan(base_plan, sched)
    runs = step_counts(sp, sched.sliced, 1, frozenset(sched.kept))
    st = {"slices": sched.n_slices, "step_seconds": [0.5 * r for r in runs],
          "step_runs": runs, "step_peak": [0] * len(runs)}
    assert {row["measured_s"] for row in trace_rows(sp, [st])} == {0.5}
    old = dict(st, step_runs=[])  # stats written before step_runs: per slice, as before
    rows = trace_rows(sp, [old])
    assert rows[0]["measured_s"] == pytest.approx(0.5 * runs[0] / sched.n_slices)


@pytest.fixture(scope="module")
def local_plan():
    from qiskit.circuit.random import random_circuit

    import qsimdist

    qc = random_circuit(18, 12, max_operands=2, seed=5)
    kw = dict(bitstrings="0" * 18, max_repeats=4, simplify_sequence="R")
    probe = qsimdist.plan(qc, memory_limit="none", **kw)
    limit = probe.stats.peak_bytes // 8
    return qsimdist.plan(qc, memory_limit=limit, **kw), limit


def test_local_plan_keeps_outputs_within_its_limit(local_plan):
    from qsimdist.planner.plan import build_plan
    from qsimdist.planner.reuse import local_kept_bytes

    plan, limit = local_plan
    assert plan.stats.n_slices >= 2 and plan.kept
    assert plan.stats.peak_bytes <= limit
    plain = build_plan(plan.network, plan.path, plan.sliced, plan.dtype)
    assert plan.stats.peak_bytes == plain.stats.peak_bytes + local_kept_bytes(plan, plan.kept)
    ref = plain.execute()
    assert np.allclose(plan.execute(), ref, rtol=1e-5, atol=1e-7 * np.abs(ref).max())
    assert "step outputs kept across slices" in plan.summary()


def test_local_kept_round_trip_and_tampering(local_plan, tmp_path):
    import json

    plan, _ = local_plan
    back = Plan.load(plan.save(tmp_path / "p.json"))
    assert back.kept == plan.kept and back.stats.peak_bytes == plan.stats.peak_bytes
    d = json.loads((tmp_path / "p.json").read_text())
    for bad, words in (([plan.steps[-1].out], "kept node"), ([0], "kept node 0"),
                       (["x"], "list of step outputs")):
        d["kept"] = bad
        with pytest.raises(PlanFormatError, match=words):
            Plan.from_dict(d, "p.json")


def test_local_reuse_needs_free_memory_and_a_saving(local_plan):
    from qsimdist.planner.plan import build_plan, with_local_reuse

    plan, _ = local_plan
    plain = build_plan(plan.network, plan.path, plan.sliced, plan.dtype)
    assert with_local_reuse(plain, plain.stats.peak_bytes) is plain  # no free byte
    one = build_plan(plan.network, plan.path, [], plan.dtype)
    assert with_local_reuse(one, 10 * one.stats.peak_bytes) is one  # one slice


@pytest.mark.parametrize("value,on", [("on", True), ("1", True), (" TRUE ", True), ("", True),
                                      ("off", False), ("0", False), ("No", False)])
def test_reuse_setting_values(monkeypatch, value, on):
    from qsimdist.config import reuse_enabled

    monkeypatch.setenv("QSIMDIST_REUSE", value)
    assert reuse_enabled() is on


def test_reuse_setting_off_plans_without_kept_outputs(monkeypatch, local_plan):
    from qiskit.circuit.random import random_circuit

    import qsimdist
    from qsimdist.errors import InvalidInputError

    plan, limit = local_plan
    qc = random_circuit(18, 12, max_operands=2, seed=5)
    kw = dict(bitstrings="0" * 18, max_repeats=4, simplify_sequence="R", memory_limit=limit)
    monkeypatch.setenv("QSIMDIST_REUSE", "off")
    off = qsimdist.plan(qc, **kw)
    assert not off.kept and off.stats.n_slices == plan.stats.n_slices
    assert off.stats.peak_bytes < plan.stats.peak_bytes  # no kept bytes on the peak
    monkeypatch.setenv("QSIMDIST_REUSE", "sometimes")
    with pytest.raises(InvalidInputError, match="QSIMDIST_REUSE is 'sometimes'; valid: on, off"):
        qsimdist.plan(qc, **kw)


def test_plan_cache_keys_on_the_reuse_setting(monkeypatch, local_plan):
    """A plan kept with step outputs is not served once QSIMDIST_REUSE turns them off."""
    from qsimdist.engine.cache import PlanCache

    plan, limit = local_plan
    cache = PlanCache()
    monkeypatch.setenv("QSIMDIST_REUSE", "on")
    on, reused = cache.get(plan.network, dtype=plan.dtype, limit=limit)
    assert not reused and on.kept
    monkeypatch.setenv("QSIMDIST_REUSE", "off")
    off, reused = cache.get(plan.network, dtype=plan.dtype, limit=limit)
    assert not reused and not off.kept
    _, reused = cache.get(plan.network, dtype=plan.dtype, limit=limit)
    assert reused
    monkeypatch.setenv("QSIMDIST_REUSE", "on")
    again, reused = cache.get(plan.network, dtype=plan.dtype, limit=limit)
    assert reused and again.kept == on.kept


@pytest.mark.parametrize("frac,devices", [(8, 1), (32, 2), (128, 4)])
def test_breakdown_orders_where_the_flops_go(base_plan, frac, devices):
    """unsliced <= once per value <= every output kept <= the schedule's kept <= nothing kept,
    the kept total is the schedule's own prediction and nothing kept is the plain one's."""
    from qsimdist.planner.distribution.reuse import breakdown

    prof, plain, sched = _reused(base_plan, frac, devices)
    sp = scheduled_plan(base_plan, sched)
    assert base_plan.stats.n_slices == 1
    b = breakdown(sp, sched, base_plan.stats.flops)
    tol = 1 + 1e-9
    assert (b["unsliced"] <= b["once_per_value"] * tol and b["once_per_value"] <= b["every_kept"]
            * tol and b["every_kept"] <= b["kept"] * tol and b["kept"] <= b["nothing_kept"] * tol)
    assert b["kept"] == pytest.approx(sched.predicted.flops_executed, rel=1e-9)
    assert b["kept"] < b["nothing_kept"]
    # every step once per slice: the slices times one slice's FLOPs on every device
    per_slice = sum(r.flops_per_device for r in sched.steps) * sched.group_size
    assert b["nothing_kept"] == pytest.approx(per_slice * sched.n_slices, rel=1e-9)
    big = toy_profile(memory_bytes=base_plan.stats.max_intermediate * 64)
    whole = schedule(base_plan, big, 1, reuse=True)
    assert whole.n_slices == 1
    one = breakdown(scheduled_plan(base_plan, whole), whole, base_plan.stats.flops)
    assert len(set(round(v) for v in one.values())) == 1  # one slice: nothing to break down


def test_report_says_where_the_dp_flops_go(base_plan):
    """``qsimdist plan --profile --reuse``: each strategy's breakdown, the dp's in one line."""
    from qsimdist.planner.distribution import compare_strategies
    from qsimdist.report import format_report

    prof = toy_profile(memory_bytes=base_plan.stats.max_intermediate * 8 // 32 + 2**14)
    report, out = compare_strategies(base_plan, prof, 2, reuse=True)
    dp = report["predicted"]["strategies"]["dp"]
    assert dp["n_slices"] > 1 and dp["kept_outputs"] > 0
    b = dp["flops_breakdown"]
    assert b["kept"] == pytest.approx(dp["flops_executed"], rel=1e-9)
    assert b["kept"] < b["nothing_kept"] and b["unsliced"] == base_plan.stats.flops
    text = format_report(report)
    assert f"dp executed FLOPs 10^{math.log10(b['kept']):.2f}: the path once " in text
    o = dp["order_loss"]
    if o["steps"]:  # which step the order makes run again, and what copies of it would hold
        assert (f"the order's cost: 10^{math.log10(o['extra_flops']):.2f} FLOPs above once per "
                f"value, {o['steps'][0]['share']:.0%} in step {o['steps'][0]['step']} ") in text
    else:
        assert "the order's cost" not in text
    plain, _ = compare_strategies(base_plan, prof, 2)
    assert "flops_breakdown" not in plain["predicted"]["strategies"]["dp"]
    assert "dp executed FLOPs" not in format_report(plain)


@pytest.mark.parametrize("groups", [2, 4, 8])
def test_groups_run_contiguous_blocks_and_the_model_counts_them(base_plan, groups):
    """Each group runs one contiguous block of slices: the blocks cover every slice once,
    the priced runs are a walk of the busiest group's block, and a kept output shared by a
    block is computed once per prefix the block meets (round robin met every prefix)."""
    _, _, sched = _reused(base_plan, 8, 1)
    assert sched.kept
    many = dataclasses.replace(sched, devices=groups, group_size=1)
    assert many.groups == groups
    blocks = [many.slices_of_group(g) for g in range(groups)]
    assert [s for b in blocks for s in b] == list(range(sched.n_slices))
    assert max(map(len, blocks)) - min(map(len, blocks)) <= 1
    sp = scheduled_plan(base_plan, sched)
    runs = step_counts(sp, sched.sliced, groups, frozenset(sched.kept))
    assert runs == _walk(sp, many, sched.kept)
    assert runs[-1] == math.ceil(sched.n_slices / groups)
    one = step_counts(sp, sched.sliced, 1, frozenset(sched.kept))
    # the work a kept output spares splits between the groups
    assert sum(runs) < sum(one) and sum(runs) * groups <= sum(one) + groups * len(runs)


@pytest.mark.parametrize("n,groups", [(12, 8), (10, 4), (16, 4), (7, 7), (9, 2)])
def test_prefix_counts_match_the_blocks(n, groups):
    from qsimdist.planner.reuse import prefix_counts

    strides = [st for st in range(1, n + 1)]
    want = [max(len({s // st for s in range(g * n // groups, (g + 1) * n // groups)})
                for g in range(groups)) for st in strides]
    assert prefix_counts(n, groups, strides) == want


@pytest.mark.parametrize("frac", [32, 128])
def test_order_loss_names_the_steps_run_again_and_the_copies_that_would_spare_them(base_plan,
                                                                                   frac):
    """order_loss adds up to every-kept minus once-per-value, and a walk of the slices with
    a copy per value of each step's later indices runs that step once per value, holding
    at most the copies order_loss names."""
    from qsimdist.planner.distribution.reuse import breakdown, order_loss

    _, _, sched = _reused(base_plan, frac, 1)
    sp = scheduled_plan(base_plan, sched)
    o = order_loss(sp, sched, top=len(sp.steps))
    b = breakdown(sp, sched, base_plan.stats.flops)
    assert o["steps"], "a sliced circuit whose steps depend on different indices reruns some"
    assert o["extra_flops"] == pytest.approx(b["every_kept"] - b["once_per_value"], rel=1e-9)
    assert sum(r["share"] for r in o["steps"]) == pytest.approx(1.0)
    assert 0.0 <= o["fits_share"] <= 1.0
    size = sp.network.size_dict
    order = list(sched.sliced)
    sizes = [size[ix] for ix in order]

    def values(s: int) -> dict:
        out = {}
        for ix, n in zip(reversed(order), reversed(sizes)):
            s, out[ix] = divmod(s, n)
        return out

    from qsimdist.planner.reuse import sliced_sets

    sets = sliced_sets(sp, order)
    for r in o["steps"]:
        deps = sets[sp.steps[r["step"]].out]
        pos = {ix: k for k, ix in enumerate(order)}
        assert r["reruns_for"] and all(ix not in deps for ix in r["reruns_for"])
        first = pos[r["reruns_for"][0]]
        assert all(pos[ix] < max(pos[d] for d in deps) for ix in r["reruns_for"])
        outer = [ix for ix in order if ix in deps and pos[ix] < first]
        inner = [ix for ix in order if ix in deps and pos[ix] > first]
        runs, copies, key, most = 0, set(), None, 0
        for s in range(sched.n_slices):
            v = values(s)
            k = tuple(v[ix] for ix in outer)
            if k != key:
                key, copies = k, set()
            c = tuple(v[ix] for ix in inner)
            if c not in copies:
                copies.add(c)
                runs += 1
            most = max(most, len(copies))
        assert runs == math.prod(size[ix] for ix in deps)
        assert most == r["versions"]
        assert r["bytes_all_versions"] == r["bytes_per_version"] * r["versions"]
