"""A pytest plugin that runs quimb's own tests with every test inside ``qsimdist.quimb.use()``.

quimb's test files are not part of its wheel; take them from its source
distribution and run them twice, once plainly and once with this plugin::

    pip download --no-deps --no-binary :all: quimb==1.16.0 -d /tmp/q && tar xzf /tmp/q/quimb-*.tar.gz -C /tmp/q
    cd /tmp/q/quimb-1.16.0
    python -m pytest tests/test_tensor/test_tn2d -p no:cacheprovider -q \\
        --junitxml=/tmp/plain.xml
    PYTHONPATH=$QSIMDIST/tests QSIMDIST_HOOK_REPORT=/tmp/hook.json python -m pytest tests/test_tensor/test_tn2d \\
        -p quimb_hook_plugin -p no:cacheprovider -q --junitxml=/tmp/hook.xml

(with this repository's ``tests/`` folder on ``PYTHONPATH`` so that
``quimb_hook_plugin`` imports; quimb's own ``tests`` package shadows ours). Each test gets its own ``use()`` block;
the report (JSON) counts per test the contractions routed through qsimdist,
the calls left to quimb and why, and the test's outcome and duration.
``python tests/quimb_hook_compare.py plain.xml hook.xml hook.json`` compares
the two runs.
"""

from __future__ import annotations

import json
import os
import time

import pytest

_REPORT: dict[str, dict] = {}


@pytest.fixture(autouse=True)
def _qsimdist_hook(request):
    import qsimdist.quimb as qq

    start = time.perf_counter()
    with qq.use() as stats:
        yield
    _REPORT[request.node.nodeid] = {
        "routed": stats.routed,
        "fallbacks": stats.fallbacks,
        "fallback_reasons": dict(stats.fallback_reasons),
        "seconds": round(time.perf_counter() - start, 4),
    }


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("QSIMDIST_HOOK_REPORT")
    if not path:
        return
    routed = sum(r["routed"] for r in _REPORT.values())
    fallbacks = sum(r["fallbacks"] for r in _REPORT.values())
    reasons: dict[str, int] = {}
    for r in _REPORT.values():
        for k, v in r["fallback_reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    with open(path, "w") as fh:
        json.dump({"tests": len(_REPORT), "routed": routed, "fallbacks": fallbacks,
                   "fallback_reasons": reasons, "per_test": _REPORT}, fh, indent=1)
