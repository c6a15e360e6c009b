"""qsimdist.qiskit.SamplerV2 against exact distributions and Qiskit's StatevectorSampler.

The exact distribution of a dynamic circuit comes from an independent branch
enumeration over Qiskit ``Statevector`` (every measurement and reset splits the
state into its outcomes), not from qsimdist's deferred-measurement rewriting.
"""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
from qiskit.circuit import IfElseOp, Parameter
from qiskit.circuit.random import random_circuit
from qiskit.primitives import StatevectorSampler
from qiskit.quantum_info import Statevector
from scipy.stats import chisquare

from qsimdist.errors import QsimdistError, UnsupportedInstructionError
from qsimdist.qiskit import SamplerV2

SHOTS = 10_000


# ----------------------------------------------------------------- references
def branch_distribution(qc: QuantumCircuit) -> dict[str, float]:
    """Exact distribution of all clbits (clbit 0 rightmost) by enumerating outcomes."""
    n, ncl = qc.num_qubits, qc.num_clbits
    start = [(1.0, Statevector.from_int(0, 2**n), (0,) * ncl)]

    def project(sv: Statevector, q: int, bit: int):
        p = sv.probabilities([q])[bit]
        if p < 1e-14:
            return 0.0, None
        data = sv.data.copy()
        idx = np.arange(data.size)
        data[((idx >> q) & 1) != bit] = 0
        return p, Statevector(data / np.sqrt(p))

    def run(circuit, qmap, cmap, states):
        for inst in circuit.data:
            op = inst.operation
            qs = [qmap[circuit.find_bit(q).index] for q in inst.qubits]
            cs = [cmap[circuit.find_bit(c).index] for c in inst.clbits]
            if op.name in ("barrier", "delay"):
                continue
            new = []
            if op.name in ("measure", "reset"):
                for w, sv, bits in states:
                    for b in (0, 1):
                        p, post = project(sv, qs[0], b)
                        if post is None:
                            continue
                        if op.name == "measure":
                            nb = list(bits)
                            nb[cs[0]] = b
                            new.append((w * p, post, tuple(nb)))
                        else:  # reset: the outcome is forgotten, |1> flipped to |0>
                            new.append((w * p, _flip(post, qs[0]) if b else post, bits))
                states = new
            elif isinstance(op, IfElseOp):
                target, value = op.condition
                for w, sv, bits in states:
                    if hasattr(target, "size"):  # a register: its bits as an integer
                        got = sum(bits[qc.find_bit(b).index] << k for k, b in enumerate(target))
                        holds = got == value
                    else:
                        holds = bits[qc.find_bit(target).index] == int(value)
                    block = op.blocks[0] if holds else (op.blocks[1] if len(op.blocks) > 1
                                                       else None)
                    if block is None:
                        new.append((w, sv, bits))
                    else:
                        new.extend(run(block, qs, cs, [(w, sv, bits)]))
                states = new
            else:
                states = [(w, sv.evolve(op, qs), bits) for w, sv, bits in states]
        return states

    out: dict[str, float] = {}
    for w, _, bits in run(qc, list(range(n)), list(range(ncl)), start):
        key = "".join(str(b) for b in reversed(bits))
        out[key] = out.get(key, 0.0) + w
    return out


def _flip(sv: Statevector, q: int) -> Statevector:
    from qiskit.circuit.library import XGate

    return sv.evolve(XGate(), [q])


def assert_chisquare(counts: dict[str, int], probs: dict[str, float], shots: int) -> float:
    """Pearson chi-square of ``counts`` against ``probs`` (bins under 5 expected merged)."""
    impossible = {k: v for k, v in counts.items() if probs.get(k, 0.0) < 1e-12}
    assert not impossible, f"drew outcomes of probability 0: {impossible}"
    keys = sorted(probs, key=probs.get, reverse=True)
    obs, exp = [], []
    rest_o = rest_e = 0.0
    for k in keys:
        e = probs[k] * shots
        if e >= 5:
            obs.append(counts.get(k, 0))
            exp.append(e)
        else:
            rest_o += counts.get(k, 0)
            rest_e += e
    if rest_e > 0:
        obs.append(rest_o)
        exp.append(rest_e)
    exp = np.asarray(exp) * (sum(obs) / sum(exp))
    if len(obs) < 2:
        return 1.0
    p = chisquare(obs, exp).pvalue
    assert p > 1e-3, (p, counts, probs)
    return p


def random_dynamic_circuit(n: int, seed: int, mid: int = 4) -> QuantumCircuit:
    """Gates, ``mid`` mid-circuit measurements, resets and if_test blocks, final measurements."""
    rng = np.random.default_rng(seed)
    q = QuantumRegister(n, "q")
    c = ClassicalRegister(n + mid, "c")
    qc = QuantumCircuit(q, c)
    free = list(range(n, n + mid))

    def layer():
        for j in range(n):
            getattr(qc, ("rx", "ry", "rz")[rng.integers(3)])(float(rng.uniform(0, 2 * np.pi)), j)
        a, b = rng.choice(n, 2, replace=False)
        qc.cx(int(a), int(b))

    for _ in range(mid):
        layer()
        j = int(rng.integers(n))
        kind = rng.integers(4)
        if kind == 0 and free:
            qc.measure(j, free.pop())
        elif kind == 1:
            qc.reset(j)
        elif kind == 2:
            qc.measure(j, free.pop()) if free else qc.h(j)
            bit = c[n + mid - 1 - (mid - len(free) - 1)] if len(free) < mid else c[0]
            with qc.if_test((bit, 1)) as else_:
                qc.x(int(rng.integers(n)))
                qc.ry(0.7, int(rng.integers(n)))
            with else_:
                qc.h(int(rng.integers(n)))
        else:
            written = [c[k] for k in range(n + mid) if k not in free and k >= n]
            if written:
                reg_like = written[0]
                with qc.if_test((reg_like, 0)):
                    qc.reset(int(rng.integers(n)))
                    qc.measure(int(rng.integers(n)), reg_like)
    layer()
    for j in range(n):
        qc.measure(j, j)
    return qc


def counts_of(result, name: str = "c") -> dict[str, int]:
    return getattr(result.data, name).get_counts()


# ----------------------------------------------------------------- tests
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_static_random_circuits_chi_square(seed):
    n = 8 + 2 * seed  # 10, 12, 14 -> the last one trimmed to 12 below
    n = min(n, 12)
    qc = random_circuit(n, 6, max_operands=2, seed=seed, measure=False)
    probs_vec = Statevector(qc).probabilities()
    probs = {format(i, f"0{n}b"): float(p) for i, p in enumerate(probs_vec) if p > 1e-14}
    qc.measure_all()
    res = SamplerV2(seed=seed).run([qc], shots=SHOTS).result()[0]
    assert res.data.meas.num_shots == SHOTS
    assert_chisquare(counts_of(res, "meas"), probs, SHOTS)


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_dynamic_circuits_chi_square(seed):
    qc = random_dynamic_circuit(5, seed)
    probs = branch_distribution(qc)
    res = SamplerV2(seed=seed).run([qc], shots=SHOTS).result()[0]
    assert res.metadata["sampling"]["dynamic"]
    assert_chisquare(counts_of(res), probs, SHOTS)


def test_parametrised_dynamic_circuit_lowered_once_bound_per_value():
    a, b = Parameter("a"), Parameter("b")
    qc = QuantumCircuit(QuantumRegister(3, "q"), ClassicalRegister(4, "c"))
    qc.ry(a, 0)
    qc.cx(0, 1)
    qc.measure(0, 3)
    with qc.if_test((qc.clbits[3], 1)) as else_:
        qc.rx(b, 2)  # a parametrised gate under classical control
    with else_:
        qc.ry(a + b, 1)
    qc.reset(0)
    qc.ry(b, 0)
    qc.measure([0, 1, 2], [0, 1, 2])
    values = np.array([[0.4, 1.3], [2.0, 0.7], [1.1, 2.9]])
    res = SamplerV2(seed=6).run([(qc, values)], shots=SHOTS).result()[0]
    assert res.data.c.shape == (3,)
    for k, row in enumerate(values):
        exact = branch_distribution(qc.assign_parameters(row))
        assert_chisquare(res.data.c.get_counts(k), exact, SHOTS)


def test_teleportation_like_feedforward_with_register_condition():
    q = QuantumRegister(3, "q")
    m = ClassicalRegister(2, "m")
    out = ClassicalRegister(1, "out")
    qc = QuantumCircuit(q, m, out)
    qc.ry(1.1, 0)
    qc.h(1)
    qc.cx(1, 2)
    qc.cx(0, 1)
    qc.h(0)
    qc.measure(0, m[0])
    qc.measure(1, m[1])
    with qc.if_test((m[1], 1)):
        qc.x(2)
    with qc.if_test((m[0], 1)):
        qc.z(2)
    with qc.if_test((m, 3)):  # a register condition (a no-op pair of gates)
        qc.x(2)
        qc.x(2)
    qc.reset(0)
    qc.measure(2, out[0])
    res = SamplerV2(seed=5).run([qc], shots=SHOTS).result()[0]
    # teleported ry(1.1)|0>: P(out=1) = sin^2(0.55), independent of m
    ones = res.data.out.get_counts().get("1", 0)
    p1 = np.sin(0.55) ** 2
    assert_chisquare({"1": ones, "0": SHOTS - ones}, {"1": p1, "0": 1 - p1}, SHOTS)
    assert_chisquare(res.data.m.get_counts(), {k: 0.25 for k in ("00", "01", "10", "11")}, SHOTS)


def test_ghz_40_qubits_only_two_outcomes():
    n = 40
    qc = QuantumCircuit(n)
    qc.h(0)
    qc.t(0)  # not Clifford (the same outcomes): a Clifford GHZ takes the stabilizer route
    for i in range(n - 1):
        qc.cx(i, i + 1)
    qc.measure_all()
    res = SamplerV2(seed=2).run([qc], shots=1000).result()[0]
    counts = res.data.meas.get_counts()
    assert set(counts) <= {"0" * n, "1" * n}
    assert 450 <= counts.get("0" * n, 0) <= 550
    assert res.metadata["sampling"]["method"] == "chain"


def test_chain_and_doubled_methods_match_exact():
    qc = random_circuit(9, 5, max_operands=2, seed=21, measure=False)
    sv = Statevector(qc)
    meas_q = [0, 2, 3, 5, 8]
    probs_vec = sv.probabilities(meas_q)  # index bit k = meas_q[k]
    probs = {format(i, f"0{len(meas_q)}b"): float(p) for i, p in enumerate(probs_vec) if p > 1e-14}
    c = ClassicalRegister(len(meas_q), "c")
    qc.add_register(c)
    for k, qb in enumerate(meas_q):
        qc.measure(qb, c[k])
    for method in ("chain", "doubled-marginal", "marginal"):
        res = SamplerV2(seed=4, options={"method": method}).run([qc], shots=SHOTS).result()[0]
        assert res.metadata["sampling"]["method"] == method
        assert_chisquare(counts_of(res), probs, SHOTS)


def test_frugal_rejection_sampling_matches_exact():
    qc = random_circuit(10, 10, max_operands=2, seed=5, measure=False)
    pv = Statevector(qc).probabilities()
    probs = {format(i, "010b"): float(p) for i, p in enumerate(pv) if p > 1e-14}
    qc.measure_all()
    shots = 1500
    res = SamplerV2(seed=3, options={"method": "rejection"}).run([qc], shots=shots).result()[0]
    info = res.metadata["sampling"]
    assert info["method"] == "rejection" and info["candidates"] >= shots
    assert_chisquare(res.data.meas.get_counts(), probs, shots)
    partial = QuantumCircuit(3, 1)
    partial.h(0)
    partial.cx(0, 1)
    partial.measure(1, 0)  # qubit 0 is in the light cone but not measured
    with pytest.raises(QsimdistError, match="rejection sampling needs"):
        SamplerV2(options={"method": "rejection"}).run([partial]).result()


def test_chain_with_batched_prefixes_matches_exact(monkeypatch):
    """Groups of 3 over 11 qubits: later groups batch many distinct prefixes per contraction
    (the fixed-structure path with gates split at their operator-Schmidt rank)."""
    import qsimdist.engine.network_sampling as network_sampling

    monkeypatch.setattr(network_sampling, "CHAIN_GROUP", 3)
    qc = random_circuit(11, 4, max_operands=2, seed=31, measure=False)
    pv = Statevector(qc).probabilities()
    probs = {format(i, "011b"): float(p) for i, p in enumerate(pv) if p > 1e-14}
    qc.measure_all()
    res = SamplerV2(seed=2, options={"method": "chain", "dtype": "complex128"}) \
        .run([qc], shots=SHOTS).result()[0]
    info = res.metadata["sampling"]
    assert info["method"] == "chain" and info["contractions"] >= 4
    assert_chisquare(res.data.meas.get_counts(), probs, SHOTS)


def test_same_seed_same_bits_and_shapes_match_reference():
    a, b = Parameter("a"), Parameter("b")
    q = QuantumRegister(3)
    alpha = ClassicalRegister(2, "alpha")
    beta = ClassicalRegister(3, "beta")  # one bit never written: reads 0
    qc = QuantumCircuit(q, alpha, beta)
    qc.h(0)
    qc.ry(a, 1)
    qc.cx(0, 2)
    qc.rz(b, 2)
    qc.measure([0, 1], alpha)
    qc.measure([2, 0], [beta[0], beta[2]])
    values = np.random.default_rng(0).uniform(0, np.pi, (4, 1, 2))
    pubs = [(qc, values), (qc, values[0, 0], 50)]
    ours = SamplerV2(seed=9).run(pubs, shots=300).result()
    again = SamplerV2(seed=9).run(pubs, shots=300).result()
    ref = StatevectorSampler(seed=9).run(pubs, shots=300).result()
    for r, g, s in zip(ours, again, ref):
        for name in ("alpha", "beta"):
            ba, bs = getattr(r.data, name), getattr(s.data, name)
            assert ba.shape == bs.shape and ba.num_shots == bs.num_shots
            assert ba.num_bits == bs.num_bits and ba.array.shape == bs.array.shape
            assert np.array_equal(ba.array, getattr(g.data, name).array)
        assert r.metadata["shots"] == s.metadata["shots"]
    # beta[1] is never written; beta[2] repeats alpha[0] (both measure qubit 0)
    for bits in ours[0].data.beta.get_bitstrings():
        assert bits[1] == "0"
    joined = zip(ours[0].data.alpha.get_bitstrings(), ours[0].data.beta.get_bitstrings())
    assert all(al[-1] == be[0] for al, be in joined)


def test_return_amplitudes_match_statevector():
    qc = random_circuit(6, 4, max_operands=2, seed=8, measure=False)
    sv = Statevector(qc).data
    qc.measure_all()
    res = SamplerV2(seed=1, options={"return_amplitudes": True, "dtype": "complex128"}) \
        .run([qc], shots=200).result()[0]
    amps = res.metadata["amplitudes"]
    assert set(amps) == set(res.data.meas.get_counts())
    for bits, value in amps.items():
        assert abs(value - sv[int(bits, 2)]) < 1e-10


def test_errors_name_the_instruction_and_follow_qiskit_for_shapes():
    qc = QuantumCircuit(2, 2)
    qc.h(0)
    with qc.while_loop((qc.clbits[0], 0)):
        qc.x(1)
    qc.measure([0, 1], [0, 1])
    with pytest.raises(UnsupportedInstructionError, match="while_loop"):
        SamplerV2().run([qc]).result()
    pc = QuantumCircuit(1)
    pc.rx(Parameter("p"), 0)
    pc.ry(Parameter("r"), 0)
    pc.measure_all()
    bad = np.zeros((4, 3))  # three values per binding for two parameters
    with pytest.raises(Exception) as ours:
        SamplerV2().run([(pc, bad)])
    with pytest.raises(Exception) as ref:
        StatevectorSampler().run([(pc, bad)])
    assert type(ours.value) is type(ref.value) and str(ours.value) == str(ref.value)
    with pytest.raises(QsimdistError, match="unknown sampling method"):
        SamplerV2(options={"method": "magic"})


@pytest.mark.mpi
@pytest.mark.slow
def test_mpi_two_ranks_draw_the_same_bitstrings_as_one_process():
    import importlib.util
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec not found: pip install 'qsimdist[mpi]'")
    here = Path(__file__).resolve().parent
    script = here / "mpi_sampler_cases.py"
    spec = importlib.util.spec_from_file_location("mpi_sampler_cases", script)
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    local = cases.run("local")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(here.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", str(script)],
                          capture_output=True, text=True, timeout=300, cwd=here, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, proc.stdout[-2000:]  # rank 0 prints, the other rank nothing
    got = json.loads(lines[0])
    assert got["ranks"] == 2
    for name, want in local.items():
        assert got["results"][name]["method"] == want["method"]
        assert got["results"][name]["bits"] == want["bits"], name
    assert local["ghz20_chain"]["method"] == "chain"
