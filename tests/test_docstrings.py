"""Every public callable documents its parameters in a numpy-style ``Parameters`` section.

The docs site (``mkdocs.yml``: ``docstring_style: numpy``) renders those sections as
tables. The walk imports the public faces, takes each public function, class (its
constructor) and the public methods a class defines itself, and asks that the docstring
has a ``Parameters`` (or ``Other Parameters``) section naming every parameter of the
signature (``self``/``cls`` aside; ``*args``/``**kwargs`` by that spelling). A dataclass
may list its fields under ``Attributes`` instead. Google-style blocks (``Args:``), which
the site would show as plain text, are refused in those docstrings.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import re
import textwrap

#: (module, names): the public faces whose objects are walked; ``None`` takes ``__all__``
PUBLIC = (
    ("qsimdist", None),
    ("qsimdist.engine", ("Engine", "RunOptions", "MemoryBudget", "machine_memory")),
    ("qsimdist.engine.term_costs", ("TermCost",)),
    ("qsimdist.qiskit", None),
    ("qsimdist.qiskit.sampler", ("SamplerOptions",)),
    ("qsimdist.qiskit.estimator", ("EstimatorOptions",)),
    ("qsimdist.qiskit.options", ("PrimitiveOptions",)),
    ("qsimdist.quimb", None),
    ("qsimdist.network", None),
    ("qsimdist.planner.plan", ("Plan",)),
    ("qsimdist.planner.path", ("PathOptions",)),
    ("qsimdist.planner.estimate", ("ContractionCost", "DistributedCost", "plan_cost")),
    ("qsimdist.hardware", None),
    ("qsimdist.errors", ("shorten",)),
    ("qsimdist.qec", None),
    ("qsimdist.qec.decoder", ("MLDecoder",)),
)

_HEADER = re.compile(r"^(\S[^\n]*)\n-{3,}[ \t]*$", re.MULTILINE)
#: a Google-style section header line
_GOOGLE = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes|"
                     r"Examples?):\s*$", re.MULTILINE)


def sections(doc: str | None) -> dict[str, str]:
    """The numpy-style sections of a docstring: header -> body (dedented)."""
    text = inspect.cleandoc(doc or "")
    found = list(_HEADER.finditer(text))
    out = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out[match.group(1).strip()] = textwrap.dedent(text[match.end():end]).strip("\n")
    return out


def documented_parameters(doc: str | None, attributes: bool = False) -> set[str]:
    """The names a ``Parameters``/``Other Parameters`` section lists, one per entry
    (``**kwargs`` keeps its stars); with ``attributes``, an ``Attributes`` section's too
    (a dataclass's fields are its constructor's parameters).

    An entry naming several parameters (``a, b : int``) counts for none of them: the docs
    site's parser gives every name of such an entry the first one's type and default."""
    names = set()
    parts = sections(doc)
    headers = ("Parameters", "Other Parameters") + (("Attributes",) if attributes else ())
    for header in headers:
        for line in parts.get(header, "").splitlines():
            if not line or line[0].isspace():
                continue  # a description line
            head = line.split(" : ", 1)[0].rstrip(":").strip()
            if "," not in head:
                names.add(head)
    return names


def signature_names(func) -> list[str]:
    """The parameter names a docstring must list, spelt as it lists them."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    names = []
    for name, param in sig.parameters.items():
        if name in ("self", "cls"):
            continue
        if param.kind is param.VAR_POSITIONAL:
            name = f"*{name}"
        elif param.kind is param.VAR_KEYWORD:
            name = f"**{name}"
        names.append(name)
    return names


def _own_methods(cls) -> list[tuple[str, object]]:
    out = []
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(raw, (staticmethod, classmethod)):
            out.append((name, raw.__func__))
        elif inspect.isfunction(raw):
            out.append((name, raw))
    return out


def _constructor(cls):
    """The callable whose parameters the class docstring documents, or ``None``."""
    if issubclass(cls, BaseException) or issubclass(cls, enum.Enum):
        return None  # exceptions take a message; enum members are not constructed
    init = cls.__dict__.get("__init__")
    if init is None and not dataclasses.is_dataclass(cls):
        return None  # an inherited constructor is documented where it is defined
    return cls


def public_callables() -> dict[str, tuple[object, object]]:
    """``qualified name -> (callable whose signature counts, object whose docstring counts)``."""
    out = {}
    seen = set()
    for module_name, names in PUBLIC:
        module = importlib.import_module(module_name)
        for name in names if names is not None else module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen or name.startswith("__"):
                continue
            seen.add(id(obj))
            where = f"{module_name}.{name}"
            if inspect.isclass(obj):
                ctor = _constructor(obj)
                if ctor is not None:
                    init_doc = getattr(obj.__dict__.get("__init__"), "__doc__", None)
                    doc = init_doc if documented_parameters(init_doc) else obj.__doc__
                    out[where] = (ctor, doc)
                for meth_name, meth in _own_methods(obj):
                    out[f"{where}.{meth_name}"] = (meth, meth.__doc__)
            elif callable(obj):
                out[where] = (obj, obj.__doc__)
    return out


def undocumented(callables: dict[str, tuple[object, object]]) -> dict[str, list[str]]:
    """For each callable whose docstring misses some of its parameters, the missing names.

    A dataclass may list its fields under ``Attributes`` instead (a result users read
    rather than build: :class:`~qsimdist.Plan`, :class:`~qsimdist.AmplitudeResult`).
    """
    missing = {}
    for where, (func, doc) in callables.items():
        wanted = signature_names(func)
        if not wanted:
            continue
        listed = documented_parameters(doc, attributes=dataclasses.is_dataclass(func))
        lacking = [name for name in wanted if name not in listed]
        if lacking:
            missing[where] = lacking
    return missing


def test_public_callables_document_their_parameters():
    callables = public_callables()
    assert len(callables) >= 60, sorted(callables)  # the faces were read
    missing = undocumented(callables)
    lines = [f"  {where}: {', '.join(names)}" for where, names in sorted(missing.items())]
    assert not missing, ("public callables whose docstring lacks a numpy-style Parameters "
                         "entry (one name per entry) for some parameter:\n" + "\n".join(lines))


def google_blocks(callables: dict[str, tuple[object, object]]) -> list[str]:
    """The callables whose docstring holds a Google-style section header."""
    return sorted(where for where, (_, doc) in callables.items()
                  if _GOOGLE.search(inspect.cleandoc(doc or "")))


def test_public_docstrings_have_no_google_sections():
    assert google_blocks(public_callables()) == []
    assert google_blocks({"planted": (None, _planted_undocumented.__doc__)}) == ["planted"]


def test_the_docs_site_reads_numpy_sections():
    from pathlib import Path

    mkdocs = (Path(__file__).resolve().parent.parent / "mkdocs.yml").read_text()
    assert re.search(r"^\s*docstring_style:\s*numpy\s*$", mkdocs, re.MULTILINE), \
        "mkdocs.yml's python handler must parse numpy-style docstrings"


def _planted_documented(circuit, *, shots: int = 1, **options):
    """A planted function whose parameters are all documented.

    Parameters
    ----------
    circuit : str
        A circuit.
    shots : int, default 1
        Shots.
    **options
        More.
    """


def _planted_undocumented(circuit, shots: int = 1, *args):
    """A planted function that documents one parameter of three.

    Args:
        circuit: a Google-style entry, which the numpy sections do not read.

    Parameters
    ----------
    shots : int
        Shots.
    """


def _planted_combined(a, b):
    """A planted function that documents two parameters in one entry.

    Parameters
    ----------
    a, b : int
        Two numbers (the docs site would give ``b`` the type and default of ``a``).
    """


class _PlantedClass:
    """A planted class whose constructor's parameter is missing."""

    def __init__(self, width: int) -> None:
        self.width = width

    def grow(self, by: int) -> None:
        """Grow.

        Parameters
        ----------
        by : int
            Steps.
        """


def test_the_check_catches_planted_undocumented_callables():
    planted = {
        "documented": (_planted_documented, _planted_documented.__doc__),
        "undocumented": (_planted_undocumented, _planted_undocumented.__doc__),
        "combined": (_planted_combined, _planted_combined.__doc__),
        "class": (_PlantedClass, _PlantedClass.__doc__),
        "method": (_PlantedClass.grow, _PlantedClass.grow.__doc__),
        "no parameters": (test_the_check_catches_planted_undocumented_callables, None),
    }
    assert undocumented(planted) == {
        "undocumented": ["circuit", "*args"],
        "combined": ["a", "b"],
        "class": ["width"],
    }


def test_sections_are_read_as_numpy_sections():
    doc = _planted_documented.__doc__
    assert list(sections(doc)) == ["Parameters"]
    assert documented_parameters(doc) == {"circuit", "shots", "**options"}
    assert signature_names(_planted_documented) == ["circuit", "shots", "**options"]
