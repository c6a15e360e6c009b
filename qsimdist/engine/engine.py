"""One engine object: :class:`Engine`, what every door builds once and calls.

A door (:mod:`qsimdist.api`, :mod:`qsimdist.quimb`, the Qiskit primitives and backend,
the QEC decoder, the commands) resolves its run options once
(:meth:`RunOptions.resolve <qsimdist.engine.options.RunOptions.resolve>`), builds one
``Engine(run)`` and turns its inputs into calls of four verbs:

========================================  ============================================
verb                                      what it does
========================================  ============================================
:meth:`Engine.amplitudes`                 amplitudes of bitstrings or patterns
                                          (:mod:`qsimdist.engine.amplitudes`)
:meth:`Engine.sample`                     shots of measured qubits, or of a sampler's
                                          pubs (:mod:`qsimdist.engine.sampling`,
                                          :mod:`qsimdist.engine.draws`)
:meth:`Engine.expectation`                Pauli terms of a circuit, or the pubs of an
                                          estimator call (:mod:`qsimdist.engine.estimates`)
:meth:`Engine.contract`                   a network, or a plan made for one
========================================  ============================================

and :meth:`Engine.cost`, the price of what :meth:`Engine.expectation` would run. The
engine owns :attr:`~Engine.run`, :attr:`~Engine.stats` and the last
:attr:`~Engine.route`; the services it runs them with
(:class:`~qsimdist.engine.contractor.Contractor`,
:class:`~qsimdist.engine.expectation.ExpectationEngine`) are built from its one ``run``, so
nothing reads the environment or the free memory again mid-run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..frontends import GateCircuit
from ..network import Network
from ..planner.plan import Plan
from .options import RunOptions

if TYPE_CHECKING:
    from .contractor import Contractor
    from .expectation import ExpectationEngine
    from .results import AmplitudeResult, ExpectationStats


class Engine:
    """The engine of one door: its resolved options, its services, what it did.

    Parameters
    ----------
    run : RunOptions, optional
        The resolved options (:class:`~qsimdist.engine.options.RunOptions`); ``None``:
        :meth:`RunOptions.resolve` with its defaults.
    method : str, default "auto"
        How :meth:`expectation` values terms (``auto``, ``statevector``, ``doubled``,
        ``state``, ``stabilizer``; see
        :class:`~qsimdist.engine.expectation.ExpectationEngine`).
    state_max_qubits : int, default 20
        The widest light-cone state the ``state`` method may open (1..40).

    Attributes
    ----------
    run : RunOptions
        The resolved options every verb runs with.
    plan : Plan or None
        The plan of the last :meth:`contract` (``None`` before one).

    Raises
    ------
    InvalidInputError
        An unknown ``method`` or a ``state_max_qubits`` outside 1..40.
    """

    def __init__(self, run: RunOptions | None = None, *, method: str = "auto",
                 state_max_qubits: int = 20) -> None:
        from .expectation import check_term_options

        check_term_options(method, state_max_qubits)
        self.run = run if run is not None else RunOptions.resolve()
        self.method = method
        self.state_max_qubits = state_max_qubits
        self.plan: Plan | None = None
        self._contractor: Contractor | None = None
        self._terms: ExpectationEngine | None = None
        self._route: dict | None = None
        self._parsed: dict = {}  # (label, qubits) -> PauliTerm: a loop's labels repeat

    @classmethod
    def serving(cls, terms: ExpectationEngine) -> Engine:
        """An engine whose term service is ``terms``: its run, method, plans and statistics.

        Parameters
        ----------
        terms : ExpectationEngine
            The service :meth:`expectation` and :meth:`cost` then run on (built alone, as
            ``expectation_values(..., engine=ExpectationEngine(...))`` is given one).

        Returns
        -------
        Engine
            An engine of ``terms.run``.
        """
        engine = cls(terms.run, method=terms.method, state_max_qubits=terms.state_max_qubits)
        engine._terms = terms
        return engine

    # ------------------------------------------------------------------ what it holds
    @property
    def contractor(self) -> Contractor:
        """The service that contracts the sampling methods' networks through cached plans."""
        if self._contractor is None:
            from .contractor import Contractor

            self._contractor = Contractor(run=self.run)
        return self._contractor

    @property
    def terms(self) -> ExpectationEngine:
        """The service that values Pauli terms (and keeps their plans and held states)."""
        if self._terms is None:
            from .expectation import ExpectationEngine

            self._terms = ExpectationEngine(run=self.run, method=self.method,
                                            state_max_qubits=self.state_max_qubits)
        return self._terms

    @property
    def stats(self) -> ExpectationStats:
        """What :meth:`expectation` did so far: terms by route, contractions, plans, seconds."""
        return self.terms.stats

    @property
    def route(self) -> dict | None:
        """The route of the last verb (the router's record, as every result reports it)."""
        return self._route

    @property
    def budget(self):
        """The memory budget (:class:`~qsimdist.engine.memory.MemoryBudget`) of :attr:`run`."""
        return self.run.memory

    def shared_seed(self):
        """A fresh seed, rank 0's on every rank under a distributed executor."""
        return self.run.runner.shared_seed()

    def term(self, label: str, n_qubits: int):
        """``label`` parsed (:func:`~qsimdist.engine.pauli_terms.parse_term`), once per
        engine.

        Parameters
        ----------
        label : str
            A Pauli label in Qiskit order (rightmost character = qubit 0).
        n_qubits : int
            The circuit's width (the label's length).

        Returns
        -------
        PauliTerm

        Raises
        ------
        InvalidInputError
            A label of the wrong length or with a character outside
            ``I X Y Z 0 1 + - r l``.
        """
        key = (label, n_qubits)
        found = self._parsed.get(key)
        if found is None:
            from .pauli_terms import parse_term

            found = parse_term(label, n_qubits)
            if len(self._parsed) >= TERMS_KEPT:
                self._parsed.clear()
            self._parsed[key] = found
        return found

    # ------------------------------------------------------------------ the verbs
    def amplitudes(self, circuit, bits, *, order: str = "qiskit",
                   simplify_sequence: str | None = None, progress=None, batch: bool = True,
                   method: str = "auto") -> AmplitudeResult:
        """Amplitudes ``<b|U|0>`` of ``circuit`` for ``bits``:
        :func:`~qsimdist.engine.amplitudes.run_amplitudes` with :attr:`run`.

        Parameters
        ----------
        circuit : GateCircuit or circuit source
            A :class:`GateCircuit` or anything :func:`qsimdist.frontends.load` reads.
        bits : str or sequence of str
            Bitstrings or ``*`` patterns.
        order : {"qiskit", "natural"}
            How a bitstring's characters map to qubits.
        simplify_sequence : str, optional
            Simplification letters (``None``: the default, ``"ADCRS"``).
        progress : callable, optional
            ``progress(stage, done, total)``, reporting contractions done.
        batch : bool, default True
            Batch bitstrings without ``*`` into shared contractions.
        method : {"auto", "statevector", "tensor-network"}
            The route (``auto``: the one predicted cheaper).

        Returns
        -------
        AmplitudeResult
        """
        from ..planner.simplify import DEFAULT_SEQUENCE
        from .amplitudes import run_amplitudes

        result = run_amplitudes(
            circuit, bits, self.run, order=order,
            simplify_sequence=DEFAULT_SEQUENCE if simplify_sequence is None else simplify_sequence,
            opts=self.run.path_options, progress=progress, batch=batch, method=method)
        self._route = result.stats.get("route")
        return result

    def sample(self, program, measured: Sequence[int] | None = None, shots: int = 1024,
               rng: np.random.Generator | None = None, method: str = "auto"):
        """Shots of ``program`` on ``|0...0>``, by the route the router prices cheapest.

        ``program`` a :class:`GateCircuit`: ``shots`` bitstrings of its ``measured`` qubits
        (:func:`~qsimdist.engine.sampling.sample_bits`). ``program`` a bound Qiskit circuit
        (dynamic ones included) or a :class:`~qsimdist.frontends.lowering.LoweredCircuit`:
        every clbit's values (:func:`~qsimdist.engine.draws.draw_circuit`; ``measured``
        unused). Either gives a :class:`~qsimdist.engine.draws.DrawnSample`.

        ``program`` a :class:`~qsimdist.engine.draws.SamplePub` (a sampler pub, translated):
        each parameter set's clbits handed to its ``keep``, and a
        :class:`~qsimdist.engine.draws.PubShots` (the pub's report) returned.

        Parameters
        ----------
        program : GateCircuit, QuantumCircuit, LoweredCircuit or SamplePub
            What to sample (see above).
        measured : sequence of int, optional
            For a :class:`GateCircuit`: the qubits measured, in the bitstrings' order.
        shots : int, default 1024
            The number of shots (a :class:`SamplePub` carries its own).
        rng : numpy.random.Generator, optional
            The generator every uniform number is drawn from (default: a fresh one
            from :meth:`shared_seed`).
        method : str, default "auto"
            The sampling method (``auto`` by predicted cost; see
            :class:`~qsimdist.qiskit.sampler.SamplerOptions`).

        Returns
        -------
        DrawnSample or PubShots
        """
        from .draws import DrawnSample, SamplePub, draw_circuit, draw_pub

        if rng is None:
            rng = np.random.default_rng(self.shared_seed())
        if isinstance(program, SamplePub):
            found = draw_pub(self, program, rng)
            self._route = found.summary.get("route")
            return found
        if isinstance(program, GateCircuit):
            from .sampling import sample_bits

            order = [int(q) for q in measured]
            bits, info, probs = sample_bits(program, order, shots, rng, self.contractor, method)
            found = DrawnSample(bits, info, program, None, order, bits, probs)
        else:
            found = draw_circuit(self, program, shots, rng, method)
        self._route = found.info.extra.get("route")
        return found

    def expectation(self, program, terms=None):
        """Expectation values.

        ``program`` a :class:`GateCircuit`, ``terms`` Pauli labels (Qiskit order) or
        :class:`~qsimdist.engine.pauli_terms.PauliTerm`: ``Re <psi|P|psi>`` per term
        (float64), ``psi = U|0...0>``.

        ``program`` a list of :class:`~qsimdist.engine.estimates.EstimatePub` (an
        estimator call's pubs, translated; ``terms`` unused): one
        :class:`~qsimdist.engine.estimates.PubValues` per pub, the pubs that share a
        circuit and labels valued together (:func:`~qsimdist.engine.estimates.estimate`).

        Parameters
        ----------
        program : GateCircuit or list of EstimatePub
            The circuit, or an estimator call's pubs.
        terms : sequence of str or PauliTerm, optional
            For a circuit: the terms (one label alone is taken as a list of one).

        Returns
        -------
        numpy.ndarray or list of PubValues
        """
        if isinstance(program, GateCircuit):
            engine = self.terms
            values = engine.term_values(program, self._parsed_terms(program, terms))
            self._route = engine.route
            return values
        from .estimates import estimate

        out = estimate(self, list(program))
        if out:
            self._route = out[-1].route
        return out

    def contract(self, net: Network | Plan, *, dtype: str | None = None,
                 simplify_sequence: str = "", strip_exponent: bool = False, progress=None,
                 run_stats=None):
        """The value of ``net`` (its axes follow ``net.output``), through the process's plan
        cache (:data:`~qsimdist.engine.cache.PLANS`) under :attr:`run`; a :class:`Plan` runs
        as it is (its network's arrays), checked against the budget first.

        The plan run is :attr:`plan` afterwards.

        Parameters
        ----------
        net : Network or Plan
            The network (with its arrays), or a plan to run as it is.
        dtype : str, optional
            Compute in this dtype instead of ``run.dtype`` (the quimb doors follow each
            network's arrays).
        simplify_sequence : str, default ""
            Simplification letters applied first
            (:func:`~qsimdist.planner.simplify.simplify_within`).
        strip_exponent : bool, default False
            Return ``(mantissa, exponent)``, the value ``mantissa * 10**exponent``, the
            intermediates rescaled as the plan runs.
        progress : callable, optional
            ``progress("slices", done, total)`` as slices finish.
        run_stats : RunStats, optional
            A :class:`~qsimdist.executors.RunStats` a distributed executor fills with
            this rank's measurements.

        Returns
        -------
        numpy.ndarray or tuple of (numpy.ndarray, float)
            The value, or its mantissa and exponent.

        Raises
        ------
        PlanError
            The plan's peak exceeds the memory budget.
        """
        from .cache import small_first

        run = self.run if dtype in (None, self.run.dtype) else dataclasses.replace(
            self.run, dtype=dtype)
        extra = {"strip_exponent": True} if strip_exponent else {}
        if run_stats is not None:
            extra["stats"] = run_stats
        with inside_qsimdist():
            if isinstance(net, Plan):
                plan = net
                if not run.distributed:
                    run.memory.check_plan(plan)
            else:
                from ..planner.simplify import simplify_within
                from .cache import PLANS

                if simplify_sequence:
                    net = simplify_within(net, simplify_sequence, run.limit, run.dtype)
                # checked against the budget in one process; distributed, made unsliced on
                # rank 0 for the profile and checked by every rank as it runs
                plan, _ = PLANS.plan_for(net, run,
                                         build=small_first(net, run.dtype, run.path_options))
            out = plan.execute(backend=run.backend, gemm=run.gemm, progress=progress,
                               **run.execute_keywords(), **extra)
        self.plan = plan
        network = plan.network
        shape = tuple(network.size_dict[i] for i in network.output)
        if strip_exponent:
            mantissa, exponent = out
            return _as_numpy(mantissa).reshape(shape), float(exponent)
        return _as_numpy(out).reshape(shape)

    def cost(self, program, terms=None, *, profile: str | None = None,
             devices: int | None = None):
        """What :meth:`expectation` would cost, before anything is contracted.

        ``program`` a :class:`GateCircuit` and ``terms`` its labels: one
        :class:`~qsimdist.engine.term_costs.TermCost` per label. ``program`` a list of
        :class:`~qsimdist.engine.estimates.EstimatePub`: one dict per pub (``terms``,
        ``flops``, ``predicted_seconds``; :func:`~qsimdist.engine.estimates.pub_costs`).
        ``profile``/``devices``: also each contraction's dp schedule on that many devices
        of that hardware profile. The plans made are kept: a later run of the same work
        executes exactly the FLOPs priced here.

        Parameters
        ----------
        program : GateCircuit or list of EstimatePub
            The circuit, or an estimator call's pubs.
        terms : sequence of str, optional
            For a circuit: its Pauli labels (one label alone is taken as a list of one).
        profile : str, optional
            A hardware profile: also price each contraction's dp schedule on it.
        devices : int, optional
            Devices of ``profile`` (default: one node of it).

        Returns
        -------
        list of TermCost or list of dict

        Raises
        ------
        InvalidInputError
            ``devices`` without a ``profile``.
        ProfileError
            An unknown profile or a device count it cannot hold.
        """
        _check_cost_profile(profile, devices)
        if isinstance(program, GateCircuit):
            from .term_costs import term_costs

            labels = [terms] if isinstance(terms, str) else list(terms)
            return term_costs(self.terms, program, self._parsed_terms(program, labels),
                              labels, profile=profile, devices=devices)
        from .estimates import pub_costs

        return pub_costs(self, list(program), profile=profile, devices=devices)

    def _parsed_terms(self, circuit: GateCircuit, terms) -> list:
        if isinstance(terms, str):
            terms = [terms]
        n = circuit.n_qubits
        return [self.term(t, n) if isinstance(t, str) else t for t in terms]


#: parsed observable labels one engine keeps
TERMS_KEPT = 1 << 14
_STATE = threading.local()


@contextlib.contextmanager
def inside_qsimdist() -> Iterator[None]:
    """Mark this thread as running qsimdist (quimb calls made meanwhile are not re-routed)."""
    depth = getattr(_STATE, "depth", 0)
    _STATE.depth = depth + 1
    try:
        yield
    finally:
        _STATE.depth = depth


def inside_qsimdist_now() -> bool:
    """Whether this thread is running qsimdist now (quimb calls it makes are not re-routed)."""
    return bool(getattr(_STATE, "depth", 0))


def _as_numpy(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def _check_cost_profile(profile, devices) -> None:
    """Refuse ``devices`` without a ``profile``, an unknown profile or a device count it
    cannot hold (one line each)."""
    if devices is not None and profile is None:
        from ..errors import InvalidInputError

        raise InvalidInputError("devices needs a profile (see 'qsimdist profiles')")
    if profile is not None:
        from ..hardware.profiles import load_profile

        prof = load_profile(profile)  # an unknown name: one line with the valid ones
        prof.check_devices(devices or prof.devices_per_node)


__all__ = ["TERMS_KEPT", "Engine", "inside_qsimdist", "inside_qsimdist_now"]
