"""Hopper's warpgroup MMA without a GPU: the swizzled operand layout's arithmetic, and whole
pipelined matmuls run on the host simulator with the MMA emulated (``warpgroup_sim.py``:
each MMA reads shared memory at the wait that retires it, the latest moment the hardware
could), so the descriptors, the swizzle, the row permutation of A, the extra pipeline slot
and the waits kept in flight are all checked against NumPy.  The same kernels run on an H100
and H200 in test_device.py."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu import pipeline
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile.ir.types import f16
from anytile_nvidia.warpgroup import SwizzledPanels, swizzle_width, swizzled_offset, warpgroup_row
from anytile_nvidia.warpgroup_sim import simulated_hopper_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_simulated as ts  # noqa: E402

#: minutes on the host GPU simulator: `make test-all` runs them
pytestmark = pytest.mark.slow

#: a wait of the emulated MMA (dot site, pending) leaving one group in flight
WAIT_ONE = re.compile(r'@"anytile_sim_wgmma_wait"\(i32 \d+, i32 1,')


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
    assert bool(WAIT_ONE.search(text)) == in_flight
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


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("BM,BN,D,num_warps", [(64, 32, 64, 4), (128, 64, 32, 8)])
def test_attention_on_the_emulated_warpgroup_mma(causal, BM, BN, D, num_warps):
    """Both of attention's dots on the warpgroup MMA: q.k with q copied once into its own
    swizzled buffer and K (read along D) kept K-major in column panels; p.v with p's
    fragments straight from the first dot's accumulator registers and V N-major."""
    N = 2 * BM
    rng = np.random.default_rng(D + BN)
    q, k, v = (rng.standard_normal((N, D)).astype(np.float16) for _ in range(3))
    out = np.zeros((N, D), np.float16)
    sig = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "O": "*fp16:16", "sm_scale": "fp32",
           "N_CTX": "i32:16"}
    module = ts.ir_of(ts.attention_kernel, sig, {"BM": BM, "BN": BN, "D": D, "CAUSAL": causal},
                      num_warps=num_warps)
    text = simulate_kernel(module, (N // BM,), [q, k, v, out, 0.125 * 1.44269504, N], num_warps,
                           target=simulated_hopper_target())
    assert '@"anytile_sim_wgmma_issue"(' in text and '@"anytile_sim_wgmma_issue_registers"(' in text
    s = q.astype(np.float32) @ k.astype(np.float32).T * 0.125
    if causal:
        s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=2e-3, rtol=1e-2)


def test_attentions_buffers_on_sm_90():
    """q in one swizzled buffer (rows permuted), K in column panels, V row panels; with no
    accumulator carried through a dot alone, no slot is kept for reads in flight."""
    sig = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "O": "*fp16:16", "sm_scale": "fp32",
           "N_CTX": "i32:16"}
    compiled = at.compile(ts.attention_kernel, target="nvidia:sm_90", signature=sig,
                          constexprs={"BM": 128, "BN": 64, "D": 64, "CAUSAL": False}, num_stages=3)
    text = compiled.asm["laid-out ir"]
    assert "shared<1x128x64xf16, swizzle 128 warps 4 in-flight 1>" in text
    assert "shared<3x64x64xf16, swizzle 128 columns in-flight 0>" in text
    assert "shared<3x64x64xf16, swizzle 128 in-flight 0>" in text
    ptx = compiled.asm["ptx"]
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ptx.count("wgmma.mma_async") == 8 + 8      # q.k: 4 K steps x 2 M-tiles; p.v alike


@at.jit
def _scaled_operand_matmul(a_ptr, b_ptr, c_ptr, K, SCALE_A: tl.constexpr, BM: tl.constexpr,
                           BN: tl.constexpr, BK: tl.constexpr):
    # one operand loaded (pipelined), the other computed in registers
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        if SCALE_A:
            a = (a * 2.0).to(tl.float16)
        else:
            b = (b * 2.0).to(tl.float16)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("scale_a", [True, False])
def test_an_operand_in_registers_is_staged_swizzled(scale_a):
    """A computed A (not laid out as MMA fragments) or a computed B goes to the scratch space,
    swizzled (A's rows permuted), and the dot waits for its own MMAs there."""
    BM, BN, BK, K = 64, 32, 32, 96
    rng = np.random.default_rng(7)
    a = rng.standard_normal((BM, K)).astype(np.float16)
    b = rng.standard_normal((K, BN)).astype(np.float16)
    c = ts.poisoned((BM, BN), np.float32)
    module = ts.ir_of(_scaled_operand_matmul, {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16",
                                               "c_ptr": "*fp32:16", "K": "i32:16"},
                      {"SCALE_A": scale_a, "BM": BM, "BN": BN, "BK": BK}, num_warps=4)
    text = simulate_kernel(module, (1,), [a, b, c, K], 4, target=simulated_hopper_target())
    assert '@"anytile_sim_wgmma_issue"(' in text
    assert not WAIT_ONE.search(text)
    want = (2.0 * a.astype(np.float64)) @ b if scale_a else a.astype(np.float64) @ (2.0 * b.astype(np.float64))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


@at.jit
def _two_accumulators(a_ptr, b_ptr, d_ptr, c_ptr, e_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr):
    # two dots in one loop, each accumulating in place: both kept in flight, each wait
    # retiring the other's group of the previous iteration
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    other = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        d = tl.load(d_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
        other = tl.dot(a, d, other)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(e_ptr + rm[:, None] * BN + rn[None, :], other)


def test_two_dots_in_flight_in_one_loop():
    BM, BN, BK, K = 64, 32, 32, 160
    rng = np.random.default_rng(11)
    a = rng.standard_normal((BM, K)).astype(np.float16)
    b, d = (rng.standard_normal((K, BN)).astype(np.float16) for _ in range(2))
    c, e = ts.poisoned((BM, BN), np.float32), ts.poisoned((BM, BN), np.float32)
    sig = {n: "*fp16:16" for n in ("a_ptr", "b_ptr", "d_ptr")}
    sig.update({"c_ptr": "*fp32:16", "e_ptr": "*fp32:16", "K": "i32:16"})
    module = ts.ir_of(_two_accumulators, sig, {"BM": BM, "BN": BN, "BK": BK}, num_warps=4)
    text = simulate_kernel(module, (1,), [a, b, d, c, e, K], 4, target=simulated_hopper_target())
    assert len(WAIT_ONE.findall(text)) == 2             # each dot waits for one group less
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(e, a.astype(np.float64) @ d, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_a_slot_read_both_ways_on_the_simulator(arch):
    """``x`` copied once into a pipeline slot and read by one dot as it is and by another
    transposed, in place (the slot's transposed view: swizzled panels read K-major on
    sm_90's warpgroup MMA, padded rows read as padded columns by sm_80's ``mma.sync``); the
    loops' ``a`` and ``g`` staged once for both: the sums are NumPy's."""
    BM, BK, BN, steps, split = 64, 64, 32, 5, 2
    args, want_c, want_d = ts.both_ways_data(BM, BK, BN, steps)
    compiled = at.compile(ts.both_ways_kernel, target=f"nvidia:{arch}", signature=ts.BOTH_WAYS_SIG,
                          constexprs={"BM": BM, "BK": BK, "BN": BN}, num_warps=4, num_stages=3)
    assert compiled.asm["laid-out ir"].count("shared_load {transposed = True}") == 2
    target = simulated_hopper_target() if arch == "sm_90" else None
    text = simulate_kernel(compiled.module, (1,), [*args, steps, split], 4, target=target)
    assert ("anytile_sim_wgmma_issue" in text) == (arch == "sm_90")
    c, d = args[3], args[4]
    np.testing.assert_allclose(c, want_c, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(d, want_d, rtol=1e-3, atol=1e-2)
