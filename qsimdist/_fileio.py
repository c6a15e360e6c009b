"""Atomic file writes: write to a temporary name in the same folder, then rename."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(fh)`` on a temporary file and rename it to ``path``.

    An interrupted write leaves no partial file behind at ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) atomically to ``path``."""
    return atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


#: largest user file read whole (circuits, networks, plans, bitstring lists); override with
#: $QSIMDIST_MAX_FILE_BYTES
DEFAULT_MAX_FILE_BYTES = 1 << 30


def max_file_bytes() -> int:
    """The size cap on files read whole: ``$QSIMDIST_MAX_FILE_BYTES`` or 1 GiB."""
    value = os.environ.get("QSIMDIST_MAX_FILE_BYTES")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            pass
    return DEFAULT_MAX_FILE_BYTES


def read_regular_bytes(path: str | os.PathLike, what: str, error=None,
                       max_bytes: int | None = None) -> bytes:
    """Read a *regular* file whole, refusing FIFOs, devices, folders and files over the cap.

    Every failure raises ``error`` (a ``QsimdistError`` subclass; default
    ``InvalidInputError``) with one line naming the file and what is wrong.
    The file is opened without blocking and checked with ``fstat`` on the
    opened descriptor, so a FIFO never blocks and a symlink to ``/dev/zero``
    is never read.
    """
    from .errors import InvalidInputError

    error = error or InvalidInputError
    cap = max_file_bytes() if max_bytes is None else max_bytes
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"no such file: {path}") from None
    except IsADirectoryError:
        raise error(f"{path} is a folder; expected a file of {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{path}: too many levels of symbolic links (a symlink loop)") from None
        raise error(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{path} is a folder; expected a file of {what}")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path} is not a regular file (a FIFO, socket or device); "
                        f"expected a file of {what}")
        if st.st_size > cap:
            raise error(f"{path} is {st.st_size} bytes, over the {cap}-byte limit on {what} "
                        "files (set $QSIMDIST_MAX_FILE_BYTES to raise it)")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:  # the file grew while being read
                raise error(f"{path} is over the {cap}-byte limit on {what} files")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_input_text(path: str | os.PathLike, what: str, error=None) -> str:
    """Read a user's UTF-8 text file (regular files only, size-capped), one clear error on failure.

    ``error`` defaults to ``CircuitParseError``.
    """
    from .errors import CircuitParseError

    error = error or CircuitParseError
    raw = read_regular_bytes(path, what, error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read as {what} (not UTF-8 text: {exc.reason} at byte "
                    f"{exc.start})") from None


def check_output_target(path: str | os.PathLike, option: str) -> None:
    """Refuse, before any long work, an output path that cannot become a file.

    ``option`` names the path in the message (``"-o"``, ``"--output"``).
    Raises ``InvalidInputError`` when ``path`` is a folder or when its nearest
    existing ancestor is not a folder.
    """
    from .errors import InvalidInputError

    path = Path(path)
    if path.is_dir():
        raise InvalidInputError(f"{option} {str(path)!r} is a folder; give a file name")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise InvalidInputError(
            f"cannot write {option} {str(path)!r}: {str(parent)!r} is not a folder"
        )
