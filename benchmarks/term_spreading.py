"""Many Pauli terms under ``mpiexec -n P``: spread over the ranks (each rank values its share
alone) against each term contracted distributed, and one process.

    mpiexec -n 2 python -m benchmarks.term_spreading [--qubits 40] [--depth 4] [--repeats 3]

A random brickwork circuit (``--qubits``, ``--depth``), every Z_i Z_{i+1}; each engine
values the terms once to warm (plans, compilation), then ``--repeats`` times, best kept.
Rank 0 prints one JSON line: seconds for ``spread_terms=True`` and ``False`` and the
largest difference between their values.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    from mpi4py import MPI
    from qiskit import QuantumCircuit

    from qsimdist.engine.expectation import ExpectationEngine
    from qsimdist.engine.pauli_terms import parse_term
    from qsimdist.frontends.qiskit_circuit import from_qiskit

    parser = argparse.ArgumentParser(prog="python -m benchmarks.term_spreading")
    parser.add_argument("--qubits", type=int, default=40)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = args.qubits
    rng = np.random.default_rng(5)
    qc = QuantumCircuit(n)
    for layer in range(args.depth):
        for q in range(n):
            qc.u(*rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, n - 1, 2):
            qc.cx(q, q + 1)
    gc = from_qiskit(qc)
    terms = [parse_term("I" * (n - 2 - i) + "ZZ" + "I" * i, n) for i in range(n - 1)]
    comm = MPI.COMM_WORLD
    row = {"ranks": comm.Get_size(), "qubits": n, "depth": args.depth, "terms": len(terms)}
    values = {}
    for spread in (True, False):
        engine = ExpectationEngine(executor="mpi", spread_terms=spread)
        engine.term_values(gc, terms)
        best = float("inf")
        for _ in range(args.repeats):
            comm.Barrier()
            t0 = time.perf_counter()
            values[spread] = engine.term_values(gc, terms)
            comm.Barrier()
            best = min(best, time.perf_counter() - t0)
        row[f"spread_{spread}_s"] = best
    row["max_difference"] = float(np.max(np.abs(values[True] - values[False])))
    row["ratio_spread_over_distributed"] = row["spread_True_s"] / row["spread_False_s"]
    if comm.Get_rank() == 0:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
