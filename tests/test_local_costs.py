"""``qsimdist calibrate --local-costs``: the single-device kernel prices fitted on this
machine, written to a file, and used by the planner where ``$QSIMDIST_LOCAL_COSTS`` names it."""

from __future__ import annotations

import dataclasses
import math

import pytest

from qsimdist.errors import ProfileError
from qsimdist.hardware import costs
from qsimdist.hardware import local_costs as lc
from qsimdist.hardware.calibrate import _efficiency, _half_for, measure_local_costs

#: a step (b a k) x (k b c) -> (a b c): by default the compiled loop of small GEMMs
STEP = (("b", "a", "k"), ("k", "b", "c"), ("a", "b", "c"))


def _kernel():
    from qsimdist.planner.lifetime import gemm_step

    la, lb, lc = STEP
    return gemm_step(0, 1, 2, la, lb, lc, {c: 4 for c in "abck"}, 8).kernel


def test_the_fit_measures_every_fitted_field_and_keeps_the_others():
    fitted = measure_local_costs(quick=True)
    for name in costs.FITTED_LOCAL_FIELDS:
        value = getattr(fitted, name)
        assert math.isfinite(value) and value > 0, (name, value)
    assert 1e-13 < fitted.flop < 1e-8  # between 100 TFLOP/s and 100 MFLOP/s per core set
    assert 1e-12 < fitted.copy_byte < 1e-7
    for field in dataclasses.fields(costs.LocalCosts):
        if field.name not in costs.FITTED_LOCAL_FIELDS:
            assert getattr(fitted, field.name) == getattr(costs.DEFAULT_COSTS, field.name)


def test_the_half_point_inverts_the_efficiency_model():
    for h in (0.5, 3.0, 16.0, 200.0):
        for shape in ((4, 256, 64), (16, 512, 8)):
            assert _half_for(_efficiency(h, *shape), *shape) == pytest.approx(h, rel=1e-6)


def test_a_saved_fit_loads_back_and_prices_the_planner(tmp_path, monkeypatch):
    monkeypatch.delenv(costs.LOCAL_COSTS_VARIABLE, raising=False)
    assert lc.local_costs() is costs.DEFAULT_COSTS
    assert _kernel() == "broadcast"
    # a machine where BLAS calls and the compiled loop are dear and permutations free
    odd = dataclasses.replace(costs.DEFAULT_COSTS, call=1.0, permute_byte=1e-15)
    path = tmp_path / "local.toml"
    lc.save_local_costs(odd, path, source="a test")
    text = path.read_text()
    assert "[local_costs]" in text and "a test" in text
    loaded = lc.load_local_costs(path)
    for name in costs.FITTED_LOCAL_FIELDS:
        assert getattr(loaded, name) == getattr(odd, name)
    with open(path, "a") as fh:
        fh.write("loop_setup = 100.0\ntiled_setup = 100.0\n")
    monkeypatch.setenv(costs.LOCAL_COSTS_VARIABLE, str(path))
    assert lc.local_costs().call == 1.0
    assert _kernel() == "transpose"  # the planner priced its kernels with the file


@pytest.mark.parametrize("text,message", [
    ("[local_costs]\ncall = -1\n", "call must be a positive finite number"),
    ("[local_costs]\nwarp = 2.0\n", "unknown field 'warp'; valid: call, flop"),
    ("call = 1e-7\n", "has no \\[local_costs\\] table"),
    ("[local_costs\n", "is not valid TOML"),
])
def test_a_bad_local_costs_file_is_refused_in_one_line(tmp_path, monkeypatch, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    monkeypatch.setenv(costs.LOCAL_COSTS_VARIABLE, str(path))
    with pytest.raises(ProfileError, match=message) as info:
        lc.local_costs()
    assert "\n" not in str(info.value)


def test_a_missing_local_costs_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(costs.LOCAL_COSTS_VARIABLE, str(tmp_path / "none.toml"))
    with pytest.raises(ProfileError, match="cannot read it"):
        lc.local_costs()


def test_the_cli_writes_the_fit(tmp_path, capsys):
    from qsimdist.cli import main

    path = tmp_path / "mine.toml"
    assert main(["calibrate", "--local-costs", str(path), "--quick"]) == 0
    out, _ = capsys.readouterr()
    assert "QSIMDIST_LOCAL_COSTS" in out
    assert lc.load_local_costs(path).flop > 0
    for args, words in ((["--local-costs", str(tmp_path / "x.txt")], "must end in .toml"),
                        ([], "needs --output FILE.toml")):
        assert main(["calibrate", *args]) == 2
        _, err = capsys.readouterr()
        assert len(err.splitlines()) == 1 and words in err, err
