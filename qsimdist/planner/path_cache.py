"""The structure-keyed path cache: in memory and on disk as JSON.

Paths are kept in ``paths/`` of the qsimdist cache folder (``$QSIMDIST_CACHE_DIR``,
else the user cache folder of :mod:`platformdirs`: ``$XDG_CACHE_HOME/qsimdist``, by
default ``~/.cache/qsimdist``, on Linux). The disk entries are bounded in total
(``$QSIMDIST_CACHE_MAX_BYTES``, default 256 MiB): a write that takes them past it
removes the least recently used (last read or written) ones. Entries read from disk
are checked against the network (a damaged or stale entry is a miss, warned about
once and rewritten); a cache folder that cannot be used is warned about once and the
run goes on without it. ``qsimdist cache info`` and ``qsimdist cache clear`` report on
and empty it. :func:`qsimdist.planner.path.find_path` reads and writes it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import time
import warnings
from pathlib import Path

from .._fileio import atomic_write_text, read_regular_bytes
from ..config import parse_memory
from ..errors import InvalidInputError
from ..network import Network

_MEMORY_CACHE: dict[str, dict] = {}
#: cache problems already warned about in this process (one warning each)
_WARNED: set[str] = set()
#: largest path cache entry read (a path for a million tensors is ~20 MB)
MAX_ENTRY_BYTES = 64 << 20

logger = logging.getLogger(__name__)

#: total bytes of disk path entries kept when ``$QSIMDIST_CACHE_MAX_BYTES`` is unset
DEFAULT_CACHE_MAX_BYTES = 256 << 20
#: names of the files qsimdist writes in the cache: entries (a SHA-256 key), the temporary
#: names of their atomic writes, and the sampler's chain records (``chains/``)
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json")
_TEMP_NAME = re.compile(r"\.[0-9a-f]{64}\.json\..+\.tmp")
_CHAIN_NAME = re.compile(r"[0-9a-f]{64}")
#: an atomic write's temporary file this old (seconds) was left by a process that died
STALE_TEMP_SECONDS = 3600.0
#: bytes of the entries in each cache folder as this process last counted them, plus what
#: it wrote since: the folder is listed again only when that passes the bound
_DISK_BYTES: dict[str, int] = {}


def cache_root() -> Path:
    """The qsimdist cache folder: ``$QSIMDIST_CACHE_DIR``, else the platform's user cache
    folder for qsimdist (``$XDG_CACHE_HOME/qsimdist`` or ``~/.cache/qsimdist`` on Linux)."""
    env = os.environ.get("QSIMDIST_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("qsimdist", appauthor=False))


def cache_dir() -> Path:
    """The folder of the disk path cache's entries."""
    return cache_root() / "paths"


def cache_max_bytes() -> int | None:
    """The disk path cache's bound in bytes: ``$QSIMDIST_CACHE_MAX_BYTES`` (a size such as
    ``64MiB``; ``0``: write nothing to disk; ``none``: unbounded), else 256 MiB."""
    value = os.environ.get("QSIMDIST_CACHE_MAX_BYTES", "").strip()
    if not value:
        return DEFAULT_CACHE_MAX_BYTES
    if value.lower() in ("none", "unlimited"):
        return None
    if value == "0":
        return 0
    try:
        return parse_memory(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"QSIMDIST_CACHE_MAX_BYTES: {exc}; or 0 (no disk cache) or "
                                "none (unbounded)") from None


def _listing(folder: Path, pattern: re.Pattern) -> list[tuple[Path, int, float]]:
    """(path, bytes, mtime) of the regular files in ``folder`` whose names match ``pattern``."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:  # no folder yet, or not readable
        return found
    for name in names:
        if not pattern.fullmatch(name):
            continue
        path = folder / name
        try:
            st = path.lstat()
        except OSError:  # removed by another process meanwhile
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((path, st.st_size, st.st_mtime))
    return found


def cache_entries() -> list[tuple[Path, int, float]]:
    """The disk path cache's entries as (path, bytes, last use), least recently used first."""
    return sorted(_listing(cache_dir(), _ENTRY_NAME), key=lambda e: e[2])


def evict_entries(bound: int | None, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries until they total at most ``bound`` bytes.

    ``keep`` (the entry just written) goes last. Returns the files removed; one that
    another process removed first, or that cannot be removed, is skipped.
    """
    if bound is None:
        return []
    entries = cache_entries()
    total = sum(size for _, size, _ in entries)
    _DISK_BYTES[str(cache_dir())] = total
    entries.sort(key=lambda e: (e[0] == keep, e[2]))
    removed = []
    for path, size, _ in entries:
        if total <= bound:
            break
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.debug("cannot remove the path cache entry %s (%s)", path, exc)
            continue
        total -= size
        removed.append(path)
    _DISK_BYTES[str(cache_dir())] = total
    if removed:
        logger.info("path cache over its bound (%d bytes): removed %d least recently used "
                    "entr%s", bound, len(removed), "y" if len(removed) == 1 else "ies")
    return removed


def cache_info() -> dict:
    """Where the disk path cache is, its entries, their bytes and its bound."""
    entries = cache_entries()
    return {"folder": str(cache_dir()), "entries": len(entries),
            "bytes": sum(size for _, size, _ in entries), "max_bytes": cache_max_bytes()}


def clear_cache() -> dict:
    """Remove qsimdist's files from its cache folder (path entries, the temporary files of
    writes that died, the sampler's chain records) and empty the in-memory cache.

    Nothing else in the folder is touched. Returns the folder, the entries removed
    and their bytes, and the other files removed.
    """
    _MEMORY_CACHE.clear()
    _DISK_BYTES.clear()
    folder = cache_dir()
    now = time.time()
    entries = _listing(folder, _ENTRY_NAME)
    others = [e for e in _listing(folder, _TEMP_NAME) if now - e[2] > STALE_TEMP_SECONDS]
    others += _listing(cache_root() / "chains", _CHAIN_NAME)
    removed: list[tuple[Path, int, float]] = []
    for entry in entries + others:
        try:
            entry[0].unlink()
        except FileNotFoundError:
            continue
        removed.append(entry)
    for sub in (folder, cache_root() / "chains"):
        try:
            sub.rmdir()  # only when nothing else is left in it
        except OSError:
            pass
    gone_entries = [e for e in removed if _ENTRY_NAME.fullmatch(e[0].name)
                    and e[0].parent == folder]
    return {"folder": str(folder), "entries": len(gone_entries),
            "bytes": sum(size for _, size, _ in gone_entries),
            "other_files": len(removed) - len(gone_entries),
            "files": [str(e[0]) for e in removed]}


def _warn_once(topic: str, message: str) -> None:
    """One warning line per ``topic`` and process."""
    if topic in _WARNED:
        return
    _WARNED.add(topic)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _valid_index(x, limit: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < limit


def check_entry(entry: object, n_tensors: int, n_indices: int, output: set[int]) -> str | None:
    """Why ``entry`` is not a usable cache entry for a network of this shape (``None``: it is).

    A usable entry is a JSON object with ``ssa_path`` (``n_tensors - 1`` pairs of
    distinct earlier nodes, each node used once) and ``sliced`` (distinct
    canonical index numbers of the network, none an output index).
    """
    if not isinstance(entry, dict) or set(entry) != {"ssa_path", "sliced"}:
        return "not an object with keys 'ssa_path' and 'sliced'"
    path, sliced = entry["ssa_path"], entry["sliced"]
    if not isinstance(path, list) or len(path) != max(n_tensors - 1, 0):
        return f"'ssa_path' is not a list of {max(n_tensors - 1, 0)} steps"
    used: set[int] = set()
    for k, pair in enumerate(path):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(_valid_index(x, n_tensors + k) for x in pair)
                or pair[0] == pair[1] or pair[0] in used or pair[1] in used):
            return f"'ssa_path' step {k} ({pair!r}) is not two distinct unused earlier nodes"
        used.update(pair)
    if not isinstance(sliced, list) or len(set(map(repr, sliced))) != len(sliced):
        return "'sliced' is not a list of distinct indices"
    for i in sliced:
        if not _valid_index(i, n_indices) or i in output:
            return f"sliced index {i!r} is not an inner index of this network"
    return None


def read_entry(cfile: Path, net: Network) -> dict | None:
    """The valid cache entry in ``cfile``, or ``None`` (missing, unreadable or damaged)."""
    if not os.path.lexists(cfile):
        return None
    try:
        raw = read_regular_bytes(cfile, "path cache", max_bytes=MAX_ENTRY_BYTES)
        entry = json.loads(raw.decode("utf-8"))
        inputs, output, sizes = net.canonical()
        why = check_entry(entry, len(inputs), len(sizes), set(output))
    except InvalidInputError as exc:
        if not os.path.lexists(cfile):  # removed by another process meanwhile
            return None
        why = str(exc)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        why = f"not UTF-8 JSON ({type(exc).__name__})"
    if why is None:
        try:
            os.utime(cfile)  # its last use: the bound removes the least recently used first
        except OSError:
            pass
        return entry
    _warn_once(f"entry:{cfile}", f"qsimdist: ignoring the damaged path cache entry {cfile} "
               f"({why}); searching again and rewriting it")
    return None


def write_entry(cfile: Path, entry: dict, bound: int | None) -> None:
    """Write a cache entry atomically, then keep the entries within ``bound`` bytes (``0``:
    write nothing); an unusable cache folder is warned about once."""
    if bound == 0:
        return
    text = json.dumps(entry)
    try:
        atomic_write_text(cfile, text)
    except OSError as exc:
        _warn_once(f"write:{cfile.parent}", f"qsimdist: cannot write the path cache in "
                   f"{cfile.parent} ({exc.strerror or exc}); running without it")
        return
    logger.debug("path cache entry written: %s", cfile)
    if bound is None:
        return
    # count the folder once per process, then add what is written: a folder of many
    # entries is not listed after every write, only when the count passes the bound
    folder = str(cfile.parent)
    if folder in _DISK_BYTES:
        _DISK_BYTES[folder] += len(text.encode("utf-8"))
    if _DISK_BYTES.get(folder, bound + 1) > bound:
        evict_entries(bound, keep=cfile)


def recall(key: str) -> dict | None:
    """The entry this process holds in memory for ``key`` (``None``: none)."""
    return _MEMORY_CACHE.get(key)


def remember(key: str, entry: dict) -> None:
    """Hold ``entry`` in memory for ``key``."""
    _MEMORY_CACHE[key] = entry
