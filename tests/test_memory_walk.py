"""The walk of ``memory_limit`` from ``SamplerV2`` to the memory guard.

A *stay* is a function on the call stack, at the moment the guard
(:meth:`MemoryBudget.check_plan <qsimdist.engine.memory.MemoryBudget.check_plan>`)
runs, whose arguments hold the limit: the raw option, its resolved
:class:`~qsimdist.engine.memory.MemoryBudget`, or an object carrying either (the
run options, the contractor, the sampler itself). The limit is resolved once, where the
sampler builds its engine; no call and no stay on the way resolves it again.
"""

from __future__ import annotations

import sys

import pytest

RAW = "3GiB"
#: the most stays the walk may make (issue: the engine as one object). 10 since the engine
#: became one object that the door builds once (issue 53): the door's call and its pub, the
#: engine's verb and its pub loop, the circuit's draw, the route, the chain of draws, the
#: contractor, the plan cache and the guard; the limit is resolved once, at construction
MAX_STAYS = 10


def _holds(value, budget_type, depth: int = 0) -> bool:
    if value is RAW or isinstance(value, budget_type):
        return True
    if depth >= 2 or isinstance(value, type):
        return False
    if isinstance(value, dict):
        return any(_holds(v, budget_type, depth + 1) for v in value.values())
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        return any(_holds(getattr(value, f, None), budget_type, depth + 1) for f in fields)
    try:
        attrs = vars(value)
    except TypeError:
        return False
    return any(_holds(v, budget_type, depth + 1) for v in attrs.values())


def _wide_sampled_circuit(n: int = 40):
    from qiskit import QuantumCircuit

    qc = QuantumCircuit(n)
    qc.h(range(n))
    for i in range(n - 1):
        qc.cx(i, i + 1)
    qc.t(range(n))
    qc.measure_all()
    return qc


def test_the_limit_reaches_the_guard_in_at_most_eight_stays_and_is_resolved_once(monkeypatch):
    import qsimdist.engine.memory as memory
    from qsimdist.qiskit import SamplerV2

    budget_type = memory.MemoryBudget
    walks: list[list[str]] = []
    resolutions: list[object] = []
    check_plan = budget_type.check_plan
    resolve = budget_type.resolve.__func__

    def counting_resolve(cls, value=None, comm=None):
        if not isinstance(value, budget_type):  # a resolution, not a pass-through
            resolutions.append(value)
        return resolve(cls, value, comm)

    def guard(self, plan):
        stays, frame = ["MemoryBudget.check_plan"], sys._getframe(1)  # the guard: a stay
        while frame is not None:
            code = frame.f_code
            if "qsimdist" in code.co_filename and code.co_filename != __file__:
                n_args = code.co_argcount + code.co_kwonlyargcount
                args = [frame.f_locals.get(name) for name in code.co_varnames[:n_args]]
                if any(_holds(a, budget_type) for a in args):
                    stays.append(code.co_qualname)
            frame = frame.f_back
        walks.append(stays[::-1])  # from the door to the guard
        return check_plan(self, plan)

    monkeypatch.setattr(budget_type, "resolve", classmethod(counting_resolve))
    monkeypatch.setattr(budget_type, "check_plan", guard)
    sampler = SamplerV2(options={"memory_limit": RAW})
    assert resolutions == [RAW]  # once, where the door builds its engine
    sampler.run([_wide_sampled_circuit()], shots=10).result()
    sampler.run([_wide_sampled_circuit()], shots=10).result()
    assert walks, "the sampler's contractions never reached the memory guard"
    assert resolutions == [RAW], resolutions  # never again, call after call
    for stays in walks:
        assert stays[-1] == "MemoryBudget.check_plan", stays
        assert stays[0].startswith("SamplerV2."), stays
        assert len(stays) <= MAX_STAYS, stays


def test_the_walk_counts_a_stay_it_should(monkeypatch):
    """The tracer is not blind: a limit handed down one more function is one more stay."""
    from qsimdist.engine.memory import MemoryBudget

    budget = MemoryBudget.resolve(RAW)

    def inner(b):
        return [f for f in (sys._getframe(0), sys._getframe(1))
                if _holds(f.f_locals.get("b"), MemoryBudget)]

    def outer(b):
        return inner(b)

    assert len(outer(budget)) == 2
    assert len(outer(None)) == 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.mark.parametrize("door", ["SamplerV2", "EstimatorV2"])
@pytest.mark.parametrize("options,words", [
    ({"memory_limit": "bogus"}, "cannot read memory size 'bogus'"),
    ({"backend": "torch"}, "unknown backend 'torch'; valid: numpy, cupy"),
    ({"profile": "nope"}, "unknown hardware profile 'nope'"),
    ({"executor": "gpu"}, "unknown executor 'gpu'"),
])
def test_each_door_refuses_bad_options_at_construction(door, options, words):
    """Bad input fails where the door is built, not at its first run (issue 44: every door
    builds its options once, at construction)."""
    import qsimdist.qiskit as primitives
    from qsimdist.errors import QsimdistError

    with pytest.raises(QsimdistError, match=words):
        getattr(primitives, door)(options=options)
    getattr(primitives, door)(options={"memory_limit": "2GiB"})  # a readable one is taken
