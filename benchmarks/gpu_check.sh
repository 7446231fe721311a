#!/usr/bin/env bash
# The NVIDIA backend's full check on the lent GPU machine in one call (worst case ~9.5 min;
# typically 4-5):
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"])
# Installs offline; the backend's device tests, tests/kernels and tests/language on cuda:0;
# checked mode (quick conformance under ANYTILE_DEBUG=1, benchmarks/gpu_checked.py); the full
# conformance suite in 8 shards; then the benchmark beside Triton and torch.
# Everything lands in $OUT; the verdict and the benchmark table are printed last.
set -u
OUT=${OUT:-/tmp/anytile-gpu-check}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh

step "install"
install_anytile "$OUT/install.log"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

step "device tests on cuda:0"
timeout 480 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests \
    --ignore=backends/nvidia/tests/test_simulated.py >"$OUT/test_nvidia.txt" 2>&1
tail -3 "$OUT/test_nvidia.txt"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels tests/language -k cuda \
    >"$OUT/test_core.txt" 2>&1
tail -3 "$OUT/test_core.txt"

step "checked mode (debug=True): the quick conformance suite, and what it costs"
ANYTILE_DEBUG=1 timeout 240 python3 -m anytile conformance --device cuda:0 --quick \
    >"$OUT/conformance_checked.txt" 2>&1
tail -2 "$OUT/conformance_checked.txt"
timeout 150 python3 benchmarks/gpu_checked.py --out "$OUT/gpu_checked.md" >"$OUT/checked.log" 2>&1
tail -8 "$OUT/checked.log"

step "full conformance on cuda:0"
SHARD_TIMEOUT=300 OUT="$OUT/conformance" bash benchmarks/gpu_conformance.sh | tee "$OUT/conformance_summary.txt"

step "benchmarks"
timeout 170 python3 benchmarks/gpu.py --out "$OUT/gpu_bench.md" >"$OUT/bench.log" 2>&1
tail -3 "$OUT/bench.log"
step "done"
grep -h "passed\|failed" "$OUT/test_nvidia.txt" "$OUT/test_core.txt" | tail -2
grep VERDICT "$OUT/conformance_summary.txt"
sed -n '/^# /,/^<details>/p' "$OUT/gpu_bench.md" 2>/dev/null
