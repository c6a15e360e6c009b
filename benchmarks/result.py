"""The JSON file of one ``python -m benchmarks run`` run: written by :mod:`.suite`, read by
:mod:`.report_md`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from qsimdist.errors import InvalidInputError

SCHEMA = "benchmarks"
SCHEMA_VERSION = 1


def write_json(result: dict, path: Path) -> None:
    """Write ``result`` atomically as indented JSON."""
    from qsimdist._fileio import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=1, default=_jsonable) + "\n")


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def load_json(path: Path) -> dict:
    """Read a result written by :func:`write_json`; a wrong file gets one line."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InvalidInputError(f"{path} is not a qsimdist bench result (schema {SCHEMA!r})")
    if data.get("version") != SCHEMA_VERSION:
        raise InvalidInputError(f"{path}: bench result version {data.get('version')!r}; "
                                f"this qsimdist reads version {SCHEMA_VERSION}")
    return data


__all__ = ["SCHEMA", "SCHEMA_VERSION", "load_json", "write_json"]
