"""Run under ``mpiexec -n P python -m mpi4py tests/mpi_sampler_cases.py`` by test_qiskit_sampler.

Every rank runs the same SamplerV2 calls with the ``mpi`` executor; rank 0
prints one JSON line with the bitstrings drawn (the test compares them with a
single-process run of the same seed) and the methods used.
"""

from __future__ import annotations

import json


def circuits():
    from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
    from qiskit.circuit.random import random_circuit

    rc = random_circuit(8, 5, max_operands=2, seed=3, measure=False)
    rc.measure_all()
    ghz = QuantumCircuit(20)
    ghz.h(0)
    for i in range(19):
        ghz.cx(i, i + 1)
    ghz.ry(0.4, 7)
    ghz.measure_all()
    dyn = QuantumCircuit(QuantumRegister(3, "q"), ClassicalRegister(4, "c"))
    dyn.h(0)
    dyn.cx(0, 1)
    dyn.measure(0, 3)
    with dyn.if_test((dyn.clbits[3], 1)):
        dyn.ry(0.8, 2)
    dyn.reset(0)
    dyn.h(0)
    dyn.measure([0, 1, 2], [0, 1, 2])
    wide = random_circuit(11, 4, max_operands=2, seed=31, measure=False)
    wide.measure_all()
    # a tensor-network method named: 'auto' takes the statevector route in one process,
    # which MPI ranks do not (the bits are the same; the method's name is compared too)
    return {"random8": (rc, "marginal"), "ghz20_chain": (ghz, "chain"),
            "dynamic3": (dyn, "marginal"),
            "random11_chain_groups_of_3": (wide, "chain")}


def run(executor: str) -> dict:
    import qsimdist.engine.network_sampling as network_sampling
    from qsimdist.qiskit import SamplerV2

    out = {}
    default = network_sampling.CHAIN_GROUP
    for name, (qc, method) in circuits().items():
        # groups of 3: later groups batch many prefixes per contraction
        network_sampling.CHAIN_GROUP = 3 if "groups_of_3" in name else default
        sampler = SamplerV2(seed=11, options={"executor": executor, "method": method,
                                              "dtype": "complex128"})
        res = sampler.run([qc], shots=400).result()[0]
        out[name] = {"bits": res.join_data().get_bitstrings(),
                     "method": res.metadata["sampling"]["method"]}
    network_sampling.CHAIN_GROUP = default
    return out


def main() -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = run("mpi")
    comm.Barrier()
    if comm.Get_rank() == 0:
        print(json.dumps({"ranks": comm.Get_size(), "results": out}))


if __name__ == "__main__":
    main()
