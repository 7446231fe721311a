"""Matmul with tl.dot and a fused ReLU.  Run: python examples/matmul.py [DEVICE]"""
import sys

import numpy as np

import anytile as at
import anytile.language as tl


@at.jit
def matmul_relu_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    acc = tl.maximum(acc, 0.0)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_relu(a, b, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32):
    M, K = a.shape
    _, N = b.shape
    c = at.empty((M, N), np.float32, device=a.device)
    grid = lambda meta: (at.cdiv(M, meta["BLOCK_M"]), at.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
    matmul_relu_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1),
                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def check(device):
    rng = np.random.default_rng(2)
    ah = rng.standard_normal((70, 90)).astype(np.float32)
    bh = rng.standard_normal((90, 50)).astype(np.float32)
    out = matmul_relu(at.asarray(ah, device=device), at.asarray(bh, device=device)).numpy()
    ref = np.maximum(ah.astype(np.float64) @ bh, 0)
    err = float(np.max(np.abs(out - ref)))
    # tf32 tensor cores may round inputs to 10 mantissa bits
    return {"ok": err <= 5e-2, "detail": f"70x90 @ 90x50, max abs err {err:.1e}"}


if __name__ == "__main__":
    print(check(at.device(sys.argv[1] if len(sys.argv) > 1 else None)))
