"""The cost model's prices: every number that prices time or work, in one module.

Each constant is a *prediction* in seconds (or a rate, or a fixed cost in FLOPs)
that a route, a path search, a fusion, a batcher, a reader or a scheduler weighs
its choices with; the comment above it cites the measurement behind it. Sizes,
block sizes and thresholds of behaviour stay with the code they shape.

Sections, by what they price:

* statevector kernels (numpy's and the compiled one, fusion, numba's start-up);
* qsim (the other statevector engine);
* planner search (the path search's rate and trial time);
* tensor-network floor (what a contraction costs at least; batching bitstrings);
* reading a state (Pauli terms, Z strings, qubit-wise commuting groups);
* sampling (marginals, draws, planning chain networks);
* stabilizer (stim's tableau and frame sampler);
* local contraction kernels (:class:`LocalCosts`, the single-device kernel choice);
* distribution (planning effort, the latency assumed where none is measured).

Users read the scalar prices here at call time (``from ..hardware import costs``,
then ``costs.TN_RATE``), so a value changed on this module (a test's monkeypatch, a
fit on the user's machine) reaches every user. The hardware profile's part of the
cost model, :class:`qsimdist.planner.distribution.CostModel`, prices distributed steps
from a :class:`~qsimdist.hardware.HardwareProfile`; it stays with the planner because it
prices index bits and shards (:mod:`qsimdist.planner.distribution.bits`), which this
layer may not import.

Layer 1: imports only the standard library. A fit of :class:`LocalCosts` on the user's
machine is read by :func:`qsimdist.hardware.local_costs.local_costs`.
"""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------ statevector kernels
# Cost model of one fused gate on a 2^n state (numpy tensordot on this project's 2-core
# machine, complex128, n = 14..20; see docs/benchmarks/history.md, "Deep, narrow circuits"):
#: seconds of Python and numpy call overhead per applied gate
GATE_OVERHEAD_SECONDS = 1.5e-5
#: seconds per state element per dense gate for the copy into the GEMM layout and the output
DENSE_SECONDS_PER_ELEMENT = 2.0e-9
#: seconds per state element per 2^k multiply-adds of a dense k-qubit gate (0.45e-9 for the
#: tensordot kernel; refitted for the axis-tracking one: this model's old predictions
#: scaled by the speedup measured side by side on 28 fused runs; docs/benchmarks/history.md,
#: "Buffers kept between runs, an axis-tracking statevector")
MAC_SECONDS_PER_ELEMENT = 0.31e-9
# The compiled in-place kernel (states of 14 qubits and more), fitted on this machine at
# 2^20 and 2^24 elements, widths 1-5 (``python -m benchmarks.sv_kernel_fit``; docs/benchmarks/
# history.md, "The statevector route near qsim"): seconds per element per
# dense gate, whatever its width (one pass, plus the low-bit swaps a third of the gates
# need), and per element per 2^k complex multiply-adds, by bytes per amplitude
COMPILED_SECONDS_PER_ELEMENT = 1.1e-9
COMPILED_MAC_SECONDS_PER_ELEMENT = {8: 0.075e-9, 16: 0.18e-9}
#: seconds per state element of an element-wise diagonal product
DIAGONAL_SECONDS_PER_ELEMENT = 1.2e-9
#: seconds per original gate to multiply it into its block (fusion itself)
FUSE_SECONDS_PER_GATE = 1.2e-5
#: seconds a process spends before its first compiled call: importing numba (0.2 s) and
#: loading the cached machine code (0.3 s for the first function, with numba's typing
#: registries and its BLAS check importing scipy; measured 0.5-0.8 s in all here)
STARTUP_SECONDS = 0.7
#: the same once numba itself is imported (the registries and the load remain)
LOAD_SECONDS = 0.45

#: seconds of Python and numpy call overhead per step of the batched pass over many
#: parameter sets (:mod:`qsimdist.engine.binding_sweep`: one batched GEMM, product or
#: block-building step; 6-9 us measured per step on 2-6 qubits, 2-core x86)
SWEEP_CALL_SECONDS = 8e-6
#: seconds a parameter set routed on its own spends at least beyond its route's predicted
#: price (binding, routing, the engine call, reading): ``ExpectationEngine.term_values``
#: on EfficientSU2 circuits of 2-6 qubits took 0.6-2.0 ms where the route predicted
#: 0.05-0.5 ms (2-core x86)
ROUTED_SET_SECONDS = 5e-4

# ------------------------------------------------------------------------------ qsim
#: seconds to load qsim's compiled module straight from qsimcirq's folder (once per
#: process; 0.07 s here), and to import cirq and qsimcirq where that cannot be done (1.5-1.8 s)
QSIM_LOAD_SECONDS = 0.1
QSIM_IMPORT_SECONDS = 1.6
#: qsim's seconds per state element per fused gate (3-qubit fusion, complex64, 2 threads:
#: circuit_q24, 255 gates, 1.9 s; docs/benchmarks/history.md, "The statevector route near qsim")
QSIM_SECONDS_PER_ELEMENT = 0.44e-9
#: qsim's seconds per gate handed over (a matrix gate added to qsim's circuit: 1,000 gates
#: of 3 qubits on 10 qubits took 8.6 ms with the run; through cirq it was 1e-4)
QSIM_SECONDS_PER_GATE = 1.0e-5

# -------------------------------------------------------------------- planner search
#: multiply-adds per second assumed when weighing a search against the contraction it may
#: save (a deliberately low complex64 rate; a constant, not a measurement, so that the
#: choice, and the path, is the same on every machine)
SEARCH_RATE = 1e9
#: estimated seconds of one hyper-optimiser trial per tensor (trial plus subtree
#: reconfiguration; measured ~4.8 ms on a 2,487-tensor network)
TRIAL_SECONDS_PER_TENSOR = 5e-3

# -------------------------------------------------------------- tensor-network floor
#: seconds per gate a tensor-network contraction spends at least (building the network,
#: a greedy path, lifetime ordering) — the bound below which no TN estimate is needed
TN_SECONDS_PER_GATE = 5e-5
#: ... and per gate where the network is too large to skip simplification (qsimdist's own
#: ADCRS passes measured 1.1 s for square_root_7's 6,426 fused gates and 4.0 s for
#: hwb7_59's 21,335, 0.17-0.19 ms each, on a 2-core x86 host; quimb's had taken 8.7 s and
#: 33 s)
TN_SIMPLIFY_SECONDS_PER_GATE = 2e-4
#: multiply-adds per second assumed for a tensor-network contraction: the path planner's
#: constant (:data:`SEARCH_RATE`), so that the route, like the path, is the same on every
#: machine
TN_RATE = SEARCH_RATE
#: a path search the user gave no budget keeps searching while its best contraction is
#: predicted (at :data:`SEARCH_RATE`) to take this many times longer than the search so far,
#: up to :data:`MAX_SCALED_SEARCH_SECONDS`: seconds for a cheap network, minutes for an
#: hour-long one, as the seed paper's search scales its budget with the predicted cost
SEARCH_SHARE = 0.1
MAX_SCALED_SEARCH_SECONDS = 600.0
#: trials a search with no budget from the user runs first; more follow, in doubling
#: batches, only while the best tree so far pays for them (its multiply-adds at
#: :data:`SEARCH_RATE` over :data:`TRIAL_SECONDS_PER_TENSOR` per trial and tensor)
FIRST_TRIALS = 4
#: the least extra search worth starting (seconds)
MIN_SCALED_SEARCH_SECONDS = 2.0
#: that extra search runs in rounds of at most this many seconds (and at most the search so
#: far), the budget priced again on the best tree after each (a cheaper tree shortens it)
SEARCH_ROUND_SECONDS = 30.0
#: rounds in a row that saved less predicted time than they took, after which the search
#: stops (rounds are as long as the search so far: a network with little left to find
#: stops in seconds)
STALLED_ROUNDS = 2
#: a plan sliced to fit memory along the unsliced search's path that runs more than this
#: many times that path's FLOPs, and is predicted at least :data:`SLICED_RESEARCH_SECONDS`
#: (at :data:`SEARCH_RATE`), earns a second search scored by the sliced cost (each round's
#: best tree sliced to the memory's slicing target; its budget, as above, a share of the
#: sliced tree's predicted run); the cheaper plan is kept
SLICED_RESEARCH_OVERHEAD = 2.0
SLICED_RESEARCH_SECONDS = 20.0
#: flop-equivalents of one second of per-contraction work (building, simplifying, planning)
#: when bitstrings are batched into patterns; only the ratio to the model's flops matters
#: when batch widths are compared
NOMINAL_FLOP_RATE = 1e10
#: seconds of per-contraction work per gate (network building and simplification) when
#: bitstrings are batched into patterns
SECONDS_PER_GATE = 2e-3

# ------------------------------------------------------------------- reading a state
#: seconds per state element per Pauli factor read off the state (the copy-and-add kernel
#: of :func:`qsimdist.engine.term_readers.term_on_state`: about one dense pass per factor,
#: plus the product)
TERM_SECONDS_PER_ELEMENT = 2.0e-9
#: seconds per state element per Pauli string read by the compiled blocked kernel, every
#: string in one pass (:func:`qsimdist.executors.sv_kernels.pauli_expectations`, states of
#: 14+ qubits; 0.99-1.06 ns in complex128 at 20-24 qubits, 20 strings of weight 3-4,
#: ``python -m benchmarks.sv_kernel_fit``; docs/benchmarks/history.md, "Issue 24 closed out")
PAULI_PASS_SECONDS_PER_ELEMENT = 1.0e-9
#: measured seconds per state element of :func:`~qsimdist.engine.term_readers.z_strings_on_state`,
#: whatever the number of strings (24 qubits, 12 strings: 1.5 ns, where 12 compiled passes
#: took 29 ns)
Z_STRINGS_SECONDS_PER_ELEMENT = 1.6e-9
#: measured seconds per state element (complex128, numpy, this host, 18-22 qubits;
#: docs/benchmarks/history.md, "The estimator's qubit-wise commuting groups beside Aer" and
#: "The primitives beside Aer again") of the grouped reader's passes: the copy moving
#: the group's qubits last into a reused buffer (0.6-8 ns, the scattered supports
#: dearest), one rotation GEMM of up to 3 qubits, the marginal as one contiguous sum
#: of squares over the float view (0.54-0.76 ns); then, per marginal element, the Z
#: strings' values (``z_string_values``: a fixed part, and one multiply-add per term)
GROUP_COPY_SECONDS_PER_ELEMENT = 4.0e-9
GROUP_ROTATION_SECONDS_PER_ELEMENT = 2.6e-9
GROUP_MARGINAL_SECONDS_PER_ELEMENT = 0.7e-9
GROUP_SIGNS_SECONDS_PER_ELEMENT = 0.5e-9
GROUP_TERM_SECONDS_PER_ELEMENT = 0.1e-9
#: predicted seconds of reading from which greedy groupings beyond the heaviest-first one
#: are tried (``qsimdist.engine.pauli_terms.GROUPING_TRIES`` seeded shuffles of the terms);
#: the cheapest predicted wins (rc22's 40 terms: 6 groups, 320 ms predicted, against 5 and
#: 265 ms for the best of 200 shuffles)
GROUPING_SEARCH_SECONDS = 0.05

# -------------------------------------------------------------------------- sampling
#: seconds per state element to turn the state into a marginal (``|a|^2``, then one sum)
MARGINAL_SECONDS_PER_ELEMENT = 3.0e-9
#: seconds per shot to draw from a cumulative distribution and unpack its bits
DRAW_SECONDS_PER_SHOT = 2.0e-7
#: predicted seconds to plan one chain network whose path is not cached (measured:
#: efficient_su2(24, reps=3), 2,000 shots, 3 plans made: 4.3 s with empty caches against
#: 1.24 s with the paths on disk); the router adds it per structure the chain will plan
#: unless this circuit's chain has run before with this cache
#: (:func:`qsimdist.engine.network_sampling.chain_planned`)
CHAIN_PLAN_SECONDS = 1.0

# ------------------------------------------------------------------------ stabilizer
# Prices, in the router's unit (predicted seconds), stim 1.16 on one core of this project's
# machines: ``python -m qsimdist.engine.stabilizer`` prints the fit.
#: fixed cost of a request: building the stim program and its simulator
STABILIZER_START_SECONDS = 5e-5
#: per gate: the Python conversion (a cached lookup and a line of stim text) and the
#: tableau's column update
STABILIZER_SECONDS_PER_GATE = 2e-6
#: per gate per qubit of the tableau (a gate updates ``2n`` bits of its qubits' columns)
STABILIZER_SECONDS_PER_GATE_QUBIT = 2e-10
#: per qubit^2, once for the terms: the inverse tableau they are conjugated by
STABILIZER_SECONDS_PER_QUBIT2 = 4e-10
#: per Pauli term, plus per term per qubit (its Pauli string built and conjugated)
STABILIZER_SECONDS_PER_TERM = 3e-6
STABILIZER_SECONDS_PER_TERM_QUBIT = 3e-8
#: per measurement per qubit^2: the frame sampler's reference sample (a tableau measurement)
STABILIZER_SECONDS_PER_MEASUREMENT_QUBIT2 = 5e-12
#: per shot per operation (gate or measurement) of the frame sampler (shots packed 128+ to a
#: word), and per shot per measured bit handed back (transposed to shot-major, unpacked)
STABILIZER_SECONDS_PER_SHOT_OP = 2.5e-11
STABILIZER_SECONDS_PER_SHOT_BIT = 6e-9

# --------------------------------------------------------- local contraction kernels
#: a step's fixed cost in the local executor, in FLOPs: about 25 us a step at 10 GFLOP/s
#: (the n30 amplitude's small steps on this project's 2-core machine, measured in
#: docs/benchmarks/history.md, "Reuse across slices"); weighs steps when a sliced local
#: plan chooses the outputs it keeps (:func:`qsimdist.planner.reuse.local_choice`)
LOCAL_STEP_FLOPS = 2.5e5
#: a step's Python dispatch in the local executor beside its kernel, and a slice's (leaves
#: sliced and loaded), in seconds: what :func:`qsimdist.planner.estimate.predicted_local_seconds`
#: adds to the kernels' prices (fitted on kicked-Ising term plans and n30, see
#: docs/benchmarks/history.md, "The cost before the run")
LOCAL_STEP_DISPATCH_SECONDS = 2.0e-5
LOCAL_SLICE_DISPATCH_SECONDS = 5.0e-5
#: plans of fewer FLOPs than this run their loop steps through numpy.matmul instead: on a
#: fresh machine each compiled variant takes seconds to compile (then it is cached on disk
#: under numba's cache), while such a plan takes milliseconds either way (the executors'
#: kernels read it from here; the cost of a term counts the steps that will run compiled)
COMPILE_MIN_FLOPS = 1e8
#: inner GEMMs of at most this many multiply-adds may run in the compiled loop kernel
#: (``LocalCosts.small_inner``'s default; the executors' kernels read it from here)
SMALL_INNER = 4096
#: extents of ``n`` and ``k`` that have a specialised (unrolled) loop kernel, compiled once
#: and cached (``LocalCosts.loop_unrolled_n`` / ``loop_unrolled_k``'s defaults)
UNROLLED_N = (1, 2, 4, 8, 16)
UNROLLED_K = (2, 4, 8)


@dataclass(frozen=True)
class LocalCosts:
    """Constants of the single-device kernel choice (seconds per unit).

    ``call`` is the overhead of one BLAS call (one inner GEMM of a broadcast
    ``matmul``). ``flop`` is the BLAS time per real FLOP of a large GEMM; an
    ``m x n x k`` GEMM runs at that rate times ``m/(m+h) * n/(n+h) *
    k/(k+h)`` with ``h = gemm_half`` (small GEMMs leave most of the machine
    idle: on the machine below a 2 x 1024 x 32 GEMM runs ten times slower per
    FLOP than a 512-cube). ``copy_byte`` is the time of one byte moved by a
    contiguous copy (or a permutation whose contiguous runs are at least
    ``long_run`` elements) and ``permute_byte`` by a strided permutation. A
    step permutes at run time only when that is predicted
    ``transpose_margin`` times faster than the best permutation-free kernel:
    the lifetime order exists to avoid permutations, and a close call is not
    worth one.

    Broadcast steps whose inner GEMM has at most ``small_inner``
    multiply-adds may run in the compiled loop kernel: ``loop_setup`` per
    step (dispatch and stride tables), ``loop_call`` per outer index, and
    ``loop_flop`` seconds per real FLOP where ``n`` and ``k`` are among the
    unrolled extents (``loop_unrolled_n``, ``loop_unrolled_k``), else
    ``loop_flop_generic``. A step whose operands share no outer axis may
    instead run as the tiled kernel (see ``tiled_seconds``). A step too large
    for the loop runs tiled instead of BLAS broadcast only where predicted
    ``tiled_margin`` times faster. The loop and tiled constants were fitted
    (least squares on log time) to 183 step shapes of three circuits' plans
    timed in isolation (docs/benchmarks/history.md, "Tiled kernel, second pass"):
    the fitted choice's total time is within 1% of the best kernel's per step,
    the previous constants' 40% above it. Defaults are for a 2-core x86 machine.
    """

    call: float = 0.4e-6
    flop: float = 1 / 100e9
    gemm_half: float = 16.0
    copy_byte: float = 1 / 4e9
    permute_byte: float = 1 / 1.5e9
    long_run: int = 64
    loop_setup: float = 4.6e-6
    loop_call: float = 0.0
    loop_flop: float = 1 / 10e9
    loop_flop_generic: float = 1 / 6.7e9
    loop_unrolled_n: tuple[int, ...] = UNROLLED_N
    loop_unrolled_k: tuple[int, ...] = UNROLLED_K
    small_inner: int = SMALL_INNER
    transpose_margin: float = 1.5
    tiled_setup: float = 23e-6
    tiled_flop: float = 1 / 150e9
    tiled_half: float = 3.0
    tiled_byte: float = 1 / 10.5e9
    tiled_margin: float = 1.5
    tiled_small: int = 65536

    def loop_seconds(self, batch: int, m: int, n: int, k: int) -> float:
        """Predicted time of the compiled loop kernel (inf where the inner GEMM is too big)."""
        if m * n * k > self.small_inner:
            return float("inf")
        unrolled = n in self.loop_unrolled_n and k in self.loop_unrolled_k
        per_flop = self.loop_flop if unrolled else self.loop_flop_generic
        return self.loop_setup + batch * self.loop_call + 8.0 * batch * m * n * k * per_flop

    def tiled_seconds(self, rows: int, cols: int, k: int, itemsize: int) -> float:
        """Predicted time of the tiled kernel: ``rows x k`` by ``cols x k`` into ``rows x cols``.

        Row tiles of the large operand times the small one through BLAS (as
        real GEMMs on the interleaved storage where ``k`` is small), each tile
        scattered into place: ``tiled_setup`` per step, ``tiled_flop`` seconds
        per real FLOP divided by ``cols/(cols+h) * k/(k+h)`` with ``h =
        tiled_half`` (thin GEMMs leave the vector units idle), plus the large
        operand read and the output written at ``tiled_byte`` seconds per
        byte. Only a small operand (``cols * k <= tiled_small``) qualifies.
        """
        if cols * k > self.tiled_small or k == 0 or rows == 0:
            return float("inf")
        h = self.tiled_half
        eff = (cols / (cols + h)) * (k / (k + h))
        flops = 8.0 * rows * cols * k
        moved = (rows * k + rows * cols) * itemsize
        return self.tiled_setup + flops * self.tiled_flop / eff + moved * self.tiled_byte

    def gemm_seconds(self, calls: int, m: int, n: int, k: int) -> float:
        """Predicted time of ``calls`` BLAS GEMMs of shape ``m x n x k`` (complex)."""
        h = self.gemm_half
        eff = (m / (m + h)) * (n / (n + h)) * (k / (k + h))
        return calls * self.call + 8.0 * calls * m * n * k * self.flop / eff


#: the kernel choice's prices where a caller passes none and no fit is named
DEFAULT_COSTS = LocalCosts()
#: the environment variable naming a TOML file of fitted local costs (``qsimdist calibrate
#: --local-costs FILE``): where set, the planner prices every plan's kernels with it
#: (:func:`qsimdist.hardware.local_costs.local_costs`)
LOCAL_COSTS_VARIABLE = "QSIMDIST_LOCAL_COSTS"
#: the fields ``qsimdist calibrate --local-costs`` measures (the others keep their defaults)
FITTED_LOCAL_FIELDS = ("call", "flop", "gemm_half", "copy_byte", "permute_byte")

# ---------------------------------------------------------------------- distribution
#: planning effort, in seconds per plan step of one ``schedule_slice`` or
#: ``sliced_plan`` call (measured here: 0.9-1.6e-4 on 77- and 133-step plans)
PLANNING_SECONDS_PER_STEP = 1.0e-4
#: the effort a budgeted search always spends before weighing it against the run
MIN_PLANNING_SECONDS = 0.25
#: latency assumed when it is not measured (no MPI), seconds per message
UNMEASURED_LATENCY = 1e-6
