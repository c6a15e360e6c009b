"""Deep circuits up to 30 qubits: one amplitude on the statevector route, beside qsim and Aer.

The circuits are qsim's own examples ``circuit_q24`` and ``circuit_q30``
(``../shared/data/circuits/qsim/``; 100 moments of ``h``, ``t``, ``x_1_2``,
``y_1_2`` and ``cz``). Each contender computes the amplitude of ``0...0`` in
its own process, one after the other:

* ``qsimdist`` with the router's engine (``auto``: qsim where the ``qsim``
  extra is installed and predicted faster), complex64;
* ``qsimdist`` on its own compiled kernel (``QSIMDIST_STATEVECTOR_ENGINE=
  qsimdist``), complex64, and complex128 where two states fit;
* ``qsimcirq`` on the circuit in cirq's native gates, single precision, every
  core, ``max_fused_gate_size=3`` (its fastest here: 1.9 s against 3.1 s at
  its default 2 and 2.3 s at 4 on circuit_q24);
* Qiskit Aer, statevector method, single precision, fusion on, every core,
  ``save_amplitudes([0])``, on the circuit as Qiskit unitaries.

Each row gives the seconds inside the call (the circuit already read; for
qsimdist the whole ``amplitudes`` call: parsing, routing, fusion, the run)
and the whole process (interpreter start and imports included), and the
amplitude's relative difference to qsimcirq's. Run::

    python -m benchmarks.statevector --data ../shared/data [--circuits q24 q30]
        [--timeout 1800] [--json FILE]

:func:`compare_circuit` is one circuit's rows; ``python -m benchmarks run`` runs it as its
``deep_amplitude`` section (``SuiteSpec.deep_amplitude``).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

_READ = """
import json, time, sys, numpy as np
path = {path!r}
lines = [l.split() for l in open(path).read().splitlines()[1:] if l.strip()]
n = int(open(path).readline())
"""

_QSIMDIST = """
import qsimdist
t = time.perf_counter()
res = qsimdist.amplitudes(path, ["0" * n], dtype="{dtype}", order="natural",
                          method="statevector")
sec = time.perf_counter() - t
amp = complex(res["0" * n]); route = res.stats["route"]
out = {{{{"seconds": sec, "amp": [amp.real, amp.imag], "engine": route["engine"],
        "fusion_width": route["fusion_width"], "predicted": route["statevector_seconds"]}}}}
"""

_CONTENDERS = {
    "qsimdist (auto engine, complex64)": ("auto", _QSIMDIST.format(dtype="complex64")),
    "qsimdist (own kernel, complex64)": ("qsimdist", _QSIMDIST.format(dtype="complex64")),
    "qsimdist (own kernel, complex128)": ("qsimdist", _QSIMDIST.format(dtype="complex128")),
    "qsimcirq": (None, """
import os, cirq, qsimcirq
q = cirq.LineQubit.range(n)
gates = {{"h": cirq.H, "t": cirq.T, "x_1_2": cirq.X ** 0.5, "y_1_2": cirq.Y ** 0.5,
          "cz": cirq.CZ}}
moments = {{}}
for l in lines:
    moments.setdefault(int(l[0]), []).append(gates[l[1]](*[q[int(x)] for x in l[2:]]))
circuit = cirq.Circuit([cirq.Moment(moments[k]) for k in sorted(moments)])
threads = len(os.sched_getaffinity(0))
sim = qsimcirq.QSimSimulator(qsimcirq.QSimOptions(cpu_threads=threads, max_fused_gate_size=3))
t = time.perf_counter()
amp = complex(sim.compute_amplitudes(circuit, bitstrings=[0])[0])
sec = time.perf_counter() - t
out = {{"seconds": sec, "amp": [amp.real, amp.imag]}}
"""),
    "Qiskit Aer": (None, """
import os
from qiskit import QuantumCircuit
from qiskit_aer import AerSimulator
from qsimdist.frontends.qsim import read_qsim
gc = read_qsim(path)
qc = QuantumCircuit(n, global_phase=gc.global_phase)
for g in gc.gates:  # qsimdist's matrices are big-endian over g.qubits
    qc.unitary(g.matrix, list(reversed(g.qubits)))
qc.save_amplitudes([0])
threads = len(os.sched_getaffinity(0))
sim = AerSimulator(method="statevector", precision="single", fusion_enable=True,
                   max_parallel_threads=threads)
t = time.perf_counter()
amp = complex(sim.run(qc).result().data(0)["amplitudes"][0])
sec = time.perf_counter() - t
out = {{"seconds": sec, "amp": [amp.real, amp.imag]}}
"""),
}


def _fits_two_states(n: int, itemsize: int) -> bool:
    from qsimdist.engine.memory import MemoryBudget

    budget = MemoryBudget.resolve(None)
    return budget.limit is None or 2 * itemsize * 2**n <= budget.limit


def run_one(name: str, path: Path, timeout: float) -> dict:
    engine, code = _CONTENDERS[name]
    env = dict(os.environ)
    if engine is not None:
        env["QSIMDIST_STATEVECTOR_ENGINE"] = engine
    script = _READ.format(path=str(path)) + code.format() + "\nprint('@@' + json.dumps(out))\n"
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"contender": name, "error": f"no result in {timeout:.0f} s"}
    wall = time.perf_counter() - t
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            row = json.loads(line[2:])
            row.update(contender=name, process_seconds=wall)
            return row
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"contender": name, "error": tail[:200]}


#: the contenders' names, in the order they run
CONTENDERS = tuple(_CONTENDERS)


class CircuitAbsent(FileNotFoundError):
    """The circuit file of :func:`compare_circuit` is not there (``filename``: its path)."""


def circuit_path(circuit: str, data: Path) -> Path:
    """Where ``circuit`` (``q24``, ``q30``) lies under the reference-data folder ``data``."""
    return Path(data) / "circuits" / "qsim" / f"circuit_{circuit}.qsim"


def compare_circuit(circuit: str, data: Path, contenders=None, timeout: float = 1800.0, *,
                    progress: Callable[[dict], None] | None = None) -> list[dict]:
    """One amplitude of ``circuit`` from each contender (default: all), one process each.

    Returns one row per contender, with the relative differences to qsimcirq's
    and to the complex128 amplitude where those ran. The complex128 contender
    is recorded as an error where two such states do not fit the memory limit.
    ``progress`` gets each contender's row as soon as it has run. Raises
    :class:`CircuitAbsent` when the circuit file is not under ``data``.
    """
    path = circuit_path(circuit, data)
    if not path.exists():
        raise CircuitAbsent(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    n = int(path.read_text().split("\n", 1)[0])
    rows = []
    for name in CONTENDERS if contenders is None else contenders:
        if name.endswith("complex128)") and not _fits_two_states(n, 16):
            rows.append({"contender": name, "error": "two complex128 states do not fit "
                         "this machine's memory limit"})
            continue
        row = run_one(name, path, timeout)
        rows.append(row)
        if progress is not None:
            progress(row)
    ref = next((r for r in rows if r["contender"] == "qsimcirq" and "amp" in r), None)
    exact = next((r for r in rows if r["contender"].endswith("complex128)") and "amp" in r),
                 None)
    for r in rows:
        r["circuit"] = circuit
        if ref is not None and "amp" in r:
            a, b = complex(*r["amp"]), complex(*ref["amp"])
            r["rel_diff_to_qsimcirq"] = abs(a - b) / abs(b)
            r["qsimcirq_seconds_over_this"] = ref["seconds"] / r["seconds"]
            r["qsimcirq_process_over_this"] = ref["process_seconds"] / r["process_seconds"]
        if exact is not None and "amp" in r:
            a, b = complex(*r["amp"]), complex(*exact["amp"])
            r["rel_diff_to_complex128"] = abs(a - b) / abs(b)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--circuits", nargs="+", default=["q24", "q30"])
    ap.add_argument("--contenders", nargs="+", default=list(_CONTENDERS))
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cores": len(os.sched_getaffinity(0)), "load_average": os.getloadavg()[0],
              "rows": []}
    for c in args.circuits:
        try:
            rows = compare_circuit(c, Path(args.data), args.contenders, args.timeout,
                                   progress=lambda row, c=c: print(c, json.dumps(row),
                                                                   flush=True))
        except CircuitAbsent as exc:
            print(f"{exc.filename} is absent; skipped", flush=True)
            continue
        report["rows"].extend(rows)
    print(_table(report["rows"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def _table(rows: list[dict]) -> str:
    def f(x, spec):
        return "" if x is None else format(x, spec)

    out = ["| circuit | contender | in the call (s) | whole process (s) | qsimcirq / this, "
           "call | qsimcirq / this, process | rel. diff. to qsimcirq | rel. diff. to "
           "complex128 | engine, fusion width |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['circuit']} | {r['contender']} | {r['error']} | | | | | | |")
            continue
        eng = f"{r['engine']}, {r['fusion_width']}" if "engine" in r else ""
        out.append(f"| {r['circuit']} | {r['contender']} | {r['seconds']:.2f} | "
                   f"{r['process_seconds']:.2f} | {f(r.get('qsimcirq_seconds_over_this'), '.2f')} "
                   f"| {f(r.get('qsimcirq_process_over_this'), '.2f')} | "
                   f"{f(r.get('rel_diff_to_qsimcirq'), '.1e')} | "
                   f"{f(r.get('rel_diff_to_complex128'), '.1e')} | {eng} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
