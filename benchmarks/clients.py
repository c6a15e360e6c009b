"""Real clients of the primitives: qiskit-algorithms and qiskit-machine-learning workflows.

    python -m benchmarks.clients [--repeats 3] [--only NAME ...] [--no-aer] [--quick]
        [--json out.json]

Each workflow is a documented client of the primitives, run unchanged three times, each with
a fresh primitive object: Qiskit's ``StatevectorEstimator`` / ``StatevectorSampler`` (the
reference), qsimdist's ``EstimatorV2`` / ``SamplerV2``, and (where ``qiskit_aer`` is
installed) Aer's ``EstimatorV2`` (its default, exact: precision 0) / ``SamplerV2``:

- ``vqe h2``: qiskit-algorithms' ``VQE`` on H2 (two qubits, parity mapping), ansatz
  ``efficient_su2(2, reps=2)``, SLSQP, gradients by ``ParamShiftEstimatorGradient``;
- ``vqe heisenberg``: the same on a 4-site Heisenberg ring, ``efficient_su2(4, reps=2)``;
- ``qaoa maxcut``: ``QAOA`` (the sampler) on MaxCut of a 4-node ring with a chord, 2 reps,
  COBYLA;
- ``vqd h2``: ``VQD`` for H2's two lowest states, the fidelity by ``ComputeUncompute`` on
  the sampler, COBYLA;
- ``varqite``: ``VarQITE`` on H2, ``ImaginaryMcLachlanPrinciple`` with ``LinCombQGT`` and
  ``LinCombEstimatorGradient`` on the estimator, forward Euler;
- ``grover``: ``Grover`` for one marked state of 3 qubits (the sampler);
- ``estimator qnn``: qiskit-machine-learning's ``EstimatorQNN`` (``ZZFeatureMap`` +
  ``RealAmplitudes`` on 2 qubits) forward and backward (parameter shift) on 20 samples;
- ``vqc fit``: ``VQC`` (a ``SamplerQNN``) fitted to 20 points of two classes, COBYLA.

Only time spent inside the primitives counts: each primitive is wrapped so that its
``run`` waits for ``.result()`` and adds the seconds (calls and pubs counted too); the
client's own work (optimizer, gradient bookkeeping, result post-processing) is the same for
all and not timed. Aer's primitives take ISA circuits only: each circuit is transpiled to
Aer's basis first (untimed, once per circuit), and Aer's ``default_precision`` is read off
its options (qiskit-algorithms reads it off the estimator). One untimed round warms every
primitive (imports, compiled kernels), then ``--repeats`` rounds alternate the primitives'
order; the median is reported and its ratio to the reference (below 1: qsimdist takes less
time).

Values: the estimator workflows follow the same deterministic optimizer trajectory, so
their final values must agree with the reference's to 1e-12 (``TOLERANCE``); sampler
workflows draw different shots, so theirs must agree within shot noise (the ``noise``
bound of each workflow, stated beside it). ``EstimatorQNN`` is given precision 0 (its own
default, 1/64, would make the exact estimators add Gaussian noise).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TOLERANCE = 1e-12
SEED = 42
SHOTS = 1024

#: H2 at 0.735 A (STO-3G, parity mapping, two qubits), as qiskit-algorithms' VQE tutorial
H2 = [("II", -1.052373245772859), ("IZ", 0.39793742484318045),
      ("ZI", -0.39793742484318045), ("ZZ", -0.01128010425623538),
      ("XX", 0.18093119978423156)]


# ---------------------------------------------------------------------------------------
# primitives timed from the inside


class _Done:
    """A finished job: what clients call on a job (``result``, ``status``, ``done``)."""

    def __init__(self, result):
        self._result = result

    def result(self):
        return self._result

    def status(self):
        from qiskit.primitives.primitive_job import JobStatus

        return JobStatus.DONE

    def done(self) -> bool:
        return True

    def running(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def in_final_state(self) -> bool:
        return True

    def job_id(self) -> str:
        return "done"


class _Meter:
    seconds: float
    calls: int
    pubs: int

    def _start(self, inner) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0
        self.pubs = 0

    def _timed(self, pubs, kwargs):
        pubs = [self._prepare(p) for p in pubs]
        t0 = time.perf_counter()
        result = self.inner.run(pubs, **kwargs).result()
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.pubs += len(pubs)
        return _Done(result)

    def _prepare(self, pub):
        return pub

    def __getattr__(self, name):  # default_precision, default_shots, options, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _timed_classes():
    from qiskit.primitives import BaseEstimatorV2, BaseSamplerV2

    class TimedEstimator(_Meter, BaseEstimatorV2):
        def __init__(self, inner):
            self._start(inner)

        def run(self, pubs, *, precision=None):
            return self._timed(pubs, {} if precision is None else {"precision": precision})

    class TimedSampler(_Meter, BaseSamplerV2):
        def __init__(self, inner):
            self._start(inner)

        def run(self, pubs, *, shots=None):
            return self._timed(pubs, {} if shots is None else {"shots": shots})

    class AerEstimator(TimedEstimator):
        @property
        def default_precision(self) -> float:
            # qiskit-algorithms reads ``estimator.default_precision``, which Aer's
            # EstimatorV2 keeps in its options only (without this, VarQITE's gradient
            # raised AttributeError and the evolution stopped after its first QGT)
            return self.inner.options.default_precision

        def _prepare(self, pub):
            from qiskit.primitives.containers.estimator_pub import EstimatorPub

            pub = EstimatorPub.coerce(pub)
            return EstimatorPub(_for_aer(pub.circuit), pub.observables, pub.parameter_values,
                                pub.precision)

    class AerSampler(TimedSampler):
        def _prepare(self, pub):
            from qiskit.primitives.containers.sampler_pub import SamplerPub

            pub = SamplerPub.coerce(pub)
            return SamplerPub(_for_aer(pub.circuit), pub.parameter_values, pub.shots)

    return TimedEstimator, TimedSampler, AerEstimator, AerSampler


_AER_BASIS: list[str] = []
#: id of a circuit -> (the circuit, its transpiled form): both kept alive, so that no
#: later circuit reuses an id (Aer's values went wrong on VarQITE's gradient circuits
#: when the transpiled circuits were let go call after call)
_AER_MADE: dict[int, tuple] = {}


def _for_aer(circuit):
    """``circuit`` in Aer's basis (untimed): Aer's primitives take ISA circuits only, and
    its documentation transpiles them for the simulator first; without a coupling map the
    qubits stay where they are."""
    made = _AER_MADE.get(id(circuit))
    if made is None or made[0] is not circuit:
        made = _AER_MADE[id(circuit)] = (circuit, _transpile_for_aer(circuit))
    return made[1]


def _transpile_for_aer(circuit):
    from qiskit import transpile

    if not _AER_BASIS:
        from qiskit.circuit.library.standard_gates import get_standard_gate_name_mapping
        from qiskit_aer import AerSimulator

        standard = get_standard_gate_name_mapping()
        _AER_BASIS.extend(g for g in AerSimulator().configuration().basis_gates
                          if g in standard)
    return transpile(circuit, basis_gates=_AER_BASIS, optimization_level=0)


WHO = ("reference", "qsimdist", "aer")


def make_primitives(who: str):
    """(estimator, sampler) of ``who``, each wrapped to time its calls."""
    TimedEstimator, TimedSampler, AerEstimator, AerSampler = _timed_classes()
    if who == "reference":
        from qiskit.primitives import StatevectorEstimator, StatevectorSampler

        est, samp = StatevectorEstimator(seed=SEED), StatevectorSampler(seed=SEED,
                                                                       default_shots=SHOTS)
    elif who == "qsimdist":
        from qsimdist.qiskit import EstimatorV2, SamplerV2

        est, samp = EstimatorV2(seed=SEED), SamplerV2(seed=SEED, default_shots=SHOTS)
    else:
        from qiskit_aer.primitives import EstimatorV2, SamplerV2

        est = EstimatorV2(options={"run_options": {"seed_simulator": SEED}})
        samp = SamplerV2(default_shots=SHOTS, seed=SEED)
        return AerEstimator(est), AerSampler(samp)
    return TimedEstimator(est), TimedSampler(samp)


# ---------------------------------------------------------------------------------------
# the workflows: each takes (estimator, sampler, quick) and returns its final values


def _seed_globals() -> None:
    from qiskit_algorithms.utils import algorithm_globals

    algorithm_globals.random_seed = SEED
    try:
        from qiskit_machine_learning.utils import algorithm_globals as ml_globals

        ml_globals.random_seed = SEED
    except ImportError:
        pass


def _h2():
    from qiskit.quantum_info import SparsePauliOp

    return SparsePauliOp.from_list(H2)


def _heisenberg(n: int):
    from qiskit.quantum_info import SparsePauliOp

    terms = []
    for i in range(n):
        j = (i + 1) % n
        for p in "XYZ":
            label = ["I"] * n
            label[n - 1 - i] = label[n - 1 - j] = p
            terms.append(("".join(label), 1.0))
    return SparsePauliOp.from_list(terms).simplify()


def vqe_h2(est, samp, quick: bool) -> list[float]:
    from qiskit.circuit.library import efficient_su2
    from qiskit_algorithms import VQE
    from qiskit_algorithms.gradients import ParamShiftEstimatorGradient
    from qiskit_algorithms.optimizers import SLSQP

    ansatz = efficient_su2(2, reps=2)
    vqe = VQE(est, ansatz, SLSQP(maxiter=5 if quick else 30),
              gradient=ParamShiftEstimatorGradient(est),
              initial_point=np.linspace(-1, 1, ansatz.num_parameters))
    res = vqe.compute_minimum_eigenvalue(_h2())
    return [float(res.eigenvalue), *map(float, res.optimal_point)]


def vqe_heisenberg(est, samp, quick: bool) -> list[float]:
    from qiskit.circuit.library import efficient_su2
    from qiskit_algorithms import VQE
    from qiskit_algorithms.gradients import ParamShiftEstimatorGradient
    from qiskit_algorithms.optimizers import SLSQP

    ansatz = efficient_su2(4, reps=2)
    vqe = VQE(est, ansatz, SLSQP(maxiter=5 if quick else 20),
              gradient=ParamShiftEstimatorGradient(est),
              initial_point=np.linspace(-1, 1, ansatz.num_parameters))
    res = vqe.compute_minimum_eigenvalue(_heisenberg(4))
    return [float(res.eigenvalue), *map(float, res.optimal_point)]


def _maxcut():
    from qiskit.quantum_info import SparsePauliOp

    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]
    n = 4
    terms = []
    for a, b in edges:
        label = ["I"] * n
        label[n - 1 - a] = label[n - 1 - b] = "Z"
        terms.append(("".join(label), 0.5))
    return SparsePauliOp.from_list(terms)


def qaoa_maxcut(est, samp, quick: bool) -> list[float]:
    from qiskit_algorithms import QAOA
    from qiskit_algorithms.optimizers import COBYLA

    qaoa = QAOA(samp, COBYLA(maxiter=8 if quick else 40), reps=2,
                initial_point=[0.4, 0.8, 0.6, 0.3])
    res = qaoa.compute_minimum_eigenvalue(_maxcut())
    # the cut of the best bitstring drawn, and the optimized energy
    return [float(res.eigenvalue), float(res.optimal_value)]


def vqd_h2(est, samp, quick: bool) -> list[float]:
    from qiskit.circuit.library import real_amplitudes
    from qiskit_algorithms import VQD
    from qiskit_algorithms.optimizers import COBYLA
    from qiskit_algorithms.state_fidelities import ComputeUncompute

    ansatz = real_amplitudes(2, reps=2)
    vqd = VQD(est, ComputeUncompute(samp), ansatz, COBYLA(maxiter=8 if quick else 40),
              k=2, betas=[3.0, 3.0],
              initial_point=np.linspace(-1, 1, ansatz.num_parameters))
    res = vqd.compute_eigenvalues(_h2())
    return [float(v) for v in np.real(res.eigenvalues)]


def varqite(est, samp, quick: bool) -> list[float]:
    from qiskit.circuit.library import efficient_su2
    from qiskit_algorithms import TimeEvolutionProblem, VarQITE
    from qiskit_algorithms.gradients import LinCombEstimatorGradient, LinCombQGT
    from qiskit_algorithms.time_evolvers.variational import ImaginaryMcLachlanPrinciple

    ansatz = efficient_su2(2, reps=1)
    init = np.full(ansatz.num_parameters, np.pi / 2)
    principle = ImaginaryMcLachlanPrinciple(qgt=LinCombQGT(est),
                                            gradient=LinCombEstimatorGradient(est))
    h = _h2()
    problem = TimeEvolutionProblem(h, time=1.0, aux_operators=[h])
    evo = VarQITE(ansatz, init, principle, est, num_timesteps=3 if quick else 20)
    res = evo.evolve(problem)
    return [float(np.real(res.aux_ops_evaluated[0][0])),
            *map(float, res.parameter_values[-1])]


def grover(est, samp, quick: bool) -> list[float]:
    from qiskit import QuantumCircuit
    from qiskit_algorithms import AmplificationProblem, Grover

    oracle = QuantumCircuit(3)
    oracle.x(1)  # marks 101
    oracle.h(2)
    oracle.ccx(0, 1, 2)
    oracle.h(2)
    oracle.x(1)
    problem = AmplificationProblem(oracle, is_good_state=["101"])
    hits = 0
    rounds = 2 if quick else 10
    for _ in range(rounds):
        res = Grover(iterations=[1, 2, 3], sampler=samp).amplify(problem)
        hits += res.top_measurement == "101"
    return [hits / rounds, float(res.max_probability)]


def _qnn_circuit():
    from qiskit import QuantumCircuit
    from qiskit.circuit.library import real_amplitudes, zz_feature_map

    fm = zz_feature_map(2)
    an = real_amplitudes(2, reps=1)
    qc = QuantumCircuit(2)
    qc.compose(fm, inplace=True)
    qc.compose(an, inplace=True)
    return qc, fm.parameters, an.parameters


def estimator_qnn(est, samp, quick: bool) -> list[float]:
    from qiskit.quantum_info import SparsePauliOp
    from qiskit_machine_learning.neural_networks import EstimatorQNN

    qc, inputs, weights = _qnn_circuit()
    qnn = EstimatorQNN(circuit=qc, estimator=est, observables=SparsePauliOp("ZZ"),
                       input_params=inputs, weight_params=weights, input_gradients=True,
                       default_precision=0.0)
    rng = np.random.default_rng(SEED)
    out: list[float] = []
    for _ in range(1 if quick else 5):
        x = rng.uniform(-1, 1, (20, qnn.num_inputs))
        w = rng.uniform(-1, 1, qnn.num_weights)
        fwd = qnn.forward(x, w)
        gin, gw = qnn.backward(x, w)
        out += [*np.ravel(fwd), *np.ravel(gin), *np.ravel(gw)]
    return [float(v) for v in out]


def _vqc_data():
    rng = np.random.default_rng(SEED)
    x = rng.uniform(-1, 1, (20, 2))
    y = (np.sum(x, axis=1) >= 0).astype(int)
    return x, np.eye(2)[y]


def vqc_fit(est, samp, quick: bool) -> list[float]:
    from qiskit.circuit.library import real_amplitudes, zz_feature_map
    from qiskit_machine_learning.algorithms import VQC
    from qiskit_machine_learning.optimizers import COBYLA

    x, y = _vqc_data()
    vqc = VQC(feature_map=zz_feature_map(2), ansatz=real_amplitudes(2, reps=1),
              optimizer=COBYLA(maxiter=3 if quick else 15), sampler=samp,
              initial_point=np.linspace(-1, 1, 4))
    vqc.fit(x, y)
    return [float(vqc.score(x, y)), float(vqc.fit_result.fun)]


@dataclass(frozen=True)
class Workflow:
    name: str
    run: Callable
    kind: str  # "estimator" (exact values: 1e-12) or "sampler" (within ``noise``)
    #: shot-noise bound on each final value's difference from the reference's (samplers)
    noise: float = 0.0
    needs: str = "qiskit_algorithms"


WORKFLOWS = [
    Workflow("vqe h2", vqe_h2, "estimator"),
    Workflow("vqe heisenberg", vqe_heisenberg, "estimator"),
    # the final energy over 1,024 shots of a 5-edge cut: standard deviation below
    # 2.5 / 32 ~ 0.08 per evaluation; COBYLA's trajectory follows the draws
    Workflow("qaoa maxcut", qaoa_maxcut, "sampler", noise=0.5),
    # a fidelity of 1,024 shots is off by up to 1/32 (one sigma); the penalty beta = 3
    Workflow("vqd h2", vqd_h2, "sampler", noise=0.3),
    Workflow("varqite", varqite, "estimator"),
    # the hit rate of ten searches and the winner's probability (1,024 shots: 0.016)
    Workflow("grover", grover, "sampler", noise=0.1),
    Workflow("estimator qnn", estimator_qnn, "estimator", needs="qiskit_machine_learning"),
    # the training score of 20 points (one point 0.05) and the loss; COBYLA follows draws
    Workflow("vqc fit", vqc_fit, "sampler", noise=0.25, needs="qiskit_machine_learning"),
]


def _available(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def run_workflow(wf: Workflow, repeats: int, who: list[str], quick: bool = False) -> dict:
    """Median seconds inside the primitives per participant, calls/pubs, agreement."""
    times: dict[str, list[float]] = {w: [] for w in who}
    counts: dict[str, tuple[int, int]] = {}
    values: dict[str, list[float]] = {}
    for r in range(repeats + 1):  # round 0 warms every primitive up, untimed
        for w in who if r % 2 else list(reversed(who)):
            est, samp = make_primitives(w)
            _seed_globals()
            values[w] = wf.run(est, samp, quick)
            if r:
                times[w].append(est.seconds + samp.seconds)
            counts[w] = (est.calls + samp.calls, est.pubs + samp.pubs)
    ref = np.asarray(values["reference"])
    row = {"workflow": wf.name, "kind": wf.kind, "repeats": repeats,
           "calls": counts["reference"][0], "pubs": counts["reference"][1],
           "values": {w: values[w] for w in who}}
    bound = TOLERANCE if wf.kind == "estimator" else wf.noise
    for w in who:
        med = statistics.median(times[w])
        got = np.asarray(values[w])
        dev = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
        row[w] = {"seconds": med, "ratio_to_reference":
                  med / statistics.median(times["reference"]),
                  "calls": counts[w][0], "pubs": counts[w][1],
                  "max_abs_deviation": dev, "agrees": dev <= bound}
    row["bound"] = bound
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds (medians)")
    ap.add_argument("--only", nargs="+", choices=[w.name for w in WORKFLOWS], default=None)
    ap.add_argument("--no-aer", action="store_true", help="leave Aer out")
    ap.add_argument("--quick", action="store_true", help="few optimizer iterations (tests)")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    who = ["reference", "qsimdist"]
    if not args.no_aer and _available("qiskit_aer"):
        who.append("aer")
    rows = []
    for wf in WORKFLOWS:
        if args.only and wf.name not in args.only:
            continue
        if not _available(wf.needs):
            print(f"skipped {wf.name}: {wf.needs} is not installed")
            continue
        rows.append(run_workflow(wf, args.repeats, who, args.quick))
        r = rows[-1]
        print(f"# {wf.name}: " + ", ".join(f"{w} {r[w]['seconds']:.3f} s" for w in who),
              file=sys.stderr, flush=True)
    print("| workflow | calls / pubs | reference s | qsimdist s | Aer s | qsimdist / reference "
          "| Aer / reference | qsimdist vs reference (bound) | Aer vs reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q, ref, a = r["qsimdist"], r["reference"], r.get("aer")
        calls = f"{r['calls']} / {r['pubs']}"
        for w in who[1:]:
            if r[w]["calls"] != r["calls"] or r[w]["pubs"] != r["pubs"]:
                calls += f" ({w} {r[w]['calls']} / {r[w]['pubs']})"

        def agree(x):
            return (f"{x['max_abs_deviation']:.1e} "
                    f"{'ok' if x['agrees'] else 'DIFFERS'}")

        print(f"| {r['workflow']} | {calls} | {ref['seconds']:.3f} | {q['seconds']:.3f} "
              f"| {a['seconds']:.3f} | " if a else
              f"| {r['workflow']} | {calls} | {ref['seconds']:.3f} | {q['seconds']:.3f} | — | ",
              end="")
        print(f"{q['ratio_to_reference']:.2f} | "
              f"{a['ratio_to_reference']:.2f} | " if a else
              f"{q['ratio_to_reference']:.2f} | — | ", end="")
        print(f"{agree(q)} ({r['bound']:.0e}) | {agree(a) if a else '—'} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
