"""Shared fixtures: an isolated path cache, and the shared reference data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("QSIMDIST_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(autouse=True, scope="session")
def _isolated_path_cache(tmp_path_factory):
    """Keep the tests' path cache out of the user's home folder."""
    old = os.environ.get("QSIMDIST_CACHE_DIR")
    os.environ["QSIMDIST_CACHE_DIR"] = str(tmp_path_factory.mktemp("qsimdist-cache"))
    yield
    if old is None:
        os.environ.pop("QSIMDIST_CACHE_DIR", None)
    else:
        os.environ["QSIMDIST_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests using it skip, with the reason, when it is absent."""
    if not (DATA / "README.md").exists():
        pytest.skip(f"reference data folder {DATA} is absent (set QSIMDIST_SHARED_DATA)")
    return DATA


def rel_err(a, b) -> float:
    """Largest deviation relative to the norm of the reference vector."""
    import numpy as np

    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return float(np.max(np.abs(a - b)) / max(np.linalg.norm(b), 1e-300))
