"""The exact maximum-likelihood decoding network of a stim detector error model.

A detector error model (DEM) lists independent error mechanisms; mechanism
``j`` happens with probability ``p_j`` and flips a set of detectors and
logical observables. For a syndrome ``s`` (one bit per detector) the joint
probability of the syndrome and an observable outcome ``l`` is

    P(s, l) = sum over error configurations e of prod_j p_j^e_j (1 - p_j)^(1 - e_j)
              * [detector parities of e = s] * [observable parities of e = l],

which is the contraction of this network:

- one index ``e{j}`` (extent 2) per mechanism, carrying a weight tensor
  ``(1 - p_j, p_j)``; every tensor that checks the mechanism shares the index
  (a hyper-index);
- per detector a parity ``q`` of its mechanisms, computed by a chain of
  3-index XOR tensors (so no tensor grows with the detector's degree), and one
  *syndrome tensor* over ``(q, batch)`` whose column ``b`` is the one-hot
  vector of shot ``b``'s syndrome bit. The syndrome is data in those arrays,
  never structure: every syndrome (and every batch of shots) contracts along
  the same plan;
- per observable a parity chain ending in an open index ``L{k}``.

The output indices are ``("batch", L{K-1}, ..., L0)``, so for each shot the
``2**K`` outcomes are laid out with observable ``k`` as bit ``k`` of the
column (observable 0 is the least significant bit, as in Qiskit).

A ``^`` in a DEM line is stim's suggestion of how to decompose that error
into graphlike parts; it is still one mechanism, so its targets are combined
by XOR (a detector named in two parts is not flipped). Mechanisms that flip
the same targets are merged exactly (``p = p1 (1 - p2) + p2 (1 - p1)``), and
mechanisms that flip nothing or have ``p = 0`` are dropped (they sum to 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CircuitParseError, InvalidInputError, MissingDependencyError, shorten
from ..network import Network

#: name of the open batch index (one column per shot of a chunk)
BATCH = "batch"
_XOR3 = np.zeros((2, 2, 2))
for _a in (0, 1):
    for _b in (0, 1):
        _XOR3[_a, _b, _a ^ _b] = 1.0


@dataclass(frozen=True)
class ErrorModel:
    """The independent mechanisms of a DEM, merged and in plain Python form.

    Attributes
    ----------
    num_detectors : int
        Detectors of the model (syndrome length).
    num_observables : int
        Logical observables of the model.
    probabilities : tuple of float
        One probability per mechanism.
    detectors : tuple of tuple of int
        Per mechanism, the sorted detectors it flips.
    observables : tuple of tuple of int
        Per mechanism, the sorted observables it flips.
    meta : dict
        Notes carried with the model, not compared (a marginal model's
        ``"detectors"``: the detectors it keeps).
    """

    num_detectors: int
    num_observables: int
    probabilities: tuple[float, ...]
    detectors: tuple[tuple[int, ...], ...]
    observables: tuple[tuple[int, ...], ...]
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def num_mechanisms(self) -> int:
        return len(self.probabilities)


def _stim():
    try:
        import stim
    except ImportError as exc:
        raise MissingDependencyError(
            f"stim is needed for QEC decoding but is not installed ({exc}); install it with: "
            "pip install stim"
        ) from None
    return stim


def load_dem(source: object, *, decompose: bool = False):
    """A ``stim.DetectorErrorModel`` from a DEM, a circuit, DEM/circuit text file or path.

    Parameters
    ----------
    source : stim.DetectorErrorModel, stim.Circuit, str or os.PathLike
        A detector error model, a circuit, or a path to a ``.dem`` file or a
        ``.stim`` circuit file.
    decompose : bool, default False
        For a circuit, ask stim for its graphlike decomposition (``^`` separators;
        only :func:`observable_sector` reads them), falling back to the
        undecomposed model when stim cannot decompose it. The decoder itself needs
        no decomposition (``^`` parts are XORed).

    Returns
    -------
    stim.DetectorErrorModel

    Raises
    ------
    CircuitParseError
        The file does not parse, or the circuit has no error model.
    InvalidInputError
        The source is of another type or the file is missing.
    """
    stim = _stim()
    if isinstance(source, stim.DetectorErrorModel):
        return source
    if isinstance(source, stim.Circuit):
        return _circuit_dem(source, "the circuit", decompose)
    if isinstance(source, (str, os.PathLike)):
        return _read_file(Path(source), stim, decompose)
    raise InvalidInputError(
        f"cannot decode a {type(source).__name__}; give a stim.DetectorErrorModel, a "
        "stim.Circuit, or the path of a .dem or .stim file"
    )


def _circuit_dem(circuit, where: str, decompose: bool = False):
    if decompose:
        try:
            return circuit.detector_error_model(decompose_errors=True)
        except ValueError:
            pass  # not decomposable into graphlike parts: the plain model below
    try:
        return circuit.detector_error_model(decompose_errors=False)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CircuitParseError(
            f"{where}: stim cannot make a detector error model ({shorten(first, 200)})"
        ) from None


def _read_file(path: Path, stim, decompose: bool = False):
    from .._fileio import read_input_text

    suffix = path.suffix.lower()
    if suffix not in (".dem", ".stim"):
        raise InvalidInputError(
            f"{str(path)!r}: unknown file type {suffix or '(none)'!r}; valid: .dem (detector "
            "error model), .stim (circuit)"
        )
    text = read_input_text(path, "stim" if suffix == ".stim" else "detector error model",
                           CircuitParseError)
    kind = stim.Circuit if suffix == ".stim" else stim.DetectorErrorModel
    try:
        parsed = kind(text)
    except (ValueError, IndexError) as exc:
        lines = str(exc).strip().splitlines()
        first = lines[0] if lines else type(exc).__name__
        raise CircuitParseError(f"{str(path)!r} does not parse: {shorten(first, 200)}") from None
    if suffix == ".stim":
        return _circuit_dem(parsed, repr(str(path)), decompose)
    return parsed


def error_model(dem) -> ErrorModel:
    """The merged mechanisms of ``dem`` (see the module docstring for the rules)."""

    def mechanisms():
        for ins in dem.flattened():
            if ins.type != "error":
                continue  # detector / logical_observable declarations carry no noise
            (p,) = ins.args_copy()
            if not 0.0 <= p <= 1.0:
                raise InvalidInputError(f"error probability {p} is outside [0, 1] in {ins}")
            dets: set[int] = set()
            obs: set[int] = set()
            for t in ins.targets_copy():
                if t.is_separator():
                    continue  # '^' only suggests a decomposition: one mechanism, XOR of parts
                bucket = dets if t.is_relative_detector_id() else obs
                bucket ^= {int(t.val)}
            yield p, tuple(sorted(dets)), tuple(sorted(obs))

    return _merged(int(dem.num_detectors), int(dem.num_observables), mechanisms(), {})


def _merged(num_detectors: int, num_observables: int, mechanisms, meta: dict) -> ErrorModel:
    """An :class:`ErrorModel` of ``(p, detectors, observables)`` triples, those with equal
    targets merged (``p = p1 (1 - p2) + p2 (1 - p1)``), empty or ``p = 0`` ones dropped."""
    merged: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
    for p, dets, obs in mechanisms:
        key = (dets, obs)
        if p == 0.0 or key == ((), ()):
            continue
        q = merged.get(key, 0.0)
        merged[key] = q * (1.0 - p) + p * (1.0 - q)
    keys = list(merged)
    return ErrorModel(
        num_detectors=num_detectors,
        num_observables=num_observables,
        probabilities=tuple(merged[k] for k in keys),
        detectors=tuple(k[0] for k in keys),
        observables=tuple(k[1] for k in keys),
        meta=meta,
    )


def observable_sector(dem) -> tuple[int, ...]:
    """The detectors that share a graphlike component with a logical observable.

    Every ``^``-separated part of a DEM error (or the whole error, for a line
    without separators) joins the detectors it names into one component;
    a part with one detector joins nothing (it ends on the boundary). The
    sector is the union of the components holding a detector of a part that
    also flips an observable.

    For a CSS code's memory experiment with stim's decomposition (``load_dem(...,
    decompose=True)``) this is the detectors of one Pauli type: for
    ``rotated_memory_z``, the Z-stabiliser detectors, which see the X errors that
    flip the Z observable. A matching decoder such as PyMatching predicts the
    observable from these detectors alone (its other components flip no
    observable), so the maximum-likelihood decoder of :func:`marginal_model` over
    this sector is optimal among decoders that read only them.

    A model whose hyperedges are not decomposed (an undecomposable circuit, or a
    DEM written without ``^``) usually joins everything, and the sector is then
    every detector.
    """
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        root = parent.setdefault(a, a)
        while root != parent[root]:
            root = parent[root]
        while parent[a] != root:  # path compression
            parent[a], a = root, parent[a]
        return root

    touching: set[int] = set()
    for ins in dem.flattened():
        if ins.type != "error":
            continue
        parts: list[list] = [[]]
        for t in ins.targets_copy():
            if t.is_separator():
                parts.append([])
            else:
                parts[-1].append(t)
        for part in parts:
            dets = [int(t.val) for t in part if t.is_relative_detector_id()]
            for d in dets:
                parent[find(d)] = find(dets[0])
            if dets and any(t.is_logical_observable_id() for t in part):
                touching.add(dets[0])
    roots = {find(d) for d in touching}
    return tuple(d for d in range(int(dem.num_detectors)) if d in parent and find(d) in roots)


def marginal_model(model: ErrorModel, keep: list[int] | tuple[int, ...]) -> ErrorModel:
    """The model of the detectors ``keep`` alone: every other detector is summed over.

    Summing a detector's syndrome bit over 0 and 1 removes its parity
    constraint, so each mechanism keeps only its detectors in ``keep``
    (renumbered ``0..len(keep)-1`` in the order given), mechanisms left with the
    same targets are merged exactly and those left with none are dropped. The
    decoding network of the result gives ``P(s_keep, l)`` exactly.
    ``meta["detectors"]`` holds ``keep``.
    """
    keep = tuple(int(d) for d in keep)
    if len(set(keep)) != len(keep) or any(not 0 <= d < model.num_detectors for d in keep):
        raise InvalidInputError(
            f"detectors to keep must be distinct ids in 0..{model.num_detectors - 1}"
        )
    where = {d: i for i, d in enumerate(keep)}
    return _merged(
        len(keep), model.num_observables,
        ((p, tuple(sorted(where[d] for d in dets if d in where)), obs)
         for p, dets, obs in zip(model.probabilities, model.detectors, model.observables)),
        {"detectors": keep},
    )


def _parity_chain(
    name: str, members: list[int], inputs: list, arrays: list, size_dict: dict
) -> str | None:
    """Tensors making index ``name`` the XOR of mechanisms ``members``; returns the index
    holding the parity (a mechanism's own index when there is one member, None for none)."""
    if not members:
        return None
    if len(members) == 1:
        return f"e{members[0]}"
    # the chain starts with a copy of the first mechanism, so the running parity, not a
    # mechanism's index, is what stays open while the chain is consumed
    prev = f"{name}.0"
    inputs.append((f"e{members[0]}", prev))
    arrays.append(np.eye(2))
    size_dict[prev] = 2
    for pos, m in enumerate(members[1:], start=1):
        out = name if pos == len(members) - 1 else f"{name}.{pos}"
        inputs.append((prev, f"e{m}", out))
        arrays.append(_XOR3.copy())
        size_dict[out] = 2
        prev = out
    return name


def syndrome_columns(syndromes: np.ndarray) -> list[np.ndarray]:
    """Per detector, the ``(2, shots)`` one-hot array of its bits over the shots."""
    bits = np.asarray(syndromes, dtype=bool)
    cols = []
    for i in range(bits.shape[1]):
        col = np.zeros((2, bits.shape[0]))
        col[1, bits[:, i]] = 1.0
        col[0, ~bits[:, i]] = 1.0
        cols.append(col)
    return cols


def _chain_order(members: list[int], model: ErrorModel) -> list[int]:
    """Mechanisms of one parity chain in :func:`mechanism_order` (the sweep's order, so a
    chain is consumed from its first link to its last)."""
    return sorted(members, key=lambda m: (model.detectors[m], model.observables[m], m))


def build_network(model: ErrorModel, syndromes: np.ndarray | None = None,
                  batch: int | None = None) -> Network:
    """The decoding network of ``model`` for a batch of syndromes.

    Parameters
    ----------
    model : ErrorModel
        The mechanisms (see :func:`error_model`).
    syndromes : numpy.ndarray, optional
        ``(shots, num_detectors)`` bits; ``None`` means all-zero syndromes (the
        structure is the same for every value).
    batch : int, optional
        The extent of the batch index (default: the number of shots, or 1).

    Returns
    -------
    Network
        Output ``("batch", L{K-1}, ..., L0)``, whose value ``[b, l]`` is the joint
        probability ``P(syndrome_b, l)``. Its ``meta["syndrome_tensors"]`` lists,
        per detector, the position of its syndrome tensor (or ``None`` for a
        detector no mechanism flips, whose syndrome tensor is over ``batch``
        alone). A model without detectors gets one tensor of ones over ``batch``,
        so that every shot has the same (unconditioned) probabilities.
    """
    n_det, n_obs = model.num_detectors, model.num_observables
    if syndromes is None:
        syndromes = np.zeros((batch or 1, n_det), dtype=bool)
    syndromes = np.asarray(syndromes, dtype=bool)
    shots = syndromes.shape[0]
    batch = shots if batch is None else batch
    if shots != batch:
        raise InvalidInputError(f"{shots} syndromes given for a batch of {batch}")
    inputs: list[tuple[str, ...]] = []
    arrays: list[np.ndarray] = []
    size_dict: dict[str, int] = {BATCH: batch}
    for j, p in enumerate(model.probabilities):
        inputs.append((f"e{j}",))
        arrays.append(np.array([1.0 - p, p]))
        size_dict[f"e{j}"] = 2
    by_detector: list[list[int]] = [[] for _ in range(n_det)]
    by_observable: list[list[int]] = [[] for _ in range(n_obs)]
    for j, (dets, obs) in enumerate(zip(model.detectors, model.observables)):
        for d in dets:
            by_detector[d].append(j)
        for k in obs:
            by_observable[k].append(j)
    positions: list[int] = []
    cols = syndrome_columns(syndromes)
    for d in range(n_det):
        parity = _parity_chain(f"D{d}", _chain_order(by_detector[d], model), inputs, arrays,
                               size_dict)
        positions.append(len(inputs))
        if parity is None:  # flipped by nothing: a syndrome bit 1 has probability 0
            inputs.append((BATCH,))
            arrays.append(cols[d][0].copy())
        else:
            inputs.append((parity, BATCH))
            arrays.append(cols[d])
    if n_det == 0:  # no syndrome tensor carries the batch index: every shot has one answer
        inputs.append((BATCH,))
        arrays.append(np.ones(batch))
    output = [BATCH]
    for k in reversed(range(n_obs)):
        name = f"L{k}"
        parity = _parity_chain(name, _chain_order(by_observable[k], model), inputs, arrays,
                               size_dict)
        if parity is None:  # never flipped: outcome 0 with certainty
            inputs.append((name,))
            arrays.append(np.array([1.0, 0.0]))
            size_dict[name] = 2
        elif parity != name:  # a single mechanism: copy its value to the open index
            inputs.append((parity, name))
            arrays.append(np.eye(2))
            size_dict[name] = 2
        output.append(name)
    meta = {"syndrome_tensors": positions, "num_detectors": n_det, "num_observables": n_obs}
    return Network(inputs, output, size_dict, arrays, meta)


def mechanism_order(model: ErrorModel) -> list[int]:
    """Mechanisms sorted by the detectors they flip (smallest detector first), then by the
    observables: the order of every parity chain and of :func:`sweep_path`."""
    return sorted(range(model.num_mechanisms),
                  key=lambda m: (model.detectors[m], model.observables[m], m))


def sweep_path(net: Network, model: ErrorModel) -> list[tuple[int, int]]:
    """A linear SSA path for ``net`` (from :func:`build_network`) sweeping the detectors.

    Mechanisms are taken in :func:`mechanism_order`; each one's weight and the
    parity-chain links that read it are contracted into a small block (no batch
    index) that joins the running tensor in one step, and a detector's syndrome
    tensor follows once every mechanism flipping it is in. The open indices of the
    running tensor are then the partial parities of the detectors in progress
    (about one round of detectors for a stim memory circuit, whose detector ids
    grow with time), plus the batch and observable indices. A path search over
    a network with this many hyper-indices is slow and (measured on the d=3
    circuit-level model) finds nothing better.
    """
    n = net.num_tensors
    holding: dict[int, list[int]] = {}
    for t, term in enumerate(net.inputs):
        for ix in term:
            if ix.startswith("e"):
                holding.setdefault(int(ix[1:]), []).append(t)
    syndrome_at = net.meta["syndrome_tensors"]
    done = [False] * n
    groups: list[list[int]] = []

    def emit(group: list[int]) -> None:
        group = [t for t in group if not done[t]]
        for t in group:
            done[t] = True
        if group:
            groups.append(group)

    # tensors that read no mechanism (constant observables, never-flipped detectors) first
    for t, term in enumerate(net.inputs):
        if not any(ix.startswith("e") for ix in term) and t not in syndrome_at:
            emit([t])
    next_detector = 0
    for m in mechanism_order(model):
        first = model.detectors[m][0] if model.detectors[m] else 0
        while next_detector < first:  # every mechanism flipping these is in
            emit([syndrome_at[next_detector]])
            next_detector += 1
        emit(holding.get(m, []))  # the weight and every link reading e{m}: one small block
    for t in syndrome_at[next_detector:]:
        emit([t])
    emit(list(range(n)))  # anything left (nothing, for networks built here)
    path: list[tuple[int, int]] = []
    new = n

    def join(x: int, y: int) -> int:
        nonlocal new
        path.append((x, y))
        new += 1
        return new - 1

    acc = None
    for group in groups:
        node = group[0]
        for t in group[1:]:  # the block is contracted on its own, without the batch index
            node = join(node, t)
        acc = node if acc is None else join(acc, node)
    return path


def with_syndromes(net: Network, syndromes: np.ndarray) -> Network:
    """``net`` (from :func:`build_network`) with its syndrome arrays replaced: same structure."""
    syndromes = np.asarray(syndromes, dtype=bool)
    positions = net.meta["syndrome_tensors"]
    if syndromes.shape != (net.size_dict[BATCH], len(positions)):
        raise InvalidInputError(
            f"syndromes of shape {syndromes.shape} do not fit a network for "
            f"{net.size_dict[BATCH]} shots of {len(positions)} detectors"
        )
    arrays = list(net.arrays)
    for pos, col in zip(positions, syndrome_columns(syndromes)):
        arrays[pos] = col if len(net.inputs[pos]) == 2 else col[0].copy()
    return Network(net.inputs, net.output, dict(net.size_dict), arrays, dict(net.meta))


def decoding_network(dem: object, syndromes: np.ndarray | None = None) -> Network:
    """The exact maximum-likelihood decoding network of ``dem`` for ``syndromes``.

    Parameters
    ----------
    dem : stim.DetectorErrorModel, stim.Circuit, str or os.PathLike
        The error model, a circuit, or the path of a ``.dem`` / ``.stim`` file.
    syndromes : array_like, optional
        ``(shots, num_detectors)`` detector bits (bool or 0/1), or one shot's
        ``(num_detectors,)`` bits; default: one all-zero syndrome.

    Returns
    -------
    Network
        Its contraction, of shape ``(shots, 2, ..., 2)`` over
        ``("batch", L{K-1}, ..., L0)``, holds the joint probabilities
        ``P(syndrome, observable outcome)`` (not normalised).

    Raises
    ------
    InvalidInputError
        Syndromes of the wrong shape or with values other than 0 and 1, a source
        of another type or a missing file.
    CircuitParseError
        A file that does not parse, or a circuit without an error model.
    """
    model = error_model(load_dem(dem))
    if syndromes is not None:
        syndromes = check_syndromes(syndromes, model.num_detectors)
    return build_network(model, syndromes)


def check_syndromes(syndromes: object, num_detectors: int) -> np.ndarray:
    """``syndromes`` as a ``(shots, num_detectors)`` bool array, or a one-line error."""
    arr = np.asarray(syndromes)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise InvalidInputError(
            f"syndromes must be a (shots, {num_detectors}) array of bits, got shape {arr.shape}"
        )
    if arr.shape[1] != num_detectors:
        raise InvalidInputError(
            f"syndromes have {arr.shape[1]} bits per shot but the model has {num_detectors} "
            "detectors"
        )
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.isin(arr, (0, 1)).all():
            raise InvalidInputError("syndrome bits must be 0 or 1 (or booleans)")
        arr = arr.astype(bool)
    return arr
