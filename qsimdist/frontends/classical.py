"""Classical conditions of dynamic circuits: Qiskit's ``(clbit or register, value)`` pairs
and classical expressions (``qiskit.circuit.classical.expr``), read and evaluated.

:func:`expression_truth` evaluates an expression on every value of the classical
wires it reads at once (numpy arrays, one entry per assignment); the walker of
:mod:`qsimdist.frontends.dynamic` turns the table into controls or a flag wire.
Qiskit is imported inside the functions only.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedInstructionError, shorten

#: the classical-expression nodes a condition may use (``qiskit.circuit.classical.expr``)
SUPPORTED_EXPRESSIONS = (
    "Var (a clbit or a classical register), Value (bool or uint), Unary (bit_not, "
    "logic_not), Binary (bit_and, bit_or, bit_xor, logic_and, logic_or, equal, not_equal, "
    "less, less_equal, greater, greater_equal, shift_left, shift_right), Cast (to bool or "
    "uint), Index (a bit of a register)")
#: the most measured qubits one expression condition may read (it is evaluated on every
#: combination of their values)
MAX_EXPRESSION_QUBITS = 16


def simple_equality(condition):
    """``(clbit or register, value)`` for ``expr.equal(clbit or register, value)`` (either
    way round) or a bare clbit (``(clbit, True)``), else ``None``."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    if isinstance(condition, expr.Var) and isinstance(condition.var, Clbit):
        return condition.var, True
    if not (isinstance(condition, expr.Binary) and condition.op is expr.Binary.Op.EQUAL):
        return None
    for var, value in ((condition.left, condition.right), (condition.right, condition.left)):
        if (isinstance(var, expr.Var) and isinstance(var.var, (Clbit, ClassicalRegister))
                and isinstance(value, expr.Value)):
            return var.var, value.value
    return None


def _unsupported_node(node, where: str) -> UnsupportedInstructionError:
    op = getattr(node, "op", None)
    name = type(node).__name__ + (f".{op.name}" if op is not None else "")
    return UnsupportedInstructionError(
        f"the condition of {where} uses the classical expression node {name} "
        f"({shorten(str(node), 120)}), which is not supported; supported: "
        f"{SUPPORTED_EXPRESSIONS}"
    )


def expression_bits(condition, where: str = "a condition") -> list:
    """The clbits a classical expression reads, in first-use order."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    bits: dict = {}
    for var in expr.iter_vars(condition):
        target = var.var
        if isinstance(target, Clbit):
            bits.setdefault(target, None)
        elif isinstance(target, ClassicalRegister):
            for bit in target:
                bits.setdefault(bit, None)
        else:
            raise _unsupported_node(var, where)
    return list(bits)


def expression_truth(condition, bits: list, sources: list, wires: list[int],
                     where: str) -> list[bool]:
    """The value of a classical expression for every assignment ``a`` of ``wires``
    (wire ``wires[i]`` holds bit ``i`` of ``a``); clbit ``bits[j]`` reads the wire
    ``sources[j]`` (``None``: never written, reads 0).

    The expression is evaluated once on arrays holding every assignment (one entry
    per ``a``); one whose integers may pass 62 bits is evaluated per assignment on
    Python integers instead.

    Raises:
        UnsupportedInstructionError: a node outside :data:`SUPPORTED_EXPRESSIONS`.
    """
    position = {w: i for i, w in enumerate(wires)}
    count = 1 << len(wires)
    if _widest(condition) <= _ARRAY_BITS:
        a = np.arange(count, dtype=np.int64)
        zero = np.zeros(count, dtype=np.int64)
        value_of = {bit: zero if w is None else (a >> position[w]) & 1
                    for bit, w in zip(bits, sources)}
        value = _evaluate(condition, value_of, where)
        return np.broadcast_to(np.asarray(value) != 0, (count,)).tolist()
    out = []
    for a in range(count):
        value_of = {bit: 0 if w is None else a >> position[w] & 1
                    for bit, w in zip(bits, sources)}
        out.append(bool(_evaluate(condition, value_of, where)))
    return out


#: integer widths evaluated on int64 arrays (wider ones on Python integers)
_ARRAY_BITS = 62


def _widest(node) -> int:
    """The most bits any integer of a classical expression may hold (its registers and
    unsigned types)."""
    from qiskit.circuit import ClassicalRegister
    from qiskit.circuit.classical import expr, types

    widest = 1
    stack = [node]
    while stack:
        x = stack.pop()
        ty = getattr(x, "type", None)
        if isinstance(ty, types.Uint):
            widest = max(widest, ty.width)
        if isinstance(x, expr.Var) and isinstance(x.var, ClassicalRegister):
            widest = max(widest, len(x.var))
        for name in ("operand", "left", "right", "target", "index"):
            child = getattr(x, name, None)
            if isinstance(child, expr.Expr):
                stack.append(child)
    return widest


def _truth(x):
    """``x`` as a truth value: a bool, or a bool array entry by entry."""
    return np.asarray(x) != 0 if isinstance(x, np.ndarray) else bool(x)


def _integer(x):
    """``x`` as an integer: an int, or an int64 array entry by entry."""
    return x.astype(np.int64) if isinstance(x, np.ndarray) else int(x)


def _evaluate(node, value_of: dict, where: str):
    """A classical expression's value (a truth value, or an integer for a uint) with the
    clbits' values; each value is a scalar or an array of them, entry by entry (numpy's
    operators and logical functions act alike on both)."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr, types

    def width_mask(ty) -> int | None:
        if isinstance(ty, types.Uint):
            return (1 << ty.width) - 1
        if isinstance(ty, types.Bool):
            return None
        raise _unsupported_node(node, where)

    if isinstance(node, expr.Var):
        target = node.var
        if isinstance(target, Clbit):
            return _truth(value_of[target])
        if isinstance(target, ClassicalRegister):
            return sum(_integer(value_of[bit]) << k for k, bit in enumerate(target))
        raise _unsupported_node(node, where)
    if isinstance(node, expr.Value):
        width_mask(node.type)
        return node.value
    if isinstance(node, expr.Cast):
        x = _evaluate(node.operand, value_of, where)
        mask = width_mask(node.type)
        return _truth(x) if mask is None else _integer(x) & mask
    if isinstance(node, expr.Index):
        target = _evaluate(node.target, value_of, where)
        index = _evaluate(node.index, value_of, where)
        if isinstance(target, bool) or (isinstance(target, np.ndarray)
                                        and target.dtype == bool):
            raise _unsupported_node(node, where)
        return _truth(_integer(target) >> _integer(index) & 1)
    if isinstance(node, expr.Unary):
        x = _evaluate(node.operand, value_of, where)
        if node.op is expr.Unary.Op.LOGIC_NOT:
            return _not(x)
        if node.op is expr.Unary.Op.BIT_NOT:
            mask = width_mask(node.type)
            return _not(x) if mask is None else ~_integer(x) & mask
        raise _unsupported_node(node, where)
    if isinstance(node, expr.Binary):
        ops = expr.Binary.Op
        a = _evaluate(node.left, value_of, where)
        b = _evaluate(node.right, value_of, where)
        if node.op is ops.LOGIC_AND:
            return _truth(a) & _truth(b)
        if node.op is ops.LOGIC_OR:
            return _truth(a) | _truth(b)
        if node.op in (ops.BIT_AND, ops.BIT_OR, ops.BIT_XOR):
            a, b = _integer(a), _integer(b)
            v = a & b if node.op is ops.BIT_AND else a | b if node.op is ops.BIT_OR else a ^ b
            return v if width_mask(node.type) is not None else _truth(v)
        if not isinstance(a, np.ndarray) and isinstance(a, bool) != isinstance(b, bool):
            a, b = _integer(a), _integer(b)
        compare = {ops.EQUAL: np.equal, ops.NOT_EQUAL: np.not_equal, ops.LESS: np.less,
                   ops.LESS_EQUAL: np.less_equal, ops.GREATER: np.greater,
                   ops.GREATER_EQUAL: np.greater_equal}
        if node.op in compare:
            v = compare[node.op](a, b)
            return v if isinstance(v, np.ndarray) else bool(v)
        if node.op is ops.SHIFT_LEFT:
            return _shift(_integer(a), _integer(b), left=True) & width_mask(node.type)
        if node.op is ops.SHIFT_RIGHT:
            return _shift(_integer(a), _integer(b), left=False)
    raise _unsupported_node(node, where)


def _shift(a, b, left: bool):
    """``a << b`` or ``a >> b`` (``a`` non-negative); on arrays a shift past
    :data:`_ARRAY_BITS` gives 0, as it does on Python integers once masked."""
    if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        return a << b if left else a >> b
    b = np.asarray(b)
    short = np.minimum(b, _ARRAY_BITS)
    return np.where(b > _ARRAY_BITS, 0, a << short if left else a >> short)


def _not(x):
    """Logical not of a truth value or of each entry of a bool array."""
    return ~_truth(x) if isinstance(x, np.ndarray) else not x


def condition_bits(op, where: str) -> list:
    """The clbits the condition of an ``IfElseOp`` reads."""
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    if isinstance(op.condition, expr.Expr):
        return expression_bits(op.condition, where)
    target = op.condition[0] if isinstance(op.condition, tuple) else None
    if isinstance(target, Clbit):
        return [target]
    if isinstance(target, ClassicalRegister):
        return list(target)
    return []


__all__ = ["MAX_EXPRESSION_QUBITS", "SUPPORTED_EXPRESSIONS", "condition_bits", "expression_bits",
           "expression_truth", "simple_equality"]
