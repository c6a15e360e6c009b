"""The time-ordered (Schrödinger) path: apply gates to the full ``2^n`` state in circuit order.

For narrow circuits (the state fits the memory limit) this is the cheapest
exact route whatever the depth: each (fused) gate is one small GEMM over the
state, a diagonal gate one element-wise product, and the state holds every
amplitude at once.

Layout: two flat buffers of ``2^n`` elements, read as C-ordered tensors of
``n`` axes of 2 whose order of qubits is tracked (:class:`_State`), never
restored between gates. A dense ``k``-qubit gate whose qubits sit on
adjacent axes is one GEMM (batched over the leading axes) from one buffer
into the other, with the gate's matrix permuted to the axes' order;
otherwise one copy first moves its axes to the front or the end. A
diagonal gate is an in-place product with a broadcast view of its
diagonal. The flat state is put back in Qiskit's order (bit ``q`` of the
index is qubit ``q``) once, at the end. The earlier kernel (a
``tensordot`` and a copy back into order per gate) took 1.5-1.7x as long
on 20-qubit fused circuits and the same at 16 qubits and below
(docs/benchmarks/history.md, "Buffers kept between runs, an axis-tracking
statevector"). :func:`qsimdist.frontends.fusion.gate_seconds`
prices it. Compiled gather/scatter loops (numba, the qsim/Aer kernel
shape) were measured against the tensordot kernel and dropped: for fused
gates (``k`` = 3..5) they were 1.5-3x slower at 12-23 qubits, within 15%
at ``k`` <= 2, faster only below 12 qubits by about 10 µs per gate, and
importing numba (and compiling, on a fresh cache) cost 0.4-2 s per process
(docs/benchmarks/history.md, "Cold start: the statevector kernel").

From :data:`COMPILED_MIN_QUBITS` qubits dense gates skip the copy and the
GEMM: :class:`_InPlaceState` applies each in place with a compiled kernel
(:mod:`qsimdist.executors.sv_kernels`) on whatever bits its qubits sit on,
swapping qubits off the lowest index bits first where a gate lands there.
On qsim's 24-qubit ``circuit_q24`` this took 7.2 s (complex64) and 10.8 s
(complex128) where the GEMM kernel took 16.0 s and 27.9 s
(docs/benchmarks/history.md, "The statevector route near qsim").

Gates are taken by duck typing (anything with ``.matrix``, big-endian over
``.qubits``), so this module needs numpy only (layer 3 imports no frontend).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..errors import InvalidInputError
from ..network.matrices import is_diagonal

#: states the run holds: the state and one buffer of the same size it alternates with
WORKSPACE_STATES = 2
#: below this many trailing elements a batched GEMM over a run of the gate's axes is
#: many tiny GEMMs; the gate's axes are moved to the front or the end first (one copy,
#: then one GEMM)
MIN_BATCHED_INNER = 64


#: states of at most this many qubits asked for in complex64 are computed in complex128
#: and cast at the end: single precision loses about 6e-8 of an amplitude per gate, and a
#: deep circuit's thousands of gates (MQT Bench's 16-qubit Grover search) ended 6.9e-5 off,
#: while a state this small costs about as much in double precision (Aer's own default)
PRECISE_MAX_QUBITS = 20


def run_dtype(n_qubits: int, dtype: str) -> str:
    """The dtype the statevector route computes in for a requested ``dtype``."""
    if np.dtype(dtype) == np.complex64 and n_qubits <= PRECISE_MAX_QUBITS:
        return "complex128"
    return str(np.dtype(dtype))


def statevector_bytes(n_qubits: int, dtype: str) -> int:
    """Peak bytes of the statevector route for ``n_qubits`` in ``dtype``: the state and its
    workspace in :func:`run_dtype`, and the result cast back to ``dtype`` where they differ."""
    run = run_dtype(n_qubits, dtype)
    cast = (1 << n_qubits) * np.dtype(dtype).itemsize if run != str(np.dtype(dtype)) else 0
    return WORKSPACE_STATES * (1 << n_qubits) * np.dtype(run).itemsize + cast


#: state-sized buffers from this many bytes up to PREFAULTED_MAX_BYTES come from one
#: anonymous mapping populated at once (:func:`state_buffer`) rather than numpy's
#: allocator. numpy advises huge pages for large arrays; where the kernel must compact
#: memory to find them, first touch stalls: 64 MiB took 100-225 ms here where huge
#: pages were short, 5 ms where they were free, and 26-33 ms populated with 4 KiB
#: pages every time (docs/benchmarks/history.md, "The primitives beside Aer again").
#: Above the cap, huge pages' fewer TLB misses matter more than a one-off fault-in, and
#: numpy's allocator stays; so it does for the compiled kernel's states, whose scattered
#: accesses need the huge pages.
#: element-wise passes (copies, diagonal products) over fewer elements run on the calling
#: thread alone (handing a part to another thread costs tens of microseconds)
PARALLEL_MIN_ELEMENTS = 1 << 16
_pool = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:  # a forked child has none of its parent's threads
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


@functools.lru_cache(maxsize=1)
def pass_threads() -> int:
    """Threads an element-wise pass over a state is split over: the cores this process may
    run on (numpy's copies and products run on one core; a 16 MiB copy took 1.6 ms on one
    thread and 0.85 ms on two here)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def in_parts(fn: Callable[..., object], *arrays: np.ndarray) -> None:
    """``fn(*arrays)``, split along axis 0 over :func:`pass_threads` threads (the caller's
    and a pool's): each thread gets a slice of every array whose axis 0 has the full
    length, and the whole of one that broadcasts (length 1). numpy releases the GIL in
    its loops, so the parts run at once; small passes run here alone."""
    global _pool
    lead = max(a.shape[0] for a in arrays)
    parts = min(pass_threads(), lead)
    if parts < 2 or max(a.size for a in arrays) < PARALLEL_MIN_ELEMENTS:
        fn(*arrays)
        return
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(max_workers=pass_threads() - 1,
                                           thread_name_prefix="qsimdist-pass")
    bounds = [lead * i // parts for i in range(parts + 1)]

    def part(i: int) -> None:
        cut = slice(bounds[i], bounds[i + 1])
        fn(*(a[cut] if a.shape[0] == lead else a for a in arrays))

    futures = [_pool.submit(part, i) for i in range(1, parts)]
    part(0)
    for f in futures:
        f.result()


def matmul_in_parts(mat: np.ndarray, src: np.ndarray, dest: np.ndarray, outer: int, rows: int,
                    inner: int) -> None:
    """``dest = mat @ src`` over the ``rows`` axis of the flat ``(outer, rows, inner)``
    tensors, split over :func:`pass_threads` threads by :func:`in_parts` (along ``outer``,
    or along ``inner`` where ``outer`` is too short). Run it under :func:`blas_threads`
    (1): the parts are one-thread GEMMs side by side."""
    if inner == 1:  # (outer, rows) @ mat^T: one tall GEMM
        in_parts(lambda a, o: np.matmul(a, mat.T, out=o), src.reshape(outer, rows),
                 dest.reshape(outer, rows))
    elif outer >= pass_threads() or inner < PARALLEL_MIN_ELEMENTS // rows:
        in_parts(lambda a, o: np.matmul(mat, a, out=o), src.reshape(outer, rows, inner),
                 dest.reshape(outer, rows, inner))
    else:  # a few wide GEMMs: split their columns
        in_parts(lambda a, o: np.matmul(mat, a.transpose(1, 2, 0),
                                        out=o.transpose(1, 2, 0)),
                 src.reshape(outer, rows, inner).transpose(2, 0, 1),
                 dest.reshape(outer, rows, inner).transpose(2, 0, 1))


_blas_controller = None


def blas_threads(n: int):
    """A context in which the BLAS numpy calls runs on ``n`` threads (threadpoolctl's
    limit; a no-op context where threadpoolctl is missing). OpenBLAS's own threads
    spin between calls and hold the cores the parts of :func:`in_parts` need: the
    qft20 estimator ran 0.22 s with one BLAS thread against 0.25 s with two."""
    global _blas_controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency; kept optional at run time
        return contextlib.nullcontext()
    if _blas_controller is None:
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=n, user_api="blas")


PREFAULTED_MIN_BYTES = 4 << 20
PREFAULTED_MAX_BYTES = 1 << 30


def state_buffer(size: int, dtype, zeroed: bool = False) -> np.ndarray:
    """A flat array of ``size`` elements of ``dtype`` for a state or its work copy.

    Between :data:`PREFAULTED_MIN_BYTES` and :data:`PREFAULTED_MAX_BYTES` it is an
    anonymous mapping populated in one call (already zero); elsewhere, or where the
    mapping is refused, numpy's ``zeros`` / ``empty``.
    """
    import mmap

    dtype = np.dtype(dtype)
    nbytes = size * dtype.itemsize
    populate = getattr(mmap, "MAP_POPULATE", None)
    if populate is not None and PREFAULTED_MIN_BYTES <= nbytes <= PREFAULTED_MAX_BYTES:
        try:
            m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError):
            pass
        else:
            return np.frombuffer(m, dtype=dtype)
    return np.zeros(size, dtype=dtype) if zeroed else np.empty(size, dtype=dtype)


def permute_axes(src: np.ndarray, dest: np.ndarray, perm: Sequence[int]) -> None:
    """Copy the flat ``(2,)*n`` tensor ``src`` into ``dest`` with axis ``perm[j]`` of
    ``src`` becoming axis ``j`` of ``dest`` (C order, both flat and of one size).

    Runs of axes adjacent in both orders are merged first, so numpy copies a
    tensor of a few long axes rather than ``n`` axes of 2.
    """
    groups: list[list[int]] = []
    for a in perm:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    by_source = sorted(range(len(groups)), key=lambda g: groups[g][0])
    view = src.reshape([1 << len(groups[g]) for g in by_source])
    order = [by_source.index(g) for g in range(len(groups))]
    in_parts(np.copyto, dest.reshape([1 << len(g) for g in groups]), view.transpose(order))


class _State:
    """A ``2^n`` state whose axes hold qubits in a tracked order, never copied back.

    ``held[a]`` is the qubit on axis ``a`` of the C-ordered ``(2,)*n`` tensor
    in ``buf``; a gate's output keeps whatever order its GEMM wrote, and only
    :meth:`canonical` puts qubit ``q`` back on bit ``q`` of the flat index.
    A dense gate whose qubits sit on adjacent axes is one (batched) GEMM from
    ``buf`` into ``spare``, with the gate's matrix permuted to the axes'
    order; otherwise one copy first moves its axes to the front or the end
    (:meth:`_move`). Either way at
    most one copy and one GEMM per gate, and two state buffers in all.
    """

    #: buffers from :func:`state_buffer` (numpy's GEMMs and copies stream through memory;
    #: the compiled kernel's scattered bits run faster on numpy's huge pages)
    prefault = True

    def __init__(self, n: int, dtype: np.dtype) -> None:
        self.n = n
        self.buf = (state_buffer(1 << n, dtype, zeroed=True) if self.prefault
                    else np.zeros(1 << n, dtype=dtype))
        self.buf[0] = 1.0
        self.spare: np.ndarray | None = None  # the second buffer, made when first needed
        self.held = list(range(n - 1, -1, -1))  # Qiskit's order: axis a holds qubit n-1-a

    def _swap(self) -> None:
        self.buf, self.spare = self.spare, self.buf

    def _spare(self) -> np.ndarray:
        if self.spare is None:
            self.spare = (state_buffer(self.buf.size, self.buf.dtype) if self.prefault
                          else np.empty_like(self.buf))
        return self.spare

    def _move(self, qubits: tuple[int, ...]) -> int:
        """One copy: the axes of ``qubits`` become the leading or the trailing ones.

        Leading when the state's last axis holds none of them (the copy's inner
        runs are then the trailing axes, contiguous on both sides), trailing
        otherwise; the moved axes keep their order, and so do the others.
        Returns the first axis of the moved run.
        """
        n = self.n
        pos = sorted(self.held.index(q) for q in qubits)
        moved = set(pos)
        rest = [a for a in range(n) if a not in moved]
        front = (n - 1) not in moved
        self._permute(pos + rest if front else rest + pos)
        return 0 if front else n - len(pos)

    def _permute(self, perm: list[int]) -> None:
        """Copy into ``spare`` with axis ``perm[j]`` of the state becoming axis ``j``."""
        permute_axes(self.buf, self._spare(), perm)
        self.held = [self.held[a] for a in perm]
        self._swap()

    def dense(self, mat: np.ndarray, qubits: tuple[int, ...]) -> None:
        k, n = len(qubits), self.n
        pos = [self.held.index(q) for q in qubits]
        first = min(pos)
        inner = 1 << (n - first - k)
        if max(pos) - first != k - 1 or (1 < inner < MIN_BATCHED_INNER and first > 0):
            # not adjacent, or adjacent but a batch of tiny GEMMs: move them first
            first = self._move(qubits)
            pos = [self.held.index(q) for q in qubits]
            inner = 1 << (n - first - k)
        # the gate's axes in the state's order: permute the matrix to match
        by_axis = sorted(range(k), key=lambda j: pos[j])
        if by_axis != list(range(k)):
            mat = np.ascontiguousarray(
                mat.reshape((2,) * (2 * k)).transpose(by_axis + [k + j for j in by_axis])
            ).reshape(1 << k, 1 << k)
        outer = 1 << first
        self._spare()
        matmul_in_parts(mat, self.buf, self.spare, outer, 1 << k, inner)
        self._swap()

    def diagonal(self, diag: np.ndarray, qubits: tuple[int, ...]) -> None:
        """Multiply in place by a broadcast view of the diagonal."""
        k, n = len(qubits), self.n
        pos = [self.held.index(q) for q in qubits]
        order = sorted(range(k), key=lambda j: pos[j])
        shape = [1] * n
        for j in order:
            shape[pos[j]] = 2
        if not n:
            self.buf *= diag
            return
        # the axes before the gate's first one merged into one (the pass splits along it)
        first = min(pos)
        lead = [1 << first] if first else []
        view = self.buf.reshape(lead + [2] * (n - first))
        factor = np.transpose(diag.reshape((2,) * k), order).reshape([1] * len(lead)
                                                                    + shape[first:])
        in_parts(np.multiply, view, factor, view)

    def controlled(self, target: np.ndarray, qubits: tuple[int, ...], controls: int,
                   ctrl_state: Sequence[int], diagonal: bool) -> None:
        """Apply ``target`` (big-endian over ``qubits[controls:]``) to the amplitudes whose
        control qubits hold ``ctrl_state``: a strided view of ``2^(n - controls)`` of them,
        changed in place (the other amplitudes are not read)."""
        n = self.n
        view = self.buf.reshape((2,) * n)
        index: list = [slice(None)] * n
        for q, bit in zip(qubits[:controls], ctrl_state):
            index[self.held.index(q)] = int(bit)
        rest = [a for a in range(n) if not isinstance(index[a], int)]
        targets = qubits[controls:]
        t = len(targets)
        sub = np.moveaxis(view[tuple(index)],
                          [rest.index(self.held.index(q)) for q in targets], list(range(t)))
        if diagonal:
            sub *= np.diagonal(target).reshape((2,) * t + (1,) * (sub.ndim - t))
            return
        sub[...] = (target @ sub.reshape(1 << t, -1)).reshape(sub.shape)

    def canonical(self) -> np.ndarray:
        """The flat state in Qiskit's order (bit ``q`` of the index is qubit ``q``)."""
        want = list(range(self.n - 1, -1, -1))
        if self.held != want:
            self._permute([self.held.index(q) for q in want])
        return self.buf


class _InPlaceState(_State):
    """The same tracked layout, with dense gates applied in place by a compiled kernel.

    :func:`qsimdist.executors.sv_kernels.apply_dense` applies a gate on any bits
    in one pass, without the copy that moves its axes together; it needs the
    gate's qubits off the lowest :data:`~qsimdist.executors.sv_kernels.LOW_BITS`
    bits of the index. A gate that touches them first swaps those qubits with
    qubits on higher bits, choosing the qubits whose next use is furthest
    ahead (Belady's rule), so later gates rarely swap back. Diagonal gates and
    the final reorder are :class:`_State`'s. Its buffers are numpy's (huge pages:
    circuit_q24 in complex64 ran 9.4-10.7 s on them, 10.5-12.3 s on a
    :func:`state_buffer` of 4 KiB pages).
    """

    prefault = False

    def __init__(self, n: int, dtype: np.dtype, qubit_lists: Sequence[tuple[int, ...]]) -> None:
        from . import sv_kernels

        super().__init__(n, dtype)
        self._k = sv_kernels
        self._chunks = sv_kernels.n_chunks()
        self._uses: dict[int, list[int]] = {}
        for i, qs in enumerate(qubit_lists):
            for q in qs:
                self._uses.setdefault(q, []).append(i)
        self.step = 0
        self.swaps = 0

    def _bit(self, q: int) -> int:
        return self.n - 1 - self.held.index(q)

    def _next_use(self, q: int) -> int:
        uses = self._uses.get(q, ())
        at = bisect.bisect_right(uses, self.step)
        return uses[at] if at < len(uses) else 1 << 62

    def _clear_low(self, qubits: tuple[int, ...]) -> None:
        low = self._k.LOW_BITS
        stuck = [q for q in qubits if self._bit(q) < low]
        free = [q for q in self.held if q not in qubits and self._bit(q) >= low]
        free.sort(key=self._next_use, reverse=True)
        lows, highs = [], []
        for q, other in zip(stuck, free):
            a, b = self.held.index(q), self.held.index(other)
            lows.append(self.n - 1 - a)
            highs.append(self.n - 1 - b)
            self.held[a], self.held[b] = other, q
        self._k.swap_bits(self.buf, lows, highs, self._chunks)
        self.swaps += 1

    def canonical(self) -> np.ndarray:
        """The flat state in Qiskit's order, gathered in one compiled pass (the numpy
        transpose of a layout scattered by many swaps took 10x as long at 24 qubits)."""
        if self.held != list(range(self.n - 1, -1, -1)):
            self._k.gather_bits(self.buf, self._spare(), [self._bit(q) for q in range(self.n)],
                                self._chunks)
            self.held = list(range(self.n - 1, -1, -1))
            self._swap()
        return self.buf

    def dense(self, mat: np.ndarray, qubits: tuple[int, ...]) -> None:
        bits = [self._bit(q) for q in qubits]
        if min(bits) < self._k.LOW_BITS:
            self._clear_low(qubits)
            bits = [self._bit(q) for q in qubits]
        real = np.ascontiguousarray(mat.real)
        self._k.apply_dense(self.buf, real, np.ascontiguousarray(mat.imag), bits, self._chunks)


#: states of at least this many qubits run dense gates through the compiled in-place
#: kernel (below it the state is small, numpy's GEMMs are as fast, and the process
#: does not import numba); the gate must also leave LOW_BITS + its width <= n
COMPILED_MIN_QUBITS = 14
#: ``simulate(kernel=...)``
KERNELS = ("auto", "compiled", "numpy")


def simulate(n_qubits: int, gates: Iterable, global_phase: float = 0.0,
             dtype: str = "complex128", diagonal: Sequence[bool] | None = None,
             progress: Callable[[str, int, int], None] | None = None,
             kernel: str = "auto", work: dict | None = None,
             logical: Sequence[int] | None = None) -> np.ndarray:
    """The state ``U|0...0>`` as a flat vector in Qiskit's order (bit ``q`` of the index is
    qubit ``q``), global phase included.

    Args:
        n_qubits: number of qubits.
        gates: objects with ``.matrix`` (``2^k x 2^k``, big-endian over
            ``.qubits``) and ``.qubits``, or controlled gates (``.controls``,
            ``.ctrl_state``, ``.target``: :class:`~qsimdist.frontends.circuit.ControlledGate`).
        global_phase: radians, multiplied into the state.
        dtype: ``complex64`` or ``complex128``.
        diagonal: per gate, whether it is diagonal (``None``: checked here).
        progress: ``progress("statevector", done, total)`` every 1024 gates.
        kernel: ``"compiled"`` (dense gates in place, :class:`_InPlaceState`),
            ``"numpy"`` (a GEMM per gate, :class:`_State`) or ``"auto"``
            (compiled from :data:`COMPILED_MIN_QUBITS` qubits).
        work: a dict that receives, under ``"spare"``, the second state buffer
            when one was made (already paged in: a reader that needs a
            state-sized copy can reuse it).
        logical: wire ``w`` of ``gates`` holds qubit ``logical[w]`` of the result
            (SWAPs taken out as relabellings:
            :func:`qsimdist.frontends.fusion.absorb_swaps`); None: the same.
    """
    gates = list(gates)
    if n_qubits < 0:
        raise InvalidInputError(f"n_qubits must be >= 0, got {n_qubits}")
    if kernel not in KERNELS:
        raise InvalidInputError(f"unknown statevector kernel {kernel!r}; valid: "
                                f"{', '.join(KERNELS)}")
    dt = np.dtype(dtype)
    state = _make_state(n_qubits, dt, gates, kernel)
    # numpy's GEMMs run one thread per part of the state (matmul_in_parts), not BLAS's;
    # below PARALLEL_MIN_ELEMENTS a gate's GEMM is too small for threads to pay, and
    # OpenBLAS's spinning threads made it vary 3-570 ms on a loaded 2-core host where one
    # thread took 2-7 ms (MQT Bench's 12-qubit multiplier, 33 fused gates)
    with blas_threads(1) if type(state) is _State else contextlib.nullcontext():
        cast: dict[int, tuple] = {}
        total = len(gates)
        for done, g in enumerate(gates, start=1):
            qubits = tuple(int(q) for q in g.qubits)
            if getattr(g, "controls", 0):  # a ControlledGate: only the selected amplitudes
                entry = cast.get(("target", id(g.target)))
                if entry is None:
                    mat = np.ascontiguousarray(g.target, dtype=dt)
                    entry = cast[("target", id(g.target))] = (mat, is_diagonal(mat))
                state.controlled(entry[0], qubits, g.controls, g.ctrl_state, entry[1])
                continue
            entry = cast.get(id(g.matrix))
            if entry is None:
                mat = np.ascontiguousarray(g.matrix, dtype=dt)
                entry = cast[id(g.matrix)] = (mat, np.ascontiguousarray(np.diagonal(mat)))
            mat, diag_entries = entry
            diag = diagonal[done - 1] if diagonal is not None else is_diagonal(mat)
            if diag:
                state.diagonal(diag_entries, qubits)
            else:
                state.step = done - 1
                state.dense(mat, qubits)
            if progress is not None and done % 1024 == 0:
                progress("statevector", done, total)
    if logical is not None:
        if sorted(logical) != list(range(n_qubits)):
            raise InvalidInputError(f"logical must be a permutation of range({n_qubits})")
        state.held = [int(logical[w]) for w in state.held]
    out = state.canonical()
    if global_phase:
        out *= dt.type(np.exp(1j * global_phase))
    if work is not None and state.spare is not None:
        work["spare"] = state.spare
    return out


def apply_gates(state: np.ndarray, n_qubits: int, gates: Iterable[tuple],
                spare: np.ndarray | None = None, one_blas_thread: bool = True,
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """Apply prepared gates to a flat state (Qiskit's order) with numpy's GEMMs, as
    :func:`simulate`'s numpy kernel does (at most one copy and one GEMM per dense gate).

    Each gate is ``(kind, entries, qubits, controls, ctrl_state)``: kind ``"dense"``
    (``entries`` its matrix, big-endian over ``qubits``), ``"diagonal"`` (its diagonal)
    or ``"controlled"`` (the target's matrix on ``qubits[controls:]``, applied where
    ``qubits[:controls]`` hold ``ctrl_state``), in the state's dtype. ``spare``: a buffer
    of the state's size and dtype to work in (``None``: made when needed).
    ``one_blas_thread``: limit BLAS to one thread here (``False`` where the caller
    holds :func:`blas_threads` around many calls: setting it costs tens of µs).

    Returns ``(result, other)``: the state after the gates (``state`` or ``spare``) and
    the other buffer (``None`` where none was made), for the next call's ``spare``.
    ``state`` is not to be read again unless it is the result.
    """
    st = _State.__new__(_State)  # the tracked layout over the caller's buffers
    st.n, st.buf, st.spare = n_qubits, state, spare
    st.held = list(range(n_qubits - 1, -1, -1))
    with blas_threads(1) if one_blas_thread else contextlib.nullcontext():
        for kind, entries, qubits, controls, ctrl_state in gates:
            if kind == "controlled":
                st.controlled(entries, qubits, controls, ctrl_state, is_diagonal(entries))
            elif kind == "diagonal":
                st.diagonal(entries, qubits)
            else:
                st.dense(entries, qubits)
    out = st.canonical()
    return out, st.spare


def compiled_kernel_runs(n_qubits: int, widest: int) -> bool:
    """Whether ``simulate(kernel="auto")`` takes the compiled kernel for ``n_qubits`` and
    gates of at most ``widest`` qubits."""
    from .kernels import available
    from .sv_kernels import LOW_BITS

    return available() and n_qubits >= COMPILED_MIN_QUBITS and n_qubits - LOW_BITS >= widest


def _make_state(n: int, dt: np.dtype, gates: list, kernel: str) -> _State:
    from .sv_kernels import LOW_BITS

    widest = max((len(g.qubits) - getattr(g, "controls", 0) for g in gates), default=0)
    if kernel == "compiled" and n - LOW_BITS < widest:
        raise InvalidInputError(f"the compiled statevector kernel needs {LOW_BITS} qubits "
                                f"beside the widest gate ({widest} qubits); this state has {n}")
    if kernel == "compiled" or (kernel == "auto" and compiled_kernel_runs(n, widest)):
        return _InPlaceState(n, dt, [tuple(int(q) for q in g.qubits) for g in gates])
    return _State(n, dt)


def pattern_amplitudes(state: np.ndarray, per_qubit: Sequence[str],
                       open_order: Sequence[int]) -> np.ndarray:
    """Amplitudes of one pattern from a flat state in Qiskit's order (see :func:`simulate`).

    ``per_qubit[q]`` is ``'0'``, ``'1'`` or ``'*'``; ``open_order`` lists the
    open qubits, the first being the most significant bit of the flat result.
    """
    n = len(per_qubit)
    tensor = state.reshape((2,) * n)  # axis a holds qubit n-1-a
    index = tuple(slice(None) if per_qubit[n - 1 - a] == "*" else int(per_qubit[n - 1 - a])
                  for a in range(n))
    sub = tensor[index]
    open_desc = [q for q in range(n - 1, -1, -1) if per_qubit[q] == "*"]
    perm = [open_desc.index(q) for q in open_order]
    return np.ascontiguousarray(np.transpose(sub, perm)).reshape(-1)


def bitstring_amplitudes(state: np.ndarray, bitstrings: Sequence[str], order: str) -> np.ndarray:
    """Amplitudes of many star-free bitstrings (``qiskit`` or ``natural`` order), vectorised."""
    n = int(state.size).bit_length() - 1
    if not bitstrings:
        return np.zeros(0, dtype=state.dtype)
    if n == 0:
        return state[np.zeros(len(bitstrings), dtype=np.int64)]
    raw = np.frombuffer("".join(bitstrings).encode("ascii"), dtype=np.uint8).reshape(-1, n)
    bits = (raw == ord("1")).astype(np.int64)
    if order == "qiskit":  # character j is qubit n-1-j: the index is the binary number
        weights = np.array([1 << (n - 1 - j) for j in range(n)], dtype=np.int64)
    else:  # character j is qubit j
        weights = np.array([1 << j for j in range(n)], dtype=np.int64)
    return state[bits @ weights]
