"""Qiskit interface: ``SamplerV2``, ``EstimatorV2`` and ``QsimdistBackend`` (a ``BackendV2``).

Names load lazily so that ``import qsimdist.qiskit`` costs nothing until a
primitive is used; Qiskit itself is imported by the modules that need it.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SamplerV2": "sampler",
    "EstimatorV2": "estimator",
    "QsimdistBackend": "backend",
    "QsimdistProvider": "backend",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'qsimdist.qiskit' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
