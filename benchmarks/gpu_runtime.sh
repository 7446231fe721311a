#!/usr/bin/env bash
# Runtime costs on the lent GPU machine, this checkout beside another one in the same call:
#   run(command="bash benchmarks/gpu_runtime.sh", carry=[".whl", ".before"])
# .before/ holds the other checkout's core/ and backends/ (an ignored folder; see
# benchmarks/runtime.py).  Installs offline, runs the NVIDIA backend's device tests, then
# benchmarks/runtime.py on cuda:0 against .before (launch with at.Array and torch tensors,
# first call of a new kernel).
set -u
OUT=${OUT:-/tmp/anytile-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-build-isolation .whl/*.whl -e . -e backends/nvidia \
    -e conformance >"$OUT/install.log" 2>&1 || { echo "install failed:"; tail -20 "$OUT/install.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== device tests ($(date +%T))"
timeout 240 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests/test_device.py \
    backends/nvidia/tests/test_raw_launch.py tests/runtime -x 2>&1 | tail -4
echo "== runtime benchmark ($(date +%T))"
timeout 300 python3 benchmarks/runtime.py --device cuda:0 --against .before --rounds ${ROUNDS:-5}
