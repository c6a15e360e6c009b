#!/usr/bin/env bash
# GPU check for qsimdist: on a machine with an NVIDIA GPU, install the project's [gpu] extra
# (with the test extra), run the GPU tests, then the GPU benchmark, whose table is printed last.
#
#   scripts/gpu_check.sh [--data DIR] [any option of python -m benchmarks.gpu]
#
# Environment: PYTHON (default python3), QSIMDIST_SHARED_DATA (reference data, default ../shared/data),
# GPU_CHECK_SKIP_INSTALL=1 to use what is installed already, GPU_CHECK_PIP_ARGS for pip's own
# options on a machine without network (e.g. "--no-index --find-links .whl"). Writes
# docs/bench/gpu.json.
# Nothing is fetched from the network except the packages of the [gpu,test] extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed); nothing to measure." >&2
    echo "gpu_check: to check the benchmark script on the CPU: $PY -m benchmarks.gpu --dry-run" >&2
    exit 2
fi
nvidia-smi -L

if [ "${GPU_CHECK_SKIP_INSTALL:-0}" != "1" ]; then
    # build isolation off: setuptools from this environment, no build dependencies fetched
    "$PY" -m pip install ${GPU_CHECK_PIP_ARGS:-} --no-build-isolation -e '.[gpu,test]'
fi

echo "== GPU tests (tests/test_gpu.py) =="
"$PY" -m pytest -q -rs tests/test_gpu.py

echo "== GPU benchmark =="
"$PY" -m benchmarks.gpu --json docs/bench/gpu.json --data "${QSIMDIST_SHARED_DATA:-../shared/data}" "$@"
