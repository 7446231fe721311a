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


@at.jit
def block_pointer_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                         BK: tl.constexpr):
    """Triton's block-pointer matmul: both operands advanced with ``tl.advance`` each step."""
    a_bp = tl.make_block_ptr(a_ptr, (M, K), (K, 1), (tl.program_id(0) * BM, 0), (BM, BK), (1, 0))
    b_bp = tl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, tl.program_id(1) * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_bp, boundary_check=(0, 1)), tl.load(b_bp, boundary_check=(0, 1)), acc)
        a_bp = tl.advance(a_bp, (0, BK))
        b_bp = tl.advance(b_bp, (BK, 0))
    c_bp = tl.make_block_ptr(c_ptr, (M, N), (N, 1), (tl.program_id(0) * BM, tl.program_id(1) * BN),
                             (BM, BN), (1, 0))
    tl.store(c_bp, acc, boundary_check=(0, 1))
