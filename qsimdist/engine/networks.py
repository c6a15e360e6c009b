"""A given tensor network contracted through the plan cache, on either executor.

The work behind :func:`qsimdist.quimb.contract`, the :func:`qsimdist.quimb.use`
hook and ``qsimdist contract``: :class:`ContractOptions` (validated once),
:func:`cached_plan` (the process's plan cache, :data:`qsimdist.engine.cache.PLANS`)
and :func:`run_network` (local, or planned on rank 0 and run distributed under
``mpiexec``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import check_gemm
from ..errors import InvalidInputError, shorten
from ..executors import Executor, bind_executor, executor_kind
from ..frontends.quimb_network import PreparedNetwork
from ..network import Network
from ..planner.path import PathOptions
from .cache import small_first
from .options import RunOptions

if TYPE_CHECKING:
    from ..planner.plan import Plan

#: dtypes a contraction may ask for; real ones compute in the matching complex dtype
DTYPES = ("complex64", "complex128", "float32", "float64")


@dataclass(frozen=True)
class ContractOptions:
    """How :func:`contract` and :func:`use` plan and run a contraction.

    Parameters
    ----------
    dtype : {"complex64", "complex128", "float32", "float64"}, optional
        ``None`` (default) follows the network's own arrays. The executors compute
        in complex; a real dtype (or real inputs with ``dtype=None``) computes in
        the complex dtype of the same precision and returns the real part.
        Integer or boolean inputs are contracted in complex128 and returned as
        float64.
    memory_limit : str, int, float or None
        Peak bytes (``"8GiB"``, ``2e9``); slices to fit. ``None``: 80% of the
        memory available now; ``"none"``: no slicing (bounded by physical memory +
        swap). Under MPI: the limit per rank.
    simplify_sequence : str, default ""
        Simplification letters (quimb's names) applied first (``""``: none; output
        indices are always kept).
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

    Raises
    ------
    InvalidInputError
        An unknown dtype, executor, backend, GEMM mode or collectives choice, a
        ``simplify_sequence`` that is not a string, an unreadable memory limit or
        bad path options.
    """

    dtype: str | None = None
    memory_limit: str | int | float | None = None
    simplify_sequence: str = ""
    path_options: PathOptions | dict | None = None
    max_time: float | None = None
    max_repeats: int | None = None
    executor: str | None = None
    profile: Any = None
    comm: Any = None
    backend: str = "numpy"
    gemm: str = "complex"
    collectives: str = "auto"

    def __post_init__(self) -> None:
        if self.dtype is not None:
            name = _dtype_name(self.dtype)
            if name not in DTYPES:
                raise InvalidInputError(
                    f"unknown dtype {shorten(str(self.dtype))}; valid: {', '.join(DTYPES)}"
                )
            object.__setattr__(self, "dtype", name)
        if self.executor is not None:
            executor_kind(self.executor)  # an unknown name: the one line with the valid list
        if self.backend not in ("numpy", "cupy"):
            raise InvalidInputError(f"unknown backend {shorten(self.backend)}; valid: numpy, cupy")
        # the executors compute a real dtype in the complex one of its precision
        from ..executors import check_comm_choice, check_nccl_backend

        check_comm_choice(self.collectives)
        check_nccl_backend(self.collectives, self.backend)
        check_gemm(self.gemm, self.backend,
                   "complex128" if self.dtype in ("complex128", "float64") else "complex64")
        if not isinstance(self.simplify_sequence, str):
            raise InvalidInputError(
                f"simplify_sequence must be a string of simplification letters (e.g. 'ADCRS'), got "
                f"{shorten(self.simplify_sequence)}"
            )
        if self.path_options is not None:
            object.__setattr__(self, "path_options", PathOptions.coerce(self.path_options))
        from ..config import parse_memory
        from .memory import is_none_word
        from .options import check_backend

        if self.memory_limit is not None and not is_none_word(self.memory_limit):
            parse_memory(self.memory_limit)  # refuse an unreadable size now, not after planning
        check_backend(self.backend)

    @classmethod
    def coerce(cls, options: ContractOptions | dict | None = None, **extra: Any) -> ContractOptions:
        """Options from a ``ContractOptions``, a dict and/or keywords (keywords win).

        Parameters
        ----------
        options : ContractOptions or dict, optional
            The options to start from (``None``: the defaults).
        **extra
            Fields of :class:`ContractOptions` that replace those of ``options``.

        Raises
        ------
        InvalidInputError
            An unknown field (the message lists the valid ones), ``options`` of
            another type, or a field outside its valid values.
        """
        if isinstance(options, ContractOptions):
            if not extra:
                return options
            base = {f.name: getattr(options, f.name) for f in dataclasses.fields(cls)}
        elif options is None:
            base = {}
        elif isinstance(options, dict):
            base = dict(options)
        else:
            raise InvalidInputError(
                f"options must be a dict or ContractOptions, got {type(options).__name__}"
            )
        base.update(extra)
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(base) - set(valid))
        if unknown:
            raise InvalidInputError(
                f"unknown option {shorten(unknown[0])}; valid: {', '.join(valid)}"
            )
        return cls(**base)

    def resolved_budget(self):
        """The memory budget (:class:`qsimdist.engine.MemoryBudget`) of :attr:`memory_limit`."""
        from .memory import MemoryBudget

        runner = self.resolved_runner()
        return MemoryBudget.resolve(self.memory_limit,
                                    runner.comm if runner.distributed else None)

    def resolved_memory_limit(self) -> int | None:
        """Bytes plans are made within (``None``: no limit), from :attr:`memory_limit`."""
        return self.resolved_budget().limit

    def resolved_path_options(self) -> PathOptions:
        return PathOptions.coerce(self.path_options, self.max_time, self.max_repeats)

    def resolved_executor(self) -> str:
        """``executor``, or by default ``"mpi"`` with a ``comm``, or with a ``profile`` when
        launched under mpiexec (more than one rank), else ``"local"``
        (:func:`qsimdist.executors.resolve_executor`)."""
        from ..executors import LocalExecutor, resolve_executor

        if self.executor is not None:
            return self.executor
        if self.comm is None and self.profile is None:
            return LocalExecutor.name
        return resolve_executor("auto", self.comm)

    def resolved_runner(self) -> Executor:
        """The resolved executor bound to :attr:`comm` (a distributed one without a
        ``comm``: ``MPI.COMM_WORLD``): what callers ask instead of its name."""
        return bind_executor(self.resolved_executor(), self.comm)

    def run_options(self, compute_dtype: str, budget=None) -> RunOptions:
        """These options as the engine's :class:`~qsimdist.engine.options.RunOptions`;
        validated already, so nothing is resolved twice.

        Parameters
        ----------
        compute_dtype : {"complex64", "complex128"}
            The dtype the contraction computes in.
        budget : MemoryBudget, optional
            The memory budget (default :meth:`resolved_budget`).
        """
        runner = self.resolved_runner()
        run = RunOptions(dtype=compute_dtype,
                         memory=budget if budget is not None else self.resolved_budget(),
                         backend=self.backend, executor=runner.name, profile=self.profile,
                         comm=runner.comm if runner.distributed else self.comm,
                         gemm=self.gemm, collectives=self.collectives,
                         path_options=self.resolved_path_options())
        # distributed, the profile travels resolved (with its memory set to the limit)
        return dataclasses.replace(run, profile=run.hardware()) if runner.distributed else run


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
