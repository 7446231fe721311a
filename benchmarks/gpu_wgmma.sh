#!/usr/bin/env bash
# Hopper's warpgroup MMA on the lent GPU machine in one call (~3 min):
#   run(command="bash benchmarks/gpu_wgmma.sh", carry=[".whl"])
# The backend's pipelined-matmul device tests (mma.sync and wgmma), then fp16 matmul 4096^3
# with and without wgmma beside Triton (benchmarks/gpu_matmul_shapes.py).  AT_SHAPES and
# TR_SHAPES ("BMxBNxBK/warps/stages,...") override the configurations.
set -u
OUT=${OUT:-/tmp/anytile-gpu-wgmma}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh

start_run

step "pipelined matmul device tests"
timeout 200 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests/test_device.py \
    -k "pipelined_matmul or matmul" >"$OUT/test_matmul.txt" 2>&1
grep -E "passed|failed|Error|assert" "$OUT/test_matmul.txt" | tail -12

step "matmul 4096^3, mma.sync and wgmma, beside Triton"
AT_WGMMA=${AT_WGMMA:-0,1} \
AT_SHAPES=${AT_SHAPES:-128x128x32/4/3,128x128x64/8/3,128x256x64/8/3,128x128x64/4/4,128x256x64/8/4} \
TR_SHAPES=${TR_SHAPES:-128x128x64/8/3,128x256x64/8/3} \
    timeout 300 python3 benchmarks/gpu_matmul_shapes.py 2>&1 | tee "$OUT/matmul.txt"
step "done"
