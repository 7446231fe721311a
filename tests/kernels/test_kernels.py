"""Whole kernels on every usable device, against float64 NumPy references."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


# -- vector add -------------------------------------------------------------------------------
@at.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@pytest.mark.parametrize("n", [1, 1000, 4097])
def test_vector_add(device, rng, n, poison):
    xh = rng.standard_normal(n).astype(np.float32)
    yh = rng.standard_normal(n).astype(np.float32)
    out = at.asarray(poison(n, np.float32), device=device)
    add_kernel[(at.cdiv(n, 256),)](at.asarray(xh, device=device), at.asarray(yh, device=device),
                                   out, n, BLOCK=256)
    np.testing.assert_allclose(out.numpy(), xh.astype(np.float64) + yh, rtol=1e-6, atol=1e-6)


def test_numpy_arrays_are_written_in_place(rng, poison):
    xh = rng.standard_normal(300).astype(np.float32)
    out = poison(300, np.float32)
    add_kernel[(2,)](xh, xh, out, 300, BLOCK=256)
    np.testing.assert_array_equal(out, xh + xh)


# -- fused softmax, one row per program -------------------------------------------------------
@at.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("shape", [(7, 33), (16, 128), (3, 1000)])
def test_fused_softmax(device, rng, shape, poison):
    xh = (rng.standard_normal(shape) * 4).astype(np.float32)
    out = at.asarray(poison(shape, np.float32), device=device)
    softmax_kernel[(shape[0],)](out, at.asarray(xh, device=device), shape[1], shape[1], shape[1],
                                BLOCK=at.next_power_of_2(shape[1]))
    np.testing.assert_allclose(out.numpy(), _softmax_ref(xh), rtol=1e-5, atol=1e-7)


# -- persistent softmax: programs stride over rows --------------------------------------------
@at.jit
def persistent_softmax_kernel(out_ptr, in_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def test_persistent_softmax(device, rng, poison):
    shape = (37, 100)
    xh = rng.standard_normal(shape).astype(np.float32)
    out = at.asarray(poison(shape, np.float32), device=device)
    persistent_softmax_kernel[(5,)](out, at.asarray(xh, device=device), shape[0], shape[1],
                                    BLOCK=128)
    np.testing.assert_allclose(out.numpy(), _softmax_ref(xh), rtol=1e-5, atol=1e-7)


# -- matmul with tl.dot and a fused relu ------------------------------------------------------
@at.jit
def matmul_relu_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       PRECISION: tl.constexpr = "tf32"):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision=PRECISION)
    acc = tl.where(acc > 0, acc, 0.0)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("dtype,precision", [(np.float32, "ieee"), (np.float32, "tf32"),
                                             (np.float16, "tf32")])
def test_matmul_relu(device, rng, dtype, precision, poison):
    M, N, K = 45, 37, 70
    ah = rng.standard_normal((M, K)).astype(dtype)
    bh = rng.standard_normal((K, N)).astype(dtype)
    c = at.asarray(poison((M, N), dtype), device=device)
    matmul_relu_kernel[(at.cdiv(M, 16), at.cdiv(N, 32))](
        at.asarray(ah, device=device), at.asarray(bh, device=device), c, M, N, K,
        K, 1, N, 1, N, 1, BM=16, BN=32, BK=16, PRECISION=precision)
    ref = np.maximum(ah.astype(np.float64) @ bh.astype(np.float64), 0)
    if dtype == np.float16:
        tol = 2e-2
    elif precision == "ieee":
        tol = 1e-4
    else:   # tf32 (the default, as in Triton): inputs may be rounded to 10 mantissa bits
        tol = 2 ** -10 * 4
    np.testing.assert_allclose(c.numpy().astype(np.float64), ref, rtol=tol, atol=tol * 10)


# -- layer norm forward -----------------------------------------------------------------------
@at.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, diff * rstd * w + b, mask=mask)


def test_layernorm(device, rng, poison):
    R, N = 19, 300
    xh = rng.standard_normal((R, N)).astype(np.float32) * 3 + 1
    wh, bh = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    y = at.asarray(poison((R, N), np.float32), device=device)
    mean = at.asarray(poison(R, np.float32), device=device)
    rstd = at.asarray(poison(R, np.float32), device=device)
    layernorm_kernel[(R,)](*(at.asarray(a, device=device) for a in (xh,)), y,
                           at.asarray(wh, device=device), at.asarray(bh, device=device),
                           mean, rstd, N, N, 1e-5, BLOCK=512)
    x64 = xh.astype(np.float64)
    m = x64.mean(1)
    r = 1 / np.sqrt(x64.var(1) + 1e-5)
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), r, rtol=1e-5)
    np.testing.assert_allclose(y.numpy(), (x64 - m[:, None]) * r[:, None] * wh + bh,
                               rtol=1e-4, atol=1e-5)


# -- 2-D grid transpose -----------------------------------------------------------------------
@at.jit
def transpose_kernel(src, dst, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(src + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(dst + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=tl.trans(mask))


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_transpose_2d_grid(device, rng, dtype, poison):
    M, N = 50, 70
    src = (rng.standard_normal((M, N)) * 100).astype(dtype)
    dst = at.asarray(poison((N, M), dtype), device=device)
    transpose_kernel[(at.cdiv(M, 16), at.cdiv(N, 32))](at.asarray(src, device=device), dst, M, N,
                                                       BM=16, BN=32)
    np.testing.assert_array_equal(dst.numpy(), src.T)


# -- atomic histogram -------------------------------------------------------------------------
@at.jit
def histogram_kernel(data_ptr, hist_ptr, n, n_bins, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    values = tl.load(data_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + values % n_bins, 1, mask=mask)


def test_atomic_histogram(device, rng, poison):
    n, bins = 5000, 17
    data = rng.integers(0, 1000, n).astype(np.int32)
    hist = at.zeros(bins, np.int32, device=device)
    histogram_kernel[(at.cdiv(n, 256),)](at.asarray(data, device=device), hist, n, bins, BLOCK=256)
    np.testing.assert_array_equal(hist.numpy(), np.bincount(data % bins, minlength=bins))
