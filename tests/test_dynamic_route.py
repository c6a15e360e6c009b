"""The router's decision for dynamic circuits (:func:`qsimdist.engine.route_dynamic`).

One function prices the trajectory route beside the deferred-measurement circuit for the
sampler's tree and the estimator's trajectories alike; its :class:`DynamicRoute` goes into
both primitives' result metadata, and the memory it weighs is the call's budget, resolved
once when the primitive was built (never again mid-run).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit

import qsimdist.engine.memory as memory
from qsimdist.engine import DynamicRoute, RunOptions, dynamic_prices, route_dynamic
from qsimdist.engine.dynamic_prices import TrajectoryPrices, working_bytes
from qsimdist.engine.trajectory import compile_program
from qsimdist.qiskit import EstimatorV2, SamplerV2

from .test_dynamic_trajectory import CIRCUITS

#: every field of the router's record, as the metadata carries it
ROUTE_KEYS = {f.name for f in dataclasses.fields(DynamicRoute)}


def iqpe(k_max: int = 14) -> QuantumCircuit:
    """Iterative phase estimation on two qubits: one ancilla measured ``k_max`` times,
    so its deferred-measurement circuit is far wider than the tree's state (the router
    takes the tree for the sampler too)."""
    qc = QuantumCircuit(2, k_max)
    qc.x(1)
    for k in range(k_max):
        qc.h(0)
        qc.cp(2 * np.pi * 0.3125 * 2 ** (k_max - 1 - k), 0, 1)
        for j in range(k):
            with qc.if_test((qc.clbits[j], 1)):
                qc.p(-np.pi / 2 ** (k - j), 0)
        qc.h(0)
        qc.measure(0, k)
    return qc


def with_final(qc: QuantumCircuit) -> QuantumCircuit:
    out = qc.copy()
    reg = ClassicalRegister(qc.num_qubits, "out")
    out.add_register(reg)
    out.measure(range(qc.num_qubits), reg)
    return out


def test_the_route_is_in_both_primitives_metadata():
    """The sampler's tree and the estimator's trajectories report the router's record
    whole (every DynamicRoute field), with the call's memory bound in it."""
    qc = iqpe()
    sampled = SamplerV2(seed=3, options={"memory_limit": "64MiB"}).run([qc], shots=500)
    route = sampled.result()[0].metadata["sampling"]["route"]
    assert ROUTE_KEYS <= set(route)
    assert route["method"] == "trajectory" and route["qubits"] == 2
    assert route["memory_bound"] == 64 << 20
    assert route["lowered_qubits"] == 2 + 14 - 1  # the last measurement is final
    assert route["trajectory_seconds"] <= dynamic_prices.TRY_SHARE * route["statevector_seconds"]
    assert route["leaves"] >= 1 and route["branch_points_simulated"] >= 1

    est = EstimatorV2(seed=3, options={"memory_limit": "64MiB"})
    res = est.run([(CIRCUITS["clbit_and_reset"](), [["ZZZ", "XIX"]] * 4)]).result()[0]
    route = res.metadata["route"]
    assert ROUTE_KEYS <= set(route)
    assert route["method"] == "trajectory" and route["qubits"] == 3
    assert route["memory_bound"] == 64 << 20
    assert route["statevector_bytes"] == working_bytes(3)
    assert route["states_kept"] == (64 << 20) // (16 << 3) - dynamic_prices.WORK_STATES
    assert res.metadata["qsimdist"]["statevector_terms"] > 0  # the trajectories' own terms


def test_sampler_and_estimator_decide_alike():
    """One program, one function: the two requests differ only in what they price (a
    leaf's marginal and the sampler's lowering, or the final state and the estimator's)."""
    run = RunOptions.resolve(memory_limit="1GiB")
    program = compile_program(with_final(CIRCUITS["register_and_expressions"]()))
    prices = TrajectoryPrices(program)
    shots = route_dynamic(prices, shots=True, run=run)
    terms = route_dynamic(prices, shots=False, run=run)
    assert isinstance(shots, DynamicRoute) and isinstance(terms, DynamicRoute)
    assert shots.trajectory_seconds == prices.one
    assert terms.trajectory_seconds == prices.cum[-1]
    assert (shots.lowered_qubits, terms.lowered_qubits) == (program.lowered_qubits,
                                                            program.collapsed_qubits)
    assert terms.method == "trajectory"
    # a method named, a Clifford circuit, the switch off: the deferred circuit, for both
    for kwargs in ({"method": "statevector"}, {"is_clifford": lambda: True}):
        for as_shots in (True, False):
            declined = route_dynamic(prices, shots=as_shots, run=run, **kwargs)
            assert declined.method == "deferred-measurement", kwargs
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dynamic_prices, "TERMS_SHARE", 0.0)
        assert "predicted above" in route_dynamic(prices, shots=False, run=run).reason


def test_the_memory_is_the_calls_budget():
    """A budget too small for the trajectories' working states: refused, the bound named;
    the same circuit under a larger one takes them."""
    program = compile_program(CIRCUITS["clbit_and_reset"]())
    prices = TrajectoryPrices(program)
    need = working_bytes(program.n)
    small = route_dynamic(prices, shots=False, run=RunOptions.resolve(memory_limit=need - 1))
    assert small.method == "deferred-measurement"
    assert small.memory_bound == need - 1 and "memory bound" in small.reason
    fits = route_dynamic(prices, shots=False, run=RunOptions.resolve(memory_limit=need))
    assert fits.method == "trajectory" and fits.memory_bound == need
    assert fits.states_kept == 0


def test_a_small_memory_limit_option_changes_the_route(monkeypatch):
    """Through the primitives: under ``memory_limit`` the trajectories' working states do
    not fit, so both take the deferred-measurement circuit (and their values stay exact)."""
    monkeypatch.setattr(dynamic_prices, "WORK_STATES", 1 << 20)  # 128 MiB for 3 qubits
    qc = CIRCUITS["clbit_and_reset"]()
    obs = [["ZZZ", "XIX"]] * 3
    small = EstimatorV2(seed=5, options={"memory_limit": "1MiB"}).run([(qc, obs)])
    large = EstimatorV2(seed=5, options={"memory_limit": "1GiB"}).run([(qc, obs)])
    small, large = small.result()[0], large.result()[0]
    assert small.metadata["route"]["method"] != "trajectory"
    assert large.metadata["route"]["method"] == "trajectory"
    assert large.metadata["route"]["memory_bound"] == 1 << 30
    np.testing.assert_allclose(small.data.evs, large.data.evs, atol=1e-8, rtol=0)
    monkeypatch.setattr(dynamic_prices, "TRY_SHARE", float("inf"))  # the tree whatever it costs
    tree = SamplerV2(seed=5, options={"memory_limit": "1MiB"}).run([with_final(qc)], shots=50)
    assert tree.result()[0].metadata["sampling"]["method"] != "trajectory"


def test_the_memory_limit_is_not_resolved_again_mid_run(monkeypatch):
    """Once the primitives are built, nothing on the dynamic route reads the environment or
    the free memory again: the resolver raising changes nothing."""
    sampler = SamplerV2(seed=1)
    estimator = EstimatorV2(seed=1)

    def resolved_again(*args, **kwargs):
        raise AssertionError("the memory limit was resolved again mid-run")

    monkeypatch.setattr(memory.MemoryBudget, "resolve", classmethod(resolved_again))
    monkeypatch.setattr(memory, "default_memory_limit", resolved_again)
    monkeypatch.setattr(memory, "machine_memory", resolved_again)
    res = sampler.run([iqpe()], shots=200).result()[0]
    assert res.metadata["sampling"]["route"]["method"] == "trajectory"
    res = estimator.run([(CIRCUITS["nested_conditions"](), [["ZZZ"]] * 3)]).result()[0]
    assert res.metadata["route"]["method"] == "trajectory"
