"""mkdocs hook: two fixes to the text of docstrings and help texts as they reach HTML.

* Bra-kets such as ``<b|U|0>`` in running text (the CLI reference that mkdocs-click
  generates from the typer app writes them) pass through Markdown as raw HTML, and a
  browser takes each for an unknown tag and shows nothing. A tag name never holds
  ``|``, so every ``<...|...>`` left in a page's HTML is text: escape it.
* Docstrings cross-reference in Sphinx's roles (``:func:`amplitudes```), which the
  Google-style parser leaves as ``:func:`` before the code span: drop the role, keep
  the code.
"""

from __future__ import annotations

import re

_BRA_KET = re.compile(r"<([A-Za-z]\w*\|[^<>\s]*)>")
_SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const):(?=<code>)")


def on_page_content(html: str, **kwargs) -> str:
    html = _BRA_KET.sub(r"&lt;\1&gt;", html)
    return _SPHINX_ROLE.sub("", html)
