"""qsimdist reproduces the reference amplitude of every bundled circuit."""

from __future__ import annotations

import pytest

import qsimdist
from qsimdist.bundled import bundled_circuit, manifest

ENTRIES = manifest()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_reference_amplitude(entry):
    ref = entry["reference"]
    want = complex(ref["re"], ref["im"])
    order = entry.get("bitstring_order", "qiskit")
    got = qsimdist.amplitude(
        bundled_circuit(entry["file"]), ref["bitstring"], order=order, dtype="complex128"
    )
    assert abs(got - want) <= 1e-10 * max(abs(want), 1e-3)


def test_unknown_bundled_circuit_lists_valid():
    with pytest.raises(qsimdist.InvalidInputError, match="ghz_n12.qasm"):
        bundled_circuit("nope.qasm")


def test_bundled_circuit_by_name_from_any_folder(tmp_path, monkeypatch, capsys):
    """``qsimdist amplitude ghz_n12 ...`` reads the bundled file wherever it runs."""
    from qsimdist.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["amplitude", "ghz_n12", "111111111111", "000000000001"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["111111111111", "+7.07106769e-01"]
    assert lines[1].split()[:2] == ["000000000001", "+0.00000000e+00"]
    by_suffix = qsimdist.amplitude("qft_n6.qasm3", "000000", dtype="complex128")
    assert by_suffix == pytest.approx(qsimdist.amplitude(bundled_circuit("qft_n6.qasm"),
                                                         "000000", dtype="complex128"))


def test_a_file_of_that_name_wins_over_the_bundled_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ghz_n12.qasm").write_text(
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nx q[0];\n')
    assert qsimdist.amplitude("ghz_n12.qasm", "01") == pytest.approx(1.0)


def test_unknown_name_lists_the_bundled_circuits(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(qsimdist.CircuitParseError,
                       match=r"no file or bundled circuit 'nope'.*ghz_n12, ghz_n12\.qasm3"):
        qsimdist.amplitude("nope", "0")
