"""Kernels whose loops ask for ``num_stages`` and store (kept in a module: @at.jit needs their
source), for the tests of loads staged in shared memory."""
import anytile as at
import anytile.language as tl


@at.jit
def strided_row_softmax(out_ptr, src_ptr, src_stride, out_stride, n_rows, n_cols,
                        BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """Programs stride over the rows, one row an iteration, as Triton's fused-softmax
    tutorial launches its persistent kernel."""
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        x = tl.load(src_ptr + row * src_stride + cols, mask=inside, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=inside)


@at.jit
def in_place_row_scale(x_ptr, stride, n_rows, n_cols, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """Each row halved where it lies: the loop reads and writes through one parameter."""
    cols = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols)
        tl.store(x_ptr + row * stride + cols, x * 0.5, mask=cols < n_cols)


@at.jit
def block_rows_shift(out_ptr, src_ptr, shift_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr,
                     STAGES: tl.constexpr):
    """BM x BN blocks of rows down the matrix, read through a pointer tile advanced each step
    (masked on both edges), a per-row shift loaded beside them; ``out = src - shift``."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    step = tl.num_programs(0) * BM
    ptrs = src_ptr + rm[:, None] * stride + rn[None, :]
    for r0 in tl.range(tl.program_id(0) * BM, M, step, num_stages=STAGES):
        rows = r0 + tl.arange(0, BM)
        live = (rows[:, None] < M) & (rn[None, :] < N)
        x = tl.load(ptrs, mask=live, other=0.0)
        s = tl.load(shift_ptr + rows, mask=rows < M, other=0.0)
        tl.store(out_ptr + rows[:, None] * N + rn[None, :], x - s[:, None], mask=live)
        ptrs += step * stride
