"""The ``qsimdist expect`` command: expectation values of Pauli labels on a circuit file.

Labels follow Qiskit's order (rightmost character = qubit 0) unless ``--order
natural`` (character i = qubit i). Final measurements are ignored and a
mid-circuit measurement is refused, as for amplitudes. ``--cost`` prints each
term's predicted cost instead, contracting nothing. Needs no Qiskit for files
other than OpenQASM 3.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Optional

import typer

from ..config import check_order, reorder_bits
from ..errors import InvalidInputError
from .common import (
    Backend,
    BackendOpt,
    Dtype,
    DtypeOpt,
    JsonOpt,
    MemOpt,
    Order,
    OrderOpt,
    ProfileOpt,
    check_profile,
    devices_opt,
    method_opt,
)

logger = logging.getLogger(__name__)


def expect(
    circuit: Path = typer.Argument(
        ..., help="Circuit file (.qasm OpenQASM 2/3, .qasm3, .qsim)."
    ),
    observable: list[str] = typer.Option(
        ..., "--observable", "-O",
        help="Pauli label such as ZZII, one character per qubit, rightmost = qubit 0 unless "
        "--order natural (I, X, Y, Z; the projectors 0, 1, +, -, r, l also work). Repeat for "
        "more.",
    ),
    dtype: Dtype = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    backend: Backend = BackendOpt,
    method: str = method_opt(
        "auto (the router's cheapest), statevector, state (one light-cone state), doubled "
        "(each term's doubled network) or stabilizer (Clifford circuits, stim)."),
    profile: Optional[str] = ProfileOpt,
    order: Order = OrderOpt,
    cost: bool = typer.Option(
        False, "--cost", help="Print each term's cost instead of its value, contracting "
        "nothing: method, FLOPs, largest intermediate, peak memory, slices and the predicted "
        "time here; with --profile, also the dp schedule's predicted time on --devices of it."),
    devices: Optional[int] = devices_opt(
        "With --cost and --profile: devices P (a power of two; default one node of the "
        "profile)."),
    as_json: bool = JsonOpt,
) -> None:
    """Expectation values <psi|P|psi> of Pauli labels on CIRCUIT's state (rightmost = qubit 0).

    Values are computed in complex64 unless '--dtype complex128' (about 7
    significant digits against 16).

    The router picks the route predicted cheapest: the full statevector (every
    term read off one state, where it fits a quarter of the memory limit), one
    light-cone state for all terms, or each term's doubled network over its
    backward light cone. Under 'mpiexec -n P' with at least P labels, each rank
    values its share of them alone; with fewer, the plans are made on rank 0 for P
    ranks and run distributed. Rank 0 prints.

    '--cost' prints what each term would cost instead, before anything runs (every time
    labelled predicted): 'qsimdist expect c.qasm -O ZZII --cost --profile dgx-h100
    --devices 8'.
    """
    from ..engine import Engine, RunOptions, parse_term
    from ..errors import ExecutionError
    from ..frontends import GateCircuit, load

    check_order(order)
    check_profile(profile)  # refused before any work, under mpiexec or not
    gc = load(circuit)
    if not isinstance(gc, GateCircuit):
        raise InvalidInputError(
            f"{circuit} is a tensor network; 'qsimdist expect' needs a circuit file "
            "(.qasm, .qasm3, .qsim)"
        )
    for label in observable:
        parse_term(label, gc.n_qubits)  # every label is checked before any contraction
    # the engine reads labels in Qiskit's order; natural order is its mirror image
    labels = [reorder_bits(label, order) for label in observable]
    if devices is not None and not cost:
        raise InvalidInputError("--devices is for --cost (with --profile)")
    # one engine for the command: priced in this process (--profile names the hardware
    # priced), run by the executor mpiexec asks for (--profile: the hardware planned for)
    run = RunOptions.resolve(dtype=dtype, memory_limit=memory_limit, backend=backend,
                             executor="local" if cost else "auto",
                             profile=None if cost else profile)
    engine = Engine(run, method=method)
    if cost:
        return _print_costs(engine, gc, observable, labels, profile, devices, as_json)
    logger.info("%d observable(s) on %s: %d qubit(s), %d gate(s)", len(labels), circuit,
                gc.n_qubits, len(gc.gates))
    values = engine.expectation(gc, labels)
    logger.info("expectation values done: route %s", (engine.route or {}).get("method"))
    if engine.run.runner.rank != 0:  # rank 0 prints
        return
    if not all(math.isfinite(v) for v in values):
        raise ExecutionError("a contraction returned a non-finite expectation value")
    if as_json:
        typer.echo(json.dumps({
            "n_qubits": gc.n_qubits,
            "order": order,
            "expectations": [{"observable": label, "value": float(v)}
                             for label, v in zip(observable, values)],
            "stats": engine.stats.to_dict(),
            "route": engine.route,
        }))
        return
    width = max(len(label) for label in observable)
    for label, v in zip(observable, values):
        typer.echo(f"{label:<{width}}  {float(v): .12f}")
    s = engine.stats
    route = (engine.route or {}).get("method", "none")
    typer.echo(
        f"# route {route}, {s.terms} term(s), {s.contractions} contraction(s), "
        f"{s.plans_made} plan(s) made, "
        f"largest light cone {s.max_light_cone_qubits} qubit(s), plan {s.plan_seconds:.2f}s, "
        f"execute {s.execute_seconds:.2f}s",
        err=True,
    )


def _print_costs(engine, gc, observable: list[str], labels: list[str],
                 profile: Optional[str], devices: Optional[int], as_json: bool) -> None:
    """``--cost``: each term's :class:`~qsimdist.engine.term_costs.TermCost` on ``engine``
    (:meth:`~qsimdist.engine.engine.Engine.cost`), nothing run."""
    from ..planner.estimate import seconds_text

    costs = engine.cost(gc, labels, profile=profile, devices=devices)
    if as_json:
        typer.echo(json.dumps({"n_qubits": gc.n_qubits, "predicted": True, "costs": [
            dict(c.to_dict(), observable=label) for label, c in zip(observable, costs)]}))
        return
    width = max(len(label) for label in observable)
    for label, c in zip(observable, costs):
        typer.echo(f"{label:<{width}}  {c.summary().split(': ', 1)[1]}")
    total = sum(c.predicted_seconds for c in costs if math.isfinite(c.predicted_seconds))
    typer.echo(f"# {len(costs)} term(s), predicted {seconds_text(total)} here (cost model; "
               "nothing was contracted)", err=True)


__all__ = ["expect"]
