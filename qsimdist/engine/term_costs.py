"""The cost of expectation-value terms before they run: :func:`term_costs`.

The engine takes the same decisions it takes to run the terms (the router's route,
the tensor-network method, each term's simplified doubled network or the light-cone
state, the plan within the memory limit, from the same plan cache), and stops where
it would contract: each plan is priced by :func:`qsimdist.planner.estimate.plan_cost`
instead. A run of the same terms on the same engine then reuses those plans, so the
FLOPs priced are the FLOPs executed. The statevector and stabilizer routes contract
nothing: their terms carry the route's predicted seconds alone.

Every time is a prediction of the cost model; FLOPs, bytes and slices are counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..planner.estimate import ContractionCost, plan_cost, seconds_text


@dataclass(frozen=True)
class TermCost:
    """One term's cost.

    Attributes
    ----------
    label : str
        The term's label as given.
    method : str
        ``doubled`` (its own doubled light-cone network), ``state`` (one light-cone
        state shared by the call's terms), ``statevector``, ``stabilizer`` or
        ``trivial`` (the identity: nothing to compute).
    contraction : ContractionCost or None
        The contraction's cost (``None`` where nothing is contracted); a ``state``
        contraction is shared: every such term names the same one.
    predicted_seconds : float
        This term's predicted time here: its contraction's, or its share of the
        route's (statevector, stabilizer). The first term whose contraction runs the
        compiled kernels also carries their first load in this process, where they are
        not loaded yet (:data:`~qsimdist.hardware.costs.STARTUP_SECONDS`, about 0.7 s:
        numba imported, the cached machine code read).
    plan_seconds : float, default 0.0
        Seconds spent planning it now (path search, slicing), which the run does not
        spend again.
    """

    label: str
    method: str
    contraction: ContractionCost | None
    predicted_seconds: float
    plan_seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["contraction"] = None if self.contraction is None else self.contraction.to_dict()
        return d

    def summary(self) -> str:
        head = f"{self.label}: {self.method}"
        if self.contraction is None:
            return f"{head}, predicted {seconds_text(self.predicted_seconds)} here"
        text = f"{head}, {self.contraction.summary()}"
        extra = self.predicted_seconds - self.contraction.predicted_seconds
        if self.method == "doubled" and extra > 0:
            text += (f"; {seconds_text(self.predicted_seconds)} with this process's first load "
                     f"of the compiled kernels (+{seconds_text(extra)})")
        return text


class CostRecorder:
    """What an engine records while it prices instead of running (its ``_costing``)."""

    def __init__(self, profile=None, devices: int | None = None) -> None:
        self.profile = profile
        self.devices = devices
        self.contractions: list[tuple[ContractionCost, float]] = []
        self.route = None
        self.route_terms = 0

    def record(self, plan, plan_seconds: float) -> np.ndarray:
        """Price ``plan``; the zeros returned stand for its result (never used as a value)."""
        self.contractions.append((plan_cost(plan, self.profile, self.devices), plan_seconds))
        shape = tuple(plan.network.size_dict[i] for i in plan.network.output)
        return np.zeros(shape, dtype=np.complex128)

    def routed(self, route, n_terms: int) -> np.ndarray:
        """A route that contracts nothing (statevector, stabilizer) was chosen."""
        self.route = route
        self.route_terms = n_terms
        return np.zeros(n_terms)


def _route_seconds(route) -> float:
    for name in ("statevector_seconds", "stabilizer_seconds", "tensor_network_seconds"):
        value = getattr(route, name, None)
        if route.method in name and value is not None and math.isfinite(value):
            return float(value)
    return math.nan


def term_costs(engine, circuit, terms: Sequence, labels: Sequence[str], *, profile=None,
               devices: int | None = None) -> list[TermCost]:
    """Each term's :class:`TermCost` on ``engine`` (an
    :class:`~qsimdist.engine.expectation.ExpectationEngine`), nothing contracted.

    ``profile`` (a hardware profile name) and ``devices``: also each contraction's dp
    schedule on that many devices of it. The engine's :attr:`stats` are left as they were.
    """
    from .results import ExpectationStats

    recorder = CostRecorder(profile, devices)
    stats, route = engine.stats, engine.route
    engine.stats, engine._costing = ExpectationStats(), recorder
    try:
        engine.term_values(circuit, list(terms))
        method = (engine.route or {}).get("method")
    finally:
        engine.stats, engine._costing, engine.route = stats, None, route
    live = [i for i, t in enumerate(terms) if t.qubits]
    out = [TermCost(label, "trivial", None, 0.0) for label in labels]
    if recorder.route is not None:  # statevector or stabilizer: the route's time, shared
        share = _route_seconds(recorder.route) / max(1, len(live))
        for i in live:
            out[i] = TermCost(labels[i], recorder.route.method, None, share)
        return out
    made = recorder.contractions
    if len(made) == len(live):  # one contraction per live term
        for (cost, spent), i in zip(made, live):
            out[i] = TermCost(labels[i], "doubled", cost, cost.predicted_seconds, spent)
    elif len(made) == 1:  # one light-cone state for every live term
        cost, spent = made[0]
        for i in live:
            out[i] = TermCost(labels[i], method or "state", cost,
                              cost.predicted_seconds / len(live), spent / len(live))
    elif live:
        raise AssertionError(f"{len(made)} contractions priced for {len(live)} live terms")
    return with_kernel_startup(out)


def with_kernel_startup(out: list[TermCost]) -> list[TermCost]:
    """``out`` with the compiled contraction kernels' first load in this process added to
    the first term that runs them (none where they are loaded already)."""
    from ..executors import contraction_startup_seconds

    for i, term in enumerate(out):
        if term.contraction is not None and term.contraction.compiled_steps:
            startup = contraction_startup_seconds()
            if startup:
                out[i] = replace(term, predicted_seconds=term.predicted_seconds + startup)
            break
    return out


__all__ = ["CostRecorder", "TermCost", "term_costs", "with_kernel_startup"]
