"""Property-based fuzzing of every file reader: random bytes and mutated valid files.

Each frontend (chosen by suffix through ``qsimdist.frontends.load``) and
``Plan.load`` may only succeed or raise a ``QsimdistError``; any other
exception, a hang or a crash is a bug. Seeds are the bundled circuits, a small
saved plan and a small network ``.json`` with its ``.npz``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qiskit import QuantumCircuit

import qsimdist
from qsimdist import QsimdistError
from qsimdist.frontends import load
from qsimdist.network import save_network
from qsimdist.planner.plan import Plan

ROOT = Path(__file__).resolve().parents[1]
#: per target; raise with $QSIMDIST_FUZZ_EXAMPLES for a longer local search
EXAMPLES = int(os.environ.get("QSIMDIST_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def seeds():
    """suffix-or-kind -> (seed bytes, folder to write mutated files in)."""
    work = Path(tempfile.mkdtemp(prefix="qsimdist-fuzz-"))
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    plan_path = qsimdist.plan(qc, bitstrings="0*").save(work / "seed-plan.json")
    net_path = work / "seed-net.json"
    save_network(qsimdist.plan(qc, bitstrings="00").network, net_path)
    data = {
        ".qasm": (ROOT / "circuits" / "ghz_n12.qasm").read_bytes(),
        ".qasm3": (ROOT / "circuits" / "qft_n6.qasm3").read_bytes(),
        ".qsim": (ROOT / "circuits" / "rqc_3x4_m8.qsim").read_bytes(),
        ".json": net_path.read_bytes(),
        ".npz": net_path.with_suffix(".npz").read_bytes(),
        "plan": plan_path.read_bytes(),
    }
    yield data, work
    shutil.rmtree(work, ignore_errors=True)


def _mutate(seed: bytes, edits: list[tuple[int, int, int, bytes]]) -> bytes:
    """Apply (kind, position, length, payload) edits: 0 replace, 1 insert, 2 delete, 3 truncate."""
    out = bytearray(seed)
    for kind, pos, length, payload in edits:
        pos = pos % (len(out) + 1)
        if kind == 0:
            out[pos:pos + len(payload)] = payload
        elif kind == 1:
            out[pos:pos] = payload
        elif kind == 2:
            del out[pos:pos + length]
        else:
            del out[pos:]
    return bytes(out)


EDITS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 1 << 16), st.integers(1, 64),
              st.binary(min_size=1, max_size=16)
              | st.sampled_from([b"nan", b"inf", b"1e400", b"-1", b"99999999999", b"[", b"{",
                                 b"\x00", b"*", b"qreg q[5000];", b"0 h 0\n", b'"', b"\n"])),
    min_size=1, max_size=6,
)


def _read(kind: str, path: Path):
    return Plan.load(path) if kind == "plan" else load(path)


def _check(kind: str, path: Path) -> None:
    try:
        _read(kind, path)
    except QsimdistError as exc:
        msg = str(exc)
        assert "\n" not in msg and len(msg) < 2000, msg[:3000]


KINDS = [".qasm", ".qasm3", ".qsim", ".json", "plan"]


def _target(work: Path, kind: str) -> Path:
    return work / ("fuzz-plan.json" if kind == "plan" else f"fuzz{kind}")


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(raw=st.binary(max_size=2048))
def test_random_bytes_only_succeed_or_raise_qsimdist_errors(seeds, kind, raw):
    _, work = seeds
    path = _target(work, kind)
    (work / "fuzz.npz").unlink(missing_ok=True)  # a .json target is read without arrays
    path.write_bytes(raw)
    _check(kind, path)


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(edits=EDITS)
def test_mutated_valid_files_only_succeed_or_raise_qsimdist_errors(seeds, kind, edits):
    data, work = seeds
    path = _target(work, kind)
    if kind == ".json":  # the network keeps its intact arrays next to it
        (work / "fuzz.npz").write_bytes(data[".npz"])
    path.write_bytes(_mutate(data[kind], edits))
    _check(kind, path)


@FUZZ
@given(edits=EDITS)
def test_mutated_npz_only_succeeds_or_raises_qsimdist_errors(seeds, edits):
    data, work = seeds
    path = work / "fuzz.json"
    path.write_bytes(data[".json"])
    (work / "fuzz.npz").write_bytes(_mutate(data[".npz"], edits))
    _check(".json", path)


def test_seeds_themselves_load(seeds):
    """The unmutated seeds load (so the mutations start from valid files)."""
    data, work = seeds
    for kind in KINDS:
        path = _target(work, kind)
        if kind == ".json":
            (work / "fuzz.npz").write_bytes(data[".npz"])
        path.write_bytes(data[kind])
        result = _read(kind, path)
        if kind == "plan":
            assert result.meta["bitstring"] == "0*"
        elif kind == ".json":
            assert result.arrays is not None and len(result.arrays) == result.num_tensors
        else:
            assert result.n_qubits == {".qasm": 12, ".qasm3": 6, ".qsim": 12}[kind]
