"""Hopper's warpgroup MMA without a GPU: the swizzled operand layout's arithmetic, and whole
pipelined matmuls run on the host simulator with the MMA emulated (``warpgroup_sim.py``:
each MMA reads shared memory at the wait that retires it, the latest moment the hardware
could), so the descriptors, the swizzle, the row permutation of A, the extra pipeline slot
and the waits kept in flight are all checked against NumPy.  The same kernels run on an H100
and H200 in test_device.py."""
import sys
from pathlib import Path

import numpy as np
import pytest

from anytile.codegen.gpu import pipeline
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile.ir.types import f16
from anytile_nvidia.warpgroup import SwizzledPanels, swizzle_width, swizzled_offset, warpgroup_row
from anytile_nvidia.warpgroup_sim import simulated_hopper_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_simulated as ts  # noqa: E402


@pytest.mark.parametrize("rows,cols", [(64, 16), (64, 32), (128, 64), (16, 128), (64, 256), (8, 96)])
def test_swizzled_panels_place_every_element_once_and_spread_each_atom_over_the_banks(rows, cols):
    width = swizzle_width(2 * cols)
    assert SwizzledPanels(width).problem((rows, cols), f16) is None
    offsets = np.array([[swizzled_offset(r, 2 * c, rows, width) for c in range(cols)]
                        for r in range(rows)])
    assert sorted(offsets.ravel()) == list(range(0, 2 * rows * cols, 2))       # a bijection
    # chunk j (16 bytes) of the 8 rows of an atom: 8 different groups of 4 banks, so neither
    # a warp's 16-byte copies of one chunk column nor the MMA's reads of it conflict
    for col in range(0, cols, 8):
        for atom in range(rows // 8):
            assert len({offsets[8 * atom + r, col] // 16 % 8 for r in range(8)}) == 8


def test_the_a_rows_permutation_is_a_permutation():
    for warps in (4, 8, 16):
        for rows in (64 * warps // 4, 128 * warps // 4):
            assert sorted(warpgroup_row(m, warps) for m in range(rows)) == list(range(rows))


def _run(kernel, BM, BN, BK, num_warps, K, dtype=np.float16, programs=(1, 2)):
    M, N = BM * programs[0], BN * programs[1]
    rng = np.random.default_rng(K + BN)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    if dtype == "bf16":
        # bfloat16 bits: the top half of each float32 (rounded towards zero)
        a_bits, b_bits = (x.view(np.uint32) >> 16 for x in (a, b))
        a, b = ((bits << 16).view(np.float32) for bits in (a_bits.astype(np.uint32), b_bits.astype(np.uint32)))
        args, sig = [a_bits.astype(np.uint16), b_bits.astype(np.uint16)], \
            {**ts.MATMUL_SIG16, "a_ptr": "*bf16:16", "b_ptr": "*bf16:16"}
    else:
        a, b = a.astype(np.float16), b.astype(np.float16)
        args, sig = [a, b], ts.MATMUL_SIG16
    c = ts.poisoned((M, N), np.float32)
    module = ts.ir_of(kernel, sig, {"BM": BM, "BN": BN, "BK": BK}, num_warps=num_warps)
    text = simulate_kernel(module, programs, [*args, c, M, N, K], num_warps,
                           target=simulated_hopper_target())
    return text, c, a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("BM,BN,BK,num_warps,K,in_flight", [
    (64, 32, 32, 4, 80, True),      # A and B in 64-byte panels, a masked K tail
    (64, 64, 16, 4, 128, True),     # A in 32-byte panels, B in 128-byte ones
    (128, 32, 64, 4, 192, True),    # two M-tiles per warpgroup
    (128, 16, 64, 8, 200, True),    # two warpgroups, B in 32-byte panels, a masked tail
    (64, 64, 128, 4, 256, True),    # A in two 128-byte panels
    (64, 32, 32, 4, 32, True),      # fewer iterations than stages
    (64, 32, 32, 4, 0, True),       # no iteration at all
    # 3 stages and the extra slot exceed the simulator's 128 KiB, 2 and it too: the dot
    # waits for its own MMAs, in 2 slots
    (64, 128, 128, 4, 256, False),
])
@pytest.mark.parametrize("kernel", [ts.k_loop_matmul, ts.carried_pointer_matmul])
def test_pipelined_matmul_on_the_emulated_warpgroup_mma(kernel, BM, BN, BK, num_warps, K, in_flight):
    text, c, want = _run(kernel, BM, BN, BK, num_warps, K)
    assert "anytile_sim_wgmma_issue" in text
    assert ('@"anytile_sim_wgmma_wait"(i32 1' in text) == in_flight
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_bf16_on_the_emulated_warpgroup_mma():
    text, c, want = _run(ts.k_loop_matmul, 64, 32, 32, 4, 96, dtype="bf16")
    assert "anytile_sim_wgmma_issue" in text
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_mmas_in_flight_need_the_pipelines_extra_slot(monkeypatch):
    """Without the slot ``reads_in_flight`` asks for, the copy started ahead overwrites the
    slot the previous iteration's MMAs still read: the emulation sees it."""
    monkeypatch.setattr(pipeline, "_reads_in_flight", lambda slots: 0)
    _, c, want = _run(ts.k_loop_matmul, 64, 32, 32, 4, 160, programs=(1, 1))
    assert np.abs(c - want).max() > 1.0
