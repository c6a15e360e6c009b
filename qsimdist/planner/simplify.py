"""Network simplification before planning.

``seq`` letters are quimb's: A (antidiagonal), D (diagonal: turns diagonal
gates into hyper-indices), C (column), R (rank), S (split), and quimb's
others (L loop, G gauge, P pair-reduce, i isolated), and qsimdist's own E
(eliminate: a hyper-index summed out of its tensors where what is left is
tiny; :mod:`qsimdist.planner.reductions`). ``E`` runs last, wherever it stands
in ``seq``, once the other letters have settled, until it finds nothing more:
a rank pass after it would merge the small tensors it leaves into wider ones,
which made paths on the doubled kicked-Ising networks cheaper to find but
dearer to run. Output indices are protected;
hyper-indices created by D survive to the plan.

A sequence of the letters ``A D C R S E`` (the default is ``ADCRS``) runs on
qsimdist's own passes (:mod:`qsimdist.planner.reductions`), which need no
quimb: importing ``quimb.tensor`` and loading its compiled kernels cost about a
second in each fresh process, and on a fresh machine its numba compilation took
half a minute. A sequence with any other letter goes to quimb's
``full_simplify``.

A network that is already cheap to contract as it is (cotengra's greedy path
needs at most :data:`CHEAP_COST` multiply-adds and no intermediate over
:data:`CHEAP_SIZE` elements) is returned unchanged: simplifying it could save
microseconds.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidInputError
from ..network import Network
from .reductions import LETTERS, reduce_network

DEFAULT_SEQUENCE = "ADCRS"
_VALID = set("ADCRSELGPi")
#: a network whose greedy contraction needs at most this many multiply-adds ...
CHEAP_COST = 1e7
#: ... with no intermediate over this many elements is not worth simplifying
CHEAP_SIZE = 1 << 20
#: networks with more tensors are always simplified (not even priced)
CHEAP_MAX_TENSORS = 1000
#: structures whose cheapness this process has priced (a greedy path costs milliseconds; the
#: many terms of one estimator call share a few structures): canonical form -> cheap
_CHEAP_BY_STRUCTURE: dict[tuple, bool] = {}
#: structures remembered before the memo starts afresh
CHEAP_MEMO_SIZE = 4096


def is_cheap(net: Network) -> bool:
    """Whether ``net`` costs next to nothing to contract as it is (greedy path)."""
    import cotengra as ctg

    if net.num_tensors > CHEAP_MAX_TENSORS:
        return False
    if net.num_tensors <= 1:
        return True
    key = net.canonical()  # a structure's cheapness does not depend on its names or arrays
    found = _CHEAP_BY_STRUCTURE.get(key)
    if found is None:
        inputs, output, size_dict, _ = net.symbolic()
        tree = ctg.array_contract_tree(inputs, output, size_dict, optimize="greedy")
        found = (float(tree.contraction_cost()) <= CHEAP_COST
                 and float(tree.max_size()) <= CHEAP_SIZE)
        if len(_CHEAP_BY_STRUCTURE) >= CHEAP_MEMO_SIZE:
            _CHEAP_BY_STRUCTURE.clear()
        _CHEAP_BY_STRUCTURE[key] = found
    return found


def simplify(net: Network, seq: str = DEFAULT_SEQUENCE, atol: float = 1e-12,
             skip_cheap: bool = True, engine: str = "qsimdist") -> Network:
    """Return a simplified copy of ``net`` whose contraction equals ``net``'s.

    ``seq=""`` returns ``net`` unchanged, and so does ``skip_cheap`` for a
    network that is already cheap to contract (see :func:`is_cheap`).
    ``engine="quimb"`` runs quimb's ``full_simplify`` even for ``A D C R S``: the
    networks that trees and plans saved before qsimdist had its own passes were
    searched on (an equal network, but not the same structure).
    """
    if not seq:
        return net
    bad = sorted(set(seq) - _VALID)
    if bad:
        raise InvalidInputError(
            f"unknown simplification letters {''.join(bad)!r}; valid: A D C R S E "
            "(qsimdist's own), L G P i (quimb's)"
        )
    if net.arrays is None:
        raise InvalidInputError("a structure-only network cannot be simplified (no arrays)")
    if skip_cheap and is_cheap(net):
        return net
    if engine not in ("qsimdist", "quimb"):
        raise InvalidInputError(f"unknown simplification engine {engine!r}; valid: qsimdist, "
                                "quimb")
    if "E" in seq:  # last, once the others have settled (module docstring)
        net = simplify(net, seq.replace("E", ""), atol, False, engine)
        return reduce_network(net, "E", atol)
    if engine == "qsimdist" and set(seq) <= LETTERS:
        return reduce_network(net, seq, atol)
    import quimb.tensor as qtn

    tn = qtn.TensorNetwork(
        [qtn.Tensor(np.asarray(a), inds) for a, inds in zip(net.arrays, net.inputs)],
        virtual=True,
    )
    tn = tn.full_simplify(seq, output_inds=net.output, atol=atol, equalize_norms=False)
    tensors = list(tn.tensors)
    arrays = [np.asarray(t.data) for t in tensors]
    if getattr(tn, "exponent", 0.0):
        arrays[0] = arrays[0] * 10.0 ** tn.exponent
    if not tensors:  # everything folded into nothing: a scalar of one
        return Network([()], (), {}, [np.ones((), dtype=complex)], dict(net.meta))
    size_dict = {}
    for t in tensors:
        size_dict.update(zip(t.inds, t.shape))
    return Network([t.inds for t in tensors], net.output, size_dict, arrays, dict(net.meta))


def simplify_within(net: Network, seq: str, limit: int | None, dtype: str,
                    engine: str = "qsimdist") -> Network:
    """Simplify ``net`` (``engine``: whose passes, see :func:`simplify`); a cheap network is
    left as it is only when memory is no concern.

    Simplification also shrinks the leaves every slice loads, so under a
    memory limit (bytes per process, ``None``: none) that the unsimplified leaves
    would crowd, it always runs.
    """
    itemsize = np.dtype(dtype).itemsize
    leaves = sum(math.prod(net.size_dict[i] for i in t) for t in net.inputs) * itemsize
    roomy = limit is None or 4 * (leaves + CHEAP_SIZE * itemsize) <= limit
    return simplify(net, seq, skip_cheap=roomy, engine=engine)
