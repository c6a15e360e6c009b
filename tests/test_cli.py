"""Tests of the ``qsimdist`` command line.

The CLI runs in-process through :func:`qsimdist.cli.main` (which returns the
exit code); one test runs ``python -m qsimdist`` in a subprocess to prove the
installed entry point works and that bad input gives no traceback.

Reference amplitudes come from Qiskit's ``Statevector``: for a bitstring ``b``
in Qiskit order (rightmost character = qubit 0) the amplitude is
``sv[int(b, 2)]``; in natural order (character i = qubit i) it is
``sv[int(b[::-1], 2)]``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2, qasm3
from qiskit.quantum_info import Statevector

from qsimdist.cli import main

#: complex64 tolerance, relative to the norm of the state vector (which is 1)
TOL64 = 1e-5
TOL128 = 1e-10

_TEXT_LINE = re.compile(
    r"^(?P<b>[01]+)\s+(?P<re>[+-]\d\.\d+e[+-]\d+)\s+(?P<im>[+-]\d\.\d+e[+-]\d+)j(?:\s+p=(?P<p>\S+))?$"
)


# --------------------------------------------------------------------- helpers
def cli(capsys, *args) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_error(rc: int, err: str, *words: str) -> None:
    """Exit code 2, exactly one stderr line 'qsimdist: error: ...' holding every word (under
    --json: one JSON object whose error message holds them)."""
    assert rc == 2, f"exit code {rc}, stderr {err!r}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    line = lines[0]
    if line.startswith("{"):
        obj = json.loads(line)
        assert obj["exit_code"] == 2 and set(obj) == {"error", "exit_code"}, line
        line = obj["error"]["message"]
    else:
        assert line.startswith("qsimdist: error:"), line
    for w in words:
        assert w in line, f"{w!r} not in {line!r}"


def parse_text(out: str) -> dict[str, complex]:
    """Amplitudes printed by 'amplitude' or 'run' in text mode, keyed by bitstring."""
    result: dict[str, complex] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        m = _TEXT_LINE.match(line.strip())
        assert m, f"unexpected output line {line!r}"
        a = complex(float(m["re"]), float(m["im"]))
        if m["p"] is not None:
            assert float(m["p"]) == pytest.approx(abs(a) ** 2, abs=1e-6)
        result[m["b"]] = a
    return result


def parse_json(out: str) -> dict:
    """stdout must be exactly one JSON object."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line of JSON, got {out!r}"
    obj = json.loads(lines[0])
    assert isinstance(obj, dict)
    return obj


def json_amplitudes(obj: dict) -> dict[str, complex]:
    return {e["bitstring"]: complex(e["re"], e["im"]) for e in obj["amplitudes"]}


def ref_amp(sv: np.ndarray, bitstring: str, order: str = "qiskit") -> complex:
    b = bitstring if order == "qiskit" else bitstring[::-1]
    return complex(sv[int(b, 2)])


def expand(pattern: str) -> list[str]:
    """Independent expansion of a starred pattern: leftmost '*' is the most significant."""
    stars = [k for k, c in enumerate(pattern) if c == "*"]
    out = []
    for bits in itertools.product("01", repeat=len(stars)):
        chars = list(pattern)
        for k, b in zip(stars, bits):
            chars[k] = b
        out.append("".join(chars))
    return out


def small_circuit() -> QuantumCircuit:
    """4 qubits, asymmetric so qubit-order mistakes show."""
    qc = QuantumCircuit(4)
    qc.h(0)
    qc.cx(0, 1)
    qc.rx(0.3, 2)
    qc.sx(3)
    qc.ry(0.7, 1)
    qc.cx(1, 3)
    qc.rzz(0.4, 2, 3)
    qc.u(0.2, 0.5, -0.3, 0)
    qc.cz(0, 2)
    qc.t(3)
    qc.ry(1.1, 2)
    return qc


def brickwork(n: int, depth: int, seed: int) -> QuantumCircuit:
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n)
    for layer in range(depth):
        for q in range(n):
            qc.u(*rng.uniform(0, 2 * np.pi, 3), q)
        for q in range(layer % 2, n - 1, 2):
            qc.cx(q, q + 1)
    return qc


@pytest.fixture(scope="module")
def circ_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli_circuits")


@pytest.fixture(scope="module")
def small(circ_dir) -> tuple[Path, np.ndarray]:
    """A 4-qubit OpenQASM 2 file and its exact state vector."""
    qc = small_circuit()
    path = circ_dir / "small.qasm"
    path.write_text(qasm2.dumps(qc))
    return path, Statevector(qc).data


@pytest.fixture(scope="module")
def sliced_case(circ_dir) -> tuple[Path, np.ndarray]:
    """A 10-qubit random brickwork circuit whose 5-star amplitudes need slicing under 3 KiB."""
    qc = brickwork(10, 12, seed=5)
    path = circ_dir / "brick10.qasm"
    path.write_text(qasm2.dumps(qc))
    return path, Statevector(qc).data


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ------------------------------------------------------------------ good paths
def test_amplitude_text_matches_statevector(capsys, small):
    path, sv = small
    bits = ["0000", "0011", "1010", "1111", "0110"]
    rc, out, err = cli(capsys, "amplitude", path, *bits)
    assert rc == 0, err
    amps = parse_text(out)
    assert list(amps) == bits
    for b in bits:
        assert abs(amps[b] - ref_amp(sv, b)) <= TOL64, b
    assert "Traceback" not in err


def test_amplitude_default_is_all_zeros(capsys, small):
    path, sv = small
    rc, out, err = cli(capsys, "amplitude", path)
    assert rc == 0, err
    amps = parse_text(out)
    assert list(amps) == ["0000"]
    assert abs(amps["0000"] - sv[0]) <= TOL64


def test_amplitude_json(capsys, small):
    path, sv = small
    rc, out, err = cli(capsys, "amplitude", path, "0101", "1110", "--json")
    assert rc == 0, err
    obj = parse_json(out)
    assert {"n_qubits", "dtype", "amplitudes", "stats"} <= set(obj)
    assert obj["n_qubits"] == 4
    assert obj["dtype"] == "complex64"
    assert isinstance(obj["stats"], dict)
    assert [e["bitstring"] for e in obj["amplitudes"]] == ["0101", "1110"]
    for e in obj["amplitudes"]:
        assert set(e) == {"bitstring", "re", "im"}
        assert abs(complex(e["re"], e["im"]) - ref_amp(sv, e["bitstring"])) <= TOL64


def test_amplitude_complex128(capsys, small):
    path, sv = small
    rc, out, err = cli(capsys, "amplitude", path, "****", "--dtype", "complex128", "--json")
    assert rc == 0, err
    obj = parse_json(out)
    assert obj["dtype"] == "complex128"
    amps = json_amplitudes(obj)
    got = np.array([amps[b] for b in expand("****")])
    np.testing.assert_allclose(got, sv, atol=TOL128)


@pytest.mark.parametrize("pattern", ["1*0*", "*0**", "**11", "****"])
def test_starred_bitstring_expands_in_documented_order(capsys, small, pattern):
    path, sv = small
    rc, out, err = cli(capsys, "amplitude", path, pattern, "--json")
    assert rc == 0, err
    obj = parse_json(out)
    k = pattern.count("*")
    labels = [e["bitstring"] for e in obj["amplitudes"]]
    assert len(labels) == 2**k
    assert labels == expand(pattern)
    for b, a in json_amplitudes(obj).items():
        assert abs(a - ref_amp(sv, b)) <= TOL64, b


def test_starred_bitstring_text_output(capsys, small):
    path, sv = small
    rc, out, err = cli(capsys, "amplitude", path, "0*1*")
    assert rc == 0, err
    amps = parse_text(out)
    assert list(amps) == ["0010", "0011", "0110", "0111"]
    for b, a in amps.items():
        assert abs(a - ref_amp(sv, b)) <= TOL64


@pytest.mark.parametrize("pattern", ["0011", "1000", "1*0*", "**10"])
def test_order_natural_reverses_mapping(capsys, small, pattern):
    path, sv = small
    rc, out, err = cli(capsys, "amplitude", path, pattern, "--order", "natural", "--json")
    assert rc == 0, err
    amps = json_amplitudes(parse_json(out))
    assert list(amps) == expand(pattern)
    for b, a in amps.items():
        # character i is qubit i: the Qiskit-order string is the reverse
        assert abs(a - ref_amp(sv, b[::-1])) <= TOL64, b
        assert abs(a - ref_amp(sv, b, order="natural")) <= TOL64, b


def test_order_natural_differs_from_qiskit(capsys, small):
    path, _ = small
    rc1, out1, _ = cli(capsys, "amplitude", path, "0001", "--json")
    rc2, out2, _ = cli(capsys, "amplitude", path, "0001", "--order", "natural", "--json")
    assert rc1 == rc2 == 0
    a1 = json_amplitudes(parse_json(out1))["0001"]
    a2 = json_amplitudes(parse_json(out2))["0001"]
    assert abs(a1 - a2) > 1e-3  # the small circuit is asymmetric


def test_bitstrings_file_with_comments_and_blank_lines(capsys, small, tmp_path):
    path, sv = small
    bfile = write(
        tmp_path / "bits.txt",
        "# bitstrings to evaluate\n\n0001\n   \n1100   # trailing comment\n  1011\n\n# done\n",
    )
    rc, out, err = cli(capsys, "amplitude", path, "0110", "--bitstrings-file", bfile)
    assert rc == 0, err
    amps = parse_text(out)
    assert list(amps) == ["0110", "0001", "1100", "1011"]
    for b, a in amps.items():
        assert abs(a - ref_amp(sv, b)) <= TOL64


def test_plan_then_run_gives_same_amplitudes(capsys, small, tmp_path):
    path, sv = small
    plan_file = tmp_path / "plan.json"
    rc, out, err = cli(capsys, "plan", path, "-b", "*1*0", "-o", plan_file)
    assert rc == 0, err
    assert plan_file.exists()
    saved = json.loads(plan_file.read_text())
    assert saved["schema"] == "qsimdist.plan"
    assert isinstance(saved["version"], int)

    rc, out, err = cli(capsys, "run", plan_file, "--json")
    assert rc == 0, err
    ran = parse_json(out)
    assert {"n_qubits", "dtype", "amplitudes", "stats"} <= set(ran)
    assert ran["n_qubits"] == 4
    run_amps = json_amplitudes(ran)

    rc, out, err = cli(capsys, "amplitude", path, "*1*0", "--json")
    assert rc == 0, err
    amp_amps = json_amplitudes(parse_json(out))

    assert list(run_amps) == list(amp_amps) == expand("*1*0")
    for b in run_amps:
        assert abs(run_amps[b] - amp_amps[b]) <= TOL64
        assert abs(run_amps[b] - ref_amp(sv, b)) <= TOL64

    # text mode of 'run' too
    rc, out, err = cli(capsys, "run", plan_file)
    assert rc == 0, err
    text_amps = parse_text(out)
    assert list(text_amps) == expand("*1*0")
    for b, a in text_amps.items():
        assert abs(a - ref_amp(sv, b)) <= TOL64


def test_plan_json_summary(capsys, small, tmp_path):
    path, _ = small
    plan_file = tmp_path / "p.json"
    rc, out, err = cli(capsys, "plan", path, "--json", "-o", plan_file)
    assert rc == 0, err
    obj = parse_json(out)
    assert obj["file"] == str(plan_file)
    assert obj["stats"]["n_slices"] >= 1
    assert json.loads(plan_file.read_text())["schema"] == "qsimdist.plan"


def test_plan_natural_order_then_run(capsys, small, tmp_path):
    path, sv = small
    plan_file = tmp_path / "nat.json"
    rc, _, err = cli(capsys, "plan", path, "-b", "1**0", "--order", "natural", "-o", plan_file)
    assert rc == 0, err
    rc, out, err = cli(capsys, "run", plan_file, "--json")
    assert rc == 0, err
    amps = json_amplitudes(parse_json(out))
    assert list(amps) == expand("1**0")
    for b, a in amps.items():
        assert abs(a - ref_amp(sv, b, order="natural")) <= TOL64


def test_plan_with_memory_limit_slices_and_stays_exact(capsys, sliced_case, tmp_path):
    path, sv = sliced_case
    pattern = "*0*1*0*1*0"
    plan_file = tmp_path / "sliced.json"
    rc, out, err = cli(capsys, "plan", path, "-b", pattern, "--memory-limit", "3KiB", "-o", plan_file)
    assert rc == 0, err
    saved = json.loads(plan_file.read_text())
    assert saved["schema"] == "qsimdist.plan"
    assert saved["stats"]["n_slices"] > 1
    assert saved["stats"]["peak_bytes"] <= 3 * 1024
    assert len(saved["sliced"]) >= 1

    rc, out, err = cli(capsys, "run", plan_file, "--json")
    assert rc == 0, err
    amps = json_amplitudes(parse_json(out))
    assert list(amps) == expand(pattern)
    for b, a in amps.items():
        assert abs(a - ref_amp(sv, b)) <= TOL64, b

    rc, out, err = cli(capsys, "amplitude", path, pattern, "--memory-limit", "3KiB", "--json")
    assert rc == 0, err
    obj = parse_json(out)
    for b, a in json_amplitudes(obj).items():
        assert abs(a - ref_amp(sv, b)) <= TOL64, b


def test_memory_limit_the_unlimited_plan_fits_is_accepted(capsys, circ_dir, tmp_path):
    """If the plan made without a limit peaks at P bytes, --memory-limit P must plan
    (no slicing needed), not be refused as too small."""
    qc = brickwork(5, 4, seed=5)
    path = write(circ_dir / "brick5_d4.qasm", qasm2.dumps(qc))
    sv = Statevector(qc).data
    rc, out, err = cli(capsys, "plan", path, "-b", "*****", "--json")
    assert rc == 0, err
    peak = parse_json(out)["stats"]["peak_bytes"]
    rc, out, err = cli(capsys, "amplitude", path, "*****", "--memory-limit", peak, "--json")
    assert rc == 0, f"a limit of {peak} B (the unlimited plan's own peak) was refused: {err}"
    obj = parse_json(out)
    assert obj["stats"]["peak_bytes"] <= peak
    for b, a in json_amplitudes(obj).items():
        assert abs(a - ref_amp(sv, b)) <= TOL64, b


def test_memory_limit_under_three_outputs_is_not_a_traceback(capsys, circ_dir):
    """A limit above the output size but below 3x of it must not escape as a
    cotengra exception (it was KeyError: 'tree' from the hyper-optimiser)."""
    qc = brickwork(5, 10, seed=5)
    path = write(circ_dir / "brick5_d10.qasm", qasm2.dumps(qc))
    sv = Statevector(qc).data
    rc, out, err = cli(capsys, "amplitude", path, "*****", "--memory-limit", "700", "--json")
    if rc == 0:
        obj = parse_json(out)
        assert obj["stats"]["peak_bytes"] <= 700
        for b, a in json_amplitudes(obj).items():
            assert abs(a - ref_amp(sv, b)) <= TOL64, b
    else:
        assert_error(rc, err, "memory limit")


def test_version_command(capsys):
    import qsimdist

    rc, out, _ = cli(capsys, "version")
    assert rc == 0
    assert out.strip() == qsimdist.__version__
    rc, out, _ = cli(capsys, "--version")
    assert rc == 0
    assert out.strip() == qsimdist.__version__


# ------------------------------------------------------------------ bad input
def test_missing_file(capsys, tmp_path):
    missing = tmp_path / "nope.qasm"
    rc, _, err = cli(capsys, "amplitude", missing, "00")
    assert_error(rc, err, "no such file", str(missing))


def test_unknown_suffix(capsys, tmp_path):
    path = write(tmp_path / "circ.txt", "OPENQASM 2.0;\nqreg q[1];\n")
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "circ.txt", ".qasm", ".qasm3", ".qsim", ".json")


def test_folder_instead_of_file(capsys, tmp_path):
    folder = tmp_path / "dir.qasm"
    folder.mkdir()
    rc, _, err = cli(capsys, "amplitude", folder)
    assert_error(rc, err, "folder")


def test_unparsable_qasm2_gives_line(capsys, tmp_path):
    path = write(
        tmp_path / "bad.qasm",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nfoo q[0];\ncx q[0],q[1];\n',
    )
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "bad.qasm", "line 4", "foo")


def test_unparsable_qasm2_missing_semicolon(capsys, tmp_path):
    path = write(
        tmp_path / "semi.qasm",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0]\ncx q[0],q[1];\n',
    )
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "semi.qasm", "OpenQASM 2")
    assert re.search(r"line [45]\b", err), err


def test_unparsable_qasm3(capsys, tmp_path):
    path = write(
        tmp_path / "bad3.qasm3",
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nh q[0];\ncx q[0] q[1];\n',
    )
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "bad3.qasm3", "OpenQASM 3")


def test_unparsable_qasm3_gives_line(capsys, tmp_path):
    """errors.CircuitParseError promises 'the message gives the line'; OpenQASM 3
    syntax errors currently say only 'QASM3ParsingError syntax error'."""
    path = write(
        tmp_path / "bad3l.qasm3",
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nh q[0];\ncx q[0] q[1];\n',
    )
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "bad3l.qasm3")
    assert re.search(r"line 5\b", err), err


def test_no_openqasm_header(capsys, tmp_path):
    path = write(tmp_path / "nohdr.qasm", 'include "qelib1.inc";\nqreg q[2];\nh q[0];\n')
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "nohdr.qasm", "OPENQASM", "header")


def test_unparsable_qsim_gives_line(capsys, tmp_path):
    path = write(tmp_path / "bad.qsim", "2\n0 h 0\n0 h 1\n\n1 cz 0\n")
    rc, _, err = cli(capsys, "amplitude", path, "--order", "natural")
    assert_error(rc, err, "bad.qsim", "line 5", "cz")


def test_qsim_unknown_gate_cli(capsys, tmp_path):
    path = write(tmp_path / "unk.qsim", "2\n0 h 0\n1 foo 0 1\n")
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "line 3", "foo", "fs", "cz")


_MID_MEASURE_QASM2 = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[2];
creg c[2];
h q[0];
measure q[0] -> c[0];
cx q[0],q[1];
"""

_RESET_QASM2 = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[2];
h q[0];
reset q[0];
cx q[0],q[1];
"""

_IF_QASM2 = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[2];
creg c[2];
h q[0];
if (c==1) x q[1];
"""

_PARAM_QASM3 = """OPENQASM 3.0;
include "stdgates.inc";
input float[64] theta;
qubit[2] q;
rx(theta) q[0];
cx q[0], q[1];
"""


@pytest.mark.parametrize(
    "name, text, words",
    [
        ("mid.qasm", _MID_MEASURE_QASM2, ["'cx'", "position 2", "mid-circuit measurement"]),
        ("reset.qasm", _RESET_QASM2, ["'reset'", "position 1"]),
        ("cond.qasm", _IF_QASM2, ["classically controlled", "position 1"]),
        ("param.qasm3", _PARAM_QASM3, ["unbound parameter", "theta"]),
    ],
)
def test_unsupported_instruction_cli(capsys, tmp_path, name, text, words):
    path = write(tmp_path / name, text)
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, *words)


def test_if_test_written_as_qasm3_is_refused(capsys, tmp_path):
    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(1)
    path = write(tmp_path / "if.qasm3", qasm3.dumps(qc))
    rc, _, err = cli(capsys, "amplitude", path)
    assert_error(rc, err, "classically controlled", "position 2")


def test_unsupported_instructions_python_api():
    from qiskit.circuit import Parameter

    import qsimdist

    def refused(qc, *words):
        with pytest.raises(qsimdist.UnsupportedInstructionError) as info:
            qsimdist.amplitudes(qc, "0" * qc.num_qubits)
        assert isinstance(info.value, NotImplementedError)
        assert isinstance(info.value, qsimdist.QsimdistError)
        for w in words:
            assert w in str(info.value), (w, str(info.value))

    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.measure(0, 0)
    qc.x(0)
    refused(qc, "'x'", "position 2", "measurement")

    qc = QuantumCircuit(2)
    qc.h(0)
    qc.reset(0)  # after use (a reset on a fresh qubit is the identity, accepted)
    refused(qc, "'reset'", "position 1")

    qc = QuantumCircuit(2, 1)
    qc.h(0)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(1)
    refused(qc, "position 2", "classically controlled")

    theta = Parameter("theta")
    qc = QuantumCircuit(2)
    qc.rx(theta, 0)
    refused(qc, "theta", "unbound")


@pytest.mark.parametrize(
    "bits, words",
    [
        ("00000", ["'00000'", "5", "4 qubits"]),
        ("000", ["'000'", "3", "4 qubits"]),
        ("0120", ["'0120'", "'2'", "0, 1, *"]),
        ("01a0", ["'01a0'", "'a'", "0, 1, *"]),
    ],
)
def test_bad_bitstring(capsys, small, bits, words):
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, bits)
    assert_error(rc, err, *words)


def test_bad_bitstring_in_plan(capsys, small, tmp_path):
    path, _ = small
    rc, _, err = cli(capsys, "plan", path, "-b", "01", "-o", tmp_path / "x.json")
    assert_error(rc, err, "'01'", "4 qubits")
    assert not (tmp_path / "x.json").exists()


def test_missing_bitstrings_file(capsys, small, tmp_path):
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, "--bitstrings-file", tmp_path / "none.txt")
    assert_error(rc, err, "none.txt")


def test_unknown_order(capsys, small):
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, "--order", "bigendian")
    assert_error(rc, err, "'bigendian'", "qiskit", "natural")


def test_unknown_dtype(capsys, small):
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, "--dtype", "float32")
    assert_error(rc, err, "'float32'", "complex64", "complex128")


def test_unknown_dtype_in_plan(capsys, small):
    path, _ = small
    rc, _, err = cli(capsys, "plan", path, "--dtype", "complex256")
    assert_error(rc, err, "complex256", "complex64", "complex128")


def test_memory_limit_too_small(capsys, small):
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, "--memory-limit", "1B")
    assert_error(rc, err, "memory limit", "too small")


def test_memory_limit_too_small_in_plan(capsys, small, tmp_path):
    path, _ = small
    rc, _, err = cli(capsys, "plan", path, "--memory-limit", "1B", "-o", tmp_path / "x.json")
    assert_error(rc, err, "memory limit", "too small")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("value", ["lots", "8 parsecs", "-5MB"])
def test_memory_limit_unreadable(capsys, small, value):
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, "--memory-limit", value)
    assert_error(rc, err, repr(value), "GiB")


@pytest.mark.parametrize("value", ["0", "1e400"])
def test_memory_limit_out_of_range(capsys, small, value):
    """Zero and a limit that overflows to infinity are bad input, not a crash."""
    path, _ = small
    rc, _, err = cli(capsys, "amplitude", path, "--memory-limit", value)
    assert_error(rc, err, value)


def test_run_missing_plan(capsys, tmp_path):
    rc, _, err = cli(capsys, "run", tmp_path / "absent.json")
    assert_error(rc, err, "absent.json", "no such plan file")


def test_run_non_json(capsys, tmp_path):
    path = write(tmp_path / "garbage.json", "this is { not json\n")
    rc, _, err = cli(capsys, "run", path)
    assert_error(rc, err, "garbage.json", "not valid JSON")


@pytest.mark.parametrize("content", ['{"a": 1}', "[1, 2, 3]", '"qsimdist.plan"'])
def test_run_json_not_a_plan(capsys, tmp_path, content):
    path = write(tmp_path / "other.json", content)
    rc, _, err = cli(capsys, "run", path)
    assert_error(rc, err, "other.json", "not a qsimdist plan", "qsimdist.plan")


def test_run_plan_with_unsupported_version(capsys, small, tmp_path):
    path, _ = small
    plan_file = tmp_path / "plan.json"
    rc, _, err = cli(capsys, "plan", path, "-o", plan_file)
    assert rc == 0, err
    data = json.loads(plan_file.read_text())
    data["version"] = 999
    plan_file.write_text(json.dumps(data))
    rc, _, err = cli(capsys, "run", plan_file)
    assert_error(rc, err, "version", "999", "not supported")


def test_run_plan_with_tampered_path(capsys, small, tmp_path):
    path, _ = small
    plan_file = tmp_path / "plan.json"
    rc, _, err = cli(capsys, "plan", path, "-b", "****", "-o", plan_file)
    assert rc == 0, err
    data = json.loads(plan_file.read_text())
    data["path"] = [[0, 0]] + data["path"][1:]
    plan_file.write_text(json.dumps(data))
    rc, _, err = cli(capsys, "run", plan_file)
    assert_error(rc, err, "path")


@pytest.mark.parametrize(
    "args, words",
    [
        (["amplitude", "{small}", "--bogus"], ["--bogus"]),
        (["frobnicate"], ["frobnicate"]),
        (["amplitude"], ["circuit"]),
        (["amplitude", "{small}", "--max-time", "soon"], ["--max-time"]),
    ],
)
def test_cli_usage_errors(capsys, small, args, words):
    args = [a.format(small=small[0]) for a in args]
    rc, _, err = cli(capsys, *args)
    assert_error(rc, err, *words)


# ------------------------------------------------------------------ subprocess
def test_entry_point_subprocess(small):
    path, sv = small
    env = dict(os.environ)
    good = subprocess.run(
        [sys.executable, "-m", "qsimdist", "amplitude", str(path), "0110", "1*01", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert good.returncode == 0, good.stderr
    amps = json_amplitudes(parse_json(good.stdout))
    assert list(amps) == ["0110", "1001", "1101"]
    for b, a in amps.items():
        assert abs(a - ref_amp(sv, b)) <= TOL64

    bad = subprocess.run(
        [sys.executable, "-m", "qsimdist", "amplitude", str(path), "0120"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert_error(bad.returncode, bad.stderr, "'0120'", "0, 1, *")


def test_gemm_option(capsys, small):
    """--gemm 3m gives the same amplitudes; tf32 on numpy and unknown modes are refused in
    one line with exit code 2."""
    path, _ = small
    rc, out, err = cli(capsys, "amplitude", path, "0101", "--gemm", "3m", "--json")
    assert rc == 0, err
    rc2, out2, _ = cli(capsys, "amplitude", path, "0101", "--json")
    a = json.loads(out)["amplitudes"][0]
    b = json.loads(out2)["amplitudes"][0]
    assert abs(complex(a["re"], a["im"]) - complex(b["re"], b["im"])) < 1e-6
    for mode, words in (("tf32", "needs backend 'cupy'"), ("4m", "valid: complex, 3m")):
        rc, out, err = cli(capsys, "amplitude", path, "0101", "--gemm", mode)
        assert out == ""
        assert_error(rc, err, words)
