"""The IR each builtin produces: types, shapes and attributes."""
import pytest

import anytile.language as tl
from anytile.errors import CompilationError
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import compile_ir, kernel_ops, of_kind, ptr

F32_TILE = T.TileType((16, 32), T.f32)


@jit
def indexing_and_broadcast(x_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    offs = rows[:, None] * stride + cols[None, :]
    mask = (rows[:, None] < 10) & (cols[None, :] < 20)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(x_ptr + offs, x, mask=cols[None, :] < 20)


def test_none_indexing_and_two_dimensional_pointer_tiles():
    ops = kernel_ops(compile_ir(indexing_and_broadcast, {"BM": 16, "BN": 32},
                                x_ptr=ptr(T.f32), stride=T.i32))
    expands = of_kind(ops, "expand_dims")
    assert [(e.axis, e.result.type.shape) for e in expands[:2]] == [(1, (16, 1)), (0, (1, 32))]
    (load,) = of_kind(ops, "load")
    assert load.result.type == F32_TILE and load.mask.type == T.TileType((16, 32), T.i1)
    assert load.other.type == F32_TILE
    (store,) = of_kind(ops, "store")
    assert store.mask.type.shape == (16, 32)  # a [1, 32] mask broadcasts to the pointers
    assert of_kind(ops, "broadcast")


@jit
def reductions(x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + tl.arange(0, BM), tl.sum(x, axis=1))
    tl.store(out_ptr + tl.arange(0, BN), x.max(0))
    tl.store(out_ptr, tl.min(x))
    tl.store(out_ptr + offs, tl.sum(x, 1, keep_dims=True) + x)
    v, i = tl.max(x, 1, return_indices=True)
    tl.store(out_ptr + tl.arange(0, BM), v + i)
    tl.store(out_ptr + tl.arange(0, BN), tl.argmin(x, 0).to(tl.float32))
    tl.store(out_ptr + offs, tl.cumsum(x, 1) + tl.cumprod(x, 0, reverse=True))


def test_reductions_and_scans():
    ops = kernel_ops(compile_ir(reductions, {"BM": 16, "BN": 32}, x_ptr=ptr(T.f32),
                                out_ptr=ptr(T.f32)))
    reds = of_kind(ops, "reduce")
    assert [(r.axis, [v.type for v in r.results]) for r in reds] == [
        (1, [T.TileType((16,), T.f32)]),
        (0, [T.TileType((32,), T.f32)]),
        (0, [T.f32]),  # axis=None flattens to 512 elements first
        (1, [T.TileType((16,), T.f32)]),
        (1, [T.TileType((16,), T.f32), T.TileType((16,), T.i32)]),
        (0, [T.TileType((32,), T.f32), T.TileType((32,), T.i32)]),
    ]
    assert [r.combine.ops[0].kind for r in reds[:4]] == ["add", "max", "min", "add"]
    assert len(reds[4].combine.args) == 4 and reds[4].combine.ops[-1].NAME == "yield"
    reshape = reds[2].srcs[0].owner
    assert reshape.NAME == "reshape" and reshape.result.type == T.TileType((512,), T.f32)
    keep = [op for op in ops if op.NAME == "expand_dims" and op.src is reds[3].result]
    assert keep and keep[0].result.type == T.TileType((16, 1), T.f32)
    scans = of_kind(ops, "scan")
    assert [(s.axis, s.reverse, s.combine.ops[0].kind) for s in scans] == [
        (1, False, "add"), (0, True, "mul")]


@jit
def narrow_sum(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.sum(x))


@pytest.mark.parametrize("elem,acc", [(T.i8, T.i32), (T.u16, T.u32), (T.i64, T.i64),
                                      (T.f16, T.f16), (T.i1, T.i32)])
def test_sum_accumulates_narrow_integers_in_32_bits(elem, acc):
    ops = kernel_ops(compile_ir(narrow_sum, {"BLOCK": 64}, x_ptr=ptr(elem), out_ptr=ptr(acc)))
    (red,) = of_kind(ops, "reduce")
    assert red.result.type == acc


@jit
def dots(a_ptr, b_ptr, c_ptr, K: tl.constexpr, PREC: tl.constexpr):
    offs_a = tl.arange(0, 32)[:, None] * K + tl.arange(0, K)[None, :]
    offs_b = tl.arange(0, K)[:, None] * 16 + tl.arange(0, 16)[None, :]
    a = tl.load(a_ptr + offs_a)
    b = tl.load(b_ptr + offs_b)
    acc = tl.dot(a, b, input_precision=PREC)
    acc = tl.dot(a, b, acc)
    tl.store(c_ptr + tl.arange(0, 32)[:, None] * 16 + tl.arange(0, 16)[None, :],
             tl.maximum(acc, 0))


@pytest.mark.parametrize("elem,acc,prec,expected_prec", [
    (T.f32, T.f32, None, "tf32"), (T.f32, T.f32, "ieee", "ieee"), (T.f16, T.f32, None, "ieee"),
    (T.bf16, T.f32, "tf32", "ieee"), (T.i8, T.i32, None, "ieee"),
])
def test_dot_accumulator_types(elem, acc, prec, expected_prec):
    ops = kernel_ops(compile_ir(dots, {"K": 64, "PREC": prec}, a_ptr=ptr(elem), b_ptr=ptr(elem),
                                c_ptr=ptr(acc)))
    first, second = of_kind(ops, "dot")
    assert first.result.type == second.result.type == T.TileType((32, 16), acc)
    assert first.acc.owner.NAME == "constant" and first.acc.owner.value == 0
    assert second.acc is first.result
    assert first.input_precision == expected_prec


@jit
def atomics(p_ptr, i_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(p_ptr + offs, 1.0, mask=m)
    tl.atomic_max(p_ptr + offs, tl.load(p_ptr + offs), sem="relaxed", scope="cta")
    tl.atomic_min(p_ptr, 2.0)
    tl.atomic_xchg(p_ptr + offs, 3.0)
    old = tl.atomic_cas(i_ptr, 0, 1)
    tl.atomic_and(i_ptr + offs, old, mask=m)
    tl.atomic_or(i_ptr + offs, 4)
    tl.atomic_xor(i_ptr, 5, sem="release")


def test_atomics():
    ops = kernel_ops(compile_ir(atomics, {"BLOCK": 32}, p_ptr=ptr(T.f32), i_ptr=ptr(T.i32),
                                n=T.i32))
    rmw = of_kind(ops, "atomic_rmw")
    assert [(a.kind, a.sem, a.scope, a.mask is not None) for a in rmw] == [
        ("add", "acq_rel", "gpu", True), ("max", "relaxed", "cta", False),
        ("min", "acq_rel", "gpu", False), ("xchg", "acq_rel", "gpu", False),
        ("and", "acq_rel", "gpu", True), ("or", "acq_rel", "gpu", False),
        ("xor", "release", "gpu", False)]
    assert rmw[0].result.type == T.TileType((32,), T.f32) and rmw[2].result.type == T.f32
    (cas,) = of_kind(ops, "atomic_cas")
    assert cas.result.type == T.i32 and cas.cmp.type == T.i32
    assert rmw[4].value.type == T.TileType((32,), T.i32)  # the scalar `old` is splatted


@jit
def shapes(x_ptr, BM: tl.constexpr, BN: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    t = tl.trans(x)
    u = x.T
    p = tl.permute(tl.reshape(x, 2, BM // 2, BN), (2, 0, 1))
    r = tl.reshape(p, [BN * BM])
    e = tl.expand_dims(tl.arange(0, BN), 0)
    b = tl.broadcast_to(e, (BM, BN))
    bb, xx = tl.broadcast(e, x)
    tl.store(x_ptr + offs, b + bb + xx.view(BM, BN))
    tl.store(x_ptr + tl.arange(0, BM * BN), r)
    tl.store(x_ptr + offs.T, t + u)


def test_shape_builtins():
    ops = kernel_ops(compile_ir(shapes, {"BM": 16, "BN": 32}, x_ptr=ptr(T.f32)))
    perms = of_kind(ops, "permute")
    assert [(p.order, p.result.type.shape) for p in perms] == [
        ((1, 0), (32, 16)), ((1, 0), (32, 16)), ((2, 0, 1), (32, 2, 8)), ((1, 0), (32, 16))]
    reshapes = [r.result.type.shape for r in of_kind(ops, "reshape")]
    assert reshapes[:2] == [(2, 8, 32), (512,)]
    assert of_kind(ops, "broadcast")[0].result.type == T.TileType((16, 32), T.i32)


@jit
def math_and_casts(x_ptr, i_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    i = tl.load(i_ptr + tl.arange(0, BLOCK))
    y = tl.exp(x) + tl.math.exp2(x) + tl.log(x) + tl.log2(x) + tl.sqrt(x) + tl.rsqrt(x)
    y += tl.sin(x) + tl.cos(x) + tl.abs(x) + tl.floor(x) + tl.ceil(x) + tl.erf(x)
    y += tl.fma(x, x, x) + tl.sigmoid(x) + tl.fdiv(x, y) + tl.sqrt_rn(x) + x.exp()
    y += tl.clamp(x, -1.0, 1.0) + tl.minimum(x, i) + (-x) + x ** 3
    j = tl.umulhi(i, i) + tl.cdiv(i, 4) + (~i) + (i << 2) + (i >> 1) + (i ^ 3) + tl.abs(i)
    tl.store(x_ptr + tl.arange(0, BLOCK), y + j.to(tl.float32) + x.to(tl.int32, bitcast=True))
    tl.store(i_ptr + tl.arange(0, BLOCK), tl.cast(y, tl.int32) + tl.cdiv(BLOCK, 3))


def test_math_builtins_and_casts():
    ops = kernel_ops(compile_ir(math_and_casts, {"BLOCK": 16}, x_ptr=ptr(T.f32),
                                i_ptr=ptr(T.i32)))
    unary = [op.kind for op in of_kind(ops, "unary")]
    for kind in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "abs", "floor",
                 "ceil", "erf", "neg", "not"):
        assert kind in unary
    assert of_kind(ops, "fma") and of_kind(ops, "umulhi")
    assert [c.result.type.elem for c in of_kind(ops, "bitcast")] == [T.i32]
    binary = [op.kind for op in of_kind(ops, "binary")]
    for kind in ("fdiv", "min", "max", "shl", "shr", "xor", "div"):
        assert kind in binary
    assert 6 in [op.value for op in of_kind(ops, "constant")]  # cdiv(16, 3) folded


@jit
def hints_and_debug(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.multiple_of(tl.program_id(0) * BLOCK, 16)
    offs = tl.max_contiguous(offs + tl.arange(0, BLOCK), [BLOCK])
    tl.device_assert(offs < n, "offs out of range")
    tl.debug_barrier()
    assert BLOCK > 1, "static Python assert"
    tl.static_assert(BLOCK == 32)
    tl.store(x_ptr + offs, 1.0)


def test_hints_asserts_and_barrier():
    ops = kernel_ops(compile_ir(hints_and_debug, {"BLOCK": 32}, x_ptr=ptr(T.f32), n=T.i32))
    hints = of_kind(ops, "hint")
    assert [(h.multiple_of, h.max_contiguous) for h in hints] == [((16,), None), (None, (32,))]
    (assertion,) = of_kind(ops, "assert")
    assert assertion.message == "offs out of range"
    assert assertion.cond.type == T.TileType((32,), T.i1)
    assert of_kind(ops, "barrier")


@jit
def full_and_zeros(x_ptr, v):
    a = tl.full([4, 8], 2, tl.int16)
    b = tl.zeros((4, 8), dtype=tl.float16)
    c = tl.full([4, 8], v, tl.float32)
    d = tl.zeros_like(c)
    tl.store(x_ptr + tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :], a + b + c + d)


def test_full_and_zeros():
    ops = kernel_ops(compile_ir(full_and_zeros, x_ptr=ptr(T.f32), v=T.i32))
    consts = [(c.value, c.result.type) for c in of_kind(ops, "constant")
              if isinstance(c.result.type, T.TileType)]
    assert consts[:2] == [(2, T.TileType((4, 8), T.i16)), (0.0, T.TileType((4, 8), T.f16))]
    splat = [s for s in of_kind(ops, "splat") if s.result.type == T.TileType((4, 8), T.f32)]
    assert splat and splat[0].src.owner.NAME == "cast"


@jit
def bad_full(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, tl.sum(tl.zeros([BLOCK, 4], dtype=tl.float32)))


def test_tile_shapes_must_be_powers_of_two():
    with pytest.raises(CompilationError, match="tile dimension 0 is 12, which is not a power of 2"):
        compile_ir(bad_full, {"BLOCK": 12}, x_ptr=ptr(T.f32))


@jit
def small_dot(a_ptr):
    a = tl.zeros([8, 16], dtype=tl.float16)
    tl.store(a_ptr, tl.sum(tl.sum(tl.dot(a, tl.trans(a)), 0), 0))


def test_dot_needs_dimensions_of_at_least_16():
    with pytest.raises(CompilationError, match="tl.dot needs every dimension >= 16"):
        compile_ir(small_dot, a_ptr=ptr(T.f32))


@jit
def nan_propagation(x_ptr, BLOCK: tl.constexpr, MODE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.ravel(tl.reshape(x, 2, BLOCK // 2))
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.maximum(x, y, propagate_nan=MODE))


def test_maximum_can_propagate_nans():
    plain = kernel_ops(compile_ir(nan_propagation, {"BLOCK": 16, "MODE": tl.PropagateNan.NONE},
                                  x_ptr=ptr(T.f32)))
    assert [r.result.type.shape for r in of_kind(plain, "reshape")] == [(2, 8), (16,)]
    assert not of_kind(plain, "select")
    nan = kernel_ops(compile_ir(nan_propagation, {"BLOCK": 16, "MODE": tl.PropagateNan.ALL},
                                x_ptr=ptr(T.f32)))
    # x != x finds NaNs in either operand, which then win
    assert [c.pred for c in of_kind(nan, "compare")] == ["ne", "ne"]
    assert len(of_kind(nan, "select")) == 2


@jit
def store_tile_through_scalar_pointer(x_ptr):
    tl.store(x_ptr, tl.arange(0, 16))


def test_store_of_a_tile_through_one_pointer_is_an_error():
    with pytest.raises(CompilationError, match=r"tl.store: a value of shape \[16\] does not fit "
                                               "a scalar pointer"):
        compile_ir(store_tile_through_scalar_pointer, x_ptr=ptr(T.i32))
