"""Triton's occupancy formulas on host devices: a program runs alone on a core, so a kernel's
``warmup`` reads as holding all of the core's registers and shared memory, and the formula
of Triton's fused-softmax tutorial gives one program per core (it divided by ``None`` and by
zero before)."""
import numpy as np
import pytest

import anytile.language as tl
from anytile.triton_compat import device_properties
from anytile.triton_compat.compiler import jit_class


def _row_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    row = tl.load(x_ptr + tl.program_id(0) * n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(row, axis=0))


@pytest.mark.parametrize("num_warps", [1, 4, 8, 32])
def test_a_host_kernel_gives_one_program_per_core(device, rng, num_warps):
    if device.backend.triton_backend:
        pytest.skip(f"{device} is a GPU: its kernels report their own registers")
    kernel = jit_class()(_row_sums)
    x = rng.standard_normal((3, 50)).astype(np.float32)
    out = np.full(3, np.nan, np.float32)
    compiled = kernel.warmup(x, out, 50, BLOCK=64, num_warps=num_warps, grid=(1,),
                             device=device)
    props = device_properties(device)
    assert props["max_num_regs"] > 0 and props["max_shared_mem"] > 0
    assert isinstance(compiled.n_regs, int) and compiled.n_regs > 0
    occupancy = props["max_num_regs"] // (compiled.n_regs * props["warpSize"] * num_warps)
    occupancy = min(occupancy, props["max_shared_mem"] // compiled.metadata.shared)
    assert occupancy == 1
    compiled[(3, 1, 1)](x, out, 50, 64)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5)
