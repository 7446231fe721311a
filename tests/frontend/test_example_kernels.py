"""The classic kernels compile to verified IR with the expected ops."""
import anytile.language as tl
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import compile_ir, kernel_ops, names, of_kind, ptr

F32P = ptr(T.f32)


@jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@jit
def softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


@jit
def persistent_softmax(out_ptr, in_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


@jit
def relu(x):
    return tl.where(x > 0, x, 0.0)


@jit
def matmul_relu(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = relu(acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@jit
def layer_norm(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, eps,
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


@jit
def transpose(src, dst, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(src + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(dst + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=tl.trans(mask))


@jit
def histogram(data_ptr, hist_ptr, n, n_bins, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    values = tl.load(data_ptr + offs, mask=mask, other=0)
    bins = tl.minimum(tl.maximum(values, 0), n_bins - 1)
    tl.atomic_add(hist_ptr + bins, 1, mask=mask)


def test_vector_add():
    m = compile_ir(vector_add, {"BLOCK": 256}, x_ptr=F32P, y_ptr=F32P, out_ptr=F32P, n=T.i32)
    assert names(kernel_ops(m)).count("load") == 2
    (store,) = of_kind(kernel_ops(m), "store")
    assert store.value.type == T.TileType((256,), T.f32) and store.mask is not None


def test_softmax():
    m = compile_ir(softmax, {"BLOCK": 128}, out_ptr=F32P, in_ptr=F32P, in_stride=T.i32,
                   out_stride=T.i32, n_cols=T.i32)
    ops = kernel_ops(m)
    assert [r.combine.ops[0].kind for r in of_kind(ops, "reduce")] == ["max", "add"]
    (load,) = of_kind(ops, "load")
    assert load.other.owner.NAME == "splat" and load.other.owner.src.owner.value == float("-inf")


def test_persistent_softmax():
    m = compile_ir(persistent_softmax, {"BLOCK": 128}, out_ptr=F32P, in_ptr=F32P,
                   n_rows=T.i32, n_cols=T.i32)
    (loop,) = of_kind(kernel_ops(m), "for")
    assert loop.inits == [] and "store" in names(loop.body.ops)


def test_matmul_with_relu_helper():
    m = compile_ir(matmul_relu, {"BM": 32, "BN": 32, "BK": 16}, a_ptr=ptr(T.f16),
                   b_ptr=ptr(T.f16), c_ptr=ptr(T.f16),
                   **{k: T.i32 for k in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")})
    ops = kernel_ops(m)
    (loop,) = of_kind(ops, "for")
    assert [v.type for v in loop.inits] == [T.TileType((32, 32), T.f32)]
    (dot,) = of_kind(ops, "dot")
    assert dot.a.type == T.TileType((32, 16), T.f16)
    (call,) = of_kind(ops, "call")
    assert call.args == [loop.result]
    (store,) = of_kind(ops, "store")
    assert store.value.type == T.TileType((32, 32), T.f16)
    assert store.value.owner.NAME == "cast"


def test_layer_norm():
    m = compile_ir(layer_norm, {"BLOCK": 1024}, x_ptr=ptr(T.f16), y_ptr=ptr(T.f16), w_ptr=F32P,
                   b_ptr=F32P, mean_ptr=F32P, rstd_ptr=F32P, stride=T.i32, N=T.i32, eps=T.f32)
    ops = kernel_ops(m)
    assert len(of_kind(ops, "reduce")) == 2
    assert [op.kind for op in of_kind(ops, "unary")] == ["sqrt"]
    assert len(of_kind(ops, "store")) == 3


def test_transpose_on_a_2d_grid():
    m = compile_ir(transpose, {"BM": 32, "BN": 16}, src=F32P, dst=F32P, M=T.i32, N=T.i32)
    ops = kernel_ops(m)
    assert [p.axis for p in of_kind(ops, "program_id")] == [0, 1]
    assert [p.result.type.shape for p in of_kind(ops, "permute")] == [(16, 32), (16, 32)]


def test_atomic_histogram():
    m = compile_ir(histogram, {"BLOCK": 64}, data_ptr=ptr(T.i32), hist_ptr=ptr(T.i32),
                   n=T.i32, n_bins=T.i32)
    (atomic,) = of_kind(kernel_ops(m), "atomic_rmw")
    assert atomic.kind == "add" and atomic.value.type == T.TileType((64,), T.i32)
    assert atomic.ptr.type == T.TileType((64,), ptr(T.i32))
