"""Whole-stack kernels (``@at.jit`` -> frontend -> passes -> cpu backend) with NumPy arrays
passed in place, against float64 NumPy.  The kernels are the conformance catalogue's
(``anytile_conformance.catalogue.kernels``), which also runs them on every backend."""
import numpy as np
import pytest
from anytile_conformance.catalogue.kernels import layer_norm_kernel, matmul_kernel, softmax_kernel

import anytile as at


@pytest.fixture
def cpu(monkeypatch):
    """NumPy arrays go to the default host device: make that the cpu backend."""
    monkeypatch.setenv("ANYTILE_DEVICE", "cpu")
    return at.device("cpu")


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_softmax(cpu, rng):
    x = rng.standard_normal((37, 1000)).astype(np.float32)
    y = np.full_like(x, np.nan)
    softmax_kernel[(37,)](y, x, 1000, 1000, 1000, BLOCK=1024)
    np.testing.assert_allclose(y, _softmax(x), rtol=1e-5, atol=1e-9)


def test_layernorm(cpu, rng):
    x = rng.standard_normal((20, 300)).astype(np.float32)
    w, b = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    y = np.full_like(x, np.nan)
    mean, rstd = np.full(20, np.nan, np.float32), np.full(20, np.nan, np.float32)
    layer_norm_kernel[(20,)](x, y, w, b, mean, rstd, 300, 300, 1e-5, BLOCK=512)
    xd = x.astype(np.float64)
    want = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mean, xd.mean(1), rtol=1e-5, atol=1e-6)


def test_matmul_with_ragged_edges(cpu, rng):
    m, n, k = 70, 90, 50
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    bias = np.zeros(n, np.float32)
    c = np.full((m, n), np.nan, np.float32)
    grid = (at.cdiv(m, 32) * at.cdiv(n, 32),)
    matmul_kernel[grid](a, b, bias, c, m, n, k, k, 1, n, 1, n, ACTIVATION="none", BM=32, BN=32,
                        BK=16, GROUP_M=2)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_kernel_writes_numpy_array_in_place(cpu, rng):
    x = rng.standard_normal(4096).astype(np.float32)
    y = np.full((2, 4096), np.nan, np.float32)
    softmax_kernel[(1,)](y[1], x, 0, 0, 4096, BLOCK=4096)    # a view: written in place
    assert np.isnan(y[0]).all()
    np.testing.assert_allclose(y[1], _softmax(x), rtol=1e-5, atol=1e-10)
