"""``benchmarks.clients`` (issue 52): real clients of the primitives, timed from the inside.

The smallest workflow (qiskit-algorithms' VQE on H2 with parameter-shift gradients, a few
SLSQP iterations) runs with the reference primitives and qsimdist's: the same calls and
pubs, the same optimizer trajectory, values within 1e-12 of the reference's. The timing
wrapper is checked to count what it times and to hand the inner results back unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qiskit_algorithms",
                    reason="the client workflows are qiskit-algorithms' (the test extra)")

from benchmarks import clients  # noqa: E402


def test_vqe_h2_agrees_with_the_reference_in_quick_mode():
    wf = next(w for w in clients.WORKFLOWS if w.name == "vqe h2")
    row = clients.run_workflow(wf, repeats=1, who=["reference", "qsimdist"], quick=True)
    q = row["qsimdist"]
    assert q["calls"] == row["calls"] > 1 and q["pubs"] == row["pubs"]
    assert q["max_abs_deviation"] <= clients.TOLERANCE and q["agrees"]
    ref = np.asarray(row["values"]["reference"])
    # the eigenvalue went down from the initial point's energy (the optimizer ran)
    assert ref[0] < -1.0
    assert row["reference"]["seconds"] > 0 and q["seconds"] > 0


def test_the_wrapper_times_counts_and_returns_the_inner_results():
    from qiskit.circuit.library import real_amplitudes

    est, samp = clients.make_primitives("qsimdist")
    qc = real_amplitudes(2, reps=1)
    v = np.linspace(0.1, 0.4, qc.num_parameters)
    job = est.run([(qc, "ZZ", v), (qc, "XX", [v, v])])
    res = job.result()
    assert job.done() and res[1].data.evs.shape == (2,)
    assert est.calls == 1 and est.pubs == 2 and est.seconds > 0
    assert est.default_precision == 0.0  # read through to the inner primitive
    measured = qc.copy()
    measured.measure_all()
    out = samp.run([(measured, v)], shots=64).result()
    assert out[0].data.meas.num_shots == 64 and samp.calls == 1 and samp.pubs == 1
