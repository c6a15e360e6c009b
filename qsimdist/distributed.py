"""Running under ``mpiexec``: plan once on rank 0, broadcast, execute on every rank.

Used by :func:`qsimdist.amplitudes` (``executor="mpi"``) and the CLI. Rank 0
*leads*: it reads the circuit, chooses the route, plans each contraction
(path search is randomised and expensive) and sends each plan to the other
ranks as plain data (:class:`Coordinator`); they only *follow*: validate the
plan, replay its schedule and execute it. Followers wait for rank 0 with short
sleeps instead of MPI's busy poll, so a rank that plans is not slowed by
ranks that wait (4 ranks on 2 cores run at the speed of one).

Liveness: every failure ends every rank.

* An error rank 0 meets while leading is sent to every rank, which all raise
  it (:func:`is_collective`), so they exit together with one message.
* Any other failure on any rank — an exception, ``KeyboardInterrupt``,
  ``SystemExit`` — prints ``qsimdist: error: rank R: ...`` and aborts the
  communicator (:func:`fail_rank`): no rank waits forever in a collective.
* :func:`abort_on_signals` makes SIGINT and SIGTERM abort the job at once, even
  while the main thread sits inside an MPI call (a watcher thread wakes on the
  signal; mpi4py releases the GIL in blocking calls).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from . import errors
from .errors import QsimdistError
from .hardware import HardwareProfile, load_profile
from .planner.plan import Plan

#: the attribute that marks an exception raised alike on every rank
COLLECTIVE_MARK = "qsimdist_collective"


def mark_collective(exc: BaseException) -> BaseException:
    """Mark ``exc`` as raised alike on every rank (so ranks may exit normally, not abort)."""
    setattr(exc, COLLECTIVE_MARK, True)
    return exc


def is_collective(exc: BaseException) -> bool:
    """Whether every rank raised ``exc`` (an agreed error, not one rank's failure)."""
    return bool(getattr(exc, COLLECTIVE_MARK, False))


def wait_sleeping(request, longest: float = 0.01) -> None:
    """Complete a non-blocking MPI request by polling with sleeps of at most ``longest`` s.

    MPI's blocking calls spin on a core while they wait; a rank waiting minutes for
    rank 0 to plan would take a core from it (oversubscribed ranks especially).
    """
    delay = 1e-4
    while not request.Test():
        time.sleep(delay)
        delay = min(2 * delay, longest)


def bcast_from_root(obj: Any, comm, root: int = 0) -> Any:
    """``comm.bcast(obj, root)``, waiting for the root with sleeps instead of a busy poll."""
    wait_sleeping(comm.Ibarrier())
    return comm.bcast(obj, root=root)


def barrier_sleeping(comm) -> None:
    """A barrier that waits with sleeps (every rank ends on it before leaving)."""
    wait_sleeping(comm.Ibarrier())


def fail_rank(comm, exc: BaseException, code: int | None = None) -> None:
    """Print one line naming this rank and ``exc``, then abort every rank of ``comm``.

    ``code``: the exit status; default 130 for an interrupt, 2 for a qsimdist
    error, 1 otherwise.
    """
    if code is None:
        code = 130 if isinstance(exc, KeyboardInterrupt) else (
            2 if isinstance(exc, QsimdistError) else 1)
    rank = comm.Get_rank()
    if isinstance(exc, QsimdistError):
        what = str(exc)
    elif isinstance(exc, KeyboardInterrupt):
        what = "interrupted"
    elif isinstance(exc, SystemExit):
        what = f"exited with status {exc.code}"
    else:
        what = f"{type(exc).__name__}: {exc}"
    try:
        sys.stderr.write(f"qsimdist: error: rank {rank}: {what}; ending every rank\n")
        sys.stderr.flush()
    finally:
        comm.Abort(code)
        os._exit(code)  # MPI_Abort may return while the launcher ends the job: never go on


def _mpi_started():
    """``mpi4py.MPI`` when MPI is initialised and not finalised, else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    return mpi


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_watcher: threading.Thread | None = None


def abort_on_signals() -> bool:
    """Make SIGINT and SIGTERM end every rank at once (call once, from the main thread).

    Python runs signal handlers only between bytecodes of the main thread, which may
    sit for ever inside an MPI call waiting for a peer that took the signal and left.
    Here the signal only wakes a watcher thread (``signal.set_wakeup_fd``), which
    prints ``qsimdist: error: rank R: interrupted by SIGINT`` and calls
    ``MPI_Abort`` (exit 130 or 143), or exits at once when MPI has not started.
    Returns False (and changes nothing) off the main thread or when already set.
    """
    global _watcher
    if _watcher is not None or threading.current_thread() is not threading.main_thread():
        return False
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for sig in _SIGNALS:
        signal.signal(sig, lambda signum, frame: None)  # the watcher acts; the handler is a no-op

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            nums = [b for b in data if b in {int(s) for s in _SIGNALS}]
            if not nums:
                continue
            sig = signal.Signals(nums[0])
            mpi = _mpi_started()
            code = 128 + int(sig)
            if mpi is None:
                sys.stderr.write(f"qsimdist: interrupted by {sig.name}\n")
                sys.stderr.flush()
                os._exit(code)
            rank = mpi.COMM_WORLD.Get_rank()
            sys.stderr.write(f"qsimdist: error: rank {rank}: interrupted by {sig.name}; "
                             "ending every rank\n")
            sys.stderr.flush()
            mpi.COMM_WORLD.Abort(code)

    _watcher = threading.Thread(target=watch, name="qsimdist-signal-watcher", daemon=True)
    _watcher.start()
    return True


def rank_memory_limit(memory_limit, comm) -> int | None:
    """This rank's memory limit: an explicit one as given, else a share of the host.

    The default is the memory available now (``config.default_memory_limit``:
    80% of ``MemAvailable``) divided by the ranks on this host; ``"none"`` is this
    host's physical memory + swap divided the same way. ``$QSIMDIST_MEMORY_LIMIT``
    is an explicit per-rank limit.
    """
    from .api import machine_memory
    from .config import parse_memory
    from .executors.mpi import default_rank_limit, ranks_on_host

    if memory_limit is not None and not (
            isinstance(memory_limit, str) and memory_limit.strip().lower() in ("none",
                                                                               "unlimited")):
        return parse_memory(memory_limit)
    if memory_limit is None:
        return default_rank_limit(comm)
    whole = machine_memory()
    return None if whole is None else whole // max(1, ranks_on_host(comm))


class Coordinator:
    """Rank 0 leads a computation; the other ranks execute the plans it sends.

    ``run(plan)`` executes a plan collectively on this rank and returns its value
    (every rank calls it with the same plan, in the same order). On rank 0,
    :meth:`lead` runs ``body(execute)``, where ``execute(plan)`` sends the plan to
    every rank and runs it; the other ranks call :meth:`follow`, which runs what
    arrives and returns what ``body`` returned. A :class:`QsimdistError` raised by
    ``body`` outside an execution reaches every rank as the same error.
    """

    def __init__(self, comm, run: Callable[[Plan], Any]) -> None:
        self.comm = comm
        self.run = run

    def _execute(self, plan: Plan):
        """Rank 0's side of one collective execution: a failure here is rank 0's alone."""
        from .executors.mpi import fault_point

        try:
            data = plan.to_dict()
            fault_point("broadcast", self.comm)
            bcast_from_root(("run", data), self.comm)
            return self.run(Plan.from_dict(data, "broadcast plan"))
        except BaseException as exc:
            if is_collective(exc):
                raise
            fail_rank(self.comm, exc)

    def lead(self, body: Callable[[Callable[[Plan], Any]], Any]) -> Any:
        try:
            result = body(self._execute)
        except QsimdistError as exc:
            if is_collective(exc):  # already agreed inside an execution (plan or memory check)
                raise
            bcast_from_root(("error", type(exc).__name__, str(exc)), self.comm)
            raise mark_collective(exc) from None
        except BaseException as exc:  # a bug or an interrupt: the followers must not wait
            fail_rank(self.comm, exc)
        bcast_from_root(("done", result), self.comm)
        return result

    def follow(self) -> Any:
        from .executors.mpi import fault_point

        while True:
            try:
                message = bcast_from_root(None, self.comm)
                if message[0] == "run":
                    fault_point("broadcast", self.comm)
                    self.run(Plan.from_dict(message[1], "broadcast plan"))
                    continue
            except BaseException as exc:
                if is_collective(exc):
                    raise
                fail_rank(self.comm, exc)
            if message[0] == "done":
                return message[1]
            raise _agreed_error(message[1], message[2])


def _agreed_error(name: str, text: str) -> QsimdistError:
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, QsimdistError)):
        cls = errors.ExecutionError
    return mark_collective(cls(text))


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
    payload = bcast_from_root(payload, comm)
    if payload[0] == "error":
        raise _agreed_error(payload[1], payload[2])
    return Plan.from_dict(payload[1], "broadcast plan")
