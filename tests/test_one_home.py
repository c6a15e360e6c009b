"""One home per concept (issue 23): the light cone, the one-qubit fusers, fit-to-memory
slicing and the loop-kernel constants, each checked against an independent definition."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import cotengra as ctg
import numpy as np
import pytest
from scipy.stats import unitary_group

from qsimdist import Network, PlanError
from qsimdist.frontends import GateCircuit
from qsimdist.frontends.circuit import Gate, LightCone
from qsimdist.frontends.one_qubit_fusion import (
    fuse_into_neighbours,
    fuse_keeping_diagonals,
    fuse_single_qubit_gates,
)
from qsimdist.planner.path import PathOptions, find_path
from qsimdist.planner.plan import (
    SLICE_TARGET_SHARE,
    build_plan,
    fit_to_memory,
    make_plan,
    slice_target,
)
from qsimdist.planner.slicing import slice_path


def random_circuit(seed: int, n: int = 5, n_gates: int = 30, widths=(1, 1, 2, 2, 3)):
    """Random unitaries on random qubits (some diagonal), qubit tuples in random order."""
    rng = np.random.default_rng(seed)
    gc = GateCircuit(n, global_phase=float(rng.random()), name=f"random{seed}")
    for _ in range(n_gates):
        k = int(rng.choice(widths))
        qubits = [int(q) for q in rng.choice(n, size=k, replace=False)]
        if rng.random() < 0.2:
            m = np.diag(np.exp(2j * np.pi * rng.random(2**k)))
        else:
            m = unitary_group.rvs(2**k, random_state=int(rng.integers(1 << 30)))
        gc.append(m, qubits, name=f"g{k}")
    return gc


def statevector(gc: GateCircuit, gates=None) -> np.ndarray:
    """``U|0...0>`` as an ``n``-axis tensor (axis ``q`` is qubit ``q``), by plain numpy."""
    n = gc.n_qubits
    psi = np.zeros((2,) * n, dtype=complex)
    psi[(0,) * n] = 1.0
    for k in range(len(gc.gates)) if gates is None else gates:
        g = gc.gates[k]
        m = len(g.qubits)
        t = g.matrix.reshape((2,) * (2 * m))
        psi = np.tensordot(t, psi, axes=(list(range(m, 2 * m)), list(g.qubits)))
        psi = np.moveaxis(psi, list(range(m)), list(g.qubits))
    return psi * np.exp(1j * gc.global_phase)


def reduced_density_matrix(psi: np.ndarray, qubits) -> np.ndarray:
    n = psi.ndim
    rest = [q for q in range(n) if q not in qubits]
    t = np.transpose(psi, list(qubits) + rest).reshape(2 ** len(qubits), -1)
    return t @ t.conj().T


# ------------------------------------------------------------------------ light cone
def brute_force_cone(gc: GateCircuit, qubits) -> set[int]:
    """The smallest gate set holding every gate on ``qubits`` and every gate that shares a
    qubit with a later gate of the set (a fixed point, reached by forward sweeps)."""
    target = set(qubits)
    cone: set[int] = set()
    changed = True
    while changed:
        changed = False
        for k, g in enumerate(gc.gates):
            if k in cone:
                continue
            if target & set(g.qubits) or any(
                    j > k and set(gc.gates[j].qubits) & set(g.qubits) for j in cone):
                cone.add(k)
                changed = True
    return cone


@pytest.mark.parametrize("seed", range(12))
def test_light_cone_matches_the_brute_force_definition(seed):
    gc = random_circuit(seed, n=6, n_gates=18, widths=(1, 2, 2, 3))
    rng = np.random.default_rng(seed)
    for size in range(0, 4):
        qubits = [int(q) for q in rng.choice(6, size=size, replace=False)]
        lc = gc.light_cone(qubits)
        assert isinstance(lc, LightCone)
        want = brute_force_cone(gc, qubits)
        assert lc.gates == tuple(sorted(want))
        assert lc.qubits == tuple(sorted(set(qubits).union(
            *(gc.gates[k].qubits for k in want))))
        # order, repetitions and numpy integers do not matter
        assert gc.light_cone(list(reversed(qubits)) + qubits) == lc
        assert gc.light_cone(np.array(qubits, dtype=np.int64)) == lc
        gates, cone = lc  # unpacks as (gates, qubits)
        assert (gates, cone) == (lc.gates, lc.qubits)


@pytest.mark.parametrize("seed", range(6))
def test_light_cone_alone_gives_the_reduced_state(seed):
    """Dropping every gate outside the cone leaves the qubits' reduced state unchanged."""
    gc = random_circuit(seed, n=6, n_gates=14, widths=(1, 2, 2))
    qubits = [seed % 6, (seed + 2) % 6]
    full = reduced_density_matrix(statevector(gc), qubits)
    cone = reduced_density_matrix(statevector(gc, gc.light_cone(qubits).gates), qubits)
    np.testing.assert_allclose(cone, full, atol=1e-12)


def test_light_cone_edge_cases():
    gc = GateCircuit(3)
    assert gc.light_cone([1]) == LightCone((), (1,))  # no gates: the qubits themselves
    gc.append(np.eye(4), [2, 0])
    gc.gates.append(Gate(np.eye(1, dtype=complex), ()))  # a gate on no qubit: never in a cone
    gc.append(np.eye(2), [1])
    assert gc.light_cone([]) == LightCone((), ())
    assert gc.light_cone([0]) == LightCone((0,), (0, 2))
    assert gc.light_cone([1]) == LightCone((2,), (1,))
    assert gc.light_cone(range(3)) == LightCone((0, 2), (0, 1, 2))


def test_the_old_copies_are_gone():
    import qsimdist.engine.expectation as expectation
    import qsimdist.engine.sampling as sampling

    for module, names in ((sampling, ("light_cone",)),
                          (expectation, ("light_cone", "fuse_gates", "_apply_one_qubit",
                                         "_reorder"))):
        for name in names:
            assert not hasattr(module, name), f"{module.__name__}.{name} is back"
    assert sampling.fuse_single_qubit_gates is fuse_single_qubit_gates  # imported, not copied


#: most lines a module of qsimdist/engine/ may hold (issue 44: one job per module)
ENGINE_MODULE_MAX_LINES = 600


def test_no_engine_module_exceeds_600_lines():
    """Every module of qsimdist/engine/ holds at most 600 lines (issue 44 split
    expectation.py, 1,239 lines, and sampling.py, 749, by job)."""
    import qsimdist.engine

    folder = Path(qsimdist.engine.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert {"router.py", "expectation.py", "sampling.py"} <= set(sizes)
    over = {name: n for name, n in sizes.items() if n > ENGINE_MODULE_MAX_LINES}
    assert not over, f"engine modules over {ENGINE_MODULE_MAX_LINES} lines: {over}"


def test_the_router_only_prices():
    """The statevector engine's run lives in engine/statevector_run.py: the router neither
    defines it nor imports a simulator (no re-export left behind), and every reader of the
    state imports it from its home."""
    import ast

    import qsimdist.engine.router as router
    import qsimdist.engine.statevector_run as statevector_run

    assert callable(statevector_run.final_state)
    assert not hasattr(router, "final_state") and "final_state" not in router.__all__
    folder = Path(router.__file__).parent
    imported = {(node.module, a.name)
                for node in ast.walk(ast.parse((folder / "router.py").read_text()))
                if isinstance(node, ast.ImportFrom) for a in node.names}
    assert not any(name == "simulate" for _, name in imported), imported
    for reader in ("amplitudes.py", "sampling.py", "state_sampling.py", "expectation.py"):
        text = (folder / reader).read_text()
        assert "from .router import final_state" not in text, reader
    users = [p.name for p in folder.glob("*.py")
             if "from .statevector_run import final_state" in p.read_text()]
    assert sorted(users) == ["amplitudes.py", "expectation.py", "state_sampling.py"], users


def test_bit_order_has_one_helper():
    """config.reorder_bits is the one bit-order reversal: Qiskit's order to natural and back
    (strings, labels and rows of 0/1 indexed by qubit), unknown orders refused; the engine
    and the Qiskit doors no longer reverse strings by hand."""
    import qsimdist
    from qsimdist.config import reorder_bits
    from qsimdist.errors import InvalidInputError

    assert reorder_bits("0011", "natural") == "1100"
    assert reorder_bits("0011", "qiskit") == "0011"
    assert reorder_bits(reorder_bits("XYZI", "natural"), "natural") == "XYZI"
    assert reorder_bits([1, 0, 0], "natural") == "001"  # qubit 0 is 1: rightmost in Qiskit's
    assert reorder_bits(np.array([1, 1, 0], np.uint8).tolist(), "qiskit") == "110"
    with pytest.raises(InvalidInputError, match="valid: qiskit, natural"):
        reorder_bits("01", "big")
    root = Path(qsimdist.__file__).parent
    by_hand = [str(p.relative_to(root)) for folder in ("engine", "qiskit", "frontends")
               for p in (root / folder).glob("*.py")
               if "[::-1]" in p.read_text() or "reversed(bitstring)" in p.read_text()]
    assert not by_hand, by_hand


def test_progress_has_one_protocol():
    """Every progress callback in the package is called as ``progress(stage, done, total)``
    (qsimdist.progress), a stage name first; a sliced plan's executor reports its slices so."""
    import qsimdist

    root = Path(qsimdist.__file__).parent
    odd = []
    for path in root.rglob("*.py"):
        if path.name == "progress.py":  # the protocol's own forwarder
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "progress"):
                first = node.args[0] if node.args else None
                if len(node.args) != 3 or not (isinstance(first, ast.Constant)
                                               and isinstance(first.value, str)):
                    odd.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not odd, f"progress called outside the one protocol: {odd}"
    n = 8  # a ring of 4x4 matrices: its trace, sliced to fit 1 KiB
    inputs = [[i, (i + 1) % n] for i in range(n)]
    sizes = {i: 4 for i in range(n)}
    net = Network(inputs, [], sizes, [np.eye(4) for _ in inputs])
    plan = make_plan(net, dtype="complex128", memory_limit=1024)
    assert plan.stats.n_slices > 1
    calls = []
    plan.execute(progress=lambda *args: calls.append(args))
    assert calls and all(len(c) == 3 and c[0] == "slices" for c in calls), calls
    assert calls[-1][1:] == (plan.stats.n_slices, plan.stats.n_slices)


# --------------------------------------------------------------------------- fusion
@pytest.mark.parametrize("fuser", [fuse_single_qubit_gates, fuse_into_neighbours,
                                   fuse_keeping_diagonals])
@pytest.mark.parametrize("seed", range(10))
def test_one_qubit_fusers_keep_the_state_and_never_widen(fuser, seed):
    gc = random_circuit(seed)
    fused = fuser(gc)
    np.testing.assert_allclose(statevector(fused), statevector(gc), atol=1e-12)
    assert fused.global_phase == gc.global_phase and fused.n_qubits == gc.n_qubits
    multi = [g for g in gc.gates if len(g.qubits) > 1]
    assert len(fused.gates) <= len(gc.gates)
    assert sum(1 for g in fused.gates if len(g.qubits) > 1) <= len(multi)
    shapes = {frozenset(g.qubits) for g in gc.gates}
    for g in fused.gates:
        assert frozenset(g.qubits) in shapes  # no fused gate spans a new set of qubits
    for q in range(gc.n_qubits):  # the light cone is unchanged
        assert set(fused.light_cone([q]).qubits) == set(gc.light_cone([q]).qubits)


@pytest.mark.parametrize("seed", range(4))
def test_fusers_match_qiskit(seed):
    from qiskit import QuantumCircuit
    from qiskit.circuit.random import random_circuit as qiskit_random
    from qiskit.quantum_info import Statevector

    from qsimdist.frontends import load

    qc: QuantumCircuit = qiskit_random(5, 6, max_operands=2, seed=seed)
    gc = load(qc)
    sv = Statevector(qc).data.reshape((2,) * 5).transpose(range(4, -1, -1))  # axis q = qubit q
    for fuser in (fuse_single_qubit_gates, fuse_into_neighbours, fuse_keeping_diagonals):
        np.testing.assert_allclose(statevector(fuser(gc)), sv, atol=1e-10)


def test_fusers_on_a_known_circuit():
    h = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
    s = np.diag([1, 1j])
    cx = np.eye(4)[[0, 1, 3, 2]]
    gc = GateCircuit(3)
    gc.append(h, [0])
    gc.append(s, [0])
    gc.append(cx, [0, 1], "cx")
    gc.append(cx, [1, 0], "xc")
    gc.append(h, [1])
    gc.append(s, [2])
    single = fuse_single_qubit_gates(gc)
    assert [g.qubits for g in single.gates] == [(0, 1), (1, 0), (1,), (2,)]
    np.testing.assert_allclose(single.gates[0].matrix, cx @ np.kron(s @ h, np.eye(2)))
    # xc follows cx on the same qubits: one gate, over xc's qubit order; the trailing H on
    # qubit 1 joins it after, the S on qubit 2 (no multi-qubit gate) stays alone
    neighbours = fuse_into_neighbours(gc)
    assert [(g.qubits, g.name) for g in neighbours.gates] == [((1, 0), "fused"), ((2,), "fused")]
    swap = np.eye(4)[[0, 2, 1, 3]]  # a two-qubit matrix over (0, 1) <-> over (1, 0)
    first = swap @ (cx @ np.kron(s @ h, np.eye(2))) @ swap
    want = np.kron(h, np.eye(2)) @ cx @ first
    np.testing.assert_allclose(neighbours.gates[0].matrix, want, atol=1e-12)


def test_fuse_into_neighbours_structure_ignores_the_matrices():
    a, b = random_circuit(3), random_circuit(3)
    for g in b.gates:  # same qubits, other matrices (some now the identity)
        g.matrix = np.eye(g.matrix.shape[0], dtype=complex)
    assert ([g.qubits for g in fuse_into_neighbours(a).gates]
            == [g.qubits for g in fuse_into_neighbours(b).gates])


# -------------------------------------------------------------------- is_diagonal
#: names a module would give its own diagonal test of a matrix
DIAGONAL_TEST_NAMES = {"is_diagonal", "_is_diagonal"}


def _diagonal_tests(root: Path) -> list[str]:
    """``path:line`` of every function under ``root`` named like a diagonal test of a
    matrix (at any level: nested and methods too)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.name in DIAGONAL_TEST_NAMES):
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_is_diagonal_has_one_home():
    """One ``is_diagonal`` (qsimdist/network/matrices.py, with its tolerance) serves fusion,
    the statevector kernels and the doubled route (issue 53: it was written three times)."""
    import qsimdist
    from qsimdist.engine import doubled, echo
    from qsimdist.executors import statevector
    from qsimdist.frontends import fusion
    from qsimdist.network import matrices

    root = Path(qsimdist.__file__).parent
    homes = _diagonal_tests(root)
    assert [h.rsplit(":", 1)[0] for h in homes] == ["network/matrices.py"], homes
    for module in (fusion, statevector, doubled, echo):
        assert module.is_diagonal is matrices.is_diagonal, module.__name__  # imported
    assert matrices.is_diagonal(np.diag([1, 1j]))
    assert not matrices.is_diagonal(np.array([[1, 1e-300], [0, 1]]))  # exactly, by default
    assert matrices.is_diagonal(np.array([[1, 1e-13], [0, 1]]), atol=1e-12)
    assert not matrices.is_diagonal(np.array([[1, np.nan], [0, 1]]), atol=1.0)


def test_the_diagonal_scan_catches_a_second_home(tmp_path):
    (tmp_path / "a.py").write_text("def is_diagonal(m):\n    return True\n")
    (tmp_path / "b.py").write_text("class K:\n    def _is_diagonal(self, m):\n"
                                   "        return True\n")
    (tmp_path / "c.py").write_text("def is_diagonal_term(t):\n    return True\n")
    assert _diagonal_tests(tmp_path) == ["a.py:1", "b.py:2"]


# ------------------------------------------------------------------- fit to memory
def old_fit_loop(net, ssa, memory_limit, dtype, sliced=()):
    """The loop make_plan and the decoder each held before (issue 23), verbatim in effect."""
    plan = build_plan(net, ssa, sliced, dtype)
    if plan.stats.peak_bytes <= memory_limit:
        return plan
    itemsize = np.dtype(dtype).itemsize
    out_elems = max(1, math.prod(net.size_dict[i] for i in net.output))
    target = max(out_elems, memory_limit // (3 * itemsize))
    while True:
        try:
            cut = slice_path(net, ssa, target)
        except PlanError:
            break
        plan = build_plan(net, ssa, cut, dtype)
        if plan.stats.peak_bytes <= memory_limit or target <= out_elems:
            break
        target = max(out_elems, target // 2)
    return plan


def random_network(seed: int, n: int = 30, n_out: int = 2) -> Network:
    """A random network with hyper-indices (as in test_planner), big enough to slice."""
    inputs, output, _, size_dict = ctg.utils.rand_equation(
        n, 3, n_out=n_out, n_hyper_in=2, n_hyper_out=1, d_min=2, d_max=3, seed=seed)
    return Network(inputs, output, size_dict).with_random_arrays(seed)


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("share", [2, 3, 8, 64])
def test_fit_to_memory_fits_and_matches_the_old_loop(seed, dtype, share):
    net = random_network(seed)
    found = find_path(net, PathOptions(max_repeats=4, cache=False))
    base = build_plan(net, found.ssa_path, (), dtype)
    limit = base.stats.peak_bytes // share
    plan = fit_to_memory(net, found.ssa_path, limit, dtype)
    old = old_fit_loop(net, found.ssa_path, limit, dtype)
    # the same slicing and layouts; a plan that keeps outputs across slices (reuse) orders
    # its sliced indices for that and holds the kept bytes beside them, within the limit
    from qsimdist.planner.reuse import local_kept_bytes

    kept = local_kept_bytes(plan, plan.kept)
    assert sorted(plan.sliced) == sorted(old.sliced)
    assert plan.stats.peak_bytes - kept == old.stats.peak_bytes
    assert plan.sliced == old.sliced or plan.kept
    assert not plan.kept or plan.stats.peak_bytes <= limit
    assert plan.path == base.path and plan.sliced
    fits = plan.stats.peak_bytes <= limit
    assert fits or share > 3  # a third of the unsliced peak is reachable on these networks
    # else nothing fits: the last plan tried comes back (make_plan refuses with its peak)
    if fits and plan.stats.n_slices <= 64:
        np.testing.assert_allclose(plan.execute(), base.execute(), rtol=1e-4, atol=1e-4)


def test_fit_to_memory_without_a_limit_or_when_it_fits():
    net = random_network(5)
    found = find_path(net, PathOptions(max_repeats=4, cache=False))
    base = build_plan(net, found.ssa_path, (), "complex64")
    for limit in (None, base.stats.peak_bytes):
        plan = fit_to_memory(net, found.ssa_path, limit, "complex64")
        assert plan.sliced == [] and plan.stats.peak_bytes == base.stats.peak_bytes


def test_make_plan_fits_through_fit_to_memory():
    net = random_network(6)
    opts = PathOptions(max_repeats=4, cache=False)
    free = make_plan(net, dtype="complex128", path_options=opts)
    limit = free.stats.peak_bytes // 3
    plan = make_plan(net, dtype="complex128", memory_limit=limit, path_options=opts)
    assert plan.stats.peak_bytes <= limit and 1 < plan.stats.n_slices <= 64
    np.testing.assert_allclose(plan.execute(), free.execute(), rtol=1e-10, atol=1e-10)
    out_bytes = 16 * math.prod(net.size_dict[i] for i in net.output)
    with pytest.raises(PlanError, match="best sliced plan found still peaks"):
        make_plan(net, dtype="complex128", memory_limit=out_bytes, path_options=opts)


def test_slice_target_is_the_old_expressions():
    assert SLICE_TARGET_SHARE == 3
    rng = np.random.default_rng(0)
    for _ in range(2000):
        mem = int(rng.integers(1, 1 << 42))  # mem * d < 2^53: float division is exact enough
        d = int(2 ** rng.integers(0, 11))
        for isz in (8, 16):
            # scheduler: max(1, int(mem * d / (3 * isz)))
            assert slice_target(mem * d, isz) == max(1, int(mem * d / (3 * isz)))
            # make_plan and the decoder: max(out_elems, memory_limit // (3 * itemsize))
            out = int(rng.integers(1, 1 << 20))
            assert slice_target(mem, isz, floor=out) == max(out, mem // (3 * isz))


# ------------------------------------------------------------------ kernel constants
def test_loop_kernel_constants_have_one_home():
    from qsimdist.executors import kernels
    from qsimdist.hardware import costs
    from qsimdist.planner import lifetime

    local = costs.LocalCosts()
    assert kernels.SMALL_INNER is costs.SMALL_INNER == local.small_inner
    assert kernels.UNROLLED_N is costs.UNROLLED_N == local.loop_unrolled_n
    assert kernels.UNROLLED_K is costs.UNROLLED_K == local.loop_unrolled_k
    assert lifetime.LocalCosts is costs.LocalCosts  # imported, not copied
    assert not any(hasattr(lifetime, name) for name in ("SMALL_INNER", "UNROLLED_N",
                                                        "UNROLLED_K"))


# --------------------------------------------------------------------- cost constants
#: the one module that holds the cost model's prices (issue 44: "One cost home")
COST_HOME = "hardware/costs.py"
#: names that price time or work: seconds of anything, rates, fixed costs in FLOPs, latency
COST_NAME = re.compile(r"(^|_)SECONDS(_|$)|_RATE$|_FLOPS$|(^|_)LATENCY$")
#: module constants named like prices that are not prices: timeouts, ages and thresholds
#: of behaviour, which stay with the code they shape (path relative to qsimdist/)
NOT_PRICES = {
    ("commands/process.py", "INTERRUPT_GRACE_SECONDS"),  # how long an interrupted run may finish
    ("commands/process.py", "EXIT_HANDLER_SECONDS"),  # how long exit handlers may run
    ("planner/path_cache.py", "STALE_TEMP_SECONDS"),  # age after which a temp file is stale
    ("planner/search.py", "ROUND_SECONDS"),  # length of one annealing round
}


def _module_level_names(tree: ast.Module) -> list[str]:
    """Names assigned at module level (inside module-level if/try/with too, not in defs)."""
    names: list[str] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                todo.extend(node.body)
                todo.extend(getattr(node, "orelse", []))
                todo.extend(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    todo.extend(handler.body)
            continue
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.append(leaf.id)
    return names


def cost_constants_outside(root: Path, home: str = COST_HOME,
                           allowed=frozenset()) -> list[tuple[str, str]]:
    """``(path relative to root, name)`` of every module-level assignment under ``root``
    whose name looks like a price (:data:`COST_NAME`), outside ``home`` and ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == home:
            continue
        for name in _module_level_names(ast.parse(path.read_text(), str(path))):
            if COST_NAME.search(name) and (rel, name) not in allowed:
                found.append((rel, name))
    return found


def test_every_cost_constant_lives_in_the_cost_module():
    """No module of qsimdist/ but hardware/costs.py assigns a price at module level (37
    constants in 11 files before issue 44); the names allowed elsewhere are not prices
    and each still exists (a stale exception would hide a new price of the same name)."""
    import qsimdist
    from qsimdist.hardware import costs

    root = Path(qsimdist.__file__).parent
    assert cost_constants_outside(root, allowed=NOT_PRICES) == []
    assert sorted(cost_constants_outside(root)) == sorted(NOT_PRICES)
    home = _module_level_names(ast.parse((root / COST_HOME).read_text()))
    priced = [name for name in home if COST_NAME.search(name)]
    assert len(priced) == len(set(priced)) >= 40, priced
    assert all(isinstance(getattr(costs, name), (int, float, dict)) for name in priced)
    # the home sits in layer 1 and imports nothing of qsimdist, so every layer may use it
    tree = ast.parse((root / COST_HOME).read_text())
    assert not [node for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.level or "qsimdist" in
                                                         (node.module or ""))]
    # the tensor-network route prices contractions at the path search's rate: one number
    assert costs.TN_RATE == costs.SEARCH_RATE


def test_the_cost_scan_catches_a_planted_price(tmp_path):
    """A price planted outside the home, at module level (plain, annotated, under an if),
    is reported; the home's own prices, a function's local names and other constants
    are not."""
    (tmp_path / "hardware").mkdir()
    (tmp_path / "engine").mkdir()
    (tmp_path / "hardware" / "costs.py").write_text("GATE_SECONDS = 1e-5\nTN_RATE = 1e9\n")
    (tmp_path / "engine" / "router.py").write_text(
        "MAX_QUBITS = 40\n"
        "NEW_SECONDS_PER_GATE = 2e-5\n"
        "SHOT_RATE: float = 1e6\n"
        "if True:\n    STEP_FLOPS = 2.5e5\n"
        "def f():\n    LOCAL_SECONDS = 1.0\n    return LOCAL_SECONDS\n"
    )
    (tmp_path / "cli.py").write_text("EXIT_HANDLER_SECONDS = 2.0\nLINK_LATENCY = 1e-6\n")
    found = cost_constants_outside(tmp_path, allowed={("cli.py", "EXIT_HANDLER_SECONDS")})
    assert sorted(found) == [("cli.py", "LINK_LATENCY"),
                             ("engine/router.py", "NEW_SECONDS_PER_GATE"),
                             ("engine/router.py", "SHOT_RATE"),
                             ("engine/router.py", "STEP_FLOPS")]
    assert ("cli.py", "EXIT_HANDLER_SECONDS") in cost_constants_outside(tmp_path)


def test_a_price_changed_in_the_cost_module_reaches_its_users(monkeypatch):
    """Users read the prices from the cost module when they price, so one change there (a
    test's, or a fit on the user's machine) is seen by the router, fusion, the sampler's
    chain, the stabilizer and the compiled kernels' start-up."""
    from qsimdist.engine import router, stabilizer
    from qsimdist.executors import sv_kernels
    from qsimdist.frontends import fusion
    from qsimdist.hardware import costs

    assert router.tn_floor(10, 1) == pytest.approx(10 * costs.TN_SECONDS_PER_GATE)
    monkeypatch.setattr(costs, "TN_SECONDS_PER_GATE", 1.0)
    assert router.tn_floor(10, 2) == 20.0
    before = stabilizer.stabilizer_seconds(4, 3)
    monkeypatch.setattr(costs, "STABILIZER_START_SECONDS", costs.STABILIZER_START_SECONDS + 7.0)
    assert stabilizer.stabilizer_seconds(4, 3) == pytest.approx(before + 7.0)
    if sv_kernels.startup_seconds() > 0.0:  # this process has not run the compiled kernels
        monkeypatch.setattr(costs, "STARTUP_SECONDS", 123.0)
        monkeypatch.setattr(costs, "LOAD_SECONDS", 123.0)
        assert sv_kernels.startup_seconds() == 123.0
    gc = GateCircuit(3)
    gc.append(np.eye(4, dtype=complex)[[0, 1, 3, 2]], (0, 1))
    _, seconds = fusion.predict_statevector(gc, (2,), itemsize=16)
    monkeypatch.setattr(costs, "GATE_OVERHEAD_SECONDS", costs.GATE_OVERHEAD_SECONDS + 5.0)
    _, more = fusion.predict_statevector(gc, (2,), itemsize=16)
    assert more - seconds == pytest.approx(5.0)  # one block, applied once
