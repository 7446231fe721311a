"""Whole kernels as users write them: vector add, fused softmax (one row per program and
persistent), matmul with a fused bias + activation epilogue, layer norm, a tiled transpose and
a histogram with atomics."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import family
from ..tolerances import EXACT
from .common import FULL_WARPS, QUICK_WARPS, cdiv, next_pow2, wide


@at.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@family("kernels",
        quick=dict(dtype=["f32"], n=[1000], warps=QUICK_WARPS),
        full=dict(dtype=["f32", "f16", "bf16", "f64", "i32"], n=[1, 1000, 98432], warps=FULL_WARPS))
def vector_add(ctx, dtype, n, warps):
    """The tutorial's vector add."""
    block = 256
    x, y = ctx.random((n,), dtype), ctx.random((n,), dtype)
    out = ctx.output((n,), dtype)
    ctx.launch(vector_add_kernel, (cdiv(n, block),), ctx.input(x), ctx.input(y), out, n,
               BLOCK=block, num_warps=warps)
    expected = wide(x, dtype) + wide(y, dtype) if dtype != "i32" else x.astype(np.int64) + y
    ctx.check("x + y", out, expected, dtype, tolerances.arithmetic("add", dtype))


@at.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@at.jit
def persistent_softmax_kernel(out_ptr, in_ptr, n_rows, n_cols, BLOCK: tl.constexpr,
                              STAGES: tl.constexpr = 1):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def _softmax(x: np.ndarray) -> np.ndarray:
    w = x.astype(np.float64)
    e = np.exp(w - w.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@family("kernels",
        quick=dict(dtype=["f32"], shape=[(5, 37)]),
        full=dict(dtype=["f32", "f16", "bf16"], shape=[(1, 1), (5, 37), (64, 256), (3, 1000)]))
def fused_softmax(ctx, dtype, shape):
    """Row softmax, one program per row, inputs read through a padded row stride."""
    rows, cols = shape
    src = ctx.random((rows, cols + 3), dtype, -5, 5)
    out = ctx.output((rows, cols), dtype)
    ctx.launch(softmax_kernel, (rows,), out, ctx.input(src), cols + 3, cols, cols,
               BLOCK=next_pow2(cols))
    ctx.check("softmax", out, _softmax(src[:, :cols]), dtype, tolerances.composite(dtype))


@family("kernels", quick=dict(programs=[3], stages=[1, 3], cols=[50]),
        full=dict(programs=[1, 3, 64], stages=[1, 2, 3], cols=[50, 256]))
def persistent_softmax(ctx, programs, stages, cols):
    """Softmax with a fixed number of programs striding over the rows, the loop a
    ``tl.range`` asking for ``stages`` stages (a GPU may load rows ahead into shared memory
    while the loop stores to another argument)."""
    rows = 10
    x = ctx.random((rows, cols), "f32", -5, 5)
    out = ctx.output((rows, cols), "f32")
    ctx.launch(persistent_softmax_kernel, (programs,), out, ctx.input(x), rows, cols,
               BLOCK=next_pow2(cols), STAGES=stages)
    ctx.check("softmax", out, _softmax(x), "f32", tolerances.composite("f32"))


@at.jit
def matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                  stride_bn, stride_cm, ACTIVATION: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_size
    pid_n = (pid % group) // group_size
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    elif ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    c = acc.to(c_ptr.dtype.element_ty)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], c, mask=mask)


@family("kernels",
        quick=dict(dtype=["f32"], shape=[(33, 40, 20)], activation=["leaky_relu"]),
        full=dict(dtype=["f32", "f16", "bf16"], shape=[(16, 16, 16), (33, 40, 20), (128, 96, 80)],
                  activation=["none", "relu", "leaky_relu"]))
def matmul_epilogue(ctx, dtype, shape, activation):
    """Grouped-order tiled matmul with masked edges, f32 accumulation and a fused bias +
    activation epilogue, output in the input dtype."""
    m, n, k = shape
    a = ctx.random((m, k), dtype, -1, 1)
    b = ctx.random((n, k), dtype, -1, 1).T          # a transposed (column-major) operand
    bias = ctx.random((n,), "f32", -1, 1)
    c = ctx.output((m, n), dtype)
    bm, bn, bk = 16, 32, 16
    grid = (cdiv(m, bm) * cdiv(n, bn),)
    b_host = np.ascontiguousarray(b.T)
    ctx.launch(matmul_kernel, grid, ctx.input(a), ctx.input(b_host), ctx.input(bias), c, m, n, k,
               k, 1, 1, k, n, ACTIVATION=activation, BM=bm, BN=bn, BK=bk, GROUP_M=2)
    aw, bw = a.astype(np.float64), b.astype(np.float64)
    exact = aw @ bw + bias.astype(np.float64)[None, :]
    magnitude = np.abs(aw) @ np.abs(bw) + np.abs(bias.astype(np.float64))[None, :]
    if activation == "relu":
        exact = np.maximum(exact, 0)
    elif activation == "leaky_relu":
        exact = np.where(exact >= 0, exact, 0.01 * exact)
        magnitude = np.where(exact >= 0, magnitude, 0.01 * magnitude)
    if dtype == "f32":
        # tl.dot's default precision for f32 inputs may be tf32, as in Triton
        ctx.check("matmul", c, exact, dtype, tolerances.accumulation(k + 2, "f32", "tf32"), magnitude)
    else:
        ctx.check("matmul", c, exact, dtype, tolerances.composite(dtype))


@at.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n, eps,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@family("kernels", quick=dict(dtype=["f32"], shape=[(4, 100)]),
        full=dict(dtype=["f32", "f16", "bf16"], shape=[(1, 8), (4, 100), (16, 1024)]))
def layer_norm(ctx, dtype, shape):
    """Layer norm forward with its mean and 1/std side outputs."""
    rows, cols = shape
    x = ctx.random((rows, cols), dtype, -3, 3)
    w, b = ctx.random((cols,), "f32", 0.5, 1.5), ctx.random((cols,), "f32", -1, 1)
    y = ctx.output((rows, cols), dtype)
    mean, rstd = ctx.output((rows,), "f32"), ctx.output((rows,), "f32")
    eps = 1e-5
    ctx.launch(layer_norm_kernel, (rows,), ctx.input(x), y, ctx.input(w), ctx.input(b), mean, rstd,
               cols, cols, eps, BLOCK=next_pow2(cols))
    xw = x.astype(np.float64)
    mu = xw.mean(axis=1)
    inv = 1 / np.sqrt(xw.var(axis=1) + np.float64(np.float32(eps)))
    ctx.check("mean", mean, mu, "f32", tolerances.accumulation(cols, "f32"), np.abs(xw).mean(axis=1))
    ctx.check("rstd", rstd, inv, "f32", tolerances.composite("f32"))
    expected = (xw - mu[:, None]) * inv[:, None] * w.astype(np.float64) + b.astype(np.float64)
    ctx.check("y", y, expected, dtype, tolerances.composite(dtype))


@at.jit
def transpose_kernel(src, dst, m, n, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    tile = tl.load(src + rm[:, None] * n + rn[None, :], mask=mask)
    tl.store(dst + rn[:, None] * m + rm[None, :], tl.trans(tile), mask=tl.trans(mask))


@family("kernels", quick=dict(dtype=["f32"], shape=[(37, 50)]),
        full=dict(dtype=["f32", "i8", "f64", "bf16"], shape=[(1, 1), (37, 50), (256, 130)]))
def transpose(ctx, dtype, shape):
    """A tiled out-of-place transpose with masked edge tiles."""
    m, n = shape
    x = ctx.random((m, n), dtype)
    out = ctx.output((n, m), dtype)
    ctx.launch(transpose_kernel, (cdiv(m, 16), cdiv(n, 32)), ctx.input(x), out, m, n, BM=16, BN=32)
    ctx.check("transpose", out, x.T, dtype, EXACT)


@at.jit
def histogram_kernel(x_ptr, hist_ptr, n, bins, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + x % bins, 1, mask=mask)


@family("kernels", quick=dict(n=[500], bins=[7]), full=dict(n=[1, 500, 20000], bins=[1, 7, 64]))
def histogram(ctx, n, bins):
    """Counting with atomics where many lanes of one tile hit the same bin."""
    x = ctx.random((n,), "i32", 0, 10000, nonzero=False)
    hist = ctx.input(np.zeros(bins, dtype=np.int32))
    ctx.launch(histogram_kernel, (cdiv(n, 128),), ctx.input(x), hist, n, bins, BLOCK=128)
    ctx.check("histogram", hist, np.bincount(x % bins, minlength=bins), "i32", EXACT)

