"""Arrays with index lists, and quimb tensor networks, turned into a :class:`Network`.

One conversion serves every path that takes a quimb network: the
:func:`qsimdist.quimb.use` hook (arrays and index lists, as quimb passes
them to ``array_contract``), :func:`qsimdist.quimb.contract` and
:func:`qsimdist.contract` (a ``TensorNetwork``, through
:func:`~qsimdist.frontends.network_from_quimb`). It keeps the output indices
in the order the caller gave them (quimb's default order when none are
given) and the network's ``exponent`` (quimb's lazily stripped scale, log10),
which it records as ``PreparedNetwork.exponent`` and ``Network.meta["exponent"]``.

quimb is imported inside the functions that read its objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInputError, shorten
from ..network import Network

#: the complex dtype each result dtype is computed in (the executors compute in complex)
COMPUTE_DTYPES = {"complex64": "complex64", "complex128": "complex128",
                  "float32": "complex64", "float64": "complex128"}
#: the key of ``Network.meta`` holding a quimb network's exponent (value = contraction * 10**it)
EXPONENT_KEY = "exponent"


@dataclass
class PreparedNetwork:
    """A contraction as a qsimdist :class:`Network`, with what is needed to give the result back.

    Attributes
    ----------
    network : Network
        The IR (index names are strings).
    output : tuple
        The caller's output indices, in order (their original objects).
    compute_dtype : {"complex64", "complex128"}
        The complex dtype the plan runs in.
    result_dtype : str
        The dtype of the returned values.
    exponent : float, default 0.0
        The network's scale, log10: its value is the contraction times
        ``10**exponent`` (quimb's ``TensorNetwork.exponent``; 0.0 for plain arrays).
    """

    network: Network
    output: tuple
    compute_dtype: str
    result_dtype: str
    exponent: float = 0.0


def _diagonal(arr: np.ndarray, term: tuple) -> tuple[np.ndarray, tuple]:
    """A tensor whose index list repeats an index, reduced to its diagonal (einsum's meaning)."""
    unique = tuple(dict.fromkeys(term))
    if len(unique) == len(term):
        return arr, term
    ids = {ix: k for k, ix in enumerate(unique)}
    return np.einsum(arr, [ids[ix] for ix in term], [ids[ix] for ix in unique]), unique


def _index_names(inputs: Sequence[tuple], output: tuple) -> dict:
    """Original index -> string name for the IR (strings kept as they are when all are strings)."""
    seen = dict.fromkeys(ix for term in (*inputs, output) for ix in term)
    if all(isinstance(ix, str) for ix in seen):
        return {ix: ix for ix in seen}
    return {ix: f"i{k}" for k, ix in enumerate(seen)}


def default_output(inputs: Sequence[tuple]) -> tuple:
    """quimb's default output: indices on exactly one tensor, in order of first appearance.

    Parameters
    ----------
    inputs : sequence of tuple
        The indices of each tensor (an index repeated on one tensor counts once).

    Returns
    -------
    tuple
        The output indices.

    Raises
    ------
    InvalidInputError
        An index on three or more tensors (a hyper-index), for which quimb, too,
        needs explicit ``output_inds``.
    """
    count: dict = {}
    for term in inputs:
        for ix in dict.fromkeys(term):
            count[ix] = count.get(ix, 0) + 1
    hyper = [ix for ix, c in count.items() if c > 2]
    if hyper:
        raise InvalidInputError(
            f"index {shorten(hyper[0])} appears on {count[hyper[0]]} tensors (a hyper-index); "
            "pass output_inds=... to say which indices to keep (() for a scalar)"
        )
    return tuple(ix for ix, c in count.items() if c == 1)


def _result_dtype(in_dtype: np.dtype, dtype: str | None) -> str:
    if dtype is None:
        if in_dtype.kind == "c":
            return "complex64" if in_dtype.itemsize <= 8 else "complex128"
        return "float32" if in_dtype == np.float32 else "float64"
    if dtype not in COMPUTE_DTYPES:
        raise InvalidInputError(
            f"unknown dtype {shorten(dtype)}; valid: {', '.join(COMPUTE_DTYPES)}"
        )
    if dtype.startswith("float") and in_dtype.kind == "c":
        raise InvalidInputError(
            f"dtype {dtype} asked for, but the network has complex arrays ({in_dtype}); "
            "use complex64 or complex128"
        )
    return dtype


def prepare(arrays: Sequence[Any], inputs: Sequence[Sequence[Any]], output: Sequence[Any] | None,
            dtype: str | None = None, exponent: float = 0.0) -> PreparedNetwork:
    """Check a contraction given as arrays and index lists and turn it into a Network.

    Parameters
    ----------
    arrays : sequence of array_like
        One array per tensor (anything ``numpy.asarray`` takes).
    inputs : sequence of sequence of hashable
        The indices of each tensor (any hashable; repeated indices on one tensor
        mean its diagonal, as in einsum).
    output : sequence of hashable or None
        Indices to keep, in this order; ``None`` for quimb's default
        (:func:`default_output`).
    dtype : {"complex64", "complex128", "float32", "float64"}, optional
        ``None`` to follow the arrays (see :class:`qsimdist.quimb.ContractOptions`).
    exponent : float, default 0.0
        The network's scale, log10 (kept as ``PreparedNetwork.exponent`` and, when
        nonzero, ``network.meta["exponent"]``).

    Returns
    -------
    PreparedNetwork

    Raises
    ------
    InvalidInputError
        No tensors, an array whose rank or extents disagree with its indices or
        with another tensor's, a bad output index, a non-finite exponent, or a real
        ``dtype`` asked for complex inputs.
    """
    if len(arrays) == 0:
        raise InvalidInputError("the network has no tensors; nothing to contract")
    if len(arrays) != len(inputs):
        raise InvalidInputError(f"{len(arrays)} arrays given for {len(inputs)} index lists")
    terms = [tuple(term) for term in inputs]
    arrs = []
    for k, (a, term) in enumerate(zip(arrays, terms)):
        a = np.asarray(a)
        if a.dtype.kind not in "biufc":
            raise InvalidInputError(f"tensor {k} has dtype {a.dtype}; valid: numbers")
        if a.ndim != len(term):
            raise InvalidInputError(
                f"tensor {k} has {a.ndim} axes but {len(term)} indices {shorten(term)}"
            )
        arrs.append(a)
    size: dict = {}
    for k, (a, term) in enumerate(zip(arrs, terms)):
        for ix, d in zip(term, a.shape):
            if size.setdefault(ix, (d, k))[0] != d:
                raise InvalidInputError(
                    f"index {shorten(ix)} has size {size[ix][0]} on tensor {size[ix][1]} but "
                    f"{d} on tensor {k}; an index must have one size everywhere"
                )
    reduced = [_diagonal(a, term) for a, term in zip(arrs, terms)]
    out = default_output([t for _, t in reduced]) if output is None else tuple(output)
    for ix in out:
        if ix not in size:
            raise InvalidInputError(f"output index {shorten(ix)} is on no tensor")
    if len(set(out)) != len(out):
        raise InvalidInputError(f"output_inds repeats an index: {shorten(out)}")
    result = _result_dtype(np.result_type(*arrs), dtype)
    exponent = float(exponent)
    if exponent != exponent or exponent in (float("inf"), float("-inf")):
        raise InvalidInputError(f"the network's exponent is {exponent}; it must be finite")
    names = _index_names([t for _, t in reduced], out)
    net = Network(
        [tuple(names[ix] for ix in t) for _, t in reduced],
        tuple(names[ix] for ix in out),
        {names[ix]: d for ix, (d, _) in size.items() if ix in names},
        [a for a, _ in reduced],
        {EXPONENT_KEY: exponent} if exponent else {},
    )
    return PreparedNetwork(net, out, COMPUTE_DTYPES[result], result, exponent)


def quimb_tensors(tn: Any) -> tuple[list, float]:
    """The tensors of a quimb ``TensorNetwork``, ``Tensor`` or sequence of ``Tensor``,
    and the network's exponent (0.0 for tensors)."""
    from .._optional import require

    qtn = require("quimb.tensor")
    if isinstance(tn, qtn.TensorNetwork):
        return list(tn.tensor_map.values()), float(getattr(tn, "exponent", 0.0) or 0.0)
    if isinstance(tn, qtn.Tensor):
        return [tn], 0.0
    if isinstance(tn, (list, tuple)) and all(isinstance(t, qtn.Tensor) for t in tn):
        return list(tn), 0.0
    raise InvalidInputError(
        f"cannot contract an object of type {type(tn).__name__}; valid: a quimb TensorNetwork, "
        "a quimb Tensor or a list of quimb Tensors"
    )


def prepare_quimb(tn: Any, output_inds: Sequence[Any] | None = None,
                  dtype: str | None = None) -> PreparedNetwork:
    """:func:`prepare` for a quimb network: its tensors' data and indices, and its exponent.

    ``output_inds``: indices to keep, in this order; ``None``: quimb's default
    (indices on exactly one tensor, in order of first appearance; a network
    with hyper-indices needs them given).
    """
    tensors, exponent = quimb_tensors(tn)
    return prepare([t.data for t in tensors], [t.inds for t in tensors], output_inds, dtype,
                   exponent)


#: the largest power of ten applied in one multiplication (10.0**300 is a normal float)
_MAX_DECADES = 300.0


def times_ten_to(values: Any, exponent: float) -> Any:
    """``values * 10**exponent`` in the dtype of ``values`` (numpy or cupy arrays).

    Computed in double precision and in factors of at most ``10**300``, so an
    exponent beyond a float's range gives the value (or ``inf``, or ``0``
    where the product is out of the dtype's range) rather than an overflow
    error, and exact zeros stay zero (never ``0 * inf``).
    """
    e = float(exponent)
    if not e:
        return values
    dtype = values.dtype
    wide = values.astype(np.complex128 if dtype.kind == "c" else np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        while e:
            part = max(-_MAX_DECADES, min(_MAX_DECADES, e))
            wide = wide * 10.0**part
            e -= part
        return wide.astype(dtype)


__all__ = [
    "COMPUTE_DTYPES",
    "EXPONENT_KEY",
    "PreparedNetwork",
    "default_output",
    "prepare",
    "prepare_quimb",
    "quimb_tensors",
    "times_ten_to",
]
