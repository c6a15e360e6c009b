"""Atomic file writes: write to a temporary name in the same folder, then rename."""

from __future__ import annotations

import os
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


def read_input_text(path: str | os.PathLike, what: str) -> str:
    """Read a user's text file, turning every failure into one clear CircuitParseError."""
    from .errors import CircuitParseError

    path = Path(path)
    try:
        return path.read_text()
    except FileNotFoundError:
        raise CircuitParseError(f"no such file: {path}") from None
    except (UnicodeDecodeError, IsADirectoryError) as exc:
        raise CircuitParseError(f"{path}: cannot read as {what} ({exc})") from None
