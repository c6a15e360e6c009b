"""Print one of README.md's marked commands, as written, for ``.ci/run`` to run.

    python tools/readme_command.py NAME [README.md]

The command is the body of the first fenced code block after the line
``<!-- ci:NAME -->`` (``install-and-run`` or ``test``). Exit 1, with one line, when the
marker or its block is missing, so CI cannot run something other than what README says.
"""

from __future__ import annotations

import sys
from pathlib import Path


def marked_command(text: str, name: str) -> str:
    """The code block that follows ``<!-- ci:name -->`` in ``text``."""
    marker = f"<!-- ci:{name} -->"
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == marker)
    except StopIteration:
        raise LookupError(f"no line {marker!r}") from None
    fence = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("```")), None)
    if fence is None or any(lines[i].strip() for i in range(start + 1, fence)):
        raise LookupError(f"no code block right after {marker!r}")
    end = next((i for i in range(fence + 1, len(lines)) if lines[i].startswith("```")), None)
    if end is None:
        raise LookupError(f"the code block after {marker!r} is not closed")
    body = "\n".join(lines[fence + 1:end]).strip()
    if not body:
        raise LookupError(f"the code block after {marker!r} is empty")
    return body


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python tools/readme_command.py NAME [README.md]", file=sys.stderr)
        return 2
    readme = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parents[1] / "README.md"
    try:
        print(marked_command(readme.read_text(), argv[0]))
    except LookupError as exc:
        print(f"readme_command: {readme}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
