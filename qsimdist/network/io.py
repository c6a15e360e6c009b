"""Read and write networks as cotengra-style JSON, with arrays in a sibling ``.npz``.

Files from elsewhere are untrusted: JSON is validated field by field and
``.npz`` files are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .._fileio import atomic_write, atomic_write_text
from ..errors import CircuitParseError, InvalidInputError
from .core import Network


def _arrays_path(path: Path) -> Path:
    return path.with_suffix(".npz")


def network_from_dict(data: object, source: str = "network") -> Network:
    """Build a structure-only :class:`Network` from cotengra's JSON dictionary."""
    if not isinstance(data, dict):
        raise CircuitParseError(f"{source}: expected a JSON object with inputs, output, size_dict")
    for key in ("inputs", "output", "size_dict"):
        if key not in data:
            raise CircuitParseError(f"{source}: missing field {key!r} (need inputs, output, size_dict)")
    inputs, output, size_dict = data["inputs"], data["output"], data["size_dict"]
    if not isinstance(inputs, list) or not all(isinstance(t, list) for t in inputs):
        raise CircuitParseError(f"{source}: field 'inputs' must be a list of index lists")
    if not isinstance(output, list):
        raise CircuitParseError(f"{source}: field 'output' must be a list of indices")
    if not isinstance(size_dict, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in size_dict.values()
    ):
        raise CircuitParseError(f"{source}: field 'size_dict' must map indices to integers")
    try:
        return Network(inputs, output, size_dict)
    except InvalidInputError as exc:
        raise CircuitParseError(f"{source}: {exc}") from None


def load_network(path: str | os.PathLike, arrays: str | os.PathLike | None = None) -> Network:
    """Load a cotengra-style JSON network, with arrays from ``arrays`` or ``<path>.npz``.

    Without an arrays file the network is structure-only (``arrays is None``).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CircuitParseError(f"no such file: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CircuitParseError(f"{path}: not valid JSON ({exc})") from None
    net = network_from_dict(data, str(path))
    apath = Path(arrays) if arrays is not None else _arrays_path(path)
    if arrays is not None or apath.exists():
        try:
            with np.load(apath, allow_pickle=False) as npz:
                names = [f"arr_{k}" for k in range(net.num_tensors)]
                missing = [n for n in names if n not in npz.files]
                if missing:
                    raise CircuitParseError(
                        f"{apath}: {len(missing)} arrays missing (e.g. {missing[0]}); "
                        f"need arr_0..arr_{net.num_tensors - 1}"
                    )
                arrs = [np.asarray(npz[n]) for n in names]
        except FileNotFoundError:
            raise CircuitParseError(f"no such arrays file: {apath}") from None
        except ValueError as exc:
            raise CircuitParseError(f"{apath}: cannot read arrays ({exc})") from None
        try:
            net = Network(net.inputs, net.output, net.size_dict, arrs)
        except InvalidInputError as exc:
            raise CircuitParseError(f"{apath}: {exc}") from None
    return net


def save_network(net: Network, path: str | os.PathLike) -> Path:
    """Write ``net`` as JSON (and its arrays as ``<path>.npz``), atomically."""
    path = Path(path)
    data = {
        "inputs": [list(t) for t in net.inputs],
        "output": list(net.output),
        "size_dict": dict(net.size_dict),
    }
    if net.arrays is not None:
        arrays = {f"arr_{k}": np.asarray(a) for k, a in enumerate(net.arrays)}
        atomic_write(_arrays_path(path), lambda fh: np.savez(fh, **arrays))
    return atomic_write_text(path, json.dumps(data))
