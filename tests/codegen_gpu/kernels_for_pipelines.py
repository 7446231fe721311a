"""Kernels the pipeline tests compile (kept in a module: @at.jit needs their source)."""
import anytile as at
import anytile.language as tl


@at.jit
def rows_transposed_matmul(a_ptr, bt_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr):
    """C = A @ B with B given as its transpose (N rows of K), read as rows and ``tl.trans``'d."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        bt = tl.load(bt_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc = tl.dot(a, tl.trans(bt), acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
