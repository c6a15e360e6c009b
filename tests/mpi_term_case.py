"""One kicked-Ising Pauli term over MPI ranks, run by tests/test_mpi_term.py under mpiexec.

    mpiexec -n P python -m mpi4py tests/mpi_term_case.py KIND:LX:LY:STEPS:LIMIT_BYTES

The term (X, Z, Y on three neighbouring qubits in the middle of the patch) of the
kicked-Ising circuit (:func:`qsimdist.lattice.kicked_ising_circuit`, ``theta_h = 0.8``)
on a small lattice patch, on its doubled light-cone network as the expectation engine
makes it. Two runs, complex128:

- *dp*: rank 0 plans the network unsliced, schedules it for the ranks with the dp
  strategy on the ``local-cpu`` profile whose per-rank memory is ``LIMIT_BYTES``
  (below the largest intermediate), broadcasts the plan; every rank runs the ``mpi``
  executor; rank 0 compares with the one-process ``plan.execute()``.
- *engine*: :class:`~qsimdist.engine.expectation.ExpectationEngine` with
  ``executor="mpi"`` and the same per-rank limit (the route of ``mpiexec qsimdist
  expect`` with one label), against a one-process engine without a limit.

Rank 0 prints one JSON line.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

THETA_H = 0.8


def term_circuit(kind: str, lx: int, ly: int, steps: int):
    """(Qiskit circuit, Pauli label in Qiskit's order, number of qubits)."""
    from qsimdist.lattice import kicked_ising_circuit, make_lattice, pauli_label

    lattice = make_lattice(kind, lx, ly)
    edges = [e for colour in lattice.colours for e in colour]
    n = lx * ly
    centre = (ly // 2) * lx + lx // 2
    ops = {centre - 1: "X", centre: "Z", centre + 1: "Y"}
    return kicked_ising_circuit(n, edges, THETA_H, steps), pauli_label(ops, n), n


def term_network(qc, label: str, n: int, limit: int):
    from qsimdist.engine.doubled import DoubledCircuit
    from qsimdist.engine.pauli_terms import SINGLE_QUBIT_OPERATORS, parse_term
    from qsimdist.frontends import load

    term = parse_term(label, n)
    return DoubledCircuit.of(load(qc), fuse=True).simplified(
        term.qubits, term.ops, SINGLE_QUBIT_OPERATORS, limit=limit, dtype="complex128")


def main() -> None:
    from qsimdist import expectation_values
    from qsimdist.engine.cache import PLANS
    from qsimdist.engine.coordination import profile_for
    from qsimdist.engine.expectation import ExpectationEngine
    from qsimdist.executors.mpi import RunStats, execute
    from qsimdist.planner.distribution import schedule, scheduled_plan
    from qsimdist.planner.plan import Plan, make_plan

    comm = MPI.COMM_WORLD
    kind, lx, ly, steps, limit = sys.argv[1].split(":")
    lx, ly, steps, limit = int(lx), int(ly), int(steps), int(limit)
    qc, label, n = term_circuit(kind, lx, ly, steps)

    # 1. the dp schedule of the term's network, planned on rank 0 and run on every rank
    payload = base = None
    if comm.rank == 0:
        base = make_plan(term_network(qc, label, n, limit), dtype="complex128")
        sched = schedule(base, profile_for("local-cpu", limit), comm.size, "dp")
        payload = scheduled_plan(base, sched).to_dict()
    plan = Plan.from_dict(comm.bcast(payload, root=0), "broadcast plan")
    stats = RunStats()
    got = complex(np.asarray(execute(plan, comm=comm, stats=stats)).reshape(-1)[0])
    every = comm.gather(stats.to_dict(), root=0)

    # 2. the engine's distributed route (one label, fewer than the ranks) and one process
    engine = ExpectationEngine(dtype="complex128", memory_limit=limit, executor="mpi",
                               method="doubled")
    PLANS.clear()
    engine_value = float(expectation_values(qc, [label], engine=engine)[0])
    if comm.rank != 0:
        return
    # the plan rank 0 made and shared (only rank 0 keeps plans; private: read-only here)
    made = [p for p, _ in PLANS._plans.values() if p.schedule is not None]
    eng_sched = made[-1].schedule if made else None
    one_engine = ExpectationEngine(dtype="complex128", memory_limit="none", method="doubled")
    engine_reference = float(expectation_values(qc, [label], engine=one_engine)[0])

    reference = complex(np.asarray(base.execute()).reshape(-1)[0])
    s = plan.schedule
    print(json.dumps({
        "ranks": comm.size, "limit_bytes": limit,
        "largest_intermediate_bytes": int(base.stats.max_intermediate) * 16,
        "value": [got.real, got.imag], "one_process": [reference.real, reference.imag],
        "abs_diff": abs(got - reference),
        "group_size": s.group_size, "n_slices": s.n_slices, "strategy": s.strategy,
        "actions": sorted({r.action.value for r in s.steps}),
        "redistributions": s.predicted.n_redistributions,
        "predicted_peak": s.predicted.peak_bytes_per_device, "usable": s.usable_memory,
        "stats": every,
        "engine": {"value": engine_value, "one_process": engine_reference,
                   "abs_diff": abs(engine_value - engine_reference),
                   "group_size": None if eng_sched is None else eng_sched.group_size,
                   "n_slices": None if eng_sched is None else eng_sched.n_slices,
                   "actions": None if eng_sched is None else sorted(
                       {r.action.value for r in eng_sched.steps})},
    }))


if __name__ == "__main__":
    main()
