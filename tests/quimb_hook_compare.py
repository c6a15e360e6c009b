"""Compare a plain run of quimb's tests with a run inside ``qsimdist.quimb.use()``.

Usage (see ``tests/quimb_hook_plugin.py`` for making the files)::

    python tests/quimb_hook_compare.py PLAIN.xml HOOK.xml [HOOK.json] [PLAIN2.xml HOOK2.xml [HOOK2.json] ...]

Pairs of JUnit XML files (pytest's ``--junitxml``), each optionally followed by
the plugin's JSON report. Prints per pair and in total: tests that pass
plainly, how many of those also pass with the hook, tests that fail with the
hook only (named), skips, and the contractions the hook routed and left to
quimb. Exits 1 when a test passing plainly does not pass with the hook.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET


def outcomes(path: str) -> dict[str, str]:
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "failed"
            elif child.tag == "skipped":
                kind = "skipped"
        out[name] = kind
    return out


def main(argv: list[str]) -> int:
    groups: list[list[str]] = []
    for arg in argv:
        if arg.endswith(".json"):
            groups[-1].append(arg)
        elif groups and len(groups[-1]) == 1:
            groups[-1].append(arg)
        else:
            groups.append([arg])
    total = {"plain_passed": 0, "both_passed": 0, "skipped": 0, "routed": 0, "fallbacks": 0}
    reasons: dict[str, int] = {}
    broken: list[str] = []
    for group in groups:
        plain, hook = outcomes(group[0]), outcomes(group[1])
        passed = [k for k, v in plain.items() if v == "passed"]
        both = [k for k in passed if hook.get(k) == "passed"]
        lost = [k for k in passed if hook.get(k) != "passed"]
        skipped = sum(1 for v in plain.values() if v == "skipped")
        line = (f"{group[0]}: {len(both)} of {len(passed)} passing plainly pass with the hook, "
                f"{skipped} skipped plainly")
        if len(group) > 2:
            rep = json.load(open(group[2]))
            line += f", {rep['routed']} contractions routed, {rep['fallbacks']} left to quimb"
            total["routed"] += rep["routed"]
            total["fallbacks"] += rep["fallbacks"]
            for k, v in rep["fallback_reasons"].items():
                reasons[k] = reasons.get(k, 0) + v
        print(line)
        total["plain_passed"] += len(passed)
        total["both_passed"] += len(both)
        total["skipped"] += skipped
        broken += lost
    print(f"total: {total['both_passed']} of {total['plain_passed']} pass with the hook; "
          f"{total['skipped']} skipped plainly; {total['routed']} contractions routed, "
          f"{total['fallbacks']} left to quimb {reasons}")
    for name in broken:
        print(f"  not passing with the hook: {name}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
