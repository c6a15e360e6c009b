"""Cases run under ``mpiexec -n 2 python tests/comm_cases.py CASE`` by tests/test_comm.py.

* ``interface``: each collective of :class:`MpiCollectives` (NumPy) and of
  :class:`NcclCollectives` (on the CuPy stand-in and its NCCL-on-MPI, two
  "devices") against a NumPy reference; rank 0 prints the largest errors.
* ``executor``: the ``mpi`` executor on a sharded plan whose schedule holds all
  three collectives, for each backend, device count and ``collectives=`` choice
  (the stand-in standing in for CuPy); rank 0 prints, per run, the choice made
  (``stats.comm``) or the refusal, the error against the local NumPy executor,
  the collectives called per implementation and the result's array type.
* ``nccl_fault``: a NCCL failure on rank 1 (the stand-in's ``fail_rank``) inside
  a run with ``collectives="nccl"``: every rank must end (the test checks how).
* ``gpu_interface`` and ``gpu_executor``: the first two on real CuPy and NCCL, for
  ``tests/test_gpu.py`` on a GPU machine (any number of ranks, one included; each
  rank on device ``rank % devices``).
* ``gpu_nccl_shared_device``: whether NCCL itself accepts every rank on device 0
  (qsimdist refuses that before NCCL is asked; this asks NCCL directly).
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import array_standin  # this script runs from tests/, so its neighbours are importable
import numpy as np
from mpi4py import MPI

CASE_PLAN = "circuit:12:8:3:1:1.0:sharded"  # alltoall, allgather and allreduce steps


def _counting() -> Counter:
    """Count every collective call per implementation (class name.method)."""
    from qsimdist.executors import comm as comm_module

    calls: Counter = Counter()
    for cls in (comm_module.MpiCollectives, comm_module.NcclCollectives):
        for name in ("alltoallv", "allgather", "allreduce"):
            original = getattr(cls, name)

            def counted(self, *args, _original=original, _key=f"{cls.name}.{name}"):
                calls[_key] += 1
                return _original(self, *args)

            setattr(cls, name, counted)
    return calls


def interface(standin: bool = True) -> dict:
    from qsimdist.executors.comm import MpiCollectives, NcclCollectives
    from qsimdist.executors.local import BufferPool

    comm = MPI.COMM_WORLD
    size, me = comm.Get_size(), comm.Get_rank()
    dtype = np.dtype(np.complex128)

    def block(p: int, q: int) -> np.ndarray:  # what rank p sends rank q
        n = 1 + 2 * p + 3 * q
        return (np.arange(n) + 100 * p + 1000 * q) * (1 + 0.5j)

    def mine(rank: int) -> np.ndarray:
        return np.arange(5) * (rank + 1) + 1j * rank

    if standin:
        array_standin.install(devices=size, nccl=True)
    import cupy  # the stand-in just installed, or the real one

    cupy.cuda.Device(me % cupy.cuda.runtime.getDeviceCount()).use()
    out = {}
    for impl, xp in (("mpi", np), ("nccl", cupy)):
        pool = BufferPool(xp, dtype)
        coll = (MpiCollectives(comm, xp, pool, dtype) if impl == "mpi"
                else NcclCollectives(comm, xp, pool, dtype))
        errors = {}
        # all-to-all with a block of its own size for each peer (none to itself)
        scount = [0 if q == me else block(me, q).size for q in range(size)]
        rcount = [0 if p == me else block(p, me).size for p in range(size)]
        sdispl = [sum(scount[:q]) for q in range(size)]
        rdispl = [sum(rcount[:p]) for p in range(size)]
        send = coll.buffer(sum(scount))
        for q in range(size):
            if scount[q]:
                send[sdispl[q]:sdispl[q] + scount[q]] = coll.stage(xp.asarray(block(me, q)))
        recv = coll.buffer(sum(rcount))
        recv[...] = 0
        coll.alltoallv(send, scount, sdispl, recv, rcount, rdispl)
        want = np.concatenate([block(p, me) for p in range(size) if p != me])
        errors["alltoallv"] = float(np.abs(_host(coll.unstage(recv)) - want).max())
        # all-gather of equal shards
        part = coll.stage(xp.asarray(mine(me)))
        whole = coll.buffer(size * part.size)
        coll.allgather(part, whole)
        want = np.concatenate([mine(p) for p in range(size)])
        errors["allgather"] = float(np.abs(_host(coll.unstage(whole)) - want).max())
        # in-place sum
        buf = coll.buffer(part.size)
        buf[...] = part
        coll.allreduce(buf)
        want = sum(mine(p) for p in range(size))
        errors["allreduce"] = float(np.abs(_host(coll.unstage(buf)) - want).max())
        errors["buffer_type"] = type(send).__name__
        coll.close()
        out[impl] = errors
    return out


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def plans(nranks: int):
    """(the single-process plan, the same plan with a schedule for ``nranks`` ranks)."""
    sys.path.insert(0, ".")
    from mpi_cases import circuit_plan, make, toy_profile

    if nranks > 1:
        return make(CASE_PLAN, nranks)
    from qsimdist.planner.distribution import schedule, scheduled_plan

    plan = circuit_plan(12, 8, 3, "complex64", 1)
    prof = toy_profile(memory_bytes=2 * int(plan.stats.peak_bytes), devices_per_node=1)
    return plan, scheduled_plan(plan, schedule(plan, prof, 1))


def executor(runs: list[tuple[str, int | None, str]], fail_rank: int | None = None,
             standin: bool = True) -> list[dict]:
    """Each run: (backend, stand-in devices (None: as they are), collectives=)."""
    from qsimdist.errors import QsimdistError
    from qsimdist.executors.mpi import RunStats, execute
    from qsimdist.planner.plan import Plan

    comm = MPI.COMM_WORLD
    base, payload = None, None
    if comm.rank == 0:
        base, sp = plans(comm.size)
        payload = sp.to_dict()
    plan = Plan.from_dict(comm.bcast(payload, root=0), "broadcast plan")
    ref = base.execute() if comm.rank == 0 else None
    if standin:
        array_standin.install(devices=1, nccl=True, fail_rank=fail_rank)
    calls = _counting()
    rows = []
    for backend, devices, choice in runs:
        if devices is not None:
            array_standin.STATE["devices"] = devices
        calls.clear()
        stats = RunStats()
        row = {"backend": backend, "devices": devices, "choice": choice}
        try:
            out = execute(plan, backend=backend, comm=comm, stats=stats, collectives=choice)
        except QsimdistError as exc:  # a refusal every rank met alike
            row["refused"] = str(exc)
            row["error_type"] = type(exc).__name__
            rows.append(row)
            continue
        row["comm"] = stats.comm
        row["ranks_comm"] = comm.allgather(stats.comm)
        row["result_type"] = type(out).__name__
        row["calls"] = dict(calls)
        if comm.rank == 0:
            got = _host(out)
            row["rel_err"] = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        rows.append(row)
    return rows


def nccl_shared_device() -> dict:
    """Every rank on device 0, one NCCL communicator, one all-reduce: accepted or not."""
    import cupy
    from cupy.cuda import nccl

    comm = MPI.COMM_WORLD
    cupy.cuda.Device(0).use()
    uid = comm.bcast(nccl.get_unique_id() if comm.rank == 0 else None, root=0)
    try:
        handle = nccl.NcclCommunicator(comm.size, uid, comm.rank)
        buf = cupy.ones(4, dtype=cupy.float32)
        handle.allReduce(buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                         cupy.cuda.get_current_stream().ptr)
        cupy.cuda.get_current_stream().synchronize()
        mine = {"accepted": True, "sum_ok": bool((buf == comm.size).all())}
    except Exception as exc:  # noqa: BLE001 - NCCL's answer is the result
        mine = {"accepted": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ranks": comm.size, "device": 0, "per_rank": comm.allgather(mine)}


def main() -> None:
    case = sys.argv[1]
    comm = MPI.COMM_WORLD
    if case == "interface":
        result = interface()
    elif case == "executor":
        result = executor([("numpy", 0, "auto"), ("numpy", 0, "nccl"),
                           ("cupy", 2, "auto"), ("cupy", 2, "mpi"), ("cupy", 2, "nccl"),
                           ("cupy", 1, "auto"), ("cupy", 1, "nccl")])
    elif case == "nccl_fault":
        result = executor([("cupy", 2, "nccl")], fail_rank=1)
    elif case == "gpu_interface":
        result = interface(standin=False)
    elif case == "gpu_executor":
        result = executor([("cupy", None, "auto"), ("cupy", None, "mpi"),
                           ("cupy", None, "nccl"), ("numpy", None, "auto")], standin=False)
    elif case == "gpu_nccl_shared_device":
        result = nccl_shared_device()
    else:
        raise SystemExit(f"unknown case {case}")
    if comm.rank == 0:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
