"""The local part of the cost model fitted on the user's machine: read and written.

``qsimdist calibrate --local-costs FILE.toml`` fits :class:`~qsimdist.hardware.costs.LocalCosts`'
BLAS and copy prices (:func:`qsimdist.hardware.calibrate.measure_local_costs`) and
writes them with :func:`save_local_costs`; where ``$QSIMDIST_LOCAL_COSTS`` names such a
file, :func:`local_costs` is what the planner chooses each step's kernel with.
"""

from __future__ import annotations

from ..errors import ProfileError
from .costs import DEFAULT_COSTS, FITTED_LOCAL_FIELDS, LOCAL_COSTS_VARIABLE, LocalCosts

_LOADED: dict[str, LocalCosts] = {}  # path -> its costs, read once


def local_costs() -> LocalCosts:
    """The kernel choice's prices for this process: the file ``$QSIMDIST_LOCAL_COSTS`` names
    (read once per path), else :data:`DEFAULT_COSTS`.

    Raises ProfileError (one line) for a file that cannot be read, is not TOML, or holds a
    field that is not a :class:`LocalCosts` number.
    """
    import os

    path = os.environ.get(LOCAL_COSTS_VARIABLE, "").strip()
    if not path:
        return DEFAULT_COSTS
    found = _LOADED.get(path)
    if found is None:
        found = _LOADED[path] = load_local_costs(path)
    return found


def load_local_costs(path) -> LocalCosts:
    """The :class:`LocalCosts` of a TOML file's ``[local_costs]`` table (fields left out keep
    their defaults)."""
    import dataclasses
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    where = f"local costs file {str(path)!r} (${LOCAL_COSTS_VARIABLE})"
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{where} is not valid TOML: {exc}") from None
    table = data.get("local_costs")
    numeric = [f.name for f in dataclasses.fields(LocalCosts)
               if isinstance(getattr(DEFAULT_COSTS, f.name), (int, float))]
    if not isinstance(table, dict):
        raise ProfileError(f"{where} has no [local_costs] table; its fields: "
                           f"{', '.join(numeric)}")
    values = {}
    for key, value in table.items():
        if key not in numeric:
            raise ProfileError(f"{where}: unknown field {key!r}; valid: {', '.join(numeric)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or value == float("inf"):
            raise ProfileError(f"{where}: {key} must be a positive finite number, got "
                               f"{value!r}")
        values[key] = type(getattr(DEFAULT_COSTS, key))(value)
    return dataclasses.replace(DEFAULT_COSTS, **values)


def save_local_costs(fitted: LocalCosts, path, source: str = "") -> None:
    """Write the fitted fields of ``fitted`` as a ``[local_costs]`` TOML table, atomically."""
    import os
    import tempfile

    lines = ["# qsimdist local kernel costs (seconds per unit); set "
             f"{LOCAL_COSTS_VARIABLE}=<this file> to plan with them"]
    if source:
        lines.append("# " + source)
    lines.append("[local_costs]")
    lines += [f"{name} = {float(getattr(fitted, name))!r}" for name in FITTED_LOCAL_FIELDS]
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".local_costs.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = ["load_local_costs", "local_costs", "save_local_costs"]
