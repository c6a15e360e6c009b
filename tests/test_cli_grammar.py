"""One grammar for every ``qsimdist`` subcommand (issue 42).

The shared options (--output, --json, --dtype, --order, --profile, --memory-limit,
--backend, --comm) have one spelling, type, default and help text wherever they appear: each
is checked against its one definition in :mod:`qsimdist.commands.common`. ``-h`` is
``--help`` everywhere; under ``--json`` an error is one JSON object on stderr with exit
code 2; an unknown hardware profile is refused by every command that takes one; ``-v``
logs on stderr.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

import qsimdist.cli as cli_module
from qsimdist.cli import main
from qsimdist.commands import common

ROOT = Path(__file__).resolve().parents[1]
GHZ = str(ROOT / "circuits" / "ghz_n5.qasm")

#: option string -> (its one definition, the Literal of its choices or None)
CANONICAL = {
    "--output": (common.OutputOpt, None),
    "--json": (common.JsonOpt, None),
    "--dtype": (common.DtypeOpt, common.Dtype),
    "--order": (common.OrderOpt, common.Order),
    "--profile": (common.ProfileOpt, None),
    "--memory-limit": (common.MemOpt, None),
    "--backend": (common.BackendOpt, common.Backend),
    "--comm": (common.CommOpt, common.Comm),
}
#: the one deliberate variant: 'contract' reads arrays that may be real and, by default,
#: keeps their own dtype (complex64 would round a complex128 network, and make a real
#: network's result complex), so its --dtype has float choices and no fixed default
VARIANTS = {("contract", "--dtype"): (common.NetworkDtypeOpt, common.NetworkDtype)}
#: spellings of the shared options that must not appear (visible) anywhere
FORBIDDEN = {"--out", "--outfile", "--output-file", "--json-file", "--json-out", "--mem",
             "--memory", "--mem-limit", "--precision", "--bit-order", "--bitorder",
             "--array-backend", "--hardware", "--hardware-profile"}
#: hidden, deprecated aliases kept so that old command lines still work
DEPRECATED = {("search", "--out")}


def _commands(group=None, prefix=()):
    """(path, click command) for every leaf subcommand, e.g. (('cache', 'info'), cmd)."""
    group = cli_module.click_command if group is None else group
    found = []
    for name, cmd in sorted(group.commands.items()):
        path = (*prefix, name)
        if hasattr(cmd, "commands"):
            found += _commands(cmd, path)
        else:
            found.append((path, cmd))
    return found


COMMANDS = _commands()
IDS = [" ".join(p) for p, _ in COMMANDS]


def test_every_subcommand_is_walked():
    names = {p[0] for p, _ in COMMANDS}
    assert names == {"amplitude", "plan", "run", "version", "profiles", "calibrate", "expect",
                     "contract", "search", "sample", "decode", "cache"}
    assert {p for p, _ in COMMANDS if p[0] == "cache"} == {("cache", "info"), ("cache", "clear")}
    assert "bench" not in names


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=IDS)
def test_shared_options_have_one_name_and_one_meaning(path, cmd):
    for param in cmd.params:
        opts = set(param.opts) | set(param.secondary_opts)
        hidden = getattr(param, "hidden", False)
        for spelling in opts & FORBIDDEN:
            assert hidden and (path[0], spelling) in DEPRECATED, (path, spelling)
        shared = opts & set(CANONICAL)
        if not shared:
            # another option may not take a shared option's short name either
            assert "-o" not in opts or hidden, (path, param.name)
            continue
        assert len(shared) == 1, (path, opts)
        spelling = shared.pop()
        info, literal = VARIANTS.get((path[0], spelling), CANONICAL[spelling])
        assert opts == set(info.param_decls), (path, spelling, opts)
        assert param.help == info.help, (path, spelling)
        assert param.default == info.default, (path, spelling, param.default)
        assert not hidden, (path, spelling)
        # (typer < 0.19 takes no Literal: the annotation is then str, and the command checks)
        expected = typing.get_args(literal) if literal is not None else ()
        assert tuple(getattr(param.type, "choices", None) or ()) == expected, (path, spelling)
        if spelling == "--json":
            assert param.is_flag and param.default is False, (path, "--json must be a flag")
        if spelling == "--output":
            assert param.type.name == "path", (path, param.type.name)


def test_shared_parameters_keep_their_names():
    """A parameter that holds a shared setting is spelled like the shared option."""
    names = {"output": "--output", "as_json": "--json", "json": "--json", "dtype": "--dtype",
             "order": "--order", "profile": "--profile", "memory_limit": "--memory-limit",
             "backend": "--backend", "collectives": "--comm"}
    for path, cmd in COMMANDS:
        for param in cmd.params:
            if param.name in names:
                assert names[param.name] in param.opts, (path, param.name, param.opts)


def test_the_options_that_were_missing_are_there():
    have = {p[0]: {o for prm in c.params for o in prm.opts} for p, c in COMMANDS}
    assert "--order" in have["sample"] and "--order" in have["expect"]
    assert "--backend" in have["contract"]
    for name in ("plan", "calibrate", "contract", "search"):
        assert {"--output", "-o"} <= have[name], name


def test_commands_that_run_the_mpi_executor_take_comm():
    """--comm (auto|mpi|nccl) wherever a command runs plans under mpiexec, nowhere else."""
    have = {p for p, c in COMMANDS if any("--comm" in prm.opts for prm in c.params)}
    assert have == {("amplitude",), ("run",), ("contract",)}


@pytest.mark.parametrize("path", [()] + [p for p, _ in COMMANDS],
                         ids=["qsimdist"] + IDS)
def test_dash_h_is_help(capsys, path):
    assert main([*path, "-h"]) == 0
    out, err = capsys.readouterr()
    assert "Usage" in out and err == ""
    assert main([*path, "--help"]) == 0
    assert capsys.readouterr().out == out


def test_contract_help_names_a_backend_it_has(capsys):
    assert main(["contract", "-h"]) == 0
    out = capsys.readouterr().out
    assert "--backend" in out and "cupy" in out


@pytest.mark.parametrize("args, kind", [
    (["amplitude", "missing.qasm", "--json"], "CircuitParseError|InvalidInputError"),
    (["amplitude", GHZ, "--dtype", "float32", "--json"], "BadParameter"),
    (["plan", GHZ, "--bogus", "--json"], "NoSuchOption"),
    (["run", "missing-plan.json", "--json"], None),
    (["contract", "missing-net.json", "--json"], "InvalidInputError"),
    (["expect", GHZ, "-O", "ZZ", "--json"], "InvalidInputError"),
    (["sample", GHZ, "--shots", "0", "--json"], "InvalidInputError"),
    (["sample", GHZ, "--order", "big", "--json"], "BadParameter"),
    (["search", GHZ, "--json"], "InvalidInputError"),
    (["profiles", "--json", "--bogus"], "NoSuchOption"),
    (["cache", "info", "--json", "--bogus"], "NoSuchOption"),
    (["decode", "missing.dem", "--syndromes", "missing.01", "--json"], None),
], ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_error_under_json_is_one_json_object(capsys, tmp_path, monkeypatch, args, kind):
    monkeypatch.chdir(tmp_path)
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    obj = json.loads(lines[0])
    assert set(obj) == {"error", "exit_code"} and obj["exit_code"] == 2
    assert set(obj["error"]) == {"type", "message"}
    assert obj["error"]["message"] and "Traceback" not in err
    if kind is not None:
        assert obj["error"]["type"] in kind.split("|"), obj


def test_error_without_json_is_one_line(capsys):
    assert main(["amplitude", GHZ, "--order", "big"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qsimdist: error: ")
    assert "'big'" in err and "qiskit" in err and "natural" in err


def _profile_args(name: str, tmp_path: Path) -> list[str]:
    return {
        "amplitude": [GHZ],
        "plan": [GHZ],
        "contract": [str(tmp_path / "net.json")],
        "search": [GHZ, "-o", str(tmp_path / "tree.json"), "--budget", "1"],
        "sample": [GHZ, "--shots", "4"],
        "expect": [GHZ, "-O", "ZZIII"],
    }[name]


PROFILED = [p for p, c in COMMANDS if any("--profile" in prm.opts for prm in c.params)]


def test_profiled_commands():
    assert {p[0] for p in PROFILED} == {"amplitude", "plan", "contract", "search", "sample",
                                        "expect"}


@pytest.mark.parametrize("path", PROFILED, ids=[" ".join(p) for p in PROFILED])
@pytest.mark.parametrize("as_json", [False, True])
def test_unknown_profile_is_refused_everywhere(capsys, tmp_path, path, as_json):
    args = [*path, *_profile_args(path[0], tmp_path), "--profile", "nosuch"]
    rc = main(args + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", err
    assert len(err.splitlines()) == 1
    message = json.loads(err)["error"]["message"] if as_json else err
    assert "unknown hardware profile 'nosuch'" in message
    assert "valid: " in message and "local-cpu" in message and "dgx-h100" in message
    assert not (tmp_path / "tree.json").exists()


def test_search_out_is_a_hidden_deprecated_alias(capsys, tmp_path):
    assert main(["search", "-h"]) == 0
    assert "--out " not in capsys.readouterr().out
    rc = main(["search", GHZ, "--profile", "local-cpu", "--out", str(tmp_path / "a.json"),
               "--output", str(tmp_path / "b.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "not both" in err.splitlines()[-1]


def _ghz_with_x(tmp_path: Path) -> str:
    """3 qubits, X on qubit 0 only: Qiskit's bitstring is 001, the natural one 100."""
    path = tmp_path / "x0.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nx q[0];\n')
    return str(path)


def test_sample_order(capsys, tmp_path):
    circuit = _ghz_with_x(tmp_path)
    for order, key in (("qiskit", "001"), ("natural", "100")):
        assert main(["sample", circuit, "--shots", "5", "--order", order, "--json"]) == 0
        obj = json.loads(capsys.readouterr().out)
        assert obj["counts"] == {key: 5} and obj["order"] == order


def test_expect_order_reads_labels_in_that_order(capsys, tmp_path):
    circuit = _ghz_with_x(tmp_path)
    for order, z0, z2 in (("qiskit", "IIZ", "ZII"), ("natural", "ZII", "IIZ")):
        assert main(["expect", circuit, "-O", z0, "-O", z2, "--order", order, "--json"]) == 0
        obj = json.loads(capsys.readouterr().out)
        values = [e["value"] for e in obj["expectations"]]
        assert values == pytest.approx([-1.0, 1.0], abs=1e-6)  # qubit 0 flipped, qubit 2 not
        assert [e["observable"] for e in obj["expectations"]] == [z0, z2]


def test_expect_default_dtype_is_complex64_like_every_command(capsys, tmp_path):
    """complex64 by default, complex128 on request (the values agree to complex64's
    precision)."""
    circuit = str(ROOT / "circuits" / "ghz_n5.qasm")
    got = {}
    for extra in ([], ["--dtype", "complex128"]):
        assert main(["expect", circuit, "-O", "ZZIII", "-O", "XXXXX", "--json", *extra]) == 0
        got[bool(extra)] = [e["value"] for e in json.loads(capsys.readouterr().out)
                            ["expectations"]]
    assert got[False] == pytest.approx([1.0, 1.0], abs=1e-6)
    assert got[True] == pytest.approx([1.0, 1.0], abs=1e-12)


def test_verbose_logs_on_stderr_and_quiet_by_default(capsys, tmp_path, monkeypatch):
    import qsimdist.planner.path_cache as cachemod

    args = ["plan", GHZ, "-b", "0****"]
    assert main(args) == 0
    quiet = capsys.readouterr().err
    assert " INFO " not in quiet and " DEBUG " not in quiet
    monkeypatch.setenv("QSIMDIST_CACHE_DIR", str(tmp_path / "cache"))  # a search, not a hit
    monkeypatch.setattr(cachemod, "_MEMORY_CACHE", {})
    assert main(["-v", *args]) == 0
    err = capsys.readouterr().err
    assert " INFO qsimdist." in err and " DEBUG " not in err
    assert "planning" in err and ("path search finished" in err or "path cache hit" in err)
    assert main(["-vv", *args]) == 0
    assert " DEBUG qsimdist." in capsys.readouterr().err
    assert main(args) == 0  # the handler -v installed is gone again
    assert " INFO " not in capsys.readouterr().err
