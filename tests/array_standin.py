"""A stand-in for CuPy built on NumPy, so that CuPy code paths run and are checked on a CPU.

:func:`install` puts a module named ``cupy`` (with ``cupy.cuda``, and on request
``cupy.cuda.nccl``) in ``sys.modules``: ``array_module("cupy")`` and
``from cupy.cuda import nccl`` then find it. It claims nothing about a GPU; it
catches host arrays slipping into a device run:

* its arrays are :class:`DeviceArray`, a NumPy subclass that owns its memory;
* like CuPy, a device array refuses to meet a plain ``numpy.ndarray`` (host
  memory): a ufunc, a NumPy function or an assignment that mixes the two raises
  ``TypeError``, and so does any function of the stand-in given a host array,
  except ``asarray``/``array`` (the copy to the device); ``asnumpy`` or ``.get()``
  is the way back;
* ``cuda.runtime.getDeviceCount()`` answers :data:`STATE` ``["devices"]``, and
  ``cuda.Device(i).use()`` sets the current device;
* the NCCL stand-in (``install(nccl=True)``) runs NCCL's calls on MPI: a
  communicator is a split of ``MPI.COMM_WORLD`` keyed by its unique id, buffers
  are read at their addresses (``a.data.ptr``), and a group of sends and
  receives runs at ``groupEnd``. ``STATE["fail_rank"]`` makes that world rank's
  collectives raise ``NcclError`` (a failure inside NCCL).
"""

from __future__ import annotations

import ctypes
import os
import sys
import types

import numpy as np

#: the stand-in's settings, read at each call
STATE: dict = {"devices": 1, "current": 0, "fail_rank": None}


class HostArrayError(TypeError):
    """A host (NumPy) array met a device array."""


class _Pointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


def _is_host(x) -> bool:
    return type(x) is np.ndarray


def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _leaves(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _leaves(x)
    else:
        yield obj


def _refuse_host(objs, where: str) -> None:
    for x in _leaves(objs):
        if _is_host(x):
            raise HostArrayError(f"{where}: a NumPy array (host memory, shape {x.shape}) met a "
                                 "device array; copy it with cupy.asarray first")


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, DeviceArray) else x


def to_device(x):
    """``x`` as a DeviceArray that owns its memory (a copy unless it is one already)."""
    if isinstance(x, DeviceArray):
        return x
    if isinstance(x, np.ndarray):
        out = DeviceArray(x.shape, x.dtype)
        np.copyto(out.view(np.ndarray), x)
        return out
    if isinstance(x, tuple):
        return tuple(to_device(v) for v in x)
    return x


class DeviceArray(np.ndarray):
    """An array "on the device": NumPy memory that refuses to meet host arrays."""

    @property
    def data(self):  # CuPy: a memory pointer whose ``ptr`` is the address
        return _Pointer(self.ctypes.data)

    def get(self):
        return np.array(self.view(np.ndarray), copy=True)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        where = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        _refuse_host(inputs, where)
        if out is not None:
            _refuse_host(out, where)
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return to_device(result)

    def __array_function__(self, func, types_, args, kwargs):
        _refuse_host((args, kwargs), f"numpy.{func.__name__}")
        return to_device(super().__array_function__(func, types_, args, kwargs))

    def __setitem__(self, key, value) -> None:
        if _is_host(value):
            raise HostArrayError(f"a NumPy array (host memory, shape {value.shape}) assigned "
                                 "into a device array; copy it with cupy.asarray first")
        super().__setitem__(key, value)


# ----------------------------------------------------------------- the module


def asarray(a, dtype=None, order=None):
    if isinstance(a, DeviceArray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    return to_device(np.asarray(_plain(a), dtype=dtype, order=order))


def array(a, dtype=None, copy=True, order="K"):
    return to_device(np.array(_plain(a), dtype=dtype, copy=True, order=order))


def asnumpy(a):
    return np.array(_plain(a), copy=True) if isinstance(a, DeviceArray) else np.asarray(a)


def _device_function(name: str, fn):
    def call(*args, **kwargs):
        _refuse_host((args, kwargs), f"cupy.{name}")
        return to_device(fn(*args, **kwargs))

    call.__name__ = name
    return call


def _module_getattr(name: str):
    try:
        attr = getattr(np, name)
    except AttributeError:
        raise AttributeError(f"the CuPy stand-in has no attribute {name!r}") from None
    if isinstance(attr, type) or isinstance(attr, types.ModuleType) or not callable(attr):
        return attr
    return _device_function(name, attr)


class _Stream:
    ptr = 0

    def synchronize(self) -> None:
        pass


class _Device:
    def __init__(self, device: int | None = None) -> None:
        self.id = STATE["current"] if device is None else int(device)
        self.compute_capability = "00"
        self.mem_info = (1 << 30, 1 << 30)

    def use(self) -> None:
        if not 0 <= self.id < STATE["devices"]:
            raise RuntimeError(f"cudaErrorInvalidDevice: device {self.id}")
        STATE["current"] = self.id

    def synchronize(self) -> None:
        pass


def _runtime():
    rt = types.SimpleNamespace()
    rt.getDeviceCount = lambda: STATE["devices"]
    rt.getDeviceProperties = lambda i: {"name": b"CuPy stand-in (NumPy)"}
    rt.runtimeGetVersion = lambda: 0
    return rt


# ------------------------------------------------------------- NCCL on MPI

UINT8, FLOAT32, FLOAT64, SUM = 1, 7, 8, 0
_TYPES = {UINT8: np.uint8, FLOAT32: np.float32, FLOAT64: np.float64}


class NcclError(RuntimeError):
    pass


def _at(ptr: int, count: int, code: int) -> np.ndarray:
    """The ``count`` elements of NCCL type ``code`` at address ``ptr``, as a writable array."""
    dt = np.dtype(_TYPES[code])
    if count == 0:
        return np.empty(0, dt)
    raw = (ctypes.c_char * (count * dt.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dt, count=count)


_pending: list | None = None  # sends and receives between groupStart and groupEnd


def _world():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _maybe_fail(what: str) -> None:
    if STATE["fail_rank"] is not None and _world().Get_rank() == STATE["fail_rank"]:
        raise NcclError(f"ncclSystemError: stand-in failure in {what}")


def groupStart() -> None:  # noqa: N802 - NCCL's spelling
    global _pending
    _pending = []


def groupEnd() -> None:  # noqa: N802
    global _pending
    ops, _pending = _pending or [], None
    from mpi4py import MPI

    _maybe_fail("groupEnd")
    reqs = [(c.Isend(buf, dest=peer) if kind == "send" else c.Irecv(buf, source=peer))
            for kind, c, buf, peer in ops]
    MPI.Request.Waitall(reqs)


class NcclCommunicator:
    def __init__(self, ndev: int, uid, rank: int) -> None:
        color = int.from_bytes(bytes(int(v) & 0xFF for v in uid[:4]), "little") & 0x7FFFFFFF
        self.comm = _world().Split(color, rank)
        if self.comm.Get_size() != ndev or self.comm.Get_rank() != rank:
            raise NcclError("ncclInvalidUsage: ranks do not match the unique id")
        self.aborted = False

    def allReduce(self, send, recv, count, datatype, op, stream):  # noqa: N802
        from mpi4py import MPI

        _maybe_fail("allReduce")
        if op != SUM:
            raise NcclError("the stand-in sums only")
        out = _at(recv, count, datatype)
        self.comm.Allreduce(MPI.IN_PLACE if send == recv else _at(send, count, datatype), out)

    def allGather(self, send, recv, count, datatype, stream):  # noqa: N802
        _maybe_fail("allGather")
        self.comm.Allgather(_at(send, count, datatype),
                            _at(recv, count * self.comm.Get_size(), datatype))

    def send(self, ptr, count, datatype, peer, stream):
        op = ("send", self.comm, _at(ptr, count, datatype), peer)
        if _pending is not None:
            _pending.append(op)
        else:
            self.comm.Send(op[2], dest=peer)

    def recv(self, ptr, count, datatype, peer, stream):
        op = ("recv", self.comm, _at(ptr, count, datatype), peer)
        if _pending is not None:
            _pending.append(op)
        else:
            self.comm.Recv(op[2], source=peer)

    def check_async_error(self) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True

    def destroy(self) -> None:
        self.comm.Free()


def _nccl_module() -> types.ModuleType:
    mod = types.ModuleType("cupy.cuda.nccl")
    mod.available = True
    mod.NCCL_UINT8, mod.NCCL_FLOAT32, mod.NCCL_FLOAT64, mod.NCCL_SUM = UINT8, FLOAT32, FLOAT64, SUM
    mod.NcclError = NcclError
    mod.NcclCommunicator = NcclCommunicator
    mod.get_version = lambda: 21805
    mod.get_unique_id = lambda: tuple(os.urandom(128))
    mod.groupStart, mod.groupEnd = groupStart, groupEnd
    return mod


def modules(nccl: bool = False) -> dict[str, types.ModuleType]:
    """``{"cupy": ..., "cupy.cuda": ..., ["cupy.cuda.nccl": ...]}`` for ``sys.modules``."""
    cupy = types.ModuleType("cupy")
    cupy.__doc__ = "CuPy stand-in on NumPy (tests/array_standin.py)"
    cupy.__file__ = __file__
    cupy.ndarray = DeviceArray
    cupy.asarray, cupy.array, cupy.asnumpy = asarray, array, asnumpy
    cupy.__getattr__ = _module_getattr
    cuda = types.ModuleType("cupy.cuda")
    cuda.runtime = _runtime()
    cuda.Device = _Device
    cuda.get_current_stream = _Stream
    cupy.cuda = cuda
    found = {"cupy": cupy, "cupy.cuda": cuda}
    if nccl:
        cuda.nccl = found["cupy.cuda.nccl"] = _nccl_module()
    return found


def install_into(monkeypatch, devices: int = 1, nccl: bool = True):
    """:func:`install` for one test (pytest's ``monkeypatch`` undoes it); returns the module."""
    mods = modules(nccl)
    for name in ("cupy", "cupy.cuda", "cupy.cuda.nccl"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    for key, value in (("devices", devices), ("current", 0), ("fail_rank", None)):
        monkeypatch.setitem(STATE, key, value)
    return mods["cupy"]


def install(devices: int = 1, nccl: bool = False, fail_rank: int | None = None) -> None:
    """Put the stand-in in ``sys.modules`` (for a whole process, e.g. under mpiexec)."""
    STATE.update(devices=devices, current=0, fail_rank=fail_rank)
    for name in ("cupy", "cupy.cuda", "cupy.cuda.nccl"):
        sys.modules.pop(name, None)
    sys.modules.update(modules(nccl))
