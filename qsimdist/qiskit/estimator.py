"""``EstimatorV2``: Qiskit's estimator primitive on light-cone-reduced tensor networks.

It follows :class:`qiskit.primitives.StatevectorEstimator`: a keyword-only
constructor (``default_precision``, ``seed``, ``options``), pubs coerced with
the public ``EstimatorPub.coerce``, parameter values broadcast against the
observables array, ``evs`` and ``stds`` in a ``DataBin`` of the pub's shape,
and ``precision`` with the reference's meaning: the values are exact, and a
positive precision adds Gaussian noise of that standard deviation, drawn from
``numpy.random.default_rng(seed)`` (a fresh generator per pub, in the pub's
index order, as the reference does; ``stds`` stay zero as there).

Every term of every observable is ``<psi|P|psi>`` on the doubled network with
the light cone removed (:mod:`qsimdist.engine.expectation`); a term met twice for one
parameter binding is contracted once, and terms of the same network structure
share one plan, kept by the estimator between calls. The pubs of one call that share a
circuit and a set of labels (a QNN's backward pass: a pub per sample) run, where the
batched statevector pass is taken, as one pass over all their parameter sets; each pub's
metadata counts its share.

Composite instructions are expanded through their definitions. A circuit with
``reset``, mid-circuit measurement or ``if_test`` blocks is evolved as
``StatevectorEstimator`` evolves one: every element of the pub's broadcast
shape samples one branch (the outcome of each reset and measurement) from the
pub's generator, and its values are those of that branch, so the same seed
gives the same values and the mean over elements is the mixed-state value.
The branch is drawn outcome by outcome from light-cone marginals of the
deferred-measurement circuit (:mod:`qsimdist.frontends.lowering`), and the values
are ``<psi|P (x) Pi_b|psi> / <psi|Pi_b|psi>`` with ``Pi_b`` the projector on
the branch. Where the router takes them (:func:`~qsimdist.engine.router.route_dynamic`:
one process, method ``auto``, a lowered form that is not Clifford) trajectories of the
circuit's own qubits' state run instead (:mod:`qsimdist.engine.trajectory_values`): the
same draws, the same values. Final
measurements (of qubits nothing uses afterwards, into bits nothing reads) are
ignored: the values are those before them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from qiskit.primitives import BaseEstimatorV2, DataBin, PrimitiveJob, PrimitiveResult, PubResult
from qiskit.primitives.containers.estimator_pub import EstimatorPub

from ..engine import Engine, EstimatePub, PubValues, absent_routes, check_term_options
from ..errors import InvalidInputError, shorten
from ..frontends.dynamic import needs_lowering
from ..frontends.qiskit_circuit import from_qiskit
from ..frontends.templates import TemplateCache
from .errors import qiskit_errors
from .options import PrimitiveOptions, submit_job


@dataclass(frozen=True)
class EstimatorOptions(PrimitiveOptions):
    """Options of :class:`EstimatorV2` (pass this or a dict as ``options``): the run
    options of :class:`~qsimdist.qiskit.options.PrimitiveOptions` (``dtype`` default
    ``complex128``, ``memory_limit``, ``backend``, ``executor``, ``profile``,
    ``path_options``) and the estimator's own.

    Parameters
    ----------
    dtype : {"complex64", "complex128"}
        The dtype contractions run in (default ``complex128``).
    memory_limit : str, int or None
        Peak bytes per contraction, per rank under MPI (see
        :class:`~qsimdist.qiskit.options.PrimitiveOptions`).
    backend : {"numpy", "cupy"}
        The array library.
    executor : {"auto", "local", "mpi"}
        As for :class:`~qsimdist.qiskit.options.PrimitiveOptions`.
    profile : str, optional
        Hardware profile the distributed plans are made for (default ``local-cpu``).
    path_options : PathOptions or dict, optional
        Contraction path search options.
    method : str, default "auto"
        ``auto`` (by predicted work), ``doubled`` (one doubled light-cone network
        per term), ``state`` (one light-cone state per circuit) or ``stabilizer``
        (a Clifford circuit on stim's tableau, exact at any width; ``auto`` takes it
        where predicted cheaper, nearly always).
    state_max_qubits : int, default 20
        Widest light-cone state the ``state`` method may open (1..40).

    Raises
    ------
    InvalidInputError
        An unknown method, a bad ``state_max_qubits``, or a run option outside its
        valid values.
    """

    _what = "estimator"

    dtype: str = "complex128"
    method: str = "auto"
    state_max_qubits: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        check_term_options(self.method, self.state_max_qubits)


class EstimatorV2(BaseEstimatorV2):
    """Exact expectation values of Pauli observables by light-cone tensor networks.

    Examples
    --------
    >>> from qiskit import QuantumCircuit
    >>> from qsimdist.qiskit import EstimatorV2
    >>> qc = QuantumCircuit(2); qc.h(0); qc.cx(0, 1)
    >>> EstimatorV2().run([(qc, ["ZZ", "XX", "ZI"])]).result()[0].data.evs
    array([1., 1., 0.])
    """

    def __init__(
        self,
        *,
        default_precision: float = 0.0,
        seed: np.random.Generator | int | None = None,
        options: EstimatorOptions | dict | None = None,
    ) -> None:
        """Create an estimator.

        Parameters
        ----------
        default_precision : float, default 0.0
            Precision of pubs that give none (0: exact values).
        seed : int, numpy.random.Generator or None
            Seed or generator of the noise added when the precision is positive, and
            of the branches sampled for circuits with resets or mid-circuit
            measurements.
        options : EstimatorOptions or dict, optional
            The estimator's options, or a dict of their fields. Aer's layout is read
            too: ``default_precision`` and ``run_options``
            (``{"seed_simulator": seed}``) may be given in the dict.

        Raises
        ------
        InvalidInputError
            Bad options, or a value given both as an argument and in the options.
        """
        with qiskit_errors():
            options, default_precision, seed = _aer_style_options(options, default_precision,
                                                                  seed)
            self._options = EstimatorOptions.coerce(options)
            # built once: the run options resolved here, the plans kept between calls
            self._engine = Engine(self._options.run_options(), method=self._options.method,
                                  state_max_qubits=self._options.state_max_qubits)
        self._default_precision = default_precision
        self._seed = seed
        self._lock = threading.Lock()
        #: each circuit met, converted once (:mod:`qsimdist.frontends.templates`)
        self._templates = TemplateCache()

    @property
    def default_precision(self) -> float:
        """The precision of pubs that give none."""
        return self._default_precision

    @property
    def seed(self) -> np.random.Generator | int | None:
        """The seed or generator of the noise added for a positive precision."""
        return self._seed

    @property
    def options(self) -> EstimatorOptions:
        """This estimator's options."""
        return self._options

    @property
    def engine(self) -> Engine:
        """The engine this estimator runs on (its statistics, route and plans)."""
        return self._engine

    def run(
        self, pubs: Iterable, *, precision: float | None = None
    ) -> PrimitiveJob[PrimitiveResult[PubResult]]:
        """Estimate expectation values of each pub; returns a submitted ``PrimitiveJob``.

        Parameters
        ----------
        pubs : iterable of EstimatorPubLike
            ``(circuit, observables[, parameter values[, precision]])`` tuples,
            coerced by ``EstimatorPub.coerce``.
        precision : float, optional
            Precision of pubs that give none (default: :attr:`default_precision`).

        Returns
        -------
        PrimitiveJob
            Its result holds one ``PubResult`` per pub: ``evs`` and ``stds`` of the
            pub's shape, and metadata (``qsimdist`` statistics, ``route``...).

        Raises
        ------
        QsimdistError
            As its Qiskit flavour (:mod:`qsimdist.qiskit.errors`, also a
            ``QiskitError``): an unsupported instruction, a bad label.
        """
        with qiskit_errors():
            if precision is None:
                precision = self._default_precision
            coerced = [EstimatorPub.coerce(pub, precision) for pub in pubs]
            return submit_job(self._run, coerced, self._engine)

    def cost(self, pubs: Iterable, *, profile: str | None = None,
             devices: int | None = None) -> list[dict]:
        """What :meth:`run` would cost for ``pubs``, before anything is contracted.

        The engine takes the decisions it takes to run (route, method, each term's
        network and plan within the memory limit) and prices each plan instead of running
        it; the plans are kept, so a later :meth:`run` of the same pubs executes exactly
        the FLOPs priced here. Every time is a cost-model prediction.

        Parameters
        ----------
        pubs : iterable of EstimatorPubLike
            Estimator pubs, as for :meth:`run` (static circuits: gates and final
            measurements).
        profile : str, optional
            A hardware profile name (``qsimdist profiles``): each contraction is also
            scheduled by the distribution planner on ``devices`` devices of it.
        devices : int, optional
            Devices of ``profile`` (a power of two; default one node).

        Returns
        -------
        list of dict
            One dict per pub: ``terms``, a list of
            :class:`~qsimdist.engine.term_costs.TermCost` dicts (each with its
            ``binding`` index and ``label``) for every (binding, Pauli label) the pub
            evaluates; ``flops`` and ``predicted_seconds``, their totals.

        Raises
        ------
        QsimdistError
            As its Qiskit flavour: a pub with mid-circuit measurements, resets or
            control flow, an unknown profile or device count.
        """
        with self._lock, qiskit_errors():
            coerced = [EstimatorPub.coerce(p, self._default_precision) for p in pubs]
            if any(needs_lowering(pub.circuit) for pub in coerced):
                raise InvalidInputError(
                    "cost() prices static circuits (gates and final measurements); this "
                    "pub's circuit has mid-circuit measurements, resets or control flow")
            return self._engine.cost([self._translate(pub, {}, draws=False) for pub in coerced],
                                     profile=profile, devices=devices)

    def _run(self, pubs: list[EstimatorPub]) -> PrimitiveResult[PubResult]:
        with self._lock, qiskit_errors():
            met: dict = {}
            asked = [self._translate(pub, met) for pub in pubs]
            found = self._engine.expectation(asked)
            return PrimitiveResult([_result(*args) for args in zip(pubs, asked, found)],
                                   metadata={"version": 2})

    def _translate(self, pub: EstimatorPub, met: dict, draws: bool = True) -> EstimatePub:
        """``pub`` as the engine takes it: its broadcast, its circuit's template and
        parameter sets as rows (:meth:`TemplateCache.pub_template`), and where the circuit
        is dynamic, the pub itself. ``met``: whether each circuit of the call is dynamic."""
        precision = pub.precision if pub.precision is not None else self._default_precision
        circuit, params, observables, shape = (pub.circuit, pub.parameter_values,
                                               pub.observables, pub.shape)
        dynamic = met.get(id(circuit))
        if dynamic is None:
            dynamic = met[id(circuit)] = needs_lowering(circuit)
        # (the generator only where it is drawn from: noise, or branches)
        rng = self._generator() if draws and (precision != 0 or dynamic) else None
        template, rows = (None, None) if dynamic else self._templates.pub_template(circuit,
                                                                                   params)

        def bind(b: int):
            where = tuple(int(i) for i in np.unravel_index(b, params.shape))
            return from_qiskit(params.bind(circuit, where if params.shape else ()))

        return EstimatePub(
            circuit.num_qubits, observables.ravel(),
            np.broadcast_to(np.arange(params.size).reshape(params.shape), shape),
            np.broadcast_to(np.arange(observables.size).reshape(observables.shape), shape),
            params.shape, bind, template, rows, precision, rng, pub if dynamic else None)

    def _generator(self) -> np.random.Generator:
        """A fresh generator per pub from the seed (the reference's rule). Under MPI
        without a seed, rank 0 picks one for all: every rank must draw the same
        branches of a circuit with resets, or their contractions would differ."""
        seed = self._seed
        if seed is None:
            seed = self._engine.shared_seed()
        return np.random.default_rng(seed)


def _result(pub: EstimatorPub, asked: EstimatePub, found: PubValues) -> PubResult:
    """The pub's ``PubResult``: ``evs`` and zero ``stds`` of its shape, and what the engine
    reported (its statistics spent on the pub, the route, the gates by definition)."""
    shape = pub.shape
    return PubResult(DataBin(evs=found.values, stds=np.zeros(shape, dtype=np.float64),
                             shape=shape), metadata={
        "target_precision": asked.precision,
        "circuit_metadata": pub.circuit.metadata,
        "simulator": "qsimdist",
        "qsimdist": found.stats,
        "route": found.route,
        "gates_by_definition": found.by_definition,
        "routes_absent": absent_routes(),
    })


def _aer_style_options(options, default_precision: float, seed):
    """Read Aer's option layout (``default_precision`` and ``run_options`` inside the
    dict) into the constructor's arguments; the other keys are qsimdist's options."""
    if not isinstance(options, dict) or not ({"default_precision", "run_options"} & set(options)):
        return options, default_precision, seed
    options = dict(options)
    if "default_precision" in options:
        given = options.pop("default_precision")
        if default_precision not in (0, given):
            raise InvalidInputError(
                f"default_precision is given twice, {default_precision} and {given} in the "
                "options; give it once"
            )
        default_precision = given
    run_options = options.pop("run_options", None) or {}
    if not isinstance(run_options, dict):
        raise InvalidInputError(
            f"run_options must be a dict, got {shorten(run_options)}; valid keys: "
            "seed_simulator")
    unknown = sorted(set(run_options) - {"seed_simulator"})
    if unknown:
        raise InvalidInputError(
            f"unknown run_options {', '.join(map(str, unknown))}; valid: seed_simulator "
            "(the estimator's values are exact, so Aer's shots and methods do not apply)"
        )
    if "seed_simulator" in run_options:
        given = run_options["seed_simulator"]
        if seed is not None and seed is not given and seed != given:
            raise InvalidInputError(
                f"the seed is given twice, {shorten(seed)} and seed_simulator={shorten(given)}; "
                "give it once"
            )
        seed = given
    return options, default_precision, seed


__all__ = ["EstimatorOptions", "EstimatorV2"]
