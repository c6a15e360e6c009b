"""Liveness under ``mpiexec``: every failure on any rank ends every rank.

* An error every rank meets alike is marked collective (:func:`mark_collective`)
  so the ranks may exit together with one message.
* Any other failure on any rank — an exception, ``KeyboardInterrupt``,
  ``SystemExit`` — prints ``qsimdist: error: rank R: ...`` and aborts the
  communicator (:func:`fail_rank`): no rank waits forever in a collective.
* :func:`abort_on_signals` makes SIGINT and SIGTERM abort the job at once, even
  while the main thread sits inside an MPI call (a watcher thread wakes on the
  signal; mpi4py releases the GIL in blocking calls).
* Waiting ranks poll with sleeps (:func:`wait_sleeping`), not MPI's busy poll.

Layer 3 (beside the executors); imports nothing above it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from ..errors import QsimdistError

#: the attribute that marks an exception raised alike on every rank
COLLECTIVE_MARK = "qsimdist_collective"
#: seconds a failing rank waits between printing its line and aborting the job
LAUNCHER_GRACE = 0.5
NON_ROOT_DELAY = 3 * LAUNCHER_GRACE  # a failing rank other than 0 waits this long before it speaks


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


def agreed_error(name: str, text: str) -> QsimdistError:
    """The error every rank raises for an error rank 0 met: its class by ``name`` (a
    :class:`~qsimdist.errors.QsimdistError`, else ``ExecutionError``), marked collective."""
    from .. import errors

    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, QsimdistError)):
        cls = errors.ExecutionError
    return mark_collective(cls(text))


def plan_on_root(build, comm):
    """``build()`` on rank 0, broadcast as data, validated on every rank (a Plan); a failure
    in ``build`` is raised on every rank as the same error (:func:`agreed_error`)."""
    from ..planner.plan import Plan

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
        raise agreed_error(payload[1], payload[2])
    return Plan.from_dict(payload[1], "broadcast plan")


def barrier_sleeping(comm) -> None:
    """A barrier that waits with sleeps (every rank ends on it before leaving)."""
    wait_sleeping(comm.Ibarrier())


def fail_rank(comm, exc: BaseException, code: int | None = None) -> None:
    """Print one line naming this rank and ``exc``, then abort every rank of ``comm``.

    ``code``: the exit status; default 130 for an interrupt, 2 for a qsimdist
    error, 1 otherwise.
    """
    if isinstance(exc, MemoryError) and not isinstance(exc, QsimdistError):
        from ..memory_limit import out_of_memory

        exc = out_of_memory(exc, "running on this rank")  # one line naming the size
    if code is None:
        code = 130 if isinstance(exc, KeyboardInterrupt) else (
            2 if isinstance(exc, QsimdistError) else 1)
    rank = comm.Get_rank()
    if rank != 0:
        # the same fault often strikes every rank at once (an allocation each rank makes):
        # rank 0 speaks first and its abort ends this rank before it speaks, so the user
        # reads one line; a fault on this rank alone is still named, a moment later
        time.sleep(NON_ROOT_DELAY)
    if isinstance(exc, QsimdistError):
        what = str(exc)
    elif isinstance(exc, KeyboardInterrupt):
        what = "interrupted"
    elif isinstance(exc, SystemExit):
        what = f"exited with status {exc.code}"
    else:
        what = f"{type(exc).__name__}: {exc}"
    _say_and_abort(comm, f"qsimdist: error: rank {rank}: {what}; ending every rank", code)


def _say_and_abort(comm, line: str, code: int) -> None:
    """Print ``line``, give the launcher time to forward it, abort every rank of ``comm``."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        # the launcher forwards a rank's stderr asynchronously and may drop what it has not
        # read when the abort reaches it: give it a moment (one-rank faults and a SIGTERM
        # to one rank lost the line about once in a few runs)
        time.sleep(LAUNCHER_GRACE)
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
            _say_and_abort(mpi.COMM_WORLD, f"qsimdist: error: rank {rank}: interrupted by "
                           f"{sig.name}; ending every rank", code)

    _watcher = threading.Thread(target=watch, name="qsimdist-signal-watcher", daemon=True)
    _watcher.start()
    return True
