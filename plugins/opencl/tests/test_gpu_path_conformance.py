"""The conformance suite's areas where elements move between work-items (reductions, scans,
shapes, dot, whole kernels, atomics, control flow, gathers), run through the GPU code path on
``opencl:0``: 128 work-items per program (PoCL runs them; ``make test``'s conformance run
takes the device's own path).  A separate process: plans compiled for the device's own
architecture earlier in this one would be reused."""
import os
import subprocess
import sys

import pytest

from ocl_kit import ARCHES, opencl_device

#: minutes (every area through the GPU code path on PoCL): `make test-all` runs it
pytestmark = pytest.mark.slow

AREAS = "reductions or shapes or dot or kernels or atomics or control-flow or gather"


@pytest.mark.parametrize("shard", ["0/2", "1/2"])     # halves that test processes share
def test_gpu_path_is_conformant(shard):
    opencl_device()
    env = dict(os.environ, ANYTILE_OPENCL_ARCH=ARCHES["gpu128x4"][0])
    done = subprocess.run([sys.executable, "-m", "anytile", "conformance", "--device", "opencl:0",
                           "-k", AREAS, "--shard", shard], env=env, capture_output=True,
                          text=True, timeout=900)
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0 and done.stdout.rstrip().endswith("CONFORMANT"), tail
    total = next(line.split() for line in done.stdout.splitlines() if line.startswith("total"))
    assert int(total[1]) >= 40 and total[2] == "0", total       # passed, failed
