"""How a plan file's fields are written and checked: arrays as base64 (any real or
complex float dtype, nothing else is read back) and the ``meta`` object's known keys.

:mod:`qsimdist.planner.plan` writes and reads plans with these; files from elsewhere are
untrusted, so every failure is one :class:`~qsimdist.errors.PlanFormatError` line.
"""

from __future__ import annotations

import base64

import numpy as np

from ..errors import PlanFormatError


def encode_array(a: np.ndarray) -> dict:
    """``a`` as JSON data: its dtype string, shape and base64 bytes (C order)."""
    a = np.asarray(a, order="C")  # not ascontiguousarray, which makes a 0-d array 1-d
    return {
        "dtype": a.dtype.str,
        "shape": list(a.shape),
        "data": base64.b64encode(a.tobytes()).decode("ascii"),
    }


def clip_message(value: object, limit: int = 200) -> str:
    """An exception's text cut to ``limit`` characters (it may echo a huge user value)."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


def decode_array(d: dict, where: str) -> np.ndarray:
    """The array :func:`encode_array` wrote (a real or complex float; ``where`` names it
    in the :class:`~qsimdist.errors.PlanFormatError` a bad one gives)."""
    try:
        dtype = np.dtype(d["dtype"])
        if dtype.kind not in "fc" or dtype.hasobject:
            raise ValueError(f"dtype {dtype} is not a real or complex float")
        shape = tuple(int(x) for x in d["shape"])
        raw = base64.b64decode(d["data"], validate=True)
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanFormatError(f"{where}: bad array ({clip_message(exc)})") from None


def check_meta(meta: object, source: str, n_open: int | None = None) -> None:
    """Validate a plan file's ``meta``: an object whose known keys have valid values.

    ``bitstring`` is a string of 0, 1 and ``*`` (``n_qubits`` characters when
    that is given, one ``*`` per open output index when ``n_open`` is given),
    ``n_qubits`` a non-negative integer, ``order`` qiskit or natural; other
    keys pass unchecked. A missing or null ``meta`` is an empty one.
    """
    from ..config import ORDERS
    from ..errors import shorten

    if meta is None:
        return
    if not isinstance(meta, dict):
        raise PlanFormatError(f"{source}: field 'meta' must be a JSON object, got {shorten(meta)}")
    n_qubits = meta.get("n_qubits")
    if "n_qubits" in meta and (
        not isinstance(n_qubits, int) or isinstance(n_qubits, bool) or n_qubits < 0
    ):
        raise PlanFormatError(
            f"{source}: field 'meta.n_qubits' must be a non-negative integer, "
            f"got {shorten(n_qubits)}"
        )
    if "order" in meta and meta["order"] not in ORDERS:
        raise PlanFormatError(
            f"{source}: field 'meta.order' is {shorten(meta['order'])}; valid: {', '.join(ORDERS)}"
        )
    if "bitstring" in meta:
        bits = meta["bitstring"]
        if not isinstance(bits, str):
            raise PlanFormatError(
                f"{source}: field 'meta.bitstring' must be a string of 0, 1 and *, "
                f"got {shorten(bits)}"
            )
        if set(bits) - set("01*"):
            raise PlanFormatError(
                f"{source}: field 'meta.bitstring' {shorten(bits)} has characters other than "
                "0, 1 and *"
            )
        if n_qubits is not None and len(bits) != n_qubits:
            raise PlanFormatError(
                f"{source}: field 'meta.bitstring' has {len(bits)} characters but "
                f"meta.n_qubits is {n_qubits}"
            )
        if n_open is not None and bits.count("*") != n_open:
            raise PlanFormatError(
                f"{source}: field 'meta.bitstring' leaves {bits.count('*')} qubits open (*) but "
                f"the network has {n_open} open output indices"
            )
