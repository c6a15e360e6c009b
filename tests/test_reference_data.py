"""Google's reference amplitudes and cotengra's benchmark networks (../shared/data)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import qsimdist
from benchmarks.reference_n30 import AMPLITUDES, CIRCUIT, compare, read_reference
from qsimdist.frontends import expand_bitstring


@pytest.mark.slow
def test_n30_reference_amplitudes_with_wildcards(shared_data):
    """At least 500 of the 10,000 reference amplitudes, in one wildcard contraction.

    The four fixed qubits take the values most common among the reference
    bitstrings, so one contraction over the other 26 qubits covers ~600 of them.
    """
    bits, ref = read_reference(shared_data / "circuits" / AMPLITUDES)
    assert len(bits) == 10_000
    fixed = (0, 1, 2, 3)
    values, count = Counter(tuple(b[i] for i in fixed) for b in bits).most_common(1)[0]
    pattern = "".join(values[fixed.index(i)] if i in fixed else "*" for i in range(30))
    chosen = [k for k, b in enumerate(bits) if all(b[i] == v for i, v in zip(fixed, values))]
    assert len(chosen) == count >= 500
    res = qsimdist.amplitudes(shared_data / "circuits" / CIRCUIT, pattern, order="natural")
    assert len(res) == 2**26
    got = np.array([res.get(bits[k]) for k in chosen])
    report = compare(got, ref[chosen])
    # complex64: deviations relative to the RMS amplitude (the norm convention of
    # ARCHITECTURE.md); per amplitude the median must stay at single precision.
    assert report["max_deviation_over_rms"] <= 1e-4, report
    assert report["median_relative_deviation"] <= 1e-4, report
    # the sum of |amplitude|^2 over all 2^26 states with four qubits fixed is ~2^-4
    assert 0.03 < float(np.sum(np.abs(res.amplitudes) ** 2)) < 0.1


def test_n30_reference_complex128_per_amplitude(shared_data):
    """complex128: every amplitude within 1e-4 of the reference, one common phase."""
    bits, ref = read_reference(shared_data / "circuits" / AMPLITUDES)
    pick = list(range(0, 10_000, 1000))
    res = qsimdist.amplitudes(
        shared_data / "circuits" / CIRCUIT, [bits[k] for k in pick], order="natural",
        dtype="complex128",
    )
    report = compare(res.amplitudes, ref[pick])
    assert report["max_relative_deviation"] <= 1e-4, report
    # one path search: the other bitstrings reuse the first plan (same structure)
    assert res.stats["plans_reused"] + res.stats["path_cache_hits"] >= len(pick) - 1, res.stats


def test_n12_full_statevector_against_qiskit_free_reference(shared_data):
    """All 4096 amplitudes of the 12-qubit circuit in one contraction have unit norm."""
    res = qsimdist.amplitudes(
        shared_data / "circuits" / "circuit_n12_m14_s0_e0_pEFGH.qsim", "*" * 12,
        order="natural", dtype="complex128",
    )
    assert res.bitstrings == expand_bitstring("*" * 12)
    assert abs(np.sum(np.abs(res.amplitudes) ** 2) - 1) < 1e-10


@pytest.mark.parametrize(
    "name", ["peps_cluster_r2_D10_a.json", "qucirc_rrzz_n56_d13.json"]
)
def test_benchmark_networks_load_and_plan(shared_data, name):
    net = qsimdist.load_network(shared_data / "networks" / name)
    assert net.arrays is None and net.num_tensors > 10
    plan = qsimdist.plan(net, dtype="complex64", max_repeats=4, memory_limit="none")
    assert plan.stats.flops > 0 and plan.steps[-1].out_modes == net.output


def test_peps_network_contracts_like_cotengra(shared_data):
    net = qsimdist.load_network(shared_data / "networks" / "peps_cluster_r2_D10_a.json")
    # a smaller bond dimension keeps the test fast; the structure is unchanged
    small = qsimdist.Network(net.inputs, net.output, {i: 2 for i in net.size_dict})
    small = small.with_random_arrays(seed=3)
    got = qsimdist.contract(small, dtype="complex128")
    want = small.contract_reference()
    assert np.allclose(got, want, rtol=1e-10, atol=0)
