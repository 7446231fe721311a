#!/usr/bin/env bash
# Two NVIDIA GPUs (issue: several GPUs in one process and with torch.distributed), in one
# call on the lent two-GPU machine:
#   run(command="bash benchmarks/multi_gpu.sh", kind="nvidia-h200-x2", carry=[".whl"])
# Installs offline; the two-GPU tests and the one-GPU device tests; the distributed example
# under torchrun (NCCL, a GPU per rank; gloo on CPUs) against one process; the full
# conformance suite on cuda:1; the copy and launch benchmark.  Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/anytile-multi-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh

step "install"
install_anytile "$OUT/install.log" -e backends/cpu
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
nvidia-smi topo -m >"$OUT/topology.txt" 2>&1; head -4 "$OUT/topology.txt"

step "two-GPU tests and the device tests"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs backends/nvidia/tests/test_multi_gpu.py \
    backends/nvidia/tests/test_device.py backends/nvidia/tests/test_driver.py \
    backends/nvidia/tests/test_raw_launch.py tests/runtime/test_multi_device.py >"$OUT/tests.txt" 2>&1
tail -4 "$OUT/tests.txt"

step "distributed example"
ex=examples/distributed_layernorm.py
timeout 120 python3 $ex --save "$OUT/y_one.npy" 2>&1 | tail -2 | tee "$OUT/example_one.txt"
timeout 180 python3 -m torch.distributed.run --nproc-per-node 2 $ex --save "$OUT/y_nccl.npy" >"$OUT/example_nccl.txt" 2>&1
tail -2 "$OUT/example_nccl.txt"
timeout 180 python3 -m torch.distributed.run --nproc-per-node 2 $ex --cpu --save "$OUT/y_gloo.npy" >"$OUT/example_gloo.txt" 2>&1
tail -2 "$OUT/example_gloo.txt"
python3 - "$OUT" <<'PY'
import sys, numpy as np
out = sys.argv[1]
try:
    one = np.load(f"{out}/y_one.npy")
    for name in ("nccl", "gloo"):
        print(f"torchrun {name} vs one process: max |diff| {np.abs(np.load(f'{out}/y_{name}.npy') - one).max():.1e}")
except OSError as exc:
    print("missing result:", exc)
PY

step "full conformance on cuda:1"
DEVICE=cuda:1 SHARD_TIMEOUT=300 OUT="$OUT/conformance" bash benchmarks/gpu_conformance.sh | tee "$OUT/conformance_summary.txt" | tail -8

step "copies and launches"
timeout 120 python3 benchmarks/multi_gpu.py --out "$OUT/multi_gpu.md" >"$OUT/bench.log" 2>&1; tail -8 "$OUT/bench.log"
step "done"
