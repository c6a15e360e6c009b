"""One memory budget per call: the bytes plans are made within and the bytes a run may hold.

Every entry point resolves its ``memory_limit`` here, once, and the words mean
the same everywhere:

* an explicit size (``"8GiB"``, ``500e6``, an int): the limit, per rank under MPI;
* ``None`` (the default): ``$QSIMDIST_MEMORY_LIMIT`` when set (per rank as it
  stands), else 80% of the memory available now, shared by the ranks on this host
  (:func:`qsimdist.memory_limit.default_memory_limit`, the one function that
  computes the default);
* ``"none"`` / ``"unlimited"``: no planning limit; what a run may allocate is
  still bounded by this host's physical memory plus swap, shared by its ranks.

The guard every door shares is here too: :meth:`MemoryBudget.check`,
:func:`check_fits` and :func:`check_plan_fits` refuse, before anything is
allocated, what the budget or the host cannot hold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ..config import format_bytes, parse_memory
from ..errors import PlanError
from ..memory_limit import NONE_WORDS, default_memory_limit, is_none_word, machine_memory

if TYPE_CHECKING:
    from ..planner.plan import Plan


def _ranks_on_host(comm) -> int:
    if comm is None or comm.Get_size() == 1:
        return 1
    from ..executors import ranks_on_host

    return max(1, ranks_on_host(comm))


@dataclass(frozen=True)
class MemoryBudget:
    """A resolved memory limit (made by :meth:`resolve`).

    Attributes
    ----------
    limit : int or None
        Bytes plans are made within (per rank); ``None`` for ``"none"``.
    bound : int or None
        Bytes a run may allocate (per rank): ``limit``, or this host's memory
        share for ``"none"``; ``None`` only where the host's memory cannot be read.
    source : {"explicit", "environment", "default", "none"}
        Where the limit came from.
    ranks_on_host : int, default 1
        The ranks the host's memory is shared by (1 outside MPI).
    host : int or None
        This host's physical memory + swap shared by those ranks (``None`` where
        unreadable): an explicit limit above it is not a licence to allocate more
        than the host has, so :meth:`check` refuses that too.
    """

    limit: int | None
    bound: int | None
    source: str
    ranks_on_host: int = 1
    host: int | None = None

    @classmethod
    def resolve(cls, value=None, comm=None) -> MemoryBudget:
        """The budget for ``value`` (see the module docstring).

        Parameters
        ----------
        value : str, int, MemoryBudget or None
            An explicit size (``"8GiB"``, ``500e6``, an int; per rank under MPI),
            ``None`` (``$QSIMDIST_MEMORY_LIMIT`` where set, else 80% of the memory
            available now), ``"none"``/``"unlimited"`` (no planning limit), or a
            budget already resolved (returned as it is).
        comm : MPI communicator, optional
            The ranks under MPI: the host's memory is shared by those on this host.

        Returns
        -------
        MemoryBudget

        Raises
        ------
        InvalidInputError
            An unreadable size.
        """
        if isinstance(value, MemoryBudget):
            return value
        if value is None:
            # one read of the environment and, for the default, of the memory available now
            default = default_memory_limit(lambda: _ranks_on_host(comm))
            if default.source == "default":
                share = default.ranks_on_host
                host = _share(machine_memory(), share)
                limit = default.limit
                return cls(limit, limit if limit is not None else host, "default", share, host)
            if default.source == "environment":
                # no collective here: a limit given per rank may be resolved on one rank alone
                return cls(default.limit, default.limit, "environment", 1, machine_memory())
            value = "none"
        if is_none_word(value):
            share = _ranks_on_host(comm)
            host = _share(machine_memory(), share)
            return cls(None, host, "none", share, host)
        # no collective here: an explicit limit may be resolved on one rank alone
        limit = parse_memory(value)
        return cls(limit, limit, "explicit", 1, machine_memory())

    @property
    def unbounded(self) -> bool:
        """Whether plans are made with no limit (``"none"``)."""
        return self.limit is None

    def as_option(self) -> int | str:
        """The limit as an option value that resolves back to this budget's limit."""
        return "none" if self.limit is None else self.limit

    def check(self, need: int, what: str) -> None:
        """Refuse (PlanError) when ``need`` bytes exceed what this budget may allocate, or
        what this host has (an explicit limit larger than the host does not make room).

        Parameters
        ----------
        need : int
            The bytes asked for.
        what : str
            What needs them, for the message (``"executing this plan"``).

        Raises
        ------
        PlanError
            ``need`` exceeds :attr:`bound` or the host's memory.
        """
        per_rank = " per rank" if self.ranks_on_host > 1 else ""
        if (self.limit is not None and self.host is not None and need > self.host
                and (self.bound is None or need <= self.bound)):
            raise PlanError(
                f"{what} needs {format_bytes(need)}, more than this host's physical memory + "
                f"swap{per_rank} ({format_bytes(self.host)}), though the memory limit "
                f"({format_bytes(self.limit)}) would allow it"
            )
        if self.bound is None or need <= self.bound:
            return
        if self.limit is None:
            raise PlanError(
                f"{what} needs {format_bytes(need)}, more than this host's physical memory + "
                f"swap{per_rank} ({format_bytes(self.bound)}), which bounds even "
                "--memory-limit none"
            )
        raise PlanError(
            f"memory limit {format_bytes(self.bound)} is too small: {what} needs "
            f"{format_bytes(need)}"
        )

    def check_plan(self, plan: Plan) -> None:
        """The guard before a plan runs: refuse (PlanError) when its predicted peak exceeds
        what this budget may allocate (see :meth:`check`).

        Parameters
        ----------
        plan : Plan
            The plan about to run; its ``stats.peak_bytes`` is checked.

        Raises
        ------
        PlanError
            The plan's peak exceeds what this budget may allocate.
        """
        need = plan.stats.peak_bytes
        self.check(need, f"executing this plan (peak memory {format_bytes(need)})")

    def to_dict(self) -> dict:
        return asdict(self)


def _share(nbytes: int | None, ranks: int) -> int | None:
    return None if nbytes is None else nbytes // max(1, ranks)


def check_fits(need: int, memory_limit, what: str) -> None:
    """Refuse (PlanError) when ``need`` bytes exceed the budget (``none``: the machine's memory)."""
    MemoryBudget.resolve(memory_limit).check(need, what)


def check_plan_fits(plan: Plan, memory_limit=None) -> None:
    """Refuse to execute ``plan`` when its peak exceeds what this machine may give it.

    ``memory_limit``: a :class:`MemoryBudget` already resolved, an explicit size,
    ``None`` for the default (a share of the memory available now), or ``"none"``
    (physical memory + swap).
    """
    MemoryBudget.resolve(memory_limit).check_plan(plan)


__all__ = ["NONE_WORDS", "MemoryBudget", "check_fits", "check_plan_fits", "is_none_word",
           "machine_memory"]
