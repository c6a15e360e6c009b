"""``SamplerV2``: Qiskit's sampler primitive on exact tensor-network sampling.

Semantics follow :class:`qiskit.primitives.StatevectorSampler`: pubs are
coerced with :meth:`SamplerPub.coerce`, parameter values broadcast, and each
pub's result holds one :class:`~qiskit.primitives.BitArray` per classical
register following the circuit's measurements. Unlike the reference,
mid-circuit measurement, reset and ``if_test`` blocks are supported (through
:mod:`qsimdist.frontends.dynamic`), and circuits far wider than a state vector
are sampled through light-cone-cancelled marginals
(:mod:`qsimdist.engine.sampling`).

Example::

    from qiskit import QuantumCircuit
    from qsimdist.qiskit import SamplerV2

    qc = QuantumCircuit(3); qc.h(0); qc.cx(0, 1); qc.cx(1, 2); qc.measure_all()
    result = SamplerV2(seed=7).run([qc], shots=1000).result()
    result[0].data.meas.get_counts()       # {'000': ~500, '111': ~500}
    result[0].metadata["sampling"]          # method, predicted FLOPs, contractions
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from qiskit.primitives import BaseSamplerV2, BitArray

from ..engine import SAMPLING_METHODS, Engine, SamplePub, absent_routes
from ..errors import InvalidInputError, shorten
from ..frontends.dynamic import may_be_dynamic
from ..frontends.qiskit_circuit import recording_definitions
from ..frontends.templates import TemplateCache
from .errors import qiskit_errors
from .options import PrimitiveOptions, submit_job


@dataclass(frozen=True)
class SamplerOptions(PrimitiveOptions):
    """Options of :class:`SamplerV2` (a dict with these keys is accepted too): the run
    options of :class:`~qsimdist.qiskit.options.PrimitiveOptions` (``dtype`` default
    ``complex64``, ``memory_limit``, ``backend``, ``executor``, ``profile``,
    ``path_options``) and the sampler's own.

    Parameters
    ----------
    dtype : {"complex64", "complex128"}
        The dtype contractions run in (default ``complex64``).
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
        ``auto`` (by predicted cost), ``marginal``, ``doubled-marginal``,
        ``chain``, ``rejection`` (frugal rejection sampling, opt-in:
        probabilities above ``12 / 2^n`` are truncated) or ``stabilizer``
        (a Clifford circuit on stim's frame sampler; ``auto`` takes it for
        Clifford circuits where predicted cheaper, nearly always).
    return_amplitudes : bool, default False
        Attach the amplitude of every distinct drawn bitstring (all qubits
        measured, no mid-circuit measurement) to each pub's metadata under
        ``"amplitudes"``.

    Raises
    ------
    InvalidInputError
        An unknown sampling method, or a run option outside its valid values.
    """

    _what = "sampler"

    method: str = "auto"
    return_amplitudes: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in SAMPLING_METHODS:
            raise InvalidInputError(f"unknown sampling method {self.method!r}; valid: "
                                    f"{', '.join(SAMPLING_METHODS)}")


class SamplerV2(BaseSamplerV2):
    """Exact sampler primitive (``BaseSamplerV2``) with ``StatevectorSampler``'s semantics.

    Parameters
    ----------
    default_shots : int, default 1024
        Shots for pubs that give none (>= 0).
    seed : int, numpy.random.Generator or None
        An int (every ``run`` starts a fresh generator from it, so the same seed
        gives the same bitstrings), a ``numpy.random.Generator`` (drawn from as it
        is), or ``None``.
    options : SamplerOptions or dict, optional
        The sampler's options, or a dict of their fields.

    Raises
    ------
    InvalidInputError
        A negative or non-integer ``default_shots``, or bad options.
    """

    def __init__(self, *, default_shots: int = 1024, seed=None, options=None) -> None:
        if not isinstance(default_shots, (int, np.integer)) or default_shots < 0:
            raise InvalidInputError(
                f"default_shots must be a non-negative int, got {shorten(default_shots)}")
        self._default_shots = int(default_shots)
        self._seed = seed
        self._options = SamplerOptions.coerce(options)
        # built once: the run options resolved here, the plans kept between calls
        self._engine = Engine(self._options.run_options())
        #: each circuit met, lowered and converted once (:mod:`qsimdist.frontends.templates`)
        self._templates = TemplateCache()

    @property
    def default_shots(self) -> int:
        """Shots used for pubs without their own."""
        return self._default_shots

    @property
    def seed(self):
        """The seed or generator given to the constructor."""
        return self._seed

    @property
    def options(self) -> SamplerOptions:
        """This sampler's options."""
        return self._options

    @property
    def engine(self) -> Engine:
        """The engine this sampler runs on (its resolved options, the last route)."""
        return self._engine

    def run(self, pubs: Iterable, *, shots: int | None = None):
        """Sample each pub; returns a ``PrimitiveJob`` whose result is a ``PrimitiveResult``.

        Parameters
        ----------
        pubs : iterable of SamplerPubLike
            Circuits, or ``(circuit, parameter values[, shots])`` tuples, coerced by
            ``SamplerPub.coerce``.
        shots : int, optional
            Shots for pubs that give none (default: :attr:`default_shots`).

        Returns
        -------
        PrimitiveJob
            Its result holds one ``SamplerPubResult`` per pub: a ``BitArray`` per
            classical register, and metadata (``shots``, ``sampling``...).

        Raises
        ------
        QsimdistError
            As its Qiskit flavour (:mod:`qsimdist.qiskit.errors`, also a
            ``QiskitError``): an unsupported instruction, a bad option.
        """
        from qiskit.primitives.containers.sampler_pub import SamplerPub

        with qiskit_errors():
            if shots is None:
                shots = self._default_shots
            coerced = [SamplerPub.coerce(pub, shots) for pub in pubs]
            if any(len(pub.circuit.cregs) == 0 for pub in coerced):
                warnings.warn(
                    "One of your circuits has no output classical registers and so the result "
                    "will be empty. Did you mean to add measurement instructions?",
                    UserWarning, stacklevel=2)
            return submit_job(self._run, coerced, self._engine)

    def _run(self, pubs: list):
        from qiskit.primitives import PrimitiveResult

        with qiskit_errors():  # a qsimdist error is also a QiskitError, as Qiskit raises
            seed = self._seed
            if not isinstance(seed, np.random.Generator):  # (None: every rank draws alike)
                seed = np.random.default_rng(seed if seed is not None
                                             else self._engine.shared_seed())
            results = [self._run_pub(pub, seed) for pub in pubs]
        return PrimitiveResult(results, metadata={"version": 2})

    def _run_pub(self, pub, rng: np.random.Generator):
        """One pub: translated (its circuit lowered and converted once, each parameter set
        only filling in the gates), drawn by the engine, packed into its registers."""
        from qiskit.primitives import DataBin, SamplerPubResult

        circuit, params, shots = pub.circuit, pub.parameter_values, pub.shots
        registers = list(circuit.cregs)
        arrays = {creg.name: np.zeros(params.shape + (shots, (creg.size + 7) // 8), np.uint8)
                  for creg in registers}
        clbit_of = {creg.name: [circuit.find_bit(b).index for b in creg] for creg in registers}

        def keep(index: tuple, clbits: np.ndarray) -> None:
            for creg in registers:  # big-endian bytes, the register's bit 0 least significant
                arrays[creg.name][index] = BitArray.from_bool_array(
                    clbits[:, clbit_of[creg.name]], order="little").array

        opts = self._options
        with recording_definitions() as by_definition:
            if params.size == 1 and not circuit.parameters and may_be_dynamic(circuit):
                # one set of a dynamic circuit: trajectories first, lowered only where the
                # router declines them (not lowered here for a template it would not use)
                found = rows = None
            else:
                found, rows = self._templates.pub_template(circuit, params, lowered=True)
            if found is not None and found[0].dynamic and params.size == 1:
                found = rows = None  # one set of a dynamic circuit: trajectories first
            lowered, template = found if found is not None else (None, None)
            asked = SamplePub(circuit, params.shape, shots, params.bind, keep, lowered,
                              template, rows, opts.method, opts.return_amplitudes)
            drawn = self._engine.sample(asked, None, shots, rng)
        metadata = {
            "shots": shots,
            "circuit_metadata": circuit.metadata,
            "sampling": drawn.summary,
            "gates_by_definition": by_definition,
            "routes_absent": absent_routes(),
        }
        if opts.return_amplitudes:
            amplitudes = drawn.amplitudes
            metadata["amplitudes"] = amplitudes.get((), {}) if pub.shape == () else amplitudes
        meas = {creg.name: BitArray(arrays[creg.name], creg.size) for creg in registers}
        return SamplerPubResult(DataBin(**meas, shape=pub.shape), metadata=metadata)
