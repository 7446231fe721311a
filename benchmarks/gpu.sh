#!/usr/bin/env bash
# The NVIDIA backend on the lent GPU machine, in one call (run from the repository root):
#   run(command="bash benchmarks/gpu.sh", carry=[".whl"])
# Installs offline, runs the backend's tests and tests/kernels on cuda:0, times anytile next
# to Triton and torch, runs the examples and the quick conformance suite (worst case ~9 min).  Everything lands in $OUT; the benchmark table is printed last.
set -u
OUT=${OUT:-/tmp/anytile-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1

step() { echo "== $1 ($(date +%T))"; }

step "install"
python3 -m pip install -q --no-index --no-deps --no-build-isolation .whl/*.whl -e . -e backends/nvidia -e conformance \
    >"$OUT/install.log" 2>&1 || { echo "install failed:"; tail -20 "$OUT/install.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
python3 -m anytile backends >"$OUT/backends.txt" 2>&1 || anytile backends >"$OUT/backends.txt" 2>&1
cat "$OUT/backends.txt"

step "backend tests"
# (test_simulated.py checks the lowering on the host; it needs no GPU and ran before)
timeout 60 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests \
    --ignore=backends/nvidia/tests/test_simulated.py >"$OUT/test_nvidia.txt" 2>&1
tail -15 "$OUT/test_nvidia.txt"

step "tests/kernels on cuda:0"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels -k cuda >"$OUT/test_kernels.txt" 2>&1
tail -15 "$OUT/test_kernels.txt"

step "benchmarks"
timeout 200 python3 benchmarks/gpu.py --out "$OUT/gpu_bench.md" >"$OUT/bench.log" 2>&1
tail -5 "$OUT/bench.log"

step "examples on cuda:0"
for ex in examples/*.py; do
  echo "$ex: $(timeout 20 python3 "$ex" cuda:0 2>&1 | tail -1)"
done | tee "$OUT/examples.txt"

step "conformance (quick) on cuda:0"
timeout 100 python3 -m anytile conformance --device cuda:0 --json "$OUT/conformance.json" \
    >"$OUT/conformance.txt" 2>&1
grep -v "^\[.*PASS" "$OUT/conformance.txt" | tail -25

step "done"
echo
cat "$OUT/gpu_bench.md" 2>/dev/null | sed -n '/^# /,/^<details>/p'
