"""The paper's chain dynamic program: where along a chain of sharded steps to redistribute.

A *chain* is a run of steps in which one big sharded tensor absorbs small
(replicated) operands. At each step the distributed bits in effect are
either *kept* (none of them is reduced there: every device works on its
shard, no communication) or the running tensor is *redistributed*
(all-to-all) to the leading bits it keeps through the step: forced when a bit
in effect is about to be reduced, elective otherwise. The DP's state is the
bits in effect — the chain's starting bits or the target of the last
redistribution — so it is exact and linear in the chain's length times the
number of states.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from .bits import Bit, Bits, aligned
from .cost import CostModel, Move


@dataclass(frozen=True)
class ChainStep:
    """One step of a chain as the DP sees it."""

    index: int  # position in plan.steps
    compute: float  # predicted seconds of the step's sharded compute on one device of the group
    modes: tuple[str, ...]  # layout of the running tensor entering the step
    reduced: frozenset[str]  # modes the step sums away
    target: Bits | None  # bits to redistribute to before the step (None: impossible)


@dataclass(frozen=True)
class ChainSolution:
    seconds: float
    redistribute_at: tuple[int, ...]  # positions in the chain where a redistribution happens
    bits_per_step: tuple[Bits, ...]  # bits in effect at each step


def kept(bits: Sequence[Bit], step: ChainStep) -> bool:
    return not any(b[0] in step.reduced for b in bits)


def _move(model: CostModel, st: ChainStep, size_dict, old, d) -> Move:
    return model.redistribute(st.modes, size_dict, old, st.target, d)


def solve_chain(start: Bits, steps: Sequence[ChainStep], d: int, model: CostModel,
                size_dict: dict[str, int], elective: bool = True) -> ChainSolution:
    """Least predicted time along a chain, choosing where to redistribute.

    ``elective=False`` redistributes only when forced. Returns infinite
    seconds when some step can neither keep nor redistribute.
    """
    inf = float("inf")
    # state: -1 = start bits, j = target of step j  ->  (seconds, redistribution positions)
    best: dict[int, tuple[float, tuple[int, ...]]] = {-1: (0.0, ())}

    def bits_of(state: int) -> Bits:
        return start if state < 0 else steps[state].target

    for j, st in enumerate(steps):
        nxt: dict[int, tuple[float, tuple[int, ...]]] = {}
        move_best: tuple[float, tuple[int, ...]] = (inf, ())
        for state, (cost, hist) in best.items():
            bits = bits_of(state)
            if kept(bits, st):
                if cost + st.compute < nxt.get(state, (inf,))[0]:
                    nxt[state] = (cost + st.compute, hist)
                if not elective:
                    continue
            if st.target is None or not kept(st.target, st) or set(bits) == set(st.target):
                continue
            cand = cost + _move(model, st, size_dict, bits, d).seconds + st.compute
            if cand < move_best[0]:
                move_best = (cand, hist + (j,))
        if move_best[0] < nxt.get(j, (inf,))[0]:
            nxt[j] = move_best
        if not nxt:
            return ChainSolution(inf, (), ())
        # what a state costs from here on depends only on the bits it holds: of the states
        # holding the same bits keep the cheapest (exact; keeps the chain's states to the
        # distinct layouts, not one per step: a 1,000-step chain was quadratic)
        by_bits: dict[Bits, int] = {}
        for state, (cost, _) in nxt.items():
            key = tuple(bits_of(state))
            held = by_bits.get(key)
            if held is None or cost < nxt[held][0]:
                by_bits[key] = state
        best = {state: nxt[state] for state in by_bits.values()}
    cost, hist = min(best.values(), key=lambda v: v[0])
    # the bits a device holds after a move keep the positions of the bits that stay
    per_step, current, moves = [], tuple(start), set(hist)
    for j in range(len(steps)):
        if j in moves:
            current = aligned(current, steps[j].target)
        per_step.append(current)
    return ChainSolution(cost, hist, tuple(per_step))


def exhaustive_chain(start: Bits, steps: Sequence[ChainStep], d: int, model: CostModel,
                     size_dict: dict[str, int]) -> float:
    """Brute force over every set of redistribution points (to test the DP)."""
    best = float("inf")
    for mask in itertools.product((False, True), repeat=len(steps)):
        bits, cost, ok = start, 0.0, True
        for move, st in zip(mask, steps):
            if move:
                if st.target is None or not kept(st.target, st):
                    ok = False
                    break
                cost += _move(model, st, size_dict, bits, d).seconds
                bits = st.target
            elif not kept(bits, st):
                ok = False
                break
            cost += st.compute
        if ok:
            best = min(best, cost)
    return best
