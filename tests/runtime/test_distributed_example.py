"""``examples/distributed_layernorm.py`` under ``torchrun`` on CPUs (gloo): two ranks, each
running anytile kernels on its torch tensors, give the result of one process.  torch is
not a dependency of anytile: without it the test is skipped (``make test-distributed``
installs it and runs this); the GPU run (NCCL, a GPU per rank) is in
``bash benchmarks/gpu.sh multi``."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed here (make test-distributed "
                                    "installs it and runs this test)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed_layernorm.py"


def _run(tmp_path, *launcher):
    out = tmp_path / f"y{len(launcher)}.npy"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, *launcher, str(EXAMPLE), "--cpu", "--rows", "64",
                           "--cols", "4096", "--save", str(out)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK" in done.stdout
    return np.load(out), done.stdout


def test_two_ranks_with_gloo_give_one_processs_result(tmp_path):
    one, _ = _run(tmp_path)
    two, said = _run(tmp_path, "-m", "torch.distributed.run", "--nproc-per-node", "2")
    assert "2 rank(s) on CPUs, gloo" in said
    assert one.shape == two.shape == (64, 4096)
    np.testing.assert_allclose(two, one, atol=1e-5, rtol=0)
