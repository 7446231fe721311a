#!/usr/bin/env bash
# Issue 14's whole check on the lent GPU machine in one call (~6 min):
#   run(command="bash benchmarks/gpu_issue14.sh", carry=[".whl"])
# gpu_check.sh (device tests, tests/kernels and tests/language on cuda:0, checked mode, the
# full conformance suite, gpu.py beside Triton and torch), then the matmul targets
# (gpu_matmul.py) and attention (gpu_attention.py), each beside Triton in the same call.
set -u
OUT=${OUT:-/tmp/anytile-gpu-issue14}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
OUT=/tmp/anytile-gpu-check bash benchmarks/gpu_check.sh >"$OUT/check.log" 2>&1   # its files stay there
grep -E "passed|failed|VERDICT|CONFORMANT|^\| " "$OUT/check.log" | grep -v "^| ---" | head -40
source benchmarks/device_env.sh
step "matmul targets"
timeout 240 python3 benchmarks/gpu_matmul.py ${MATMUL_ARGS:-} --out "$OUT/matmul.md" >"$OUT/matmul.log" 2>&1
tail -9 "$OUT/matmul.log"
step "attention"
timeout 200 python3 benchmarks/gpu_attention.py --out "$OUT/attention.md" >"$OUT/attention.log" 2>&1
grep -A8 "^| D |" "$OUT/attention.log"
if [ -n "${FUZZ:-}" ]; then     # FUZZ=N: N random kernels on cuda:0 against the interpreter
step "fuzz"
timeout 150 python3 -m anytile conformance --device cuda:0 --fuzz "$FUZZ" --seed ${SEED:-8} \
    >"$OUT/fuzz.log" 2>&1
tail -3 "$OUT/fuzz.log"
fi
step "done"
