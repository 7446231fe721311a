"""Whole-stack kernels (``@at.jit`` -> frontend -> passes -> cpu backend) against float64
NumPy; NumPy arrays are passed in place."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


@pytest.fixture
def cpu(monkeypatch):
    """NumPy arrays go to the default host device: make that the cpu backend."""
    monkeypatch.setenv("ANYTILE_DEVICE", "cpu")
    return at.device("cpu")


@at.jit
def softmax_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=mask)


@at.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + row * n_cols + offs, d * rstd * w + b, mask=mask)


@at.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_softmax(cpu, rng):
    x = rng.standard_normal((37, 1000)).astype(np.float32)
    y = np.full_like(x, np.nan)
    softmax_kernel[(37,)](x, y, 1000, 1000, BLOCK=1024)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-9)


def test_layernorm(cpu, rng):
    x = rng.standard_normal((20, 300)).astype(np.float32)
    w, b = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    y = np.full_like(x, np.nan)
    layernorm_kernel[(20,)](x, w, b, y, 300, 1e-5, BLOCK=512)
    xd = x.astype(np.float64)
    want = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_matmul_with_ragged_edges(cpu, rng):
    m, n, k = 70, 90, 50
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    matmul_kernel[(3, 3)](a, b, c, m, n, k, BM=32, BN=32, BK=16)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_kernel_writes_numpy_array_in_place(cpu, rng):
    x = rng.standard_normal(4096).astype(np.float32)
    y = np.full((2, 4096), np.nan, np.float32)
    softmax_kernel[(1,)](x, y[1], 0, 4096, BLOCK=4096)    # a view: written in place
    assert np.isnan(y[0]).all()
    e = np.exp(x.astype(np.float64) - x.max())
    np.testing.assert_allclose(y[1], e / e.sum(), rtol=1e-5, atol=1e-10)
