"""Running under ``mpiexec``: plan once on rank 0, broadcast, execute on every rank.

Used by :func:`qsimdist.amplitudes` (``executor="mpi"``) and the CLI. The
plan (with its schedule) is made on rank 0 only — path search is randomised
and expensive — and sent to every rank as plain data, where it is validated
and its schedule replayed like any plan file; the MPI executor then checks
that every rank holds the same plan before the first step. An error on rank
0 while planning reaches every rank as the same error, so all ranks exit
together with one message (printed by rank 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from . import errors
from .errors import QsimdistError
from .hardware import HardwareProfile, load_profile
from .planner.plan import Plan


def world():
    """``MPI.COMM_WORLD`` (imports mpi4py, which starts MPI)."""
    from .executors.mpi import _mpi

    return _mpi().COMM_WORLD


def rank_of(comm) -> int:
    return 0 if comm is None else comm.Get_rank()


def profile_for(profile: str | HardwareProfile, memory_limit: int | None) -> HardwareProfile:
    """The hardware profile, with its per-device memory replaced by ``memory_limit`` if given."""
    prof = load_profile(profile)
    if memory_limit is None:
        return prof
    return dataclasses.replace(prof, memory_bytes=int(memory_limit), usable_memory_fraction=1.0)


def distribute(plan: Plan, profile: HardwareProfile, devices: int) -> Plan:
    """``plan`` with the dp schedule for ``devices`` ranks attached (sliced as it runs)."""
    from .planner.distribution import schedule, scheduled_plan

    return scheduled_plan(plan, schedule(plan, profile, devices, "dp"))


def plan_on_root(build: Callable[[], Plan], comm) -> Plan:
    """``build()`` on rank 0, broadcast as data, validated on every rank."""
    payload = None
    if comm.Get_rank() == 0:
        try:
            payload = ("plan", build().to_dict())
        except QsimdistError as exc:
            payload = ("error", type(exc).__name__, str(exc))
        except Exception as exc:  # noqa: BLE001 - every rank must learn that planning failed
            payload = ("error", "ExecutionError", f"planning failed on rank 0: "
                       f"{type(exc).__name__}: {exc}")
    payload = comm.bcast(payload, root=0)
    if payload[0] == "error":
        cls = getattr(errors, payload[1], None)
        if not (isinstance(cls, type) and issubclass(cls, QsimdistError)):
            cls = errors.ExecutionError
        raise cls(payload[2])
    return Plan.from_dict(payload[1], "broadcast plan")
