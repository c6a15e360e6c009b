"""Contracting networks through the process's cached plans: one path search per network
structure (:class:`Contractor`, what the tensor-network sampling methods and the
Qiskit sampler and backend contract with)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..network import Network

if TYPE_CHECKING:
    from .options import RunOptions

#: network structures a Contractor remembers as cheap or not (to simplify or not)
CHEAP_CACHE_SIZE = 512


@dataclass
class ContractionStats:
    """What a :class:`Contractor` did (``predicted_flops`` comes from the plans' cost model)."""

    contractions: int = 0
    plans_made: int = 0
    plans_reused: int = 0
    predicted_flops: float = 0.0
    peak_bytes: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Contractor:
    """Contracts networks through cached plans: one path search per network structure.

    A service of :class:`~qsimdist.engine.engine.Engine`, which builds it from its resolved
    ``run`` (:class:`~qsimdist.engine.options.RunOptions`); built alone, the keywords are
    resolved once into one.

    Args:
        dtype: ``complex64`` or ``complex128``.
        memory_limit: peak bytes per contraction (``"8GiB"``, an int, ``None``:
            the machine's default, ``"none"``: unlimited).
        executor: ``"local"`` or ``"mpi"`` (run the same calls on every rank).
        profile: hardware profile for ``executor="mpi"`` (default ``local-cpu``).
        comm: MPI communicator (default ``MPI.COMM_WORLD``).
        backend: array library, ``numpy`` or ``cupy``.
        run: the resolved options to contract with (the keywords above are then ignored).
    """

    def __init__(self, dtype: str = "complex64", memory_limit=None, executor: str = "local",
                 profile=None, comm=None, backend: str = "numpy", *,
                 run: RunOptions | None = None) -> None:
        if run is None:
            from .options import RunOptions

            run = RunOptions.resolve(dtype=dtype, memory_limit=memory_limit, backend=backend,
                                     executor=executor, profile=profile, comm=comm)
        #: the resolved options every contraction runs with (never resolved again)
        self.options = run
        self.cheap: dict = {}
        self.stats = ContractionStats()

    @property
    def dtype(self) -> str:
        return self.options.dtype

    @property
    def budget(self):
        """The memory budget (:class:`~qsimdist.engine.memory.MemoryBudget`)."""
        return self.options.memory

    @property
    def limit(self) -> int | None:
        return self.options.limit

    @property
    def executor(self) -> str:
        return self.options.executor

    @property
    def backend(self) -> str:
        return self.options.backend

    @property
    def comm(self):
        return self.options.comm

    @property
    def profile(self):
        """The resolved hardware profile of a distributed run (``None`` in one process)."""
        return self.options.profile if self.options.distributed else None

    @property
    def rank(self) -> int:
        return 0 if self.comm is None else self.comm.Get_rank()

    def contract(self, net: Network, simplify_network: bool = True,
                 path_options=None) -> np.ndarray:
        """Contract ``net``; the result's axes follow ``net.output``.

        ``simplify_network``: simplify first (``ADCRS``) unless the network is cheap
        as it is; ``False`` keeps the structure, so that networks differing only
        in their arrays share one plan. ``path_options``: the path search's
        budget (:class:`~qsimdist.planner.path.PathOptions`).
        """
        from ..planner.simplify import DEFAULT_SEQUENCE, is_cheap, simplify

        # whether a structure is cheap enough to plan as it is, decided once per structure
        raw = (net.inputs, net.output, tuple(sorted(net.size_dict.items())))
        cheap = self.cheap.get(raw)
        if cheap is None:
            cheap = self.cheap[raw] = is_cheap(net)
            while len(self.cheap) > CHEAP_CACHE_SIZE:
                self.cheap.pop(next(iter(self.cheap)))
        if not cheap and simplify_network:
            net = simplify(net, DEFAULT_SEQUENCE, skip_cheap=False)
        from .cache import PLANS

        # distributed: made unsliced on rank 0 and distributed for the profile's memory (every
        # rank decides reuse alike: the per-rank limits may differ, the profile does not)
        plan, reused = PLANS.plan_for(net, self.options, profile=self.profile,
                                      path_options=path_options)
        if reused:
            self.stats.plans_reused += 1
        else:
            self.stats.plans_made += 1
        out = plan.execute(backend=self.backend, **self.options.execute_keywords())
        out = out.get() if hasattr(out, "get") else out
        self.stats.contractions += 1
        self.stats.predicted_flops += float(plan.stats.flops)
        self.stats.peak_bytes = max(self.stats.peak_bytes, int(plan.stats.peak_bytes))
        return np.asarray(out)


__all__ = [
    "CHEAP_CACHE_SIZE",
    "ContractionStats",
    "Contractor",
]
