"""Exact maximum-likelihood decoding of stim detector error models by contraction.

:class:`MLDecoder` builds the decoding network of :mod:`qsimdist.qec.network`
once, with an open *batch* index of ``batch_size`` shots, plans it once, and
then, for every chunk of shots, only replaces the syndrome arrays and runs the
same plan (``dataclasses.replace(plan, network=...)``). One contraction thus
serves a whole chunk: the work that does not depend on the syndrome (subtrees
without a syndrome tensor) is done once per chunk instead of once per shot,
and the executor's per-step overhead is shared by the chunk. The last chunk is
padded with all-zero syndromes, so a single plan serves every shot.

:func:`decode` returns ``P(observables = l | syndrome)`` per shot, normalised
so each row sums to 1; column ``l`` has observable ``k``'s flip as bit ``k``
(observable 0 is the least significant bit). A syndrome that has probability
zero under the model (a detector that no mechanism flips, set to 1) gets a
row of NaN, and :func:`predict` predicts no flip for it.

``detectors="observables"`` decodes from the observables' graphlike sector
alone (:func:`~qsimdist.qec.network.observable_sector`; the other detectors
are summed over, :func:`~qsimdist.qec.network.marginal_model`). That is still
exact maximum likelihood, for the syndrome restricted to those detectors, and
it is what makes circuit-level distance-5 memory experiments tractable: the
sweep's front halves (12 instead of 24 detectors a round), so the cost per shot
drops from about 10^12.3 to 10^7.5 multiply-adds.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..config import format_bytes
from ..errors import InvalidInputError, PlanError
from ..planner.path import PathOptions
from ..planner.plan import Plan, build_plan, fit_to_memory, make_plan
from .network import (
    ErrorModel,
    build_network,
    check_syndromes,
    error_model,
    load_dem,
    marginal_model,
    observable_sector,
    sweep_path,
    with_syndromes,
)

#: default number of shots one contraction serves
DEFAULT_BATCH = 128
#: default peak memory of one chunk's contraction (the plan slices to fit)
DEFAULT_MEMORY = "1GiB"
#: probabilities are real but the executors run complex dtypes; complex128 keeps rtol 1e-10
DTYPE = "complex128"
#: how the one contraction path is found
PATHS = ("sweep", "search")
#: named detector selections (or give a sequence of detector ids)
DETECTOR_SETS = ("all", "observables")


class MLDecoder:
    """A maximum-likelihood decoder for one detector error model, planned once.

    Parameters
    ----------
    dem : stim.DetectorErrorModel, stim.Circuit, str or os.PathLike
        The error model, a circuit, or the path of a ``.dem`` or ``.stim`` file.
    batch_size : int, optional
        Shots per contraction (the extent of the open batch index, >= 1); default
        :data:`DEFAULT_BATCH`, lowered to the number of shots of the first call
        when that is smaller and halved while the plan would peak over
        ``memory_limit``.
    memory_limit : str or int, optional
        Peak memory of one contraction, e.g. ``"1GiB"`` (the plan slices to fit);
        default :data:`DEFAULT_MEMORY`.
    path_options : PathOptions or dict, optional
        Options of the one path search (``path="search"``).
    backend : {"numpy", "cupy"}
        Array library for the executor.
    path : {"sweep", "search"}
        ``"sweep"`` (default) contracts along
        :func:`~qsimdist.qec.network.sweep_path`, a detector-by-detector sweep made
        in milliseconds; ``"search"`` runs cotengra's hyper-optimiser
        (:func:`~qsimdist.planner.plan.make_plan`), which on these
        hyper-index-heavy networks is slow (minutes for the d=3 circuit-level
        model) and found a costlier path there.
    detectors : {"all", "observables"} or sequence of int
        Which detectors the decoder reads: ``"all"`` (default: exact maximum
        likelihood given the whole syndrome); ``"observables"`` (the observables'
        graphlike sector, see :func:`~qsimdist.qec.network.observable_sector`:
        exact maximum likelihood given those detectors, the others summed over);
        or a sequence of detector ids. Syndromes are always given in full.

    Attributes
    ----------
    model : ErrorModel
        The merged error mechanisms.
    plan : Plan or None
        The plan every chunk runs (``None`` before the first call).
    stats : dict
        ``plans`` made, ``contractions`` run, ``shots`` decoded, ``batch_size``,
        ``plan_seconds``, ``execute_seconds``, ``flops`` per contraction,
        ``peak_bytes``.

    Raises
    ------
    InvalidInputError
        An unknown ``path`` or ``detectors``, a bad ``batch_size``, memory limit,
        backend or path options, or an unreadable ``dem``.
    """

    def __init__(
        self,
        dem: object,
        *,
        batch_size: int | None = None,
        memory_limit: str | int | None = None,
        path_options: PathOptions | dict | None = None,
        backend: str = "numpy",
        path: str = "sweep",
        detectors: str | tuple[int, ...] | list[int] = "all",
    ) -> None:
        if path not in PATHS:
            raise InvalidInputError(f"unknown path {path!r}; valid: {', '.join(PATHS)}")
        self.path = path
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise InvalidInputError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if path_options is not None:
            path_options = PathOptions.coerce(path_options)
        self.detectors = _check_detectors(detectors)
        source = load_dem(dem, decompose=self.detectors == "observables")
        full = error_model(source)
        self._num_detectors = full.num_detectors
        self.kept: tuple[int, ...] | None = None
        if self.detectors == "observables":
            self.kept = observable_sector(source)
        elif self.detectors != "all":
            self.kept = self.detectors
        self.model: ErrorModel = full if self.kept is None else marginal_model(full, self.kept)
        self.batch_size = batch_size
        from ..engine import Engine, RunOptions

        # one engine, its options resolved once: the engine's reading of the memory words
        # ('none': no planning limit, bounded by the host) and of the backend
        self.engine = Engine(RunOptions.resolve(
            dtype=DTYPE, memory_limit=memory_limit if memory_limit is not None
            else DEFAULT_MEMORY, backend=backend, path_options=path_options))
        self.budget = self.engine.budget
        self.memory_limit = self.budget.limit
        self.path_options = path_options
        self.backend = self.engine.run.backend
        self.plan: Plan | None = None
        self.stats: dict = {"plans": 0, "contractions": 0, "shots": 0, "batch_size": None,
                            "plan_seconds": 0.0, "execute_seconds": 0.0, "flops": None,
                            "peak_bytes": None,
                            "detectors_read": self.model.num_detectors}

    @property
    def num_detectors(self) -> int:
        """The syndrome length (every detector of the model, read or not)."""
        return self._num_detectors

    @property
    def num_observables(self) -> int:
        return self.model.num_observables

    # ------------------------------------------------------------------ planning
    def prepare(self, shots: int) -> Plan:
        """Make the one plan (for chunks of ``min(batch_size, shots)`` shots) if not made yet.

        With ``batch_size`` left to qsimdist, a batch whose unsliced sweep plan
        would peak over the memory limit is halved (down to one shot) before
        any index is sliced: a smaller batch costs nothing per shot, slicing does.

        Parameters
        ----------
        shots : int
            The shots of the first call (bounds the batch when ``batch_size`` is
            left to qsimdist).

        Returns
        -------
        Plan
            The one plan (made earlier, where it was).

        Raises
        ------
        PlanError
            The plan does not fit the memory limit or the host.
        """
        if self.plan is not None:
            return self.plan
        chosen = self.batch_size is None
        batch = self.batch_size or min(DEFAULT_BATCH, max(shots, 1))
        t0 = time.perf_counter()
        if self.path == "search":
            net = build_network(self.model, batch=batch)
            self.plan = make_plan(net, dtype=DTYPE, memory_limit=self.memory_limit,
                                  path_options=self.path_options)
        else:
            net = build_network(self.model, batch=batch)
            ssa = sweep_path(net, self.model)  # the same path for every batch extent
            while chosen and batch > 1 and self.memory_limit is not None and build_plan(
                    net, ssa, (), DTYPE).stats.peak_bytes > self.memory_limit:
                batch //= 2
                net = build_network(self.model, batch=batch)
            self.plan = _sweep_plan(net, ssa, self.memory_limit)
        self.budget.check_plan(self.plan)  # 'none' still keeps within the host
        self.batch_size = batch
        self.stats.update(plans=self.stats["plans"] + 1, batch_size=batch,
                          plan_seconds=time.perf_counter() - t0, flops=self.plan.stats.flops,
                          peak_bytes=self.plan.stats.peak_bytes)
        return self.plan

    # ------------------------------------------------------------------ decoding
    def joint_probabilities(self, syndromes: object) -> np.ndarray:
        """``P(syndrome, observables = l)`` per shot, shape ``(shots, 2**num_observables)``.

        Not normalised: a row sums to the probability of its syndrome.

        Parameters
        ----------
        syndromes : array_like
            ``(shots, num_detectors)`` detector bits (bool or 0/1), or one shot's
            ``(num_detectors,)`` bits.

        Returns
        -------
        numpy.ndarray
            float64, observable ``k`` as bit ``k`` of the column.

        Raises
        ------
        InvalidInputError
            Syndromes of the wrong shape or with values other than 0 and 1.
        """
        bits = check_syndromes(syndromes, self.num_detectors)
        if self.kept is not None:
            bits = bits[:, list(self.kept)]
        shots = bits.shape[0]
        width = 1 << self.num_observables
        out = np.empty((shots, width))
        if shots == 0:
            return out
        plan = self.prepare(shots)
        batch = self.batch_size
        for start in range(0, shots, batch):
            chunk = bits[start:start + batch]
            n = chunk.shape[0]
            if n < batch:  # pad with all-zero syndromes: the plan's batch extent is fixed
                chunk = np.concatenate([chunk, np.zeros((batch - n, bits.shape[1]), bool)])
            run = dataclasses.replace(plan, network=with_syndromes(plan.network, chunk))
            t0 = time.perf_counter()
            value = self.engine.contract(run)  # the one plan, this chunk's arrays
            self.stats["execute_seconds"] += time.perf_counter() - t0
            self.stats["contractions"] += 1
            out[start:start + n] = value.reshape(batch, width)[:n].real
        self.stats["shots"] += shots
        return out

    def probabilities(self, syndromes: object) -> np.ndarray:
        """``P(observables = l | syndrome)`` per shot, rows summing to 1 (NaN: impossible).

        Parameters
        ----------
        syndromes : array_like
            As for :meth:`joint_probabilities`.

        Returns
        -------
        numpy.ndarray
            ``(shots, 2**num_observables)`` float64.
        """
        joint = self.joint_probabilities(syndromes)
        total = joint.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, joint / np.where(total > 0, total, 1.0), np.nan)

    def predict(self, syndromes: object) -> np.ndarray:
        """The most likely observable flips per shot, ``(shots, num_observables)`` uint8.

        Parameters
        ----------
        syndromes : array_like
            As for :meth:`joint_probabilities`.

        Returns
        -------
        numpy.ndarray
            uint8 bits (all zeros for a syndrome the model cannot produce).
        """
        return outcome_bits(self.probabilities(syndromes), self.num_observables)


def _check_detectors(detectors: object):
    """``"all"``, ``"observables"`` or a tuple of detector ids, else a one-line error."""
    if isinstance(detectors, str):
        if detectors not in DETECTOR_SETS:
            raise InvalidInputError(
                f"unknown detectors {detectors!r}; valid: {', '.join(DETECTOR_SETS)} or a "
                "sequence of detector ids"
            )
        return detectors
    try:
        ids = tuple(detectors)  # type: ignore[arg-type]
    except TypeError:
        ids = None
    if ids is None or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                              for d in ids):
        raise InvalidInputError(
            f"detectors must be 'all', 'observables' or a sequence of detector ids, got "
            f"{detectors!r}"
        )
    return tuple(int(d) for d in ids)


def _sweep_plan(net, ssa, memory_limit: int | None) -> Plan:
    """The plan along the sweep path ``ssa``, sliced (along the same path) to fit
    ``memory_limit``."""
    plan = fit_to_memory(net, ssa, memory_limit, DTYPE)
    if memory_limit is not None and plan.stats.peak_bytes > memory_limit:
        raise PlanError(
            f"the decoding network needs {format_bytes(plan.stats.peak_bytes)} per contraction, "
            f"over the memory limit {format_bytes(memory_limit)}; lower batch_size or raise "
            "memory_limit"
        )
    return plan


def outcome_bits(probabilities: np.ndarray, num_observables: int) -> np.ndarray:
    """Per row, the bits of the most likely column (bit ``k`` = observable ``k``);
    a row of NaN (an impossible syndrome) gives all zeros."""
    probs = np.nan_to_num(np.asarray(probabilities), nan=-1.0)
    best = np.argmax(probs, axis=1) if probs.shape[1] else np.zeros(len(probs), dtype=int)
    shifts = np.arange(num_observables)
    return ((best[:, None] >> shifts[None, :]) & 1).astype(np.uint8)


def decode(dem: object, syndromes: object, **options) -> np.ndarray:
    """Per shot, the probability of every logical-observable outcome given its syndrome.

    Parameters
    ----------
    dem : stim.DetectorErrorModel, stim.Circuit, str or os.PathLike
        The error model, a circuit, or the path of a ``.dem`` or ``.stim`` file.
    syndromes : array_like
        ``(shots, num_detectors)`` detector bits (bool or 0/1), or one shot's
        ``(num_detectors,)`` bits.
    **options
        :class:`MLDecoder` options (``batch_size``, ``memory_limit``, ``path``,
        ``path_options``, ``backend``, ``detectors``).

    Returns
    -------
    numpy.ndarray
        ``(shots, 2**num_observables)`` float64, normalised per shot: entry
        ``[s, l]`` is ``P(observables = l | syndrome s)`` with observable ``k`` as
        bit ``k`` of ``l``. Rows of syndromes the model cannot produce are NaN.

    Raises
    ------
    InvalidInputError
        Bad options or syndromes, or an unreadable ``dem``.
    """
    return MLDecoder(dem, **options).probabilities(syndromes)


def predict(dem: object, syndromes: object, **options) -> np.ndarray:
    """The most likely observable flips per shot: ``(shots, num_observables)`` uint8,
    as pymatching's ``decode_batch`` returns them.

    Parameters
    ----------
    dem : stim.DetectorErrorModel, stim.Circuit, str or os.PathLike
        As for :func:`decode`.
    syndromes : array_like
        As for :func:`decode`.
    **options
        :class:`MLDecoder` options, as for :func:`decode`.

    Returns
    -------
    numpy.ndarray
        uint8 bits, observable ``k`` in column ``k``.
    """
    return MLDecoder(dem, **options).predict(syndromes)


__all__ = ["MLDecoder", "decode", "outcome_bits", "predict"]
