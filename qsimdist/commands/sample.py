"""``qsimdist sample``: counts of a circuit file drawn by the exact sampler.

OpenQASM files are read with their measurements, resets and ``if`` statements;
a circuit without any measurement has every qubit measured. ``.qsim`` files
(no measurements) measure every qubit. The counts come from the Qiskit door,
:class:`~qsimdist.qiskit.SamplerV2`.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer

from ..config import check_order, reorder_bits
from ..errors import InvalidInputError
from .common import (
    Backend,
    BackendOpt,
    Dtype,
    DtypeOpt,
    JsonOpt,
    MemOpt,
    Order,
    OrderOpt,
    ProfileOpt,
    check_profile,
    method_opt,
    seed_opt,
)

logger = logging.getLogger(__name__)

_QASM = (".qasm", ".qasm2", ".qasm3")


def load_sampling_circuit(path: Path):
    """A Qiskit circuit with measurements for ``path`` (all qubits measured when it has none)."""
    from qiskit import QuantumCircuit
    from qiskit.circuit.library import UnitaryGate

    from .._fileio import read_input_text
    from ..frontends import GateCircuit, load

    if path.suffix.lower() in _QASM:
        from ..frontends.qasm import qiskit_from_qasm

        qc = qiskit_from_qasm(read_input_text(path, "OpenQASM text"), str(path))
    else:
        obj = load(path)
        if not isinstance(obj, GateCircuit):
            raise InvalidInputError(
                f"{path}: sample needs a circuit (.qasm, .qasm3, .qsim), not a tensor network")
        qc = QuantumCircuit(obj.n_qubits, global_phase=obj.global_phase, name=obj.name)
        for g in obj.gates:  # big-endian matrices: Qiskit's qubit order is the reverse
            qc.append(UnitaryGate(g.matrix, check_input=False), list(reversed(g.qubits)))
    if not any(inst.operation.name == "measure" for inst in qc.data) and not any(
        getattr(inst.operation, "blocks", ()) for inst in qc.data
    ):
        qc.measure_all()
    return qc


def sample(
    circuit: Path = typer.Argument(..., help="Circuit file (.qasm OpenQASM 2/3, .qasm3, .qsim)."),
    shots: int = typer.Option(1024, "--shots", help="Number of shots (>= 1)."),
    seed: Optional[int] = seed_opt(None, "Seed: the same seed, the same bitstrings."),
    dtype: Dtype = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    backend: Backend = BackendOpt,
    method: str = method_opt(
        "auto (the router's cheapest), statevector, marginal, doubled-marginal, chain, "
        "rejection or stabilizer (Clifford circuits, stim)."),
    profile: Optional[str] = ProfileOpt,
    order: Order = OrderOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Draw SHOTS bitstrings of CIRCUIT exactly and print their counts (bit 0 rightmost).

    Mid-circuit measurements, resets and 'if' blocks are supported (deferred
    measurement). Counts join all classical registers, the last register's
    bits leftmost, as Qiskit's join_data() does; '--order natural' reverses
    each bitstring (character i is classical bit i, which is qubit i when the
    circuit measures every qubit).
    """
    if shots < 1:
        raise InvalidInputError(f"--shots must be at least 1, got {shots}")
    if seed is not None and seed < 0:
        raise InvalidInputError(f"--seed must be a non-negative integer, got {seed}")
    check_order(order)
    check_profile(profile)  # refused before any work, under mpiexec or not
    from ..qiskit import SamplerV2

    qc = load_sampling_circuit(circuit)
    logger.info("sampling %d shot(s) of %s: %d qubit(s), %d clbit(s)", shots, circuit,
                qc.num_qubits, qc.num_clbits)
    options = {"dtype": dtype, "memory_limit": memory_limit, "method": method,
               "profile": profile, "backend": backend}
    result = SamplerV2(seed=seed, options=options).run([qc], shots=shots).result()[0]
    counts = result.join_data().get_counts()
    info = result.metadata["sampling"]
    logger.info("sampled: method %s, %d contraction(s)", info["method"], info["contractions"])
    if order == "natural":  # character i is classical bit i
        counts = {reorder_bits(bits, order): count for bits, count in counts.items()}
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and mpi.COMM_WORLD.Get_rank() != 0:
        return
    ordered = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    if as_json:
        typer.echo(json.dumps({"counts": ordered, "shots": shots, "order": order,
                               "method": info["method"],
                               "predicted_flops": info["predicted_flops"],
                               "contractions": info["contractions"],
                               "route": info.get("route")}))
        return
    for bits, count in ordered.items():
        typer.echo(f"{bits} {count}")
    typer.echo(f"# {shots} shots, {len(ordered)} distinct, method {info['method']}, "
               f"{info['contractions']} contraction(s), predicted {info['predicted_flops']:.3g} "
               "FLOPs")
