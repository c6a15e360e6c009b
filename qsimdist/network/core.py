"""The :class:`Network` IR shared by every frontend, the planner and the executors."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError, shorten

Index = str


@dataclass
class Network:
    """A tensor network in cotengra's form.

    An index on three or more tensors (a hyper-index) is allowed everywhere. Index
    names are kept as ``str`` and extents as ``int``; the network is checked
    (:meth:`validate`) when it is built.

    Parameters
    ----------
    inputs : sequence of sequence of str
        One tuple of index names per tensor.
    output : sequence of str
        The open indices, in the order of the result's axes.
    size_dict : dict of str to int
        Extent of every index (an integer >= 1).
    arrays : list of array, optional
        One array per tensor (shape matching its indices), or ``None`` (the
        default) for a structure-only network (e.g. a cotengra benchmark file).
    meta : dict, optional
        Metadata carried with the network, e.g. ``"exponent"`` (log10 of a factor
        the contracted value is multiplied by, see :func:`qsimdist.contract`).

    Raises
    ------
    InvalidInputError
        An extent is not an integer >= 1, an index has no extent, a tensor repeats
        an index, the output names an index on no tensor or repeats one, or the
        arrays do not match the tensors in number or shape.
    """

    inputs: tuple[tuple[Index, ...], ...]
    output: tuple[Index, ...]
    size_dict: dict[Index, int]
    arrays: list[np.ndarray] | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.inputs = tuple(tuple(str(i) for i in term) for term in self.inputs)
        self.output = tuple(str(i) for i in self.output)
        sizes = {}
        for k, v in self.size_dict.items():
            try:
                sizes[str(k)] = int(v)
            except (TypeError, ValueError, OverflowError):  # e.g. inf, nan, a string
                raise InvalidInputError(
                    f"index {shorten(k)} has extent {shorten(v)}; extents are integers >= 1"
                ) from None
        self.size_dict = sizes
        self.validate()

    @classmethod
    def unchecked(cls, inputs, output, size_dict: dict, arrays=None,
                  meta: dict | None = None) -> Network:
        """A network built by qsimdist itself from one already checked (a renaming, a
        subnetwork): fields taken as given, ``str`` names and ``int`` extents, without
        :meth:`validate` (milliseconds per network; an estimator call builds one per term).

        Parameters
        ----------
        inputs : sequence of sequence of str
            One sequence of index names per tensor (made tuples, names not converted).
        output : sequence of str
            The open indices.
        size_dict : dict of str to int
            Extent of every index, kept as given (not copied).
        arrays : list of array, optional
            One array per tensor, or ``None`` for a structure-only network.
        meta : dict, optional
            Metadata (default: an empty dict).

        Returns
        -------
        Network
            The network, not validated.
        """
        net = cls.__new__(cls)
        net.inputs = tuple(tuple(t) for t in inputs)
        net.output = tuple(output)
        net.size_dict = size_dict
        net.arrays = arrays
        net.meta = {} if meta is None else meta
        return net

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise :class:`InvalidInputError` naming the first inconsistency found."""
        seen = Counter(i for term in self.inputs for i in term)
        for k, term in enumerate(self.inputs):
            for i in term:
                if i not in self.size_dict:
                    raise InvalidInputError(
                        f"index {shorten(i)} of tensor {k} has no entry in size_dict"
                    )
            if len(set(term)) != len(term):
                raise InvalidInputError(
                    f"tensor {k} repeats an index {shorten(term)}; take the trace or diagonal first"
                )
        for i in self.output:
            if i not in seen:
                raise InvalidInputError(f"output index {shorten(i)} appears on no tensor")
        if len(set(self.output)) != len(self.output):
            raise InvalidInputError(f"output repeats an index: {shorten(self.output)}")
        for i, d in self.size_dict.items():
            if d < 1:
                raise InvalidInputError(f"index {shorten(i)} has extent {d}; extents must be >= 1")
        if self.arrays is not None:
            if len(self.arrays) != len(self.inputs):
                raise InvalidInputError(
                    f"{len(self.arrays)} arrays given for {len(self.inputs)} tensors"
                )
            for k, (term, arr) in enumerate(zip(self.inputs, self.arrays)):
                want = tuple(self.size_dict[i] for i in term)
                if tuple(arr.shape) != want:
                    raise InvalidInputError(
                        f"array {k} has shape {tuple(arr.shape)} but its indices {shorten(term)} "
                        f"need {shorten(want)}"
                    )

    # -------------------------------------------------------------- properties
    @property
    def num_tensors(self) -> int:
        return len(self.inputs)

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [tuple(self.size_dict[i] for i in term) for term in self.inputs]

    def hyper_indices(self) -> set[Index]:
        """Indices that appear on three or more tensors (or on two and the output)."""
        count = Counter(i for term in self.inputs for i in term)
        for i in self.output:
            count[i] += 1
        return {i for i, c in count.items() if c > 2}

    def canonical(self) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], tuple[int, ...]]:
        """The structure with indices renamed 0, 1, ... by first appearance.

        Two networks that differ only in index names (and array values) have
        the same canonical form; it keys the path cache.
        """
        names: dict[Index, int] = {}
        for term in self.inputs:
            for i in term:
                names.setdefault(i, len(names))
        for i in self.output:
            names.setdefault(i, len(names))
        inputs = tuple(tuple(names[i] for i in term) for term in self.inputs)
        output = tuple(names[i] for i in self.output)
        sizes = tuple(self.size_dict[i] for i in sorted(names, key=names.__getitem__))
        return inputs, output, sizes

    def canonical_names(self) -> list[Index]:
        """The index names in :meth:`canonical`'s numbering (name of index 0, 1, ...)."""
        names: dict[Index, int] = {}
        for term in (*self.inputs, self.output):
            for i in term:
                names.setdefault(i, len(names))
        return sorted(names, key=names.__getitem__)

    def symbolic(self) -> tuple[list[tuple[str, ...]], tuple[str, ...], dict[str, int], list[str]]:
        """``(inputs, output, size_dict, symbols)`` with indices as single-character symbols.

        The form cotengra's optimisers take: canonical index ``k`` (see
        :meth:`canonical` and :meth:`canonical_names`) is ``symbols[k]``,
        ``cotengra.get_symbol(k)``.
        """
        from cotengra import get_symbol

        inputs, output, sizes = self.canonical()
        sym = [get_symbol(i) for i in range(len(sizes))]
        return (
            [tuple(sym[i] for i in t) for t in inputs],
            tuple(sym[i] for i in output),
            {sym[i]: s for i, s in enumerate(sizes)},
            sym,
        )

    def structure_hash(self) -> str:
        """SHA-256 of :meth:`canonical`, hex."""
        blob = json.dumps(self.canonical(), separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    def with_random_arrays(self, seed: int = 0, dtype: str = "complex128") -> Network:
        """A copy with seeded Gaussian arrays (for structure-only benchmark networks).

        Parameters
        ----------
        seed : int, default 0
            Seed of the ``numpy.random.default_rng`` the entries are drawn from.
        dtype : str, default "complex128"
            The arrays' dtype; a complex dtype gets Gaussian real and imaginary parts.

        Returns
        -------
        Network
            A new network of the same structure and metadata with those arrays.
        """
        rng = np.random.default_rng(seed)
        arrays = []
        for shape in self.shapes:
            a = rng.standard_normal(shape)
            if np.dtype(dtype).kind == "c":
                a = a + 1j * rng.standard_normal(shape)
            arrays.append(a.astype(dtype))
        return Network(self.inputs, self.output, dict(self.size_dict), arrays, dict(self.meta))

    def einsum_equation(self) -> str:
        """The network as an einsum string (single-letter symbols via cotengra)."""
        from cotengra import get_symbol

        names: dict[Index, str] = {}
        for term in (*self.inputs, self.output):
            for i in term:
                names.setdefault(i, get_symbol(len(names)))
        lhs = ",".join("".join(names[i] for i in term) for term in self.inputs)
        return lhs + "->" + "".join(names[i] for i in self.output)

    def contract_reference(self, dtype: str = "complex128") -> np.ndarray:
        """Contract with cotengra's own contractor (a reference for tests).

        Parameters
        ----------
        dtype : str, default "complex128"
            The dtype the arrays are cast to before contracting.

        Returns
        -------
        numpy.ndarray
            The contracted value, axes in the order of :attr:`output`.

        Raises
        ------
        InvalidInputError
            The network has no arrays.
        """
        import cotengra as ctg

        if self.arrays is None:
            raise InvalidInputError("this network has no arrays to contract")
        arrays = [np.asarray(a, dtype=dtype) for a in self.arrays]
        return ctg.array_contract(
            arrays, self.inputs, self.output, size_dict=self.size_dict, optimize="greedy"
        )

    def __repr__(self) -> str:
        return (
            f"Network(tensors={self.num_tensors}, indices={len(self.size_dict)}, "
            f"output={len(self.output)}, hyper={len(self.hyper_indices())})"
        )

