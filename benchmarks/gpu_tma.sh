#!/usr/bin/env bash
# Hopper's tensor memory accelerator on the lent GPU machine in one call (~8 min):
#   run(command="bash benchmarks/gpu_tma.sh", carry=[".whl"])
# The backend's TMA and descriptor-matmul device tests, then the descriptor matmul rows of
# benchmarks/gpu_matmul.py (anytile's copies by TMA, then on cp.async with AT_TMA=0, each
# beside Triton's own TMA kernel from the same source), and the pointer fp16 row as the
# baseline of the same call, then the attention forward written with descriptors
# (benchmarks/gpu_attention.py --descriptors; ATTENTION=0 skips it).  ROWS overrides the rows.
set -u
OUT=${OUT:-/tmp/anytile-gpu-tma}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh

start_run

step "TMA tests (simulated and on the device)"
timeout 300 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests/test_tma.py \
    backends/nvidia/tests/test_device.py -k "tma or descriptor or pipelined or block_pointer" >"$OUT/test_tma.txt" 2>&1
grep -E "passed|failed|Error|assert" "$OUT/test_tma.txt" | tail -15

step "matmul rows: descriptors through TMA, beside Triton"
timeout 420 python3 benchmarks/gpu_matmul.py --rows "${ROWS:-fp16,relu,tma,tma-persistent,block-ptr}" 2>&1 | tee "$OUT/matmul_tma.txt" | grep -vE "^  " 
if [ "${CPASYNC:-1}" = 1 ]; then
    step "the same with anytile's copies on cp.async (AT_TMA=0)"
    AT_TMA=0 timeout 300 python3 benchmarks/gpu_matmul.py --rows "${CPASYNC_ROWS:-tma,tma-persistent}" --quick 2>&1 \
        | tee "$OUT/matmul_cpasync.txt" | grep -vE "^  "
fi
if [ "${ATTENTION:-1}" = 1 ]; then
    step "attention through descriptors (Triton 3.6's tutorial shape), beside Triton"
    timeout 400 python3 benchmarks/gpu_attention.py --descriptors 2>&1 | tee "$OUT/attention_desc.txt" \
        | grep -E "^\||^- anytile" | head -30
fi
step "done"
