#!/usr/bin/env bash
# Everything issue 4 checks, in one call on the lent GPU machine:
#   run(command="bash benchmarks/gpu_final.sh", carry=[".whl"])
# gpu.sh (tests on cuda:0, benchmarks vs Triton and torch, examples, quick conformance), the
# full conformance suite in parallel shards, the launch and first-call profiles, and with
# FUZZ=N the differential fuzzer on N random kernels.
set -u
OUT=${OUT:-/tmp/anytile-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
bash benchmarks/gpu.sh >"$OUT/gpu_sh.txt" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_sh.txt" | head -8
echo "== full conformance"
SHARD_TIMEOUT=300 bash benchmarks/gpu_conformance.sh 2>&1 | tail -8
if [ "${FUZZ:-0}" -gt 0 ]; then
  echo "== fuzzer: $FUZZ random kernels on cuda:0 against the interpreter"
  timeout 240 python3 -m anytile conformance --device cuda:0 --fuzz "$FUZZ" --seed "${FUZZ_SEED:-7}" \
      --fuzz-dir "$OUT/fuzz" 2>&1 | tail -4
fi
echo "== launch profile"
(cd benchmarks && timeout 120 python3 gpu_launch_profile.py 2>&1 | head -12) | tee "$OUT/launch.txt"
echo "== first-call profile"
(cd benchmarks && timeout 120 python3 gpu_cold_profile.py 2>&1 | head -8) | tee "$OUT/cold.txt"
echo "== matmul shapes"
(cd benchmarks && timeout 150 python3 gpu_matmul_shapes.py 2>&1 | tail -9) | tee "$OUT/matmul.txt"
echo
sed -n '/^# /,/^<details>/p' "$OUT/gpu_bench.md"
