#!/usr/bin/env bash
# float8 dots on the lent GPU machine in one call (~8 min):
#   run(command="bash benchmarks/gpu_fp8.sh", carry=[".whl"])
# The float8 tests (simulated, then on the device with the descriptor, TMA and pipelined-matmul
# device tests beside them), then the float8 matmul rows of benchmarks/gpu_matmul.py (B
# K-major, by pointers and by descriptors, each beside Triton's kernel from the same source
# and torch._scaled_mm), and the fp16 pointer, persistent and indexed-address rows of the same
# call (ROWS overrides the rows).
set -u
OUT=${OUT:-/tmp/anytile-gpu-fp8}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh

start_run

step "float8 tests (simulated and on the device), TMA and pipelined-matmul device tests"
timeout 400 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests/test_float8_dots.py \
    backends/nvidia/tests/test_device.py -k "float8 or tma or descriptor or pipelined or block_pointer" \
    >"$OUT/test_fp8.txt" 2>&1
grep -E "passed|failed|Error|assert" "$OUT/test_fp8.txt" | tail -15

step "matmul rows beside Triton"
timeout 480 python3 benchmarks/gpu_matmul.py --rows "${ROWS:-fp8,fp8-tma,fp8-8192,fp16,persistent,indexed}" 2>&1 \
    | tee "$OUT/matmul_fp8.txt" | grep -vE "^  "
step "done"
