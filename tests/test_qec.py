"""Exact maximum-likelihood decoding networks (qsimdist.qec) against brute force and PyMatching."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

stim = pytest.importorskip("stim")

from qsimdist.cli import main  # noqa: E402
from qsimdist.errors import CircuitParseError, InvalidInputError  # noqa: E402
from qsimdist.planner import plan as plan_module  # noqa: E402
from qsimdist.qec import decode, decoding_network, predict  # noqa: E402
from qsimdist.qec import decoder as decoder_module  # noqa: E402
from qsimdist.qec.decoder import MLDecoder  # noqa: E402

# (probability, parts); a part is a list of targets, parts are joined by '^' (one mechanism)
TINY = [
    (0.1, [["D0", "L0"]]),
    (0.2, [["D0", "D1"]]),
    (0.05, [["D1"], ["D0", "L1"]]),          # '^': still one mechanism
    (0.15, [["D1", "L0", "L1"]]),
    (0.07, [["D0", "D1"], ["D1", "L0"]]),    # D1 named twice across '^': cancels
    (0.3, [["D1"]]),
    (0.12, [["L1"]]),                         # flips an observable only
    (0.0, [["D0"]]),                          # never happens
    (0.2, [["D0", "D1"]]),                    # same targets as line 2: merged exactly
]


def _dem_text(lines, extra: str = "") -> str:
    return "\n".join(
        f"error({p}) " + " ^ ".join(" ".join(part) for part in parts) for p, parts in lines
    ) + "\n" + extra


def _brute_force(lines, n_det: int, n_obs: int) -> np.ndarray:
    """P(syndrome, outcome) by enumerating every error configuration of the raw lines.

    Rows: syndrome with detector i as bit i of the row number; columns: outcome with
    observable k as bit k.
    """
    flips = []
    for p, parts in lines:
        s = l_ = 0
        for part in parts:
            for t in part:
                if t[0] == "D":
                    s ^= 1 << int(t[1:])
                else:
                    l_ ^= 1 << int(t[1:])
        flips.append((p, s, l_))
    table = np.zeros((1 << n_det, 1 << n_obs))
    for config in itertools.product((0, 1), repeat=len(flips)):
        w, s, l_ = 1.0, 0, 0
        for e, (p, fs, fl) in zip(config, flips):
            w *= p if e else 1.0 - p
            if e:
                s ^= fs
                l_ ^= fl
        table[s, l_] += w
    return table


def _all_syndromes(n_det: int) -> np.ndarray:
    return np.array([[(r >> i) & 1 for i in range(n_det)] for r in range(1 << n_det)], bool)


def test_tiny_dem_equals_brute_force_for_every_syndrome():
    dem = stim.DetectorErrorModel(_dem_text(TINY))
    assert (dem.num_detectors, dem.num_observables) == (2, 2)
    ref = _brute_force(TINY, 2, 2)
    syn = _all_syndromes(2)
    dec = MLDecoder(dem, batch_size=3)  # 4 syndromes: a padded second chunk
    joint = dec.joint_probabilities(syn)
    np.testing.assert_allclose(joint, ref, rtol=1e-10, atol=1e-15)
    cond = decode(dem, syn)
    np.testing.assert_allclose(cond, ref / ref.sum(axis=1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(cond.sum(axis=1), 1.0, rtol=1e-12)
    best = ref.argmax(axis=1)
    want = np.array([[(b >> k) & 1 for k in range(2)] for b in best], np.uint8)
    got = predict(dem, syn)
    assert got.dtype == np.uint8 and got.shape == (4, 2)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_dem_with_long_parity_chains_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_det, n_obs = 4, 2
    lines = []
    for _ in range(13):  # every detector ends up in several mechanisms: real XOR chains
        dets = [f"D{i}" for i in range(n_det) if rng.random() < 0.45]
        obs = [f"L{k}" for k in range(n_obs) if rng.random() < 0.3]
        if not dets and not obs:
            dets = [f"D{rng.integers(n_det)}"]
        parts = [dets + obs] if rng.random() < 0.7 else [dets, obs or ["D0"]]
        lines.append((float(rng.uniform(0.01, 0.4)), [p for p in parts if p]))
    decl = "".join(f"detector D{i}\n" for i in range(n_det)) + "".join(
        f"logical_observable L{k}\n" for k in range(n_obs))
    dem = stim.DetectorErrorModel(_dem_text(lines, decl))
    ref = _brute_force(lines, n_det, n_obs)
    joint = MLDecoder(dem).joint_probabilities(_all_syndromes(n_det))
    np.testing.assert_allclose(joint, ref, rtol=1e-10, atol=1e-15)


def test_search_path_agrees_with_sweep_path():
    dem = stim.DetectorErrorModel(_dem_text(TINY))
    syn = _all_syndromes(2)
    a = MLDecoder(dem, path="sweep").joint_probabilities(syn)
    b = MLDecoder(dem, path="search").joint_probabilities(syn)
    np.testing.assert_allclose(a, b, rtol=1e-10)


def test_impossible_syndrome_gives_nan_and_predicts_no_flip():
    # D2 is declared but no mechanism flips it
    dem = stim.DetectorErrorModel(_dem_text(TINY, "detector D2\n"))
    syn = np.array([[1, 0, 0], [1, 0, 1]], bool)
    probs = decode(dem, syn)
    assert np.isfinite(probs[0]).all() and np.isnan(probs[1]).all()
    np.testing.assert_array_equal(predict(dem, syn)[1], [0, 0])


def test_syndrome_is_data_not_structure_and_one_plan_serves_every_shot(monkeypatch):
    dem = stim.DetectorErrorModel(_dem_text(TINY))
    a = decoding_network(dem, np.array([[0, 1]]))
    b = decoding_network(dem, np.array([[1, 1]]))
    assert a.structure_hash() == b.structure_hash()
    assert any(not np.array_equal(x, y) for x, y in zip(a.arrays, b.arrays))
    calls = []
    real = plan_module.build_plan

    def counting(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(decoder_module, "build_plan", counting)
    monkeypatch.setattr(plan_module, "build_plan", counting)  # fit_to_memory builds through it
    dec = MLDecoder(dem, batch_size=4)
    rng = np.random.default_rng(5)
    for _ in range(3):
        dec.probabilities(rng.integers(0, 2, size=(10, 2)))
    assert len(calls) == 1 and dec.stats["plans"] == 1
    assert dec.stats["contractions"] == 3 * math.ceil(10 / 4) and dec.stats["shots"] == 30


def test_bad_syndromes_and_sources_raise_one_line_errors():
    dem = stim.DetectorErrorModel(_dem_text(TINY))
    with pytest.raises(InvalidInputError, match="2 detectors"):
        decode(dem, np.zeros((3, 5)))
    with pytest.raises(InvalidInputError, match="0 or 1"):
        decode(dem, np.full((1, 2), 2))
    with pytest.raises(InvalidInputError, match="cannot decode"):
        decode(42, np.zeros((1, 2)))
    with pytest.raises(InvalidInputError, match="path"):
        MLDecoder(dem, path="fastest")


def _surface(distance: int, rounds: int, p: float):
    return stim.Circuit.generated(
        "surface_code:rotated_memory_z", distance=distance, rounds=rounds,
        after_clifford_depolarization=p, before_round_data_depolarization=p,
        before_measure_flip_probability=p, after_reset_flip_probability=p)


def test_d3_memory_logical_error_rate_at_most_pymatching():
    pymatching = pytest.importorskip("pymatching")
    circ = _surface(3, 1, 0.02)
    shots = 400
    det, obs = circ.compile_detector_sampler(seed=11).sample(shots, separate_observables=True)
    ml = predict(circ, det)
    matching = pymatching.Matching.from_detector_error_model(
        circ.detector_error_model(decompose_errors=True))
    pm = matching.decode_batch(det)
    ml_fail = (ml != obs).any(axis=1)
    pm_fail = (pm != obs).any(axis=1)
    diff = ml_fail.astype(float) - pm_fail.astype(float)
    sigma = max(diff.std(ddof=1) / math.sqrt(shots), 1.0 / shots)
    assert pm_fail.sum() > 0  # the comparison means something at this p
    assert ml_fail.mean() <= pm_fail.mean() + 3 * sigma


def test_stim_circuit_file_and_dem_file_decode_alike(tmp_path):
    circ = _surface(3, 1, 0.01)
    (tmp_path / "c.stim").write_text(str(circ))
    circ.detector_error_model(decompose_errors=False).to_file(tmp_path / "c.dem")
    det = circ.compile_detector_sampler(seed=2).sample(16)
    a = decode(str(tmp_path / "c.stim"), det)
    b = decode(tmp_path / "c.dem", det)
    np.testing.assert_allclose(a, b, rtol=1e-10)


def test_cli_round_trip_and_errors(tmp_path, capsys):
    import json

    circ = _surface(3, 1, 0.02)
    (tmp_path / "c.stim").write_text(str(circ))
    det = circ.compile_detector_sampler(seed=4).sample(12)
    (tmp_path / "s.01").write_text("".join(
        "".join("1" if b else "0" for b in row) + "\n" for row in det))
    assert main(["decode", str(tmp_path / "c.stim"), "--syndromes", str(tmp_path / "s.01")]) == 0
    out = capsys.readouterr().out.split()
    want = predict(circ, det)
    assert out == ["".join(str(int(b)) for b in row) for row in want]
    assert main(["decode", str(tmp_path / "c.stim"), "--syndromes", str(tmp_path / "s.01"),
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose([s["probabilities"] for s in payload["shots"]],
                               decode(circ, det), rtol=1e-10)

    (tmp_path / "bad.stim").write_text("H 0\nNOT_A_GATE 1\n")
    (tmp_path / "short.01").write_text("0101\n")
    (tmp_path / "chars.01").write_text("01x" + "0" * (circ.num_detectors - 3) + "\n")
    for args in (["bad.stim", "s.01"], ["c.stim", "short.01"], ["c.stim", "chars.01"]):
        rc = main(["decode", str(tmp_path / args[0]), "--syndromes", str(tmp_path / args[1])])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("qsimdist: error:") and err.count("\n") == 1, err
    with pytest.raises(CircuitParseError):
        decode(str(tmp_path / "bad.stim"), det)


def test_chosen_batch_shrinks_to_fit_the_memory_limit():
    dem = stim.DetectorErrorModel(_dem_text(TINY))
    syn = _all_syndromes(2)[[0, 1, 2, 3, 3, 2, 1, 0, 1, 2]]
    one = MLDecoder(dem, batch_size=1)
    ref = one.joint_probabilities(syn)
    dec = MLDecoder(dem, memory_limit=one.stats["peak_bytes"])
    np.testing.assert_allclose(dec.joint_probabilities(syn), ref, rtol=1e-10)
    assert dec.stats["batch_size"] < 10 and dec.stats["peak_bytes"] <= one.stats["peak_bytes"]
    assert dec.stats["plans"] == 1


def test_model_without_observables_gives_one_column():
    dem = stim.DetectorErrorModel("error(0.1) D0\nerror(0.2) D0 D1\n")
    probs = decode(dem, _all_syndromes(2))
    np.testing.assert_allclose(probs, 1.0)
    assert predict(dem, _all_syndromes(2)).shape == (4, 0)


def test_marginal_model_equals_brute_force_summed_over_the_dropped_detectors():
    """Decoding from detectors {0, 2} of a 3-detector model equals the full brute-force table
    summed over detector 1's bit (a random model with hyperedges and '^' parts)."""
    rng = np.random.default_rng(5)
    lines = []
    for _ in range(9):
        targets = [f"D{d}" for d in rng.choice(3, size=rng.integers(1, 4), replace=False)]
        targets += [f"L{k}" for k in range(2) if rng.random() < 0.3]
        cut = int(rng.integers(1, len(targets) + 1))
        parts = [targets[:cut], targets[cut:]] if cut < len(targets) else [targets]
        lines.append((round(float(rng.uniform(0.01, 0.3)), 3), parts))
    dem = stim.DetectorErrorModel(_dem_text(lines))
    table = _brute_force(lines, 3, 2)  # rows: detector i is bit i
    marginal = np.zeros((4, 4))
    for row in range(8):
        marginal[(row & 1) | ((row >> 2) & 1) << 1] += table[row]
    full_syn = _all_syndromes(3)
    dec = MLDecoder(dem, detectors=[0, 2])
    joint = dec.joint_probabilities(full_syn)  # detector 1's bit is read and ignored
    for row in range(8):
        np.testing.assert_allclose(joint[row], marginal[(row & 1) | ((row >> 2) & 1) << 1],
                                   rtol=1e-10, atol=1e-15)
    assert dec.stats["detectors_read"] == 2 and dec.num_detectors == 3


def test_observable_sector_is_what_pymatching_reads_and_ml_on_it_is_no_worse():
    """On circuit-level rotated_memory_z (d=3) the sector is the 16 Z-type detectors; PyMatching's
    predictions do not change when every other detector is zeroed; sector ML, exact ML given
    those detectors, fails no more often than PyMatching within sampling error."""
    pymatching = pytest.importorskip("pymatching")
    from qsimdist.qec.network import observable_sector

    circ = _surface(3, 3, 0.01)
    keep = observable_sector(circ.detector_error_model(decompose_errors=True))
    coords = circ.get_detector_coordinates()
    # Z-type detectors: stim places them where the first round has a detector
    first_round = {tuple(coords[d][:2]) for d in coords if coords[d][2] == 0}
    assert set(keep) == {d for d in coords if tuple(coords[d][:2]) in first_round}
    assert len(keep) == 16 and circ.num_detectors == 24
    # without a decomposition the Y errors join both types: the sector is everything
    undecomposed = observable_sector(circ.detector_error_model(decompose_errors=False))
    assert undecomposed == tuple(range(24))

    shots = 2000
    det, obs = circ.compile_detector_sampler(seed=3).sample(shots, separate_observables=True)
    matching = pymatching.Matching.from_detector_error_model(
        circ.detector_error_model(decompose_errors=True))
    pm = matching.decode_batch(det)
    masked = np.zeros_like(det)
    masked[:, list(keep)] = det[:, list(keep)]
    np.testing.assert_array_equal(matching.decode_batch(masked), pm)
    dec = MLDecoder(circ, detectors="observables")
    assert dec.kept == keep
    ml = dec.predict(det)
    ml_fail = (ml != obs).any(axis=1)
    pm_fail = (pm != obs).any(axis=1)
    diff = ml_fail.astype(float) - pm_fail.astype(float)
    sigma = max(diff.std(ddof=1) / math.sqrt(shots), 1.0 / shots)
    assert pm_fail.sum() > 5
    assert ml_fail.mean() <= pm_fail.mean() + 3 * sigma
    # exact, not approximate: the sector decoder's probabilities equal the full decoder's
    # joint probabilities summed over the other detectors' bits, on a few shots
    full = MLDecoder(circ, batch_size=1)
    others = [d for d in range(24) if d not in keep]
    for shot in det[:2]:
        total = np.zeros(2)
        for bits in itertools.product((0, 1), repeat=len(others)):
            syn = shot.copy()
            syn[others] = bits
            total += full.joint_probabilities(syn)[0]
        np.testing.assert_allclose(dec.joint_probabilities(shot)[0], total, rtol=1e-9)


def test_bad_detector_selections_raise_one_line_errors(tmp_path, capsys):
    dem = stim.DetectorErrorModel(_dem_text(TINY))
    for bad in ("some", 3, [0, 0], [0, 5], ["a"], [True]):
        with pytest.raises(InvalidInputError):
            MLDecoder(dem, detectors=bad)
    circ = _surface(3, 3, 0.02)  # 24 detectors, 16 in the sector
    (tmp_path / "c.stim").write_text(str(circ))
    (tmp_path / "s.01").write_text("0" * circ.num_detectors + "\n")
    rc = main(["decode", str(tmp_path / "c.stim"), "--syndromes", str(tmp_path / "s.01"),
               "--detectors", "few"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "observables" in err
    assert main(["decode", str(tmp_path / "c.stim"), "--syndromes", str(tmp_path / "s.01"),
                 "--detectors", "observables", "--json"]) == 0
    import json

    payload = json.loads(capsys.readouterr().out)
    assert payload["shots"][0]["prediction"] == "0" and len(payload["detectors_read"]) == 16


# ---------------------------------------------------------------- no detectors
NO_DETECTORS = [
    [(0.1, [["L0"]])],                                  # the model
    [(0.7, [["L0"]])],                                  # p > 0.5: a flip is more likely
    [(0.3, [["L0"]]), (0.6, [["L0"]])],                 # merged: 0.3*0.4 + 0.6*0.7 = 0.54
    [(0.1, [["L0", "L1"]]), (0.2, [["L1"]]), (0.45, [["L0"]])],
]


@pytest.mark.parametrize("lines", NO_DETECTORS)
def test_model_without_detectors_equals_brute_force(lines):
    dem = stim.DetectorErrorModel(_dem_text(lines))
    n_obs = dem.num_observables
    assert dem.num_detectors == 0
    ref = _brute_force(lines, 0, n_obs)[0]  # one syndrome: the empty one
    shots = np.zeros((3, 0), bool)
    probs = decode(dem, shots)
    assert probs.shape == (3, 1 << n_obs)
    np.testing.assert_allclose(probs, np.tile(ref / ref.sum(), (3, 1)), rtol=1e-12, atol=0)
    best = int(np.argmax(ref))
    want = [(best >> k) & 1 for k in range(n_obs)]
    assert predict(dem, shots).tolist() == [want] * 3
    assert decode(dem, np.zeros(0, bool)).shape == (1, 1 << n_obs)  # one shot, no bits
    np.testing.assert_allclose(decode(dem, shots, path="search"), probs, rtol=1e-12, atol=0)


def test_model_without_detectors_predictions_follow_the_probability():
    assert predict(stim.DetectorErrorModel("error(0.1) L0"), np.zeros((2, 0))).tolist() == [[0]] * 2
    assert predict(stim.DetectorErrorModel("error(0.9) L0"), np.zeros((2, 0))).tolist() == [[1]] * 2
    # nothing at all: one certain outcome, no observable bits
    empty = stim.DetectorErrorModel("")
    np.testing.assert_array_equal(decode(empty, np.zeros((2, 0))), [[1.0], [1.0]])
    assert predict(empty, np.zeros((2, 0))).shape == (2, 0)


def test_decoder_memory_words_and_backend_are_the_engines():
    """'none' means no planning limit (bounded by the host), as everywhere; a bad backend
    is refused when the decoder is made, before any network is built."""
    import stim

    from qsimdist.errors import InvalidInputError

    circuit = stim.Circuit.generated("repetition_code:memory", distance=3, rounds=2,
                                     after_clifford_depolarization=0.01)
    dem = circuit.detector_error_model()
    dec = MLDecoder(dem, memory_limit="none")
    assert dec.memory_limit is None and dec.budget.bound is not None
    dec.probabilities(np.zeros((2, dem.num_detectors), dtype=np.uint8))
    with pytest.raises(InvalidInputError, match="valid: numpy, cupy"):
        MLDecoder(dem, backend="torch")
    assert MLDecoder(dem).memory_limit == 1 << 30  # the decoder's documented default
