#!/usr/bin/env bash
# Issue 14's whole check on the lent GPU machine, in two calls (together past one call's
# 10 minutes):
#   run(command="ONLY_CHECK=1 FUZZ=300 bash benchmarks/gpu_issue14.sh", carry=[".whl"])  # ~7 min
#   run(command="SKIP_CHECK=1 bash benchmarks/gpu_issue14.sh", carry=[".whl"])           # ~9 min
# The checks: gpu_check.sh (device tests, tests/kernels and tests/language on cuda:0, checked
# mode, the full conformance suite, gpu.py beside Triton and torch) and with FUZZ=N that many
# random kernels on cuda:0 against the interpreter.  The benchmarks: the matmul targets
# (gpu_matmul.py, the descriptor/TMA rows included; MATMUL_ARGS overrides the rows) and
# attention (gpu_attention.py, with pointers and with descriptors), each beside Triton.
set -u
OUT=${OUT:-/tmp/anytile-gpu-issue14}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
if [ -z "${SKIP_CHECK:-}" ]; then
    OUT=/tmp/anytile-gpu-check bash benchmarks/gpu_check.sh >"$OUT/check.log" 2>&1   # its files stay there
    grep -E "passed|failed|VERDICT|CONFORMANT|^\| " "$OUT/check.log" | grep -v "^| ---" | head -40
    if [ -n "${FUZZ:-}" ]; then
        step "fuzz"
        timeout 150 python3 -m anytile conformance --device cuda:0 --fuzz "$FUZZ" --seed ${SEED:-8} \
            >"$OUT/fuzz.log" 2>&1
        tail -3 "$OUT/fuzz.log"
    fi
else
    install_anytile "$OUT/install.log"
fi
if [ -z "${ONLY_CHECK:-}" ]; then
    step "matmul targets"
    timeout 330 python3 benchmarks/gpu_matmul.py \
        ${MATMUL_ARGS:---rows fp16,fp16-8192,bf16,relu,persistent,int8,int8-kmajor,tma,tma-persistent --paired 3 --clocks} \
        --out "$OUT/matmul.md" >"$OUT/matmul.log" 2>&1
    tail -11 "$OUT/matmul.log"
    step "attention"
    timeout 150 python3 benchmarks/gpu_attention.py --out "$OUT/attention.md" >"$OUT/attention.log" 2>&1
    grep -A6 "^| D |" "$OUT/attention.log"
    step "attention through descriptors (Triton 3.6's tutorial shape)"
    timeout 150 python3 benchmarks/gpu_attention.py --descriptors --out "$OUT/attention_desc.md" \
        >"$OUT/attention_desc.log" 2>&1
    grep -A6 "^| D |" "$OUT/attention_desc.log"
fi
step "done"
