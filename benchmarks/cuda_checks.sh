#!/usr/bin/env bash
# The checks and benchmarks that need a CUDA GPU, in one go (issue 16):
#
#     bash benchmarks/cuda_checks.sh [STEP ...]
#
# steps: tests kernel-tests attention prefill throughput sync eager profile
#
# Run from the repository root on a GPU machine whose python3 has torch and triton.
# Installs llmkit (editable, no dependencies fetched: wheels in .whl/ are installed first
# if present, for a machine without a package index) and writes everything it prints to
# $OUT/cuda_checks.log. Each step has its own time limit and a failing step does not stop
# the next one; the exit status is the number of failed steps.
set -u
OUT=${OUT:-/tmp/llmkit-cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/cuda_checks.log") 2>&1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
unset TRITON_INTERPRET

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch, triton, transformers; print("torch", torch.__version__,
    "triton", triton.__version__, "transformers", transformers.__version__)'

failed=0
step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    echo "=== $name: $*"
    local t0=$SECONDS
    timeout "$limit" "$@" || { echo "=== $name FAILED (exit $?)"; failed=$((failed + 1)); }
    echo "=== $name took $((SECONDS - t0)) s"
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests attention throughput)
for s in "${steps[@]}"; do
    case $s in
    tests)
        # The CUDA tests CI skips, and the async-scheduling tests (device auto: the GPU).
        step engine-tests 240 python3 -m pytest -q -p no:cacheprovider tests/gpu \
            tests/engine/core/test_async_scheduling.py tests/model/test_transfer.py \
            "tests/model/layers/test_quantization.py::test_cuda_kernels_accuracy_against_float32"
        ;;
    kernel-tests)
        step kernel-tests 200 python3 -m pytest -q -p no:cacheprovider tests/kernels
        ;;
    attention)
        step attention-gqa4-d128 240 python3 benchmarks/attention.py --heads 32 8 --head-dim 128
        step attention-gqa1-d64 240 python3 benchmarks/attention.py --heads 16 16 --head-dim 64
        step attention-gqa8-d128 240 python3 benchmarks/attention.py --heads 32 4 --head-dim 128
        ;;
    prefill)  # the prefill tiles against SDPA flash on the same shapes
        step prefill-gqa4-d128 100 python3 benchmarks/attention.py --heads 32 8 --head-dim 128 \
            --only prefill --skip-torch
        step prefill-gqa7-d64 100 python3 benchmarks/attention.py --heads 14 2 --head-dim 64 \
            --only prefill --skip-torch
        ;;
    throughput)
        step throughput 240 python3 benchmarks/throughput.py --model qwen2.5-0.5b \
            --dtype bfloat16 --num-requests 256 --hf-batch-sizes "${HF_BATCH_SIZES:-64,128,256}" \
            --host-profile "${HOST_PROFILE:-0}"
        ;;
    sync)  # llmkit with async scheduling off: the step breakdown before
        step sync 150 python3 benchmarks/throughput.py --model qwen2.5-0.5b \
            --dtype bfloat16 --num-requests 256 --hf-batch-sizes "" --async-scheduling off
        ;;
    eager)  # llmkit without CUDA graphs, for the graphs' share
        step eager 300 python3 benchmarks/throughput.py --model qwen2.5-0.5b \
            --dtype bfloat16 --num-requests 256 --hf-batch-sizes "" --enforce-eager
        ;;
    profile)  # where llmkit's host time goes (cProfile), without the HF side
        step profile 300 python3 benchmarks/throughput.py --model qwen2.5-0.5b \
            --dtype bfloat16 --num-requests 256 --hf-batch-sizes "" --host-profile 30
        ;;
    *) echo "unknown step $s" && failed=$((failed + 1)) ;;
    esac
done
exit $failed
