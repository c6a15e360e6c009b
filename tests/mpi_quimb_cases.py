"""qsimdist.quimb under ``mpiexec -n P python -m mpi4py tests/mpi_quimb_cases.py PROFILE``.

Run by tests/test_quimb_hook.py. Every rank builds the same seeded quimb
networks and calls :func:`qsimdist.quimb.contract` (and the :func:`use` hook)
with ``executor="mpi"``: rank 0 plans for all ranks and broadcasts, every
rank runs its share and returns the whole result. Each rank compares its
result with quimb's own single-process contraction; rank 0 gathers the
relative errors and the schedules' shapes and prints one JSON line.
``PROFILE`` is a bundled profile name, or ``toy`` for the tests' small
profile (tests/test_distribute.py).
"""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI


def rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b), initial=0.0) / max(float(np.linalg.norm(b)), 1e-300))


def main() -> None:
    import quimb.tensor as qtn

    import qsimdist.quimb as qq

    comm = MPI.COMM_WORLD
    profile = sys.argv[1]
    if profile == "toy":
        from test_distribute import toy_profile  # this script runs from tests/

        profile = toy_profile(devices_per_node=comm.size)
    opts = {"executor": "mpi", "profile": profile, "comm": comm, "memory_limit": "96KiB"}
    errors: dict[str, float] = {}
    shapes: dict[str, dict] = {}

    # random network with hyper-indices, open outputs (one of them a hyper-index)
    tn = qtn.HTN_rand(10, 3, n_out=2, n_hyper_in=3, n_hyper_out=1, seed=0, dtype="complex128")
    out = ("k2", "k1", "k0")
    got = qq.contract(tn, output_inds=out, **opts)
    ref = tn.contract(all, output_inds=out, optimize="greedy")
    errors["hyper_tensor"] = rel(got.data, ref.data) if got.inds == out else float("inf")
    errors["hyper_scalar"] = rel(qq.contract(tn, output_inds=(), **opts),
                                 tn.contract(all, output_inds=(), optimize="greedy"))

    # two tensors (the forced path), an open index
    pair = qtn.TensorNetwork(tn.tensors[:2])
    got = qq.contract(pair, **dict(opts, memory_limit="64MiB"))
    ref2 = pair.contract(all, optimize="greedy")
    errors["two_tensors"] = rel(got.data, ref2.data) if got.inds == ref2.inds else float("inf")

    # PEPS 4x4, D=3: the norm and a local <Z>; the schedule the norm ran with
    peps = qtn.PEPS.rand(4, 4, bond_dim=3, seed=1, dtype="complex128")
    norm_tn = peps.make_norm(layer_tags=None)
    norm2 = norm_tn.contract(all, output_inds=(), optimize="auto-hq")
    errors["peps_norm"] = rel(qq.peps_norm(peps, squared=True, **opts), np.real(norm2))
    z = np.diag([1.0, -1.0])
    errors["peps_z"] = rel(qq.peps_local_expectation(peps, z, (1, 2), **opts),
                           peps.local_expectation_exact(z, (1, 2), optimize="auto-hq"))
    prepared = qq.prepare([t.data for t in norm_tn], [t.inds for t in norm_tn], (), None)
    _, plan = qq.run_network(prepared.network, qq.ContractOptions(**opts), "complex128")
    sched = plan.schedule
    shapes["peps_norm"] = {"group_size": sched.group_size, "n_slices": sched.n_slices,
                           "actions": sorted({r.action.value for r in sched.steps})}

    # circuit network: the state vector as a Tensor over the qubits' indices
    rng = np.random.default_rng(3)
    circ = qtn.Circuit(6)
    for layer in range(4):
        for q in range(6):
            circ.apply_gate("U3", *rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, 5, 2):
            circ.apply_gate("CX", q, q + 1)
    qubits = tuple(f"k{q}" for q in range(6))
    psi = qq.contract(circ.psi, output_inds=qubits, **opts)
    errors["circuit_psi"] = rel(psi.data.reshape(-1), circ.to_dense().reshape(-1))

    # a 10-qubit state (16 KiB) under a 24 KiB limit per rank: its output is sharded over ranks
    circ = qtn.Circuit(10)
    for layer in range(3):
        for q in range(10):
            circ.apply_gate("U3", *rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, 9, 2):
            circ.apply_gate("CX", q, q + 1)
    qubits = tuple(f"k{q}" for q in range(10))
    prepared = qq.prepare([t.data for t in circ.psi], [t.inds for t in circ.psi], qubits, None)
    values, plan = qq.run_network(prepared.network,
                                  qq.ContractOptions(**dict(opts, memory_limit="24KiB")),
                                  "complex128")
    errors["circuit_sharded"] = rel(values.reshape(-1), circ.to_dense().reshape(-1))
    sched = plan.schedule
    shapes["circuit_sharded"] = {"group_size": sched.group_size, "n_slices": sched.n_slices,
                                 "actions": sorted({r.action.value for r in sched.steps})}

    # the hook: quimb's own call, distributed
    with qq.use(**opts) as hook:
        got = tn.contract(all, output_inds=out)
    errors["hook"] = rel(got.data, ref.data)
    routed = hook.routed

    gathered = comm.gather({"errors": errors, "routed": routed}, root=0)
    if comm.rank == 0:
        print(json.dumps({"ranks": comm.size, "per_rank": gathered, "schedules": shapes}))


if __name__ == "__main__":
    main()
