"""``import qsimdist`` must stay light."""

import subprocess
import sys

HEAVY = ("qiskit", "quimb", "cupy", "mpi4py", "typer", "matplotlib", "stim", "rich")


def test_import_is_light():
    code = (
        "import sys, qsimdist; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules loaded on import: {out.stdout.strip()}"


def test_public_names():
    import qsimdist

    assert issubclass(qsimdist.PlanError, qsimdist.QsimdistError)
    assert issubclass(qsimdist.PlanError, ValueError)
    assert issubclass(qsimdist.UnsupportedInstructionError, NotImplementedError)
    assert issubclass(qsimdist.MissingDependencyError, ImportError)
