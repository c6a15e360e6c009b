"""The runtime layer between the entry points and the planner/executors.

* :class:`Engine` (:mod:`.engine`) — what every door builds once from its resolved
  :class:`RunOptions` and calls: four verbs, ``amplitudes``, ``sample``,
  ``expectation`` and ``contract`` (and ``cost``, the price before the run); it owns
  the run options, the statistics and the last route. The doors import what they need
  from this face only;
* :class:`RunOptions` — dtype, memory budget, array backend, executor, GEMM
  mode: validated and resolved once per call (:mod:`.options`,
  :mod:`.memory`);
* the router (:mod:`.router`) — one cost model prices the statevector engine
  against the tensor-network methods for what is asked (amplitudes, shots,
  Pauli terms) and picks the cheapest; the :class:`Route` goes into every
  result's metadata. It only prices: :mod:`.statevector_run` runs the
  statevector route;
* dynamic circuits (mid-circuit measurement, reset, classical control):
  :func:`route_dynamic` prices trajectories of the circuit's own qubits
  (:mod:`.trajectory`, priced in :mod:`.dynamic_prices`) beside the
  deferred-measurement circuit, for the estimator's branches
  (:mod:`.trajectory_values`) and the sampler's tree (:mod:`.tree_sampling`) alike;
* :mod:`.batching` — which characters of many bitstrings one contraction
  leaves open;
* :mod:`.distributed` — under ``mpiexec``, rank 0 plans and every rank runs;
* the work behind the doors: :mod:`.amplitudes` (both routes for amplitudes,
  batches, the distributed leader; :class:`~.results.AmplitudeResult`),
  :mod:`.sampling` (shots: drawn from a state in :mod:`.state_sampling`, by the
  tensor-network methods of :mod:`.network_sampling`, contracted by the
  :mod:`.contractor`), :mod:`.expectation` (Pauli terms: parsed and grouped in
  :mod:`.pauli_terms`, read off a state by :mod:`.term_readers`, contracted on
  the networks of :mod:`.term_networks` and :mod:`.doubled`; the public
  ``expectation_values`` and ``expectation_costs`` over one :class:`Engine` in
  :mod:`.expectation_api`) and :mod:`.networks` (a given network through the plan
  cache: the quimb hook and ``qsimdist contract``).
"""

import importlib

from .engine import Engine, inside_qsimdist_now
from .memory import MemoryBudget, machine_memory
from .options import RunOptions, check_backend
from .router import DynamicRoute, Route, route_amplitudes, route_dynamic, route_state_reading

#: names the doors take from this face, loaded from their module on first use
_LAZY = {
    "EstimatePub": "estimates",
    "PubValues": "estimates",
    "SampleInfo": "sampling",
    "SamplePub": "draws",
    "DrawnSample": "draws",
    "PubShots": "draws",
    "SAMPLING_METHODS": ("sampling", "METHODS"),
    "EXPECTATION_METHODS": ("expectation", "METHODS"),
    "check_term_options": "expectation",
    "executor_choices": "options",
    "absent_routes": "stabilizer",
    "PauliTerm": "pauli_terms",
    "parse_term": "pauli_terms",
    # dynamic circuits: the estimator's branches and the sampler's tree of trajectories
    "dynamic_values": "trajectory_values",
    "TrajectoryReport": "trajectory_values",
    "sample_tree": "tree_sampling",
    "TreeSample": "tree_sampling",
}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'qsimdist.engine' has no attribute {name!r}")
    module, attr = where if isinstance(where, tuple) else (where, name)
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


__all__ = ["DynamicRoute", "Engine", "MemoryBudget", "Route", "RunOptions", "check_backend",
           "inside_qsimdist_now", "machine_memory", "route_amplitudes", "route_dynamic",
           "route_state_reading", *sorted(_LAZY)]
