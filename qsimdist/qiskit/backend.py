"""``QsimdistBackend``: a Qiskit ``BackendV2`` running circuits by exact tensor-network sampling.

Its :class:`~qiskit.transpiler.Target` holds Qiskit's standard gates (every
unitary gate whose matrix the frontend reads), ``measure``, ``reset``,
``delay`` and ``if_else``, on all-to-all qubits, so ``transpile(qc, backend)``
only rewrites what the frontend cannot read. ``run`` returns a job whose
``result().get_counts()`` and ``get_memory()`` behave as Aer's.

Example::

    from qiskit import QuantumCircuit, transpile
    from qsimdist.qiskit import QsimdistBackend

    backend = QsimdistBackend()
    qc = QuantumCircuit(2); qc.h(0); qc.cx(0, 1); qc.measure_all()
    counts = backend.run(transpile(qc, backend), shots=1000, seed_simulator=1).result().get_counts()
"""

from __future__ import annotations

import datetime
import uuid

import numpy as np
from qiskit.providers import BackendV2, JobStatus, JobV1, Options

from .. import __version__
from ..engine import Engine
from ..errors import InvalidInputError, shorten
from .errors import qiskit_errors
from .sampler import SamplerOptions

#: the widest circuit the target declares (the frontend's own file limit)
TARGET_QUBITS = 4096
_VERSION = __version__


def _target():
    from qiskit.circuit import IfElseOp, Measure, Reset
    from qiskit.circuit.library import get_standard_gate_name_mapping
    from qiskit.transpiler import Target

    target = Target(description="qsimdist exact tensor-network sampler",
                    num_qubits=TARGET_QUBITS)
    for name, op in get_standard_gate_name_mapping().items():
        if name in ("measure", "reset"):
            continue
        target.add_instruction(op, name=name)
    target.add_instruction(Measure())
    target.add_instruction(Reset())
    target.add_instruction(IfElseOp, name="if_else")
    return target


class QsimdistJob(JobV1):
    """A job that has run when it is returned (the sampler is synchronous)."""

    def __init__(self, backend, job_id: str, result) -> None:
        super().__init__(backend, job_id)
        self._result = result

    def submit(self) -> None:
        """Nothing to do: the circuits ran when the job was made."""

    def result(self):
        """The ``qiskit.result.Result``."""
        return self._result

    def status(self) -> JobStatus:
        return JobStatus.DONE


class QsimdistBackend(BackendV2):
    """Exact sampling backend (``BackendV2``).

    Options (``backend.set_options`` or ``run`` keywords): ``shots`` (1024),
    ``seed_simulator`` (``None``), ``memory`` (``False``: with ``True``,
    ``get_memory()`` lists every shot), ``dtype`` (``complex64``),
    ``memory_limit`` (per contraction, e.g. ``"8GiB"``), ``profile``
    (hardware profile for runs under ``mpiexec``) and ``method`` (``auto``).

    Parameters
    ----------
    provider : QsimdistProvider, optional
        The provider that lists this backend.
    name : str, default "qsimdist_sampler"
        The backend's name.
    """

    def __init__(self, provider=None, name: str = "qsimdist_sampler") -> None:
        super().__init__(provider=provider, name=name,
                         description="exact tensor-network sampler (qsimdist)",
                         backend_version=_VERSION)
        self._target = _target()
        # the engine of the default options, built once (plans live in the process's cache)
        self._options_key, self._engine = self._engine_for(
            self._sampler_options(self.options.__dict__))

    @staticmethod
    def _sampler_options(opts: dict) -> SamplerOptions:
        """The run's options (the backend's, overridden by the run's keywords) as the
        sampler's, validated."""
        return SamplerOptions(dtype=opts["dtype"], memory_limit=opts["memory_limit"],
                              method=opts["method"], profile=opts["profile"])

    def _engine_for(self, opts: SamplerOptions) -> tuple[tuple, Engine]:
        """``(key, engine)`` for these options: the backend's own engine while its run
        options are those it was built with, else one built (and kept, where they are the
        backend's options now: ``set_options`` changed them) with them resolved once."""
        key = (opts.dtype, str(opts.memory_limit), str(opts.profile))
        if getattr(self, "_options_key", None) == key:
            return key, self._engine
        return key, Engine(opts.run_options())

    @property
    def target(self):
        return self._target

    @property
    def max_circuits(self) -> None:
        return None

    @classmethod
    def _default_options(cls) -> Options:
        return Options(shots=1024, seed_simulator=None, memory=False, dtype="complex64",
                       memory_limit=None, profile=None, method="auto")

    def run(self, run_input, **options) -> QsimdistJob:
        """Sample ``run_input``; options override the backend's.

        Parameters
        ----------
        run_input : QuantumCircuit or list of QuantumCircuit
            The circuits, each with its measurements.
        **options
            The backend's options for this run: ``shots`` (a positive int),
            ``seed_simulator``, ``memory``, ``dtype``, ``memory_limit``, ``profile``,
            ``method``.

        Returns
        -------
        QsimdistJob
            A job that has run; ``result().get_counts()`` and ``get_memory()``
            behave as Aer's.

        Raises
        ------
        QsimdistError
            As its Qiskit flavour (also a ``QiskitError``, as Aer raises
            ``AerError``): an unknown option, a bad ``shots``, an input that is not
            a circuit, an unsupported instruction.
        """
        with qiskit_errors():
            return self._run(run_input, options)

    def _run(self, run_input, options: dict) -> QsimdistJob:
        from qiskit import QuantumCircuit
        from qiskit.result import Result
        from qiskit.result.models import ExperimentResult, ExperimentResultData

        circuits = [run_input] if isinstance(run_input, QuantumCircuit) else list(run_input)
        for c in circuits:
            if not isinstance(c, QuantumCircuit):
                raise InvalidInputError(
                    f"run() takes QuantumCircuit objects, got {shorten(c)} ({type(c).__name__})")
        known = set(self.options.__dict__)
        bad = sorted(set(options) - known)
        if bad:
            raise InvalidInputError(
                f"unknown run options {bad}; valid: {', '.join(sorted(known))}")
        opts = {**self.options.__dict__, **options}
        shots = opts["shots"]
        if not isinstance(shots, (int, np.integer)) or shots < 1:
            raise InvalidInputError(f"shots must be a positive int, got {shorten(shots)}")
        sampler_opts = self._sampler_options(opts)
        key, engine = self._engine_for(sampler_opts)
        if not options.keys() & {"dtype", "memory_limit", "profile"}:
            self._options_key, self._engine = key, engine  # set_options changed them: kept
        seed = opts["seed_simulator"]
        if seed is None:  # rank 0's, on every rank
            seed = engine.shared_seed()
        rng = np.random.default_rng(seed)
        results = []
        for circuit in circuits:
            drawn = engine.sample(circuit, None, int(shots), rng, sampler_opts.method)
            weights = 1 << np.arange(drawn.clbits.shape[1], dtype=object)
            values = [int(v) for v in (drawn.clbits.astype(object) @ weights)] \
                if drawn.clbits.shape[1] else [0] * int(shots)
            memory = [hex(v) for v in values]
            counts: dict[str, int] = {}
            for h in memory:
                counts[h] = counts.get(h, 0) + 1
            data = ExperimentResultData(counts=counts, memory=memory if opts["memory"] else None)
            header = {
                "name": circuit.name,
                "creg_sizes": [[creg.name, creg.size] for creg in circuit.cregs],
                "clbit_labels": [[creg.name, j] for creg in circuit.cregs
                                 for j in range(creg.size)],
                "memory_slots": circuit.num_clbits,
                "n_qubits": circuit.num_qubits,
                "metadata": circuit.metadata,
            }
            results.append(ExperimentResult(
                shots=int(shots), success=True, data=data, header=header, seed=seed,
                metadata={"sampling": drawn.info.to_dict()}))
        job_id = str(uuid.uuid4())
        result = Result(backend_name=self.name, backend_version=_VERSION, job_id=job_id,
                        success=True, results=results,
                        date=datetime.datetime.now().isoformat())
        return QsimdistJob(self, job_id, result)


class QsimdistProvider:
    """Lists qsimdist's backends, as a Qiskit provider does (``backends()``, ``get_backend()``)."""

    def __init__(self) -> None:
        self._backends = [QsimdistBackend(provider=self)]

    def backends(self, name: str | None = None, **filters) -> list:
        """The backends whose name is ``name`` and whose attributes match.

        Parameters
        ----------
        name : str, optional
            A backend's name (all when ``None``).
        **filters
            Attribute values a backend must have (``num_qubits=...``).

        Returns
        -------
        list of QsimdistBackend
        """
        out = [b for b in self._backends if name is None or b.name == name]
        return [b for b in out if all(getattr(b, k, None) == v for k, v in filters.items())]

    def get_backend(self, name: str = "qsimdist_sampler") -> QsimdistBackend:
        """The backend called ``name``.

        Parameters
        ----------
        name : str, default "qsimdist_sampler"
            The backend's name.

        Raises
        ------
        InvalidInputError
            An unknown name (the message lists the valid ones).
        """
        found = self.backends(name)
        if not found:
            valid = ", ".join(b.name for b in self._backends)
            raise InvalidInputError(f"no backend named {name!r}; valid: {valid}")
        return found[0]

    def __repr__(self) -> str:
        return "QsimdistProvider()"
