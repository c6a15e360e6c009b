"""A given tensor network contracted through the plan cache, on either executor.

The work behind :func:`qsimdist.quimb.contract`, the :func:`qsimdist.quimb.use`
hook and ``qsimdist contract``: :class:`ContractOptions` (validated once),
:func:`cached_plan` (the process's plan cache, :data:`qsimdist.engine.cache.PLANS`)
and :func:`run_network` (local, or planned on rank 0 and run distributed under
``mpiexec``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidInputError, shorten
from ..executors import Executor, bind_executor
from ..frontends.quimb_network import PreparedNetwork
from ..network import Network
from ..planner.path import PathOptions
from .cache import small_first
from .options import RunOptions, check_run

if TYPE_CHECKING:
    from ..planner.plan import Plan

#: dtypes a contraction may ask for; real ones compute in the matching complex dtype
DTYPES = ("complex64", "complex128", "float32", "float64")


#: the run's keywords :class:`ContractOptions` takes: those of
#: :meth:`RunOptions.resolve <qsimdist.engine.options.RunOptions.resolve>`, and the path
#: search's ``max_time`` and ``max_repeats``
RUN_KEYWORDS = ("memory_limit", "path_options", "max_time", "max_repeats", "executor",
                "profile", "comm", "backend", "gemm", "collectives")
#: every keyword :class:`ContractOptions` takes, as its refusals list them
OPTION_NAMES = ("dtype", "memory_limit", "simplify_sequence", *RUN_KEYWORDS[1:], "run")


@dataclass(frozen=True, init=False)
class ContractOptions:
    """How :func:`contract` and :func:`use` plan and run a contraction: the contraction's
    own options and one run.

    Parameters
    ----------
    dtype : {"complex64", "complex128", "float32", "float64"}, optional
        ``None`` (default) follows the network's own arrays. The executors compute
        in complex; a real dtype (or real inputs with ``dtype=None``) computes in
        the complex dtype of the same precision and returns the real part.
        Integer or boolean inputs are contracted in complex128 and returned as
        float64.
    simplify_sequence : str, default ""
        Simplification letters (quimb's names) applied first (``""``: none; output
        indices are always kept).
    run : RunOptions or dict, optional
        The run, resolved already (an :class:`~qsimdist.engine.engine.Engine`'s; every
        contraction runs with it in its own compute dtype), or a dict of the run keywords
        below. Given, no run keyword is.
    **run_keywords
        The run's keywords (below), validated here and resolved for each call
        (:meth:`run_options`).

    Other Parameters
    ----------------
    memory_limit : str, int, float or None
        Peak bytes (``"8GiB"``, ``2e9``); slices to fit. ``None``: 80% of the
        memory available now; ``"none"``: no slicing (bounded by physical memory +
        swap). Under MPI: the limit per rank.
    path_options : PathOptions or dict, optional
        The path search's options (:class:`~qsimdist.PathOptions` or a dict of its
        fields).
    max_time : float, optional
        Path-search budget in seconds (overrides ``path_options``).
    max_repeats : int, optional
        Path-search trials (overrides ``path_options``).
    executor : {"local", "mpi"}, optional
        ``None``: ``"mpi"`` when a ``comm`` is given, or a ``profile`` under
        mpiexec (more than one rank), else ``"local"``.
    profile : str or HardwareProfile, optional
        Hardware profile the distributed plan is made for (default
        ``"local-cpu"`` under ``executor="mpi"``).
    comm : MPI communicator, optional
        The ranks of a distributed run (default ``MPI.COMM_WORLD``).
    backend : {"numpy", "cupy"}
        The array library.
    gemm : str, default "complex"
        How BLAS steps multiply (``"complex"``, ``"3m"``; ``"tf32"``, ``"3m-tf32"``
        on CuPy): see :func:`qsimdist.executors.local.execute`.
    collectives : {"auto", "mpi", "nccl"}
        How the ranks exchange arrays under ``executor="mpi"`` (the CLI's
        ``--comm``; see :func:`qsimdist.executors.comm.choose_collectives`).

    Attributes
    ----------
    dtype : str or None
        As given (its canonical name).
    simplify_sequence : str
        As given.
    run : RunOptions or dict
        The run given, or its keywords (validated, with their defaults; ``max_time`` and
        ``max_repeats`` folded into ``path_options``) to resolve one from.

    Raises
    ------
    InvalidInputError
        An unknown dtype, executor, backend, GEMM mode or collectives choice, a
        ``simplify_sequence`` that is not a string, an unreadable memory limit,
        bad path options, an unknown keyword, or ``run`` with run keywords.
    """

    dtype: str | None
    simplify_sequence: str
    run: RunOptions | dict

    def __init__(self, dtype: str | None = None, *, simplify_sequence: str = "",
                 run: RunOptions | None = None, **run_keywords: Any) -> None:
        if dtype is not None:
            name = _dtype_name(dtype)
            if name not in DTYPES:
                raise InvalidInputError(
                    f"unknown dtype {shorten(str(dtype))}; valid: {', '.join(DTYPES)}"
                )
            dtype = name
        if not isinstance(simplify_sequence, str):
            raise InvalidInputError(
                f"simplify_sequence must be a string of simplification letters (e.g. 'ADCRS'), got "
                f"{shorten(simplify_sequence)}"
            )
        if run is None:
            run = run_keywords
        elif run_keywords:
            raise InvalidInputError(
                f"give run or its keywords, not both (got run and {', '.join(run_keywords)})")
        if isinstance(run, Mapping):
            unknown = sorted(set(run) - set(RUN_KEYWORDS))
            if unknown:
                raise InvalidInputError(
                    f"unknown option {shorten(unknown[0])}; valid: {', '.join(OPTION_NAMES)}"
                )
            run = _checked_keywords(run, dtype)
        elif not isinstance(run, RunOptions):
            raise InvalidInputError(
                f"run must be a RunOptions (qsimdist.engine) or a dict of its keywords, got "
                f"{type(run).__name__}")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "simplify_sequence", simplify_sequence)
        object.__setattr__(self, "run", run)

    @classmethod
    def coerce(cls, options: ContractOptions | dict | None = None, **extra: Any) -> ContractOptions:
        """Options from a ``ContractOptions``, a dict and/or keywords (keywords win).

        Parameters
        ----------
        options : ContractOptions or dict, optional
            The options to start from (``None``: the defaults).
        **extra
            Keywords of :class:`ContractOptions` that replace those of ``options``.

        Raises
        ------
        InvalidInputError
            An unknown keyword (the message lists the valid ones), ``options`` of
            another type, or a value outside its valid ones.
        """
        if isinstance(options, ContractOptions):
            if not extra:
                return options
            base = options.keywords()
            if "run" in extra:  # a run given replaces the one before, keywords or resolved
                base = {k: base[k] for k in ("dtype", "simplify_sequence")}
        elif options is None:
            base = {}
        elif isinstance(options, dict):
            base = dict(options)
        else:
            raise InvalidInputError(
                f"options must be a dict or ContractOptions, got {type(options).__name__}"
            )
        base.update(extra)
        unknown = sorted(set(base) - set(OPTION_NAMES))
        if unknown:
            raise InvalidInputError(
                f"unknown option {shorten(unknown[0])}; valid: {', '.join(OPTION_NAMES)}"
            )
        return cls(**base)

    def keywords(self) -> dict:
        """The keywords that build these options again (``dtype``, ``simplify_sequence``
        and ``run`` or its keywords)."""
        out = {"dtype": self.dtype, "simplify_sequence": self.simplify_sequence}
        if isinstance(self.run, RunOptions):
            out["run"] = self.run
        else:
            out.update(self.run)
        return out

    def resolved_executor(self) -> str:
        """The run's executor: ``executor``, or by default ``"mpi"`` with a ``comm``, or with
        a ``profile`` when launched under mpiexec (more than one rank), else ``"local"``
        (:func:`qsimdist.executors.resolve_executor`); nothing is resolved but the name."""
        from ..executors import LocalExecutor, resolve_executor

        run = self.run
        if isinstance(run, RunOptions):
            return run.executor
        if run["executor"] is not None:
            return run["executor"]
        if run["comm"] is None and run["profile"] is None:
            return LocalExecutor.name
        return resolve_executor("auto", run["comm"])

    def resolved_runner(self) -> Executor:
        """The resolved executor bound to the run's ``comm`` (a distributed one without a
        ``comm``: ``MPI.COMM_WORLD``): what callers ask instead of its name."""
        if isinstance(self.run, RunOptions):
            return self.run.runner
        return bind_executor(self.resolved_executor(), self.run["comm"])

    def run_options(self, compute_dtype: str) -> RunOptions:
        """The run of one contraction in ``compute_dtype``: :attr:`run` in that dtype, or
        its keywords resolved now (:meth:`RunOptions.resolve
        <qsimdist.engine.options.RunOptions.resolve>`: the memory limit read, the executor
        bound, a distributed run's profile resolved).

        Parameters
        ----------
        compute_dtype : {"complex64", "complex128"}
            The dtype the contraction computes in.

        Returns
        -------
        RunOptions
        """
        run = self.run
        if isinstance(run, RunOptions):
            return run if run.dtype == compute_dtype else dataclasses.replace(
                run, dtype=compute_dtype)
        return RunOptions.resolve(dtype=compute_dtype, **dict(
            run, executor=self.resolved_executor()))


def _checked_keywords(given: dict, dtype: str | None) -> Mapping[str, Any]:
    """The run keywords ``given`` with their defaults, checked as
    :meth:`RunOptions.resolve` checks them (GEMM against the precision of ``dtype``: the
    executors compute a real dtype in the complex one of its precision)."""
    keywords = {"memory_limit": None, "path_options": None, "executor": None,
                "profile": None, "comm": None, "backend": "numpy", "gemm": "complex",
                "collectives": "auto"}
    keywords.update((k, v) for k, v in given.items() if k not in ("max_time", "max_repeats"))
    check_run(dtype="complex128" if dtype in ("complex128", "float64") else "complex64",
              backend=keywords["backend"], executor=keywords["executor"],
              gemm=keywords["gemm"], collectives=keywords["collectives"],
              memory_limit=keywords["memory_limit"])
    keywords["path_options"] = PathOptions.coerce(keywords["path_options"],
                                                  given.get("max_time"), given.get("max_repeats"))
    return keywords


def _dtype_name(dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except (TypeError, ValueError, SyntaxError):
        return str(dtype)


# ------------------------------------------------------------ contraction
def clear_plan_cache() -> None:
    """Forget the plans kept for reuse (the process's one cache,
    :data:`qsimdist.engine.cache.PLANS`)."""
    from .cache import PLANS

    PLANS.clear()


def cached_plan(net: Network, dtype: str, memory_limit: int | None,
                path_options: PathOptions, executor: str = "local", profile=None,
                comm=None) -> Plan:
    """A Plan for ``net``, reused when a network of the same structure was planned before.

    quimb users contract the same network many times (a loop over parameters,
    the hook inside an optimiser): the process's plan cache
    (:class:`qsimdist.engine.cache.PlanCache`) keeps the plans, keyed by the
    exact inputs, output, sizes, dtype and search options; a kept plan serves
    while its peak fits ``memory_limit`` and it is either unsliced or was made
    under the same limit. One or two tensors take their only path without a
    search (quimb's simplification hands the hook many such contractions); a
    plan over the memory limit is searched and sliced as usual.

    A distributed executor (``executor="mpi"``): the plan is made once, unsliced,
    on rank 0 of ``comm`` for the hardware ``profile`` (a distributed schedule
    over ``comm``'s ranks) and shared by every rank. The plan is not checked
    against the memory (:func:`run_network` asks the cache for a checked one).

    Parameters
    ----------
    net : Network
        The network to plan.
    dtype : {"complex64", "complex128"}
        The dtype the plan runs in.
    memory_limit : int or None
        Bytes the plan's peak must fit (``None``: no limit).
    path_options : PathOptions
        The path search's options.
    executor : {"local", "mpi"}
        The executor the plan is made for.
    profile : str or HardwareProfile, optional
        The hardware profile of a distributed plan.
    comm : MPI communicator, optional
        The ranks of a distributed plan.

    Returns
    -------
    Plan
    """
    from .cache import PLANS
    from .memory import MemoryBudget

    run = RunOptions(dtype=dtype, memory=MemoryBudget.resolve(
        "none" if memory_limit is None else memory_limit), executor=executor, comm=comm)
    plan, _ = PLANS.plan_for(net, run, profile=profile, path_options=path_options,
                             build=small_first(net, dtype, path_options), check=False)
    return plan


def run_network(net: Network, options: ContractOptions, compute_dtype: str,
                strip_exponent: bool = False, engine=None) -> tuple[Any, Plan]:
    """Plan and execute ``net`` (its arrays) with qsimdist; the result (NumPy) and the plan.

    Single process with ``executor="local"``; with ``"mpi"`` the plan is made
    once on rank 0 for the ranks of ``comm`` and the hardware ``profile``,
    broadcast, and run distributed (every rank returns the whole result).

    ``strip_exponent=True`` (local and MPI executors): the result is
    ``(mantissa, exponent)``, the value being ``mantissa * 10**exponent``
    (``max |mantissa| == 1``; ``(zeros, 0.0)`` for an exact zero), with the
    intermediates rescaled as the plan runs, so values beyond the dtype's
    range come out right (:func:`qsimdist.executors.local.execute`).
    ``net.meta["exponent"]`` is not applied here; the callers add it.

    Parameters
    ----------
    net : Network
        The network, with its arrays.
    options : ContractOptions
        How to plan and run it.
    compute_dtype : {"complex64", "complex128"}
        The dtype the contraction computes in.
    strip_exponent : bool, default False
        Return ``(mantissa, exponent)`` as above.
    engine : Engine, optional
        The :class:`~qsimdist.engine.engine.Engine` to contract with (a
        :func:`qsimdist.quimb.use` block's, built once from ``options``); by default
        one is built for this call, its options resolved once.

    Returns
    -------
    tuple of (numpy.ndarray or tuple, Plan)
        The value (or ``(mantissa, exponent)``) and the plan that ran.
    """
    if engine is None:
        from .engine import Engine

        engine = Engine(options.run_options(compute_dtype))
    values = engine.contract(net, dtype=compute_dtype,
                             simplify_sequence=options.simplify_sequence,
                             strip_exponent=strip_exponent)
    return values, engine.plan


def finish(values: np.ndarray, prepared: PreparedNetwork) -> np.ndarray:
    """Values computed in ``prepared.compute_dtype`` as ``prepared.result_dtype``.

    Parameters
    ----------
    values : numpy.ndarray
        The contracted values.
    prepared : PreparedNetwork
        What :func:`~qsimdist.frontends.quimb_network.prepare` made of the inputs:
        a real ``result_dtype`` keeps the real part.

    Returns
    -------
    numpy.ndarray
    """
    if prepared.result_dtype.startswith("float"):
        return values.real.astype(prepared.result_dtype)  # a copy, 0-d stays 0-d
    return values.astype(prepared.result_dtype, copy=False)
