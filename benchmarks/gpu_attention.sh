#!/usr/bin/env bash
# Attention forward beside Triton and SDPA on the lent GPU machine (one call, ~4 min):
#   run(command="bash benchmarks/gpu_attention.sh", carry=[".whl"])
set -u
OUT=${OUT:-/tmp/anytile-attention}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
step "install"
install_anytile "$OUT/install.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step "attention"
timeout ${ATTN_TIMEOUT:-420} python3 benchmarks/gpu_attention.py ${ATTN_ARGS:-} --out "$OUT/attention.md" \
    >"$OUT/attention.log" 2>&1
tail -40 "$OUT/attention.log"
step "done"
