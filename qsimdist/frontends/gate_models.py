"""A parametrised gate as numbers: its parameters read off the parameter columns
(:class:`ParameterReader`) and a standard gate's matrix as a trigonometric polynomial of
its angles (:class:`MatrixModel`, fitted once per gate class from Qiskit's own
matrices). The templates of :mod:`qsimdist.frontends.parametric` fill their slots with
them. Qiskit is imported only inside functions."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

#: matrix entries a template's gates may differ from the whole conversion's by
TEMPLATE_TOLERANCE = 1e-12
#: most parameters of one standard gate whose matrix is fitted (5^k coefficients each)
MAX_FITTED_PARAMETERS = 3


# ----------------------------------------------------------------- gate parameters
class ParameterReader:
    """One gate parameter (or a global phase) as a function of the parameter columns.

    ``kind``: ``constant``, ``affine`` (``offset + rows @ coefficients`` over
    ``columns``) or ``expression`` (Qiskit evaluates it per parameter set).
    """

    def __init__(self, value, column: dict) -> None:
        from qiskit.circuit import Parameter, ParameterExpression

        self.expression = None
        self.offset = 0.0
        self.columns: list[int] = []
        self.coefficients = np.zeros(0)
        if not isinstance(value, ParameterExpression) or not value.parameters:
            self.kind = "constant"
            self.offset = _real(value)
            return
        params = list(value.parameters)
        if isinstance(value, Parameter):
            self.kind, self.columns, self.coefficients = "affine", [column[value]], np.ones(1)
            return
        self.columns = [column[p] for p in params]
        try:
            coefficients = [_real(value.gradient(p)) for p in params]
            offset = _real(value.bind({p: 0.0 for p in params}))
        except (TypeError, ValueError):  # a gradient that still holds parameters
            self.kind, self.expression, self.params = "expression", value, params
            return
        self.kind, self.offset = "affine", offset
        self.coefficients = np.array(coefficients, dtype=float)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """The parameter's value for each row of ``rows`` (parameter sets x columns)."""
        if self.kind == "constant":
            return np.full(len(rows), self.offset)
        if self.kind == "affine":
            if len(self.columns) == 1 and self.coefficients[0] == 1.0 and self.offset == 0.0:
                return rows[:, self.columns[0]].astype(float, copy=True)
            return self.offset + rows[:, self.columns] @ self.coefficients
        out = np.empty(len(rows))
        for i, row in enumerate(rows):
            bound = self.expression.bind({p: float(row[c])
                                          for p, c in zip(self.params, self.columns)})
            try:
                out[i] = _real(bound)
            except (TypeError, ValueError):
                out[i] = math.nan  # a complex value: that set is converted whole
        return out


def _real(value) -> float:
    """A real number from a number or a bound Qiskit expression; ``ValueError`` otherwise."""
    if not isinstance(value, numbers.Number):
        if getattr(value, "parameters", None):
            raise ValueError("unbound")
        value = value.numeric() if hasattr(value, "numeric") else complex(value)
    z = complex(value)
    if z.imag != 0.0:
        raise ValueError("complex")
    return float(z.real)


# ------------------------------------------------------------- gate matrices
def _basis(x: np.ndarray) -> np.ndarray:
    """``1, cos(x/2), sin(x/2), cos x, sin x`` for each value of ``x`` (shape ``(..., 5)``)."""
    out = np.empty(x.shape + (5,))
    half = x / 2
    out[..., 0] = 1.0
    np.cos(half, out=out[..., 1])
    np.sin(half, out=out[..., 2])
    np.cos(x, out=out[..., 3])
    np.sin(x, out=out[..., 4])
    return out


class MatrixModel:
    """A standard gate's matrix as a trigonometric polynomial of its angles.

    Every parametrised standard gate of Qiskit (rotations, phases, ``u``, their
    controlled forms) has entries that are sums of products, over its parameters, of
    ``1, cos(x/2), sin(x/2), cos x, sin x``. The coefficients are fitted from Qiskit's
    own matrices on a grid of angles and checked at other angles; a gate whose fit is
    not exact there has no model (:func:`matrix_model` returns ``None``).
    """

    def __init__(self, coefficients: np.ndarray, dim: int, params: int) -> None:
        self.coefficients = coefficients  # (5^params, dim * dim)
        self.dim = dim
        self.params = params
        off = np.ones((dim, dim), dtype=bool)
        np.fill_diagonal(off, False)
        #: whether the matrix is diagonal at every angle
        self.diagonal = not np.any(coefficients[:, off.reshape(-1)])

    def design(self, values: np.ndarray) -> np.ndarray:
        """The basis products for ``values`` (parameter sets x parameters)."""
        if self.params == 1:
            return _basis(values[:, 0])
        rows = np.ones((len(values), 1))
        for j in range(self.params):
            b = _basis(values[:, j])
            rows = (rows[:, :, None] * b[:, None, :]).reshape(len(values), -1)
        return rows

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """The matrices for ``values`` (parameter sets x parameters): ``(sets, d, d)``."""
        out = self.design(values) @ self.coefficients
        return out.reshape(len(values), self.dim, self.dim)


_MODELS: dict[tuple, MatrixModel | None] = {}


def numeric_matrix(op, values: Sequence[float]) -> np.ndarray:
    """Qiskit's matrix of the standard gate ``op`` with numeric parameters ``values``."""
    gate = op.to_mutable()
    gate.params = [float(v) for v in values]
    return np.asarray(gate.to_matrix(), dtype=complex)


def matrix_model(op) -> MatrixModel | None:
    """The :class:`MatrixModel` of the standard gate ``op`` (its class, name and control
    state), fitted once per process; ``None`` where the gate has more than
    :data:`MAX_FITTED_PARAMETERS` parameters or the fit is not exact."""
    key = (type(op), op.name, op.num_qubits, len(op.params), getattr(op, "ctrl_state", None))
    if key in _MODELS:
        return _MODELS[key]
    model = None
    p = len(op.params)
    if 1 <= p <= MAX_FITTED_PARAMETERS:
        try:
            model = _fit(op, p)
        except Exception:  # noqa: BLE001 - a gate Qiskit cannot rebuild with numbers
            model = None
    _MODELS[key] = model
    return model


#: angles the fit samples each parameter at: ``4 pi j / 8``, on which the basis functions
#: (frequencies 0, 1/2 and 1 in the angle) are orthogonal, so each coefficient is an
#: average (a discrete Fourier projection) with no system to solve
_FIT_POINTS = 8


def _fit(op, p: int) -> MatrixModel | None:
    grid = 4 * np.pi * np.arange(_FIT_POINTS) / _FIT_POINTS
    points = np.stack(np.meshgrid(*([grid] * p), indexing="ij"), axis=-1).reshape(-1, p)
    dim = 1 << op.num_qubits
    samples = np.stack([numeric_matrix(op, v).reshape(-1) for v in points])
    probe = MatrixModel(np.zeros((5**p, dim * dim), dtype=complex), dim, p)
    design = probe.design(points)  # orthogonal columns: cos/sin columns have norm^2 N/2
    norms = np.einsum("ij,ij->j", design, design)
    coefficients = (design.T @ samples) / norms[:, None]
    coefficients.real[np.abs(coefficients.real) < 1e-14] = 0.0
    coefficients.imag[np.abs(coefficients.imag) < 1e-14] = 0.0
    model = MatrixModel(coefficients, dim, p)
    checks = np.array([[-2.3, 0.9, 7.1][:p], [0.11, -4.4, 2.2][:p], [3.3, 6.0, -0.7][:p]])
    for v in checks:
        if not np.allclose(model(v[None, :])[0], numeric_matrix(op, v), rtol=0,
                           atol=TEMPLATE_TOLERANCE / 100):
            return None
    return model
