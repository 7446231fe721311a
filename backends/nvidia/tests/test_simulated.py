"""The shared GPU lowering run on the host (one OS thread per GPU thread) against NumPy.

These check what a GPU run would: layouts, vector accesses, masks, shuffles, cross-warp
reductions, layout conversions, loops, atomics and tensor-core dots, with the LLVM IR the
NVIDIA backend generates from the same pipeline and tables (its ``mma.sync`` fragment maps,
its ``ldmatrix`` address arithmetic) except for the hooks that emit PTX (ids, barrier,
shuffles, math, kernel marking, the instructions themselves: executed from the tables)."""
import re

import numpy as np
import pytest
from anytile_conformance.catalogue import kernels as catalogue

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile_nvidia.simulated import simulated_nvidia_target

#: minutes on the host GPU simulator: `make test-all` runs them
pytestmark = pytest.mark.slow


def ir_of(fn, signature, constexprs, **options):
    return at.compile(fn, target="nvidia:sm_90", signature=signature, constexprs=constexprs,
                      **options).module


def simulate(module, grid, args, num_warps=4):
    """Run ``module`` on the host simulator with NVIDIA's tables (``gpusim``'s target)."""
    return simulate_kernel(module, grid, args, num_warps, target=simulated_nvidia_target())


def poisoned(shape, dtype):
    dtype = np.dtype(dtype)
    return np.full(shape, np.nan if dtype.kind == "f" else 77, dtype)


def _softmax_ref(x):
    w = x.astype(np.float64)
    e = np.exp(w - w.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.mark.parametrize("n,divisible", [(1000, ""), (1024, ":16")])
def test_vector_add(rng, n, divisible):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    module = ir_of(catalogue.vector_add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                                   "n": "i32" + divisible}, {"BLOCK": 256})
    simulate(module, (at.cdiv(n, 256),), [x, y, out, n])
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("shape,block,num_warps", [((7, 33), 64, 4), ((3, 1000), 1024, 4),
                                                   ((5, 128), 128, 1), ((2, 300), 512, 8)])
def test_softmax(rng, shape, block, num_warps):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    out = poisoned(shape, np.float32)
    module = ir_of(catalogue.softmax_kernel, {"out_ptr": "*fp32:16", "in_ptr": "*fp32:16",
                                              "in_row_stride": "i32", "out_row_stride": "i32",
                                              "n_cols": "i32"}, {"BLOCK": block},
                   num_warps=num_warps)
    simulate(module, (shape[0],), [out, x, shape[1], shape[1], shape[1]], num_warps)
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-5, atol=1e-7)


def test_persistent_softmax(rng):
    shape = (9, 100)
    x = rng.standard_normal(shape).astype(np.float32)
    out = poisoned(shape, np.float32)
    module = ir_of(catalogue.persistent_softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32",
                                                  "n_rows": "i32", "n_cols": "i32"}, {"BLOCK": 128})
    simulate(module, (4,), [out, x, shape[0], shape[1]])
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype,sig", [(np.float32, "*fp32"), (np.float16, "*fp16")])
def test_matmul_relu(rng, dtype, sig):
    M, N, K = 45, 37, 70
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    bias = rng.standard_normal(N).astype(np.float32)
    c = poisoned((M, N), dtype)
    names = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm")
    signature = {"a_ptr": sig, "b_ptr": sig, "bias_ptr": "*fp32", "c_ptr": sig,
                 **{k: "i32" for k in names}}
    module = ir_of(catalogue.matmul_kernel, signature, {"ACTIVATION": "relu", "BM": 16, "BN": 32,
                                                         "BK": 16, "GROUP_M": 2})
    simulate(module, (at.cdiv(M, 16) * at.cdiv(N, 32),), [a, b, bias, c, M, N, K, K, 1, N, 1, N])
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    tol = 2e-2 if dtype == np.float16 else 2 ** -10 * 4   # f32 dots may round inputs to tf32
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=tol, atol=tol * 10)


def test_layernorm(rng):
    R, N = 3, 300
    x = rng.standard_normal((R, N)).astype(np.float32) * 3 + 1
    w, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    y, mean, rstd = poisoned((R, N), np.float32), poisoned(R, np.float32), poisoned(R, np.float32)
    signature = {k: "*fp32" for k in ("x_ptr", "y_ptr", "w_ptr", "b_ptr", "mean_ptr", "rstd_ptr")}
    signature.update(stride="i32", n="i32", eps="fp32")
    module = ir_of(catalogue.layer_norm_kernel, signature, {"BLOCK": 512})
    simulate(module, (R,), [x, y, w, b, mean, rstd, N, N, 1e-5])
    x64 = x.astype(np.float64)
    m, r = x64.mean(1), 1 / np.sqrt(x64.var(1) + 1e-5)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, r, rtol=1e-5)
    np.testing.assert_allclose(y, (x64 - m[:, None]) * r[:, None] * w + b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,sig", [(np.float32, "*fp32"), (np.int16, "*i16")])
def test_transpose(rng, dtype, sig):
    M, N = 50, 70
    src = (rng.standard_normal((M, N)) * 100).astype(dtype)
    dst = poisoned((N, M), dtype)
    module = ir_of(catalogue.transpose_kernel, {"src": sig, "dst": sig, "m": "i32", "n": "i32"},
                   {"BM": 16, "BN": 32})
    simulate(module, (at.cdiv(M, 16), at.cdiv(N, 32)), [src, dst, M, N])
    np.testing.assert_array_equal(dst, src.T)


def test_atomic_histogram(rng):
    n, bins = 1000, 17
    data = rng.integers(0, 1000, n).astype(np.int32)
    hist = np.zeros(bins, np.int32)
    module = ir_of(catalogue.histogram_kernel, {"x_ptr": "*i32", "hist_ptr": "*i32", "n": "i32",
                                                "bins": "i32"}, {"BLOCK": 256})
    simulate(module, (at.cdiv(n, 256),), [data, hist, n, bins])
    np.testing.assert_array_equal(hist, np.bincount(data % bins, minlength=bins))


@at.jit
def reduce_2d_kernel(x_ptr, rows_ptr, cols_ptr, amax_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(rows_ptr + r, tl.sum(x, axis=1))
    tl.store(cols_ptr + c, tl.max(x, axis=0))
    tl.store(amax_ptr + r, tl.argmax(x, axis=1))


@pytest.mark.parametrize("R,C,num_warps", [(16, 64, 4), (64, 8, 2), (4, 256, 8), (2, 2, 4)])
def test_reductions_2d(rng, R, C, num_warps):
    x = rng.standard_normal((R, C)).astype(np.float32)
    rows, cols, amax = poisoned(R, np.float32), poisoned(C, np.float32), poisoned(R, np.int32)
    module = ir_of(reduce_2d_kernel, {"x_ptr": "*fp32", "rows_ptr": "*fp32", "cols_ptr": "*fp32",
                                      "amax_ptr": "*i32"}, {"R": R, "C": C}, num_warps=num_warps)
    simulate(module, (1,), [x, rows, cols, amax], num_warps)
    np.testing.assert_allclose(rows, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(cols, x.max(0))
    np.testing.assert_array_equal(amax, x.argmax(1))


@at.jit
def cumsum_kernel(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(out_ptr + r[:, None] * C + c[None, :], tl.cumsum(x, axis=1))


def test_cumsum(rng):
    x = rng.integers(-50, 50, (8, 32)).astype(np.int32)
    out = poisoned((8, 32), np.int32)
    module = ir_of(cumsum_kernel, {"x_ptr": "*i32", "out_ptr": "*i32"}, {"R": 8, "C": 32})
    simulate(module, (1,), [x, out])
    np.testing.assert_array_equal(out, np.cumsum(x, axis=1))


@at.jit
def while_if_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    i = 0
    while i < n:
        v = tl.load(x_ptr + i * BLOCK + offs)
        if i % 2 == 0:
            acc += v
        else:
            acc -= tl.exp(v)
        i += 1
    tl.store(out_ptr + offs, acc)


def test_while_and_if(rng):
    n, block = 5, 64
    x = rng.standard_normal((n, block)).astype(np.float32)
    out = poisoned(block, np.float32)
    module = ir_of(while_if_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": block})
    simulate(module, (1,), [x, out, n])
    x64 = x.astype(np.float64)
    ref = x64[0::2].sum(0) - np.exp(x64[1::2]).sum(0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@at.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr = "tf32"):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, c, input_precision=PRECISION))


@pytest.mark.parametrize("M,N,K,num_warps,sig", [(16, 16, 16, 1, "*fp16"), (64, 32, 32, 4, "*fp16"),
                                                 (32, 64, 16, 2, "*bf16"), (128, 32, 32, 8, "*fp16")])
def test_tensor_core_dot(rng, M, N, K, num_warps, sig):
    import ml_dtypes
    dtype = np.float16 if sig == "*fp16" else ml_dtypes.bfloat16
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c = rng.standard_normal((M, N)).astype(np.float32)
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    module = ir_of(dot_kernel, {"a_ptr": sig, "b_ptr": sig, "c_ptr": "*fp32"}, {"M": M, "N": N, "K": K},
                   num_warps=num_warps)
    text = simulate(module, (1,), [a, b, c], num_warps)
    assert "anytile_sim_scratch" in text  # the tensor-core path ran, not the FMA fallback
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("M,N,K,num_warps", [(16, 16, 32, 1), (64, 32, 64, 4), (32, 64, 32, 2),
                                             (128, 32, 64, 8)])
def test_int8_dot_on_tensor_cores(rng, M, N, K, num_warps):
    """int8 x int8 into int32 runs on ``mma.m16n8k32.s8`` (four bytes a register), wrapping
    as Triton's integer dot does."""
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = rng.integers(-2**31, 2**31, (M, N)).astype(np.int32)
    expected = (c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64) + 2**31) % 2**32 - 2**31
    sig = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32"}
    module = ir_of(dot_kernel, sig, {"M": M, "N": N, "K": K}, num_warps=num_warps)
    text = simulate(module, (1,), [a, b, c], num_warps)
    assert "anytile_sim_scratch" in text  # the tensor-core path ran, not the FMA fallback
    np.testing.assert_array_equal(c, expected)
    ptx = at.compile(dot_kernel, target="nvidia:sm_80", signature=sig, constexprs={"M": M, "N": N, "K": K},
                     num_warps=num_warps).asm["ptx"]
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx


@at.jit
def dot_store16_kernel(a_ptr, b_ptr, c_ptr, M_LIM, N_LIM, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr, MASKED: tl.constexpr, SHIFT: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    acc = tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
    mask = (rm[:, None] < M_LIM) & (rn[None, :] < N_LIM) if MASKED else None
    tl.store(c_ptr + SHIFT + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=mask)


@pytest.mark.parametrize("shift,run", [(0, "v4"), (4, "v2")])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_16_bit_dot_results_are_stored_in_whole_runs(rng, masked, num_warps, shift, run):
    """A 16-bit result in the accumulator layout (two elements a lane, four lanes over 16
    bytes of a row): where the rows' runs are 16-byte aligned, the four lanes of a quad
    transpose their words and each stores 16 contiguous bytes (``st.global.v4``, as Triton);
    where they are only 8-byte aligned, neighbour lanes trade one word and each stores 8.
    A warp's stores fill whole 32-byte sectors either way; masks hold for each run."""
    M, N, K, m_lim, n_lim = 64, 64, 32, 40, 48
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    flat = np.full(M * N + shift, -7.0, np.float16)
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M_LIM": "i32:16",
           "N_LIM": "i32:16"}
    consts = {"M": M, "N": N, "K": K, "MASKED": masked, "SHIFT": shift}
    module = ir_of(dot_store16_kernel, sig, consts, num_warps=num_warps)
    simulate(module, (1,), [a, b, flat, m_lim, n_lim], num_warps)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    if masked:
        keep = (np.arange(M)[:, None] < m_lim) & (np.arange(N)[None, :] < n_lim)
        want = np.where(keep, want, np.float16(-7.0))
    assert (flat[:shift] == np.float16(-7.0)).all()
    np.testing.assert_allclose(flat[shift:].reshape(M, N).astype(np.float32), want.astype(np.float32),
                               rtol=2e-3, atol=2e-3)
    ptx = at.compile(dot_store16_kernel, target="nvidia:sm_80", signature=sig, constexprs=consts,
                     num_warps=num_warps).asm["ptx"]
    other = {"v4": "v2", "v2": "v4"}[run]
    assert f"st.global.{run}.b32" in ptx and "shfl.sync.bfly" in ptx
    assert f"st.global.{other}.b32" not in ptx and "st.global.b32" not in ptx


def _tf32(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("M,N,K,num_warps", [(16, 16, 16, 1), (64, 32, 32, 4), (32, 64, 16, 2)])
def test_tf32_dot(rng, M, N, K, num_warps):
    """f32 dots run on tf32 tensor cores by default (as Triton): each product is of inputs
    rounded to tf32; ``input_precision="ieee"`` stays exact."""
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}
    for precision, (ea, eb) in (("tf32", (_tf32(a), _tf32(b))), ("ieee", (a, b))):
        c = c0.copy()
        module = ir_of(dot_kernel, sig, {"M": M, "N": N, "K": K, "PRECISION": precision},
                       num_warps=num_warps)
        text = simulate(module, (1,), [a, b, c], num_warps)
        assert ("anytile_sim_scratch" in text) == (precision == "tf32")
        expected = c0.astype(np.float64) + ea.astype(np.float64) @ eb.astype(np.float64)
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)
    ptx = at.compile(dot_kernel, target="nvidia:sm_80", signature=sig,
                     constexprs={"M": M, "N": N, "K": K, "PRECISION": "tf32"}, num_warps=num_warps).asm["ptx"]
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx and "cvt.rna.tf32.f32" in ptx


@at.jit
def row_sum_loop_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@pytest.mark.parametrize("n", [0, 5, 64, 200])
def test_prefetched_loop_loads(rng, n):
    from anytile.codegen.gpu.pipeline import pipeline_loops
    x = rng.standard_normal((3, max(n, 1))).astype(np.float32)
    out = poisoned(3, np.float32)
    module = ir_of(row_sum_loop_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    import copy
    assert pipeline_loops(copy.deepcopy(module).kernel) == 1
    simulate(module, (3,), [x, out, n])
    np.testing.assert_allclose(out, x[:, :n].astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_loops_that_store_are_not_prefetched():
    from anytile.codegen.gpu.pipeline import pipeline_loops
    module = ir_of(catalogue.persistent_softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "n_rows": "i32",
                                                  "n_cols": "i32"}, {"BLOCK": 128})
    assert pipeline_loops(module.kernel) == 0


@at.jit
def small_atomics_kernel(h_ptr, m_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(h_ptr + offs % 4, tl.full((BLOCK,), 0.5, tl.float16))
    tl.atomic_max(m_ptr + offs % 3, (offs * 7 % 11).to(tl.int16))
    tl.atomic_cas(c_ptr + offs % 2, tl.full((BLOCK,), 1.0, tl.float32), tl.full((BLOCK,), 2.0, tl.float32))


def test_16_bit_atomics_and_float_cas():
    h = np.zeros(4, np.float16)
    m = np.full(3, -5, np.int16)
    c = np.array([1.0, 3.0], np.float32)
    module = ir_of(small_atomics_kernel, {"h_ptr": "*fp16", "m_ptr": "*i16", "c_ptr": "*fp32"}, {"BLOCK": 64})
    simulate(module, (2,), [h, m, c])
    np.testing.assert_array_equal(h, np.full(4, 2 * 64 / 4 * 0.5, np.float16))
    offs = np.arange(64)
    np.testing.assert_array_equal(m, [max((offs[offs % 3 == r] * 7) % 11) for r in range(3)])
    np.testing.assert_array_equal(c, [2.0, 3.0])
    ptx = at.compile(small_atomics_kernel, target="nvidia:sm_80", signature={"h_ptr": "*fp16", "m_ptr": "*i16",
                     "c_ptr": "*fp32"}, constexprs={"BLOCK": 64}).asm["ptx"]
    assert "atom" in ptx


@at.jit
def bf16_add_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.atomic_add(out_ptr + tl.arange(0, BLOCK) % 4, tl.load(x_ptr + tl.arange(0, BLOCK)))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_bf16_atomics_are_compare_and_swap_loops(arch):
    """bf16 has no LLVM atomic: the 16-bit pattern is swapped until no other thread wrote in
    between (LLVM widens the swap to the 32-bit word); tests/language runs it everywhere."""
    ptx = at.compile(bf16_add_kernel, target=f"nvidia:{arch}",
                     signature={"x_ptr": "*bf16", "out_ptr": "*bf16"},
                     constexprs={"BLOCK": 64}).asm["ptx"]
    assert "global.cas.b32" in ptx and "fence.acq_rel.gpu" in ptx


@at.jit
def k_loop_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # addresses recomputed from k, masked K tail (Triton tutorial style)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@at.jit
def carried_pointer_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr):
    # Triton's loop shape: pointer tiles carried and advanced by BK
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


MATMUL_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
#: the same, divisible by 16: copies of 16-byte runs (else element by element)
MATMUL_SIG16 = {name: t + ":16" for name, t in MATMUL_SIG.items()}


@pytest.mark.parametrize("kernel", [k_loop_matmul, carried_pointer_matmul])
@pytest.mark.parametrize("K,sig", [(0, MATMUL_SIG16), (16, MATMUL_SIG16), (80, MATMUL_SIG), (128, MATMUL_SIG16),
                                   (128, MATMUL_SIG)])
def test_pipelined_matmul(rng, kernel, K, sig):
    """Loads feeding a tensor-core dot go through the multi-stage shared-memory pipeline
    (3 stages; K=16 runs fewer iterations than stages, K=80 ends in a masked tail)."""
    import copy
    from anytile.codegen.gpu.pipeline import pipeline_dot_operands
    M, N, BM, BN, BK = 32, 32, 32, 16, 32
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = poisoned((M, N), np.float32)
    module = ir_of(kernel, sig, {"BM": BM, "BN": BN, "BK": BK}, num_warps=2)
    assert pipeline_dot_operands(copy.deepcopy(module).kernel, 3, lambda dot: True, 1 << 20) == 2
    text = simulate(module, (M // BM, N // BN), [a, b, c, M, N, K], 2)
    assert "anytile_sim_scratch" in text  # the tensor-core path ran
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


@at.jit
def mixed_use_matmul(a_ptr, b_ptr, c_ptr, s_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    total = tl.zeros((BM, BK), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])       # also summed: stays in registers
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :], mask=(k + rk)[:, None] < K, other=1.0)
        acc = tl.dot(a, b, acc)
        total += a.to(tl.float32)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(s_ptr + rm[:, None] * BK + rk[None, :], total)


def test_only_dot_only_zero_filled_loads_are_pipelined(rng):
    """A load with another use, or with a non-zero ``other``, keeps the register path."""
    from anytile.codegen.gpu.pipeline import pipeline_dot_operands
    module = ir_of(mixed_use_matmul, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "s_ptr": "*fp32",
                                      "K": "i32"}, {"BM": 16, "BN": 16, "BK": 16})
    assert pipeline_dot_operands(module.kernel, 3, lambda dot: True, 1 << 20) == 0


def test_pipeline_ptx_uses_cp_async():
    k = at.compile(carried_pointer_matmul, target="nvidia:sm_80", signature=MATMUL_SIG16,
                   constexprs={"BM": 64, "BN": 64, "BK": 32}, num_warps=4, num_stages=4)
    ptx = k.asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    assert k.metadata["pipelined_dot_operands"] == 2
    # 4 stages of a 64x(32+8) and a 32x(64+8) f16 tile
    assert k.metadata["shared"] >= 4 * (64 * 40 + 32 * 72) * 2


@pytest.fixture
def gpusim(monkeypatch):
    """The opt-in ``gpusim`` device, with discovery refreshed before and after (other tests'
    collection may have seen it unusable)."""
    from anytile.runtime.discovery import discover
    monkeypatch.setenv("ANYTILE_GPU_SIMULATOR", "1")
    discover(refresh=True)
    yield at.device("gpusim:0")
    monkeypatch.delenv("ANYTILE_GPU_SIMULATOR")
    discover(refresh=True)


def test_device_assert_reports_message_and_line(gpusim):
    from anytile_conformance.catalogue.control_flow import assert_kernel
    """With ``debug=True`` a failed ``tl.device_assert`` sets the kernel's error word (no
    trap, so a GPU context stays usable) and the launch raises ``DeviceAssertError`` naming
    the assert's line; without debug the assert is compiled out."""
    dev = gpusim
    x = np.arange(1, 65, dtype=np.int32)
    out = at.empty((64,), np.int32, device=dev)
    assert_kernel[(1,)](at.asarray(x, device=dev), out, BLOCK=64, debug=True)
    np.testing.assert_array_equal(out.numpy(), x + 1)
    x[7] = -1
    with pytest.raises(at.DeviceAssertError) as info:
        assert_kernel[(1,)](at.asarray(x, device=dev), out, BLOCK=64, debug=True)
    assert "x must be positive" in str(info.value) and "control_flow.py" in str(info.value)
    assert "tl.device_assert(x > 0" in str(info.value)
    assert_kernel[(1,)](at.asarray(x, device=dev), out, BLOCK=64)   # no debug: no check
    ptx = at.compile(assert_kernel, target="nvidia:sm_90", signature={"x_ptr": "*i32", "out_ptr": "*i32"},
                     constexprs={"BLOCK": 64}, debug=True)
    assert re.search(r"atom\.\S*cas", ptx.asm["ptx"]) and "trap" not in ptx.asm["ptx"]
    assert ["x must be positive"] == [m for m, _, _ in ptx.metadata["asserts"]
                                      if not m.startswith(at.errors.BOUNDS_PREFIX)]


@at.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, TILES_N: tl.constexpr, BM: tl.constexpr,
                      BN: tl.constexpr, BK: tl.constexpr):
    # one program walks several output tiles: the K loop's pipeline starts again each time
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    for t in range(0, TILES_N):
        rn = t * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def test_pipelined_loop_inside_a_loop(rng):
    import copy
    from anytile.codegen.gpu.pipeline import pipeline_dot_operands
    M, N, K, BN = 16, 48, 64, 16
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = poisoned((M, N), np.float32)
    module = ir_of(persistent_matmul, MATMUL_SIG16, {"TILES_N": N // BN, "BM": M, "BN": BN, "BK": 16},
                   num_warps=1)
    assert pipeline_dot_operands(copy.deepcopy(module).kernel, 3, lambda dot: True, 1 << 20) == 2
    simulate(module, (1,), [a, b, c, M, N, K], 1)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


@at.jit
def two_k_loops(a_ptr, b_ptr, d_ptr, e_ptr, c_ptr, K1, K2, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
    # two pipelined loops one after the other, as attention's causal forward has
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K1, BK):
        acc = tl.dot(tl.load(a_ptr + rm[:, None] * K1 + (k + rk)[None, :]),
                     tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]), acc)
    acc = acc * 0.5
    for k in range(0, K2, BK):
        acc = tl.dot(tl.load(d_ptr + rm[:, None] * K2 + (k + rk)[None, :]),
                     tl.load(e_ptr + (k + rk)[:, None] * BN + rn[None, :]), acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_loops_one_after_the_other_share_their_buffers(rng):
    """The second loop's buffers take the first's bytes (``plan_persistent_shared``), and the
    result is still right: the first loop drained before the second's prologue copies."""
    import copy
    from anytile.backend import CompileOptions
    from anytile.codegen.gpu import lay_out
    from anytile.codegen.gpu.shared import plan_persistent_shared
    from anytile.codegen.gpu.shared_ops import SharedAllocOp
    BM, BN, BK, K1, K2 = 32, 32, 16, 64, 48
    sig = {**{n: "*fp16:16" for n in ("a_ptr", "b_ptr", "d_ptr", "e_ptr")}, "c_ptr": "*fp32:16",
           "K1": "i32:16", "K2": "i32:16"}
    module = ir_of(two_k_loops, sig, {"BM": BM, "BN": BN, "BK": BK}, num_warps=4)
    laid = lay_out(copy.deepcopy(module), simulated_nvidia_target(),
                   CompileOptions(num_warps=4, num_stages=3), {})
    allocs = [op for op in at.ir.walk(laid.kernel.body) if isinstance(op, SharedAllocOp)]
    offsets, total = plan_persistent_shared(laid.kernel)
    assert len(allocs) == 4 and [offsets[a] for a in allocs[:2]] == [offsets[a] for a in allocs[2:]]
    assert total == -(-sum(a.result.type.nbytes for a in allocs[:2]) // 128) * 128
    a, d = (rng.standard_normal((BM, k)).astype(np.float16) for k in (K1, K2))
    b, e = (rng.standard_normal((k, BN)).astype(np.float16) for k in (K1, K2))
    c = poisoned((BM, BN), np.float32)
    simulate(module, (1,), [a, b, d, e, c, K1, K2], 4)
    f64 = np.float64
    ref = 0.5 * (a.astype(f64) @ b.astype(f64)) + d.astype(f64) @ e.astype(f64)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


@at.jit
def sort_flip_topk(x_ptr, s_ptr, f_ptr, t_ptr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(s_ptr + tl.arange(0, N), tl.sort(x))
    tl.store(f_ptr + tl.arange(0, N), tl.flip(x))
    tl.store(t_ptr + tl.arange(0, K), tl.topk(x, K))


@pytest.mark.parametrize("n", [2, 32, 256])
def test_sort_flip_and_topk(n):
    """They take elements out of size-2 axes; on GPUs this once went through a reduce whose
    combine kept its left operand, which a butterfly of shuffles does not combine in index
    order (every lane ended up with one element)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    k = min(n, 4)
    module = ir_of(sort_flip_topk, {"x_ptr": "*fp32", "s_ptr": "*fp32", "f_ptr": "*fp32",
                                    "t_ptr": "*fp32"}, {"N": n, "K": k})
    s, f, t = poisoned(n, np.float32), poisoned(n, np.float32), poisoned(k, np.float32)
    simulate(module, (1,), [x, s, f, t])
    np.testing.assert_array_equal(s, np.sort(x))
    np.testing.assert_array_equal(f, x[::-1])
    np.testing.assert_array_equal(t, np.sort(x)[::-1][:k])


@at.jit
def attention_kernel(Q, K, V, O, sm_scale, N_CTX, BM: tl.constexpr, BN: tl.constexpr,
                     D: tl.constexpr, CAUSAL: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.zeros((BM,), tl.float32) - float("inf")
    l_i = tl.zeros((BM,), tl.float32) + 1.0
    acc = tl.zeros((BM, D), tl.float32)
    hi = (tl.program_id(0) + 1) * BM if CAUSAL else N_CTX
    for start_n in range(0, hi, BN):
        k = tl.load(K + (start_n + offs_n)[None, :] * D + offs_d[:, None])
        qk = tl.dot(q, k)
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * sm_scale)
        p = tl.math.exp2(qk * sm_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + (start_n + offs_n)[:, None] * D + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_ij
    tl.store(O + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_chain(gpusim, rng, causal):
    """Attention's two chained dots: both get their warps along M (the softmax's row
    reductions stay inside warps) and ``p`` feeds the second dot's A fragments from the first
    dot's accumulator registers, without a trip through shared memory; the loop-invariant q
    is copied to shared memory once, K (read transposed) by 16-byte copies into column-major
    slots."""
    N, D, BM, BN = 64, 32, 64, 32
    q, k, v = (rng.standard_normal((N, D)).astype(np.float16) for _ in range(3))
    out = at.asarray(np.zeros((N, D), np.float16), device=gpusim)
    scale = 0.125 * 1.44269504
    attention_kernel[(N // BM,)](*(at.asarray(t, device=gpusim) for t in (q, k, v)), out, scale,
                                  N, BM=BM, BN=BN, D=D, CAUSAL=causal, num_warps=4,
                                  num_stages=2)
    s = q.astype(np.float32) @ k.astype(np.float32).T * 0.125
    if causal:
        s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v.astype(np.float32)
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref, atol=2e-3, rtol=1e-2)
    laid = at.compile(attention_kernel, target="nvidia:sm_90",
                      signature={"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16",
                                 "O": "*fp16:16", "sm_scale": "fp32", "N_CTX": "i32:16"},
                      constexprs={"BM": 128, "BN": 64, "D": 64, "CAUSAL": causal},
                      num_stages=3, wgmma=False).asm       # test_warpgroup.py: with it
    text = laid["laid-out ir"]
    dots = [line for line in text.splitlines() if " = dot " in line]
    assert len(dots) == 2 and all("wpc=[4,1]" in line for line in dots)
    # q copied once into its own buffer; K (read along D) into column-major slots, V rows;
    # the loop carries the row max and sum in the reduction's slice layout
    assert "shared<1x128x64xf16, row 72>" in text and "shared<3x64x64xf16, col 72>" in text
    assert "shared<3x64x64xf16, row 72>" in text
    loop = next(line for line in text.splitlines() if " = for " in line)
    assert loop.count("#slice<dim=1") == 2



@at.jit
def index_addressed_kernel(x_ptr, out_ptr, n, stride, BM: tl.constexpr, BN: tl.constexpr):
    # addresses rebuilt from k each step, with a difference, a constant factor and a transposed
    # read: the loop-address split (codegen/gpu/addresses.py) turns each into a base and a step
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(1, n):
        a = tl.load(x_ptr + (rm + k - 1)[:, None] * stride + (2 * (rn + k) - 2 * k)[None, :])
        b = tl.trans(tl.load(x_ptr + (rn * 2)[:, None] + (k - 1 + rm)[None, :] * stride))
        acc += a * 3.0 - b
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_loop_addresses_split_into_a_base_and_a_step(rng, n):
    BM, BN, stride = 16, 32, 70
    x = rng.standard_normal((n + BM, stride)).astype(np.float32)
    out = poisoned((BM, BN), np.float32)
    sig = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32", "stride": "i32"}
    compiled = at.compile(index_addressed_kernel, target="nvidia:sm_90", signature=sig,
                          constexprs={"BM": BM, "BN": BN})
    assert compiled.metadata["split_addresses"] == 2
    simulate(ir_of(index_addressed_kernel, sig, {"BM": BM, "BN": BN}), (1,), [x, out, n, stride])
    windows = sum(x[r:r + BM, 0:2 * BN:2].astype(np.float64) for r in range(n - 1))
    np.testing.assert_allclose(out, 2.0 * windows if n > 1 else np.zeros((BM, BN)), rtol=1e-5, atol=1e-5)


@at.jit
def both_ways_kernel(a_ptr, g_ptr, x_ptr, c_ptr, d_ptr, STEPS, SPLIT,
                     BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """``c = sum_s a @ x_s`` and ``d = sum_s g @ x_s^T`` over ``STEPS`` tiles ``x_s`` (BK x BN),
    each read once and used both ways, as attention's backward uses q and do; ``a`` and ``g``
    feed the dots of two loops (steps below ``SPLIT``, then the rest), as the masked and
    unmasked loops of the causal backward read k and v."""
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    rn = tl.arange(0, BN)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    g = tl.load(g_ptr + rm[:, None] * BN + rn[None, :])
    c = tl.zeros((BM, BN), dtype=tl.float32)
    d = tl.zeros((BM, BK), dtype=tl.float32)
    for s in range(0, SPLIT):
        x = tl.load(x_ptr + s * BK * BN + rk[:, None] * BN + rn[None, :])
        c = tl.dot(a, x, c)
        d = tl.dot(g, tl.trans(x), d)
    for s in range(SPLIT, STEPS):
        x = tl.load(x_ptr + s * BK * BN + rk[:, None] * BN + rn[None, :])
        c = tl.dot(a, x, c)
        d = tl.dot(g, tl.trans(x), d)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)
    tl.store(d_ptr + rm[:, None] * BK + rk[None, :], d)


BOTH_WAYS_SIG = {"a_ptr": "*fp16:16", "g_ptr": "*fp16:16", "x_ptr": "*fp16:16", "c_ptr": "*fp32:16",
                 "d_ptr": "*fp32:16", "STEPS": "i32", "SPLIT": "i32"}


def both_ways_data(BM, BK, BN, steps, seed=5):
    """Random inputs of ``both_ways_kernel``, poisoned outputs, and the expected ``c``, ``d``."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((BM, BK)).astype(np.float16)
    g = rng.standard_normal((BM, BN)).astype(np.float16)
    x = rng.standard_normal((steps, BK, BN)).astype(np.float16)
    c, d = poisoned((BM, BN), np.float32), poisoned((BM, BK), np.float32)
    x64 = x.astype(np.float64)
    want_c = sum(a.astype(np.float64) @ x64[s] for s in range(steps))
    want_d = sum(g.astype(np.float64) @ x64[s].T for s in range(steps))
    return (a, g, x, c, d), want_c, want_d
