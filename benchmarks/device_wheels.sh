#!/usr/bin/env bash
# On a machine with network (not the GPU machine, which has none): the wheels that
# benchmarks/gpu.sh installs there for its Python 3.12 and that it lacks (stevedore; pyopencl
# and its dependencies for the OpenCL plugin), into the ignored folder .whl/.  Carry .whl to
# the GPU machine with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl stevedore==5.10.0 pyopencl==2026.1.4 pytools \
    platformdirs siphash24 typing_extensions
ls -la .whl
