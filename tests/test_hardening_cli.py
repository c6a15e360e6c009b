"""Hardening of the command line and the Python API (issue 12).

Each test pins one root cause: open qubits kept as arrays and streamed,
refusal before allocating, Ctrl-C, operating-system errors on outputs, plan
detection, bad bitstring types, and batching of many bitstrings.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2
from qiskit.quantum_info import Statevector

import qsimdist
import qsimdist.engine.amplitudes
import qsimdist.engine.memory
from qsimdist.cli import main
from qsimdist.errors import BitstringError, PlanError, QsimdistError

ROOT = Path(__file__).resolve().parents[1]
CIRCUITS = ROOT / "circuits"


# --------------------------------------------------------------------- helpers
def cli(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_error(rc: int, err: str, *words: str) -> str:
    """Exit code 2 and exactly one stderr line 'qsimdist: error: ...' holding every word."""
    assert rc == 2, f"exit code {rc}, stderr {err!r}"
    lines = err.splitlines()
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    assert lines[0].startswith("qsimdist: error:"), lines[0]
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    return lines[0]


def hadamards(n: int) -> QuantumCircuit:
    """H on every qubit, a phase on qubit 0: every amplitude is +-2^(-n/2)."""
    qc = QuantumCircuit(n)
    qc.h(range(n))
    qc.z(0)
    return qc


def write_qasm(qc: QuantumCircuit, path: Path) -> Path:
    path.write_text(qasm2.dumps(qc))
    return path


def brickwork(n: int, depth: int, seed: int) -> QuantumCircuit:
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for layer in range(depth):
        for q in range(n):
            qc.u(*rng.uniform(0, np.pi, 3), q)
        for q in range(layer % 2, n - 1, 2):
            qc.cx(q, q + 1)
    return qc


def traced_peak(fn):
    """``(fn(), peak bytes of Python allocations while it ran)``."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main_to_file(monkeypatch, sink: Path, args: list[str], warm: bool = False) -> tuple[int, int]:
    """Run the CLI with stdout sent to ``sink``; its exit code and traced peak.

    ``warm`` runs it once first, outside the measurement (imports, caches).
    """
    with open(sink, "w") as fh:
        monkeypatch.setattr(sys, "stdout", fh)
        try:
            if warm:
                main(args)
                fh.seek(0)
                fh.truncate()
            return traced_peak(lambda: main(args))
        finally:
            monkeypatch.undo()


def _no_call(name):
    def fail(*args, **kwargs):
        raise AssertionError(f"{name} must not be called")

    return fail


@pytest.fixture
def small_plan(tmp_path) -> Path:
    """A saved plan for two open qubits of a 4-qubit circuit."""
    qc = brickwork(4, 3, seed=1)
    out = tmp_path / "small.json"
    qsimdist.plan(qc, bitstrings="01**").save(out)
    return out


# ------------------------------------------ root cause 2: '*' kept as an array
def test_output_size_is_refused_before_the_network_is_built(monkeypatch):
    monkeypatch.setattr(qsimdist.api, "amplitude_network", _no_call("amplitude_network"))
    monkeypatch.setattr(qsimdist.engine.amplitudes, "amplitude_network",
                        _no_call("amplitude_network"))
    with pytest.raises(PlanError) as info:
        qsimdist.amplitudes(hadamards(28), "*" * 28, memory_limit="1GiB")
    msg = str(info.value)
    assert "2.00 GiB" in msg and "1.00 GiB" in msg, msg
    with pytest.raises(PlanError) as info:
        qsimdist.plan(hadamards(28), bitstrings="*" * 28, dtype="complex128", memory_limit="3GiB")
    assert "4.00 GiB" in str(info.value) and "3.00 GiB" in str(info.value)


def test_cli_refuses_wide_output_with_need_and_limit(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(qsimdist.api, "amplitude_network", _no_call("amplitude_network"))
    monkeypatch.setattr(qsimdist.engine.amplitudes, "amplitude_network",
                        _no_call("amplitude_network"))
    qasm = write_qasm(hadamards(28), tmp_path / "h28.qasm")
    rc, out, err = cli(capsys, "amplitude", qasm, "*" * 28, "--memory-limit", "100MiB")
    assert_error(rc, err, "2.00 GiB", "100.00 MiB")
    assert out == ""


def test_items_do_not_expand_a_wide_pattern():
    n = 20
    res = qsimdist.api.AmplitudeResult(["*" * n], [np.zeros(2**n, np.complex64)], n, "complex64",
                                       "qiskit")
    first, peak = traced_peak(lambda: (next(iter(res.items())), res.bitstring(2**n - 2))[0])
    assert first[0] == "0" * n
    assert res.bitstring(2**n - 2) == "1" * (n - 1) + "0"
    assert res.bitstring(5) == "0" * (n - 3) + "101"
    assert peak < 2 * 2**20, f"first item cost {peak} bytes of Python objects"


@pytest.mark.parametrize("as_json", [False, True])
def test_wide_output_is_streamed(capsys, tmp_path, monkeypatch, as_json):
    n = 17
    qasm = write_qasm(hadamards(n), tmp_path / "h.qasm")
    sink = tmp_path / "out.txt"
    args = ["amplitude", str(qasm), "*" * n] + (["--json"] if as_json else [])
    qsimdist.amplitudes(hadamards(n), "*" * n)  # warm imports and caches outside the measure
    rc, peak = main_to_file(monkeypatch, sink, args)
    capsys.readouterr()
    assert rc == 0
    # the array itself is 1 MiB; 2^17 Python strings or dicts would be tens of MiB
    assert peak < 6 * 2**20, f"peak {peak / 2**20:.1f} MiB while printing 2^{n} amplitudes"
    text = sink.read_text()
    amp = 2 ** (-n / 2)
    if as_json:
        obj = json.loads(text)
        rows = obj["amplitudes"]
        assert len(rows) == 2**n and obj["n_qubits"] == n
        assert rows[3]["bitstring"] == "0" * (n - 2) + "11"
        assert rows[3]["re"] == pytest.approx(-amp, rel=1e-5)  # qubit 0 set: Z flips the sign
        assert rows[4]["re"] == pytest.approx(amp, rel=1e-5)
    else:
        lines = text.splitlines()
        assert len(lines) == 2**n
        b, re_, im_ = lines[-1].split()[:3]
        assert b == "1" * n and float(re_) == pytest.approx(-amp, rel=1e-5)


def test_run_refuses_a_forged_wide_pattern(tmp_path, small_plan):
    """A plan file claiming 40 open qubits is refused at once, not expanded into 2^40 labels."""
    data = json.loads(small_plan.read_text())
    data["meta"]["bitstring"] = "*" * 40
    data["meta"]["n_qubits"] = 40
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
        "from qsimdist.cli import main; sys.exit(main(['run', sys.argv[1]]))"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(forged)], capture_output=True,
                          text=True, timeout=120)
    assert_error(proc.returncode, proc.stderr, "meta.bitstring", "40")


def test_run_streams_a_wide_plan(capsys, tmp_path, monkeypatch):
    n = 17
    saved = tmp_path / "wide.json"
    qsimdist.plan(hadamards(n), bitstrings="*" * n).save(saved)
    sink = tmp_path / "out.txt"
    rc, peak = main_to_file(monkeypatch, sink, ["run", str(saved)], warm=True)
    capsys.readouterr()
    assert rc == 0
    assert peak < 6 * 2**20, f"peak {peak / 2**20:.1f} MiB while printing 2^{n} amplitudes"
    lines = sink.read_text().splitlines()
    assert len(lines) == 2**n
    assert lines[1].split()[0] == "0" * (n - 1) + "1"
    assert float(lines[1].split()[1]) == pytest.approx(-(2 ** (-n / 2)), rel=1e-5)


def test_run_labels_the_saved_pattern(capsys, small_plan):
    rc, out, err = cli(capsys, "run", small_plan)
    assert rc == 0, err
    labels = [line.split()[0] for line in out.splitlines()]
    assert labels == ["0100", "0101", "0110", "0111"]


# ---------------------------------------- root cause 3: refuse before allocating
def _huge_plan(path: Path) -> Path:
    """An outer product of 63 qubit vectors: the output alone is 2^63 complex64 = 64 EiB."""
    from qsimdist.network import Network

    n = 63
    net = Network([(f"i{k}",) for k in range(n)], tuple(f"i{k}" for k in range(n)),
                  {f"i{k}": 2 for k in range(n)}, [np.ones(2, complex) for _ in range(n)])
    p = qsimdist.plan(net, memory_limit="none")
    assert p.stats.peak_bytes >= 2**66
    p.save(path)
    return path


def test_run_refuses_a_plan_above_the_memory_limit(capsys, tmp_path):
    plan = _huge_plan(tmp_path / "huge.json")
    rc, out, err = cli(capsys, "run", plan)
    assert_error(rc, err, "64.00 EiB", "memory limit")
    rc, out, err = cli(capsys, "run", plan, "--memory-limit", "none")
    assert_error(rc, err, "64.00 EiB", "none", "physical memory")


def test_none_limit_is_still_bounded_by_the_machine(monkeypatch):
    monkeypatch.setattr(qsimdist.engine.memory, "machine_memory", lambda: 1024)
    with pytest.raises(PlanError) as info:
        qsimdist.amplitudes(hadamards(10), "*" * 10, memory_limit="none")
    assert "none" in str(info.value) and "1.00 KiB" in str(info.value)


def test_contract_with_none_limit_refuses_64_eib(tmp_path):
    from qsimdist.network import Network

    n = 63
    net = Network([(f"i{k}",) for k in range(n)], tuple(f"i{k}" for k in range(n)),
                  {f"i{k}": 2 for k in range(n)}, [np.ones(2, complex) for _ in range(n)])
    with pytest.raises(PlanError, match="64.00 EiB"):
        qsimdist.contract(net, memory_limit="none")


def test_default_memory_limit_follows_available_memory(tmp_path, monkeypatch):
    from qsimdist.memory_limit import default_memory_limit

    monkeypatch.delenv("QSIMDIST_MEMORY_LIMIT", raising=False)
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       100000000 kB\nMemFree:          500000 kB\n"
                    "MemAvailable:    1000000 kB\nSwapTotal:   0 kB\n")
    assert default_memory_limit(meminfo=str(info)).limit == int(0.8 * 1000000 * 1024)
    # without /proc/meminfo the limit still comes from the machine, not from nowhere
    fallback = default_memory_limit(meminfo=str(tmp_path / "absent")).limit
    assert fallback is None or fallback > 0


# ------------------------------------------------------------ root cause 4: Ctrl-C
def test_keyboard_interrupt_exits_130_with_one_line(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(qsimdist.api, "amplitudes", interrupted)
    rc, out, err = cli(capsys, "amplitude", CIRCUITS / "ghz_n5.qasm")
    assert rc == 130
    assert err == "qsimdist: interrupted\n"


def test_exit_codes_from_typer_exit_are_returned(capsys, monkeypatch):
    import typer

    def stop(*args, **kwargs):
        raise typer.Exit(code=3)

    monkeypatch.setattr(qsimdist.api, "amplitudes", stop)
    rc, out, err = cli(capsys, "amplitude", CIRCUITS / "ghz_n5.qasm")
    assert rc == 3


def _sigint_as_default() -> None:
    """In the child, before exec: SIGINT back to its default action. A shell that starts
    a job in the background (``cmd &`` without job control, as a CI runner may) makes it
    ignore SIGINT, every child inherits that, and Python then keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_during_plan_exits_130_and_writes_nothing(tmp_path):
    exe = shutil.which("qsimdist")
    cmd = [exe] if exe else [sys.executable, "-m", "qsimdist.cli"]
    out = tmp_path / "out.json"
    env = dict(os.environ, QSIMDIST_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        [*cmd, "plan", str(CIRCUITS / "rqc_4x5_m12.qasm"), "--max-repeats", "100000",
         "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        preexec_fn=_sigint_as_default,
    )
    # wait until it is planning: past its imports, by the CPU time it has used (polled)
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_seconds() -> float:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    deadline = time.monotonic() + 90
    while proc.poll() is None and cpu_seconds() < 4.0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "planning finished before the interrupt"
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    try:
        stdout, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # never leave a planner running behind the test
        proc.communicate()
        pytest.fail("the interrupted plan was still running 30 s after SIGINT")
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert stderr == "qsimdist: interrupted\n"
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")] == []


_SWALLOWER = """
import atexit, pathlib, sys, threading, time
from qsimdist.commands import process
process.interrupt_with_deadline()
marker = pathlib.Path(sys.argv[1])
atexit.register(marker.write_text, "exit handlers ran")
print("ready", flush=True)
while True:  # a library that swallows Ctrl-C while holding threading's own lock
    try:
        with threading._active_limbo_lock:
            time.sleep(100)
    except KeyboardInterrupt:
        pass
"""


def test_interrupt_deadline_ends_a_process_that_swallows_ctrl_c_inside_a_lock(tmp_path):
    # the deadline must not need the interrupted main thread: a signal handler that
    # started a thread here would wait for ever on the lock the main thread holds
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _SWALLOWER, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_default)
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.2)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        stdout, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the interrupted process was still running 30 s after SIGINT")
    took = time.monotonic() - t0
    from qsimdist.commands.process import EXIT_HANDLER_SECONDS, INTERRUPT_GRACE_SECONDS

    assert proc.returncode == 130, (proc.returncode, stderr)
    assert INTERRUPT_GRACE_SECONDS - 0.5 < took < INTERRUPT_GRACE_SECONDS + EXIT_HANDLER_SECONDS + 3
    assert stderr == "qsimdist: interrupted\n"
    assert marker.read_text() == "exit handlers ran"


# ----------------------------------------------------- root cause 7: OS errors
def test_plan_output_is_a_folder_is_refused_before_planning(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(qsimdist.api, "plan", _no_call("plan"))
    rc, out, err = cli(capsys, "plan", CIRCUITS / "ghz_n5.qasm", "-o", tmp_path)
    assert_error(rc, err, str(tmp_path), "folder")


def test_plan_output_under_a_regular_file_is_refused_before_planning(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(qsimdist.api, "plan", _no_call("plan"))
    blocker = tmp_path / "somefile.txt"
    blocker.write_text("x")
    rc, out, err = cli(capsys, "plan", CIRCUITS / "ghz_n5.qasm", "-o", blocker / "plan.json")
    assert_error(rc, err, "somefile.txt", "not a folder")


def test_plot_naming_a_folder_is_refused_before_planning(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(qsimdist.api, "plan", _no_call("plan"))
    rc, out, err = cli(capsys, "plan", CIRCUITS / "ghz_n5.qasm", "--profile", "dgx-h100",
                       "--plot", tmp_path)
    assert_error(rc, err, str(tmp_path), "folder")


def test_permission_error_while_writing_is_one_line(capsys, tmp_path, monkeypatch):
    def denied(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(os, "replace", denied)
    out = tmp_path / "plan.json"
    rc, _, err = cli(capsys, "plan", CIRCUITS / "ghz_n5.qasm", "-o", out)
    assert_error(rc, err, "Permission denied", "plan.json")
    assert list(tmp_path.iterdir()) == []


def test_output_under_proc_is_one_line(capsys):
    target = "/proc/qsimdist-test/plan.json"
    rc, _, err = cli(capsys, "plan", CIRCUITS / "ghz_n5.qasm", "-o", target)
    assert_error(rc, err, "/proc")


def test_bitstrings_file_that_is_a_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "bits.fifo"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [sys.executable, "-m", "qsimdist.cli", "amplitude", str(CIRCUITS / "ghz_n5.qasm"),
         "--bitstrings-file", str(fifo)],
        capture_output=True, text=True, timeout=60,
    )
    assert_error(proc.returncode, proc.stderr, "bits.fifo", "not a regular file")


# -------------------------------------------- root cause 9: plans with sorted keys
def test_plan_saved_with_sorted_keys_is_recognised(capsys, tmp_path, small_plan):
    data = json.loads(small_plan.read_text())
    sorted_plan = tmp_path / "sorted.json"
    sorted_plan.write_text(json.dumps(data, sort_keys=True))
    assert b'"schema"' not in sorted_plan.read_bytes()[:256]
    rc, out, err = cli(capsys, "plan", sorted_plan, "--json")
    assert rc == 0, err
    assert json.loads(out)["stats"]["n_steps"] == data["stats"]["n_steps"]


# ----------------------------------------- root cause 10b: non-string bitstrings
@pytest.mark.parametrize("bad", [0, None, 3.5, [0], [b"01"]])
def test_amplitudes_with_a_non_string_is_a_qsimdist_error(bad):
    with pytest.raises(BitstringError) as info:
        qsimdist.amplitudes(hadamards(2), bad)
    assert isinstance(info.value, QsimdistError)
    assert "string" in str(info.value)


# --------------------------------------------------- root cause 11: many bitstrings
def test_many_bitstrings_are_batched_and_exact():
    n = 12
    qc = brickwork(n, 4, seed=5)
    sv = Statevector(qc).data
    rng = np.random.default_rng(0)
    bits = ["".join(r) for r in rng.choice(["0", "1"], size=(2000, n))]
    calls = []
    res = qsimdist.amplitudes(qc, bits, dtype="complex128",
                              progress=lambda stage, done, total: calls.append((done, total)))
    got = res.amplitudes
    assert got.shape == (2000,)
    want = np.array([sv[int(b, 2)] for b in bits])
    assert np.max(np.abs(got - want)) < 1e-10
    assert [res.get(b) for b in bits[:50]] == pytest.approx(list(want[:50]), abs=1e-10)
    assert res.bitstrings == bits
    # one at a time for a sample: the batched values agree
    for b in bits[:5]:
        assert qsimdist.amplitude(qc, b, dtype="complex128") == pytest.approx(res.get(b), abs=1e-10)
    assert res.stats["contractions"] <= 20, res.stats
    assert calls and calls[-1][0] == calls[-1][1] == res.stats["contractions"]


def test_structured_bitstrings_share_contractions():
    n = 16
    qc = brickwork(n, 3, seed=2)
    sv = Statevector(qc).data
    rng = np.random.default_rng(1)
    bits = []
    for prefix in ("0110100110", "1111000011", "0000000000"):
        for j in range(64):
            bits.append(prefix + format(j, "06b"))
    order = rng.permutation(len(bits))
    bits = [bits[i] for i in order]
    res = qsimdist.amplitudes(qc, bits, dtype="complex128")
    want = np.array([sv[int(b, 2)] for b in bits])
    assert np.max(np.abs(res.amplitudes - want)) < 1e-10
    assert res.stats["contractions"] <= 3


def test_mixed_patterns_and_bitstrings_keep_their_order():
    qc = brickwork(5, 3, seed=3)
    sv = Statevector(qc).data
    req = ["01101", "1*0*1", "00000", "01101"]
    res = qsimdist.amplitudes(qc, req, dtype="complex128")
    labels = ["01101", "10001", "10011", "11001", "11011", "00000", "01101"]
    assert res.bitstrings == labels
    assert np.max(np.abs(res.amplitudes - [sv[int(b, 2)] for b in labels])) < 1e-10


def test_cli_bitstrings_file_batched(capsys, tmp_path):
    n = 12
    qc = brickwork(n, 3, seed=9)
    sv = Statevector(qc).data
    qasm = write_qasm(qc, tmp_path / "c.qasm")
    rng = np.random.default_rng(3)
    bits = ["".join(r) for r in rng.choice(["0", "1"], size=(500, n))]
    f = tmp_path / "bits.txt"
    f.write_text("\n".join(bits) + "\n")
    rc, out, err = cli(capsys, "amplitude", qasm, "--bitstrings-file", f, "--dtype", "complex128",
                       "--json")
    assert rc == 0, err
    obj = json.loads(out)
    assert [e["bitstring"] for e in obj["amplitudes"]] == bits
    got = np.array([complex(e["re"], e["im"]) for e in obj["amplitudes"]])
    assert np.max(np.abs(got - [sv[int(b, 2)] for b in bits])) < 1e-10
    assert obj["stats"]["contractions"] < 20


def test_batches_keep_most_of_the_memory_limit_in_reserve(monkeypatch):
    """A batch width qsimdist chose runs a plan peaking within a quarter of the limit.

    The local executor holds up to 2x a plan's peak in free buffers beside the
    live peak: the n30 run was killed by the kernel at 23-24 GB when a chosen
    batch was planned against the whole default limit, and again against half.
    A plan made against the whole limit is kept only when its own peak is that small.
    """
    n = 12
    qc = brickwork(n, 6, seed=4)
    sv = Statevector(qc).data
    rng = np.random.default_rng(2)
    bits = ["".join(r) for r in rng.choice(["0", "1"], size=(300, n))]
    limit = 256 * 1024
    asked, used = [], []
    real_make = qsimdist.engine.batching.make_plan
    real_batch = qsimdist.engine.amplitudes.plan_batch

    def recording(net, **kw):
        asked.append(kw["memory_limit"])
        return real_make(net, **kw)

    def batch(net, dtype, lim, opts, chosen):
        p = real_batch(net, dtype, lim, opts, chosen)
        used.append((chosen, p.stats.peak_bytes))
        return p

    monkeypatch.setattr(qsimdist.engine.batching, "make_plan", recording)
    monkeypatch.setattr(qsimdist.engine.amplitudes, "plan_batch", batch)
    res = qsimdist.amplitudes(qc, bits + ["0" * (n - 2) + "**"], memory_limit=limit,
                              method="tensor-network")
    assert np.max(np.abs(res.amplitudes[:300] - [sv[int(b, 2)] for b in bits])) < 1e-5
    assert res.stats["contractions"] < 300
    # the user's own pattern gets the whole limit; every chosen batch peaks within a quarter
    assert asked[0] == limit and set(asked) <= {limit, limit // 4}, asked
    # a chosen batch is first planned against the whole limit (a quarter can cost more FLOPs)
    assert asked[1] == limit, asked
    assert used[0][0] is False and any(chosen for chosen, _ in used), used
    assert all(peak <= limit // 4 for chosen, peak in used if chosen), used
