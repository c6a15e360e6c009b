"""GEMM-oriented mode reordering ("lifetime ordering").

One backward pass over a fixed contraction path gives every index a *death
step*: the step that sums it away (output indices never die). Every tensor,
leaf or intermediate, stores its modes sorted by one global key — output
modes first in the output's order, then longest remaining lifetime first —
so in every pairwise step both operands already read ``[retained | reduced]``
with the reduced modes trailing in the same order, and the result's layout
is fixed before it is computed. The root comes out in the network's output
order with no final permutation.

Each step then runs as one ``matmul`` on reshaped views with no copy:

* ``gemm``: the output reads ``[batch | M | N]`` (or ``[batch | N | M]``,
  operands swapped): a strided-batched GEMM.
* ``broadcast``: the output interleaves modes of the two operands
  (patterns like ``N M N M N``); each operand gets size-1 axes where the
  other's modes sit, and ``matmul`` broadcasting writes any interleaving in
  place. The last two runs of output modes form the inner GEMM.

Modes reduced on a single leaf (an index on one tensor only, not in the
output) are summed when that leaf is loaded.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..hardware.costs import LocalCosts
from ..hardware.local_costs import local_costs

Index = str
NEVER = math.inf


@dataclass(frozen=True)
class Step:
    """One pairwise contraction of the plan, with its memory layouts and GEMM shape.

    Frozen: the plan file's schema and the executor's instruction at once, built
    complete by :func:`gemm_step` and :func:`lifetime_order` and never changed
    after (``dataclasses.replace`` makes a changed copy).
    """

    lhs: int
    rhs: int
    out: int
    lhs_modes: tuple[Index, ...]
    rhs_modes: tuple[Index, ...]
    out_modes: tuple[Index, ...]
    kernel: str  # "gemm" | "broadcast" | "transpose"
    x: str  # which operand gives the inner GEMM's rows: "lhs" | "rhs"
    x_view: tuple[int, ...]  # (outer..., m, k)
    y_view: tuple[int, ...]  # (outer..., n, k); the executor swaps its last two axes
    out_view: tuple[int, ...]  # (outer..., m, n)
    batch: int  # number of inner GEMMs (product of outer extents)
    m: int
    n: int
    k: int
    flops: float  # real floating-point operations for complex data (8 per multiply-add)
    bytes: int  # bytes read and written, with the plan's dtype
    live_bytes: int  # bytes live while this step runs (operands, output, all other live tensors)
    transposed_bytes: int = 0  # bytes permuted at run time (transpose kernel)
    expanded_bytes: int = 0  # bytes of a broadcast operand materialised for BLAS (no permutation)
    expand: str = ""  # broadcast kernel: operand ("x"/"y") materialised over the outer axes
    loop: bool = False  # broadcast kernel: run as one compiled loop of small GEMMs (no BLAS)
    # loop step: run as row-tiled BLAS GEMMs of the large operand by the small one, each
    # tile scattered into place by a compiled loop (needs no outer axis in both operands)
    tiled: bool = False
    # transpose kernel: permutations (of each tensor's stored modes) to [batch | own | K]
    # for the operands, and from [batch | x-only | y-only] to the output's layout
    x_perm: tuple[int, ...] = ()
    y_perm: tuple[int, ...] = ()
    out_perm: tuple[int, ...] = ()
    tmp_shape: tuple[int, ...] = ()  # transpose kernel: (batch, m, n) of the GEMM
    x_dims: tuple[int, ...] = ()  # transpose kernel: per-mode extents of x, y and the GEMM result
    y_dims: tuple[int, ...] = ()
    tmp_dims: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class Layouts:
    """Result of :func:`lifetime_order`."""

    # per leaf, the stored order (sliced and pre-summed modes removed)
    leaf_modes: list[tuple[Index, ...]]
    leaf_sum: list[tuple[Index, ...]]  # per leaf, modes summed at load
    steps: list[Step]
    death: dict[Index, float]
    peak_bytes: int
    flops: float
    transposed_bytes: int
    expanded_bytes: int = 0


def death_steps(
    inputs: Sequence[tuple[Index, ...]],
    output: Sequence[Index],
    ssa_path: Sequence[tuple[int, int]],
    sliced: set[Index],
) -> tuple[list[tuple[Index, ...]], dict[Index, float], list[tuple[Index, ...]]]:
    """Legs of every SSA node, each index's death step, and per-leaf pre-summed modes."""
    count = Counter(i for t in inputs for i in t if i not in sliced)
    for i in output:
        count[i] += 1
    death: dict[Index, float] = {i: NEVER for i in output}
    leaf_sum = []
    legs: list[tuple[Index, ...]] = []
    for term in inputs:
        kept, summed = [], []
        for i in term:
            if i in sliced:
                continue
            (kept if count[i] > 1 else summed).append(i)
        for i in summed:
            death[i] = -1  # dies on load
        legs.append(tuple(kept))
        leaf_sum.append(tuple(summed))
    for s, (a, b) in enumerate(ssa_path):
        la, lb = legs[a], legs[b]
        sb = set(lb)
        out = []
        for i in dict.fromkeys(la + lb):
            c = count[i] - (i in la) - (i in sb)
            if c > 0:
                out.append(i)
                count[i] = c + 1
            else:
                death[i] = s
                count[i] = 0
        legs.append(tuple(out))
    return legs, death, leaf_sum


def lifetime_order(
    inputs: Sequence[tuple[Index, ...]],
    output: Sequence[Index],
    size_dict: dict[Index, int],
    ssa_path: Sequence[tuple[int, int]],
    sliced: Sequence[Index] = (),
    itemsize: int = 8,
    costs: LocalCosts | None = None,
) -> Layouts:
    """Fix every tensor's layout for ``ssa_path`` and describe each step as a GEMM."""
    sliced_set = set(sliced)
    n_leaves = len(inputs)
    legs, death, leaf_sum = death_steps(inputs, output, ssa_path, sliced_set)
    if len(legs) - n_leaves != len(ssa_path) or (n_leaves > 1 and len(ssa_path) != n_leaves - 1):
        from ..errors import PlanError

        raise PlanError(
            f"path has {len(ssa_path)} steps for {n_leaves} tensors; a complete SSA path "
            f"needs {n_leaves - 1}"
        )
    out_pos = {i: p for p, i in enumerate(output)}
    children = {n_leaves + s: (a, b) for s, (a, b) in enumerate(ssa_path)}

    def side_class(node: int, mode: Index) -> int:
        """0: batch in ``node``'s own step (or a leaf), 1: from its lhs only, 2: rhs only."""
        if node not in children:
            return 0
        a, b = children[node]
        in_a, in_b = mode in legs[a], mode in legs[b]
        return 0 if in_a and in_b else (1 if in_a else 2)

    # Tie-break among modes dying at the same step: group them by which child
    # of each operand they come from, so the operands' own steps stay GEMMs.
    tiebreak: dict[Index, tuple] = {}
    for s, (a, b) in enumerate(ssa_path):
        for i in set(legs[a]) & set(legs[b]):
            if death.get(i) == s:
                tiebreak[i] = (side_class(a, i), side_class(b, i), i)

    def key(i: Index) -> tuple:
        if i in out_pos:
            return (0, out_pos[i])
        return (1, -death[i], tiebreak.get(i, (0, 0, i)))

    def layout(node: int) -> tuple[Index, ...]:
        return tuple(sorted(legs[node], key=key))

    def nelem(modes: Sequence[Index]) -> int:
        return math.prod(size_dict[i] for i in modes)

    leaf_modes = [layout(k) for k in range(n_leaves)]
    live = sum(nelem(m) for m in leaf_modes) * itemsize
    peak = live
    steps: list[Step] = []
    total_flops = 0.0
    transposed = expanded = 0
    for s, (a, b) in enumerate(ssa_path):
        node = n_leaves + s
        la, lb, lc = layout(a), layout(b), layout(node)
        step = gemm_step(a, b, node, la, lb, lc, size_dict, itemsize, costs)
        transposed += step.transposed_bytes
        expanded += step.expanded_bytes
        size_a, size_b, size_c = nelem(la), nelem(lb), nelem(lc)
        live += size_c * itemsize
        peak = max(peak, live)
        step = dataclasses.replace(step, live_bytes=live,
                                   bytes=(size_a + size_b + size_c) * itemsize)
        live -= (size_a + size_b) * itemsize
        steps.append(step)
        total_flops += step.flops
    return Layouts(leaf_modes, leaf_sum, steps, death, peak, total_flops, transposed, expanded)


def _permute_seconds(size: int, perm: Sequence[int], dims: Sequence[int], itemsize: int,
                     costs: LocalCosts) -> float:
    """Predicted time to permute ``size`` elements of extents ``dims`` by ``perm`` (read+write)."""
    if tuple(perm) == tuple(range(len(perm))):
        return 0.0
    run = 1  # contiguous elements the permutation moves together: its identity suffix
    for j in range(len(perm) - 1, -1, -1):
        if perm[j] != j:
            break
        run *= dims[j]
    per_byte = costs.copy_byte if run >= costs.long_run else costs.permute_byte
    return 2 * size * itemsize * per_byte


def _runs(labels: Sequence[str], sizes: Sequence[int]) -> list[tuple[str, int]]:
    """Merge consecutive equal labels, multiplying their extents."""
    runs: list[tuple[str, int]] = []
    for lab, d in zip(labels, sizes):
        if runs and runs[-1][0] == lab:
            runs[-1] = (lab, runs[-1][1] * d)
        else:
            runs.append((lab, d))
    return runs


def gemm_step(
    a: int,
    b: int,
    node: int,
    la: tuple[Index, ...],
    lb: tuple[Index, ...],
    lc: tuple[Index, ...],
    size_dict: dict[Index, int],
    itemsize: int = 8,
    costs: LocalCosts | None = None,
) -> Step:
    """Describe one step as a GEMM and pick the cheapest way to run it with no surprise copies."""
    costs = costs or local_costs()
    sa, sb, sc = set(la), set(lb), set(lc)
    kmodes = [i for i in la if i in sb and i not in sc]
    k = math.prod(size_dict[i] for i in kmodes)
    labels = ["ab" if (i in sa and i in sb) else ("a" if i in sa else "b") for i in lc]
    runs = _runs(labels, [size_dict[i] for i in lc])
    # The inner GEMM: the last run must come from one operand only (n), the one
    # before from the other (m); anything else is a degenerate m or n of 1.
    m_run = n_run = None
    if runs and runs[-1][0] != "ab":
        n_run = runs.pop()
        if runs and runs[-1][0] not in ("ab", n_run[0]):
            m_run = runs.pop()
    x_side = "a" if n_run is None or n_run[0] == "b" else "b"
    y_side = "b" if x_side == "a" else "a"
    m = m_run[1] if m_run else 1
    n = n_run[1] if n_run else 1
    outer = runs
    x_view = tuple(d if lab in (x_side, "ab") else 1 for lab, d in outer) + (m, k)
    y_view = tuple(d if lab in (y_side, "ab") else 1 for lab, d in outer) + (n, k)
    out_view = tuple(d for _, d in outer) + (m, n)
    batch = math.prod(d for _, d in outer)
    size_c = math.prod(out_view)
    flops = 8.0 * size_c * k
    step = Step(
        lhs=a, rhs=b, out=node, lhs_modes=la, rhs_modes=lb, out_modes=lc,
        kernel="gemm", x="lhs" if x_side == "a" else "rhs",
        x_view=x_view, y_view=y_view, out_view=out_view,
        batch=batch, m=m, n=n, k=k, flops=flops, bytes=0, live_bytes=0,
    )
    if all(lab == "ab" for lab, _ in outer):
        return step  # a strided-batched GEMM straight into the output
    # broadcast: numpy's matmul runs its slow non-BLAS loop when both operands
    # broadcast while the second is transposed, so the cheaper one is expanded.
    x_bcast = any(d == 1 < o for d, (_, o) in zip(x_view, outer))
    y_bcast = any(d == 1 < o for d, (_, o) in zip(y_view, outer))
    expand, expand_bytes = "", 0
    if x_bcast and y_bcast:
        expand = "x" if m <= n else "y"
        expand_bytes = batch * (m if expand == "x" else n) * k * itemsize
    t_broadcast = costs.gemm_seconds(batch, m, n, k) + 2 * expand_bytes * costs.copy_byte
    t_loop = costs.loop_seconds(batch, m, n, k)
    # transpose: one GEMM over the batch modes, then a permutation into place.
    batch_modes = [i for i, lab in zip(lc, labels) if lab == "ab"]
    x_modes, y_modes = (la, lb) if x_side == "a" else (lb, la)
    x_only = [i for i in lc if i in x_modes and i not in batch_modes]
    y_only = [i for i in lc if i in y_modes and i not in batch_modes]
    kk = [i for i in x_modes if i in kmodes]
    x_perm = tuple(x_modes.index(i) for i in batch_modes + x_only + kk)
    y_perm = tuple(y_modes.index(i) for i in batch_modes + y_only + kk)
    tmp_modes = batch_modes + x_only + y_only
    out_perm = tuple(tmp_modes.index(i) for i in lc)
    sizes = lambda modes: math.prod(size_dict[i] for i in modes)  # noqa: E731
    permuted = size_c
    t_permute = _permute_seconds(
        size_c, out_perm, [size_dict[i] for i in tmp_modes], itemsize, costs
    )
    for modes, perm in ((x_modes, x_perm), (y_modes, y_perm)):
        if perm != tuple(range(len(perm))):
            permuted += sizes(modes)
            t_permute += _permute_seconds(
                sizes(modes), perm, [size_dict[i] for i in modes], itemsize, costs
            )
    t_transpose = (
        costs.gemm_seconds(sizes(batch_modes), sizes(x_only), sizes(y_only), k) + t_permute
    )
    t_tiled = float("inf")  # no shared outer axis: row tiles of the large operand by BLAS
    if not any(lab == "ab" for lab, _ in outer):
        x_size, y_size = math.prod(x_view) // k, math.prod(y_view) // k
        t_tiled = costs.tiled_seconds(max(x_size, y_size), min(x_size, y_size), k, itemsize)
        if t_loop == float("inf") and t_tiled * costs.tiled_margin > t_broadcast:
            t_tiled = float("inf")  # beside broadcast only where clearly faster
    t_free = min(t_loop, t_tiled, t_broadcast)
    if t_free <= t_transpose * costs.transpose_margin and min(t_loop, t_tiled) <= t_broadcast:
        kernel = {"kernel": "broadcast", "loop": True, "tiled": t_tiled < t_loop}
        if t_loop == float("inf"):  # without the compiled kernel (CuPy) it runs as broadcast
            kernel.update(expand=expand, expanded_bytes=expand_bytes)
    elif t_free <= t_transpose * costs.transpose_margin:
        kernel = {"kernel": "broadcast", "expand": expand, "expanded_bytes": expand_bytes}
    else:
        kernel = {"kernel": "transpose", "x_perm": x_perm, "y_perm": y_perm,
                  "out_perm": out_perm,
                  "tmp_shape": (sizes(batch_modes), sizes(x_only), sizes(y_only)),
                  "x_dims": tuple(size_dict[i] for i in x_modes),
                  "y_dims": tuple(size_dict[i] for i in y_modes),
                  "tmp_dims": tuple(size_dict[i] for i in tmp_modes),
                  "transposed_bytes": permuted * itemsize}
    return dataclasses.replace(step, **kernel)
