"""Validated option values shared by every layer: dtypes, memory sizes, bit orders."""

from __future__ import annotations

import re

import numpy as np

from .errors import InvalidInputError, shorten

DTYPES = ("complex64", "complex128")
#: how the executors' BLAS steps multiply complex matrices (executors.local.execute)
GEMM_MODES = ("complex", "3m", "tf32", "3m-tf32")
ORDERS = ("qiskit", "natural")

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def check_gemm(gemm: str, backend: str, dtype) -> str:
    """Return ``gemm`` if the executor can run it on ``backend`` in ``dtype``, else raise
    one line saying what is valid (see :func:`qsimdist.executors.local.execute`)."""
    if not isinstance(gemm, str) or gemm not in GEMM_MODES:
        raise InvalidInputError(f"unknown GEMM mode {shorten(str(gemm))}; valid: "
                                f"{', '.join(GEMM_MODES)}")
    if "tf32" in gemm and backend != "cupy":
        raise InvalidInputError(f"GEMM mode {gemm!r} needs backend 'cupy' (TF32 is a GPU "
                                "tensor-core compute type); valid on numpy: complex, 3m")
    if "tf32" in gemm and np.dtype(dtype) != np.complex64:
        raise InvalidInputError(f"GEMM mode {gemm!r} applies to complex64 only, not "
                                f"{np.dtype(dtype).name}; valid: dtype complex64")
    return gemm


def check_dtype(dtype: str | np.dtype | type) -> str:
    """Return the canonical dtype name, or raise listing the valid ones."""
    if isinstance(dtype, str) and len(dtype) > 64:  # no dtype name is this long
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError, SyntaxError):
            name = str(dtype)
    if name not in DTYPES:
        raise InvalidInputError(f"unknown dtype {shorten(str(dtype))}; valid: {', '.join(DTYPES)}")
    return name


def check_order(order: str) -> str:
    """Validate a bitstring order name."""
    if not isinstance(order, str) or order not in ORDERS:
        raise InvalidInputError(
            f"unknown bitstring order {shorten(order)}; valid: {', '.join(ORDERS)}"
        )
    return order


def reorder_bits(bits, order: str) -> str:
    """One character per qubit (a bitstring, a Pauli label), written in Qiskit's order
    (qubit 0 rightmost), as ``order`` writes it.

    The two orders are each other's mirror image, so the same call also reads a string
    written in ``order`` back into Qiskit's order, and a row of 0/1 values indexed by
    qubit (natural order) becomes a Qiskit-order bitstring with ``order="natural"``.
    ``bits`` is a string or a sequence of 0/1 integers; a string is returned.

    Raises:
        InvalidInputError: ``order`` is not one of :data:`ORDERS`.
    """
    if not isinstance(bits, str):
        bits = "".join(map(str, bits))
    if order == "natural":
        return bits[::-1]
    if order == "qiskit":
        return bits
    check_order(order)  # raises with the valid names
    return bits


def parse_memory(value: str | int | float | None) -> int | None:
    """Parse a memory size such as ``8GiB``, ``500MB`` or ``1e9`` into bytes.

    ``None`` means no limit. Decimal (kB, MB, GB) and binary (KiB, MiB, GiB)
    units are accepted, case-insensitively.
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            nbytes = float(value)
        except OverflowError:  # an int beyond the float range
            nbytes = float("inf")
    else:
        text = str(value)
        m = None if len(text) > 100 else re.fullmatch(
            r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text
        )
        if not m or m.group(2).lower() not in _UNITS:
            raise InvalidInputError(
                f"cannot read memory size {shorten(value)}; write a number with an optional unit, "
                "e.g. 8GiB, 500MB, 2e9 (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)"
            )
        nbytes = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not nbytes > 0 or nbytes == float("inf"):
        raise InvalidInputError(f"memory size must be positive and finite, got {shorten(value)}")
    return int(nbytes)


def format_bytes(n: float) -> str:
    """Human-readable binary size, e.g. ``1.50 GiB`` (scientific past the YiB range)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n * 1024.0**9:.2e} B"


def format_count(n: int) -> str:
    """A short count: exact below a million, ``2^k`` for powers of two, else ``1.2e+09``."""
    if n < 10**6:
        return str(n)
    if n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return f"{n:.2e}"


def coerce_options(cls, options, what: str):
    """``options`` as the frozen options dataclass ``cls``: from ``None``, an instance or a dict.

    A dict's keys must name fields of ``cls``; unknown keys are refused with the
    valid list. ``what`` names the options in messages (``"sampler"``).
    """
    import dataclasses

    if options is None:
        return cls()
    if isinstance(options, cls):
        return options
    if isinstance(options, dict):
        valid = sorted(f.name for f in dataclasses.fields(cls))
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise InvalidInputError(
                f"unknown {what} options {', '.join(map(str, unknown))}; valid: {', '.join(valid)}"
            )
        return cls(**options)
    raise InvalidInputError(
        f"{what} options must be a {cls.__name__} or a dict, got {type(options).__name__}"
    )


#: values of ``$QSIMDIST_REUSE``
REUSE_VALUES = {"on": True, "1": True, "yes": True, "true": True,
                "off": False, "0": False, "no": False, "false": False}


def reuse_enabled() -> bool:
    """Whether sliced plans keep step outputs across slices (``$QSIMDIST_REUSE``, default on).

    Local plans sliced to a memory limit and the schedules ``mpiexec`` runs plan
    without kept outputs when it is ``off`` (``0``, ``no``, ``false``): every step
    then runs once per slice, as before reuse existed.
    """
    import os

    value = os.environ.get("QSIMDIST_REUSE", "on").strip().lower() or "on"
    if value not in REUSE_VALUES:
        raise InvalidInputError(f"QSIMDIST_REUSE is {shorten(value)}; valid: on, off "
                                "(or 1/0, yes/no, true/false)")
    return REUSE_VALUES[value]
