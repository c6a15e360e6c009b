"""Hardware profiles: what one machine (or cluster) offers a distributed contraction.

A profile is plain data, one TOML file per machine in the repository's
``backends/`` folder (shipped in the wheel as the package data
``qsimdist.backends``), so a plan for a 1024-GPU cluster can be made on a
laptop. Every number is *per device*: memory, FLOP rate, memory bandwidth and
the bandwidth one device gets in an all-to-all exchange.

Units: bytes, seconds, real floating-point operations per second (one complex
multiply-add counts 8). ``mem_bandwidth`` counts bytes read plus bytes written
per second, the way vendors quote HBM bandwidth and STREAM counts a copy.

Examples
--------
>>> from qsimdist.hardware import load_profile
>>> p = load_profile("dgx-h100")
>>> p.check_devices(8)
>>> p.bandwidth(8)
450000000000.0
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .._fileio import atomic_write_text
from .._resources import bundled_dir
from ..config import DTYPES
from ..errors import InvalidInputError, ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_FLOAT_FIELDS = (
    "mem_bandwidth",
    "intra_bandwidth",
    "intra_latency",
    "inter_bandwidth",
    "inter_latency",
)
_STR_FIELDS = ("name", "description", "source", "notes")
_REQUIRED = (
    "name",
    "description",
    "devices_per_node",
    "memory_bytes",
    "usable_memory_fraction",
    "flops",
    *_FLOAT_FIELDS,
)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: most devices a profile of any number of nodes is planned for (2^24: the distribution
#: planner's search grows with log2 of the count, and no machine comes near it)
MAX_DEVICES = 1 << 24


@dataclass(frozen=True)
class HardwareProfile:
    """The per-device resources of one machine type.

    Every field is checked at construction; a ``.toml`` profile file holds the same
    fields (:func:`load_profile`, :func:`save_profile`).

    Parameters
    ----------
    name : str
        Short identifier, e.g. ``"dgx-h100"`` (bundled files are named ``<name>.toml``).
    description : str
        One line saying what the machine is.
    devices_per_node : int
        Devices sharing the fast (intra-node) interconnect, >= 1.
    memory_bytes : int
        Memory of one device, in bytes, >= 1.
    usable_memory_fraction : float
        Share of ``memory_bytes`` a plan may fill, in (0, 1].
    flops : dict of str to float
        Real FLOP/s of one device per dtype name (``complex64``, ``complex128``;
        both required, positive).
    mem_bandwidth : float
        Device memory bandwidth, bytes read plus written per second.
    intra_bandwidth : float
        All-to-all bandwidth of one device inside a node, B/s.
    intra_latency : float
        Seconds per message inside a node (>= 0).
    inter_bandwidth : float
        All-to-all bandwidth of one device across nodes, B/s.
    inter_latency : float
        Seconds per message across nodes (>= 0).
    max_nodes : int, optional
        Largest number of nodes (>= 1), or ``None`` (the default) for any number.
    step_overhead : float, default 0.0
        Fixed seconds each pairwise step costs an executor on this machine
        (kernel launch, interpreter), fitted from measured runs; 0 for datasheet
        profiles.
    source : str, default ""
        Where the numbers come from (datasheet, measurement).
    notes : str, default ""
        Assumptions behind the numbers.

    Raises
    ------
    ProfileError
        A field of the wrong type or out of range, or a missing or unknown
        ``flops`` dtype (the message names the field).
    """

    name: str
    description: str
    devices_per_node: int
    memory_bytes: int
    usable_memory_fraction: float
    flops: dict[str, float]
    mem_bandwidth: float
    intra_bandwidth: float
    intra_latency: float
    inter_bandwidth: float
    inter_latency: float
    max_nodes: int | None = None
    step_overhead: float = 0.0
    source: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        where = "hardware profile" + (f" {self.name!r}" if isinstance(self.name, str) else "")

        def bad(name: str, want: str, value: Any) -> ProfileError:
            return ProfileError(f"{where}: field {name!r} must be {want}, got {value!r}")

        for name in _STR_FIELDS:
            if not isinstance(getattr(self, name), str):
                raise bad(name, "a string", getattr(self, name))
        if not self.name.strip():
            raise bad("name", "a non-empty string", self.name)

        for name, low in (("devices_per_node", 1), ("memory_bytes", 1)):
            value = getattr(self, name)
            if _is_number(value) and isinstance(value, float) and value.is_integer():
                value = int(value)  # TOML writes 80e9 as a float
                object.__setattr__(self, name, value)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
                raise bad(name, f"an integer >= {low}", value)
        if self.max_nodes is not None and not (
            isinstance(self.max_nodes, int)
            and not isinstance(self.max_nodes, bool)
            and self.max_nodes >= 1
        ):
            raise bad("max_nodes", "an integer >= 1 (or absent for any number)", self.max_nodes)

        so = self.step_overhead
        if not (_is_number(so) and math.isfinite(so) and so >= 0):
            raise bad("step_overhead", "a finite number >= 0", so)
        object.__setattr__(self, "step_overhead", float(so))

        frac = self.usable_memory_fraction
        if not (_is_number(frac) and 0 < frac <= 1):
            raise bad("usable_memory_fraction", "a number in (0, 1]", frac)
        object.__setattr__(self, "usable_memory_fraction", float(frac))

        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            positive = "latency" not in name
            ok = _is_number(value) and math.isfinite(value)
            ok = ok and (value > 0 if positive else value >= 0)
            if not ok:
                want = "a positive finite number" if positive else "a finite number >= 0"
                raise bad(name, want, value)
            object.__setattr__(self, name, float(value))

        if not isinstance(self.flops, dict):
            raise bad("flops", f"a table with keys {', '.join(DTYPES)}", self.flops)
        unknown = sorted(set(self.flops) - set(DTYPES))
        if unknown:
            raise ProfileError(
                f"{where}: unknown dtype {unknown[0]!r} in field 'flops'; "
                f"valid: {', '.join(DTYPES)}"
            )
        rates: dict[str, float] = {}
        for dtype in DTYPES:
            if dtype not in self.flops:
                raise ProfileError(f"{where}: missing field 'flops.{dtype}'")
            value = self.flops[dtype]
            if not (_is_number(value) and math.isfinite(value) and value > 0):
                raise bad(f"flops.{dtype}", "a positive finite number", value)
            rates[dtype] = float(value)
        object.__setattr__(self, "flops", rates)

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.flops.items())), self.memory_bytes))

    @property
    def usable_memory(self) -> int:
        """Bytes of one device a plan may fill: ``floor(memory_bytes * usable_memory_fraction)``."""
        return math.floor(self.memory_bytes * self.usable_memory_fraction)

    def max_devices(self) -> int | None:
        """``devices_per_node * max_nodes``, or ``None`` when any number of nodes is allowed."""
        return None if self.max_nodes is None else self.devices_per_node * self.max_nodes

    def valid_device_counts(self, limit: int = 1 << 20) -> list[int]:
        """The device counts :meth:`check_devices` accepts (powers of two), up to ``limit``.

        Parameters
        ----------
        limit : int, default 2**20
            The largest count listed.

        Returns
        -------
        list of int
            The powers of two from 1 to the smaller of ``limit`` and :meth:`max_devices`.
        """
        top = self.max_devices()
        top = limit if top is None else min(top, limit)
        return [1 << k for k in range(top.bit_length()) if 1 << k <= top]

    def check_devices(self, p: int) -> None:
        """Raise :class:`ProfileError` unless ``p`` is a power of two within the profile's size
        (at most :data:`MAX_DEVICES` for a profile of any number of nodes).

        Parameters
        ----------
        p : int
            A device count.

        Raises
        ------
        ProfileError
            ``p`` is not a power of two, or more devices than the profile has (the
            message lists the valid counts).
        """
        top = self.max_devices()
        if top is None:
            valid = (f"a power of two from 1 to 2^{MAX_DEVICES.bit_length() - 1} (1, 2, 4, 8, "
                     "...; any number of nodes)")
        else:
            counts = self.valid_device_counts()
            valid = f"a power of two from 1 to {counts[-1]} ({', '.join(map(str, counts))})"
        is_int = isinstance(p, int) and not isinstance(p, bool)
        if not is_int or p < 1 or p & (p - 1):
            raise ProfileError(
                f"profile {self.name!r} cannot use {p!r} devices: the device count must be {valid}"
            )
        if top is None and p > MAX_DEVICES:
            raise ProfileError(
                f"profile {self.name!r} cannot use {p} devices: qsimdist plans for at most "
                f"2^{MAX_DEVICES.bit_length() - 1} = {MAX_DEVICES:,} devices (the largest GPU "
                f"systems hold about 10^5); the device count must be {valid}"
            )
        if top is not None and p > top:
            raise ProfileError(
                f"profile {self.name!r} cannot use {p} devices: it has at most {top} "
                f"({self.devices_per_node} per node x {self.max_nodes} node(s)); "
                f"the device count must be {valid}"
            )

    def flop_rate(self, dtype: str) -> float:
        """Real FLOP/s of one device for ``dtype``.

        Parameters
        ----------
        dtype : str or numpy.dtype
            ``complex64`` or ``complex128``, by name or as a numpy dtype.

        Returns
        -------
        float
            The profile's ``flops`` entry for it.

        Raises
        ------
        ProfileError
            A dtype the profile has no rate for.
        """
        name = getattr(dtype, "name", dtype)
        if isinstance(dtype, type):
            name = getattr(dtype, "__name__", str(dtype))
        if name not in self.flops:
            raise ProfileError(
                f"unknown dtype {str(dtype)!r} for profile {self.name!r}; "
                f"valid: {', '.join(self.flops)}"
            )
        return self.flops[name]

    def _check_count(self, p: int) -> None:
        if not (isinstance(p, int) and not isinstance(p, bool) and p >= 1):
            raise ProfileError(f"device count must be an integer >= 1, got {p!r}")

    def bandwidth(self, p: int) -> float:
        """Per-device all-to-all bandwidth among ``p`` devices, B/s.

        The intra-node bandwidth while ``p`` devices fit in one node, else the
        slower of the intra- and inter-node bandwidths.

        Parameters
        ----------
        p : int
            The number of devices exchanging, >= 1.

        Raises
        ------
        ProfileError
            ``p`` is not an integer >= 1.
        """
        self._check_count(p)
        if p <= self.devices_per_node:
            return self.intra_bandwidth
        return min(self.intra_bandwidth, self.inter_bandwidth)

    def latency(self, p: int) -> float:
        """Seconds per message among ``p`` devices: intra-node if they fit in one node.

        Parameters
        ----------
        p : int
            The number of devices exchanging, >= 1.

        Raises
        ------
        ProfileError
            ``p`` is not an integer >= 1.
        """
        self._check_count(p)
        return self.intra_latency if p <= self.devices_per_node else self.inter_latency


# ----------------------------------------------------------------- locations
def profiles_dir() -> Path:
    """The folder holding the bundled profiles (``backends/`` in a checkout)."""
    found = bundled_dir("backends", "qsimdist.backends", "*.toml")
    if found is None:
        raise ProfileError("the bundled hardware profiles are not installed with this qsimdist")
    return found


def _bundled_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(profiles_dir().glob("*.toml"))}


# ----------------------------------------------------------------- reading
def from_mapping(data: dict[str, Any], where: str) -> HardwareProfile:
    """A profile from a mapping of its fields (a parsed ``.toml``, a schedule's
    ``profile_spec``); ``where`` names the source in the one-line :class:`ProfileError`."""
    known = {f.name for f in fields(HardwareProfile)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(
            f"{where}: unknown field {unknown[0]!r}; valid: {', '.join(sorted(known))}"
        )
    for name in _REQUIRED:
        if name not in data:
            raise ProfileError(f"{where}: missing field {name!r}")
    try:
        return HardwareProfile(**data)
    except ProfileError as exc:
        raise ProfileError(f"{where}: {exc}") from None


def _read_file(path: Path) -> HardwareProfile:
    where = f"profile file {str(path)!r}"
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{where} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read {where}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{where} is not valid TOML: {exc}") from None
    return from_mapping(data, where)


def load_profile(name_or_path: str | os.PathLike) -> HardwareProfile:
    """A bundled profile by name (``"dgx-h100"``) or a profile from a ``.toml`` file.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        A bundled profile's name, or a profile file: a path object, or a string
        that ends in ``.toml`` or holds a path separator. A
        :class:`HardwareProfile` is returned as it is.

    Returns
    -------
    HardwareProfile
        The profile, its fields checked.

    Raises
    ------
    ProfileError
        Unknown name (the message lists the bundled ones), a file that is not
        TOML, or a field that is missing or out of range (the message names it).
    """
    if isinstance(name_or_path, HardwareProfile):
        return name_or_path
    text = os.fspath(name_or_path)
    as_path = (
        not isinstance(name_or_path, str)
        or text.endswith(".toml")
        or "/" in text
        or os.sep in text
    )
    if as_path:
        return _read_file(Path(text))
    files = _bundled_files()
    if text not in files:
        raise ProfileError(
            f"unknown hardware profile {text!r}; valid: {', '.join(files)} "
            "(or the path of a .toml profile file)"
        )
    return _read_file(files[text])


def list_profiles() -> list[HardwareProfile]:
    """Every bundled profile, sorted by name."""
    return sorted((_read_file(p) for p in _bundled_files().values()), key=lambda p: p.name)


# ----------------------------------------------------------------- writing
def _toml_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_float(value: float) -> str:
    return repr(float(value))  # shortest round-tripping form, e.g. 6.7e+13 or 0.9; valid TOML


def profile_to_toml(profile: HardwareProfile) -> str:
    """The TOML text of ``profile`` (what :func:`save_profile` writes)."""
    lines = [f"# Hardware profile {profile.name!r}, written by qsimdist", ""]
    for name in _STR_FIELDS:
        lines.append(f"{name} = {_toml_string(getattr(profile, name))}")
    lines.append(f"devices_per_node = {profile.devices_per_node}")
    if profile.max_nodes is not None:
        lines.append(f"max_nodes = {profile.max_nodes}")
    lines.append(f"memory_bytes = {profile.memory_bytes}")
    lines.append(f"usable_memory_fraction = {_toml_float(profile.usable_memory_fraction)}")
    for name in _FLOAT_FIELDS:
        lines.append(f"{name} = {_toml_float(getattr(profile, name))}")
    if profile.step_overhead:
        lines.append(f"step_overhead = {_toml_float(profile.step_overhead)}")
    lines += ["", "[flops]"]
    for dtype, rate in profile.flops.items():
        lines.append(f"{dtype} = {_toml_float(rate)}")
    return "\n".join(lines) + "\n"


def save_profile(profile: HardwareProfile, path: str | os.PathLike) -> Path:
    """Write ``profile`` as TOML to ``path`` atomically; returns the path.

    Parameters
    ----------
    profile : HardwareProfile
        The profile to write (:func:`profile_to_toml` gives the text).
    path : str or os.PathLike
        The ``.toml`` file to write; :func:`load_profile` reads it back.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    InvalidInputError
        ``profile`` is not a :class:`HardwareProfile`, or the file cannot be
        written there.
    """
    if not isinstance(profile, HardwareProfile):
        raise InvalidInputError(f"expected a HardwareProfile, got {type(profile).__name__}")
    text = profile_to_toml(profile)
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise InvalidInputError(f"cannot write profile file {os.fspath(path)!r}: {exc}") from None
