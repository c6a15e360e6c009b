"""Many Pauli terms over the ranks of a distributed run: each rank values its share alone.

``engine`` below is an :class:`~qsimdist.engine.expectation.ExpectationEngine` (not
imported here: the engine imports this module).

Under ``executor="mpi"`` every rank makes the same :meth:`ExpectationEngine.term_values
<qsimdist.engine.expectation.ExpectationEngine.term_values>` call. Where there are at
least as many live terms as ranks (one rank included), spreading the terms beats
spreading each term's contraction (``python -m benchmarks.term_spreading``): rank ``r``
values terms ``r, r + P, r + 2P, ...`` in one process (a local twin of the engine,
within the rank's own memory budget), and one ``allgather`` gives every rank every
value. A rank that cannot fit a term in its budget says so in the same ``allgather``;
then every rank returns ``None`` and the engine contracts the terms distributed, as
before. Any other error is raised on every rank after the ``allgather``, so no rank is
left waiting in a collective.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError, QsimdistError

if TYPE_CHECKING:
    from ..frontends import GateCircuit
    from .pauli_terms import PauliTerm


def worth_spreading(engine, terms: Sequence[PauliTerm]) -> bool:
    """Whether ``engine`` (distributed, spreading allowed) has a term per rank to spread."""
    comm = engine.comm
    if not engine.spread_terms or comm is None or not engine.run.distributed:
        return False
    return sum(1 for t in terms if t.qubits) >= comm.Get_size()


def local_twin(engine):
    """A one-process engine with ``engine``'s settings and this rank's memory budget
    (``engine``'s resolved options with the local executor: nothing is resolved again)."""
    twin = getattr(engine, "twin", None)
    if twin is None:  # the engine's own class: this module does not import it
        import dataclasses

        run = dataclasses.replace(engine.run, executor="local", profile=None, comm=None)
        twin = engine.twin = type(engine)(run=run, fuse=engine.fuse, method=engine.method,
                                          state_max_qubits=engine.state_max_qubits,
                                          spread_terms=False)
    return twin


def spread_term_values(engine, circuit: GateCircuit,
                       terms: Sequence[PauliTerm]) -> np.ndarray | None:
    """Every term's value, each valued on one rank; ``None`` on every rank where some
    rank's share does not fit its memory budget (then contract them distributed)."""
    comm = engine.comm
    size, rank = comm.Get_size(), comm.Get_rank()
    mine = list(range(rank, len(terms), size))
    got, failure = None, None
    try:
        got = local_twin(engine).term_values(circuit, [terms[i] for i in mine])
    except PlanError as exc:  # this rank's share does not fit: the distributed way
        failure = ("plan", str(exc))
    except QsimdistError as exc:
        failure = ("error", exc)
    except Exception as exc:  # noqa: BLE001 - raised below, on every rank alike
        failure = ("error", exc)
    every = comm.allgather((mine, None if got is None else got.tolist(),
                            None if failure is None else (failure[0], repr(failure[1]))))
    if failure is not None and failure[0] == "error":
        raise failure[1]
    for _, _, fail in every:
        if fail is not None and fail[0] == "error":
            from ..errors import ExecutionError

            raise ExecutionError(f"another rank failed while valuing its terms: {fail[1]}")
    if any(fail is not None for _, _, fail in every):
        return None
    values = np.empty(len(terms), dtype=np.float64)
    for idx, vals, _ in every:
        values[idx] = vals
    st = engine.stats
    st.spread_terms += len(terms)
    st.terms += len(terms)
    st.trivial_terms += sum(1 for t in terms if not t.qubits)
    engine.route = {"method": "spread", "reason": "at least one term per rank: each rank "
                    "valued its share in one process", "executor": "mpi", "ranks": size}
    return values


__all__ = ["local_twin", "spread_term_values", "worth_spreading"]
