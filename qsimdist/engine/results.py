"""What the amplitude entry points return: :class:`AmplitudeResult`, and :class:`PlanRun`
(what :func:`qsimdist.run_plan` returns)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..errors import BitstringError, InvalidInputError
from ..frontends import MAX_EXPANDED, bitstring_at, bitstring_chunks


@dataclass
class AmplitudeResult:
    """Amplitudes of one or more bitstring patterns, kept as arrays.

    Entry ``i`` is the requested pattern ``patterns[i]`` with its
    ``2^k`` amplitudes ``values[i]`` (``k`` = its number of ``*``), in the
    order of :func:`~qsimdist.frontends.iter_bitstrings` (the leftmost ``*``
    is the most significant bit). Bitstrings are made on demand: look one up
    with :meth:`get`, name the ``j``-th with :meth:`bitstring`, or walk all of
    them in bounded memory with :meth:`items` or :meth:`chunks`.

    Attributes
    ----------
    patterns : list of str
        The requested bitstring patterns (``*`` marks an open qubit), one entry each.
    values : list of numpy.ndarray
        ``values[i]`` holds the ``2^k`` amplitudes of ``patterns[i]``.
    n_qubits : int
        The circuit's number of qubits (the length of every pattern).
    dtype : str
        The dtype the amplitudes were computed in, ``complex64`` or ``complex128``.
    order : str
        How a bitstring's characters map to qubits: ``qiskit`` (the rightmost
        character is qubit 0) or ``natural``.
    stats : dict
        The run's statistics: ``stats["method"]`` names the route taken and
        ``stats["route"]`` the predictions behind it (see :func:`qsimdist.amplitudes`).
    """

    patterns: list[str]
    values: list[np.ndarray]
    n_qubits: int
    dtype: str
    order: str
    stats: dict = field(default_factory=dict)
    _index: dict | None = field(default=None, init=False, repr=False, compare=False)
    _offsets: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def amplitudes(self) -> np.ndarray:
        """All amplitudes, pattern after pattern."""
        return np.concatenate(self.values) if self.values else np.zeros(0, complex)

    @property
    def bitstrings(self) -> list[str]:
        """The bitstring of every amplitude (refused over ``MAX_EXPANDED``; see :meth:`chunks`)."""
        if len(self) > MAX_EXPANDED:
            raise BitstringError(
                f"{len(self)} bitstrings are too many to list (at most {MAX_EXPANDED}); "
                "use items(), chunks() or bitstring(index)"
            )
        return [b for labels, _ in self.chunks() for b in labels]

    def __len__(self) -> int:
        return sum(v.size for v in self.values)

    def _starts(self) -> np.ndarray:
        if self._offsets is None:
            self._offsets = np.cumsum([0] + [v.size for v in self.values])
        return self._offsets

    def bitstring(self, index: int) -> str:
        """The bitstring of amplitude ``index`` (as in :attr:`amplitudes`), made on demand.

        Parameters
        ----------
        index : int
            Position in :attr:`amplitudes`, ``0 <= index < len(self)``.

        Returns
        -------
        str
            The bitstring whose amplitude is at ``index``.

        Raises
        ------
        IndexError
            ``index`` is outside ``0..len(self) - 1``.
        """
        starts = self._starts()
        if not 0 <= index < starts[-1]:
            raise IndexError(f"index {index} is outside 0..{starts[-1] - 1}")
        entry = int(np.searchsorted(starts, index, side="right")) - 1
        return bitstring_at(self.patterns[entry], int(index - starts[entry]))

    def get(self, bitstring: str) -> complex:
        """The amplitude of ``bitstring`` from the first pattern that covers it.

        Parameters
        ----------
        bitstring : str
            A bitstring without ``*``, in the result's :attr:`order`.

        Returns
        -------
        complex
            Its amplitude.

        Raises
        ------
        KeyError
            No computed pattern covers ``bitstring``.
        """
        if self._index is None:
            index: dict = {}
            for k, p in enumerate(self.patterns):
                if "*" not in p:
                    index.setdefault(p, k)
            self._index = index
        k = self._index.get(bitstring)
        if k is not None:
            return complex(self.values[k][0])
        for pattern, vals in zip(self.patterns, self.values):
            if "*" in pattern and len(pattern) == len(bitstring) and all(
                p == "*" or p == c for p, c in zip(pattern, bitstring)
            ):
                index = 0
                for p, c in zip(pattern, bitstring):
                    if p == "*":
                        index = 2 * index + (c == "1")
                return complex(vals[index])
        raise KeyError(f"{bitstring!r} is not covered by the computed patterns")

    __getitem__ = get

    def chunks(self, size: int = 1 << 12) -> Iterator[tuple[list[str], np.ndarray]]:
        """(bitstrings, amplitudes) in blocks of at most ``size``; memory bounded by one block.

        Parameters
        ----------
        size : int, default 4096
            The most bitstrings a block holds.

        Yields
        ------
        tuple of (list of str, numpy.ndarray)
            A block's bitstrings and their amplitudes, in the order of :attr:`amplitudes`.
        """
        run: list[int] = []

        def flush():
            vals = np.concatenate([self.values[k] for k in run])
            return [self.patterns[k] for k in run], vals

        for k, (pattern, vals) in enumerate(zip(self.patterns, self.values)):
            if "*" not in pattern and vals.size == 1:
                run.append(k)
                if len(run) == size:
                    yield flush()
                    run = []
                continue
            if run:
                yield flush()
                run = []
            start = 0
            for labels in bitstring_chunks(pattern, chunk=size):
                yield labels, vals[start:start + len(labels)]
                start += len(labels)
        if run:
            yield flush()

    def items(self) -> Iterator[tuple[str, complex]]:
        """Pairs (bitstring, amplitude), made lazily block by block."""
        for labels, vals in self.chunks():
            yield from zip(labels, vals)

    def to_dict(self) -> dict:
        """Plain data (refused over ``MAX_EXPANDED`` amplitudes: stream with :meth:`chunks`)."""
        if len(self) > MAX_EXPANDED:
            raise InvalidInputError(
                f"{len(self)} amplitudes are too many for one dict (at most {MAX_EXPANDED}); "
                "write them block by block with chunks()"
            )
        return {
            "n_qubits": self.n_qubits,
            "dtype": self.dtype,
            "order": self.order,
            "amplitudes": [
                {"bitstring": b, "re": float(a.real), "im": float(a.imag)} for b, a in self.items()
            ],
            "stats": self.stats,
        }


@dataclass
class PlanRun:
    """A saved plan executed (:func:`qsimdist.run_plan`, ``qsimdist run``).

    Attributes
    ----------
    values : numpy.ndarray
        The result, flat, in the order of the plan's output indices (for a
        circuit plan: the amplitudes of its bitstring pattern, in the order of
        :func:`~qsimdist.frontends.iter_bitstrings`).
    plan : Plan
        The plan that ran (under MPI: rank 0's, as every rank received it).
    stats : dict
        The plan's statistics; from a distributed run, on rank 0, also
        ``"ranks"`` (each rank's measured bytes, peak and seconds) and ``"comm"``
        (the collectives the run chose).
    rank : int, default 0
        This process's rank (0 in one process).
    """

    values: np.ndarray
    plan: object
    stats: dict = field(default_factory=dict)
    rank: int = 0

    @property
    def pattern(self) -> str | None:
        """The bitstring pattern the plan computes (``meta.bitstring``), if it has one."""
        return self.plan.meta.get("bitstring")

    def chunks(self, size: int = 1 << 12) -> Iterator[tuple[list[str], np.ndarray]]:
        """(labels, values) in blocks of at most ``size``: the pattern's bitstrings, or the
        flat index as a string for a plan without a pattern; memory bounded by one block.

        Parameters
        ----------
        size : int, default 4096
            The most values a block holds.

        Yields
        ------
        tuple of (list of str, numpy.ndarray)
            A block's labels and their values, in the order of :attr:`values`.
        """
        start = 0
        if self.pattern:
            blocks = bitstring_chunks(self.pattern, chunk=size)
        else:
            blocks = ([str(k) for k in range(a, min(a + size, self.values.size))]
                      for a in range(0, self.values.size, size))
        for labels in blocks:
            yield labels, self.values[start:start + len(labels)]
            start += len(labels)


@dataclass
class ExpectationStats:
    """What an engine did: terms by method, contractions, plans made and reused, seconds, FLOPs.

    ``flops`` are the plans' own counts of the contractions run (the doubled
    networks, or the light-cone states); applying terms to a state is not counted.
    """

    terms: int = 0
    trivial_terms: int = 0
    doubled_terms: int = 0
    state_terms: int = 0
    statevector_terms: int = 0
    #: statevector terms read in qubit-wise commuting groups, and those groups
    grouped_terms: int = 0
    qwc_groups: int = 0
    #: statevector terms that are Z strings, read together in one pass over |s|^2
    z_string_terms: int = 0
    #: terms read off stim's tableau (a Clifford circuit: :mod:`qsimdist.engine.stabilizer`)
    stabilizer_terms: int = 0
    #: terms valued one rank each under MPI (:mod:`qsimdist.engine.term_spreading`)
    spread_terms: int = 0
    contractions: int = 0
    #: slices run over all contractions (more than ``contractions`` when a plan was sliced
    #: to fit the memory limit)
    slices: int = 0
    plans_made: int = 0
    plans_reused: int = 0
    flops: float = 0.0
    plan_seconds: float = 0.0
    execute_seconds: float = 0.0
    max_light_cone_qubits: int = 0

    def to_dict(self) -> dict:
        # every field is a number: a shallow copy (asdict's deep copy cost 8 us per call,
        # twice per pub of the estimator)
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


