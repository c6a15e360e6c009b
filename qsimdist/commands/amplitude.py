"""``qsimdist amplitude``: amplitudes of a circuit for bitstrings and patterns."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import typer

from ..config import format_bytes
from .common import (
    BLOCK,
    Backend,
    BackendOpt,
    CircuitArg,
    Comm,
    CommOpt,
    Dtype,
    DtypeOpt,
    GemmOpt,
    JsonOpt,
    MaxTimeOpt,
    MemOpt,
    Order,
    OrderOpt,
    ProfileOpt,
    RepeatsOpt,
    check_comm,
    check_profile,
    output_fault,
    progress_bar,
    rank,
    read_bitstrings,
    under_mpi,
    write_amplitudes,
)

logger = logging.getLogger(__name__)


def amplitude(
    circuit: Path = CircuitArg,
    bitstrings: Optional[list[str]] = typer.Argument(
        None, help="Bitstrings (0, 1, * for open qubits). Default: all zeros."
    ),
    bitstrings_file: Optional[Path] = typer.Option(
        None, "--bitstrings-file", help="File with one bitstring per line."
    ),
    order: Order = OrderOpt,
    dtype: Dtype = DtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    backend: Backend = BackendOpt,
    max_time: Optional[float] = MaxTimeOpt,
    max_repeats: Optional[int] = RepeatsOpt,
    profile: Optional[str] = ProfileOpt,
    gemm: str = GemmOpt,
    collectives: Comm = CommOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Amplitudes <b|U|0> of CIRCUIT for each bitstring (rightmost character = qubit 0).

    Under 'mpiexec -n P' the plan is made once on rank 0 for P ranks and run
    distributed; rank 0 prints the result.
    """
    from ..api import amplitudes, distributed_amplitudes
    from ..engine.amplitudes import load_circuit
    from ..planner.path import PathOptions

    check_profile(profile)  # refused before any work, under mpiexec or not
    check_comm(collectives, backend)
    options = dict(order=order, dtype=dtype, memory_limit=memory_limit, backend=backend,
                   gemm=gemm)
    with progress_bar("contracting") as progress:
        if under_mpi():
            # rank 0 alone reads the circuit and the bitstrings, routes and plans
            opts = PathOptions.coerce(None, max_time, max_repeats)
            res = distributed_amplitudes(
                circuit, lambda n: read_bitstrings(bitstrings or [], bitstrings_file)
                or ["0" * n], profile=profile, opts=opts, progress=progress,
                collectives=collectives, **options)
        else:
            gc = load_circuit(circuit)
            bits = read_bitstrings(bitstrings or [], bitstrings_file) or ["0" * gc.n_qubits]
            logger.info("read %s: %d qubits, %d gate(s); %d bitstring pattern(s)", circuit,
                        gc.n_qubits, len(gc.gates), len(bits))
            res = amplitudes(gc, bits, max_time=max_time, max_repeats=max_repeats,
                             progress=progress, profile=profile, **options)
    logger.info("amplitudes done: %s route, %d contraction(s), plan %.3f s, execute %.3f s",
                res.stats.get("method", "tensor-network"), res.stats.get("contractions", 0),
                res.stats.get("plan_seconds", 0.0), res.stats.get("execute_seconds", 0.0))
    if rank() != 0:
        output_fault()
        return
    header = {"n_qubits": res.n_qubits, "dtype": res.dtype, "order": res.order}
    write_amplitudes(res.chunks(BLOCK), header, res.stats, as_json, with_p=True)
    if as_json:
        return
    s = res.stats
    typer.echo(
        f"# {len(res)} amplitude(s), {s.get('method', 'tensor-network')} route, "
        f"{s['contractions']} contraction(s), "
        f"{s['flops']:.3e} flops, plan {s['plan_seconds']:.2f}s, execute "
        f"{s['execute_seconds']:.2f}s, peak {format_bytes(s['peak_bytes'])}",
        err=True,
    )
