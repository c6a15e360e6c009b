"""The memory limit a call gets when it names none, computed in one function.

:func:`default_memory_limit` is the only place the default is computed: it
reads ``$QSIMDIST_MEMORY_LIMIT`` once and, when that is unset, the memory
available now once, and takes :data:`DEFAULT_FRACTION` of it, shared by the
ranks on this host. :func:`read_meminfo` is the only reader of Linux's
``/proc/meminfo``; :func:`available_memory` (what the default is a share of)
and :func:`machine_memory` (physical memory plus swap, the bound even
``--memory-limit none`` keeps) read through it.

Layer 0 (the standard library, :mod:`qsimdist.config` and :mod:`qsimdist.errors`), so both the
engine's :class:`~qsimdist.engine.memory.MemoryBudget` and the MPI executor's
memory check call the same function.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from .config import format_bytes, parse_memory
from .errors import InvalidInputError, OutOfMemoryError

#: the environment variable that sets the default limit (per rank, as it stands)
MEMORY_LIMIT_VARIABLE = "QSIMDIST_MEMORY_LIMIT"
#: Linux's account of this host's memory
MEMINFO = "/proc/meminfo"
#: the share of the memory available now that a call plans within by default
DEFAULT_FRACTION = 0.8
#: the words that ask for no planning limit
NONE_WORDS = ("none", "unlimited")


def is_none_word(value) -> bool:
    """Whether ``value`` is ``"none"`` / ``"unlimited"`` (any case, any padding)."""
    return isinstance(value, str) and value.strip().lower() in NONE_WORDS


def read_meminfo(path: str = MEMINFO) -> dict[str, int]:
    """The fields of a meminfo file in bytes (``{"MemTotal": ..., ...}``; ``{}`` where
    unreadable). Fields whose value is not a number are left out."""
    fields: dict[str, int] = {}
    try:
        with open(path, "rb") as fh:
            text = fh.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return fields
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].endswith(":"):
            continue
        try:
            value = int(parts[1])
        except ValueError:
            continue
        scale = 1024 if len(parts) > 2 and parts[2].lower() == "kb" else 1
        fields[parts[0][:-1]] = value * scale
    return fields


def _sysconf_bytes(pages: str) -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf(pages))
    except (ValueError, OSError, AttributeError):
        return None


def available_memory(meminfo: str = MEMINFO) -> int | None:
    """Bytes this host can give now: ``MemAvailable``, else the free pages ``sysconf``
    reports, else its physical memory (``None`` where none of them can be read)."""
    fields = read_meminfo(meminfo)
    if "MemAvailable" in fields:
        return fields["MemAvailable"]
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        nbytes = _sysconf_bytes(pages)
        if nbytes is not None:
            return nbytes
    return None


def machine_memory(meminfo: str = MEMINFO) -> int | None:
    """This host's physical memory plus swap (the bound even ``--memory-limit none`` keeps).

    Parameters
    ----------
    meminfo : str, default "/proc/meminfo"
        The meminfo file read for ``MemTotal`` and ``SwapTotal``.

    Returns
    -------
    int or None
        Bytes; without ``MemTotal`` in ``meminfo``, the physical memory from
        ``sysconf``, or ``None`` where that cannot be read either.
    """
    fields = read_meminfo(meminfo)
    if "MemTotal" in fields:
        return fields["MemTotal"] + fields.get("SwapTotal", 0)
    return _sysconf_bytes("SC_PHYS_PAGES")


@dataclass(frozen=True)
class DefaultLimit:
    """The memory limit of a call that names none (see :func:`default_memory_limit`).

    Attributes:
        limit: bytes per rank; ``None`` when ``source`` is ``"none"``, or where
            this host's memory cannot be read.
        source: ``"environment"`` (``$QSIMDIST_MEMORY_LIMIT``, per rank as it
            stands), ``"none"`` (it says ``none`` / ``unlimited``) or
            ``"default"`` (:data:`DEFAULT_FRACTION` of the memory available now,
            shared by the ranks on this host).
        ranks_on_host: the ranks the default was shared by (1 unless ``"default"``).
    """

    limit: int | None
    source: str
    ranks_on_host: int = 1


def default_memory_limit(ranks_on_host: int | Callable[[], int] = 1,
                         meminfo: str = MEMINFO) -> DefaultLimit:
    """The memory limit a call plans within when it names none, per rank.

    ``$QSIMDIST_MEMORY_LIMIT`` when set (a size, per rank as it stands, or
    ``none``); else :data:`DEFAULT_FRACTION` of the memory available now
    (:func:`available_memory`), divided by ``ranks_on_host``: plans made
    without an explicit limit stay within what this host can give them now,
    whatever other processes hold, instead of being killed by the operating
    system. ``ranks_on_host`` may be a function (under MPI a collective): it
    is called only when the default is shared.

    Raises InvalidInputError when the environment variable holds an unreadable size.
    """
    env = os.environ.get(MEMORY_LIMIT_VARIABLE)
    if env:
        if is_none_word(env):
            return DefaultLimit(None, "none")
        try:
            return DefaultLimit(parse_memory(env), "environment")
        except InvalidInputError as exc:
            raise InvalidInputError(f"${MEMORY_LIMIT_VARIABLE}: {exc}") from None
    share = max(1, int(ranks_on_host() if callable(ranks_on_host) else ranks_on_host))
    available = available_memory(meminfo)
    limit = None if available is None else int(DEFAULT_FRACTION * available) // share
    return DefaultLimit(limit, "default", share)



def out_of_memory(exc: BaseException, what: str, peak: int | None = None,
                  limit: int | None = None) -> OutOfMemoryError:
    """An :class:`~qsimdist.errors.OutOfMemoryError` for a ``MemoryError`` raised while
    ``what`` ran: one line naming the allocation that failed (numpy's error carries its
    bytes), the plan's ``peak`` and the memory ``limit`` where known, and what to do."""
    asked = getattr(exc, "_total_size", None)
    parts = [f"out of memory while {what}"]
    if asked:
        parts.append(f"allocating {format_bytes(int(asked))} failed")
    if peak is not None:
        parts.append(f"the plan peaks at {format_bytes(int(peak))}")
    if limit is not None:
        parts.append(f"planned within the memory limit {format_bytes(int(limit))}")
    return OutOfMemoryError(
        "; ".join(parts) + "; this host had less memory free than the limit assumed: "
        "lower --memory-limit (memory_limit=) so the plan slices more, or free memory")

__all__ = ["DEFAULT_FRACTION", "MEMINFO", "MEMORY_LIMIT_VARIABLE", "NONE_WORDS", "DefaultLimit",
           "available_memory", "default_memory_limit", "is_none_word", "machine_memory",
           "out_of_memory", "read_meminfo"]
