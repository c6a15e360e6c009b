"""The runtime layer between the entry points and the planner/executors.

* :class:`RunOptions` — dtype, memory budget, array backend, executor, GEMM
  mode: validated and resolved once per call (:mod:`.options`,
  :mod:`.memory`);
* the router (:mod:`.router`) — one cost model prices the statevector engine
  against the tensor-network methods for what is asked (amplitudes, shots,
  Pauli terms) and picks the cheapest; the :class:`Route` goes into every
  result's metadata. It only prices: :mod:`.statevector_run` runs the
  statevector route;
* :mod:`.batching` — which characters of many bitstrings one contraction
  leaves open;
* :mod:`.distributed` — under ``mpiexec``, rank 0 plans and every rank runs;
* the work behind the doors: :mod:`.amplitudes` (both routes for amplitudes,
  batches, the distributed leader; :class:`~.results.AmplitudeResult`),
  :mod:`.sampling` (shots: drawn from a state in :mod:`.state_sampling`, by the
  tensor-network methods of :mod:`.network_sampling`, contracted by the
  :mod:`.contractor`), :mod:`.expectation` (Pauli terms: parsed and grouped in
  :mod:`.pauli_terms`, read off a state by :mod:`.term_readers`, contracted on
  the networks of :mod:`.term_networks` and :mod:`.doubled`) and
  :mod:`.networks` (a given network through the plan cache: the quimb hook
  and ``qsimdist contract``).
"""

from .memory import MemoryBudget, machine_memory
from .options import RunOptions, check_backend
from .router import Route, route_amplitudes, route_state_reading

__all__ = ["MemoryBudget", "Route", "RunOptions", "check_backend", "machine_memory",
           "route_amplitudes", "route_state_reading"]
