"""Tampered v3 plans are refused in one line, whatever field was changed.

A distributed plan (rqc_4x5_m12 for 2 ranks, with all-to-alls) is saved with
the bundled ``local-cpu`` profile and with a custom profile from a ``.toml``
file that is then deleted, so the custom plan must be checked from what it
carries. Each field the executor, ``--trace`` and ``calibrate`` read is
changed in its own copy; loading it must raise :class:`PlanFormatError`, and
``qsimdist run`` must print one line and exit 2.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

import qsimdist
from qsimdist.cli import main
from qsimdist.engine.coordination import distribute
from qsimdist.errors import PlanFormatError
from qsimdist.hardware import load_profile
from qsimdist.hardware.profiles import save_profile
from qsimdist.planner.plan import Plan

ROOT = Path(__file__).resolve().parent.parent
BITS = "01010101010101010101"


def _first_alltoall(d: dict) -> dict:
    for rec in d["distribution"]["steps"]:
        for c in rec["pre"]:
            if c["kind"] == "alltoall":
                return c
    raise AssertionError("the plan has no all-to-all to tamper with")


def _sharded_step(d: dict) -> dict:
    return next(r for r in d["distribution"]["steps"] if r["compute_bits"])


def _bump(obj: dict, key: str, by=1):
    obj[key] = obj[key] + by if not isinstance(obj[key], float) else obj[key] * 2 + 1.0


TAMPERS = {
    "alltoall send bytes": lambda d: _bump(_first_alltoall(d), "send_bytes", 8),
    "alltoall recv bytes": lambda d: _bump(_first_alltoall(d), "recv_bytes", 8),
    "alltoall buffer bytes": lambda d: _bump(_first_alltoall(d), "buffer_bytes", -8),
    "alltoall messages": lambda d: _bump(_first_alltoall(d), "messages", 1),
    "alltoall target bit": lambda d: _first_alltoall(d)["to_bits"][0].__setitem__(1, 5),
    "compute bits": lambda d: _sharded_step(d)["compute_bits"].clear(),
    "n_slices": lambda d: _bump(d["distribution"], "n_slices", 1),
    "sliced indices": lambda d: d["distribution"]["sliced"].pop(),
    "step FLOPs per device": lambda d: _bump(_sharded_step(d), "flops_per_device"),
    "predicted FLOPs per device": lambda d: _bump(d["distribution"]["predicted"],
                                                  "flops_per_device"),
    "usable memory": lambda d: _bump(d["distribution"], "usable_memory", 1 << 20),
    "step live bytes": lambda d: _bump(_sharded_step(d), "live_bytes", -16),
    "predicted peak": lambda d: _bump(d["distribution"]["predicted"], "peak_bytes_per_device",
                                      -16),
    "devices": lambda d: _bump(d["distribution"], "devices", 2),
    "predicted comm bytes": lambda d: _bump(d["distribution"]["predicted"],
                                            "comm_bytes_per_device"),
    "profile memory": lambda d: _bump(d["distribution"]["profile_spec"], "memory_bytes", 1 << 20),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("plans")
    base = qsimdist.plan(str(ROOT / "circuits" / "rqc_4x5_m12.qasm"), bitstrings=BITS,
                         memory_limit="none")
    for log2_memory in range(20, 13, -1):  # the roomiest memory whose schedule redistributes
        bundled = dataclasses.replace(load_profile("local-cpu"), memory_bytes=1 << log2_memory,
                                      usable_memory_fraction=1.0)
        if distribute(base, bundled, 2).schedule.predicted.n_redistributions > 0:
            break
    custom = dataclasses.replace(bundled, name="my-cluster-node")
    toml = save_profile(custom, tmp / "my-cluster-node.toml")
    custom = load_profile(str(toml))
    plans = {}
    for label, prof in (("bundled", bundled), ("custom", custom)):
        p = distribute(base, prof, 2)
        assert p.schedule.predicted.n_redistributions > 0
        plans[label] = p.to_dict()
    Path(toml).unlink()  # the custom plan must be checked without its profile file
    return plans


@pytest.mark.parametrize("label", ["bundled", "custom"])
def test_untampered_plans_load(saved, label):
    p = Plan.from_dict(copy.deepcopy(saved[label]), "plan.json")
    assert p.schedule.devices == 2 and p.schedule.predicted.n_redistributions > 0


@pytest.mark.parametrize("label", ["bundled", "custom"])
@pytest.mark.parametrize("field", sorted(TAMPERS))
def test_tampered_plan_refused(saved, label, field):
    d = copy.deepcopy(saved[label])
    TAMPERS[field](d)
    with pytest.raises(PlanFormatError) as info:
        Plan.from_dict(d, "plan.json")
    message = str(info.value)
    assert "\n" not in message and message.startswith("plan.json"), message


@pytest.mark.parametrize("field", ["alltoall send bytes", "usable memory", "devices"])
def test_cli_refuses_tampered_plan_in_one_line(saved, field, tmp_path, capsys):
    d = copy.deepcopy(saved["custom"])
    TAMPERS[field](d)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("qsimdist: error:"), err
