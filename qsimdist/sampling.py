"""Sampling bitstrings from a circuit: the public names of :mod:`qsimdist.engine.sampling`.

The sampler's engine (the router between the statevector draw and the
tensor-network marginal, chain and rejection methods) lives in the engine
layer; this module keeps its public names where 0.1 had them.
"""

from .engine.sampling import (
    METHODS,
    ContractionStats,
    Contractor,
    SampleInfo,
    choose_method,
    doubled_network,
    route_sampling,
    sample_bits,
)

__all__ = ["METHODS", "ContractionStats", "Contractor", "SampleInfo", "choose_method",
           "doubled_network", "route_sampling", "sample_bits"]
