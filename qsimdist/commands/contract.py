"""``qsimdist contract NETWORK.json``: contract a cotengra-style JSON network.

The arrays come from ``--arrays FILE.npz`` (``arr_0 .. arr_{n-1}``, read with
``allow_pickle=False``), from the sibling ``NETWORK.npz``, or, only when asked
with ``--random-arrays SEED``, from a seeded Gaussian draw. Every input problem
is one line on stderr and exit code 2 (raised as a
:class:`~qsimdist.errors.QsimdistError`).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..config import format_bytes
from ..errors import InvalidInputError
from .common import (
    Backend,
    BackendOpt,
    Comm,
    CommOpt,
    GemmOpt,
    JsonOpt,
    MaxTimeOpt,
    MemOpt,
    NetworkDtype,
    NetworkDtypeOpt,
    OutputOpt,
    ProfileOpt,
    check_comm,
    check_profile,
)

if TYPE_CHECKING:
    from ..network import Network

logger = logging.getLogger(__name__)


def _structure_only(path: Path) -> Network:
    """The network of ``path`` without any arrays (a sibling .npz is not read)."""
    from .._fileio import read_regular_bytes
    from ..errors import CircuitParseError
    from ..network.io import network_from_dict, parse_json_text

    raw = read_regular_bytes(path, "network JSON", CircuitParseError)
    return network_from_dict(parse_json_text(raw, str(path), "the network JSON"), str(path))


def load_arrays_network(network: Path, arrays: Optional[Path], random_arrays: Optional[int],
                        dtype: Optional[str]) -> tuple[Network, bool]:
    """The network to contract, with its arrays from the file or the seeded draw asked for."""
    from ..network import load_network

    if not os.path.lexists(network):
        raise InvalidInputError(f"no such network file: {network}")
    if random_arrays is not None:
        if arrays is not None:
            raise InvalidInputError("give --arrays FILE.npz or --random-arrays SEED, not both")
        if random_arrays < 0:
            raise InvalidInputError(f"--random-arrays takes a seed >= 0, got {random_arrays}")
        net = _structure_only(network)
        return net.with_random_arrays(random_arrays, dtype or "complex128"), True
    net = load_network(network, arrays)
    if net.arrays is None:
        raise InvalidInputError(
            f"{network} holds only the structure and no {network.with_suffix('.npz').name} lies "
            f"beside it: pass --arrays FILE.npz (arr_0..arr_{net.num_tensors - 1}), or "
            "--random-arrays SEED to contract seeded random arrays"
        )
    return net, False


def _check_npy_path(path: Path) -> None:
    from .._fileio import check_output_target

    if path.suffix != ".npy":
        raise InvalidInputError(f"--output must name a .npy file, got {str(path)!r}")
    check_output_target(path, "--output")


def _number(x: Any) -> dict:
    x = complex(x)
    return {"re": x.real, "im": x.imag}


def contract(
    network: Path = typer.Argument(..., help="cotengra-style JSON network (inputs, output, "
                                   "size_dict)."),
    arrays: Optional[Path] = typer.Option(
        None, "--arrays", help="Arrays arr_0..arr_{n-1} as .npz. Default: NETWORK.npz beside "
        "the JSON; without either the command refuses (see --random-arrays)."),
    random_arrays: Optional[int] = typer.Option(
        None, "--random-arrays", metavar="SEED",
        help="Contract seeded Gaussian random arrays instead (the network's structure only; a "
        "sibling .npz is ignored)."),
    dtype: Optional[NetworkDtype] = NetworkDtypeOpt,
    memory_limit: Optional[str] = MemOpt,
    max_time: Optional[float] = MaxTimeOpt,
    output: Optional[Path] = OutputOpt,
    profile: Optional[str] = ProfileOpt,
    backend: Backend = BackendOpt,
    gemm: str = GemmOpt,
    collectives: Comm = CommOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Contract a cotengra-style JSON network and print the value (or the result's shape).

    A scalar result is printed; an array result is summarised (shape, norm,
    largest magnitude, sum) and written whole with --output FILE.npy.
    Under 'mpiexec -n P' the plan is made on rank 0 and run on all P ranks.
    """
    import numpy as np

    from ..engine import Engine
    from ..engine.networks import ContractOptions, finish
    from ..executors import resolve_executor
    from ..frontends.quimb_network import prepare

    if output is not None:
        _check_npy_path(output)
    check_profile(profile)  # refused before any work, under mpiexec or not
    check_comm(collectives, backend)
    opts = ContractOptions(dtype=dtype, memory_limit=memory_limit, max_time=max_time,
                           executor=resolve_executor("auto"), profile=profile,
                           backend=backend, gemm=gemm, collectives=collectives)
    net, random = load_arrays_network(network, arrays, random_arrays, opts.dtype)
    logger.info("contracting %s: %d tensor(s), %d output index(es), %s arrays on %s",
                network, net.num_tensors, len(net.output),
                f"random:{random_arrays}" if random else "file", backend)
    prepared = prepare(net.arrays, net.inputs, net.output, opts.dtype)
    # one engine for the command, its run resolved once in the network's compute dtype
    engine = Engine(opts.run_options(prepared.compute_dtype))
    values = engine.contract(prepared.network, simplify_sequence=opts.simplify_sequence)
    plan = engine.plan
    logger.info("contracted: %.3e flops, %d slice(s)", plan.stats.flops, plan.stats.n_slices)
    values = finish(values, prepared)
    if engine.run.runner.rank != 0:  # rank 0 reports
        return
    if output is not None:
        from .._fileio import atomic_write

        atomic_write(output, lambda fh: np.save(fh, values, allow_pickle=False))
    source = f"random:{random_arrays}" if random else str(arrays or network.with_suffix(".npz"))
    stats = plan.stats
    report = {
        "network": str(network), "arrays": source, "output": list(net.output),
        "shape": list(values.shape), "dtype": str(values.dtype),
        "file": str(output) if output is not None else None,
        "stats": {"flops": stats.flops, "peak_bytes": stats.peak_bytes,
                  "n_slices": stats.n_slices, "n_steps": stats.n_steps},
    }
    if values.ndim == 0:
        report["value"] = _number(values)
    else:
        report["norm"] = float(np.linalg.norm(values))
        report["max_abs"] = float(np.max(np.abs(values)))
        report["sum"] = _number(values.sum())
    if as_json:
        typer.echo(json.dumps(report))
        return
    if values.ndim == 0:
        x = complex(values)
        text = f"{x.real:+.12e}" if values.dtype.kind != "c" else f"{x.real:+.12e} {x.imag:+.12e}j"
        typer.echo(f"value  {text}")
    else:
        total = complex(report["sum"]["re"], report["sum"]["im"])
        typer.echo(f"shape {tuple(values.shape)}  dtype {values.dtype}  indices "
                   f"{' '.join(net.output)}")
        typer.echo(f"norm {report['norm']:.12e}  max |x| {report['max_abs']:.12e}  sum "
                   f"{total.real:+.12e} {total.imag:+.12e}j")
    if output is not None:
        typer.echo(f"result written to {output}")
    typer.echo(f"# arrays {source}, {stats.flops:.3e} flops, {stats.n_slices} slice(s), "
               f"peak {format_bytes(stats.peak_bytes)}, "
               f"{math.prod(values.shape) if values.ndim else 1} value(s)", err=True)
