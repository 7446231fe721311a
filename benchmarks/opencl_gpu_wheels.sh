#!/usr/bin/env bash
# Here (not on the GPU machine, which has no network): the wheels benchmarks/opencl_gpu.sh
# installs there, for its Python 3.12, into the ignored folder .whl/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl stevedore==5.10.0 pyopencl==2026.1.4 pytools \
    platformdirs siphash24 typing_extensions
ls -la .whl
