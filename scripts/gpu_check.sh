#!/usr/bin/env bash
# GPU check for qsimdist: on a machine with an NVIDIA GPU, install the project's gpu, mpi and
# test extras (CuPy for CUDA 12) with cuTensorNet's Python package (cuquantum-python-cu12, for
# the comparison) and NCCL (nvidia-nccl-cu12, for --comm nccl), then run every part of the GPU
# check (python -m benchmarks.gpu: the GPU tests, every CuPy case, NCCL, cuTensorNet beside
# qsimdist, GEMM modes, E_P on the CPU cores), whose table is printed last.
#
#   scripts/gpu_check.sh [--data DIR] [--budget SECONDS] [any option of python -m benchmarks.gpu]
#   scripts/gpu_check.sh --dry-run      # the same script on a CPU machine, tiny sizes, no GPU
#
# Writes one JSON per part under $OUT (default docs/bench/gpu) and the summary to
# docs/bench/gpu.json (a dry run: under $OUT only). The whole run stays within --budget seconds (default 540: one run fits
# a 10-minute slot with room to spare); each part has its own time limit.
# Environment: PYTHON (default python3), QSIMDIST_SHARED_DATA (reference data, default
# ../shared/data), GPU_CHECK_SKIP_INSTALL=1 to use what is installed already,
# GPU_CHECK_PIP_ARGS for pip's own options on a machine without network (e.g.
# "--no-index --find-links .whl"). Nothing is fetched except the packages named above.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-docs/bench/gpu}
export OUT
DATA=${QSIMDIST_SHARED_DATA:-../shared/data}

dry=0
for arg in "$@"; do
    [ "$arg" = "--dry-run" ] && dry=1
done

if [ "$dry" = "0" ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed); nothing to measure." >&2
        echo "gpu_check: to check the script on the CPU: scripts/gpu_check.sh --dry-run" >&2
        exit 2
    fi
    nvidia-smi -L
    if [ "${GPU_CHECK_SKIP_INSTALL:-0}" != "1" ]; then
        # build isolation off: setuptools from this environment, no build dependencies fetched
        "$PY" -m pip install ${GPU_CHECK_PIP_ARGS:-} --no-build-isolation -e '.[gpu,mpi,test]'
        # optional: without them the cuTensorNet comparison and --comm nccl say why they skip
        "$PY" -m pip install ${GPU_CHECK_PIP_ARGS:-} cuquantum-python-cu12 nvidia-nccl-cu12 \
            || echo "gpu_check: cuquantum-python-cu12 / nvidia-nccl-cu12 not installed;" \
                    "the parts that need them will say so" >&2
    fi
fi

mkdir -p "$OUT"
if [ "$dry" = "1" ]; then  # a rehearsal: its numbers stay under $OUT, not in docs/bench
    "$PY" -m benchmarks.gpu --out "$OUT" --data "$DATA" "$@"
else
    "$PY" -m benchmarks.gpu --out "$OUT" --json docs/bench/gpu.json --data "$DATA" "$@"
fi
