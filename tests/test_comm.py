"""The collective interface (issue 45): MPI and NCCL implementations, the choice between them
(``collectives=`` / ``--comm``) and its refusals, the choice in the run's stats, and a NCCL
failure ending every rank.

No GPU here: the NCCL implementation runs against the CuPy stand-in of
``tests/array_standin.py``, whose NCCL runs on MPI. That checks the calls the
implementation makes (addresses, counts, types, grouping) and the selection
logic, not NCCL itself, which has not yet run on a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from qsimdist.errors import (
    ExecutionError,
    InvalidInputError,
    NcclUnavailableError,
    QsimdistError,
)
from qsimdist.executors import comm as comm_module
from qsimdist.executors.comm import (
    NcclCollectives,
    check_comm_choice,
    choose_collectives,
    load_nccl,
    nccl_refusal,
    probe_rank,
)

from . import array_standin

HERE = Path(__file__).resolve().parent
MPIEXEC = shutil.which("mpiexec")
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found: pip install "
                                   "'qsimdist[mpi]'")


# ------------------------------------------------------------ selection, no MPI needed


class FakeComm:
    """An MPI communicator's ``allgather`` with the other ranks' answers given in advance."""

    def __init__(self, rank: int, others: dict[int, object], size: int | None = None) -> None:
        self.rank, self.others = rank, others
        self.size = size if size is not None else len(others) + 1
        self.gathered = 0

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's spelling
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def allgather(self, mine):
        self.gathered += 1
        return [mine if r == self.rank else self.others[r] for r in range(self.size)]

    def bcast(self, obj, root: int = 0):
        return obj if self.rank == root else self.others[root]


def probe(host="node1", device=0, no_device=None, no_nccl=None) -> dict:
    return {"host": host, "device": device, "no_device": no_device, "no_nccl": no_nccl}


@pytest.fixture
def standin(monkeypatch):
    """The CuPy stand-in in ``sys.modules`` (with its NCCL), one device, device 0 current."""
    return array_standin.install_into(monkeypatch)


def refused(choice, backend, comm, xp) -> str:
    with pytest.raises(NcclUnavailableError) as info:
        choose_collectives(choice, backend, comm, xp)
    message = str(info.value)
    assert "\n" not in message and message.startswith("--comm nccl ")
    assert isinstance(info.value, InvalidInputError) and isinstance(info.value, QsimdistError)
    # auto never refuses: it falls back to host-staged MPI
    assert choose_collectives("auto", backend, comm, xp) == "mpi"
    return message


def test_unknown_choice_is_refused_with_the_valid_ones():
    with pytest.raises(InvalidInputError, match=r"unknown comm 'gloo'; valid: auto, mpi, nccl"):
        check_comm_choice("gloo")
    with pytest.raises(InvalidInputError, match="unknown comm"):
        choose_collectives("gloo", "cupy", FakeComm(0, {1: probe()}), None)


def test_mpi_is_taken_as_asked_and_numpy_never_probes():
    class NoCollectives(FakeComm):
        def allgather(self, mine):
            raise AssertionError("no probe is needed")

    comm = NoCollectives(0, {1: probe()})
    assert choose_collectives("mpi", "cupy", comm, None) == "mpi"
    assert choose_collectives("auto", "numpy", comm, np) == "mpi"
    message = refused("nccl", "numpy", comm, np)
    assert "needs --backend cupy" in message and "'numpy'" in message


def test_each_rank_on_its_own_device_with_nccl_takes_nccl(standin):
    array_standin.STATE["devices"] = 2
    standin.cuda.Device(1).use()
    comm = FakeComm(1, {0: probe(host=os.uname().nodename, device=0)})
    mine = probe_rank(standin)
    assert mine["device"] == 1 and mine["no_device"] is None and mine["no_nccl"] is None
    assert choose_collectives("auto", "cupy", comm, standin) == "nccl"
    assert choose_collectives("nccl", "cupy", comm, standin) == "nccl"
    assert comm.gathered == 2  # the ranks compared their hosts and devices each time


def test_no_device_is_refused(standin):
    array_standin.STATE["devices"] = 0
    assert probe_rank(standin)["no_device"] == "CuPy sees no CUDA device"
    message = refused("nccl", "cupy", FakeComm(0, {1: probe(device=1)}), standin)
    assert message == ("--comm nccl cannot run: rank 0 has no GPU of its own: CuPy sees no "
                       "CUDA device")


def test_a_device_that_fails_is_refused(standin, monkeypatch):
    def broken():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    monkeypatch.setattr(standin.cuda.runtime, "getDeviceCount", broken)
    message = refused("nccl", "cupy", FakeComm(1, {0: probe()}), standin)
    assert "rank 1 has no GPU of its own: no usable CUDA device (RuntimeError: " \
           "cudaErrorNoDevice" in message


def test_cupy_missing_is_refused():
    assert probe_rank(None)["no_device"] == "cupy is not installed"
    message = refused("nccl", "cupy", FakeComm(1, {0: probe()}), None)
    assert message.endswith("rank 1 has no GPU of its own: cupy is not installed")


def test_two_ranks_on_one_device_are_refused(standin):
    here = os.uname().nodename
    comm = FakeComm(1, {0: probe(host=here, device=0)})
    message = refused("nccl", "cupy", comm, standin)  # both on device 0 of this host
    assert f"ranks 0 and 1 share device 0 of host {here!r}" in message
    assert "one device per rank" in message
    # the same device id on two hosts is two devices
    assert choose_collectives("nccl", "cupy", FakeComm(1, {0: probe(host="elsewhere")}),
                              standin) == "nccl"


def test_two_ranks_on_one_device_found_among_many():
    probes = [probe(host="a", device=0), probe(host="a", device=1), probe(host="b", device=0),
              probe(host="b", device=1), probe(host="a", device=1)]
    assert nccl_refusal(probes).startswith("ranks 1 and 4 share device 1 of host 'a'")
    assert nccl_refusal(probes[:4]) is None


def test_nccl_missing_is_refused(standin, monkeypatch):
    # cupy.cuda.nccl does not import (a CuPy without NCCL support)
    monkeypatch.delitem(sys.modules, "cupy.cuda.nccl")
    monkeypatch.delattr(standin.cuda, "nccl")
    message = refused("nccl", "cupy", FakeComm(0, {1: probe(host="b")}), standin)
    assert message.startswith("--comm nccl cannot run: rank 0: NCCL does not load: "
                              "cupy.cuda.nccl does not import")


def test_nccl_library_absent_or_broken_is_refused(standin, monkeypatch):
    nccl = sys.modules["cupy.cuda.nccl"]
    monkeypatch.setattr(nccl, "available", False)
    with pytest.raises(NcclUnavailableError, match="finds no NCCL library"):
        load_nccl()
    message = refused("nccl", "cupy", FakeComm(1, {0: probe(host="b")}), standin)
    assert "rank 1: NCCL does not load: this CuPy finds no NCCL library" in message
    monkeypatch.setattr(nccl, "available", True)

    def version():
        raise OSError("libnccl.so.2: cannot open shared object file")

    monkeypatch.setattr(nccl, "get_version", version)
    message = refused("nccl", "cupy", FakeComm(1, {0: probe(host="b")}), standin)
    assert "NCCL does not load (OSError: libnccl.so.2" in message


def test_a_peer_without_nccl_refuses_on_every_rank(standin):
    # rank 0 is fine; rank 1 said NCCL does not load there: rank 0 refuses too
    comm = FakeComm(0, {1: probe(host="b", no_nccl="NCCL does not load: no libnccl")})
    message = refused("nccl", "cupy", comm, standin)
    assert message == "--comm nccl cannot run: rank 1: NCCL does not load: no libnccl"


# ----------------------------------------------- the NCCL implementation's calls, no MPI


class RecordingNccl(types.SimpleNamespace):
    """``cupy.cuda.nccl`` recording what the implementation asks of it."""

    def __init__(self, fail: str | None = None) -> None:
        calls: list = []
        outer = self

        class Communicator:
            def __init__(self, ndev, uid, rank):
                calls.append(("init", ndev, uid, rank))
                self.aborted = False

            def _maybe(self, name):
                if name == outer.fail:
                    raise outer.NcclError(f"ncclSystemError: {name} broke")

            def allReduce(self, *args):  # noqa: N802
                self._maybe("allReduce")
                calls.append(("allReduce", *args))

            def allGather(self, *args):  # noqa: N802
                self._maybe("allGather")
                calls.append(("allGather", *args))

            def send(self, *args):
                calls.append(("send", *args))

            def recv(self, *args):
                calls.append(("recv", *args))

            def check_async_error(self):
                pass

            def abort(self):
                calls.append(("abort",))

            def destroy(self):
                calls.append(("destroy",))

        super().__init__(available=True, NCCL_UINT8=1, NCCL_FLOAT32=7, NCCL_FLOAT64=8,
                         NCCL_SUM=0, NcclCommunicator=Communicator, calls=calls, fail=fail,
                         NcclError=type("NcclError", (RuntimeError,), {}))

    def get_unique_id(self):
        return (7, 7, 7)

    def get_version(self):
        return 21805

    def groupStart(self):  # noqa: N802
        self.calls.append(("groupStart",))

    def groupEnd(self):  # noqa: N802
        if self.fail == "groupEnd":
            raise self.NcclError("ncclRemoteError: a peer went away")
        self.calls.append(("groupEnd",))


def nccl_on(standin, nccl, dtype=np.complex64, rank=1, size=3):
    from qsimdist.executors.local import BufferPool

    pool = BufferPool(standin, dtype)
    comm = FakeComm(rank, {0: (9, 9, 9)}, size=size)  # rank 0 broadcasts its unique id
    return NcclCollectives(comm, standin, pool, dtype, nccl=nccl)


def test_nccl_calls_carry_device_addresses_counts_and_types(standin):
    nccl = RecordingNccl()
    coll = nccl_on(standin, nccl)
    assert nccl.calls[0] == ("init", 3, (9, 9, 9), 1)  # rank 0's id, broadcast over MPI
    send, recv = coll.buffer(10), coll.buffer(6)
    assert type(send) is array_standin.DeviceArray
    at_s, at_r = send.data.ptr, recv.data.ptr
    coll.alltoallv(send, [4, 0, 6], [0, 4, 4], recv, [2, 0, 4], [0, 2, 2])
    item = 8  # complex64
    assert nccl.calls[1:] == [
        ("groupStart",),
        ("send", at_s, 4 * item, 1, 0, 0), ("recv", at_r, 2 * item, 1, 0, 0),
        ("send", at_s + 4 * item, 6 * item, 1, 2, 0),
        ("recv", at_r + 2 * item, 4 * item, 1, 2, 0),
        ("groupEnd",)]
    del nccl.calls[1:]
    whole = coll.buffer(30)
    coll.allgather(send, whole)
    coll.allreduce(recv)
    # complex64 travels as twice as many float32 (type 7), summed in place
    assert nccl.calls[1:] == [("allGather", at_s, whole.data.ptr, 20, 7, 0),
                              ("allReduce", at_r, at_r, 12, 7, 0, 0)]
    coll.close()
    assert nccl.calls[-1] == ("destroy",)
    assert nccl_on(standin, RecordingNccl(), dtype=np.complex128).real_type == 8


@pytest.mark.parametrize("where, what", [("allReduce", "all-reduce"),
                                         ("allGather", "all-gather"),
                                         ("groupEnd", "all-to-all")])
def test_a_failure_inside_nccl_aborts_and_raises(standin, where, what):
    nccl = RecordingNccl(fail=where)
    coll = nccl_on(standin, nccl)
    buf = coll.buffer(4)
    with pytest.raises(ExecutionError, match=rf"^NCCL {what} failed \(NcclError: "):
        if where == "allReduce":
            coll.allreduce(buf)
        elif where == "allGather":
            coll.allgather(buf, coll.buffer(12))
        else:
            coll.alltoallv(buf, [1, 1, 1], [0, 1, 2], coll.buffer(3), [1, 1, 1], [0, 1, 2])
    assert nccl.calls[-1] == ("abort",)  # the NCCL communicator is aborted first
    assert coll.handle is None


# -------------------------------------------------------------- under mpiexec -n 2


def comm_case(case: str, timeout: float = 240):
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", str(HERE / "comm_cases.py"), case]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE,
                          env=dict(os.environ))
    return proc, time.monotonic() - t


def case_result(case: str):
    proc, _ = comm_case(case)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("{", "["))]
    assert len(lines) == 1, proc.stdout  # rank 0 prints
    return json.loads(lines[0])


@pytest.mark.mpi
@needs_mpiexec
def test_each_collective_equals_numpy_on_both_implementations():
    res = case_result("interface")
    for impl in ("mpi", "nccl"):
        for name in ("alltoallv", "allgather", "allreduce"):
            assert res[impl][name] == 0.0, (impl, name, res[impl][name])
    assert res["mpi"]["buffer_type"] == "ndarray"
    assert res["nccl"]["buffer_type"] == "DeviceArray"  # NCCL works on device buffers


@pytest.mark.mpi
@needs_mpiexec
def test_executor_chooses_collectives_and_reports_the_choice():
    rows = {(r["backend"], r["devices"], r["choice"]): r for r in case_result("executor")}
    ran = [r for r in rows.values() if "refused" not in r]
    for r in ran:  # every run equals the single-process executor
        assert r["rel_err"] <= 1e-5, r
        assert r["ranks_comm"] == [r["comm"]] * 2  # every rank chose alike
        impl = r["comm"]
        # the schedule's three kinds of collective went through the chosen implementation
        assert {k.split(".")[0] for k in r["calls"]} == {impl}, r["calls"]
        assert all(r["calls"].get(f"{impl}.{k}", 0) > 0
                   for k in ("alltoallv", "allgather", "allreduce")), r["calls"]
        assert r["result_type"] == ("ndarray" if r["backend"] == "numpy" else "DeviceArray")
    calls = {k: r["calls"] for k, r in rows.items() if "calls" in r}
    # both implementations make the same calls, in number, on the same schedule
    assert len({tuple(sorted((k.split(".")[1], n) for k, n in c.items()))
                for c in calls.values()}) == 1
    assert rows[("numpy", 0, "auto")]["comm"] == "mpi"
    assert rows[("cupy", 2, "auto")]["comm"] == "nccl"  # a device each: NCCL
    assert rows[("cupy", 2, "mpi")]["comm"] == "mpi"
    assert rows[("cupy", 2, "nccl")]["comm"] == "nccl"
    assert rows[("cupy", 1, "auto")]["comm"] == "mpi"  # two ranks on one device: MPI
    one_device = rows[("cupy", 1, "nccl")]
    assert one_device["error_type"] == "NcclUnavailableError"
    assert "ranks 0 and 1 share device 0 of host" in one_device["refused"]
    assert "needs --backend cupy" in rows[("numpy", 0, "nccl")]["refused"]


@pytest.mark.mpi
@needs_mpiexec
def test_a_nccl_failure_ends_every_rank():
    proc, secs = comm_case("nccl_fault", timeout=120)
    assert proc.returncode not in (0, None) and secs < 60, (proc.returncode, secs)
    assert ("qsimdist: error: rank 1: NCCL all-gather failed (NcclError: ncclSystemError: "
            "stand-in failure in allGather); ending every rank") in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not proc.stdout.strip()  # rank 0 never got to print


# ------------------------------------------------------------------- the command line


def qsimdist_cli(nranks: int, *args: str, timeout: float = 240):
    exe = shutil.which("qsimdist")
    assert exe is not None
    cmd = [MPIEXEC, "-n", str(nranks), exe, *args] if nranks else [exe, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          cwd=HERE.parent, env=dict(os.environ))


def test_cli_comm_nccl_without_mpiexec_is_one_line(capsys):
    from qsimdist.cli import main

    assert main(["amplitude", "circuits/ghz_n5.qasm", "--comm", "nccl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qsimdist: error: --comm nccl exchanges "
                                                   "arrays between MPI ranks")
    assert main(["amplitude", "circuits/ghz_n5.qasm", "--comm", "gloo"]) == 2
    err = capsys.readouterr().err
    assert "gloo" in err and "nccl" in err and "Traceback" not in err
    # mpi and auto are accepted where there is nothing to exchange
    assert main(["amplitude", "circuits/ghz_n5.qasm", "--comm", "mpi", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["amplitudes"]


def test_python_api_takes_collectives_and_refuses_a_bad_one():
    import qsimdist
    from qsimdist.engine import RunOptions
    from qsimdist.engine.networks import ContractOptions

    assert RunOptions.resolve(collectives="mpi").collectives == "mpi"
    assert RunOptions.resolve().to_dict()["collectives"] == "auto"
    with pytest.raises(NcclUnavailableError, match="needs --backend cupy"):
        RunOptions.resolve(collectives="nccl")
    with pytest.raises(InvalidInputError, match="unknown comm 'x'"):
        qsimdist.amplitudes("circuits/ghz_n5.qasm", ["00000"], collectives="x")
    with pytest.raises(InvalidInputError, match="unknown comm 'x'"):
        ContractOptions(collectives="x")
    assert ContractOptions(collectives="mpi").run["collectives"] == "mpi"


@pytest.mark.mpi
@needs_mpiexec
def test_cli_stats_name_the_collectives_under_mpiexec(tmp_path):
    args = ["amplitude", "circuits/rqc_3x4_m8.qsim", "--order", "natural", "0000000*****",
            "--json", "--memory-limit", "48KiB"]
    proc = qsimdist_cli(2, *args)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)["stats"]
    assert stats["comm"] == "mpi"
    assert [r["comm"] for r in stats["ranks"]] == ["mpi", "mpi"]
    # asked for NCCL with numpy arrays: every rank refuses, rank 0 prints one line
    proc = qsimdist_cli(2, *args[:-3], "--comm", "nccl")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ["qsimdist: error: --comm nccl needs --backend cupy: NCCL moves arrays "
                     "between GPUs, and backend 'numpy' holds them in host memory"]


@pytest.mark.mpi
@needs_mpiexec
def test_cli_run_reports_the_collectives(tmp_path):
    from qsimdist.hardware import save_profile

    from .test_distribute import toy_profile

    prof = save_profile(toy_profile(name="tight", memory_bytes=48 * 1024, devices_per_node=2),
                        tmp_path / "tight.toml")
    plan = tmp_path / "a.json"
    proc = qsimdist_cli(0, "plan", "circuits/rqc_3x4_m8.qsim", "--order", "natural", "-b",
                        "0000********", "--profile", str(prof), "--devices", "2", "-o",
                        str(plan), "--max-repeats", "4")
    assert proc.returncode == 0, proc.stderr
    proc = qsimdist_cli(2, "run", str(plan), "--json", "--comm", "mpi")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)["stats"]
    assert stats["comm"] == "mpi" and [r["comm"] for r in stats["ranks"]] == ["mpi", "mpi"]


def test_comm_module_imports_neither_mpi_nor_cupy():
    code = ("import sys, qsimdist.executors.comm; "
            "print(sorted(m for m in ('mpi4py.MPI', 'cupy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=HERE.parent)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    assert comm_module.COMM_CHOICES == ("auto", "mpi", "nccl")
