"""float8 dots on Hopper's warpgroup MMA (``wgmma ... k32 .e4m3/.e5m2``): the language widens
float8 operands to f16, ``narrow.py`` gives the dot its float8 operands back where both are
loaded along K, and the emulated warpgroup MMA (``warpgroup_sim``) runs the result on the host
simulator, reading each operand byte where the hardware would."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile_nvidia.warpgroup_sim import simulated_hopper_target

sys.path.insert(0, str(Path(__file__).parent))
import test_simulated as ts  # noqa: E402

FORMATS = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}
#: what an emulated MMA's type code says: A's type, and B's times 16
KINDS = {("fp8e4nv", "fp8e4nv"): 2 | 2 << 4, ("fp8e4nv", "fp8e5"): 2 | 3 << 4,
         ("fp8e5", "fp8e5"): 3 | 3 << 4}


@at.jit
def _matmul8(a_ptr, b_ptr, c_ptr, M, N, K, B_ALONG_K: tl.constexpr, BM: tl.constexpr,
             BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr = tl.float32):
    # A is M x K row-major; B is K x N, stored N x K (K-major) or K x N (N-major); 8-bit
    # elements (float8 here, int8 in test_int8_dots.py with ``ACC=tl.int32``)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0)
        if B_ALONG_K:
            b_ptrs = b_ptr + (k + rk)[:, None] + rn[None, :] * K
        else:
            b_ptrs = b_ptr + (k + rk)[:, None] * N + rn[None, :]
        b = tl.load(b_ptrs, mask=(k + rk)[:, None] < K, other=0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def _operands(fmt_a, fmt_b, M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((M, K)) * 2).astype(FORMATS[fmt_a])
    b = (rng.standard_normal((K, N)) * 2).astype(FORMATS[fmt_b])
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _module(fmt_a, fmt_b, along_k, BM, BN, BK, num_warps):
    sig = {"a_ptr": f"*{fmt_a}:16", "b_ptr": f"*{fmt_b}:16", "c_ptr": "*fp32:16", "M": "i32",
           "N": "i32:16", "K": "i32:16"}
    return ts.ir_of(_matmul8, sig, {"B_ALONG_K": along_k, "BM": BM, "BN": BN, "BK": BK},
                    num_warps=num_warps)


@pytest.mark.parametrize("fmt_a,fmt_b", sorted(KINDS))
@pytest.mark.parametrize("BM,BN,BK,num_warps,K", [
    (64, 32, 64, 4, 192),       # A and B in 64-byte panels
    (64, 16, 128, 4, 256),      # 128-byte panels, the narrowest N
    (128, 32, 32, 8, 96),       # two warpgroups, 32-byte panels
    (64, 32, 64, 4, 80),        # a masked K tail
])
def test_float8_matmul_on_the_emulated_warpgroup_mma(fmt_a, fmt_b, BM, BN, BK, num_warps, K):
    M, N = BM, 2 * BN
    a, b, want = _operands(fmt_a, fmt_b, M, N, K, seed=K + BN)
    c = ts.poisoned((M, N), np.float32)
    module = _module(fmt_a, fmt_b, True, BM, BN, BK, num_warps)
    text = simulate_kernel(module, (1, 2), [a, np.ascontiguousarray(b.T), c, M, N, K], num_warps,
                           target=simulated_hopper_target())
    issued = re.findall(r'@"anytile_sim_wgmma_issue"\([^)]*i32 (\d+), i32 \d+, i32 \d+, i32 \d+\)', text)
    assert issued and set(issued) == {str(KINDS[fmt_a, fmt_b])}
    assert "fpext" not in text and "half" not in text        # no widening left
    # float8 products are exact in f32; only the f32 sums round
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_b_along_n_stays_widened():
    """B read along N would need a transpose on its way to shared memory (the MMA reads
    8-bit operands K-major only): that dot keeps its f16 operands (on ``mma.sync``)."""
    M, N, K, BM, BN, BK = 64, 64, 96, 64, 32, 32
    a, b, want = _operands("fp8e4nv", "fp8e4nv", M, N, K, seed=3)
    c = ts.poisoned((M, N), np.float32)
    module = _module("fp8e4nv", "fp8e4nv", False, BM, BN, BK, 4)
    text = simulate_kernel(module, (1, 2), [a, b, c, M, N, K], 4, target=simulated_hopper_target())
    assert "anytile_sim_wgmma_issue" not in text            # f16 operands from registers
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_float8_wgmma_in_ptx():
    """sm_90's PTX: k32 MMAs on e4m3 x e5m2, no transpose operands; nothing widened."""
    sig = {"a_ptr": "*fp8e4nv:16", "b_ptr": "*fp8e5:16", "c_ptr": "*fp32:16", "M": "i32",
           "N": "i32:16", "K": "i32:16"}
    compiled = at.compile(_matmul8, target="nvidia:sm_90", signature=sig, num_warps=8,
                          constexprs={"B_ALONG_K": True, "BM": 128, "BN": 256, "BK": 128}, num_stages=3)
    laid = compiled.asm["laid-out ir"]
    assert "shared<4x128x128xf8e4m3, swizzle 128 warps 8 in-flight 1 bytes 1>" in laid
    assert "shared<4x128x256xf8e5m2, swizzle 128 columns in-flight 1 bytes 1>" in laid  # B stored N x K
    ptx = compiled.asm["ptx"]
    mmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k32\.f32\.e4m3\.e5m2 [^;]*, p, 1, 1;", ptx)
    assert len(mmas) == 128 // 32
    assert "cvt.rn.f16" not in ptx and "mma.sync" not in ptx


@at.jit
def _fp8_desc_matmul(a_desc, bt_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr):
    # B given as its N x K transpose (K-major), read as rows and ``.T``, as Triton's fp8
    # tutorial passes it
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), bt_desc.load([pid_n * BN, k * BK]).T, acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@pytest.mark.parametrize("BM,BN,BK,num_warps,M,N,K", [
    (64, 64, 128, 4, 64, 128, 256),     # A and B in one 128-byte panel each
    (128, 32, 64, 8, 200, 80, 160),     # two warpgroups, 64-byte panels, boxes past the ends
])
def test_float8_descriptors_copy_whole_boxes(BM, BN, BK, num_warps, M, N, K):
    """float8 descriptors reach the copy unit (boxes of bytes) and the float8 MMA."""
    from test_tma import _desc
    from tma_kit import box_maps, lowered as _lowered, run as _run
    sig = {"a_desc": f"tensordesc<fp8e4nv[{BM}, {BK}]>", "bt_desc": f"tensordesc<fp8e5[{BN}, {BK}]>",
           "c_ptr": "*fp32:16", "M": "i32", "N": "i32", "K": "i32"}
    module, kernel = _lowered(_fp8_desc_matmul, sig, {"BM": BM, "BN": BN, "BK": BK}, num_warps)
    a, b, want = _operands("fp8e4nv", "fp8e5", M, N, K, seed=M)
    bt = np.ascontiguousarray(b.T)
    c = ts.poisoned((M, N), np.float32)
    values = {"c_ptr": c, "M": M, "N": N, "K": K,
              "a_desc_at_base": a, "a_desc_at_shape0": M, "a_desc_at_shape1": K, "a_desc_at_stride0": K,
              "bt_desc_at_base": bt, "bt_desc_at_shape0": N, "bt_desc_at_shape1": K,
              "bt_desc_at_stride0": K}
    _run(module, kernel, values, (-(-M // BM), -(-N // BN)), num_warps)
    text = str(kernel)
    assert "anytile_sim_tma_copy" in text and "cp.async" not in text
    assert {_desc(m) for m in box_maps(kernel)} == {"a_desc", "bt_desc"}
    assert {m.elem for m in box_maps(kernel)} == {"f8e4m3", "f8e5m2"}
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


@at.jit
def _carried_kmajor_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr):
    # B held K-major (N x K row-major: ``x @ W.T``), its pointers carried and advanced
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] + rn[None, :] * K
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("elem", ["fp16", "fp8e4nv"])
def test_b_along_k_by_carried_pointers_copies_16_bytes(elem):
    """A carried pointer tile that runs along K takes the transposed access layout, so every
    copy of B (the prologue's and the loop's) moves 16 bytes a thread, not one element."""
    sig = {"a_ptr": f"*{elem}:16", "b_ptr": f"*{elem}:16", "c_ptr": "*fp32:16", "K": "i32:16"}
    compiled = at.compile(_carried_kmajor_matmul, target="nvidia:sm_90", signature=sig, num_warps=8,
                          constexprs={"BM": 128, "BN": 128, "BK": 128 if elem == "fp8e4nv" else 64},
                          num_stages=3)
    ptx = compiled.asm["ptx"]
    assert not re.search(r"ld\.global\.(b8|b16|u8|u16)", ptx)
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], (\d+)", ptx)
    assert len(copies) == 3 * 8 and set(copies) == {"16"}      # (A + B) x 4 a thread, 3 sites
    assert compiled.metadata["float8_dots"] == (elem == "fp8e4nv")


def test_carried_float8_pointers_on_the_emulated_warpgroup_mma():
    BM, BN, BK, K = 64, 32, 64, 192
    a, b, want = _operands("fp8e4nv", "fp8e4nv", BM, BN, K, seed=11)
    c = ts.poisoned((BM, BN), np.float32)
    module = ts.ir_of(_carried_kmajor_matmul, {"a_ptr": "*fp8e4nv:16", "b_ptr": "*fp8e4nv:16",
                                               "c_ptr": "*fp32:16", "K": "i32:16"},
                      {"BM": BM, "BN": BN, "BK": BK}, num_warps=4)
    text = simulate_kernel(module, (1,), [a, np.ascontiguousarray(b.T), c, K], 4,
                           target=simulated_hopper_target())
    assert "anytile_sim_wgmma_issue" in text
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


@at.jit
def _fp8_attention(Q, K, Vt, O, sm_scale, N_CTX, BM: tl.constexpr, BN: tl.constexpr,
                   D: tl.constexpr):
    # float8 attention as Triton's tutorial runs it on Hopper: V stored transposed (D x N),
    # read along the keys (K-major for p.v), p rounded to float8 in registers
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n, offs_d = tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.zeros((BM,), tl.float32) - float("inf")
    l_i = tl.zeros((BM,), tl.float32) + 1.0
    acc = tl.zeros((BM, D), tl.float32)
    for start_n in range(0, N_CTX, BN):
        k = tl.load(K + (start_n + offs_n)[None, :] * D + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * sm_scale)
        p = tl.math.exp2(qk * sm_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(Vt + offs_d[None, :] * N_CTX + (start_n + offs_n)[:, None])
        acc = tl.dot(p.to(tl.float8e5), v, acc * alpha[:, None])
        m_i = m_ij
    tl.store(O + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


_ATTN8_SIG = {"Q": "*fp8e5:16", "K": "*fp8e5:16", "Vt": "*fp8e5:16", "O": "*fp32:16",
              "sm_scale": "fp32", "N_CTX": "i32:16"}


def test_float8_attention_p_from_registers_on_the_emulated_warpgroup_mma():
    """p.v runs on the float8 MMA with p's 8-bit A fragments built from the first dot's
    accumulator registers (a swap inside each quad of lanes) and V^T pipelined K-major."""
    BM, BN, D, N = 64, 32, 32, 128
    rng = np.random.default_rng(5)
    q, k, vt = ((rng.standard_normal(s) * 0.5).astype(ml_dtypes.float8_e5m2)
                for s in ((N, D), (N, D), (D, N)))
    out = ts.poisoned((N, D), np.float32)
    module = ts.ir_of(_fp8_attention, _ATTN8_SIG, {"BM": BM, "BN": BN, "D": D}, num_warps=4)
    text = simulate_kernel(module, (N // BM,), [q, k, vt, out, 0.25 * 1.44269504, N], 4,
                           target=simulated_hopper_target())
    registers = re.findall(r'@"anytile_sim_wgmma_issue_registers"\([^)]*i32 (\d+), i32 \d+, i32 \d+, i32 \d+\)',
                           text)
    assert registers and set(registers) == {str(KINDS["fp8e5", "fp8e5"])}
    s = q.astype(np.float64) @ k.astype(np.float64).T * 0.25
    m = s.max(1, keepdims=True)
    p = np.exp2((s - m) * 1.44269504).astype(ml_dtypes.float8_e5m2).astype(np.float64)
    l_ref = np.exp2((s - m) * 1.44269504).sum(1, keepdims=True)
    ref = p @ vt.astype(np.float64).T / l_ref
    # p rounds to float8 against each block's running maximum: a few float8 steps apart
    np.testing.assert_allclose(out, ref, atol=0.1, rtol=0.1)
    assert np.abs(out - ref).mean() < 0.02


def test_float8_attention_compiles_without_spills_on_sm_90():
    """The float8 p.v reads V^T from its pipeline buffer and p from registers, converted
    from f32 by pairs: no f16 copy of V in registers, no staging of p, nothing spilled."""
    compiled = at.compile(_fp8_attention, target="nvidia:sm_90", signature=_ATTN8_SIG,
                          constexprs={"BM": 128, "BN": 128, "D": 128}, num_warps=8, num_stages=3)
    laid = compiled.asm["laid-out ir"]
    assert laid.count("swizzle 128 columns in-flight 0 bytes 1>>") == 2       # K and V^T slots
    ptx = compiled.asm["ptx"]
    assert "cvt.rn.f16" not in ptx and "mma.sync" not in ptx
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.e5m2\.e5m2 \{[^}]*\}, \{", ptx)) == 4
    # p rounded to float8 two values an instruction: 64 values a thread, 32 conversions
    assert ptx.count("cvt.rn.satfinite.e5m2x2.f32") == 32
    assert compiled.metadata["spills"] == 0 and compiled.metadata["registers"] <= 248
