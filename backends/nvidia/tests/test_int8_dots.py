"""int8 dots on Hopper's warpgroup MMA (``wgmma ... k32 .s32.s8.s8``): taken where B is loaded
along K (``x @ W.T`` with ``W`` stored N x K), both operands copied as they are into 8-bit
swizzled panels; a B loaded along N stays on ``mma.sync``.  The emulated warpgroup MMA
(``warpgroup_sim``) runs them on the host simulator, the products summed in wrapping 32-bit
integers as the hardware sums them."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile_nvidia.stages import find_ptxas
from anytile_nvidia.warpgroup_sim import simulated_hopper_target

sys.path.insert(0, str(Path(__file__).parent))
import test_simulated as ts  # noqa: E402
from test_float8_dots import _matmul8  # noqa: E402

SIG = {"a_ptr": "*i8:16", "b_ptr": "*i8:16", "c_ptr": "*i32:16", "M": "i32", "N": "i32:16",
       "K": "i32:16"}
#: the emulated MMA's type code of int8 x int8 (A's type, and B's times 16)
INT8 = 4 | 4 << 4


def _operands(M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    return a, b, a.astype(np.int64) @ b.astype(np.int64)


def _module(along_k, BM, BN, BK, num_warps):
    return ts.ir_of(_matmul8, SIG, {"B_ALONG_K": along_k, "BM": BM, "BN": BN, "BK": BK,
                                    "ACC": tl.int32},
                    num_warps=num_warps)


def _issued(text):
    return re.findall(r'@"anytile_sim_wgmma_issue"\([^)]*i32 (\d+), i32 \d+, i32 \d+, i32 \d+\)', text)


@pytest.mark.parametrize("BM,BN,BK,num_warps,K", [
    (64, 32, 64, 4, 192),       # A and B in 64-byte panels
    (64, 16, 128, 4, 256),      # 128-byte panels, the narrowest N
    (128, 32, 32, 8, 96),       # two warpgroups, 32-byte panels
    (64, 32, 64, 4, 80),        # a masked K tail
])
def test_int8_matmul_on_the_emulated_warpgroup_mma(BM, BN, BK, num_warps, K):
    M, N = BM, 2 * BN
    a, b, want = _operands(M, N, K, seed=K + BN)
    c = ts.poisoned((M, N), np.int32)
    module = _module(True, BM, BN, BK, num_warps)
    text = simulate_kernel(module, (1, 2), [a, np.ascontiguousarray(b.T), c, M, N, K], num_warps,
                           target=simulated_hopper_target())
    issued = _issued(text)
    assert issued and set(issued) == {str(INT8)}
    np.testing.assert_array_equal(c, want)


def test_int8_sums_wrap_in_32_bits():
    """Sums past 2^31 wrap, as the instruction's s32 accumulator does (no ``.satfinite``):
    an accumulator started near the top of the range."""
    BM = BN = 64
    BK, K = 64, 128

    @at.jit
    def offset_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        acc = tl.full((BM, BN), 2147483000, tl.int32)
        for k in range(0, K, BK):
            acc = tl.dot(tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]),
                         tl.load(b_ptr + (k + rk)[:, None] + rn[None, :] * K), acc)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    a = np.full((BM, K), 127, np.int8)
    b = np.full((K, BN), 127, np.int8)
    c = ts.poisoned((BM, BN), np.int32)
    module = ts.ir_of(offset_matmul, {"a_ptr": "*i8:16", "b_ptr": "*i8:16", "c_ptr": "*i32:16",
                                      "K": "i32:16"}, {"BM": BM, "BN": BN, "BK": BK}, num_warps=4)
    text = simulate_kernel(module, (1,), [a, np.ascontiguousarray(b.T), c, K], 4,
                           target=simulated_hopper_target())
    assert _issued(text)
    want = np.int64(2147483000) + 127 * 127 * K
    np.testing.assert_array_equal(c, np.full((BM, BN), (want + 2**31) % 2**32 - 2**31, np.int32))


def test_b_along_n_stays_on_mma_sync():
    """The instruction reads 8-bit B K-major only: a B loaded along N keeps ``mma.sync`` (its
    operands from registers, as before), and no pipeline slot holds it."""
    M, N, K, BM, BN, BK = 64, 64, 96, 64, 32, 32
    a, b, want = _operands(M, N, K, seed=3)
    c = ts.poisoned((M, N), np.int32)
    module = _module(False, BM, BN, BK, 4)
    assert "shared<" not in str(module)
    text = simulate_kernel(module, (1, 2), [a, b, c, M, N, K], 4, target=simulated_hopper_target())
    assert "anytile_sim_wgmma_issue" not in text
    np.testing.assert_array_equal(c, want)


def test_int8_wgmma_in_ptx():
    """sm_90's PTX: k32 s32.s8.s8 MMAs on descriptors, no scale or transpose operands (the
    integer form has none), B in a K-major slot; assembled by ptxas where it is installed."""
    compiled = at.compile(_matmul8, target="nvidia:sm_90", signature=SIG, num_warps=8,
                          constexprs={"B_ALONG_K": True, "BM": 128, "BN": 256, "BK": 128, "ACC": tl.int32},
                          num_stages=3)
    laid = compiled.asm["laid-out ir"]
    assert "x128x128xi8, swizzle 128 warps 8 in-flight 1 bytes 1>" in laid
    assert "x128x256xi8, swizzle 128 columns in-flight 1 bytes 1>" in laid      # B stored N x K
    ptx = compiled.asm["ptx"]
    mmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k32\.s32\.s8\.s8 \{[^}]*\}, %rd\d+, %rd\d+, p;",
                      ptx)
    assert len(mmas) == 128 // 32
    assert "mma.sync" not in ptx and "wgmma.wait_group.sync.aligned 1;" in ptx
    if find_ptxas() is not None:
        assert compiled.asm["cubin"][:4] == b"\x7fELF" and compiled.metadata["spills"] == 0


def test_b_along_n_keeps_mma_sync_in_ptx():
    compiled = at.compile(_matmul8, target="nvidia:sm_90", signature=SIG, num_warps=8,
                          constexprs={"B_ALONG_K": False, "BM": 128, "BN": 256, "BK": 128, "ACC": tl.int32},
                          num_stages=3)
    ptx = compiled.asm["ptx"]
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx and "wgmma" not in ptx


def test_sm_80_keeps_mma_sync():
    compiled = at.compile(_matmul8, target="nvidia:sm_80", signature=SIG, num_warps=8,
                          constexprs={"B_ALONG_K": True, "BM": 128, "BN": 128, "BK": 64, "ACC": tl.int32},
                          num_stages=3)
    assert "wgmma" not in compiled.asm["ptx"] and "mma.sync" in compiled.asm["ptx"]
