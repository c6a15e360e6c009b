"""The public functions for Pauli terms: :func:`expectation_values` and
:func:`expectation_costs` (``qsimdist.expectation_values``, ``qsimdist.expectation_costs``).

Each call resolves its run options once and calls one
:class:`~qsimdist.engine.engine.Engine`: its :meth:`~qsimdist.engine.engine.Engine.expectation`
or :meth:`~qsimdist.engine.engine.Engine.cost` verb. The service that values the terms is
:class:`~qsimdist.engine.expectation.ExpectationEngine`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError
from ..frontends import GateCircuit, load
from ..network import Network
from .engine import Engine
from .options import RunOptions

if TYPE_CHECKING:
    from ..planner.path import PathOptions
    from .expectation import ExpectationEngine
    from .term_costs import TermCost


def circuit_for_expectation(source) -> GateCircuit:
    """``source`` loaded (:func:`qsimdist.frontends.load`) as a circuit; a tensor network
    is refused in one line."""
    obj = load(source)
    if isinstance(obj, Network):
        raise InvalidInputError(
            "expectation values need a circuit, but this input is a tensor network"
        )
    return obj


def _engine_for(engine: Engine | ExpectationEngine | None, **run_keywords) -> Engine:
    """The engine a call runs on: the one given (a term service is wrapped, its plans
    and statistics kept), else one built from the call's run options, resolved once."""
    if engine is None:
        method = run_keywords.pop("method", "auto")
        return Engine(RunOptions.resolve(**run_keywords), method=method)
    if isinstance(engine, Engine):
        return engine
    return Engine.serving(engine)


def expectation_values(
    circuit,
    paulis: str | Sequence[str],
    *,
    dtype: str = "complex128",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    path_options: PathOptions | dict | None = None,
    executor: str = "local",
    profile=None,
    comm=None,
    engine: Engine | ExpectationEngine | None = None,
) -> np.ndarray:
    """``<psi|P|psi>`` for each Pauli label, ``psi`` the circuit's state on ``|0...0>``.

    Parameters
    ----------
    circuit : QuantumCircuit, str, os.PathLike, quimb Circuit or GateCircuit
        Anything :func:`qsimdist.frontends.load` accepts that is a circuit (a Qiskit
        ``QuantumCircuit`` with bound parameters, OpenQASM, .qsim, a quimb ``Circuit``,
        a :class:`~qsimdist.frontends.GateCircuit`). Final measurements are ignored; a
        mid-circuit measurement is refused.
    paulis : str or sequence of str
        One label or a list of labels in Qiskit order (rightmost character = qubit 0),
        characters ``I X Y Z`` (the projectors ``0 1 + - r l`` also work).
    dtype : {"complex128", "complex64"}
        The precision the terms are computed in.
    memory_limit : str, int or None
        Peak bytes per contraction (``"8GiB"``; ``None``: the machine's default;
        ``"none"``: no limit); per rank under ``executor="mpi"``.
    backend : {"numpy", "cupy"}
        The array library.
    path_options : PathOptions, dict or None
        Path search options.
    executor : {"local", "mpi", "auto"}
        ``"mpi"``: every rank of ``mpiexec`` makes the same call (see
        :class:`~qsimdist.engine.expectation.ExpectationEngine`).
    profile : str, optional
        Hardware profile the distributed plans are made for (``executor="mpi"``).
    comm : MPI communicator, optional
        The ranks under ``executor="mpi"`` (default ``MPI.COMM_WORLD``).
    engine : Engine or ExpectationEngine, optional
        The engine to run on, whose plans and statistics are kept across calls (an
        :class:`~qsimdist.engine.expectation.ExpectationEngine`: that service, run by an
        engine of its own options); the keywords above are then ignored.

    Returns
    -------
    numpy.ndarray
        float64, one value per label (the real part; a Hermitian term's value is real).
    """
    labels = [paulis] if isinstance(paulis, str) else list(paulis)
    gc = circuit_for_expectation(circuit)
    runner = _engine_for(engine, dtype=dtype, memory_limit=memory_limit, backend=backend,
                         path_options=path_options, executor=executor, profile=profile,
                         comm=comm)
    return runner.expectation(gc, labels)


def expectation_costs(
    circuit,
    paulis: str | Sequence[str],
    *,
    dtype: str = "complex128",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    path_options: PathOptions | dict | None = None,
    method: str = "auto",
    profile: str | None = None,
    devices: int | None = None,
    engine: Engine | ExpectationEngine | None = None,
) -> list[TermCost]:
    """What :func:`expectation_values` would cost for these labels, nothing contracted.

    Parameters
    ----------
    circuit : QuantumCircuit, str, os.PathLike, quimb Circuit or GateCircuit
        As for :func:`expectation_values`.
    paulis : str or sequence of str
        One label or a list, Qiskit order (rightmost character = qubit 0).
    dtype : {"complex128", "complex64"}
        The precision the terms would be computed in.
    memory_limit : str, int or None
        Peak bytes per contraction (``"8GiB"``; ``None``: the default).
    backend : {"numpy", "cupy"}
        The array library.
    path_options : PathOptions, dict or None
        Path search options.
    method : {"auto", "statevector", "doubled", "state", "stabilizer"}
        How the terms would be valued (``auto``: the router's cheapest).
    profile : str, optional
        A hardware profile name (``qsimdist profiles``): each contraction is also
        scheduled on ``devices`` devices of it (default: one node).
    devices : int, optional
        Devices of ``profile`` (a power of two).
    engine : Engine or ExpectationEngine, optional
        The engine to price on; it keeps the plans made, so its next run of these terms
        does not plan again. The keywords from ``dtype`` to ``method`` are then ignored.

    Returns
    -------
    list of TermCost
        One :class:`~qsimdist.engine.term_costs.TermCost` per label: method, FLOPs,
        largest intermediate, peak memory, slices, predicted seconds here, and the dp
        schedule on ``profile`` where asked.
    """
    labels = [paulis] if isinstance(paulis, str) else list(paulis)
    gc = circuit_for_expectation(circuit)
    runner = _engine_for(engine, dtype=dtype, memory_limit=memory_limit, backend=backend,
                         path_options=path_options, method=method)
    return runner.cost(gc, labels, profile=profile, devices=devices)


__all__ = ["circuit_for_expectation", "expectation_costs", "expectation_values"]
