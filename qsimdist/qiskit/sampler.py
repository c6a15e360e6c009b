"""``SamplerV2``: Qiskit's sampler primitive on exact tensor-network sampling.

Semantics follow :class:`qiskit.primitives.StatevectorSampler`: pubs are
coerced with :meth:`SamplerPub.coerce`, parameter values broadcast, and each
pub's result holds one :class:`~qiskit.primitives.BitArray` per classical
register following the circuit's measurements. Unlike the reference,
mid-circuit measurement, reset and ``if_test`` blocks are supported (through
:mod:`qsimdist.qiskit.dynamic`), and circuits far wider than a state vector
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

import dataclasses
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from qiskit.primitives import BaseSamplerV2, BitArray

from ..config import reorder_bits
from ..engine.contractor import Contractor
from ..engine.sampling import METHODS, SampleInfo, sample_bits
from ..engine.stabilizer import absent_routes
from ..errors import InvalidInputError, shorten
from ..frontends.qiskit_circuit import recording_definitions
from .dynamic import LoweredCircuit, lower_circuit
from .errors import qiskit_errors
from .options import PrimitiveOptions, submit_job
from .templates import TemplateCache


@dataclass(frozen=True)
class SamplerOptions(PrimitiveOptions):
    """Options of :class:`SamplerV2` (a dict with these keys is accepted too).

    Attributes:
        dtype: ``complex64`` (default) or ``complex128``.
        memory_limit: peak bytes per contraction (``"8GiB"``, int; ``None``: the
            machine's default; ``"none"``: unlimited).
        method: ``auto`` (by predicted cost), ``marginal``, ``doubled-marginal``,
            ``chain``, ``rejection`` (frugal rejection sampling, opt-in:
            probabilities above ``12 / 2^n`` are truncated) or ``stabilizer``
            (a Clifford circuit on stim's frame sampler; ``auto`` takes it for
            Clifford circuits where predicted cheaper, nearly always).
        return_amplitudes: attach the amplitude of every distinct drawn
            bitstring (all qubits measured, no mid-circuit measurement) to each
            pub's metadata under ``"amplitudes"``.
        executor: ``auto`` (``mpi`` when started by mpiexec with several ranks),
            ``local`` or ``mpi``.
        profile: hardware profile for the ``mpi`` executor (default ``local-cpu``).
        backend: array library, ``numpy`` or ``cupy``.
    """

    _what = "sampler"

    dtype: str = "complex64"
    memory_limit: str | int | None = None
    method: str = "auto"
    return_amplitudes: bool = False
    executor: str = "auto"
    profile: str | None = None
    backend: str = "numpy"

    def __post_init__(self) -> None:
        from ..config import check_dtype

        check_dtype(self.dtype)
        if self.method not in METHODS:
            raise InvalidInputError(
                f"unknown sampling method {self.method!r}; valid: {', '.join(METHODS)}")
        self.check_shared()


class SamplerV2(BaseSamplerV2):
    """Exact sampler primitive (``BaseSamplerV2``) with ``StatevectorSampler``'s semantics.

    Args:
        default_shots: shots for pubs that give none.
        seed: an int (every ``run`` starts a fresh generator from it, so the same
            seed gives the same bitstrings), a ``numpy.random.Generator`` (drawn
            from as it is), or ``None``.
        options: :class:`SamplerOptions` or a dict of its fields.
    """

    def __init__(self, *, default_shots: int = 1024, seed=None, options=None) -> None:
        if not isinstance(default_shots, (int, np.integer)) or default_shots < 0:
            raise InvalidInputError(
                f"default_shots must be a non-negative int, got {shorten(default_shots)}")
        self._default_shots = int(default_shots)
        self._seed = seed
        self._options = SamplerOptions.coerce(options)
        self._contractor: Contractor | None = None
        #: each circuit met, lowered and converted once (:mod:`qsimdist.qiskit.templates`)
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

    # ------------------------------------------------------------------ run
    def run(self, pubs: Iterable, *, shots: int | None = None):
        """Sample each pub; returns a ``PrimitiveJob`` whose result is a ``PrimitiveResult``.

        A qsimdist error (an unsupported instruction, a bad option) is raised as its
        Qiskit flavour (:mod:`qsimdist.qiskit.errors`): also a ``QiskitError``.
        """
        with qiskit_errors():
            return self._submit(pubs, shots)

    def _submit(self, pubs: Iterable, shots: int | None):
        from qiskit.primitives.containers.sampler_pub import SamplerPub

        if shots is None:
            shots = self._default_shots
        coerced = [SamplerPub.coerce(pub, shots) for pub in pubs]
        if any(len(pub.circuit.cregs) == 0 for pub in coerced):
            warnings.warn(
                "One of your circuits has no output classical registers and so the result "
                "will be empty. Did you mean to add measurement instructions?",
                UserWarning,
                stacklevel=3,
            )
        return submit_job(self._run, coerced, self._options.resolved_executor())

    def _contractor_now(self) -> Contractor:
        if self._contractor is None:
            opts = self._options
            self._contractor = Contractor(
                dtype=opts.dtype, memory_limit=opts.memory_limit,
                executor=opts.resolved_executor(), profile=opts.profile, backend=opts.backend)
        return self._contractor

    def _generator(self, contractor: Contractor) -> np.random.Generator:
        if isinstance(self._seed, np.random.Generator):
            return self._seed
        seed = self._seed
        if seed is None:  # every rank draws the same numbers
            seed = contractor.options.runner.shared_seed()
        return np.random.default_rng(seed)

    def _run(self, pubs: list):
        from qiskit.primitives import PrimitiveResult

        with qiskit_errors():  # a qsimdist error is also a QiskitError, as Qiskit raises
            contractor = self._contractor_now()
            rng = self._generator(contractor)
            results = [self._run_pub(pub, rng, contractor) for pub in pubs]
        return PrimitiveResult(results, metadata={"version": 2})

    def _run_pub(self, pub, rng: np.random.Generator, contractor: Contractor):
        from qiskit.primitives import DataBin, SamplerPubResult

        circuit = pub.circuit
        registers = list(circuit.cregs)
        params = pub.parameter_values
        shape = params.shape
        arrays = {
            creg.name: np.zeros(shape + (pub.shots, (creg.size + 7) // 8), dtype=np.uint8)
            for creg in registers
        }
        clbit_of = {creg.name: [circuit.find_bit(b).index for b in creg] for creg in registers}
        infos = []
        amplitudes: dict = {}
        with recording_definitions() as by_definition:
            # lowered and converted once, each parameter set only filling in the gates
            lowered, template, rows = self._template(pub)
            batch = self._batch(pub, lowered, template, rows, contractor)
            chunk = None
            for flat, index in enumerate(np.ndindex(*shape)):
                if batch is not None:  # the batched pass's state of this set
                    if chunk is None or flat >= chunk[0] + len(chunk[1]):
                        chunk = next(batch.chunks)
                    if chunk[2][flat - chunk[0]]:
                        clbits = batch.draw(chunk[1][flat - chunk[0]], pub.shots, rng)
                        infos.append(batch.info)
                        for creg in registers:
                            arrays[creg.name][index] = _pack(clbits, clbit_of[creg.name])
                        continue
                gc = template.bind(rows[flat]) if template is not None else None
                if gc is not None:
                    one = lowered
                elif lowered is not None:  # this set changes the structure: its own
                    one = dataclasses.replace(lowered, circuit=params.bind(lowered.circuit,
                                                                           index))
                else:
                    one = params.bind(circuit, index)
                drawn = sample_circuit(one, pub.shots, rng, contractor, self._options.method,
                                       converted=gc)
                infos.append(drawn.info)
                for creg in registers:
                    arrays[creg.name][index] = _pack(drawn.clbits, clbit_of[creg.name])
                if self._options.return_amplitudes:
                    amplitudes[index] = self._amplitudes(drawn, contractor)
        meas = {creg.name: BitArray(arrays[creg.name], creg.size) for creg in registers}
        metadata = {
            "shots": pub.shots,
            "circuit_metadata": pub.circuit.metadata,
            "sampling": _summary(infos),
            "gates_by_definition": by_definition,
            "routes_absent": absent_routes(),
        }
        if self._options.return_amplitudes:
            metadata["amplitudes"] = amplitudes.get((), {}) if pub.shape == () else amplitudes
        return SamplerPubResult(DataBin(**meas, shape=pub.shape), metadata=metadata)

    def _batch(self, pub, lowered, template, rows, contractor: Contractor) -> _Batch | None:
        """The pub's parameter sets drawn from one batched statevector pass
        (:func:`~qsimdist.engine.binding_sweep.sampling_sweep_route`), where taken: a static
        circuit (final measurements only) with a template, without amplitudes asked for."""
        if (template is None or lowered is None or lowered.dynamic or lowered.ancillas
                or self._options.return_amplitudes):
            return None
        from ..engine.binding_sweep import sampling_sweep_route, sweep_states

        sources = lowered.clbit_sources
        measured = sorted({q for q in sources if q is not None})
        if not measured or pub.shots == 0:
            return None
        chosen = sampling_sweep_route(template, len(rows), measured, pub.shots,
                                      self._options.method, contractor.executor,
                                      contractor.backend)
        if chosen is None:
            return None
        plan, route = chosen
        info = SampleInfo("statevector", len(measured), template.n_qubits,
                          predicted_flops=plan.flops,
                          extra={"route": route.to_dict(), "dynamic": False, "ancillas": 0})
        return _Batch(sweep_states(template, plan, rows), sources, measured, info)

    def _template(self, pub):
        """``(lowered circuit, its template, parameter sets as rows)`` of the pub, or
        ``(lowered or None, None, None)`` where every set is converted on its own. A dynamic
        circuit with one parameter set keeps its own path (trajectories are tried first,
        :func:`sample_circuit`); with several, it is lowered once as before."""
        circuit, params = pub.circuit, pub.parameter_values
        if params.size == 0:
            return None, None, None
        rows = None
        if circuit.parameters:
            try:
                rows = np.asarray(params.as_array(list(circuit.parameters)),
                                  dtype=float).reshape(params.size, -1)
            except Exception:  # noqa: BLE001 - binding them raises it, with Qiskit's message
                return None, None, None
        found = self._templates.lowered(circuit, None if rows is None else rows[0])
        if found is None:
            return None, None, None
        lowered, template = found
        if lowered.dynamic and params.size == 1:
            return None, None, None
        return lowered, template, rows if rows is not None else template.rows(params)

    def _amplitudes(self, drawn: DrawnSample, contractor: Contractor) -> dict:
        """``{bitstring over all qubits (qubit 0 rightmost): amplitude}`` of the drawn rows,
        computed with the contractor's resolved options whole (backend, memory budget,
        executor, profile): the amplitude pass runs where the shots were drawn."""
        from ..engine.amplitudes import run_amplitudes

        gc, lowered, measured, bits = drawn.circuit, drawn.lowered, drawn.measured, drawn.bits
        dynamic = lowered is None or lowered.dynamic  # None: sampled as trajectories
        n = drawn.qubits
        if dynamic or measured != list(range(n)):
            raise InvalidInputError(
                "return_amplitudes needs a circuit whose every qubit is measured once at the "
                f"end (measured {len(measured)} of {n} qubits"
                f"{', with mid-circuit measurement or reset' if dynamic else ''}); "
                "an amplitude of a partial or non-unitary measurement is undefined"
            )
        rows = np.unique(bits, axis=0)
        labels = [reorder_bits(row, "natural") for row in rows.tolist()]  # qubit 0 rightmost
        res = run_amplitudes(gc, labels, contractor.options)
        return {b: complex(res.get(b)) for b in labels}


@dataclass
class _Batch:
    """A pub's sets drawn from the batched pass: its states chunk by chunk
    (:func:`~qsimdist.engine.binding_sweep.sweep_states`), the clbits' source qubits, the
    measured qubits and the report of each set."""

    chunks: object
    sources: list
    measured: list[int]
    info: SampleInfo

    def draw(self, state: np.ndarray, shots: int, rng: np.random.Generator) -> np.ndarray:
        """Every clbit's ``shots`` values from ``state``: the statevector route's draw
        (:func:`~qsimdist.engine.state_sampling.rows_from_state`), one ``rng.random(shots)``
        as it takes."""
        from ..engine.state_sampling import rows_from_state

        bits, _ = rows_from_state(state, self.measured, rng.random(shots))
        column = {q: k for k, q in enumerate(self.measured)}
        clbits = np.zeros((shots, len(self.sources)), dtype=np.uint8)
        for j, q in enumerate(self.sources):
            if q is not None:
                clbits[:, j] = bits[:, column[q]]
        return clbits


@dataclass
class DrawnSample:
    """One circuit's shots: every clbit's value, and how they were drawn.

    Attributes:
        clbits: ``shots x num_clbits`` uint8; column ``j`` is clbit ``j``.
        info: the sampling method and its predicted cost.
        circuit: the unitary (lowered) circuit as a GateCircuit (``None``: drawn as
            trajectories, :mod:`qsimdist.qiskit.trajectory_sampling`).
        lowered: the deferred-measurement rewriting (``None`` likewise).
        measured: the qubits finally measured (of ``circuit`` where there is one).
        bits: ``shots x len(measured)`` uint8 (``None`` for trajectories).
    """

    clbits: np.ndarray
    info: object
    circuit: object
    lowered: object
    measured: list[int]
    bits: np.ndarray | None

    @property
    def qubits(self) -> int:
        """The sampled circuit's qubits (the lowered one's where there is one)."""
        return self.circuit.n_qubits if self.circuit is not None else self.info.light_cone_qubits


def sample_circuit(circuit, shots: int, rng: np.random.Generator, contractor: Contractor,
                   method: str = "auto", converted=None) -> DrawnSample:
    """Draw ``shots`` values of every clbit of a bound Qiskit circuit (dynamic ones included).

    ``circuit`` may also be a :class:`LoweredCircuit` already (bound, or a template whose
    binding is ``converted``: its GateCircuit, made by
    :meth:`~qsimdist.frontends.parametric.ParametricCircuit.bind`). A dynamic circuit
    given as a Qiskit circuit is first tried as a tree of trajectories on its own qubits
    (:mod:`qsimdist.qiskit.trajectory_sampling`), where that is predicted cheaper than
    its lowered form.
    """
    from ..frontends.qiskit_circuit import from_qiskit
    from . import trajectory_sampling

    lowered = circuit if isinstance(circuit, LoweredCircuit) else None
    made: dict = {} if converted is None else {"lowered": lowered, "gc": converted}

    def lowered_gc():
        if "gc" not in made:
            made["lowered"] = lowered or lower_circuit(circuit)
            made["gc"] = from_qiskit(made["lowered"].circuit)
        return made["lowered"], made["gc"]

    if lowered is None and trajectory_sampling.trajectory_sampler_for(contractor, method,
                                                                      circuit):
        def is_clifford() -> bool:
            from ..engine.stabilizer import to_stabilizer

            return to_stabilizer(lowered_gc()[1]) is not None

        tree = trajectory_sampling.sample_tree(circuit, shots, rng, contractor, is_clifford)
        if tree is not None:
            info = SampleInfo("trajectory", len(tree.measured), tree.qubits,
                              extra={"route": tree.route, "dynamic": True, "ancillas": 0})
            return DrawnSample(tree.clbits, info, None, None, tree.measured, None)
    lowered, gc = lowered_gc()
    sources = lowered.clbit_sources
    measured = sorted({q for q in sources if q is not None})
    bits, info, _ = sample_bits(gc, measured, shots, rng, contractor, method)
    info.extra.update({"dynamic": lowered.dynamic, "ancillas": lowered.ancillas})
    column = {q: k for k, q in enumerate(measured)}
    clbits = np.zeros((shots, len(sources)), dtype=np.uint8)
    for j, q in enumerate(sources):
        if q is not None:
            clbits[:, j] = bits[:, column[q]]
    return DrawnSample(clbits, info, gc, lowered, measured, bits)


def _pack(clbits: np.ndarray, cols: list[int]) -> np.ndarray:
    """Shots x bytes, big-endian, as Qiskit's BitArray holds a register of the given clbits
    (``cols[0]`` the register's bit 0, its least significant)."""
    return BitArray.from_bool_array(clbits[:, cols], order="little").array


def _summary(infos: list) -> dict:
    """One pub's sampling report: the method(s) and the totals over its parameter values."""
    if not infos:
        return {}
    methods = sorted({i.method for i in infos})
    first = infos[0].to_dict()
    out = {
        "method": methods[0] if len(methods) == 1 else methods,
        "predicted_flops": float(sum(i.predicted_flops for i in infos)),
        "contractions": sum(i.contractions for i in infos),
        "plans_made": sum(i.plans_made for i in infos),
        "plans_reused": sum(i.plans_reused for i in infos),
        "measured_qubits": first["measured_qubits"],
        "light_cone_qubits": max(i.light_cone_qubits for i in infos),
        "dynamic": any(i.extra.get("dynamic") for i in infos),
        "ancillas": max(i.extra.get("ancillas", 0) for i in infos),
        "cost_note": first["cost_note"],
        "route": first.get("route"),
    }
    if len(infos) == 1:  # method-specific numbers (e.g. rejection sampling's candidates)
        out.update({k: v for k, v in first.items() if k not in out})
    return out
