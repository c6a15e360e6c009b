"""What the ``qsimdist`` commands share: their options, progress, output and MPI checks."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, Optional

import typer

from ..config import DTYPES, ORDERS
from ..errors import InvalidInputError
from ..executors import COMM_CHOICES

CircuitArg = typer.Argument(
    ..., help="Circuit file (.qasm OpenQASM 2/3, .qasm3, .qsim) or network (.json + .npz)."
)

# The options every command that takes them shares: one name, one type, one default and one
# help text each (tests/test_cli_grammar.py checks every command against these objects).

#: array libraries the executors run on
BACKENDS = ("numpy", "cupy")
#: how ranks exchange arrays under mpiexec (``--comm``; the Python keyword is ``collectives=``,
#: ``comm=`` being the MPI communicator there)
COMMS = COMM_CHOICES
#: real dtypes ``contract`` also takes (they compute in the complex dtype of their precision)
REAL_DTYPES = ("float32", "float64")


def _choice(values: tuple[str, ...]):
    """The annotation that makes an option a choice of ``values``: ``Literal[values]``, which
    typer >= 0.19 turns into a choice (its help lists the values; a bad value is a usage
    error). Older typers take ``str``, and the command checks the value itself.

    (``click_type=click.Choice(...)`` is no way round: typer 0.2x vendors its own click,
    whose parser does not catch the errors of the installed click's ``Choice``.)
    """
    try:
        major, minor = (int(x) for x in typer.__version__.split(".")[:2])
    except ValueError:
        return Literal[values]  # a development version: assume a recent one
    return Literal[values] if (major, minor) >= (0, 19) else str


Dtype = _choice(DTYPES)
NetworkDtype = _choice(DTYPES + REAL_DTYPES)
Order = _choice(ORDERS)
Backend = _choice(BACKENDS)
Comm = _choice(COMMS)

OutputOpt = typer.Option(
    None, "--output", "-o",
    help="Write the result to this file (the command's description says what it holds).",
)
JsonOpt = typer.Option(
    False, "--json",
    help="Print machine-readable JSON on stdout instead of text; an error is then one JSON "
    "object on stderr.",
)
DtypeOpt = typer.Option(
    "complex64", "--dtype",
    help="Working precision: complex64 (about 7 significant digits) or complex128 (about 16, "
    "twice the memory).",
)
OrderOpt = typer.Option(
    "qiskit", "--order",
    help="Character order of bitstrings and Pauli labels: qiskit (the rightmost character is "
    "(qu)bit 0) or natural (character i is (qu)bit i).",
)
ProfileOpt = typer.Option(
    None, "--profile",
    help="Hardware profile (a name from 'qsimdist profiles', or a .toml file) plans are made "
    "for: under mpiexec the distributed plan (default local-cpu; --memory-limit is then per "
    "rank); 'plan' predicts a distribution on it, 'search' scores trees on it.",
)
MemOpt = typer.Option(
    None, "--memory-limit",
    help="Peak memory allowed, e.g. 8GiB: plans slice to fit it, and one that cannot fit is "
    "refused. 'none': no slicing (bounded by physical memory + swap). Default: 80% of the "
    "memory available now ($QSIMDIST_MEMORY_LIMIT overrides). Under mpiexec: per rank; with "
    "a profile to plan for ('plan --profile', 'search'): per device, default the profile's.",
)
BackendOpt = typer.Option(
    "numpy", "--backend",
    help="Array library: numpy (CPU) or cupy (NVIDIA GPU; install the gpu extra).",
)
#: ``contract`` alone: a network's arrays may be real, and their own dtype is the default
NetworkDtypeOpt = typer.Option(
    None, "--dtype",
    help="complex64, complex128, float32 or float64 (real ones compute in the complex dtype "
    "of the same precision and need real arrays). Default: the arrays' own dtype (random "
    "arrays: complex128).",
)
CommOpt = typer.Option(
    "auto", "--comm",
    help="Under mpiexec: how ranks exchange arrays. auto: NCCL where --backend cupy, every "
    "rank has a GPU of its own and NCCL loads, else MPI; mpi: MPI collectives (staged through "
    "host memory for cupy); nccl: NCCL between the GPUs, refused in one line where it cannot "
    "run. The stats name the choice ('comm'). The NCCL path has not yet run on a GPU.",
)
MaxTimeOpt = typer.Option(None, "--max-time", help="Path search budget in seconds.")
RepeatsOpt = typer.Option(None, "--max-repeats", help="Path search trials.")
GemmOpt = typer.Option(
    "complex", "--gemm",
    help="How BLAS steps multiply: complex (default); 3m (three real GEMMs on steps whose m, "
    "n and k all reach 64: a quarter fewer FLOPs there; on a random 3-regular network the "
    "error against complex128 measured 1.6e-6 instead of 9.1e-7); tf32, 3m-tf32 (--backend "
    "cupy, complex64: cuBLAS's TF32 compute type, less accurate).",
)
#: ``plan`` and ``search``: the one pattern their network is made for
BitstringOpt = typer.Option(
    None, "--bitstring", "-b", help="Bitstring pattern (* = open). Default: all zeros."
)


# Options several commands take with one spelling and default, whose help says what the
# option does in that command (the devices it plans or scores for, the tree it starts from).

def devices_opt(help: str):
    """``--devices P``: how many devices of ``--profile`` (default: one node)."""
    return typer.Option(None, "--devices", help=help)


def tree_opt(help: str):
    """``--tree FILE``: a contraction tree or path given instead of a search's own."""
    return typer.Option(None, "--tree", help=help)


def reuse_opt(help: str):
    """``--reuse``: each group keeps step outputs across slices where memory allows."""
    return typer.Option(False, "--reuse", help=help)


def method_opt(help: str):
    """``--method``: the route, ``auto`` being the router's cheapest."""
    return typer.Option("auto", "--method", help=help)


def seed_opt(default: Optional[int], help: str):
    """``--seed``: the seed of the command's random choices."""
    return typer.Option(default, "--seed", help=help)


# The options of ``qsimdist`` itself, before the command

def print_version(value: bool) -> None:
    """``--version``: print the version and stop."""
    if value:
        from .. import __version__

        typer.echo(__version__)
        raise typer.Exit()


VersionOpt = typer.Option(False, "--version", callback=print_version, is_eager=True,
                          help="Print the version and exit.")
VerboseOpt = typer.Option(0, "--verbose", "-v", count=True, metavar="", show_default=False,
                          help="Log the main stages on stderr; -vv: with details.")


def check_profile(profile: Optional[str]):
    """The hardware profile ``profile`` names (``None``: none given), checked before any work.

    An unknown name is refused in one line listing the valid ones, whether or not the
    command runs under mpiexec (where every rank refuses it alike).
    """
    if profile is None:
        return None
    from ..errors import ProfileError
    from ..hardware import load_profile

    try:
        return load_profile(profile)
    except ProfileError as exc:
        path_like = profile.endswith(".toml") or "/" in profile or os.sep in profile
        if under_mpi() and not path_like:  # the bundled names are the same on every rank
            from ..executors import mark_collective

            raise mark_collective(exc) from None
        raise


def check_comm(collectives: str, backend: str) -> str:
    """``--comm`` checked before any work: a value outside auto/mpi/nccl (older typers take
    any string), or ``nccl`` without mpiexec or without ``--backend cupy``, is refused in
    one line (under mpiexec on every rank alike). Whether each rank has a GPU of its own
    and NCCL loads is checked when the plan runs."""
    from ..errors import NcclUnavailableError
    from ..executors import check_comm_choice, check_nccl_backend

    try:
        check_comm_choice(collectives)
        if collectives == "nccl" and not under_mpi():
            raise NcclUnavailableError("--comm nccl exchanges arrays between MPI ranks; launch "
                                       "under mpiexec with several ranks (one GPU each)")
        check_nccl_backend(collectives, backend)
    except InvalidInputError as exc:
        if under_mpi():  # the same arguments on every rank: every rank refuses alike
            from ..executors import mark_collective

            raise mark_collective(exc) from None
        raise
    return collectives


def fail(msg: str) -> None:
    """Refuse the command's input: one line (or one JSON object under --json), exit code 2."""
    raise InvalidInputError(msg)


@contextmanager
def progress_bar(label: str):
    """A progress callback drawing a bar on stderr when it is a terminal (else silent)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(*args) -> None:
            done, total = args[-2], args[-1]
            bar.update(task, completed=done, total=total)

        yield update


#: amplitudes formatted and written per block, so output memory stays bounded
BLOCK = 1 << 12


def output_fault(out=None) -> None:
    """Under mpiexec, the fault injected ``at=output`` (after the first block is written)."""
    if "mpi4py.MPI" in sys.modules and os.environ.get("QSIMDIST_FAULT_INJECT"):
        from ..executors import fault_point

        if out is not None:
            out.flush()
        fault_point("output", sys.modules["mpi4py.MPI"].COMM_WORLD)


def write_amplitudes(chunks, header: dict, stats: dict, as_json: bool, with_p: bool) -> None:
    """Stream (bitstrings, amplitudes) blocks to stdout as text lines or one JSON object.

    Nothing holds more than one block of strings, whatever the number of amplitudes.
    """
    import numpy as np

    out = sys.stdout
    if as_json:
        head = json.dumps(header)
        out.write(head[:-1] + (", " if header else "") + '"amplitudes": [')
        first = True
        for labels, vals in chunks:
            re_, im_ = vals.real.tolist(), vals.imag.tolist()
            if np.isfinite(vals).all():  # labels are 0/1/digits; repr(float) is JSON's number
                body = ", ".join(f'{{"bitstring": "{b}", "re": {r!r}, "im": {i!r}}}'
                                 for b, r, i in zip(labels, re_, im_))
            else:
                body = ", ".join(json.dumps({"bitstring": b, "re": r, "im": i})
                                 for b, r, i in zip(labels, re_, im_))
            if body:
                out.write(body if first else ", " + body)
                if first:
                    output_fault(out)
                first = False
        out.write('], "stats": ' + json.dumps(stats) + "}\n")
        out.flush()
        return
    for labels, vals in chunks:
        re_, im_ = vals.real.tolist(), vals.imag.tolist()
        if with_p:
            lines = [f"{b}  {r:+.8e} {i:+.8e}j  p={r * r + i * i:.6e}"
                     for b, r, i in zip(labels, re_, im_)]
        else:
            lines = [f"{b}  {r:+.8e} {i:+.8e}j" for b, r, i in zip(labels, re_, im_)]
        if lines:
            out.write("\n".join(lines) + "\n")
            output_fault(out)
    out.flush()


def check_output_path(path: Path, option: str) -> None:
    """Refuse, before any long work, an output path that cannot be a file."""
    from .._fileio import check_output_target

    check_output_target(path, option)


def read_bitstrings(bitstrings: list[str], bitstrings_file: Optional[Path]) -> list[str]:
    from .._fileio import read_input_text

    out = list(bitstrings)
    if bitstrings_file is not None:
        # regular files only (a FIFO never blocks), size-capped, one-line errors
        text = read_input_text(bitstrings_file, "bitstrings", InvalidInputError)
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line.split()[0])
    return out


def under_mpi() -> bool:
    """Started by mpiexec with more than one rank."""
    from ..executors import launched_under_mpi

    return launched_under_mpi()


#: where launchers (MPICH/Hydra, Open MPI, PMIx, MVAPICH) put a process's rank
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")


def rank() -> int:
    """This process's MPI rank: ``COMM_WORLD``'s once MPI runs; before that, under
    mpiexec, the one the launcher set in the environment (so an error met before MPI
    starts is printed by rank 0 alone); else 0."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank()
    if under_mpi():
        for var in _RANK_VARS:
            value = os.environ.get(var, "")
            if value.isdigit():
                return int(value)
    return 0
