"""quimb networks contracted by qsimdist: :func:`contract`, the :func:`use` hook, PEPS helpers.

* :func:`contract` takes a quimb ``TensorNetwork`` (or ``Tensor``, or a list of
  tensors) and returns what ``tn.contract(all, output_inds=...)`` returns — a
  scalar, or a quimb ``Tensor`` with ``output_inds`` in that order — with the
  path, slicing and layouts planned by qsimdist and the plan run by its
  executors. Hyper-indices (an index on three or more tensors) are allowed;
  as in quimb, a network with hyper-indices needs ``output_inds``.
* :func:`use` is a context manager inside which quimb's own contractions
  (``tn.contract(all)``, ``tn ^ all``, ``tensor_contract``) run through
  qsimdist (``Tensor @ Tensor`` calls ``tensordot`` directly and is not
  routed). quimb funnels every such call through the name
  ``array_contract`` in ``quimb.tensor.tensor_core``; :func:`use` rebinds
  that name on entry and restores it on exit, even when the body raises.
  Calls qsimdist cannot take (arrays other than NumPy's, ``backend=`` other
  than numpy, extra cotengra keywords, no explicit output) go to quimb's own
  function unchanged; :attr:`HookStats.fallbacks` counts them. With
  ``strip_exponent=True`` (quimb passes it for ``strip_exponent`` and
  ``equalize_norms``) the intermediates are rescaled as the plan runs and
  ``(mantissa, exponent)`` comes back in cotengra's convention, so values
  far outside float64's range are right; an exactly zero value is
  ``(0, 0.0)`` whether or not ``check_zero`` is given (quimb's ``nan``
  without it is never produced). The local and the MPI executor both do
  this (under MPI a sharded intermediate's ranks agree on one exponent).
* Every path converts a quimb network the same way
  (:mod:`qsimdist.frontends.quimb_network`): output indices in the order
  given, and the network's ``exponent`` applied.
* :func:`peps_norm` and :func:`peps_local_expectation`: exact norm and local
  expectation values of a quimb ``PEPS`` (any size and bond dimension), the
  networks built with quimb's own ``make_norm`` / ``gate`` / ``make_overlap``.

Under ``mpiexec`` with ``executor="mpi"`` (or a ``profile`` given), the plan is
made once on rank 0 for all ranks and run distributed; every rank must make
the same calls in the same order and gets the whole result.

This module is named ``quimb``; the real quimb is imported inside functions
with absolute imports (``import quimb.tensor``), which never resolve here.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from .engine import Engine, inside_qsimdist_now
from .engine.networks import (
    DTYPES,
    ContractOptions,
    cached_plan,
    clear_plan_cache,
    finish,
    run_network,
)
from .errors import InvalidInputError, MissingDependencyError, shorten
from .executors import executor_kind
from .frontends.quimb_network import (
    PreparedNetwork,
    default_output,
    prepare,
    quimb_tensors,
    times_ten_to,
)

#: quimb's rule for turning a complex scalar result real (``quimb.core.realify_scalar``)
_IMAG_TOL = 1e-12


def _quimb_tensor() -> ModuleType:
    """The real ``quimb.tensor`` (absolute import), or a MissingDependencyError."""
    from ._optional import require

    return require("quimb.tensor")


def contract_arrays(arrays: Sequence[Any], inputs: Sequence[Sequence[Any]],
                    output: Sequence[Any] | None = None,
                    options: ContractOptions | dict | None = None, *,
                    strip_exponent: bool = False, **kw: Any) -> Any:
    """Contract arrays with index lists (cotengra's ``array_contract`` form) through qsimdist.

    Returns an array whose axes follow ``output`` (quimb's default output when
    ``None``); with ``strip_exponent=True``, ``(mantissa, exponent)`` as
    cotengra's ``array_contract`` returns them: the value is
    ``mantissa * 10**exponent``, ``max |mantissa| == 1``, computed with the
    intermediates rescaled (no overflow or underflow whatever the value's
    magnitude), and an exactly zero value is ``(zeros, 0.0)``.

    Parameters
    ----------
    arrays : sequence of array_like
        One array per tensor.
    inputs : sequence of sequence of hashable
        The indices of each tensor (repeated indices on one tensor mean its
        diagonal, as in einsum).
    output : sequence of hashable, optional
        Indices to keep, in this order (``None``: quimb's default output).
    options : ContractOptions or dict, optional
        How to plan and run the contraction (see :class:`ContractOptions`).
    strip_exponent : bool, default False
        Return ``(mantissa, exponent)`` as above.
    **kw
        Fields of :class:`ContractOptions`, overriding ``options``.

    Returns
    -------
    numpy.ndarray or tuple of (numpy.ndarray, numpy.float64)
        The value, or its mantissa and exponent.

    Raises
    ------
    InvalidInputError
        Bad options, or arrays and indices that disagree (see :func:`prepare`).
    """
    opts = ContractOptions.coerce(options, **kw)
    prepared = prepare(arrays, inputs, output, opts.dtype)
    return _contract_prepared(prepared, opts, None, strip_exponent)


def _contract_prepared(prepared: PreparedNetwork, opts: ContractOptions, engine,
                       strip_exponent: bool) -> Any:
    """:func:`contract_arrays` once its arrays are prepared (``engine``: a :func:`use`
    block's, or ``None`` for one built for this call)."""
    if strip_exponent:
        (mantissa, exponent), _ = run_network(prepared.network, opts, prepared.compute_dtype,
                                              strip_exponent=True, engine=engine)
        return finish(mantissa, prepared), np.float64(exponent)
    values, _ = run_network(prepared.network, opts, prepared.compute_dtype, engine=engine)
    return finish(values, prepared)


def _as_scalar(value: np.ndarray) -> complex | float | int:
    """quimb's scalar result: a Python number, made real when the imaginary part is negligible."""
    x = value.item()
    if isinstance(x, complex) and abs(x.imag) < abs(x.real) * _IMAG_TOL:
        return x.real
    return x


def contract(tn: Any, output_inds: Sequence[str] | None = None, *, preserve_tensor: bool = False,
             strip_exponent: bool = False, options: ContractOptions | dict | None = None,
             **kw: Any) -> Any:
    """Contract a quimb network with qsimdist; returns what ``tn.contract(all, ...)`` returns.

    Parameters
    ----------
    tn : quimb TensorNetwork, Tensor or list of Tensor
        The network to contract.
    output_inds : sequence of str, optional
        Indices to keep, in this order. ``None``: indices on exactly one tensor,
        in order of appearance (quimb's default); a network with hyper-indices
        needs them given (``()`` for a scalar).
    preserve_tensor : bool, default False
        Return a ``Tensor`` even for a scalar result.
    strip_exponent : bool, default False
        Return ``(result, exponent)`` with the value ``result * 10**exponent`` and
        ``max |result| == 1``, as quimb's ``tn.contract(all, strip_exponent=True)``
        does; the intermediates are rescaled as the plan runs, so values far
        outside the dtype's range are exact to rounding (local executor only).
    options : ContractOptions or dict, optional
        A :class:`ContractOptions` or a dict of its fields (``dtype``,
        ``memory_limit``, ``path_options``, ``max_time``, ``executor``,
        ``profile``, ``comm``, ...).
    **kw
        The same fields as keywords.

    Returns
    -------
    scalar, quimb Tensor or tuple
        A Python scalar (real when quimb's would be), or a quimb ``Tensor`` with
        indices ``output_inds`` and the union of the tensors' tags (with
        ``strip_exponent``, that and the exponent). The network's ``exponent`` is
        folded into the result (or the returned exponent), as quimb does; with the
        local executor the contraction is then rescaled as it runs, so a large
        ``exponent`` on a network of small values (what ``equalize_norms`` leaves)
        gives the right value.

    Raises
    ------
    InvalidInputError
        Bad options, a hyper-index without ``output_inds``, or tensors whose
        indices disagree.
    MissingDependencyError
        quimb is not installed.
    """
    qtn = _quimb_tensor()
    opts = ContractOptions.coerce(options, **kw)
    tensors, exponent = quimb_tensors(tn)
    prepared = prepare([t.data for t in tensors], [t.inds for t in tensors], output_inds,
                       opts.dtype, exponent)
    scaled = strip_exponent or (exponent and executor_kind(opts.resolved_executor()).one_process)
    if scaled:
        (values, found), _ = run_network(prepared.network, opts, prepared.compute_dtype,
                                         strip_exponent=True)
        values = finish(values, prepared)
        if np.any(values):  # an exact zero keeps exponent 0.0 (quimb's check_zero)
            found += exponent
        if not strip_exponent:
            values = times_ten_to(values, found)
    else:
        values, _ = run_network(prepared.network, opts, prepared.compute_dtype)
        values = times_ten_to(finish(values, prepared), exponent)
    if not prepared.output and not preserve_tensor:
        result = _as_scalar(values)
    else:
        tags = {}
        for t in tensors:
            tags.update(dict.fromkeys(t.tags))
        result = qtn.Tensor(data=values, inds=prepared.output, tags=tuple(tags))
    return (result, np.float64(found)) if strip_exponent else result


# ------------------------------------------------------------------ hook
@dataclass
class HookStats:
    """What the :func:`use` hook did: contractions qsimdist ran and calls left to quimb.

    Attributes
    ----------
    routed : int
        Contractions qsimdist ran.
    fallbacks : int
        Calls passed to quimb's own function.
    fallback_reasons : dict of str to int
        Those calls counted by reason (``"no explicit output"``, ...).
    """

    routed: int = 0
    fallbacks: int = 0
    fallback_reasons: dict = field(default_factory=dict)

    def _fallback(self, reason: str) -> None:
        self.fallbacks += 1
        self.fallback_reasons[reason] = self.fallback_reasons.get(reason, 0) + 1


class _Hook:
    """The installed replacement of ``quimb.tensor.tensor_core.array_contract`` and its stack."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: per open block: its options, its statistics and its engine (built once)
        self.stack: list[tuple[ContractOptions, HookStats, Engine]] = []
        self.original = None
        self.module = None

    def __call__(self, arrays: Sequence[Any], inputs: Sequence[Sequence[Any]],
                 output: Sequence[Any] | None = None, optimize: Any = None,
                 backend: str | None = None, strip_exponent: bool = False,
                 check_zero: bool = False, **kwargs: Any) -> Any:
        original = self.original
        with self.lock:
            top = self.stack[-1] if self.stack else None
        reason = self._refusal(top, arrays, output, backend, kwargs)
        if reason is not None:
            if top is not None:
                top[1]._fallback(reason)
            return original(arrays, inputs, output, optimize=optimize, backend=backend,
                            strip_exponent=strip_exponent, check_zero=check_zero, **kwargs)
        opts, stats, engine = top
        # quimb passes its equalize_norms here, a bool or a norm to equalize to
        values = _contract_prepared(prepare(arrays, inputs, output, opts.dtype), opts, engine,
                                    bool(strip_exponent))
        stats.routed += 1
        return values

    @staticmethod
    def _refusal(top: tuple | None, arrays: Sequence[Any], output: Sequence[Any] | None,
                 backend: str | None, kwargs: dict) -> str | None:
        if top is None:
            return "hook not active"
        if inside_qsimdist_now():
            return "called from inside qsimdist"
        if kwargs:
            return f"cotengra keywords {sorted(kwargs)}"
        if output is None:
            return "no explicit output"
        if backend not in (None, "numpy"):
            return f"backend {backend!r}"
        if not arrays or not all(type(a) is np.ndarray for a in arrays):
            return "arrays other than numpy's"
        return None


_HOOK = _Hook()


def _tensor_core() -> ModuleType:
    qtn = _quimb_tensor()
    core = getattr(qtn, "tensor_core", None)
    if core is None or not callable(getattr(core, "array_contract", None)):
        import quimb

        raise MissingDependencyError(
            f"quimb {getattr(quimb, '__version__', '?')} has no "
            "quimb.tensor.tensor_core.array_contract to hook; qsimdist.quimb.use() needs "
            "quimb >= 1.8 (qsimdist.quimb.contract(tn) works with any version)"
        )
    return core


@contextlib.contextmanager
def use(options: ContractOptions | dict | None = None, **kw: Any) -> Iterator[HookStats]:
    """Route quimb's contractions through qsimdist inside a ``with`` block.

    Inside the block ``tn.contract(all, ...)``, ``tn ^ all``,
    ``tensor_contract(...)`` and every other call quimb makes to
    ``quimb.tensor.tensor_core.array_contract`` are planned and executed by
    qsimdist with ``options`` (see :class:`ContractOptions`); an
    ``optimize=`` given to quimb is ignored (qsimdist finds its own path).
    Calls qsimdist does not take are passed to quimb unchanged (see the
    module docstring), and so are calls qsimdist itself makes to quimb.

    The hook is process-wide (it rebinds a module attribute of quimb), so
    other threads' quimb calls are routed too while the block runs. Blocks
    nest: the innermost block's options apply, and quimb's own function is
    put back when the outermost block exits, also when it exits by an
    exception. ``tn.contract()`` with the default ``tags=...`` on structured
    networks (PEPS, MPS) follows quimb's own structured scheme, whose partial
    contractions are routed one by one; use ``tn.contract(all)`` or
    :func:`contract` to hand the whole network to qsimdist at once.

    Parameters
    ----------
    options : ContractOptions or dict, optional
        How the block's contractions are planned and run.
    **kw
        Fields of :class:`ContractOptions`, overriding ``options``.

    Yields
    ------
    HookStats
        Counts of the routed and fallen-back calls of this block.

    Raises
    ------
    InvalidInputError
        Bad options.
    MissingDependencyError
        quimb is not installed, or has no ``array_contract`` to hook (quimb < 1.8).
    """
    opts = ContractOptions.coerce(options, **kw)
    stats = HookStats()
    core = _tensor_core()
    # one engine per block, its options resolved once (each call computes in the dtype of
    # its own arrays where ``dtype`` is left to them)
    wide = opts.dtype in (None, "complex128", "float64")
    entry = (opts, stats, Engine(opts.run_options("complex128" if wide else "complex64")))
    with _HOOK.lock:
        if not _HOOK.stack:
            current = core.array_contract
            if current is not _HOOK:
                _HOOK.original = current
                _HOOK.module = core
                core.array_contract = _HOOK
        _HOOK.stack.append(entry)
    try:
        yield stats
    finally:
        with _HOOK.lock:
            for k in range(len(_HOOK.stack) - 1, -1, -1):
                if _HOOK.stack[k] is entry:
                    del _HOOK.stack[k]
                    break
            if not _HOOK.stack and _HOOK.module is not None:
                if _HOOK.module.array_contract is _HOOK:
                    _HOOK.module.array_contract = _HOOK.original
                _HOOK.module = None


def hook_active() -> bool:
    """Whether a :func:`use` block is open (quimb's contractions go through qsimdist)."""
    with _HOOK.lock:
        return bool(_HOOK.stack)


# ------------------------------------------------------------------ PEPS
def _check_peps(peps: Any) -> None:
    qtn = _quimb_tensor()
    if not isinstance(peps, qtn.TensorNetworkGenVector):
        raise InvalidInputError(
            f"expected a quimb PEPS (or other tensor network state), got {type(peps).__name__}"
        )


def peps_norm(peps: Any, *, squared: bool = False, options: ContractOptions | dict | None = None,
              **kw: Any) -> float:
    """Exact norm ``sqrt(<psi|psi>)`` of a quimb ``PEPS`` (``squared=True``: ``<psi|psi>``).

    The network is quimb's ``peps.make_norm()``, contracted whole by qsimdist;
    any ``Lx``, ``Ly`` and bond dimension (planning slices to fit the memory
    limit). Equals quimb's ``peps.norm()`` computed by exact contraction.

    Parameters
    ----------
    peps : quimb PEPS
        The state (any tensor network state quimb can ``make_norm``).
    squared : bool, default False
        Return ``<psi|psi>`` instead of its square root.
    options : ContractOptions or dict, optional
        As for :func:`contract`.
    **kw
        As for :func:`contract`.

    Returns
    -------
    float

    Raises
    ------
    InvalidInputError
        ``peps`` is not a quimb tensor network state, or bad options.
    """
    _check_peps(peps)
    norm_tn = peps.make_norm(layer_tags=None)
    value = contract(norm_tn, output_inds=(), options=options, **kw)
    value = float(np.real(value))
    return value if squared else math.sqrt(max(value, 0.0))


def peps_local_expectation(peps: Any, operator: Any, where: Any, *, normalized: bool = True,
                           options: ContractOptions | dict | None = None,
                           **kw: Any) -> complex | float:
    """Exact ``<psi|O|psi>`` (divided by ``<psi|psi>`` when ``normalized``) for a quimb PEPS.

    The network ``<psi|O|psi>`` is built with quimb's tools: ``gate(...,
    contract=False)`` on a copy, then ``make_overlap`` with the state.

    Parameters
    ----------
    peps : quimb PEPS
        The state (or any tensor network state quimb can ``gate``).
    operator : array_like
        The local operator, a ``(d^k, d^k)`` or ``(d,)*2k`` array.
    where : tuple or sequence of tuple
        One site ``(x, y)`` or a sequence of ``k`` sites.
    normalized : bool, default True
        Divide by the exact ``<psi|psi>``.
    options : ContractOptions or dict, optional
        As for :func:`contract`.
    **kw
        As for :func:`contract`.

    Returns
    -------
    complex or float
        A Python scalar (real when the imaginary part is negligible, as quimb's).

    Raises
    ------
    InvalidInputError
        ``peps`` is not a tensor network state, an operator that is not numeric
        or whose size does not match the sites, no site or an unknown one.
    """
    _check_peps(peps)
    op = np.asarray(operator)
    if op.dtype.kind not in "biufc":
        raise InvalidInputError(f"operator has dtype {op.dtype}; valid: numbers")
    sites = [where] if _is_site(where) else list(where)
    if not sites:
        raise InvalidInputError("where names no site; give (x, y) or a list of sites")
    for s in sites:
        if s not in peps.sites:
            raise InvalidInputError(
                f"site {shorten(s)} is not in this network; sites run over "
                f"{shorten(tuple(peps.sites)[:4])}…"
            )
    d = math.prod(peps.phys_dim(s) for s in sites)
    if op.size != d * d:
        raise InvalidInputError(
            f"operator has {op.size} entries but {len(sites)} site(s) of total dimension {d} "
            f"need a ({d}, {d}) matrix"
        )
    try:
        gated = peps.gate(op.reshape(d, d), sites if len(sites) > 1 else sites[0],
                          contract=False)
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"cannot apply the operator at {shorten(where)}: {exc}") from None
    overlap = gated.make_overlap(peps, layer_tags=None)
    value = contract(overlap, output_inds=(), options=options, **kw)
    if normalized:
        value = value / peps_norm(peps, squared=True, options=options, **kw)
    return _as_scalar(np.asarray(value))


def _is_site(where: Any) -> bool:
    """One site: a tuple of integers like (x, y), or a hashable that is not a list of sites."""
    if isinstance(where, tuple):
        return all(isinstance(c, (int, np.integer)) for c in where)
    return not isinstance(where, list)


__all__ = [
    "DTYPES",
    "ContractOptions",
    "HookStats",
    "PreparedNetwork",
    "cached_plan",
    "clear_plan_cache",
    "contract",
    "contract_arrays",
    "default_output",
    "finish",
    "hook_active",
    "peps_local_expectation",
    "peps_norm",
    "prepare",
    "run_network",
    "use",
]
