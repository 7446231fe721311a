"""Triton's standard-library operations on tiles: ``join``/``split``/``interleave``,
``tl.softmax`` with ``keep_dims``, ``swizzle2d``, ``sort`` (both directions, ties), ``flip``
(function and method), ``histogram`` with a mask, ``assume``, ``gather`` and ``topk``."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


def on(device, a):
    return at.asarray(a, device=device)


# -- join / split / interleave, softmax, swizzle2d -------------------------------------------
@at.jit
def join_split(X, Y, JOINED, INTERLEAVED, BACK_X, BACK_Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    z = tl.join(x, y)
    tl.store(JOINED + offs[:, None] * 2 + tl.arange(0, 2)[None, :], z)
    tl.store(INTERLEAVED + tl.arange(0, 2 * N), tl.interleave(x, y))
    a, b = tl.split(z)
    tl.store(BACK_X + offs, a)
    tl.store(BACK_Y + offs, b)


def test_join_split_interleave(device, rng, poison):
    x, y = (rng.standard_normal(32).astype(np.float32) for _ in range(2))
    x[3] = -0.0
    outs = [on(device, poison(s, np.float32)) for s in (64, 64, 32, 32)]
    join_split[(1,)](on(device, x), on(device, y), *outs, N=32)
    np.testing.assert_array_equal(outs[0].numpy(), np.stack([x, y], 1).ravel())
    np.testing.assert_array_equal(outs[1].numpy(), np.stack([x, y], 1).ravel())
    np.testing.assert_array_equal(outs[2].numpy().view(np.uint32), x.view(np.uint32))
    np.testing.assert_array_equal(outs[3].numpy(), y)


@at.jit
def softmax_swizzle(X, OUT, I_OUT, J_OUT, M: tl.constexpr, N: tl.constexpr):
    rm, rn = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(X + rm[:, None] * N + rn[None, :])
    tl.store(OUT + rm[:, None] * N + rn[None, :], tl.softmax(x, dim=1, keep_dims=True))
    i, j = tl.swizzle2d(rm[:, None], rn[None, :], M, N, 4)
    tl.store(I_OUT + rm[:, None] * N + rn[None, :], i)
    tl.store(J_OUT + rm[:, None] * N + rn[None, :], j)


def test_softmax_and_swizzle2d(device, rng, poison):
    M, N, G = 8, 16, 4
    x = rng.standard_normal((M, N)).astype(np.float32)
    out = on(device, poison((M, N), np.float32))
    io, jo = on(device, poison((M, N), np.int32)), on(device, poison((M, N), np.int32))
    softmax_swizzle[(1,)](on(device, x), out, io, jo, M=M, N=N)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)
    ij = np.arange(M)[:, None] * N + np.arange(N)[None, :]
    off_i = ij // (G * N) * G
    rows = np.minimum(M - off_i, G)
    np.testing.assert_array_equal(io.numpy(), off_i + (ij % (G * N)) % rows)
    np.testing.assert_array_equal(jo.numpy(), (ij % (G * N)) // rows)


# -- sort / flip ------------------------------------------------------------------------------
@at.jit
def sort_flip(X, ASC, DESC, FLIP0, FLIP1, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(X + offs)
    tl.store(ASC + offs, tl.sort(x))
    tl.store(DESC + offs, tl.sort(x, descending=True))
    tl.store(FLIP0 + offs, tl.flip(x, 0))
    tl.store(FLIP1 + offs, x.flip())


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_sort_and_flip(device, rng, poison, dtype):
    M, N = 4, 8  # (small: the bitonic network grows as log2(N)^2 and the cpu backend compiles it)
    x = (rng.standard_normal((M, N)) * 100).astype(dtype)
    x[1, :4] = x[1, 4]  # ties
    outs = [on(device, poison((M, N), dtype)) for _ in range(4)]
    sort_flip[(1,)](on(device, x), *outs, M=M, N=N)
    np.testing.assert_array_equal(outs[0].numpy(), np.sort(x, 1))
    np.testing.assert_array_equal(outs[1].numpy(), np.sort(x, 1)[:, ::-1])
    np.testing.assert_array_equal(outs[2].numpy(), x[::-1])
    np.testing.assert_array_equal(outs[3].numpy(), x[:, ::-1])


# -- tl.histogram with a mask, tl.assume ------------------------------------------------------
@at.jit
def histogram_kernel(X, OUT, N: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    tl.assume(x.shape[0] == N)
    tl.assume(tl.program_id(0) >= 0)
    tl.store(OUT + tl.arange(0, BINS), tl.histogram(x, BINS, mask=offs < N - 3))


def test_histogram(device, rng, poison):
    x = rng.integers(-2, 20, 64).astype(np.int32)
    out = on(device, poison(16, np.int32))
    histogram_kernel[(1,)](on(device, x), out, N=64, BINS=16)
    kept = x[:61]
    np.testing.assert_array_equal(out.numpy(), [(kept == b).sum() for b in range(16)])


@at.jit
def gather_kernel(X, IDX, OUT, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(X + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    idx = tl.load(IDX + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    tl.store(OUT + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], tl.gather(x, idx, 1))


def test_gather(device, rng, poison):
    M, N, K = 4, 16, 8
    x = rng.standard_normal((M, N)).astype(np.float32)
    idx = rng.integers(0, N, (M, K)).astype(np.int32)
    out = on(device, poison((M, K), np.float32))
    gather_kernel[(1,)](on(device, x), on(device, idx), out, M=M, N=N, K=K)
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x, idx, 1))


@at.jit
def topk_kernel(X, OUT, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    tl.store(OUT + tl.arange(0, K), tl.topk(x, K))


def test_topk_1d(device, rng, poison):
    x = rng.permutation(100)[:8].astype(np.float32)
    out = on(device, poison(4, np.float32))
    topk_kernel[(1,)](on(device, x), out, N=8, K=4)
    np.testing.assert_array_equal(out.numpy(), np.sort(x)[::-1][:4])
