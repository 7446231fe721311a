#!/usr/bin/env bash
# TMA for plain pointer loads (core's pointer_boxes.py) on the lent GPU, in one call (~8 min):
#   git archive <rev without it> core backends/nvidia | tar -x -C benchmarks/_old
#   run(command="bash benchmarks/gpu_pointer_tma.sh", carry=[".whl", "benchmarks/_old"])
# the device tests of pointer, descriptor and block-pointer matmuls (tma on and off), the
# tiled_matmul conformance family and quick conformance on cuda:0, then Nsight Compute
# durations of the pointer matmuls against benchmarks/_old and Triton (gpu_ncu_ab.sh: CASES,
# ROUNDS).  SKIP_CHECK=1 skips the checks.
set -u
OUT=${OUT:-/tmp/anytile-gpu-pointer-tma}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
start_run
export ANYTILE_NO_CACHE=1
if [ -z "${SKIP_CHECK:-}" ]; then
    step "device tests"
    timeout 300 python3 -m pytest -q -x backends/nvidia/tests/test_device.py \
        -k "pointer_box or descriptor or block_pointer or matmul" 2>&1 | tail -6
    step "conformance: tiled_matmul (full) and quick"
    timeout 120 python3 -m anytile conformance --device cuda:0 --full -k tiled_matmul 2>&1 | tail -4
    timeout 150 python3 -m anytile conformance --device cuda:0 --quick 2>&1 | tail -3
fi
step "profiler durations"
CASES=${CASES:-"matmul:128,256,64,8,3 matmul:128,128,64,4,4 persistent:128,256,64,8,3 persistent:128,128,64,4,4"} \
    VARIANTS=${VARIANTS:-"new old triton"} ROUNDS=${ROUNDS:-1} OUT=$OUT bash benchmarks/gpu_ncu_ab.sh 2>&1 | \
    grep -v "^== install" | grep -v "^NVIDIA H"
