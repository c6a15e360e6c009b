"""Measure this machine and turn the numbers into a :class:`HardwareProfile`.

What is measured (each the best of several timed runs after a warm-up):

- GEMM rate per dtype: ``numpy.matmul`` of two n x n complex matrices,
  ``8 n^3`` real FLOPs (n = 2048; 512 in quick mode).
- Memory bandwidth: ``numpy.copyto`` of a large buffer (256 MiB; 32 MiB in
  quick mode), counting bytes read plus bytes written, as vendors quote HBM.
- Memory size: physical memory from ``os.sysconf`` (capped by a cgroup limit
  when one is set), divided among the ranks sharing a node.
- Only under MPI with more than one rank: ``Alltoall`` on large buffers
  (bandwidth per device) and on 8-byte messages (latency per message), inside
  a node and across all ranks. Every rank measures at the same time (so the
  rates are what each device gets under full load, the slowest rank counts),
  rank 0 assembles the profile and broadcasts it, so every rank returns the
  same profile and ends on the same collective.

Without MPI the interconnect is not measured: intra- and inter-node
bandwidth are set to the measured copy bandwidth, latency to 1 us, and the
profile's ``notes`` say so.

``mpi4py`` is imported only when a communicator is needed (importing
``mpi4py.MPI`` starts MPI).

Example:
    >>> from qsimdist.hardware.calibrate import calibrate
    >>> profile = calibrate("laptop", quick=True)
"""

from __future__ import annotations

import math
import os
import platform
import time
from typing import Any

import numpy as np

from .._optional import require
from ..config import DTYPES
from ..errors import ProfileError
from . import costs
from .profiles import HardwareProfile

#: environment variables in which MPI launchers publish the number of ranks
_MPI_SIZE_VARS = (
    "OMPI_COMM_WORLD_SIZE",  # Open MPI
    "PMI_SIZE",  # MPICH (Hydra), Intel MPI, Slurm PMI
    "MV2_COMM_WORLD_SIZE",  # MVAPICH
    "MPI_LOCALNRANKS",  # MPICH: ranks on this node
)

_MiB = 1 << 20
_SETTINGS = {
    # quick -> GEMM n, copy bytes, all-to-all bytes per rank, repeats, latency repeats
    False: {"gemm_n": 2048, "copy_bytes": 256 * _MiB, "a2a_bytes": 64 * _MiB, "repeats": 3,
            "lat": 20},
    True: {"gemm_n": 512, "copy_bytes": 32 * _MiB, "a2a_bytes": 8 * _MiB, "repeats": 5,
           "lat": 10},
}


def mpi_world_size_from_env() -> int:
    """The number of MPI ranks announced by the launcher's environment (1 without one)."""
    size = 1
    for var in _MPI_SIZE_VARS:
        try:
            size = max(size, int(os.environ.get(var, "1")))
        except ValueError:
            continue
    return size


def _elapsed(start: float) -> float:
    # guard against a zero reading from a coarse clock
    return max(time.perf_counter() - start, 1e-9)


def measure_gemm_rate(dtype: str, n: int, repeats: int = 3) -> float:
    """Real FLOP/s of ``numpy.matmul`` on two ``n`` x ``n`` matrices of ``dtype`` (best run)."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(dtype)
    b = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(dtype)
    c = np.empty_like(a)
    np.matmul(a, b, out=c)  # warm-up: threads, page faults
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.matmul(a, b, out=c)
        best = min(best, _elapsed(start))
    return 8.0 * n**3 / best


def measure_copy_bandwidth(nbytes: int, repeats: int = 3) -> float:
    """Bytes read plus written per second by ``numpy.copyto`` of ``nbytes`` (best run)."""
    src = np.ones(max(nbytes // 8, 1), dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # warm-up: touches every page of dst
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, _elapsed(start))
    return 2.0 * src.nbytes / best


def _best_seconds(run, repeats: int) -> float:
    run()  # warm-up: threads, page faults
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, _elapsed(start))
    return best


def _complex64(rng, shape) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _efficiency(h: float, m: int, n: int, k: int) -> float:
    return (m / (m + h)) * (n / (n + h)) * (k / (k + h))


def _half_for(eff: float, m: int, n: int, k: int) -> float:
    """The ``h`` at which the efficiency ``m/(m+h) n/(n+h) k/(k+h)`` equals ``eff``
    (bisection on a log scale; clamped to [1e-3, 1e4])."""
    lo, hi = 1e-3, 1e4
    if eff >= _efficiency(lo, m, n, k):
        return lo
    if eff <= _efficiency(hi, m, n, k):
        return hi
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if _efficiency(mid, m, n, k) > eff:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


#: thin GEMM shapes (m, n, k) the efficiency half-point is fitted on: operands of the
#: kinds a circuit's plan multiplies (a few rows or a short inner extent)
_THIN_SHAPES = ((4, 256, 64), (16, 512, 8), (8, 1024, 16), (32, 128, 32), (64, 64, 4))


def measure_local_costs(quick: bool = False, repeats: int | None = None) -> costs.LocalCosts:
    """Fit the single-device kernel choice's BLAS and copy prices to this machine.

    Measured, each the best of ``repeats`` runs after a warm-up (complex64):

    - ``call``: one inner GEMM of a broadcast ``numpy.matmul`` of 2 x 2 matrices
      (the time per matrix of 4,096 of them);
    - ``flop`` and ``gemm_half``: a large square GEMM and five thin ones
      (:data:`_THIN_SHAPES`, each in a broadcast batch as plans run them), fitted to
      the model :meth:`LocalCosts.gemm_seconds` prices with (``flop`` per real FLOP at
      full efficiency, ``gemm_half`` the extent at which one dimension halves it);
    - ``copy_byte``: a contiguous copy, seconds per byte of the array;
    - ``permute_byte``: a copy reversing the axes of a ``(2,) * 22`` tensor (runs of one
      element), seconds per byte.

    The compiled loop's and the tiled kernel's constants keep their defaults (they were
    fitted on step shapes of whole plans; see :class:`~qsimdist.hardware.costs.LocalCosts`).
    """
    repeats = repeats or (3 if quick else 5)
    rng = np.random.default_rng(0)
    batch = 4096
    a, b = _complex64(rng, (batch, 2, 2)), _complex64(rng, (batch, 2, 2))
    out = np.empty_like(a)
    call = _best_seconds(lambda: np.matmul(a, b, out=out), repeats) / batch
    n = 512 if quick else 1024
    big_a, big_b = _complex64(rng, (n, n)), _complex64(rng, (n, n))
    big_out = np.empty_like(big_a)
    t_big = _best_seconds(lambda: np.matmul(big_a, big_b, out=big_out), repeats)
    thin = []
    for m, nn, k in _THIN_SHAPES:
        # a broadcast batch of them, as plans run them: the time per GEMM
        calls = max(1, (1 << 22) // (8 * m * nn * k))
        x, y = _complex64(rng, (calls, m, k)), _complex64(rng, (calls, k, nn))
        z = np.empty((calls, m, nn), np.complex64)
        thin.append(((m, nn, k), _best_seconds(lambda x=x, y=y, z=z: np.matmul(x, y, out=z),
                                                repeats) / calls))
    half = costs.DEFAULT_COSTS.gemm_half
    flop = t_big / (8.0 * n**3)
    for _ in range(3):  # the large GEMM's efficiency depends on the half-point, and back
        flop = t_big * _efficiency(half, n, n, n) / (8.0 * n**3)
        halves = [_half_for(8.0 * m * nn * k * flop / max(t - call, 1e-12), m, nn, k)
                  for (m, nn, k), t in thin]
        half = sorted(halves)[len(halves) // 2]  # the median: one odd shape does not rule
    nbytes = (16 if quick else 64) * _MiB
    src = np.ones(nbytes // 8, dtype=np.complex64)
    dst = np.empty_like(src)
    copy_byte = _best_seconds(lambda: np.copyto(dst, src), repeats) / src.nbytes
    qubits = 20 if quick else 22
    tensor = _complex64(rng, (1 << qubits,)).reshape((2,) * qubits)
    moved = np.empty_like(tensor)
    perm = tuple(reversed(range(qubits)))
    permute_byte = _best_seconds(lambda: np.copyto(moved, tensor.transpose(perm)),
                                 repeats) / tensor.nbytes
    import dataclasses

    return dataclasses.replace(costs.DEFAULT_COSTS, call=call, flop=flop, gemm_half=half,
                               copy_byte=copy_byte, permute_byte=permute_byte)


def physical_memory() -> int:
    """Bytes of physical memory, capped by a cgroup memory limit when one is set."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        raise ProfileError("cannot read this machine's memory size (os.sysconf)") from None
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as fh:
                limit = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if 0 < limit < total:
            total = limit
    return int(total)


def _alltoall_seconds(comm: Any, chunk_bytes: int, repeats: int, mpi: Any) -> float:
    """Best of ``repeats`` runs of the slowest rank's time for an ``Alltoall`` (bytes per peer)."""
    size = comm.Get_size()
    send = np.ones(chunk_bytes * size, dtype=np.uint8)
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)  # warm-up: connections, registration
    best = math.inf
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        comm.Alltoall(send, recv)
        best = min(best, comm.allreduce(_elapsed(start), op=mpi.MAX))
    return best


def _measure_alltoall(comm: Any, total_bytes: int, s: dict, mpi: Any) -> tuple[float, float]:
    """(bandwidth B/s per device, latency s per message) of ``Alltoall`` on ``comm``."""
    p = comm.Get_size()
    chunk = max(total_bytes // p, 1)
    big = _alltoall_seconds(comm, chunk, s["repeats"], mpi)
    tiny = _alltoall_seconds(comm, 8, s["lat"], mpi)
    # each device sends (p - 1) chunks to its peers; a tiny exchange is p - 1 messages
    return chunk * (p - 1) / big, tiny / (p - 1)


def calibrate(
    name: str = "calibrated", *, quick: bool = False, comm: Any = None
) -> HardwareProfile:
    """Measure this machine (and its interconnect under MPI) and return its profile.

    Args:
        name: The profile's name.
        quick: Smaller problems (about a second in all); less accurate numbers.
        comm: An mpi4py communicator. Default: ``MPI.COMM_WORLD`` when the
            process was started by an MPI launcher with more than one rank,
            else no MPI at all.

    Returns:
        The same profile on every rank.
    """
    if not isinstance(name, str) or not name.strip():
        raise ProfileError(f"profile name must be a non-empty string, got {name!r}")
    s = _SETTINGS[bool(quick)]
    mpi = None
    if comm is None and mpi_world_size_from_env() > 1:
        mpi = require("mpi4py.MPI")
        comm = mpi.COMM_WORLD
    size = 1 if comm is None else comm.Get_size()
    if comm is not None and size > 1 and mpi is None:
        mpi = require("mpi4py.MPI")

    rates = {dtype: measure_gemm_rate(dtype, s["gemm_n"], s["repeats"]) for dtype in DTYPES}
    copy_bw = measure_copy_bandwidth(s["copy_bytes"], s["repeats"])
    memory = physical_memory()
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    host = f"{os.cpu_count()}-core {platform.machine()} {platform.system()} host"
    what = (
        f"measured by qsimdist calibrate{' --quick' if quick else ''} on {when}: numpy matmul "
        f"{s['gemm_n']}x{s['gemm_n']} and np.copyto of {s['copy_bytes'] // _MiB} MiB "
        f"(best of {s['repeats']}), memory from os.sysconf"
    )
    notes = ["mem_bandwidth counts bytes read plus bytes written per second."]

    if size <= 1:
        fields: dict[str, Any] = {
            "description": f"{host} with {memory / 2**30:.1f} GiB, one process",
            "devices_per_node": 1,
            "max_nodes": 1,
            "memory_bytes": memory,
            "intra_bandwidth": copy_bw,
            "intra_latency": costs.UNMEASURED_LATENCY,
            "inter_bandwidth": copy_bw,
            "inter_latency": costs.UNMEASURED_LATENCY,
        }
        notes.append(
            "Interconnect not measured (no MPI): intra/inter bandwidth are the copy bandwidth "
            f"and latency is an assumed {costs.UNMEASURED_LATENCY:g} s. Run under "
            "'mpiexec -n 2 qsimdist calibrate ...' to measure them."
        )
    else:
        # the slowest rank sets each rate: all ranks work at once in a distributed run
        rates = {k: comm.allreduce(v, op=mpi.MIN) for k, v in rates.items()}
        copy_bw = comm.allreduce(copy_bw, op=mpi.MIN)
        node = comm.Split_type(mpi.COMM_TYPE_SHARED)
        try:
            local = node.Get_size()
            n_nodes = comm.allreduce(1 if node.Get_rank() == 0 else 0, op=mpi.SUM)
            per_device = comm.allreduce(memory // local, op=mpi.MIN)
            if local > 1:
                intra_bw, intra_lat = _measure_alltoall(node, s["a2a_bytes"], s, mpi)
                intra_bw = comm.allreduce(intra_bw, op=mpi.MIN)
                intra_lat = comm.allreduce(intra_lat, op=mpi.MAX)
            else:
                intra_bw, intra_lat = copy_bw, costs.UNMEASURED_LATENCY
                notes.append("One rank per node: intra-node values not measured (copy bandwidth).")
        finally:
            node.Free()
        if n_nodes > 1:
            inter_bw, inter_lat = _measure_alltoall(comm, s["a2a_bytes"], s, mpi)
        else:
            inter_bw, inter_lat = intra_bw, intra_lat
        local = comm.allreduce(local, op=mpi.MIN)
        what += f", MPI Alltoall over {size} ranks on {n_nodes} node(s)"
        notes.append(
            f"Measured with {local} rank(s) per node sharing this host's cores and memory "
            "(memory_bytes is the node's memory divided by the ranks on it). Latency is the "
            "time of an 8-byte Alltoall divided by the p - 1 messages each rank sends."
        )
        if n_nodes == 1:
            notes.append("One node: inter-node values equal the intra-node ones.")
        fields = {
            "description": f"{host}, {size} MPI rank(s) on {n_nodes} node(s)",
            "devices_per_node": local,
            "max_nodes": 1 if n_nodes == 1 else None,
            "memory_bytes": per_device,
            "intra_bandwidth": intra_bw,
            "intra_latency": intra_lat,
            "inter_bandwidth": inter_bw,
            "inter_latency": inter_lat,
        }

    profile = HardwareProfile(
        name=name,
        source=what,
        notes=" ".join(notes),
        usable_memory_fraction=0.8,
        flops=rates,
        mem_bandwidth=copy_bw,
        **fields,
    )
    if size > 1:
        # rank 0 reports; every rank returns its profile and ends on this collective
        profile = comm.bcast(profile if comm.Get_rank() == 0 else None, root=0)
    return profile


def fit_profile(base, steps: list[dict], dtype: str = "complex64", name: str | None = None):
    """A profile refitted from measured steps of distributed runs (``--trace`` files).

    Each step row gives ``measured_s`` (seconds per slice on the slowest rank),
    ``flops_per_device``, ``sent_bytes``, ``messages`` and ``pack_bytes``. A
    non-negative least-squares fit of
    ``measured = flops / F + overhead + sent / B_link + messages * latency
    + pack_bytes / B_mem`` gives the GEMM rate actually reached, the fixed
    cost per step, the link bandwidth and latency; a coefficient the rows do
    not determine (no communication measured, say) keeps ``base``'s value.
    The fit minimises absolute errors, so the steps that dominate a run's
    time dominate the fit (what a predicted total needs).
    """
    import dataclasses

    import numpy as np
    from scipy.optimize import nnls

    rows = [s for s in steps if s.get("measured_s", 0) > 0]
    if len(rows) < 4:
        from ..errors import InvalidInputError

        raise InvalidInputError(f"a fit needs at least 4 measured steps, got {len(rows)}")
    cols = ("flops_per_device", "ones", "sent_bytes", "messages", "pack_bytes")
    a = np.array([[float(s.get(c, 1.0 if c == "ones" else 0.0)) for c in cols] for s in rows])
    t = np.array([s["measured_s"] for s in rows])
    w = np.ones_like(t)
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    coef, _ = nnls(a / scale * w[:, None], t * w)
    coef = coef / scale
    inv_flop, overhead, inv_bw, latency, inv_mem = coef
    flops = dict(base.flops)
    if inv_flop > 0:
        ratio = (1.0 / inv_flop) / base.flops[dtype]
        flops = {k: v * ratio for k, v in base.flops.items()}
    changes = {"flops": flops, "step_overhead": float(overhead),
               "name": name or f"{base.name}-fitted",
               "source": f"fitted by qsimdist calibrate from {len(rows)} measured steps",
               "notes": base.notes}
    if inv_bw > 0 and a[:, 2].any():
        changes["intra_bandwidth"] = changes["inter_bandwidth"] = 1.0 / inv_bw
    if a[:, 3].any():
        changes["intra_latency"] = changes["inter_latency"] = float(latency)
    if inv_mem > 0 and a[:, 4].any():
        changes["mem_bandwidth"] = 2.0 / inv_mem  # a pack reads and writes each byte
    return dataclasses.replace(base, **changes)


def fit_from_traces(base, paths, name: str):
    """:func:`fit_profile` over the steps of ``run --trace`` files (validated as they are read)."""
    import json

    from .._fileio import read_input_text
    from ..errors import InvalidInputError

    steps, dtypes = [], set()
    for path in paths:
        text = read_input_text(path, "a qsimdist trace", InvalidInputError)
        try:
            data = json.loads(text)
            if data.get("schema") != "qsimdist.trace":
                raise ValueError("field 'schema' is not 'qsimdist.trace'")
            rows = [{k: float(r[k]) for k in ("flops_per_device", "sent_bytes", "messages",
                                               "pack_bytes", "measured_s")}
                    for r in data["steps"]]
            dtypes.add(str(data["dtype"]))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise InvalidInputError(f"{path}: not a qsimdist trace ({exc})") from None
        steps.extend(rows)
    if len(dtypes) != 1:
        raise InvalidInputError(f"traces mix dtypes {sorted(dtypes)}; fit one dtype at a time")
    return fit_profile(base, steps, dtypes.pop(), name)
