"""qsimdist's own simplification passes (``qsimdist.planner.reductions``).

Every case checks the value against the network contracted as built, and the structural
effect each pass promises; circuit networks are compared with quimb's ``full_simplify``
on the same letters, which they must match or beat in tensors and indices.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qsimdist.errors import InvalidInputError
from qsimdist.network import Network
from qsimdist.planner.reductions import reduce_network
from qsimdist.planner.simplify import simplify

H = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
CZ = np.diag([1, 1, 1, -1]).astype(complex).reshape(2, 2, 2, 2)
CX = np.eye(4)[[0, 1, 3, 2]].astype(complex).reshape(2, 2, 2, 2)
ZERO = np.array([1.0, 0.0], dtype=complex)


def contract(net: Network) -> np.ndarray:
    """The network's value, contracted by cotengra as it is (the reference)."""
    import cotengra as ctg

    return np.asarray(ctg.array_contract([np.asarray(a) for a in net.arrays],
                                         [tuple(t) for t in net.inputs], tuple(net.output),
                                         optimize="greedy"))


def net_of(tensors, output=()):
    inputs = [tuple(t[0]) for t in tensors]
    arrays = [np.asarray(t[1], dtype=complex) for t in tensors]
    size_dict = {}
    for inds, arr in zip(inputs, arrays):
        size_dict.update(zip(inds, arr.shape))
    return Network(inputs, tuple(output), size_dict, arrays, {})


def random_circuit_net(n, depth, seed, open_qubits=0):
    """A brickwork of random two-qubit unitaries and CZs on ``n`` qubits from ``|0>``,
    closed with a random bitstring except on the first ``open_qubits`` qubits."""
    rng = np.random.default_rng(seed)
    tensors = [((f"q{q}.0",), ZERO) for q in range(n)]
    layer = [0] * n
    for d in range(depth):
        for q in range(d % 2, n - 1, 2):
            if rng.random() < 0.5:
                m = np.linalg.qr(rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4)))[0]
                gate = m.reshape(2, 2, 2, 2)
            else:
                gate = CZ if rng.random() < 0.5 else CX
            ins = (f"q{q}.{layer[q]}", f"q{q + 1}.{layer[q + 1]}")
            layer[q] += 1
            layer[q + 1] += 1
            tensors.append(((f"q{q}.{layer[q]}", f"q{q + 1}.{layer[q + 1]}") + ins, gate))
        for q in range(n):
            if rng.random() < 0.3:
                ins = f"q{q}.{layer[q]}"
                layer[q] += 1
                tensors.append(((f"q{q}.{layer[q]}", ins), H))
    bits = rng.integers(0, 2, n)
    output = []
    for q in range(n):
        if q < open_qubits:
            output.append(f"q{q}.{layer[q]}")
        else:
            tensors.append(((f"q{q}.{layer[q]}",), np.eye(2)[bits[q]]))
    return net_of(tensors, output)


# ---------------------------------------------------------------------- each pass
def test_columns_fold_basis_states_into_their_gates():
    # |0> into H then a bra <1|: C fixes both ends, R leaves one scalar
    net = net_of([(("a",), ZERO), (("b", "a"), H), (("b",), [0, 1])])
    out = reduce_network(net, "C")
    assert not any("a" in t for t in out.inputs)
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-14)


def test_diagonals_become_hyper_indices():
    # CZ between two H gates: D turns its in/out pairs into one index per qubit
    net = net_of([(("x", "y", "a", "b"), CZ), (("a", "p"), H), (("b", "q"), H),
                  (("x", "r"), H), (("y", "s"), H)], output=("p", "q", "r", "s"))
    out = reduce_network(net, "D")
    assert out.num_tensors == 5
    cz = [t for t in out.inputs if len(t) == 2 and not {"p", "q", "r", "s"} & set(t)]
    assert len(cz) == 1  # the CZ is a 2-index tensor on hyper-indices
    hyper = [ix for ix in out.size_dict if sum(ix in t for t in out.inputs) > 2]
    assert len(hyper) == 2
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-14)


def test_anti_diagonals_are_flipped_into_diagonals():
    x = np.array([[0, 1], [1, 0]], dtype=complex)
    rng = np.random.default_rng(3)
    t = rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))
    net = net_of([(("a", "b"), x * [[1, 2], [3, 4]]), (("b", "c"), t)], output=("a", "c"))
    out = reduce_network(net, "AD")
    assert len(out.size_dict) == 2  # the summed index is gone
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-14)


def test_rank_contracts_and_sums_without_growing_tensors():
    rng = np.random.default_rng(4)
    m = [rng.normal(size=(2, 2)) for _ in range(4)]
    net = net_of([(("a", "b"), m[0]), (("b", "c"), m[1]), (("c", "d"), m[2]),
                  (("d", "e"), m[3]), (("e",), [1, 2])], output=("a",))
    out = reduce_network(net, "R")
    assert out.num_tensors == 1 and out.inputs[0] == ("a",)
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-12)


def test_splits_low_rank_tensors():
    rng = np.random.default_rng(5)
    u, v = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    product = np.einsum("ab,cd->abcd", u, v)  # rank one across (a,b | c,d)
    net = net_of([(("a", "b", "c", "d"), product)], output=("a", "b", "c", "d"))
    out = reduce_network(net, "S")
    assert out.num_tensors == 2 and all(len(t) == 3 for t in out.inputs)
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-12)



def ising_factor_net(n_vars, n_factors, seed, output=()):
    """A random pairwise factor graph: 2x2 complex factors on pairs of size-2 variables (the
    shape of a doubled kicked-Ising network after ``D``: diagonal gates on hyper-indices)."""
    rng = np.random.default_rng(seed)
    tensors, pairs = [], set()
    while len(tensors) < n_factors:
        a, b = sorted(rng.choice(n_vars, 2, replace=False))
        if (a, b) in pairs:
            continue
        pairs.add((a, b))
        tensors.append(((f"v{a}", f"v{b}"), rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))))
    used = {i for inds, _ in tensors for i in inds}
    return net_of(tensors, output=tuple(o for o in output if o in used))


def test_eliminate_sums_low_degree_hyper_indices_out():
    # a variable on three factors: summed out into one 3-index tensor (8 entries)
    rng = np.random.default_rng(6)
    m = [rng.normal(size=(2, 2)) for _ in range(5)]
    net = net_of([(("v", "a"), m[0]), (("v", "b"), m[1]), (("v", "c"), m[2]),
                  (("a", "b"), m[3]), (("b", "c"), m[4])], output=("a",))
    out = reduce_network(net, "E")
    assert "v" not in out.size_dict and "a" in out.size_dict
    assert all(np.size(a) <= 32 for a in out.arrays)
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_eliminate_keeps_the_value_and_bounds_what_it_makes(seed):
    from qsimdist.planner.reductions import MAX_ELIMINATED_SIZE

    net = ising_factor_net(40, 90, seed, output=("v0",))
    out = simplify(net, "ADCRSE", skip_cheap=False)
    plain = simplify(net, "ADCRS", skip_cheap=False)
    assert out.num_tensors < plain.num_tensors
    assert max(np.size(a) for a in out.arrays) <= max(
        MAX_ELIMINATED_SIZE, max(np.size(a) for a in plain.arrays))
    assert out.output == net.output
    np.testing.assert_allclose(contract(out), contract(net), rtol=1e-9, atol=1e-12)


def test_eliminate_runs_last_wherever_it_stands():
    net = ising_factor_net(30, 60, seed=9)
    assert simplify(net, "EADCRS", skip_cheap=False).inputs == simplify(
        net, "ADCRSE", skip_cheap=False).inputs


def test_eliminate_after_quimbs_letters():
    pytest.importorskip("quimb.tensor", reason="the L letter is quimb's")
    net = ising_factor_net(30, 60, seed=10)
    out = simplify(net, "ADCRSLE", skip_cheap=False)
    np.testing.assert_allclose(contract(out), contract(net), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------- invariants
def test_output_indices_survive_every_pass():
    net = net_of([(("a",), ZERO), (("a", "b"), np.eye(2)), (("b", "c"), np.diag([1, 2]))],
                 output=("a", "c"))
    out = reduce_network(net, "ADCRS")
    assert out.output == ("a", "c")
    assert {"a", "c"} <= set(out.size_dict)
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-14)


def test_a_zero_network_and_a_scalar_network():
    zero = net_of([(("a",), [0, 0]), (("a", "b"), H)], output=("b",))
    out = reduce_network(zero, "ADCRS")
    np.testing.assert_array_equal(contract(out), np.zeros(2))
    scalar = net_of([(("a",), [1, 0]), (("a",), [2, 0])])
    out = reduce_network(scalar, "ADCRS")
    assert contract(out) == pytest.approx(2.0)


def test_a_tensor_left_with_a_repeated_index_keeps_its_diagonal():
    # D renames j to i; the other tensor on both then holds (i, i, k): its diagonal
    rng = np.random.default_rng(6)
    t = rng.normal(size=(2, 2, 2)) + 1j * rng.normal(size=(2, 2, 2))
    net = net_of([(("i", "j"), np.diag([2.0, 3.0])), (("i", "j", "k"), t)], output=("k",))
    out = reduce_network(net, "D")
    assert all(len(set(inds)) == len(inds) for inds in out.inputs)
    np.testing.assert_allclose(contract(out), np.einsum("ij,ijk->k", np.diag([2, 3]), t),
                               atol=1e-12)


def test_size_one_indices_are_fixed():
    net = Network([("b", "u"), ("u",)], ("b",), {"b": 2, "u": 1},
                  [np.ones((2, 1), dtype=complex), np.full(1, 3.0, dtype=complex)], {})
    out = reduce_network(net, "")
    assert "u" not in out.size_dict
    np.testing.assert_allclose(contract(out), [3.0, 3.0], atol=1e-12)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_dtype_is_kept(dtype):
    net = random_circuit_net(6, 6, seed=1, open_qubits=2)
    net = Network(net.inputs, net.output, net.size_dict,
                  [np.asarray(a, dtype=dtype) for a in net.arrays], {})
    out = reduce_network(net)
    assert {np.asarray(a).dtype for a in out.arrays} == {np.dtype(dtype)}
    tol = 1e-5 if dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(contract(out), contract(net), atol=tol)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("open_qubits", [0, 3])
def test_random_circuits_keep_their_value(seed, open_qubits):
    net = random_circuit_net(8, 10, seed, open_qubits)
    out = reduce_network(net)
    assert out.num_tensors < net.num_tensors
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_as_strong_as_quimbs_full_simplify(seed):
    qtn = pytest.importorskip("quimb.tensor", reason="quimb is the comparison")
    net = random_circuit_net(10, 12, seed, open_qubits=2)
    tn = qtn.TensorNetwork([qtn.Tensor(np.asarray(a), inds)
                            for a, inds in zip(net.arrays, net.inputs)], virtual=True)
    theirs = tn.full_simplify("ADCRS", output_inds=net.output, atol=1e-12)
    ours = reduce_network(net)
    assert ours.num_tensors <= theirs.num_tensors
    assert len(ours.size_dict) <= len(theirs.ind_map)
    assert sum(np.size(a) for a in ours.arrays) <= sum(t.size for t in theirs)


def test_the_same_network_whatever_the_hash_seed():
    # every MPI rank simplifies its own copy: they must agree (a set of index names
    # iterated in hash order would not)
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from test_reductions import random_circuit_net\n"
        "from qsimdist.planner.reductions import reduce_network\n"
        "for seed in range(4):\n"
        "    out = reduce_network(random_circuit_net(10, 12, seed, open_qubits=2))\n"
        "    print(out.inputs, [round(float(abs(a).sum()), 9) for a in out.arrays])\n"
    )
    root = Path(__file__).resolve().parent.parent
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=root,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(runs) == 1


# ---------------------------------------------------------------------- the entry point
def test_simplify_runs_without_importing_quimb():
    code = (
        "import sys, numpy as np\n"
        "from qsimdist.network import Network\n"
        "from qsimdist.planner.simplify import simplify\n"
        "rng = np.random.default_rng(0)\n"
        "arrays = [rng.normal(size=(2, 2, 2, 2)).astype(complex) for _ in range(30)]\n"
        "inputs = [(f'i{k}', f'i{k+1}', f'j{k}', f'j{k+1}') for k in range(30)]\n"
        "sizes = {i: 2 for t in inputs for i in t}\n"
        "net = Network(inputs, (), sizes, arrays, {})\n"
        "out = simplify(net, 'ADCRS', skip_cheap=False)\n"
        "assert out.num_tensors < net.num_tensors, out.num_tensors\n"
        "print('quimb' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_quimbs_other_letters_still_go_to_quimb():
    pytest.importorskip("quimb.tensor", reason="the L letter is quimb's")
    net = random_circuit_net(6, 6, seed=2, open_qubits=1)
    out = simplify(net, "ADCRSL", skip_cheap=False)
    np.testing.assert_allclose(contract(out), contract(net), atol=1e-12)


def test_unknown_letters_are_refused_in_one_line():
    net = random_circuit_net(4, 2, seed=0)
    with pytest.raises(InvalidInputError,
                       match=r"unknown simplification letters 'XZ'.*valid: A D C R S E"):
        simplify(net, "ADXZ", skip_cheap=False)


def test_quimbs_engine_on_request_and_a_bad_engine_refused():
    pytest.importorskip("quimb.tensor", reason="the engine asked for is quimb's")
    net = random_circuit_net(6, 6, seed=3, open_qubits=1)
    theirs = simplify(net, "ADCRS", skip_cheap=False, engine="quimb")
    np.testing.assert_allclose(contract(theirs), contract(net), atol=1e-12)
    with pytest.raises(InvalidInputError, match=r"unknown simplification engine 'numba'.*valid"):
        simplify(net, "ADCRS", skip_cheap=False, engine="numba")
