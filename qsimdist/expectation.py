"""Pauli expectation values: the public names of :mod:`qsimdist.engine.expectation`.

``expectation_values(circuit, ["ZZI", ...])`` with no Qiskit needed; the
engine (light cones, qubit-wise commuting groups on the state, the
tensor-network terms) lives in the engine layer, and this module keeps its
public names where 0.1 had them.
"""

from .engine.expectation import (
    METHODS,
    ExpectationEngine,
    ExpectationStats,
    PauliTerm,
    expectation_network,
    expectation_values,
    group_values,
    parse_term,
    pauli_on_state,
    qwc_groups,
    state_network,
    term_on_state,
)

__all__ = ["METHODS", "ExpectationEngine", "ExpectationStats", "PauliTerm",
           "expectation_network", "expectation_values", "group_values", "parse_term",
           "pauli_on_state", "qwc_groups", "state_network", "term_on_state"]
