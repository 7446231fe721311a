#!/usr/bin/env bash
# The OpenCL backend on the lent GPU machine through NVIDIA's OpenCL.  From the repository
# root, with the wheels of benchmarks/opencl_gpu_wheels.sh in .whl/ (made here beforehand):
#   run(command="bash benchmarks/opencl_gpu.sh", carry=[".whl"])         # ~5 min, <= 9
#   run(command="bash benchmarks/opencl_gpu.sh extra", carry=[".whl"])   # ~4 min, <= 9
# The first call installs offline, then runs the full conformance suite on opencl:0 (8 shards
# in parallel) and the benchmark beside the nvidia backend (cuda:0).  `extra`: the plugin's
# tests, the core tests on opencl:0 and 1000 fuzzed kernels (4 seeds in parallel).
# Everything lands in $OUT; the verdicts and the benchmark table are printed last.
set -u
MODE=${1:-main}
OUT=${OUT:-/tmp/anytile-opencl-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# NVIDIA's ICD only (the pyopencl wheel brings its own loader; PoCL is also installed there)
export OCL_ICD_VENDORS=libnvidia-opencl.so.1

step() { echo "== $1 ($(date +%T))"; }

step "install"
python3 -m pip install -q --no-index --no-deps --no-build-isolation .whl/*.whl -e . \
    -e backends/nvidia -e plugins/opencl -e conformance >"$OUT/install.log" 2>&1 \
    || { echo "install failed:"; tail -20 "$OUT/install.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m anytile backends | tee "$OUT/backends.txt"

if [ "$MODE" = "extra" ]; then
  step "plugin tests on opencl:0"
  timeout 200 python3 -m pytest -q -p no:cacheprovider plugins/opencl/tests \
      --ignore=plugins/opencl/tests/test_gpu_path_conformance.py >"$OUT/test_plugin.txt" 2>&1
  tail -4 "$OUT/test_plugin.txt"
  step "core tests on opencl:0"
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests -k opencl --ignore=tests/packaging \
      >"$OUT/test_core.txt" 2>&1
  tail -4 "$OUT/test_core.txt"
  step "fuzz 4 x 250 kernels on opencl:0"
  for seed in 1 2 3 4; do
    timeout 170 python3 -m anytile conformance --device opencl:0 --fuzz 250 --seed "$seed" \
        --fuzz-dir "$OUT/fuzz" >"$OUT/fuzz_$seed.txt" 2>&1 &
  done
  wait
  for seed in 1 2 3 4; do echo "seed $seed: $(tail -1 "$OUT/fuzz_$seed.txt")"; done | tee "$OUT/fuzz_summary.txt"
  step "done"
  exit 0
fi

step "full conformance on opencl:0 (8 shards)"
DEVICE=opencl:0 SHARD_TIMEOUT=330 OUT="$OUT/conformance" bash benchmarks/gpu_conformance.sh \
    | tee "$OUT/conformance_summary.txt"

step "benchmark beside the nvidia backend"
timeout 180 python3 benchmarks/opencl.py --device opencl:0 --out "$OUT/opencl_bench.md" \
    >"$OUT/bench.log" 2>&1
tail -3 "$OUT/bench.log"

step "done"
grep VERDICT "$OUT/conformance_summary.txt"
cat "$OUT/opencl_bench.md" 2>/dev/null
