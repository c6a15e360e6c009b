"""How one ``qsimdist`` process runs a command and ends.

The app :mod:`qsimdist.cli` builds runs through :func:`run_app`: every
:class:`~qsimdist.errors.QsimdistError`, and every usage error, becomes one line
on stderr (one JSON object under ``--json``) and exit code 2; ``-v`` installs the
stderr log (:func:`configure_logging`); under ``mpiexec`` every rank ends
together. :func:`run_console` is the console entry point's part: a crash in
compiled code says where it was, Ctrl-C ends the process within a deadline, and
the interpreter is not torn down at exit.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Optional

import typer

from ..errors import QsimdistError
from .common import rank, under_mpi

logger = logging.getLogger(__name__)


class _StderrHandler(logging.Handler):
    """Writes each record to the current ``sys.stderr`` (under mpiexec, with the rank)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if _mpi_world() is not None:
                text = f"[rank {rank()}] {text}"
            sys.stderr.write(text + "\n")
        except Exception:  # a closed stream: logging must never end the command
            self.handleError(record)


#: the handler -v installed on the 'qsimdist' logger, and the level that logger had before
_logging_state: dict = {}


def configure_logging(verbosity: int) -> None:
    """Log records of the ``qsimdist`` loggers on stderr: INFO for ``-v``, DEBUG for ``-vv``.

    ``0`` removes what an earlier call installed (the library alone only has a
    ``NullHandler``, so nothing is printed).
    """
    log = logging.getLogger("qsimdist")
    if "handler" in _logging_state:
        log.removeHandler(_logging_state.pop("handler"))
        log.setLevel(_logging_state.pop("level"))
    if verbosity <= 0:
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(
        "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    _logging_state.update(handler=handler, level=log.level)
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)


def run_app(app: typer.Typer, argv: Optional[list[str]] = None) -> int:
    """Run ``app`` on ``argv``, turning qsimdist errors into one line and exit code 2.

    Under mpiexec with several ranks, SIGINT and SIGTERM abort every rank, an
    error every rank agreed on exits them all with code 2 (rank 0 prints it),
    and any other failure on one rank prints that rank's error and aborts the
    job; a command that succeeds ends with every rank on one barrier.
    """
    if under_mpi():
        from ..executors import abort_on_signals

        abort_on_signals()
    _agreed.clear()
    try:
        rv = _main(app, argv)
    except BaseException as exc:  # escaped every handler: under MPI, every rank must end
        world = _mpi_world()
        if world is not None:
            from ..executors import fail_rank

            fail_rank(world, exc)
        raise
    world = _mpi_world()
    if world is not None:
        from ..executors import barrier_sleeping, fail_rank

        if rv not in (0, None) and not _agreed:  # this rank alone failed (file error, ^C)
            fail_rank(world, SystemExit(rv), code=rv)
        try:
            barrier_sleeping(world)  # every rank ends together
        except BaseException as exc:  # an interrupt while waiting for the other ranks
            fail_rank(world, exc)
    return rv


def _mpi_world():
    """``MPI.COMM_WORLD`` when MPI runs with several ranks, else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    world = mpi.COMM_WORLD
    return world if world.Get_size() > 1 else None


#: set when the command's error was raised alike on every rank (so no rank aborts)
_agreed: dict = {}


def wants_json(argv: Optional[list[str]]) -> bool:
    """Whether ``--json`` is among the arguments (before any ``--``)."""
    for arg in sys.argv[1:] if argv is None else argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def report_error(message: str, kind: str, code: int, as_json: bool) -> None:
    """One line on stderr: ``qsimdist: error: MESSAGE``, or under ``--json`` one JSON object
    ``{"error": {"type": KIND, "message": MESSAGE}, "exit_code": CODE}``."""
    if as_json:
        typer.echo(json.dumps({"error": {"type": kind, "message": message}, "exit_code": code}),
                   err=True)
    else:
        typer.echo(f"qsimdist: error: {message}", err=True)


def _main(app: typer.Typer, argv: Optional[list[str]]) -> int:
    as_json = wants_json(argv)
    configure_logging(0)  # what an earlier in-process run installed
    started = time.perf_counter()
    try:
        rv = _run(app, argv, as_json)
        logger.info("finished in %.3f s, exit code %s", time.perf_counter() - started, rv)
        return rv
    finally:
        configure_logging(0)


def _run(app: typer.Typer, argv: Optional[list[str]], as_json: bool) -> int:
    try:
        # typer turns Ctrl-C into exit code 130 and returns every typer.Exit's code
        # (standalone_mode=False); a command that finishes returns None
        rv = app(args=argv, standalone_mode=False)
    except QsimdistError as exc:
        world = _mpi_world()
        if world is not None:
            from ..executors import fail_rank, is_collective

            if not is_collective(exc):  # one rank's error: every rank must end
                fail_rank(world, exc)
            _agreed["error"] = str(exc)
        if rank() == 0:  # under mpiexec every rank raises the same error; one prints it
            report_error(str(exc), type(exc).__name__, 2, as_json)
        return 2
    except typer.Exit as exc:
        rv = exc.exit_code
    except KeyboardInterrupt:
        rv = 130
    except MemoryError as exc:
        # last resort: an allocation outside a plan's run failed (a plan's own run raises
        # OutOfMemoryError, a QsimdistError, above); one line, every rank ends
        from ..memory_limit import out_of_memory

        error = out_of_memory(exc, "running the command")
        world = _mpi_world()
        if world is not None:
            from ..executors import fail_rank

            fail_rank(world, error)
        report_error(str(error), type(error).__name__, 2, as_json)
        return 2
    except OSError as exc:
        # last resort: a file operation failed in a way nothing above foresaw
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        what = exc.strerror or str(exc) or type(exc).__name__
        report_error(what + (f": {where}" if where else ""), type(exc).__name__, 2, as_json)
        return 2
    except Exception as exc:
        # click's usage errors (unknown option, missing argument, bad type)
        # carry format_message(); typer vendors click, so test by shape.
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            message = exc.format_message()
            # no arguments at all: the help was printed instead; under mpiexec every rank
            # parsed the same arguments, and rank 0 prints
            if (message or as_json) and rank() == 0:
                report_error(message or "no command given", type(exc).__name__, 2, as_json)
            return 2
        if type(exc).__name__ == "Abort":
            rv = 130
        else:
            raise
    if rv == 130:
        if as_json:
            report_error("interrupted", "KeyboardInterrupt", 130, True)
        else:
            typer.echo("qsimdist: interrupted", err=True)
        return 130
    return rv if isinstance(rv, int) else 0


def exit_now(code: int) -> None:
    """Leave the process with ``code`` without tearing the interpreter down.

    Freeing every module's objects at exit costs about 0.15 s once Qiskit is
    loaded, a sixth of a small circuit's whole command. Output is flushed and
    the ``atexit`` handlers run first (temporary files, logging); this is
    skipped (a normal exit) under MPI, whose finalisation must run, and while
    any other thread is alive.
    """
    if "mpi4py.MPI" in sys.modules or _own_threads_alive():
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    atexit._run_exitfuncs()
    os._exit(code)


#: seconds a Ctrl-C'd command may take to unwind before the process ends regardless
INTERRUPT_GRACE_SECONDS = 5.0
#: seconds the exit handlers may then take before the process ends without them
EXIT_HANDLER_SECONDS = 2.0


#: names of the threads that watch for an interrupt (not counted as the command's own)
_WATCHER_PREFIX = "qsimdist-interrupt"


def interrupt_with_deadline() -> None:
    """SIGINT raises ``KeyboardInterrupt`` as usual, and ends the process anyway if that
    has not done so within ``INTERRUPT_GRACE_SECONDS`` (a library that swallows the
    interrupt, or a long native call, must not keep a Ctrl-C'd command running).

    The deadline does not depend on the interrupted main thread: Python's own signal
    handler writes the signal number to a wakeup pipe (``signal.set_wakeup_fd``), which
    a watcher thread, started here, reads. Nothing runs inside the signal handler but
    the usual ``KeyboardInterrupt`` (a handler that started a thread could deadlock on
    ``threading``'s locks when the signal lands while the main thread holds one).
    After the grace the exit handlers (temporary files) run in a second waiting thread
    for at most ``EXIT_HANDLER_SECONDS``, then the process ends with code 130.

    Only the console entry point installs it (one process, its main thread); partial
    output files are written under temporary names, so nothing half-written is left.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return  # ignored, or someone else's handler: leave it
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        os.close(read_fd)
        os.close(write_fd)
        return
    run_handlers = threading.Event()
    handlers_done = threading.Event()

    def cleanup() -> None:
        run_handlers.wait()
        try:
            atexit._run_exitfuncs()
        finally:
            handlers_done.set()

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if int(signal.SIGINT) in data:
                break
        time.sleep(INTERRUPT_GRACE_SECONDS)
        try:
            os.write(2, b"qsimdist: interrupted\n")
        except OSError:
            pass
        # the exit handlers get a bounded time of their own: one that waits on the
        # still-running main thread (a thread pool's join) must not keep the process alive
        run_handlers.set()
        handlers_done.wait(EXIT_HANDLER_SECONDS)
        os._exit(130)

    for name, target in (("watcher", watch), ("cleanup", cleanup)):
        threading.Thread(target=target, name=f"{_WATCHER_PREFIX}-{name}", daemon=True).start()


def _own_threads_alive() -> bool:
    """Any thread besides the main one and the interrupt watchers."""
    return any(t is not threading.main_thread() and not t.name.startswith(_WATCHER_PREFIX)
               for t in threading.enumerate())


def run_console(main: Callable[[], int]) -> None:
    """Run the console entry point ``main`` and end the process with its exit code."""
    import faulthandler

    # a crash inside compiled code (BLAS, numba, a path-search library) says where it was
    # on stderr instead of ending the process silently
    if not faulthandler.is_enabled():
        faulthandler.enable()
    if not under_mpi():
        interrupt_with_deadline()
    exit_now(main())
