"""Tiled fp16 matmuls with f32 accumulation: a grouped tile order computed by a jit helper
(Python's ``min`` on tensors, a tuple returned), wrapped-around row/column offsets, pointer
tiles advanced with ``+=`` in the K loop, an activation helper chosen by a string constexpr;
and a block-pointer matmul (``make_block_ptr`` by keyword, a column-major operand,
``boundary_check``, ``tl.advance``) launched over a 2-D meta grid."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


def on(device, a):
    return at.asarray(a, device=device)


@at.jit
def leaky(x, slope: tl.constexpr = 0.01):
    return tl.where(x >= 0, x, slope * x)


@at.jit
def _grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    # consecutive programs walk down a band of GROUP_M tile rows before moving right
    tiles_m = tl.cdiv(M, BLOCK_M)
    band = GROUP_M * tl.cdiv(N, BLOCK_N)
    top = pid // band * GROUP_M
    height = min(tiles_m - top, GROUP_M)
    inside = pid % band
    return top + inside % height, inside // height


@at.jit
def matmul_grouped(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                   stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, ACTIVATION: tl.constexpr):
    tile_m, tile_n = _grouped_tile(tl.program_id(axis=0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # edge tiles read wrapped-around rows and columns; only the store is masked
    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_tile = A + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = B + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - step * BLOCK_K
        a = tl.load(a_tile, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky(acc)
    out_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(C + out_m[:, None] * stride_cm + out_n[None, :] * stride_cn, acc.to(tl.float16),
             mask=(out_m[:, None] < M) & (out_n[None, :] < N))


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_grouped_matmul_with_epilogue(device, rng, poison, activation):
    M, N, K = 80, 72, 100
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = on(device, poison((M, N), np.float16))
    A, B = on(device, a), on(device, b)
    grid = lambda META: (at.cdiv(M, META["BLOCK_M"]) * at.cdiv(N, META["BLOCK_N"]),)  # noqa: E731
    matmul_grouped[grid](A, B, c, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=2,
                         ACTIVATION=activation)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if activation:
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    np.testing.assert_allclose(c.numpy().astype(np.float64), ref, rtol=2e-3, atol=2e-2)


@at.jit
def matmul_block_pointers(A, Bt, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr):
    # A is row-major (M, K); B is given column-major, as the rows of Bt (N, K)
    m0 = tl.program_id(0) * BM
    n0 = tl.program_id(1) * BN
    a_blocks = tl.make_block_ptr(base=A, shape=(M, K), strides=(K, 1), offsets=(m0, 0),
                                 block_shape=(BM, BK), order=(1, 0))
    b_blocks = tl.make_block_ptr(base=Bt, shape=(K, N), strides=(1, K), offsets=(0, n0),
                                 block_shape=(BK, BN), order=(0, 1))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(a_blocks, boundary_check=(0, 1)),
                      tl.load(b_blocks, boundary_check=(0, 1)))
        a_blocks = tl.advance(a_blocks, (0, BK))
        b_blocks = tl.advance(b_blocks, (BK, 0))
    out = tl.make_block_ptr(base=C, shape=(M, N), strides=(N, 1), offsets=(m0, n0),
                            block_shape=(BM, BN), order=(1, 0))
    tl.store(out, acc.to(tl.float16), boundary_check=(0, 1))


def test_block_pointer_matmul_with_a_column_major_operand(device, rng, poison):
    M, N, K = 72, 80, 100
    a = rng.standard_normal((M, K)).astype(np.float16)
    bt = rng.standard_normal((N, K)).astype(np.float16)
    c = on(device, poison((M, N), np.float16))
    grid = lambda META: (at.cdiv(M, META["BM"]), at.cdiv(N, META["BN"]))  # noqa: E731
    matmul_block_pointers[grid](on(device, a), on(device, bt), c, M, N, K, BM=32, BN=32, BK=32)
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    np.testing.assert_allclose(c.numpy().astype(np.float64), ref, rtol=2e-3, atol=2e-2)
