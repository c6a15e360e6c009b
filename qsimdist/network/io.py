"""Read and write networks as cotengra-style JSON, with arrays in a sibling ``.npz``.

Files from elsewhere are untrusted: JSON is validated field by field and
``.npz`` files are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .._fileio import atomic_write, atomic_write_text, max_file_bytes, read_regular_bytes
from ..errors import CircuitParseError, InvalidInputError, shorten
from .core import Network

#: dtype kinds an array file may hold: booleans, integers, real and complex floats
_NUMERIC_KINDS = "biufc"


def _arrays_path(path: Path) -> Path:
    return path.with_suffix(".npz")


def parse_json_text(raw: bytes, source: str, what: str, error=CircuitParseError) -> object:
    """Decode UTF-8 JSON from a user's file; every failure is one ``error`` line.

    Nesting too deep for the parser (``[[[[...]]]]``), numbers with too many
    digits and files too large to decode are refused rather than raised raw.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{source}: not valid JSON (not UTF-8 text: {exc.reason} at byte "
                    f"{exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source}: not valid JSON ({exc.msg}: line {exc.lineno}, column "
                    f"{exc.colno})") from None
    except RecursionError:
        raise error(f"{source}: {what} is nested too deeply to read (lists or objects "
                    "inside each other thousands of levels deep)") from None
    except MemoryError:
        raise error(f"{source}: {what} is too large to decode in memory") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise error(f"{source}: not valid JSON ({shorten(str(exc), 200)})") from None


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
    index_names = [i for term in inputs for i in term] + list(output)
    bad = next((i for i in index_names if not isinstance(i, (str, int)) or isinstance(i, bool)),
               None)
    if bad is not None:
        raise CircuitParseError(
            f"{source}: index {shorten(bad)} is neither a string nor an integer; index names "
            "in 'inputs' and 'output' must be strings or integers"
        )
    try:
        return Network(inputs, output, size_dict)
    except InvalidInputError as exc:
        raise CircuitParseError(f"{source}: {exc}") from None


def _read_npy_header(fh, name: str, source: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an ``.npy`` member's header, without reading its data."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, _fortran, dtype = fmt.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _fortran, dtype = fmt.read_array_header_2_0(fh)
    else:
        raise CircuitParseError(
            f"{source}: {name} has .npy format version {version[0]}.{version[1]}; valid: 1.0, 2.0"
        )
    if dtype.hasobject or dtype.kind not in _NUMERIC_KINDS or dtype.itemsize == 0:
        raise CircuitParseError(
            f"{source}: {name} has dtype {shorten(dtype.str)}; valid: booleans, integers, "
            "real or complex floats"
        )
    if any(d < 0 for d in shape):
        raise CircuitParseError(f"{source}: {name} has a negative extent in shape {shorten(shape)}")
    return tuple(shape), dtype


def _describe_count(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 1 and n & (n - 1) == 0 else str(n)


def read_npz_arrays(apath: Path, n_tensors: int) -> list[np.ndarray]:
    """Arrays ``arr_0 .. arr_{n-1}`` of a user's ``.npz``, checked before any is allocated.

    The file must be a regular file under the size cap. Each member's ``.npy``
    header is read first: its dtype must be numeric and its declared size
    (shape product times item size) must fit both the bytes the member holds
    and the cap, so a header claiming 2^40 elements is refused instead of
    allocated. The arrays are then read with ``allow_pickle=False``.
    """
    raw = read_regular_bytes(apath, "network arrays (.npz)", CircuitParseError)
    cap = max_file_bytes()
    names = [f"arr_{k}" for k in range(n_tensors)]
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            members = {info.filename: info for info in zf.infolist()}
            missing = [n for n in names if f"{n}.npy" not in members]
            if missing:
                raise CircuitParseError(
                    f"{apath}: {len(missing)} arrays missing (e.g. {missing[0]}); "
                    f"need arr_0..arr_{n_tensors - 1}"
                )
            declared = sum(members[f"{n}.npy"].file_size for n in names)
            if declared > cap:
                raise CircuitParseError(
                    f"{apath}: its arrays unpack to {declared} bytes, over the {cap}-byte limit "
                    "on input files (set $QSIMDIST_MAX_FILE_BYTES to raise it)"
                )
            for n in names:
                info = members[f"{n}.npy"]
                with zf.open(info) as fh:
                    shape, dtype = _read_npy_header(fh, n, str(apath))
                    header_bytes = fh.tell()
                count = math.prod(shape)
                nbytes = count * dtype.itemsize
                held = info.file_size - header_bytes
                if nbytes > held or nbytes > cap:
                    raise CircuitParseError(
                        f"{apath}: {n}'s header claims shape {shorten(shape)} of {dtype.name} "
                        f"({_describe_count(count)} elements, {nbytes} bytes) but the member "
                        f"holds {held} bytes; the file is damaged or forged"
                    )
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return [np.asarray(npz[n]) for n in names]
    except CircuitParseError:
        raise
    except MemoryError:
        raise CircuitParseError(f"{apath}: its arrays do not fit in memory") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise CircuitParseError(
            f"{apath}: not a readable .npz archive (a zip file of .npy arrays): "
            f"{shorten(str(exc), 150)}"
        ) from None
    except (ValueError, OSError, KeyError, RuntimeError, NotImplementedError, TypeError,
            SyntaxError) as exc:
        raise CircuitParseError(
            f"{apath}: cannot read arrays ({type(exc).__name__}: {shorten(str(exc), 150)})"
        ) from None


def load_network(path: str | os.PathLike, arrays: str | os.PathLike | None = None) -> Network:
    """Load a cotengra-style JSON network, with arrays from ``arrays`` or ``<path>.npz``.

    Without an arrays file the network is structure-only (``arrays is None``).
    Both files are untrusted: only regular files under the size cap are read
    (``$QSIMDIST_MAX_FILE_BYTES``), the JSON is validated field by field and
    the arrays' headers are checked before anything is allocated.

    Parameters
    ----------
    path : str or os.PathLike
        The network's JSON file: an object with ``inputs`` (a list of index
        lists), ``output`` (a list of indices) and ``size_dict`` (index to integer
        extent); index names are strings or integers.
    arrays : str or os.PathLike, optional
        An ``.npz`` file holding ``arr_0 .. arr_{n-1}``, one array per tensor.
        Default: ``path`` with its suffix replaced by ``.npz``, read where it exists.

    Returns
    -------
    Network
        The network, with arrays where an arrays file was read.

    Raises
    ------
    CircuitParseError
        A file is missing, not a regular file, over the size cap, not valid JSON
        or not a readable ``.npz``, or its fields or arrays do not make a valid
        network (the message names the file).
    """
    path = Path(path)
    raw = read_regular_bytes(path, "network JSON", CircuitParseError)
    data = parse_json_text(raw, str(path), "the network JSON")
    net = network_from_dict(data, str(path))
    apath = Path(arrays) if arrays is not None else _arrays_path(path)
    # lexists: a dangling symlink or a symlink loop is reported, not taken for "no arrays"
    if arrays is not None or os.path.lexists(apath):
        arrs = read_npz_arrays(apath, net.num_tensors)
        try:
            net = Network(net.inputs, net.output, net.size_dict, arrs)
        except InvalidInputError as exc:
            raise CircuitParseError(f"{apath}: {exc}") from None
    return net


def save_network(net: Network, path: str | os.PathLike) -> Path:
    """Write ``net`` as JSON (and its arrays as ``<path>.npz``), atomically.

    Parameters
    ----------
    net : Network
        The network; its ``inputs``, ``output`` and ``size_dict`` go to the JSON
        file (``meta`` is not written).
    path : str or os.PathLike
        The JSON file to write. A network with arrays also writes them to ``path``
        with its suffix replaced by ``.npz`` (what :func:`load_network` reads).

    Returns
    -------
    pathlib.Path
        The JSON file written.
    """
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
