"""The disk path cache: where it lives (platformdirs, $XDG_CACHE_HOME, $QSIMDIST_CACHE_DIR),
its size bound ($QSIMDIST_CACHE_MAX_BYTES, least recently used removed first), and
``qsimdist cache info`` / ``qsimdist cache clear``."""

from __future__ import annotations

import json
import os
import time

import pytest

import qsimdist.planner.path_cache as cachemod
from qsimdist import InvalidInputError, Network
from qsimdist.cli import main
from qsimdist.planner.path import find_path
from qsimdist.planner.path_cache import (
    DEFAULT_CACHE_MAX_BYTES,
    cache_dir,
    cache_entries,
    cache_max_bytes,
    cache_root,
)


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    """An empty user cache under a temporary $XDG_CACHE_HOME (no $QSIMDIST_CACHE_DIR)."""
    monkeypatch.delenv("QSIMDIST_CACHE_DIR", raising=False)
    monkeypatch.delenv("QSIMDIST_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(cachemod, "_MEMORY_CACHE", {})
    monkeypatch.setattr(cachemod, "_WARNED", set())
    return tmp_path / "xdg" / "qsimdist"


def chain(n: int, k: int = 0) -> Network:
    """A chain of ``n`` matrices, bond sizes varied by ``k`` (another structure, another
    cache entry)."""
    inputs = [(f"i{j}", f"i{j + 1}") for j in range(n)]
    sizes = {f"i{j}": 2 + (j + k) % 3 for j in range(n + 1)}
    return Network(inputs, ("i0", f"i{n}"), sizes)


def entry_names() -> list[str]:
    return sorted(p.name for p, _, _ in cache_entries())


def test_folder_follows_xdg_cache_home(xdg):
    assert cache_root() == xdg and cache_dir() == xdg / "paths"
    res = find_path(chain(5))
    assert not res.from_cache
    files = os.listdir(xdg / "paths")
    assert len(files) == 1 and files[0].endswith(".json")  # atomic: no temporary left
    cachemod._MEMORY_CACHE.clear()
    assert find_path(chain(5)).from_cache  # read back from the disk


def test_qsimdist_cache_dir_still_overrides(xdg, tmp_path, monkeypatch):
    monkeypatch.setenv("QSIMDIST_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    find_path(chain(4))
    assert len(os.listdir(tmp_path / "mine" / "paths")) == 1
    assert not xdg.exists()


def test_bound_setting(monkeypatch):
    monkeypatch.delenv("QSIMDIST_CACHE_MAX_BYTES", raising=False)
    assert cache_max_bytes() == DEFAULT_CACHE_MAX_BYTES == 256 << 20
    for text, value in (("64MiB", 64 << 20), ("1e6", 10**6), ("0", 0), ("none", None)):
        monkeypatch.setenv("QSIMDIST_CACHE_MAX_BYTES", text)
        assert cache_max_bytes() == value
    monkeypatch.setenv("QSIMDIST_CACHE_MAX_BYTES", "lots")
    with pytest.raises(InvalidInputError, match="QSIMDIST_CACHE_MAX_BYTES.*'lots'"):
        cache_max_bytes()


def test_writes_stay_within_the_bound_least_recently_used_first(xdg, monkeypatch):
    find_path(chain(6, 0))
    one = sum(size for _, size, _ in cache_entries())
    monkeypatch.setenv("QSIMDIST_CACHE_MAX_BYTES", str(int(2.5 * one)))
    first = entry_names()[0]
    past = time.time() - 100
    os.utime(cache_dir() / first, (past, past))
    find_path(chain(6, 1))
    second = [n for n in entry_names() if n != first][0]
    os.utime(cache_dir() / second, (past + 10, past + 10))
    # the first entry is used again (read from the disk): now the most recently used
    cachemod._MEMORY_CACHE.clear()
    assert find_path(chain(6, 0)).from_cache
    assert len(entry_names()) == 2
    find_path(chain(6, 2))  # a third entry: over the bound, so the least recently used goes
    names = entry_names()
    assert len(names) == 2 and first in names and second not in names
    assert sum(size for _, size, _ in cache_entries()) <= int(2.5 * one)


def test_bound_zero_writes_nothing(xdg, monkeypatch):
    monkeypatch.setenv("QSIMDIST_CACHE_MAX_BYTES", "0")
    find_path(chain(5))
    assert entry_names() == []


def test_bad_bound_is_refused_in_one_line(xdg, monkeypatch, capsys):
    monkeypatch.setenv("QSIMDIST_CACHE_MAX_BYTES", "8 parsecs")
    with pytest.raises(InvalidInputError):
        find_path(chain(5))
    assert main(["cache", "info"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qsimdist: error: QSIMDIST_CACHE_MAX_BYTES")


def test_cache_info(xdg, capsys, monkeypatch):
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {"folder": str(xdg / "paths"), "entries": 0, "bytes": 0,
                    "max_bytes": 256 << 20}
    find_path(chain(5))
    find_path(chain(7))
    monkeypatch.setenv("QSIMDIST_CACHE_MAX_BYTES", "64MiB")
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["entries"] == 2 and info["max_bytes"] == 64 << 20
    assert info["bytes"] == sum(size for _, size, _ in cache_entries()) > 0
    assert main(["cache", "info"]) == 0
    text = capsys.readouterr().out
    assert str(xdg / "paths") in text and "entries  2" in text and "64.00 MiB" in text


def test_cache_clear_removes_only_its_entries(xdg, capsys):
    find_path(chain(5))
    find_path(chain(7))
    (xdg / "paths" / "notes.txt").write_text("mine")
    (xdg / "other.txt").write_text("mine too")
    (xdg / "chains").mkdir()
    (xdg / "chains" / ("a" * 64)).touch()  # a sampler chain record
    names = entry_names()
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 2 path cache entries" in out and "1 other file(s)" in out
    assert all(f"removed {xdg / 'paths' / n}" in out for n in names)
    assert entry_names() == [] and not (xdg / "chains").exists()
    assert (xdg / "paths" / "notes.txt").read_text() == "mine"
    assert (xdg / "other.txt").read_text() == "mine too"
    assert main(["cache", "clear", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["entries"] == 0 and again["bytes"] == 0 and again["files"] == []
    assert not find_path(chain(5)).from_cache  # the memory cache was emptied too


def test_stale_temporary_files_are_cleared(xdg):
    find_path(chain(5))
    name = entry_names()[0]
    tmp = xdg / "paths" / f".{name}.abc123.tmp"
    fresh = xdg / "paths" / f".{name}.def456.tmp"
    tmp.write_text("{")
    fresh.write_text("{")
    old = time.time() - 2 * cachemod.STALE_TEMP_SECONDS
    os.utime(tmp, (old, old))
    cachemod.clear_cache()
    assert not tmp.exists() and fresh.exists()  # another process may be writing that one


def test_unwritable_folder_still_runs(xdg, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("QSIMDIST_CACHE_DIR", str(blocker / "sub"))
    with pytest.warns(RuntimeWarning, match="cannot write the path cache"):
        assert not find_path(chain(5)).from_cache
    assert cachemod.cache_info()["entries"] == 0
    assert cachemod.clear_cache()["files"] == []


def test_cache_help(capsys):
    assert main(["cache", "-h"]) == 0
    out = capsys.readouterr().out
    assert "info" in out and "clear" in out
