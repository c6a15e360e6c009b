"""Collectives between the ranks of an MPI communicator: one interface, two implementations.

The MPI executor's schedule runner moves shards with three collectives: an
all-to-all with a block per peer, an all-gather of equal shards and an
in-place sum. It calls them through a :class:`Collectives` object and does not
know which implementation it holds:

* :class:`MpiCollectives` (``"mpi"``): mpi4py's ``Alltoallv``, ``Allgather`` and
  ``Allreduce`` on host buffers. With CuPy arrays the shards are copied to host
  memory for each collective and back (host-staged).
* :class:`NcclCollectives` (``"nccl"``): NCCL through ``cupy.cuda.nccl`` on device
  buffers. Rank 0 makes the NCCL unique id, MPI broadcasts it, and every rank
  joins the NCCL communicator. The all-to-all is a group of sends and receives
  (``groupStart`` / ``groupEnd``).

:func:`choose_collectives` turns the run's choice (``"auto"``, ``"mpi"``,
``"nccl"``; the CLI's ``--comm``) into one of them, on every rank alike.
``"auto"`` takes NCCL only where the backend is CuPy, every rank has its own
device (no two ranks on one device of one host) and NCCL loads; ``"nccl"``
where that is not so is refused in one line saying why
(:class:`~qsimdist.errors.NcclUnavailableError`).

Buffers and where they live: ``buffer(n)`` gives a flat buffer in the
implementation's memory, ``stage(a)`` puts an array there (a host copy for
host-staged MPI on CuPy, the array itself otherwise), ``unstage(a)`` brings a
buffer back into the run's array module, and ``release`` hands buffers back.

A failure inside NCCL aborts the NCCL communicator and raises
:class:`~qsimdist.errors.ExecutionError` on that rank; the executor then aborts
the MPI job (:func:`qsimdist.executors.liveness.fail_rank`), which ends every rank.

The NCCL implementation has not yet run on a GPU: on the CPU machines it runs
against a stand-in NCCL built on MPI (``tests/array_standin.py``).

Layer 3 (beside the executors); imports numpy and the error tree only, and
mpi4py and cupy inside the functions that need them.
"""

from __future__ import annotations

import os
import socket

import numpy as np

from ..errors import ExecutionError, InvalidInputError, NcclUnavailableError


def mpi_module():
    """``mpi4py.MPI`` (importing it starts MPI); without mpi4py, the one-line error naming
    the extra to install."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        from ..errors import MissingDependencyError

        raise MissingDependencyError(
            f"executor 'mpi' needs mpi4py ({exc}); install it with: pip install 'qsimdist[mpi]'"
        ) from None
    return MPI


def launched_under_mpi() -> bool:
    """Whether this process was started by mpiexec/srun with more than one rank.

    Reads the launcher's environment only (no mpi4py import), so the CLI can
    decide its executor without loading the MPI executor.
    """
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE",
                "MV2_COMM_WORLD_SIZE"):
        value = os.environ.get(var)
        if value and value.isdigit() and int(value) > 1:
            return True
    return False


#: the values ``collectives=`` (the CLI's ``--comm``) takes
COMM_CHOICES = ("auto", "mpi", "nccl")


def check_comm_choice(value) -> str:
    """``value`` if it is one of :data:`COMM_CHOICES`; else the one-line error."""
    if value not in COMM_CHOICES:
        raise InvalidInputError(f"unknown comm {value!r}; valid: {', '.join(COMM_CHOICES)}")
    return value


class Collectives:
    """What the schedule runner calls to move arrays between the ranks of one communicator.

    Counts and displacements are in elements of ``dtype``; buffers are flat and
    C-contiguous. Every method is collective over the communicator unless it
    says otherwise.
    """

    #: the name reported in the run's stats (``RunStats.comm``)
    name = ""

    def __init__(self, xp, pool, dtype) -> None:
        self.xp = xp
        self.pool = pool
        self.dtype = np.dtype(dtype)

    # ------------------------------------------------ buffers (local, not collective)
    def buffer(self, n_items: int):
        """A flat buffer of ``n_items`` elements where this implementation's collectives
        read and write."""
        raise NotImplementedError

    def release(self, *buffers) -> None:
        """Hand buffers from :meth:`buffer` back (those the run's pool holds go back to it)."""
        raise NotImplementedError

    def stage(self, a):
        """``a`` where the collectives read it, C-contiguous (a copy only where needed)."""
        raise NotImplementedError

    def unstage(self, a):
        """A buffer's contents as an array of the run's array module."""
        raise NotImplementedError

    # ------------------------------------------------------------------- collectives
    def alltoallv(self, send, send_counts, send_displs, recv, recv_counts, recv_displs) -> None:
        """Send ``send[send_displs[p]:+send_counts[p]]`` to each rank ``p`` and receive its
        block into ``recv[recv_displs[p]:+recv_counts[p]]``."""
        raise NotImplementedError

    def allgather(self, send, recv) -> None:
        """Every rank's ``send`` (equal sizes), in rank order, into every rank's ``recv``."""
        raise NotImplementedError

    def allreduce(self, buf) -> None:
        """Sum ``buf`` over the ranks, in place."""
        raise NotImplementedError

    def close(self) -> None:
        """Free what the implementation holds (local)."""


class MpiCollectives(Collectives):
    """mpi4py's collectives on host buffers (staged through the host for CuPy arrays).

    Buffers come from the run's pool when the run holds host arrays (numpy);
    for CuPy they are fresh host arrays, and shards are copied each way.
    """

    name = "mpi"

    def __init__(self, comm, xp, pool, dtype) -> None:
        super().__init__(xp, pool, dtype)
        self.comm = comm
        self.pooled = xp is np  # the run's pool holds host memory

    def buffer(self, n_items: int):
        return self.pool.get((n_items,)) if self.pooled else np.empty(n_items, self.dtype)

    def release(self, *buffers) -> None:
        if self.pooled:
            for b in buffers:
                self.pool.put(b)

    def stage(self, a):
        # asarray, not ascontiguousarray: that one turns a 0-d array into shape (1,)
        return np.asarray(a if self.xp is np else self.xp.asnumpy(a), order="C")

    def unstage(self, a):
        return a if self.xp is np else self.xp.asarray(a)

    def alltoallv(self, send, send_counts, send_displs, recv, recv_counts, recv_displs) -> None:
        from mpi4py import MPI

        item = self.dtype.itemsize
        self.comm.Alltoallv(
            [send.view(np.uint8), ([c * item for c in send_counts],
                                   [c * item for c in send_displs]), MPI.BYTE],
            [recv.view(np.uint8), ([c * item for c in recv_counts],
                                   [c * item for c in recv_displs]), MPI.BYTE])

    def allgather(self, send, recv) -> None:
        from mpi4py import MPI

        self.comm.Allgather([send.view(np.uint8), MPI.BYTE], [recv.view(np.uint8), MPI.BYTE])

    def allreduce(self, buf) -> None:
        from mpi4py import MPI

        self.comm.Allreduce(MPI.IN_PLACE, buf)


def device_pointer(a) -> int:
    """The device address of ``a``'s first element (a CuPy array's ``data.ptr``)."""
    return int(a.data.ptr)


class NcclCollectives(Collectives):
    """NCCL between the GPUs of the ranks of ``comm`` (one device per rank), on device buffers.

    ``comm``: the MPI communicator whose ranks form the NCCL communicator (rank
    0 makes the unique id, MPI broadcasts it); collective over ``comm``.
    ``nccl``: the ``cupy.cuda.nccl`` module (default: imported). Complex
    buffers travel as twice as many reals (a sum of complex numbers is the sum
    of their parts), blocks of the all-to-all as bytes. The collectives are
    queued on the current CuPy stream, as the run's other device work is.
    """

    name = "nccl"

    def __init__(self, comm, xp, pool, dtype, nccl=None) -> None:
        super().__init__(xp, pool, dtype)
        self.nccl = nccl if nccl is not None else load_nccl()
        self.size, self.rank = comm.Get_size(), comm.Get_rank()
        self.handle = None
        uid = self.nccl.get_unique_id() if self.rank == 0 else None
        uid = comm.bcast(uid, root=0)
        self.handle = self._call("communicator set-up", self.nccl.NcclCommunicator,
                                 self.size, uid, self.rank)
        real = np.dtype(self.dtype.char.lower()) if self.dtype.kind == "c" else self.dtype
        types = {np.dtype(np.float32): self.nccl.NCCL_FLOAT32,
                 np.dtype(np.float64): self.nccl.NCCL_FLOAT64}
        if real not in types:
            raise InvalidInputError(f"NCCL collectives take complex64, complex128, float32 or "
                                    f"float64 arrays, not {self.dtype}")
        self.real_type = types[real]
        self.reals = 2 if self.dtype.kind == "c" else 1  # reals per element

    def buffer(self, n_items: int):
        return self.pool.get((n_items,))

    def release(self, *buffers) -> None:
        for b in buffers:
            self.pool.put(b)

    def stage(self, a):
        return a if a.flags.c_contiguous else a.copy()  # (a copy is C-ordered)

    def unstage(self, a):
        return a

    def _stream(self) -> int:
        return self.xp.cuda.get_current_stream().ptr

    def _call(self, what: str, fn, *args):
        """``fn(*args)``; any failure aborts the NCCL communicator and raises
        :class:`ExecutionError` naming the collective (the executor then ends every rank)."""
        try:
            out = fn(*args)
            if self.handle is not None:
                self.handle.check_async_error()
            return out
        except Exception as exc:  # noqa: BLE001 - NCCL's and CUDA's errors alike
            self.abort()
            raise ExecutionError(f"NCCL {what} failed ({type(exc).__name__}: {exc})") from exc

    def alltoallv(self, send, send_counts, send_displs, recv, recv_counts, recv_displs) -> None:
        nccl, item, stream = self.nccl, self.dtype.itemsize, self._stream()
        send_at, recv_at = device_pointer(send), device_pointer(recv)

        def exchange() -> None:
            nccl.groupStart()
            try:
                for p in range(self.size):
                    if send_counts[p]:
                        self.handle.send(send_at + send_displs[p] * item, send_counts[p] * item,
                                         nccl.NCCL_UINT8, p, stream)
                    if recv_counts[p]:
                        self.handle.recv(recv_at + recv_displs[p] * item, recv_counts[p] * item,
                                         nccl.NCCL_UINT8, p, stream)
            finally:
                nccl.groupEnd()

        self._call("all-to-all", exchange)

    def allgather(self, send, recv) -> None:
        self._call("all-gather", self.handle.allGather, device_pointer(send),
                   device_pointer(recv), send.size * self.reals, self.real_type, self._stream())

    def allreduce(self, buf) -> None:
        at = device_pointer(buf)
        self._call("all-reduce", self.handle.allReduce, at, at, buf.size * self.reals,
                   self.real_type, self.nccl.NCCL_SUM, self._stream())

    def abort(self) -> None:
        """Abort the NCCL communicator (its pending operations end); local, never raises."""
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                handle.abort()
            except Exception:  # noqa: BLE001 - already failing: the MPI abort follows
                pass

    def close(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.destroy()


def make_collectives(name: str, comm, xp, pool, dtype) -> Collectives:
    """The implementation ``name`` (``"mpi"`` or ``"nccl"``) over ``comm`` (collective)."""
    if name == "nccl":
        return NcclCollectives(comm, xp, pool, dtype)
    if name == "mpi":
        return MpiCollectives(comm, xp, pool, dtype)
    raise InvalidInputError(f"unknown collectives {name!r}; valid: mpi, nccl")


# ------------------------------------------------------------------- selection


def load_nccl():
    """``cupy.cuda.nccl``, or :class:`NcclUnavailableError` saying why it does not load."""
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        raise NcclUnavailableError(f"NCCL does not load: cupy.cuda.nccl does not import "
                                   f"({exc})") from None
    if not getattr(nccl, "available", True):
        raise NcclUnavailableError("NCCL does not load: this CuPy finds no NCCL library "
                                   "(cupy.cuda.nccl.available is False; install NCCL for "
                                   "its CUDA version, e.g. the nvidia-nccl-cu12 package)")
    try:
        nccl.get_version()
    except Exception as exc:  # noqa: BLE001 - a library that is there but does not load
        raise NcclUnavailableError(f"NCCL does not load ({type(exc).__name__}: {exc})") from None
    return nccl


def probe_rank(xp) -> dict:
    """This rank's side of the choice: its host, its current device and what, if
    anything, keeps NCCL from running here (local; ``xp``: the run's array module,
    ``None`` where CuPy is not installed)."""
    info: dict = {"host": socket.gethostname(), "device": None, "no_device": None,
                  "no_nccl": None}
    if xp is None or xp is np:
        info["no_device"] = "cupy is not installed" if xp is None else "the backend is numpy"
        return info
    try:
        if xp.cuda.runtime.getDeviceCount() < 1:
            info["no_device"] = "CuPy sees no CUDA device"
            return info
        info["device"] = int(xp.cuda.Device().id)
    except Exception as exc:  # noqa: BLE001 - any CUDA failure means no usable device
        info["no_device"] = f"no usable CUDA device ({type(exc).__name__}: {exc})"
        return info
    try:
        load_nccl()
    except NcclUnavailableError as exc:
        info["no_nccl"] = str(exc)
    return info


def nccl_refusal(probes: list[dict]) -> str | None:
    """Why NCCL cannot run over ranks whose :func:`probe_rank` answers are ``probes``
    (in rank order), in one line; ``None`` where it can."""
    for r, p in enumerate(probes):
        if p["no_device"]:
            return f"rank {r} has no GPU of its own: {p['no_device']}"
    first: dict = {}
    for r, p in enumerate(probes):
        key = (p["host"], p["device"])
        if key in first:
            return (f"ranks {first[key]} and {r} share device {p['device']} of host "
                    f"{p['host']!r}; NCCL needs one device per rank (launch at most as many "
                    "ranks per host as it has GPUs)")
        first[key] = r
    for r, p in enumerate(probes):
        if p["no_nccl"]:
            return f"rank {r}: {p['no_nccl']}"
    return None


def check_nccl_backend(choice: str, backend: str) -> None:
    """Refuse ``"nccl"`` with a backend other than CuPy (local: the same on every rank)."""
    if choice == "nccl" and backend != "cupy":
        raise NcclUnavailableError(
            f"--comm nccl needs --backend cupy: NCCL moves arrays between GPUs, and backend "
            f"{backend!r} holds them in host memory")


def choose_collectives(choice: str, backend: str, comm, xp) -> str:
    """``"mpi"`` or ``"nccl"`` for a run with ``collectives=choice`` (collective over
    ``comm``: every rank returns, or raises, alike).

    ``"auto"``: NCCL where ``backend`` is ``"cupy"``, every rank of ``comm`` has
    its own device (hostname and device id gathered over MPI) and NCCL loads;
    otherwise host-staged MPI. ``"nccl"`` where one of these fails raises
    :class:`NcclUnavailableError` naming the reason; ``"mpi"`` is always taken.
    """
    check_comm_choice(choice)
    check_nccl_backend(choice, backend)
    if choice == "mpi" or backend != "cupy":
        return "mpi"
    reason = nccl_refusal(comm.allgather(probe_rank(xp)))
    if reason is None:
        return "nccl"
    if choice == "nccl":
        raise NcclUnavailableError(f"--comm nccl cannot run: {reason}")
    return "mpi"


__all__ = ["COMM_CHOICES", "Collectives", "MpiCollectives", "NcclCollectives",
           "check_comm_choice", "check_nccl_backend", "choose_collectives", "load_nccl",
           "make_collectives", "nccl_refusal", "probe_rank"]
