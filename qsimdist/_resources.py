"""Locate folders of bundled data: the repository folder in a checkout, package data in a wheel."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def bundled_dir(folder: str, package: str, pattern: str) -> Path | None:
    """The folder ``folder`` beside the package (checkout) or package ``package`` (wheel).

    ``pattern`` (a glob) must match at least one file there. The wheel's data
    folders have no ``__init__.py``, so ``importlib.resources`` may return a
    ``MultiplexedPath``; its entries tell where the files really live.
    """
    checkout = Path(__file__).resolve().parent.parent / folder
    if checkout.is_dir() and any(checkout.glob(pattern)):
        return checkout
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        return None
    if isinstance(root, Path):
        return root
    for entry in root.iterdir():
        if Path(entry.name).match(pattern):
            return Path(str(entry)).parent
    return None
