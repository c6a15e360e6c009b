"""``qsimdist decode``: exact maximum-likelihood decoding of syndromes from a file.

The syndrome file is stim's ``01`` format with detectors only: one shot per
line, character ``i`` is detector ``i`` (what ``stim sample_dem --out_format 01``
writes to ``--out`` while ``--obs_out`` takes the observables, or
``sampler.sample(shots, separate_observables=True)``'s first array). Blank
lines and text after ``#`` are skipped.

Text output is one line per shot in the same ``01`` format: character ``k``
is the predicted flip of observable ``k``. ``--json`` adds, per shot, the
probability of every outcome given the syndrome (column ``l`` has observable
``k`` as bit ``k`` of ``l``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from ..errors import InvalidInputError
from .common import JsonOpt

logger = logging.getLogger(__name__)


def read_syndromes(path: Path, num_detectors: int):
    """The ``(shots, num_detectors)`` bool array in a ``01`` text file, or one-line errors."""
    import numpy as np

    from .._fileio import read_input_text

    text = read_input_text(path, "syndromes", InvalidInputError)
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        bad = set(line) - {"0", "1"}
        if bad:
            raise InvalidInputError(
                f"{path}: line {number} has characters other than 0 and 1 "
                f"({', '.join(repr(c) for c in sorted(bad)[:5])}); write one shot per line in "
                "stim's 01 format"
            )
        if len(line) != num_detectors:
            raise InvalidInputError(
                f"{path}: line {number} has {len(line)} bits but the model has {num_detectors} "
                "detectors (give detector bits only, observables apart)"
            )
        rows.append(np.frombuffer(line.encode("ascii"), dtype=np.uint8) == ord("1"))
    if not rows:
        return np.zeros((0, num_detectors), dtype=bool)
    return np.stack(rows)


def decode(
    model_file: Path = typer.Argument(
        ..., help="Detector error model (.dem) or stim circuit (.stim)."
    ),
    syndromes: Path = typer.Option(
        ..., "--syndromes", help="Detector bits in stim's 01 format, one shot per line."
    ),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", help="Shots per contraction (default: up to 128, to fit 1 GiB)."
    ),
    detectors: str = typer.Option(
        "all", "--detectors",
        help="Detectors to decode from: 'all' (exact maximum likelihood given the whole "
             "syndrome) or 'observables' (the observables' graphlike sector, the others summed "
             "over: exact given those, and far cheaper on circuit-level models).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Maximum-likelihood logical-observable flips for each syndrome in --syndromes.

    Prints one line per shot (character k = observable k, stim's 01 format);
    --json adds every outcome's probability given the syndrome.
    """
    import numpy as np

    from ..qec.decoder import MLDecoder, outcome_bits

    if batch_size is not None and batch_size < 1:
        raise InvalidInputError(f"--batch-size must be >= 1, got {batch_size}")
    decoder = MLDecoder(str(model_file), batch_size=batch_size, detectors=detectors)
    bits = read_syndromes(syndromes, decoder.num_detectors)
    logger.info("decoding %d shot(s): %d detector(s), %d observable(s)", bits.shape[0],
                decoder.num_detectors, decoder.num_observables)
    probs = decoder.probabilities(bits)
    pred = outcome_bits(probs, decoder.num_observables)
    lines = ["".join("1" if b else "0" for b in row) for row in pred.tolist()]
    if not as_json:
        if lines:
            typer.echo("\n".join(lines))
        return
    payload = {
        "num_detectors": decoder.num_detectors,
        "detectors_read": list(decoder.kept) if decoder.kept is not None else "all",
        "num_observables": decoder.num_observables,
        "columns": "column l of 'probabilities' has observable k's flip as bit k of l",
        "shots": [
            {"prediction": line,
             "probabilities": [None if np.isnan(x) else float(x) for x in row]}
            for line, row in zip(lines, probs.tolist())
        ],
        "stats": decoder.stats,
    }
    typer.echo(json.dumps(payload))
