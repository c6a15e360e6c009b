"""Tests of hardware profiles (``backends/*.toml``), calibration and their CLI commands."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qsimdist.cli import main
from qsimdist.errors import InvalidInputError, ProfileError, QsimdistError
from qsimdist.hardware import HardwareProfile, list_profiles, load_profile, save_profile
from qsimdist.hardware.calibrate import calibrate
from qsimdist.hardware.profiles import profiles_dir

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ("dgx-h100", "gb200-nvl72", "h100-ib", "h200", "local-cpu")

GOOD_TOML = """\
name = "toy"
description = "a toy machine"
devices_per_node = 4
max_nodes = 2
memory_bytes = 1_000_000_000
usable_memory_fraction = 0.5
mem_bandwidth = 1e11
intra_bandwidth = 2e10
intra_latency = 1e-6
inter_bandwidth = 1e9
inter_latency = 1e-5

[flops]
complex64 = 1e12
complex128 = 5e11
"""


def write(tmp_path: Path, text: str, name: str = "toy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, err: str, *words: str) -> None:
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("qsimdist: error:"), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, lines[0])


# ----------------------------------------------------------------- bundled
def test_bundled_profiles_load_and_match_their_file_names():
    found = list_profiles()
    assert [p.name for p in found] == list(BUNDLED)
    assert sorted(p.stem for p in profiles_dir().glob("*.toml")) == list(BUNDLED)
    for p in found:
        assert load_profile(p.name) == p
        assert p.source, f"{p.name} has no source"
        assert set(p.flops) == {"complex64", "complex128"}
        assert p.flops["complex64"] >= p.flops["complex128"]
        assert 0 < p.usable_memory < p.memory_bytes
        p.check_devices(1)


def test_profiles_ship_as_package_data():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"qsimdist.backends" = ["*.toml"' in text
    # setuptools finds the data package through the link qsimdist/backends -> ../backends
    link = ROOT / "qsimdist" / "backends"
    assert link.is_symlink() and link.resolve() == (ROOT / "backends").resolve()


@pytest.mark.parametrize(
    "name, per_node, memory, c64, c128, hbm, intra, inter, max_devices",
    [
        ("dgx-h100", 8, 80e9, 67e12, 34e12, 3.35e12, 450e9, 450e9, 8),
        ("h100-ib", 8, 80e9, 67e12, 34e12, 3.35e12, 450e9, 50e9, None),
        ("h200", 1, 141e9, 67e12, 34e12, 4.8e12, 450e9, 450e9, 1),
        ("gb200-nvl72", 72, 186e9, 80e12, 40e12, 8e12, 900e9, 900e9, 72),
        ("local-cpu", 64, 25_325_268_992, 2e11, 1e11, 1.6e10, 5e9, 5e9, 64),
    ],
)
def test_bundled_numbers(name, per_node, memory, c64, c128, hbm, intra, inter, max_devices):
    p = load_profile(name)
    assert p.devices_per_node == per_node
    assert p.memory_bytes == int(memory) and isinstance(p.memory_bytes, int)
    assert p.flop_rate("complex64") == c64
    assert p.flop_rate("complex128") == c128
    assert p.mem_bandwidth == hbm
    assert p.intra_bandwidth == intra and p.inter_bandwidth == inter
    assert p.max_devices() == max_devices


def test_usable_memory_is_floor_of_fraction():
    p = load_profile("dgx-h100")
    assert p.usable_memory_fraction == 0.9
    assert p.usable_memory == 72_000_000_000
    q = dataclasses.replace(p, memory_bytes=10, usable_memory_fraction=0.55)
    assert q.usable_memory == 5


# ----------------------------------------------------------------- device counts
def test_check_devices_dgx():
    p = load_profile("dgx-h100")
    for ok in (1, 2, 4, 8):
        p.check_devices(ok)
    with pytest.raises(ProfileError, match="power of two") as bad:
        p.check_devices(6)
    assert "from 1 to 8" in str(bad.value) and "1, 2, 4, 8" in str(bad.value)
    with pytest.raises(ProfileError, match="at most 8") as big:
        p.check_devices(16)
    assert "from 1 to 8" in str(big.value)
    for bad_count in (0, -2, 2.0, True):
        with pytest.raises(ProfileError):
            p.check_devices(bad_count)


def test_check_devices_unbounded_and_non_power_of_two_domain():
    ib = load_profile("h100-ib")
    ib.check_devices(1024)
    ib.check_devices(1 << 16)
    with pytest.raises(ProfileError, match="any number of nodes"):
        ib.check_devices(24)
    nvl = load_profile("gb200-nvl72")
    nvl.check_devices(64)
    with pytest.raises(ProfileError, match="from 1 to 64") as exc:
        nvl.check_devices(128)
    assert "at most 72" in str(exc.value)


def test_bandwidth_and_latency_switch_past_one_node():
    p = load_profile("h100-ib")
    assert [p.bandwidth(k) for k in (1, 2, 8)] == [450e9] * 3
    assert [p.bandwidth(k) for k in (16, 1024)] == [50e9] * 2
    assert p.latency(8) == 5e-6 and p.latency(16) == 1e-5
    # min(intra, inter): a slower intra link still bounds a multi-node exchange
    q = dataclasses.replace(p, intra_bandwidth=1e9, inter_bandwidth=5e9)
    assert q.bandwidth(16) == 1e9
    with pytest.raises(ProfileError):
        p.bandwidth(0)


def test_flop_rate_unknown_dtype_lists_valid():
    p = load_profile("h200")
    with pytest.raises(ProfileError, match="'c32'.*valid: complex64, complex128"):
        p.flop_rate("c32")
    import numpy as np

    assert p.flop_rate(np.dtype("complex128")) == 34e12
    assert p.flop_rate(np.complex64) == 67e12


# ----------------------------------------------------------------- loading errors
def test_unknown_profile_name_lists_valid():
    with pytest.raises(ProfileError) as exc:
        load_profile("dgx-a100")
    msg = str(exc.value)
    assert "'dgx-a100'" in msg
    for name in BUNDLED:
        assert name in msg
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, QsimdistError)


def test_missing_file(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "nope.toml")


def test_good_file_loads(tmp_path):
    p = load_profile(write(tmp_path, GOOD_TOML))
    assert p.name == "toy" and p.max_devices() == 8 and p.usable_memory == 500_000_000
    assert load_profile(str(tmp_path / "toy.toml")) == p


def _drop_line(text: str, key: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(f"{key} ")) + "\n"


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda t: _drop_line(t, "mem_bandwidth"), "mem_bandwidth"),
        (lambda t: _drop_line(t, "name"), "name"),
        (lambda t: _drop_line(t, "complex128"), "flops.complex128"),
        (lambda t: t.replace("inter_bandwidth = 1e9", "inter_bandwidth = -1e9"), "inter_bandwidth"),
        (lambda t: t.replace("intra_bandwidth = 2e10", "intra_bandwidth = 0"), "intra_bandwidth"),
        (lambda t: t.replace("inter_latency = 1e-5", "inter_latency = -1.0"), "inter_latency"),
        (lambda t: t.replace("intra_latency = 1e-6", "intra_latency = nan"), "intra_latency"),
        (lambda t: t.replace("= 0.5", "= 1.5"), "usable_memory_fraction"),
        (lambda t: t.replace("= 0.5", "= 0"), "usable_memory_fraction"),
        (lambda t: t.replace("devices_per_node = 4", "devices_per_node = 2.5"), "devices_per_node"),
        (lambda t: t.replace("devices_per_node = 4", 'devices_per_node = "4"'), "devices_per_node"),
        (lambda t: t.replace("max_nodes = 2", "max_nodes = 0"), "max_nodes"),
        (lambda t: t.replace("max_nodes = 2", "max_nodes = true"), "max_nodes"),
        (lambda t: t.replace("1_000_000_000", "-5"), "memory_bytes"),
        (lambda t: t.replace("complex64 = 1e12", "complex64 = inf"), "flops.complex64"),
        (lambda t: t.replace('name = "toy"', "name = 3"), "name"),
        (lambda t: t.replace('name = "toy"', 'name = "toy"\ninter_bandwith = 1e9'),
         "inter_bandwith"),
        (lambda t: t + "complex32 = 1e9\n", "complex32"),
    ],
)
def test_malformed_file_names_the_field(tmp_path, mutate, field):
    text = mutate(GOOD_TOML)
    assert text != GOOD_TOML
    with pytest.raises(ProfileError) as exc:
        load_profile(write(tmp_path, text))
    msg = str(exc.value)
    assert f"'{field}'" in msg, msg
    assert "toy.toml" in msg, msg


def test_not_toml(tmp_path):
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(write(tmp_path, "name = [unclosed\n"))


def test_constructor_validates():
    p = load_profile("dgx-h100")
    with pytest.raises(ProfileError, match="'mem_bandwidth'"):
        dataclasses.replace(p, mem_bandwidth=-1.0)
    with pytest.raises(ProfileError, match="'flops.complex64'"):
        dataclasses.replace(p, flops={"complex64": 0.0, "complex128": 1.0})


# ----------------------------------------------------------------- saving
def test_save_load_roundtrip(tmp_path):
    for p in list_profiles():
        out = save_profile(p, tmp_path / "sub" / f"{p.name}.toml")
        assert out.exists()
        assert load_profile(out) == p
    odd = dataclasses.replace(
        load_profile("h100-ib"),
        name="odd",
        description='quote " backslash \\ tab \t newline \n unicode µ, del \x7f, bell \x07',
        notes="",
    )
    path = save_profile(odd, tmp_path / "odd.toml")
    back = load_profile(path)
    assert back == odd and back.max_nodes is None
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"


def test_save_into_a_file_fails_cleanly(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InvalidInputError, match="cannot write"):
        save_profile(load_profile("h200"), blocker / "x.toml")


# ----------------------------------------------------------------- calibration
def _assert_sane(p: HardwareProfile) -> None:
    numbers = [*p.flops.values(), p.mem_bandwidth, p.intra_bandwidth, p.inter_bandwidth]
    assert all(math.isfinite(x) and x > 0 for x in numbers), numbers
    # numpy GEMM on any CPU: somewhere between 100 MFLOP/s and 100 TFLOP/s
    assert all(1e8 < r < 1e14 for r in p.flops.values()), p.flops
    assert 1e8 < p.mem_bandwidth < 1e13
    assert p.memory_bytes > 2**28
    assert p.intra_latency > 0 and p.inter_latency > 0


def test_calibrate_quick(tmp_path):
    p = calibrate("here", quick=True)
    assert p.name == "here"
    _assert_sane(p)
    assert p.devices_per_node == 1 and p.max_devices() == 1
    assert "not measured" in p.notes
    assert load_profile(save_profile(p, tmp_path / "here.toml")) == p


def test_calibrate_rejects_empty_name():
    with pytest.raises(ProfileError):
        calibrate("", quick=True)


@pytest.mark.mpi
def test_calibrate_under_mpi(tmp_path):
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not installed")
    pytest.importorskip("mpi4py")
    out = tmp_path / "mpi.toml"
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-m", "qsimdist", "calibrate", "--quick",
         "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("written to") == 1, proc.stdout  # rank 0 alone writes and prints
    p = load_profile(out)
    _assert_sane(p)
    assert p.devices_per_node == 2 and p.max_devices() == 2
    assert "Alltoall over 2 ranks" in p.source
    assert p.intra_latency < 1e-2 and p.intra_bandwidth > 1e7


# ----------------------------------------------------------------- CLI
def test_cli_profiles_json(capsys):
    rc, out, err = cli(capsys, "profiles", "--json")
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["name"] for r in rows] == list(BUNDLED)
    dgx = next(r for r in rows if r["name"] == "dgx-h100")
    assert dgx["devices_per_node"] == 8 and dgx["max_devices"] == 8
    assert dgx["flops"]["complex64"] == 67e12 and dgx["usable_memory"] == 72_000_000_000
    assert next(r for r in rows if r["name"] == "h100-ib")["max_devices"] is None


def test_cli_profiles_table(capsys):
    rc, out, _ = cli(capsys, "profiles")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[0] == "name" and len(lines) == 1 + len(BUNDLED)
    dgx = next(ln for ln in lines if ln.startswith("dgx-h100")).split()
    assert dgx[1:6] == ["8", "8", "80.0", "67.00", "3.350"]
    ib = next(ln for ln in lines if ln.startswith("h100-ib")).split()
    assert ib[2] == "any" and ib[-1] == "50.0"


def test_cli_calibrate_writes_loadable_file(capsys, tmp_path):
    out = tmp_path / "new" / "box.toml"
    rc, stdout, err = cli(capsys, "calibrate", "-o", out, "--quick")
    assert rc == 0, err
    p = load_profile(out)
    assert p.name == "box"
    _assert_sane(p)
    assert "complex64" in stdout and "written to" in stdout
    rc, _, err = cli(capsys, "calibrate", "-o", tmp_path / "b.toml", "--quick", "--name", "other")
    assert rc == 0, err
    assert load_profile(tmp_path / "b.toml").name == "other"


def test_cli_calibrate_bad_path(capsys, tmp_path):
    blocker = tmp_path / "regular-file"
    blocker.write_text("not a folder")
    rc, _, err = cli(capsys, "calibrate", "-o", blocker / "x.toml", "--quick")
    assert_one_line_error(rc, err, "regular-file", "not a folder")
    rc, _, err = cli(capsys, "calibrate", "-o", tmp_path / "x.json", "--quick")
    assert_one_line_error(rc, err, ".toml")
    assert not (tmp_path / "x.json").exists()


def test_cli_calibrate_bad_path_in_subprocess(tmp_path):
    blocker = tmp_path / "regular-file"
    blocker.write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "qsimdist", "calibrate", "--quick", "-o", str(blocker / "x.toml")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


def test_hardware_imports_stay_in_layer_1():
    """qsimdist.hardware imports only the stdlib, numpy and qsimdist's layer 0 (lazy ones aside)."""
    import ast

    allowed_local = {"errors", "config", "_fileio", "_optional", "_resources", "profiles",
                     "calibrate", "costs"}
    allowed_top = set(sys.stdlib_module_names) | {"numpy", "tomli"}
    for src in (ROOT / "qsimdist" / "hardware").glob("*.py"):
        tree = ast.parse(src.read_text())
        for node in tree.body:  # module level only: nothing heavy at import time
            if isinstance(node, ast.ImportFrom) and node.level:
                # ``from . import costs`` names the module in its aliases
                mods = ([node.module.split(".")[0]] if node.module
                        else [alias.name for alias in node.names])
                for mod in mods:
                    assert mod in allowed_local, f"{src.name}: from {'.' * node.level}{mod}"
            elif isinstance(node, ast.ImportFrom):
                assert node.module.split(".")[0] in allowed_top, f"{src.name}: {node.module}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in allowed_top, f"{src.name}: {alias.name}"


def test_profiles_found_in_installed_layout(tmp_path):
    """Installed, backends/ is the namespace package qsimdist.backends (no checkout beside it)."""
    site = tmp_path / "site"
    # the checkout's links qsimdist/backends and qsimdist/circuits are left out: the wheel's
    # layout has the folder itself in their place
    skip = shutil.ignore_patterns("__pycache__", "backends", "circuits")
    shutil.copytree(ROOT / "qsimdist", site / "qsimdist", ignore=skip)
    shutil.copytree(ROOT / "backends", site / "qsimdist" / "backends")
    code = (
        "import qsimdist.hardware.profiles as m; "
        "print(m.__file__); print(m.profiles_dir()); "
        "print(','.join(p.name for p in m.list_profiles()))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    module_file, folder, names = res.stdout.splitlines()
    assert module_file.startswith(str(site)), module_file
    assert Path(folder) == site / "qsimdist" / "backends"
    assert names.split(",") == list(BUNDLED)


def test_sizes_and_counts_stay_readable():
    from qsimdist.config import format_bytes, format_count

    assert format_bytes(512) == "512 B"
    assert format_bytes(1.5 * 2**30) == "1.50 GiB"
    assert format_bytes(3 * 2**60) == "3.00 EiB"
    assert format_bytes(2.0**90) == "1.24e+27 B"  # past YiB: scientific, not a 20-digit PiB
    assert format_count(999_999) == "999999"
    assert format_count(2**45) == "2^45"
    assert format_count(3 * 10**9) == "3.00e+09"
