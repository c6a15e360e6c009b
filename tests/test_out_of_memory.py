"""Work the host cannot hold ends in one line naming the size, never in a traceback.

The plan fits the memory limit, but the host has less memory than the limit
assumed (here: an address-space limit of 3 GB on the child process, where a
28-qubit all-open output in complex128 needs 4 GiB). From the command line, in
one process and under ``mpiexec -n 2``: exit code 2 and one line; from Python:
:class:`qsimdist.errors.OutOfMemoryError`, a ``QsimdistError`` and a ``MemoryError``.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from qiskit import QuantumCircuit, qasm2

from qsimdist.errors import OutOfMemoryError, QsimdistError
from qsimdist.memory_limit import out_of_memory

N = 28  # 2^28 complex128 amplitudes: 4 GiB of output
ADDRESS_SPACE = 3_000_000_000  # bytes the child may map: imports fit, the output does not


def chain_file(tmp_path: Path) -> Path:
    qc = QuantumCircuit(N)
    qc.h(range(N))
    for q in range(N - 1):
        qc.cx(q, q + 1)
    path = tmp_path / f"chain{N}.qasm"
    path.write_text(qasm2.dumps(qc))
    return path


def limited() -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=limited)


def qsimdist_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "qsimdist", "amplitude", str(path), "*" * N,
            "--dtype", "complex128", "--memory-limit", "6GiB"]


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("qsimdist: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


def test_cli_one_process_names_the_size(tmp_path):
    proc = run(qsimdist_cmd(chain_file(tmp_path)))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""  # nothing half-written
    line = one_error_line(proc.stderr)
    assert "out of memory" in line and "4.00 GiB" in line, line


@pytest.mark.skipif(shutil.which("mpiexec") is None,
                    reason="mpiexec not found: pip install 'qsimdist[mpi]'")
def test_cli_under_mpiexec_every_rank_ends_with_one_line(tmp_path):
    proc = run(["mpiexec", "-n", "2", *qsimdist_cmd(chain_file(tmp_path))])
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc.stderr)
    assert "out of memory" in line and "4.00 GiB" in line and "rank" in line, line


def test_python_raises_out_of_memory_error(tmp_path):
    code = (
        "import sys, qsimdist\n"
        "from qsimdist.errors import OutOfMemoryError\n"
        "try:\n"
        f"    qsimdist.amplitudes(sys.argv[1], '{'*' * N}', dtype='complex128',"
        " memory_limit='6GiB')\n"
        "except OutOfMemoryError as exc:\n"
        "    print('refused:', exc)\n"
    )
    proc = run([sys.executable, "-c", code, str(chain_file(tmp_path))])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused: out of memory"), proc.stdout
    assert "4.00 GiB" in proc.stdout


def test_message_names_allocation_peak_and_limit():
    class NumpyLike(MemoryError):
        _total_size = 3 << 30

    err = out_of_memory(NumpyLike(), "executing a plan", peak=5 << 30, limit=6 << 30)
    assert isinstance(err, QsimdistError) and isinstance(err, MemoryError)
    assert isinstance(err, OutOfMemoryError)
    text = str(err)
    assert "\n" not in text
    for words in ("3.00 GiB", "5.00 GiB", "6.00 GiB", "--memory-limit"):
        assert words in text, text
