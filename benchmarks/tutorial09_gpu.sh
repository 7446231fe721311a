#!/usr/bin/env bash
# Triton's tutorial 09 (persistent matmul: host-filled TMA descriptors, tensor descriptors,
# proton, cuBLAS reference) alone on the lent GPU, its output streamed:
#   run(command="bash benchmarks/tutorial09_gpu.sh", carry=[".whl", ".triton-src"])
set -u
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
step "install"
install_anytile /tmp/install.log
step "tutorial 09 through anytile on cuda:0"
SRC=$(realpath "${TRITON_SRC:-.triton-src}")
( cd /tmp && timeout ${T09_TIMEOUT:-480} python3 -u -m anytile run --as-triton --device cuda:0 \
    "$SRC/python/tutorials/09-persistent-matmul.py" ${T09_ARGS:-} 2>&1 | tee /tmp/t09.log | \
    grep -v "^\s*$" | cut -c1-160 | tail -60; echo "exit ${PIPESTATUS[0]}" )
step "done"
