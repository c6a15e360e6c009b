"""Issue 12, input files and frontends: bad input gives one QsimdistError line, never a hang,
a traceback or an undefined number.

Calls that could block on a FIFO run in a thread with a timeout (and the FIFO is then
opened for writing to release the thread), and calls that could allocate without bound
run in a subprocess with a memory limit, so that a regression fails instead of hanging
the test session or exhausting the machine.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2
from qiskit.quantum_info import Statevector

import qsimdist
from qsimdist import CircuitParseError, QsimdistError
from qsimdist.config import check_dtype, check_order, parse_memory
from qsimdist.errors import InvalidInputError, PlanFormatError, shorten
from qsimdist.frontends import load
from qsimdist.frontends.qsim import parse_qsim
from qsimdist.network import load_network, save_network
from qsimdist.planner.plan import Plan

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 20.0


# ---------------------------------------------------------------------- helpers
def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def small_circuit() -> QuantumCircuit:
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    return qc


@pytest.fixture
def saved_plan(tmp_path) -> Path:
    return qsimdist.plan(small_circuit(), bitstrings="0*").save(tmp_path / "plan.json")


@pytest.fixture
def saved_network(tmp_path) -> Path:
    """A small network .json with its sibling .npz."""
    net = qsimdist.plan(small_circuit(), bitstrings="00").network
    path = tmp_path / "net.json"
    save_network(net, path)
    assert (tmp_path / "net.npz").is_file()
    return path


def call_releasing_fifos(fn, fifos: list[Path], timeout: float = TIMEOUT):
    """Run ``fn()`` in a thread; return ('raised', exc) or ('returned', value).

    If it is still running after ``timeout`` seconds, open every FIFO for writing
    (which releases a reader blocked in open or read) and fail the test.
    """
    box: dict = {}

    def target():
        try:
            box["value"] = ("returned", fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["value"] = ("raised", exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        for fifo in fifos:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
        thread.join(5)
        pytest.fail(f"the call blocked on a FIFO for {timeout:.0f} s instead of refusing it")
    return box["value"]


def run_isolated(code: str, timeout: float = 120.0, memory_gib: int = 6) -> str:
    """Run ``code`` in a fresh interpreter under a memory limit; return its stdout.

    ``code`` prints ``RAISED <class> <message>`` when the call under test raises a
    QsimdistError; anything else (crash, traceback, kill) shows in the returned text.
    """
    prelude = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({memory_gib} << 30, {memory_gib} << 30))
        import qsimdist
        from qsimdist.errors import QsimdistError
        def attempt(fn):
            try:
                fn()
            except QsimdistError as exc:
                print("RAISED", type(exc).__name__, exc)
            else:
                print("RETURNED")
        """
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the call ran for over {timeout:.0f} s")
    return proc.stdout + f"\n[rc={proc.returncode}] " + proc.stderr[-2000:]


def one_line(exc: BaseException, limit: int = 400) -> str:
    msg = str(exc)
    assert "\n" not in msg, msg
    assert len(msg) < limit, msg[:500]
    return msg


# ---------------------------------------------------- 1. reads that never end
def _targets(tmp_path: Path, saved_plan: Path, saved_network: Path):
    """name -> (path to replace, callable reading it)."""
    return {
        "qasm": (tmp_path / "c.qasm", lambda p: load(p)),
        "qsim": (tmp_path / "c.qsim", lambda p: load(p)),
        "network-json": (saved_network, lambda p: load(p)),
        "network-npz": (saved_network.with_suffix(".npz"), lambda p: load(saved_network)),
        "plan": (saved_plan, lambda p: Plan.load(p)),
    }


KINDS = ["qasm", "qsim", "network-json", "network-npz", "plan"]


@pytest.mark.parametrize("kind", KINDS)
def test_fifo_is_refused_promptly(tmp_path, saved_plan, saved_network, kind):
    path, read = _targets(tmp_path, saved_plan, saved_network)[kind]
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    outcome, value = call_releasing_fifos(lambda: read(path), [path])
    assert outcome == "raised", value
    assert isinstance(value, QsimdistError), repr(value)
    msg = one_line(value)
    assert "not a regular file" in msg and path.name in msg, msg


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_to_character_device_is_refused(tmp_path, saved_plan, saved_network, kind):
    path, read = _targets(tmp_path, saved_plan, saved_network)[kind]
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/null")
    with pytest.raises(QsimdistError) as info:
        read(path)
    assert "not a regular file" in one_line(info.value)


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_to_dev_zero_is_refused_without_reading(tmp_path, kind):
    """A symlink to /dev/zero is never read (before the fix: read until memory ran out)."""
    out = run_isolated(
        f"""
        import os
        from pathlib import Path
        from qiskit import QuantumCircuit
        from qsimdist.frontends import load
        from qsimdist.network import save_network
        from qsimdist.planner.plan import Plan
        tmp = Path({str(tmp_path)!r})
        kind = {kind!r}
        qc = QuantumCircuit(2); qc.h(0); qc.cx(0, 1)
        if kind == "plan":
            target = tmp / "plan.json"; read = lambda: Plan.load(target)
        elif kind.startswith("network"):
            net = qsimdist.plan(qc, bitstrings="00").network
            save_network(net, tmp / "net.json")
            target = tmp / ("net.json" if kind == "network-json" else "net.npz")
            read = lambda: load(tmp / "net.json")
        else:
            target = tmp / ("c." + kind); read = lambda: load(target)
        target.unlink(missing_ok=True)
        target.symlink_to("/dev/zero")
        attempt(read)
        """,
        memory_gib=4,
    )
    assert "RAISED" in out and "not a regular file" in out, out


@pytest.mark.parametrize("kind", KINDS)
def test_file_over_the_size_cap_names_the_cap(tmp_path, saved_plan, saved_network, kind,
                                              monkeypatch):
    path, read = _targets(tmp_path, saved_plan, saved_network)[kind]
    if kind in ("qasm", "qsim"):
        write(path, "OPENQASM 2.0;\n" + "// padding\n" * 100 if kind == "qasm" else
              "2\n" + "0 h 0\n" * 100)
    size = path.stat().st_size
    cap = size // 2
    assert cap > 20
    if kind == "network-npz":
        assert saved_network.stat().st_size <= cap  # the .json itself is under the cap
    monkeypatch.setenv("QSIMDIST_MAX_FILE_BYTES", str(cap))
    with pytest.raises(QsimdistError) as info:
        read(path)
    msg = one_line(info.value)
    assert f"{cap}-byte limit" in msg and str(size) in msg and path.name in msg, msg
    assert "QSIMDIST_MAX_FILE_BYTES" in msg, msg


# ----------------------------------------------------- 7. loops and folders
@pytest.mark.parametrize("kind", KINDS)
def test_symlink_loop_is_reported_as_a_loop(tmp_path, saved_plan, saved_network, kind):
    path, read = _targets(tmp_path, saved_plan, saved_network)[kind]
    path.unlink(missing_ok=True)
    other = tmp_path / ("loop-partner" + path.suffix)
    path.symlink_to(other)
    other.symlink_to(path)
    with pytest.raises(QsimdistError) as info:
        read(path)
    msg = one_line(info.value)
    assert "symlink loop" in msg and "no such file" not in msg, msg


def test_folder_where_the_npz_should_be(saved_network):
    npz = saved_network.with_suffix(".npz")
    npz.unlink()
    npz.mkdir()
    with pytest.raises(CircuitParseError) as info:
        load(saved_network)
    msg = one_line(info.value)
    assert "net.npz is a folder" in msg, msg


@pytest.mark.parametrize("kind", ["qasm", "network-json", "plan"])
def test_folder_given_as_the_file(tmp_path, saved_plan, saved_network, kind):
    path, read = _targets(tmp_path, saved_plan, saved_network)[kind]
    path.unlink(missing_ok=True)
    path.mkdir()
    with pytest.raises(QsimdistError) as info:
        read(path)
    assert "is a folder" in one_line(info.value)


# ------------------------------------------- 3c. sizes declared in the input
def test_qsim_header_qubit_count_is_bounded():
    with pytest.raises(CircuitParseError) as info:
        parse_qsim("100000000\n0 h 0\n", "big.qsim")
    msg = one_line(info.value)
    assert "line 1" in msg and "100000000" in msg and "4096" in msg, msg


def test_qsim_header_at_the_bound_is_accepted():
    gc = parse_qsim("4096\n0 h 4095\n", "edge.qsim")
    assert gc.n_qubits == 4096 and gc.gates[0].qubits == (4095,)


@pytest.mark.parametrize(
    "decl, line",
    [
        ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2000000000];\nh q[0];\n', 3),
        ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg a[3000];\n\nqreg b[3000];\nh a[0];\n', 5),
        ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2000000000];\n', 4),
        ('OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2000000000] q;\nh q[0];\n', 3),
        ('OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nbit[2000000000] c;\n', 4),
        ('OPENQASM 3.0;\ninclude "stdgates.inc";\nh $2000000000;\n', 3),
    ],
    ids=["qasm2-qreg", "qasm2-total", "qasm2-creg", "qasm3-qubit", "qasm3-bit", "qasm3-physical"],
)
def test_qasm_declared_register_sizes_are_bounded(tmp_path, decl, line):
    """Refused before Qiskit's parser sees them (before the fix it panicked in Rust)."""
    path = write(tmp_path / "big.qasm", decl)
    out = run_isolated(
        f"""
        from qsimdist.frontends import load
        attempt(lambda: load({str(path)!r}))
        """
    )
    assert "RAISED CircuitParseError" in out, out
    assert f"line {line}" in out and ("4096" in out or "65536" in out), out


def test_qasm_register_just_under_the_bound_loads(tmp_path):
    path = write(tmp_path / "edge.qasm",
                 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg a[4000];\nqreg b[96];\nh b[95];\n')
    assert load(path).n_qubits == 4096


def _npz_with_lying_header(shape: tuple[int, ...]) -> bytes:
    """An .npz whose arr_0.npy header claims ``shape`` (complex128) but holds 16 bytes."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=complex))
    header["shape"] = shape
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    member.write(np.zeros(1, dtype=complex).tobytes())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("arr_0.npy", member.getvalue())
    return buf.getvalue()


def test_npz_member_header_claiming_huge_shape_is_refused(tmp_path):
    (tmp_path / "n.json").write_text(json.dumps({"inputs": [["a"]], "output": ["a"],
                                                 "size_dict": {"a": 2**40}}))
    (tmp_path / "n.npz").write_bytes(_npz_with_lying_header((2**40,)))
    out = run_isolated(
        f"""
        from qsimdist.network import load_network
        attempt(lambda: load_network({str(tmp_path / "n.json")!r}))
        """,
        memory_gib=4,
    )
    assert "RAISED CircuitParseError" in out and "arr_0" in out, out
    assert "2^40" in out or str(2**40) in out, out


def test_npz_that_is_not_a_zip_file(tmp_path, saved_network):
    npz = saved_network.with_suffix(".npz")
    with open(npz, "wb") as fh:
        np.save(fh, np.zeros(3))  # a bare .npy under the .npz name
    with pytest.raises(CircuitParseError) as info:
        load(saved_network)
    assert "net.npz" in one_line(info.value)


def test_npz_with_non_numeric_array_is_refused(tmp_path):
    (tmp_path / "n.json").write_text(json.dumps({"inputs": [["a"]], "output": ["a"],
                                                 "size_dict": {"a": 2}}))
    np.savez(tmp_path / "n.npz", arr_0=np.array(["x", "y"]))
    with pytest.raises(CircuitParseError) as info:
        load_network(tmp_path / "n.json")
    msg = one_line(info.value)
    assert "arr_0" in msg and "<U1" in msg, msg


def test_network_npz_still_loads(saved_network):
    net = load(saved_network)
    ref = qsimdist.plan(small_circuit(), bitstrings="00").network
    assert net.arrays is not None and len(net.arrays) == len(ref.arrays)
    for a, b in zip(net.arrays, ref.arrays):
        np.testing.assert_array_equal(a, b)


# -------------------------------------------------- 5. undefined numbers
@pytest.mark.parametrize(
    "text, line, value",
    [
        ("2\n0 rx 0 nan\n", 2, "nan"),
        ("2\n0 h 0\n1 fs 0 1 inf 0.5\n", 3, "inf"),
        ("2\n0 rz 1 -inf\n", 2, "-inf"),
        ("2\n0 cp 0 1 1e400\n", 2, "1e400"),
    ],
    ids=["rx-nan", "fs-inf", "rz-minus-inf", "cp-overflow"],
)
def test_qsim_non_finite_angles_name_the_line(text, line, value):
    with pytest.raises(CircuitParseError) as info:
        parse_qsim(text, "bad.qsim")
    msg = one_line(info.value)
    assert f"line {line}" in msg and value in msg and "finite" in msg, msg


@pytest.mark.parametrize("angle", [float("nan"), float("inf"), -float("inf")])
def test_qiskit_non_finite_parameter_names_the_instruction(angle):
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.rx(angle, 1)
    with pytest.raises(QsimdistError) as info:
        load(qc)
    msg = one_line(info.value)
    assert "'rx'" in msg and "position 1" in msg and "finite" in msg, msg


def test_qiskit_non_finite_global_phase_is_refused():
    qc = QuantumCircuit(1, global_phase=float("nan"))
    qc.h(0)
    with pytest.raises(QsimdistError) as info:
        load(qc)
    assert "global phase" in one_line(info.value)


@pytest.mark.parametrize(
    "text, line",
    [
        ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrx(1e400) q[0];\n', 4),
        ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n\nrx(0*1e400) q[0];\n', 5),
        ('OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nrz(-1e400) q[0];\n', 4),
    ],
    ids=["qasm2-inf", "qasm2-nan", "qasm3-inf"],
)
def test_qasm_non_finite_angles_name_the_line(tmp_path, text, line):
    with pytest.raises(CircuitParseError) as info:
        load(write(tmp_path / "bad.qasm", text))
    msg = one_line(info.value)
    assert f"line {line}" in msg and "finite" in msg, msg


def test_qasm_non_finite_from_an_expression_names_the_instruction(tmp_path):
    text = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\nrx(exp(1000)) q[1];\n'
    with pytest.raises(CircuitParseError) as info:
        load(write(tmp_path / "bad.qasm", text))
    msg = one_line(info.value)
    assert "bad.qasm" in msg and "'rx'" in msg and "finite" in msg, msg


# -------------------------------------------------- 6. the qsim time column
@pytest.mark.parametrize(
    "text, line, words",
    [
        ("2\nabc h 0\n", 2, ["abc", "time"]),
        ("2\n-1 h 0\n", 2, ["-1", "time"]),
        ("2\n1.5 h 0\n", 2, ["1.5", "time"]),
        ("2\n0 h 0\n2 h 1\n1 cz 0 1\n", 4, ["1", "2", "decrease"]),
        ("2\n0 h 0\n0 cz 0 1\n", 3, ["qubit 0", "time 0"]),
        ("3\n0 h 0\n1 h 1\n1 cz 2 1\n", 4, ["qubit 1", "time 1"]),
    ],
    ids=["not-a-number", "negative", "fractional", "out-of-order", "shared-qubit",
         "shared-qubit-later-moment"],
)
def test_qsim_time_column_is_checked(text, line, words):
    with pytest.raises(CircuitParseError) as info:
        parse_qsim(text, "t.qsim")
    msg = one_line(info.value)
    assert f"line {line}" in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def test_qsim_time_column_valid_moments():
    gc = parse_qsim("3\n0 h 0\n0 h 1\n0 h 2\n1 cz 0 1\n3 cz 1 2\n3 m 0\n", "ok.qsim")
    assert [g.qubits for g in gc.gates] == [(0,), (1,), (2,), (0, 1), (1, 2)]


def test_bundled_qsim_files_have_valid_time_columns():
    for path in sorted((ROOT / "circuits").glob("*.qsim")):
        gc = load(path)
        assert gc.n_qubits == int(path.read_text().split()[0])
        assert len(gc.gates) > gc.n_qubits


# ---------------------------------------------------- 9. the plan loader
@pytest.mark.parametrize(
    "meta, words",
    [
        ([1, 2], ["meta", "object"]),
        ("abc", ["meta", "object"]),
        ({"bitstring": 12345}, ["meta.bitstring", "12345", "string"]),
        ({"bitstring": "0x"}, ["meta.bitstring", "0, 1"]),
        ({"bitstring": "0*0", "n_qubits": 2}, ["meta.bitstring", "3", "n_qubits"]),
        ({"n_qubits": -1}, ["meta.n_qubits", "-1"]),
        ({"n_qubits": "2"}, ["meta.n_qubits"]),
        ({"n_qubits": True}, ["meta.n_qubits"]),
        ({"order": "reversed"}, ["meta.order", "qiskit", "natural"]),
        ({"bitstring": "**", "n_qubits": 2}, ["meta.bitstring", "open"]),
    ],
    ids=["list", "string", "bitstring-int", "bitstring-chars", "bitstring-length",
         "n-negative", "n-string", "n-bool", "order", "stars-vs-output"],
)
def test_plan_meta_is_validated(saved_plan, meta, words):
    data = json.loads(saved_plan.read_text())
    data["meta"] = meta
    saved_plan.write_text(json.dumps(data))
    with pytest.raises(PlanFormatError) as info:
        Plan.load(saved_plan)
    msg = one_line(info.value)
    for w in words:
        assert w in msg, (w, msg)


def test_plan_meta_valid_and_extra_keys_pass(saved_plan):
    data = json.loads(saved_plan.read_text())
    assert data["meta"]["bitstring"] == "0*" and data["meta"]["n_qubits"] == 2
    data["meta"]["anything"] = {"x": [1, 2]}
    saved_plan.write_text(json.dumps(data))
    plan = Plan.load(saved_plan)
    assert plan.meta["anything"] == {"x": [1, 2]} and plan.meta["order"] == "qiskit"
    value = np.asarray(plan.execute()).reshape(-1)
    np.testing.assert_allclose(value, [2**-0.5, 0], atol=1e-6)


def test_plan_without_meta_still_loads(saved_plan):
    data = json.loads(saved_plan.read_text())
    del data["meta"]
    saved_plan.write_text(json.dumps(data))
    assert Plan.load(saved_plan).meta == {}


@pytest.mark.parametrize("reader", ["plan", "network"])
def test_deeply_nested_json_is_refused_in_one_line(tmp_path, reader):
    path = write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(QsimdistError) as info:
        Plan.load(path) if reader == "plan" else load(path)
    msg = one_line(info.value)
    assert "deep.json" in msg and "nested" in msg, msg


# ------------------------------------------------ 10a. short messages
def test_shorten_cuts_long_values_and_says_how_long():
    s = shorten("a" * 200_000_000)
    assert len(s) < 130 and s.startswith("'aaaa") and "…" in s and "(200000000 chars)" in s
    assert shorten("abc") == "'abc'"
    assert shorten(12345) == "12345"
    assert len(shorten(list(range(10**5)))) < 130


def test_qsim_five_megabyte_header_gives_a_short_message():
    with pytest.raises(CircuitParseError) as info:
        parse_qsim("q" * 5_000_000 + "\n0 h 0\n", "big.qsim")
    msg = one_line(info.value, limit=300)
    assert "line 1" in msg and "5000000 chars" in msg, msg


def test_qsim_long_gate_name_and_arguments_give_short_messages():
    for text in ("2\n0 " + "g" * 10**6 + " 0\n", "2\n0 rz 0 " + "9" * 10**6 + "x\n",
                 "2\n0 h " + "1" * 10**6 + "\n"):
        with pytest.raises(CircuitParseError) as info:
            parse_qsim(text, "big.qsim")
        assert "line 2" in one_line(info.value, limit=300)


@pytest.mark.parametrize(
    "check", [check_dtype, check_order, parse_memory], ids=["dtype", "order", "memory"]
)
def test_huge_option_strings_give_short_messages(check):
    with pytest.raises(InvalidInputError) as info:
        check("x" * 10_000_000)
    msg = one_line(info.value, limit=300)
    assert "10000000 chars" in msg, msg


def test_qasm_long_token_gives_short_message(tmp_path):
    text = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n' + "g" * 5_000_000 + " q[0];\n"
    with pytest.raises(CircuitParseError) as info:
        load(write(tmp_path / "long.qasm", text))
    assert "line 4" in one_line(info.value, limit=400)


def test_network_long_index_name_gives_short_message(tmp_path):
    name = "i" * 5_000_000
    path = write(tmp_path / "n.json", json.dumps(
        {"inputs": [[name]], "output": [], "size_dict": {name: 0}}))
    with pytest.raises(CircuitParseError) as info:
        load_network(path)
    assert "5000000 chars" in one_line(info.value, limit=300)


# ------------------------------------- 14a. a gate the file defines wins
def test_qasm2_file_defining_cu_overrides_the_legacy_cu(tmp_path):
    text = textwrap.dedent(
        """\
        OPENQASM 2.0;
        include "qelib1.inc";
        gate cu c,t { cx c,t; h t; }
        qreg q[3];
        h q[0];
        cu q[0],q[1];
        cu q[1],q[2];
        """
    )
    gc = load(write(tmp_path / "pea.qasm", text))
    ref = QuantumCircuit(3)
    ref.h(0)
    for c, t in ((0, 1), (1, 2)):
        ref.cx(c, t)
        ref.h(t)
    sv = Statevector(ref).data
    res = qsimdist.amplitudes(gc, "***", dtype="complex128")
    np.testing.assert_allclose(np.asarray(res.amplitudes), sv, atol=1e-10)
    # The legacy built-ins still serve files that do not define them.
    plain = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncu(0.1,0.2,0.3,0.4) q[0],q[1];\n'
    gc2 = load(write(tmp_path / "plain.qasm", plain))
    ref2 = qasm2.loads(plain, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    res2 = qsimdist.amplitudes(gc2, "**", dtype="complex128")
    np.testing.assert_allclose(np.asarray(res2.amplitudes), Statevector(ref2).data, atol=1e-10)


def test_plan_array_fields_give_short_messages(tmp_path):
    """A 10 MB dtype string inside a plan's arrays, or a 10 MB path, gives a short message."""
    import json as _json

    import qsimdist
    from qsimdist.errors import PlanFormatError
    from qsimdist.planner.plan import Plan

    from qsimdist.bundled import bundled_circuit

    plan = qsimdist.plan(str(bundled_circuit("ghz_n12.qasm")), bitstrings="0" * 12,
                         memory_limit="none")
    for edit in (lambda d: d["network"]["arrays"][0].update(dtype="x" * 10_000_000),
                 lambda d: d.update(path="y" * 10_000_000)):
        d = plan.to_dict()
        edit(d)
        path = tmp_path / "p.json"
        path.write_text(_json.dumps(d))
        with pytest.raises(PlanFormatError) as info:
            Plan.load(path)
        assert len(str(info.value)) < 400
