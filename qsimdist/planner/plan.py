"""The versioned, JSON-serialisable :class:`Plan` and :func:`make_plan`.

A Plan is plain data: the (simplified) network with its arrays, the SSA path
in cotengra's convention, the sliced indices, and per step the operand and
output mode orders, GEMM sizes, FLOPs, bytes and live memory. It is written
by ``qsimdist plan`` and read back by ``qsimdist run``; files from elsewhere
are validated field by field before anything runs.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .._fileio import atomic_write_text
from ..config import check_dtype, format_bytes, format_count, reuse_enabled
from ..errors import InvalidInputError, PlanError, PlanFormatError, QsimdistError
from ..hardware.costs import LocalCosts
from ..memory_limit import out_of_memory
from ..network import Network
from .lifetime import Layouts, Step, lifetime_order
from .path import PathOptions, find_path
from .plan_fields import check_meta, clip_message, decode_array, encode_array
from .registry import get_executor, read_schedule
from .slicing import slice_path

SCHEMA = "qsimdist.plan"
#: version 2 added meta["distribution"] (a per-step annotation, now ignored on load);
#: version 3 holds a complete distributed schedule under "distribution" (see
#: qsimdist.planner.distribution.schedule). Versions 1 and 2 still load.
VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
#: slicing to fit memory first targets the largest intermediate at one part in this many of
#: the budget (an operand, its partner and the output can be live together)
SLICE_TARGET_SHARE = 3


@dataclass
class PlanStats:
    """Totals over the whole contraction (all slices)."""

    flops: float
    peak_bytes: int
    transposed_bytes: int
    n_slices: int
    log10_cost: float  # cotengra's convention: multiply-adds over all slices
    max_intermediate: int  # elements of the largest intermediate, per slice
    n_steps: int
    kernel_counts: dict = field(default_factory=dict)
    path_from_cache: bool = False
    expanded_bytes: int = 0  # broadcast operands materialised for BLAS (copies, not permutations)
    steps_without_transpose: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Plan:
    """An executable contraction plan (see the module docstring): :func:`qsimdist.plan`
    makes one, :meth:`load` reads one back.

    Attributes
    ----------
    network : Network
        The (simplified) network, with its arrays where it has them.
    path : list of tuple of (int, int)
        The SSA contraction path, in cotengra's convention.
    sliced : list of str
        The sliced indices.
    dtype : str
        The dtype the plan runs in.
    leaf_modes : list of tuple of str
        Per input tensor, its mode order.
    leaf_sum : list of tuple of str
        Per input tensor, the indices summed before the first step.
    steps : list of Step
        Per step: operand and output mode orders, GEMM sizes, FLOPs, bytes, live memory.
    stats : PlanStats
        Totals over the whole contraction (all slices).
    meta : dict
        The network's metadata (for a circuit: ``bitstring``, ``n_qubits``, ``order``).
    schedule : Schedule or None
        A distributed schedule (``qsimdist.planner.distribution.Schedule``) or ``None``.
    kept : tuple of int
        Step outputs (SSA node ids) the local executor keeps from one slice to the
        next (:func:`with_local_reuse`); their bytes are in the peak.
    workspace : dict
        Free buffers the local executor keeps between runs of this plan, by array
        module and dtype (never saved, compared or shown; see :meth:`release_workspace`).
    """

    network: Network
    path: list[tuple[int, int]]
    sliced: list[str]
    dtype: str
    leaf_modes: list[tuple[str, ...]]
    leaf_sum: list[tuple[str, ...]]
    steps: list[Step]
    stats: PlanStats
    meta: dict = field(default_factory=dict)
    schedule: object | None = None
    kept: tuple[int, ...] = ()
    workspace: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict:
        """Pickled and deep-copied without the kept buffers (they are this process's)."""
        state = dict(self.__dict__)
        state["workspace"] = {}
        return state

    # ----------------------------------------------------------------- run
    def release_workspace(self) -> int:
        """Drop the buffers kept from earlier runs of this plan; returns the bytes released."""
        held = sum(pool.held for pool in self.workspace.values())
        self.workspace.clear()
        return held

    def execute(self, backend: str = "numpy", progress=None, executor: str = "local",
                **options):
        """Contract; the result's axes follow ``network.output``.

        Parameters
        ----------
        backend : {"numpy", "cupy"}
            The array library.
        progress : callable, optional
            ``progress("slices", done, total)``, called as slices finish.
        executor : {"local", "mpi"}
            ``"mpi"`` runs the distributed schedule over MPI ranks (executors are
            looked up in :mod:`qsimdist.planner.registry`).
        **options
            The executor's keywords (``gemm``, ``strip_exponent``; ``comm``,
            ``memory_limit``, ``stats`` under MPI).

        Raises
        ------
        OutOfMemoryError
            Where the host cannot give what the plan was made within (one line: the
            allocation, the plan's peak, the limit).
        """
        run = get_executor(executor)
        try:
            return run(self, backend=backend, progress=progress, **options)
        except MemoryError as exc:
            if isinstance(exc, QsimdistError):
                raise
            limit = options.get("memory_limit", self.meta.get("memory_limit"))
            raise out_of_memory(exc, "executing a plan", self.stats.peak_bytes,
                                limit if isinstance(limit, int) else None) from None

    def contraction_tree(self):
        """``(tree, arrays)``: this plan as a cotengra ``ContractionTree``, sliced as the plan is.

        cotengra's ``contract`` builds einsum equations, which take one symbol
        per index, so the tree is over the network's indices renamed to
        ``cotengra.get_symbol(0), get_symbol(1), ...`` (by first appearance);
        ``arrays`` are the network's arrays in input order, in the plan's dtype.
        ``tree.contract(arrays)`` then equals :meth:`execute`.
        """
        import cotengra as ctg

        from ..errors import InvalidInputError

        net = self.network
        if net.arrays is None:
            raise InvalidInputError("this plan's network has no arrays; nothing to contract")
        symbol: dict[str, str] = {}
        for term in (*net.inputs, net.output):
            for i in term:
                symbol.setdefault(i, ctg.get_symbol(len(symbol)))
        tree = ctg.ContractionTree.from_path(
            [tuple(symbol[i] for i in t) for t in net.inputs],
            tuple(symbol[i] for i in net.output),
            {symbol[i]: d for i, d in net.size_dict.items() if i in symbol},
            ssa_path=[tuple(p) for p in self.path],
        )
        for i in self.sliced:
            tree.remove_ind_(symbol[i])
        return tree, [np.asarray(a, dtype=self.dtype) for a in net.arrays]

    @property
    def sliced_sizes(self) -> list[int]:
        return [self.network.size_dict[i] for i in self.sliced]

    def summary(self) -> str:
        s = self.stats
        kinds = ", ".join(f"{v} {k}" for k, v in sorted(s.kernel_counts.items()))
        return (
            f"tensors {self.network.num_tensors}, steps {s.n_steps} ({kinds}), "
            f"log10 cost {s.log10_cost:.2f}, flops {s.flops:.3e}, "
            f"slices {format_count(s.n_slices)}, "
            f"largest intermediate 2^{math.log2(max(s.max_intermediate, 1)):.1f} elements, "
            f"peak memory {format_bytes(s.peak_bytes)}, "
            f"transposed {format_bytes(s.transposed_bytes)} "
            f"({s.steps_without_transpose}/{s.n_steps} steps without), expanded "
            f"{format_bytes(s.expanded_bytes)}"
            + (f", {len(self.kept)} step outputs kept across slices" if self.kept else "")
        )

    # ------------------------------------------------------------------ io
    def to_dict(self, include_arrays: bool = True) -> dict:
        """The plan as JSON data (what :meth:`save` writes, :meth:`from_dict` reads).

        Parameters
        ----------
        include_arrays : bool, default True
            Include the network's arrays (base64, under ``network.arrays``).
        """
        net = self.network
        d = {
            "schema": SCHEMA,
            "version": VERSION,
            "dtype": self.dtype,
            "network": {
                "inputs": [list(t) for t in net.inputs],
                "output": list(net.output),
                "size_dict": dict(net.size_dict),
            },
            "path": [list(p) for p in self.path],
            "sliced": list(self.sliced),
            "leaf_modes": [list(m) for m in self.leaf_modes],
            "leaf_sum": [list(m) for m in self.leaf_sum],
            "steps": [s.to_dict() for s in self.steps],
            "stats": self.stats.to_dict(),
            "meta": self.meta,
        }
        if self.kept:
            d["kept"] = list(self.kept)
        if self.schedule is not None:
            d["distribution"] = self.schedule.to_dict()
        if include_arrays and net.arrays is not None:
            d["network"]["arrays"] = [encode_array(a) for a in net.arrays]
        return d

    def save(self, path: str | os.PathLike) -> Path:
        """Write the plan as JSON, atomically (a temporary file renamed into place).

        Parameters
        ----------
        path : str or os.PathLike
            The file to write; returned as a ``pathlib.Path``.
        """
        return atomic_write_text(path, json.dumps(self.to_dict()))

    @classmethod
    def from_dict(cls, d: object, source: str = "plan") -> Plan:
        """A plan from its JSON data, validated field by field; a saved distributed
        schedule is replayed against it.

        Parameters
        ----------
        d : dict
            The data :meth:`to_dict` gives.
        source : str, default "plan"
            Names the data in error messages.

        Raises
        ------
        PlanFormatError
            A wrong schema or version, or a bad field (one line naming it).
        """
        return _read_plan(d, source)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Plan:
        """Read a plan file; only a regular file under the size cap is read.

        Parameters
        ----------
        path : str or os.PathLike
            A plan file (``qsimdist plan -o``, :meth:`save`).

        Raises
        ------
        PlanFormatError
            A missing file, FIFO, device, folder, symlink loop, oversized file,
            invalid or too deeply nested JSON, or a bad field (one line).
        """
        from .._fileio import read_regular_bytes
        from ..network.io import parse_json_text

        path = Path(path)
        if not os.path.lexists(path):
            raise PlanFormatError(f"no such plan file: {path}")
        raw = read_regular_bytes(path, "qsimdist plan", PlanFormatError)
        data = parse_json_text(raw, str(path), "the plan", PlanFormatError)
        return _read_plan(data, str(path))


def _plan_from_dict(d: object, source: str) -> Plan:
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise PlanFormatError(f"{source}: not a qsimdist plan (field 'schema' must be {SCHEMA!r})")
    version = d.get("version")
    if version not in READABLE_VERSIONS:
        raise PlanFormatError(
            f"{source}: plan version {version!r} is not supported by this qsimdist "
            f"(reads versions {', '.join(map(str, READABLE_VERSIONS))}); make the plan again "
            "with 'qsimdist plan'"
        )
    try:
        nd = d["network"]
        arrays = nd.get("arrays")
        if arrays is not None:
            arrays = [decode_array(a, f"{source}: network.arrays[{k}]")
                      for k, a in enumerate(arrays)]
        net = Network(nd["inputs"], nd["output"], nd["size_dict"], arrays)
        dtype = check_dtype(d["dtype"])
        path = [tuple(int(x) for x in p) for p in d["path"]]
        sliced = [str(i) for i in d["sliced"]]
        for i in sliced:
            if i not in net.size_dict:
                raise PlanFormatError(f"{source}: sliced index {i!r} is not in the network")
    except PlanFormatError:
        raise
    except InvalidInputError as exc:
        raise PlanFormatError(f"{source}: field 'network': {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanFormatError(
            f"{source}: missing or malformed field ({clip_message(repr(exc))})") from None
    check_meta(d.get("meta"), source, n_open=len(net.output))
    # Re-derive layouts and steps from the path rather than trusting them, then
    # check that the file agrees (a tampered or stale file is refused).
    meta = d.get("meta") or {}
    if version == 2 and isinstance(meta, dict):
        # v2's per-step annotations described a schedule that could not run as written
        meta = {k: v for k, v in meta.items() if k != "distribution"}
    plan = build_plan(net, path, sliced, dtype, meta=meta)
    stored = d.get("steps")
    if not isinstance(stored, list) or len(stored) != len(plan.steps):
        raise PlanFormatError(f"{source}: field 'steps' does not match the path")
    for k, (s, st) in enumerate(zip(stored, plan.steps)):
        if not isinstance(s, dict) or list(s.get("out_modes", [])) != list(st.out_modes):
            raise PlanFormatError(f"{source}: steps[{k}].out_modes does not match the path")
    kept = d.get("kept") or []
    if kept:
        from .reuse import check_kept, local_kept_bytes

        if not isinstance(kept, list) or not all(isinstance(k, int) for k in kept):
            raise PlanFormatError(f"{source}: field 'kept' must be a list of step outputs")
        why = check_kept(plan, kept)
        if why is not None:
            raise PlanFormatError(f"{source}: field 'kept': {why}")
        plan.kept = tuple(kept)
        plan.stats.peak_bytes += local_kept_bytes(plan, plan.kept)
    return plan


def _read_plan(d: object, source: str) -> Plan:
    """The plan ``d`` holds (:func:`_plan_from_dict`), then its distributed schedule (plan
    version 3), replayed by the reader :mod:`qsimdist.planner` registers: the
    distribution package imports this module, so this module does not import it."""
    plan = _plan_from_dict(d, source)
    if d["version"] >= 3 and d.get("distribution") is not None:
        plan.schedule = read_schedule(plan, d["distribution"], source)
    return plan


def build_plan(
    net: Network,
    ssa_path,
    sliced=(),
    dtype: str = "complex64",
    meta: dict | None = None,
    costs: LocalCosts | None = None,
) -> Plan:
    """Make a Plan for ``net`` along a given SSA path (no search)."""
    dtype = check_dtype(dtype)
    n = net.num_tensors
    for k, pair in enumerate(ssa_path):
        if len(pair) != 2 or not all(0 <= x < n + k for x in pair) or pair[0] == pair[1]:
            raise PlanFormatError(
                f"path step {k} is {tuple(pair)}; an SSA step names two distinct earlier nodes "
                f"(0..{n + k - 1})"
            )
    used = [x for p in ssa_path for x in p]
    if len(used) != len(set(used)):
        raise PlanFormatError("path uses some node twice; every node is contracted once")
    itemsize = np.dtype(dtype).itemsize
    lay: Layouts = lifetime_order(
        net.inputs, net.output, net.size_dict, ssa_path, sliced, itemsize, costs
    )
    n_slices = math.prod(net.size_dict[i] for i in sliced)
    sizes = [math.prod(net.size_dict[i] for i in m) for m in lay.leaf_modes]
    sizes += [math.prod(s.out_view) for s in lay.steps]
    counts: dict[str, int] = {}
    for s in lay.steps:
        counts[s.kernel] = counts.get(s.kernel, 0) + 1
    cost = sum(s.flops / 8 for s in lay.steps) * n_slices
    stats = PlanStats(
        flops=lay.flops * n_slices,
        peak_bytes=lay.peak_bytes,
        transposed_bytes=lay.transposed_bytes * n_slices,
        expanded_bytes=lay.expanded_bytes * n_slices,
        steps_without_transpose=sum(1 for s in lay.steps if s.transposed_bytes == 0),
        n_slices=n_slices,
        log10_cost=math.log10(max(cost, 1.0)),
        max_intermediate=max(sizes),
        n_steps=len(lay.steps),
        kernel_counts=counts,
    )
    return Plan(
        network=net,
        path=[tuple(p) for p in ssa_path],
        sliced=list(sliced),
        dtype=dtype,
        leaf_modes=lay.leaf_modes,
        leaf_sum=lay.leaf_sum,
        steps=lay.steps,
        stats=stats,
        meta=dict(meta or net.meta),
    )


def make_plan(
    net: Network,
    *,
    dtype: str = "complex64",
    memory_limit: int | None = None,
    path_options: PathOptions | None = None,
    progbar: bool = False,
    costs: LocalCosts | None = None,
) -> Plan:
    """Search a path for ``net`` and make a Plan whose peak memory fits ``memory_limit`` bytes."""
    dtype = check_dtype(dtype)
    itemsize = np.dtype(dtype).itemsize
    out_bytes = math.prod(net.size_dict[i] for i in net.output) * itemsize
    if memory_limit is not None and memory_limit < out_bytes:
        raise PlanError(
            f"memory limit {format_bytes(memory_limit)} is too small: the output alone needs "
            f"{format_bytes(out_bytes)} (output indices are never sliced)"
        )
    unsliced = find_path(net, path_options, None, progbar)
    # sliced along the same path if need be (cheap: no second search)
    plan = fit_to_memory(net, unsliced.ssa_path, memory_limit, dtype, sliced=unsliced.sliced,
                         costs=costs)
    plan.stats.path_from_cache = unsliced.from_cache
    if memory_limit is not None and plan.stats.n_slices > 1:
        plan = _slicing_aware(net, plan, unsliced, memory_limit, dtype, path_options, progbar,
                              costs)
    if memory_limit is None or plan.stats.peak_bytes <= memory_limit:
        return plan
    raise PlanError(
        f"memory limit {format_bytes(memory_limit)} is too small: the best sliced plan found "
        f"still peaks at {format_bytes(plan.stats.peak_bytes)}"
    )


def _slicing_aware(net: Network, plan: Plan, unsliced, memory_limit: int, dtype: str,
                   path_options: PathOptions | None, progbar: bool,
                   costs: LocalCosts | None) -> Plan:
    """``plan``, or a cheaper one from a second search scored by the sliced cost, where
    slicing along the unsliced search's path multiplied its FLOPs (see
    :data:`~qsimdist.hardware.costs.SLICED_RESEARCH_OVERHEAD`). Its budget, where the user
    set none, scales with the sliced plan's predicted run (:attr:`PathOptions.slicing`)."""
    from ..hardware import costs as constants

    if plan.stats.flops / 8 / constants.SEARCH_RATE < constants.SLICED_RESEARCH_SECONDS:
        return plan
    whole = build_plan(net, unsliced.ssa_path, (), dtype, costs=costs).stats.flops
    if plan.stats.flops < constants.SLICED_RESEARCH_OVERHEAD * whole:
        return plan
    itemsize = np.dtype(dtype).itemsize
    floor = math.prod(net.size_dict[i] for i in net.output)
    opts = path_options or PathOptions()
    # other trials than the unsliced search's (the same seed would repeat them)
    opts = replace(opts, seed=opts.seed + 1)
    aware = find_path(net, opts, slice_target(memory_limit, itemsize, floor), progbar)
    other = fit_to_memory(net, aware.ssa_path, memory_limit, dtype, sliced=aware.sliced,
                          costs=costs)
    if other.stats.peak_bytes <= memory_limit and other.stats.flops < plan.stats.flops:
        other.stats.path_from_cache = aware.from_cache
        return other
    return plan


def slice_target(memory_limit: int, itemsize: int, floor: int = 1) -> int:
    """The first slicing target, in elements, for ``memory_limit`` bytes: the largest
    intermediate at ``1 / SLICE_TARGET_SHARE`` of the budget, never below ``floor``."""
    return max(floor, memory_limit // (SLICE_TARGET_SHARE * itemsize))


def fit_to_memory(net: Network, ssa_path, memory_limit: int | None, dtype: str, *,
                  sliced=(), costs: LocalCosts | None = None) -> Plan:
    """The plan along ``ssa_path`` (with ``sliced``), re-sliced along the same path until its
    peak fits ``memory_limit`` bytes.

    The first target is :func:`slice_target` (never below the output's size:
    output indices are never sliced), halved until the peak fits or the
    target reaches the output's size. Returns the first plan that fits, else
    the last one made (the plan as given when no slicing was possible), so
    the caller checks ``plan.stats.peak_bytes`` and words its own error.
    ``memory_limit=None`` returns the plan as given.
    """
    plan = build_plan(net, ssa_path, sliced, dtype, costs=costs)
    if memory_limit is None or plan.stats.peak_bytes <= memory_limit:
        return plan
    out_elems = math.prod(net.size_dict[i] for i in net.output)  # extents are >= 1
    target = slice_target(memory_limit, np.dtype(plan.dtype).itemsize, floor=out_elems)
    while True:
        try:
            cut = slice_path(net, ssa_path, target)
        except PlanError:
            break
        plan = build_plan(net, ssa_path, cut, dtype, costs=costs)
        if plan.stats.peak_bytes <= memory_limit or target <= out_elems:
            break
        target = max(out_elems, target // 2)
    if plan.stats.peak_bytes <= memory_limit and reuse_enabled():
        plan = with_local_reuse(plan, memory_limit)
    return plan


def with_local_reuse(plan: Plan, memory_limit: int) -> Plan:
    """``plan`` keeping step outputs across slices where that is worth it and fits
    ``memory_limit`` (see :func:`qsimdist.planner.reuse.local_choice`); else ``plan`` itself.
    The kept outputs' bytes go into ``stats.peak_bytes``. The slicing's order is the
    only other change (layouts depend on which indices are sliced, not their order)."""
    import dataclasses

    from .reuse import local_choice, local_kept_bytes

    choice = local_choice(plan, memory_limit)
    if choice is None:
        return plan
    order, kept = choice
    kept = tuple(sorted(kept))
    stats = dataclasses.replace(plan.stats,
                                peak_bytes=plan.stats.peak_bytes + local_kept_bytes(plan, kept))
    return dataclasses.replace(plan, sliced=list(order), kept=kept, stats=stats, workspace={})
