"""One conversion per circuit: the primitives' templates of the circuits they meet.

A variational loop sends the same circuit object (or an equal one) call after call,
each time with new parameter values. :class:`TemplateCache` converts a circuit once
into a :class:`~qsimdist.frontends.parametric.ParametricCircuit` (a circuit without
parameters into a template without slots) and hands the same template back while the
circuit's instructions are the same: each call then binds only the slots' matrices.

The key is the circuit's instructions as they are now (each standard gate by name and
parameters, any other operation by identity and parameters, with their qubits and
clbits), its global phase and width, so a circuit changed in place after a call is
converted again. A template whose conversion noted gates applied through a
definition (``GateCircuit.by_definition``) is not kept: every call converts such a
circuit and records the note again.
"""

from __future__ import annotations

import functools
import numbers
from collections import OrderedDict

import numpy as np

from .dynamic import plain_standard_gate
from .parametric import ParametricCircuit, parametric_from_qiskit

#: templates one primitive keeps (least recently used dropped). A client's loop can cycle
#: through many circuits: qiskit-algorithms' ``LinCombQGT`` and ``LinCombEstimatorGradient``
#: send 52 for VarQITE on ``efficient_su2(2, reps=1)``, one call after another; a cache
#: smaller than the cycle misses every time (each circuit converted again)
TEMPLATES_KEPT = 512
#: instructions the kept templates may hold together (the circuits' sizes): many small
#: circuits, or a few wide ones
TEMPLATE_INSTRUCTIONS_KEPT = 1 << 17
#: array parameters up to this many bytes are keyed by value (larger ones by identity)
_KEYED_ARRAY_BYTES = 1 << 16


def circuit_key(qc) -> tuple[tuple, list]:
    """A hashable key of ``qc``'s instructions, width, phase and parameters, and the
    objects keyed by identity (kept alive with the key, so no identity is reused)."""
    keep: list = []

    def value(v):
        if isinstance(v, (numbers.Number, str)) or hasattr(v, "parameters"):
            return v
        if isinstance(v, np.ndarray) and v.nbytes <= _KEYED_ARRAY_BYTES:
            return (v.shape, str(v.dtype), v.tobytes())
        keep.append(v)
        return ("id", id(v))

    items: list = [qc.num_qubits, qc.num_clbits, value(qc.global_phase), qc.name,
                   tuple(qc.parameters)]
    for inst in qc.data:
        # (a standard gate read off the instruction: no Python gate object is made)
        if plain_standard_gate(inst):
            head = inst.name
        else:
            op = inst.operation
            if type(op) in _directives() and getattr(op, "condition", None) is None:
                # by name: Qiskit makes a new object of these at each reading of a
                # circuit's data (a barrier keyed by identity missed every call)
                head = inst.name
            else:
                keep.append(op)
                head = ("id", id(op), op.name)
        items.append((head, tuple(value(v) for v in inst.params), inst.qubits, inst.clbits))
    return tuple(items), keep


@functools.cache
def _directives() -> tuple[type, ...]:
    """Qiskit's standard non-gate instructions, which a circuit's key names by their name
    and parameters (their qubits and clbits beside): nothing else tells two apart."""
    from qiskit.circuit import Barrier, Delay, Measure, Reset

    return (Barrier, Delay, Measure, Reset)


class TemplateCache:
    """The templates of the circuits one primitive met (see the module docstring).

    Attributes:
        built: templates made (conversions of a whole circuit).
        reused: templates handed back without converting.
    """

    def __init__(self, size: int = TEMPLATES_KEPT,
                 instructions: int = TEMPLATE_INSTRUCTIONS_KEPT) -> None:
        self.size = size
        self.instructions = instructions
        #: key -> (template, objects kept alive with the key, the circuit's instructions)
        self.entries: OrderedDict[tuple, tuple[object, list, int]] = OrderedDict()
        self.held = 0  # instructions of the kept circuits together
        self.built = 0
        self.reused = 0

    def pub_template(self, qc, params, lowered: bool = False):
        """``(template, rows)``: the template of a pub's circuit ``qc`` (``lowered``: the
        ``(LoweredCircuit, template)`` of :meth:`lowered`) and its parameter values
        ``params`` (a Qiskit ``BindingsArray``) as rows over ``qc.parameters``; ``(None,
        None)`` where every parameter set is converted on its own."""
        if params.size == 0:
            return None, None
        rows = None
        if qc.parameters:
            try:
                rows = np.asarray(params.as_array(list(qc.parameters)),
                                  dtype=float).reshape(params.size, -1)
            except Exception:  # noqa: BLE001 - binding them raises it, with Qiskit's message
                return None, None
        probe = None if rows is None else rows[0]
        found = self.lowered(qc, probe) if lowered else self.template(qc, probe)
        if found is None:
            return None, None
        template = found[1] if lowered else found
        return found, rows if rows is not None else template.rows(params)

    def template(self, qc, probe: np.ndarray | None = None) -> ParametricCircuit | None:
        """``qc``'s template (``None``: it must be converted per parameter set).

        ``probe``: a parameter set (over ``qc.parameters`` in order) the template is
        checked at when it is made (:func:`parametric_from_qiskit`)."""
        try:
            key, keep = circuit_key(qc)
            hash(key)
        except TypeError:  # an unhashable parameter: converted, not kept
            key, keep = None, []
        if key is not None and key in self.entries:
            self.entries.move_to_end(key)
            self.reused += 1
            return self.entries[key][0]
        template = make_template(qc, probe)
        self.built += 1
        if key is not None and (template is None or not template.by_definition):
            self._keep(key, template, keep, len(qc.data))
        return template

    def _keep(self, key: tuple, found, keep: list, instructions: int) -> None:
        """Keep ``found`` under ``key``; the least recently used go while more than
        ``size`` templates or ``instructions`` instructions are kept (the newest stays)."""
        self.entries[key] = (found, keep, instructions)
        self.held += instructions
        while len(self.entries) > 1 and (len(self.entries) > self.size
                                         or self.held > self.instructions):
            self.held -= self.entries.popitem(last=False)[1][2]

    def lowered(self, qc, probe: np.ndarray | None = None):
        """``(LoweredCircuit, template of its circuit)`` of ``qc`` (a sampler's circuit:
        measurements, resets and conditions rewritten by
        :func:`~qsimdist.frontends.lowering.lower_circuit`, parameters kept), or ``None`` where
        the lowering cannot keep the parameters or the template is ``None``: then every
        parameter set is lowered and converted on its own."""
        try:
            key, keep = circuit_key(qc)
            key = ("lowered", key)
            hash(key)
        except TypeError:
            key, keep = None, []
        if key is not None and key in self.entries:
            self.entries.move_to_end(key)
            self.reused += 1
            return self.entries[key][0]
        from .lowering import lower_circuit

        found = None
        try:
            lowered = lower_circuit(qc, allow_parameters=True)
            if set(lowered.circuit.parameters) == set(qc.parameters):
                template = make_template(lowered.circuit, probe)
                found = None if template is None else (lowered, template)
        except Exception:  # noqa: BLE001 - lowered per set, where its error is raised
            found = None
        self.built += 1
        if key is not None and (found is None or not found[1].by_definition):
            self._keep(key, found, keep, len(qc.data))
        return found

    def clear(self) -> None:
        self.entries.clear()
        self.held = 0


def make_template(qc, probe: np.ndarray | None = None) -> ParametricCircuit | None:
    """``qc`` converted once: with parameters, a :class:`ParametricCircuit` (``None`` where
    it must be converted per set); without, a template of no slots."""
    if qc.parameters:
        return parametric_from_qiskit(qc, probe)
    from .qiskit_circuit import from_qiskit

    return ParametricCircuit.fixed(from_qiskit(qc))


__all__ = ["TEMPLATES_KEPT", "TEMPLATE_INSTRUCTIONS_KEPT", "TemplateCache", "circuit_key",
           "make_template"]
