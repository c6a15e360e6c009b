"""Exact maximum-likelihood decoding networks for stim error models.

Names load lazily; stim is imported only by the functions that need it.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "decode": "decoder",
    "predict": "decoder",
    "decoding_network": "network",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'qsimdist.qec' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
