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
the light cone removed (:mod:`qsimdist.expectation`); a term met twice for one
parameter binding is contracted once, and terms of the same network structure
share one plan, kept by the estimator between calls.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from qiskit.primitives import BaseEstimatorV2, DataBin, PrimitiveJob, PrimitiveResult, PubResult
from qiskit.primitives.containers.estimator_pub import EstimatorPub

from ..config import check_dtype
from ..errors import InvalidInputError
from ..expectation import METHODS, ExpectationEngine, PauliTerm, parse_term
from ..frontends.qiskit_circuit import from_qiskit
from ..planner.path import PathOptions
from .options import PrimitiveOptions

#: how plans run: ``auto`` is ``mpi`` when started by mpiexec with several ranks, else ``local``
EXECUTOR_CHOICES = ("auto", "local", "mpi")
BACKEND_CHOICES = ("numpy", "cupy")


@dataclass(frozen=True)
class EstimatorOptions(PrimitiveOptions):
    """Options of :class:`EstimatorV2` (pass this or a dict as ``options``).

    Attributes:
        dtype: ``complex128`` (default) or ``complex64``.
        memory_limit: peak bytes per contraction (``"8GiB"``; ``None``: 80% of the
            available memory; ``"none"``: no limit); per rank under MPI.
        backend: array library, ``numpy`` or ``cupy``.
        path_options: contraction path search options (``PathOptions`` or a dict).
        executor: ``auto`` (``mpi`` under ``mpiexec`` with several ranks), ``local`` or
            ``mpi``. Under MPI every rank runs the same pubs in the same order.
        profile: hardware profile the distributed plans are made for (default
            ``local-cpu``).
        method: ``auto`` (by predicted work), ``doubled`` (one doubled light-cone
            network per term) or ``state`` (one light-cone state per circuit); see
            :class:`qsimdist.expectation.ExpectationEngine`.
        state_max_qubits: widest light-cone state the ``state`` method may open.
    """

    _what = "estimator"

    dtype: str = "complex128"
    memory_limit: str | int | None = None
    backend: str = "numpy"
    path_options: PathOptions | dict | None = None
    executor: str = "auto"
    profile: str | None = None
    method: str = "auto"
    state_max_qubits: int = 20

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        if self.method not in METHODS:
            raise InvalidInputError(f"unknown method {self.method!r}; valid: {', '.join(METHODS)}")
        if self.backend not in BACKEND_CHOICES:
            raise InvalidInputError(
                f"unknown backend {self.backend!r}; valid: {', '.join(BACKEND_CHOICES)}"
            )
        if self.executor not in EXECUTOR_CHOICES:
            raise InvalidInputError(
                f"unknown executor {self.executor!r}; valid: {', '.join(EXECUTOR_CHOICES)}"
            )
        if isinstance(self.path_options, dict):
            object.__setattr__(self, "path_options", PathOptions(**self.path_options))


class EstimatorV2(BaseEstimatorV2):
    """Exact expectation values of Pauli observables by light-cone tensor networks.

    Example:
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

        Args:
            default_precision: precision of pubs that give none (0: exact values).
            seed: seed or ``numpy.random.Generator`` of the noise added when the
                precision is positive.
            options: :class:`EstimatorOptions` or a dict of its fields.
        """
        self._default_precision = default_precision
        self._seed = seed
        self._options = EstimatorOptions.coerce(options)
        self._engine: ExpectationEngine | None = None
        self._lock = threading.Lock()

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
    def engine(self) -> ExpectationEngine:
        """The engine that holds this estimator's plans (one per network structure)."""
        if self._engine is None:
            o = self._options
            self._engine = ExpectationEngine(
                dtype=o.dtype, memory_limit=o.memory_limit, backend=o.backend,
                path_options=o.path_options, executor=o.resolved_executor(), profile=o.profile,
                method=o.method, state_max_qubits=o.state_max_qubits,
            )
        return self._engine

    def run(
        self, pubs: Iterable, *, precision: float | None = None
    ) -> PrimitiveJob[PrimitiveResult[PubResult]]:
        """Estimate expectation values of each pub; returns a submitted ``PrimitiveJob``."""
        if precision is None:
            precision = self._default_precision
        coerced = [EstimatorPub.coerce(pub, precision) for pub in pubs]
        if self.engine.executor == "mpi":
            # every rank runs the pubs on its main thread, in the same order
            result = self._run(coerced)
            job = PrimitiveJob(lambda: result)
        else:
            job = PrimitiveJob(self._run, coerced)
        job._submit()
        return job

    def _run(self, pubs: list[EstimatorPub]) -> PrimitiveResult[PubResult]:
        with self._lock:
            return PrimitiveResult([self._run_pub(pub) for pub in pubs],
                                   metadata={"version": 2})

    def _run_pub(self, pub: EstimatorPub) -> PubResult:
        rng = np.random.default_rng(self._seed)
        precision = pub.precision if pub.precision is not None else self._default_precision
        engine = self.engine
        before = engine.stats.to_dict()
        observables = pub.observables
        params = pub.parameter_values
        shape = pub.shape
        p_of = np.broadcast_to(np.arange(params.size).reshape(params.shape), shape)
        o_of = np.broadcast_to(np.arange(observables.size).reshape(observables.shape), shape)
        flat_obs = observables.ravel()
        n = pub.circuit.num_qubits

        # value of every (binding, observable) pair the broadcast needs
        pairs: dict[int, set[int]] = {}
        for b, o in zip(p_of.reshape(-1).tolist(), o_of.reshape(-1).tolist()):
            pairs.setdefault(b, set()).add(o)
        terms: dict[str, PauliTerm] = {}
        value: dict[tuple[int, int], float] = {}
        for b, obs_indices in pairs.items():
            loc = np.unravel_index(b, params.shape) if params.shape else ()
            bound = params.bind(pub.circuit, tuple(int(i) for i in loc))
            gc = from_qiskit(bound)
            labels: dict[str, None] = {}
            for o in sorted(obs_indices):
                for label in flat_obs[o]:
                    labels.setdefault(label, None)
                    if label not in terms:
                        terms[label] = parse_term(label, n)
            order = list(labels)
            got = dict(zip(order, engine.term_values(gc, [terms[lb] for lb in order])))
            for o in obs_indices:
                value[(b, o)] = float(
                    sum(float(c) * got[label] for label, c in flat_obs[o].items())
                )

        evs = np.zeros(shape, dtype=np.float64)
        stds = np.zeros(shape, dtype=np.float64)
        for index in np.ndindex(*shape):
            ev = value[(int(p_of[index]), int(o_of[index]))]
            if precision != 0:
                ev = rng.normal(ev, precision)
            evs[index] = ev
        after = engine.stats.to_dict()
        spent = {k: after[k] - before[k] for k in after if k != "max_light_cone_qubits"}
        data = DataBin(evs=evs, stds=stds, shape=shape)
        return PubResult(data, metadata={
            "target_precision": precision,
            "circuit_metadata": pub.circuit.metadata,
            "simulator": "qsimdist",
            "qsimdist": spent,
        })


__all__ = ["EstimatorOptions", "EstimatorV2"]
