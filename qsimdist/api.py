"""The Python entry points: ``plan``, ``amplitudes``, ``amplitude``, ``contract``.

Each goes frontend -> Network -> simplification -> path (cached) -> lifetime
ordering -> Plan -> executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .config import check_dtype, check_order, default_memory_limit, parse_memory
from .errors import BitstringError, InvalidInputError
from .frontends import GateCircuit, amplitude_network, expand_bitstring, load, parse_bitstring
from .network import Network
from .planner.path import PathOptions
from .planner.plan import Plan, make_plan
from .planner.simplify import DEFAULT_SEQUENCE, simplify

#: widest batch a set of bitstrings may be merged into (2^k amplitudes)
MAX_STARS = 30


def _circuit(source) -> GateCircuit:
    obj = load(source)
    if isinstance(obj, Network):
        raise InvalidInputError(
            "amplitudes need a circuit, but this input is a tensor network; use contract() "
            "(CLI: 'qsimdist plan NETWORK.json' / 'qsimdist run')"
        )
    return obj


def covering_pattern(bitstrings: Sequence[str]) -> str:
    """One pattern with ``*`` wherever the given bitstrings differ."""
    if isinstance(bitstrings, str):
        return bitstrings
    if not bitstrings:
        raise BitstringError("no bitstrings given")
    first = bitstrings[0]
    lengths = {len(b) for b in bitstrings}
    if len(lengths) != 1:
        raise BitstringError(f"bitstrings have different lengths {sorted(lengths)}")
    chars = [
        "*" if any(b[k] != first[k] for b in bitstrings) else first[k] for k in range(len(first))
    ]
    return "".join(chars)


def _memory_limit(value) -> int | None:
    """An explicit limit, or the machine's default (``"none"`` means unlimited)."""
    if isinstance(value, str) and value.strip().lower() in ("none", "unlimited"):
        return None
    return parse_memory(value) if value is not None else default_memory_limit()


def _path_options(path_options, max_time, max_repeats) -> PathOptions:
    if isinstance(path_options, dict):
        path_options = PathOptions(**path_options)
    opts = path_options or PathOptions()
    if max_time is not None or max_repeats is not None:
        opts = PathOptions(
            max_repeats=max_repeats if max_repeats is not None else opts.max_repeats,
            max_time=max_time if max_time is not None else opts.max_time,
            methods=opts.methods,
            minimize=opts.minimize,
            parallel=opts.parallel,
            cache=opts.cache,
            reconfigure=opts.reconfigure,
        )
    return opts


def plan(
    circuit,
    *,
    bitstrings: str | Sequence[str] | None = None,
    order: str = "qiskit",
    memory_limit: str | int | None = None,
    dtype: str = "complex64",
    simplify_sequence: str = DEFAULT_SEQUENCE,
    path_options: PathOptions | dict | None = None,
    max_time: float | None = None,
    max_repeats: int | None = None,
    progbar: bool = False,
) -> Plan:
    """Plan the contraction for ``circuit``'s amplitudes (or for a tensor network).

    Args:
        circuit: anything :func:`qsimdist.frontends.load` accepts.
        bitstrings: one bitstring (``*`` leaves a qubit open) or several, merged
            into one batched pattern with ``*`` where they differ. Default: all zeros.
        order: ``qiskit`` (rightmost character is qubit 0) or ``natural``.
        memory_limit: peak bytes allowed (``"8GiB"``, ``2e9``); slicing is added to fit.
        dtype: ``complex64`` or ``complex128``.
        simplify_sequence: quimb simplification letters ("" to skip).
        max_time, max_repeats: path-search budget (see :class:`PathOptions`).
    """
    dtype = check_dtype(dtype)
    check_order(order)
    limit = _memory_limit(memory_limit)
    opts = _path_options(path_options, max_time, max_repeats)
    obj = load(circuit)
    if isinstance(obj, Network):
        if bitstrings is not None:
            raise InvalidInputError("bitstrings apply to circuits, not to a tensor network")
        net = obj
    else:
        pattern = covering_pattern(bitstrings if bitstrings is not None else "0" * obj.n_qubits)
        parse_bitstring(pattern, obj.n_qubits, order)
        if pattern.count("*") > MAX_STARS:
            raise BitstringError(
                f"{pattern.count('*')} open qubits would batch 2^{pattern.count('*')} amplitudes; "
                f"at most {MAX_STARS} are allowed"
            )
        net = amplitude_network(obj, pattern, order)
    if net.arrays is not None:
        net = simplify(net, simplify_sequence)
    return make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts, progbar=progbar)


@dataclass
class AmplitudeResult:
    """Amplitudes of one or more bitstring patterns.

    Each pattern (``*`` = open qubit) contributes ``2^k`` amplitudes in the
    order of :func:`~qsimdist.frontends.expand_bitstring` (the leftmost ``*``
    is the most significant bit). Large batches are not expanded into Python
    strings unless asked: use :meth:`get` to look one bitstring up.
    """

    patterns: list[str]
    values: list[np.ndarray]
    n_qubits: int
    dtype: str
    order: str
    stats: dict = field(default_factory=dict)

    @property
    def amplitudes(self) -> np.ndarray:
        """All amplitudes, pattern after pattern."""
        return np.concatenate(self.values) if self.values else np.zeros(0, complex)

    @property
    def bitstrings(self) -> list[str]:
        """The bitstring of every amplitude (expands every pattern)."""
        return [b for p in self.patterns for b in expand_bitstring(p)]

    def __len__(self) -> int:
        return sum(v.size for v in self.values)

    def get(self, bitstring: str) -> complex:
        """The amplitude of ``bitstring`` from the first pattern that covers it."""
        for pattern, vals in zip(self.patterns, self.values):
            if len(pattern) == len(bitstring) and all(
                p == "*" or p == c for p, c in zip(pattern, bitstring)
            ):
                index = 0
                for p, c in zip(pattern, bitstring):
                    if p == "*":
                        index = 2 * index + (c == "1")
                return complex(vals[index])
        raise KeyError(f"{bitstring!r} is not covered by the computed patterns")

    __getitem__ = get

    def items(self):
        """Pairs (bitstring, amplitude), expanding patterns lazily."""
        for pattern, vals in zip(self.patterns, self.values):
            yield from zip(expand_bitstring(pattern), vals)

    def to_dict(self) -> dict:
        return {
            "n_qubits": self.n_qubits,
            "dtype": self.dtype,
            "order": self.order,
            "amplitudes": [
                {"bitstring": b, "re": float(a.real), "im": float(a.imag)} for b, a in self.items()
            ],
            "stats": self.stats,
        }


def amplitudes(
    circuit,
    bitstrings: str | Sequence[str],
    *,
    order: str = "qiskit",
    dtype: str = "complex64",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    simplify_sequence: str = DEFAULT_SEQUENCE,
    path_options: PathOptions | dict | None = None,
    max_time: float | None = None,
    max_repeats: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> AmplitudeResult:
    """Amplitudes ``<b|U|0>`` for each bitstring; ``*`` characters expand to all values.

    Each bitstring (pattern) is one contraction; structurally identical ones
    reuse the cached path. ``progress(stage, done, total)`` reports bitstrings done.
    """
    dtype = check_dtype(dtype)
    check_order(order)
    limit = _memory_limit(memory_limit)
    opts = _path_options(path_options, max_time, max_repeats)
    gc = _circuit(circuit)
    if isinstance(bitstrings, str):
        bitstrings = [bitstrings]
    bitstrings = list(bitstrings)
    if not bitstrings:
        raise BitstringError("no bitstrings given")
    for b in bitstrings:
        parse_bitstring(b, gc.n_qubits, order)
        if b.count("*") > MAX_STARS:
            raise BitstringError(f"{b!r} opens more than {MAX_STARS} qubits")
    values: list[np.ndarray] = []
    totals = {"flops": 0.0, "plan_seconds": 0.0, "execute_seconds": 0.0, "peak_bytes": 0,
              "transposed_bytes": 0, "n_slices": 0, "path_cache_hits": 0, "contractions": 0}
    for done, b in enumerate(bitstrings, start=1):
        t0 = time.perf_counter()
        net = simplify(amplitude_network(gc, b, order), simplify_sequence)
        p = make_plan(net, dtype=dtype, memory_limit=limit, path_options=opts)
        t1 = time.perf_counter()
        v = np.asarray(_to_numpy(p.execute(backend=backend))).reshape(-1)
        t2 = time.perf_counter()
        values.append(v)
        totals["path_cache_hits"] += int(p.stats.path_from_cache)
        totals["flops"] += p.stats.flops
        totals["plan_seconds"] += t1 - t0
        totals["execute_seconds"] += t2 - t1
        totals["peak_bytes"] = max(totals["peak_bytes"], p.stats.peak_bytes)
        totals["transposed_bytes"] += p.stats.transposed_bytes
        totals["n_slices"] += p.stats.n_slices
        totals["contractions"] += 1
        if progress is not None:
            progress("amplitudes", done, len(bitstrings))
    return AmplitudeResult(bitstrings, values, gc.n_qubits, dtype, order, totals)


def amplitude(circuit, bitstring: str, **kwargs) -> complex:
    """One amplitude ``<bitstring|U|0>`` (no ``*``); keywords as :func:`amplitudes`."""
    if "*" in bitstring:
        raise BitstringError(f"amplitude() takes a bitstring without '*', got {bitstring!r}")
    return complex(amplitudes(circuit, [bitstring], **kwargs).amplitudes[0])


def contract(
    network,
    *,
    dtype: str = "complex64",
    memory_limit: str | int | None = None,
    backend: str = "numpy",
    simplify_sequence: str = "",
    path_options: PathOptions | dict | None = None,
):
    """Contract a tensor network (a :class:`Network`, cotengra JSON path, or quimb network)."""
    obj = load(network)
    if not isinstance(obj, Network):
        raise InvalidInputError("contract() takes a tensor network; for circuits use amplitudes()")
    p = plan(obj, memory_limit=memory_limit, dtype=dtype, simplify_sequence=simplify_sequence,
             path_options=path_options)
    return p.execute(backend=backend)


def _to_numpy(a):
    return a.get() if hasattr(a, "get") else a
