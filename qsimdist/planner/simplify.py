"""Network simplification before planning, through quimb's own machinery.

``seq`` letters are quimb's: A (antidiagonal), D (diagonal: turns diagonal
gates into hyper-indices), C (column), R (rank), S (split), L (loop). Output
indices are protected; hyper-indices created by D survive to the plan.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInputError
from ..network import Network

DEFAULT_SEQUENCE = "ADCRS"
_VALID = set("ADCRSLGPi")


def simplify(net: Network, seq: str = DEFAULT_SEQUENCE, atol: float = 1e-12) -> Network:
    """Return a simplified copy of ``net`` whose contraction equals ``net``'s.

    ``seq=""`` returns ``net`` unchanged.
    """
    if not seq:
        return net
    bad = sorted(set(seq) - _VALID)
    if bad:
        raise InvalidInputError(
            f"unknown simplification letters {''.join(bad)!r}; valid: A D C R S L (quimb's)"
        )
    if net.arrays is None:
        raise InvalidInputError("a structure-only network cannot be simplified (no arrays)")
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
