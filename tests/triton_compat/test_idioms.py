"""Language idioms that Triton kernels lean on, one small kernel each: keyword arguments and
defaults, hints, ``element_ty``, constexpr globals, reductions with ``keep_dims``, ``tl.dot``
options and ``.T``, ``tl.where`` with scalars, scans, ``associative_scan``, ``argmax``,
``umulhi``, nested helpers and static ifs (on constexpr bit masks too), pointer comparisons,
libdevice through ``tl.extra``, block pointers carried through loops and ifs, and the errors
a kernel outside the supported subset gets."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

GLOBAL_SCALE = tl.constexpr(3)


def on(device, a):
    return at.asarray(a, device=device)


# -- keyword arguments, hints, element_ty, eviction/cache hints -------------------------------
@at.jit
def copy_with_hints(X, Y, N, BLOCK: tl.constexpr = 128):
    pid = tl.program_id(axis=0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    x = tl.load(pointer=X + offs, mask=offs < N, other=0.0, eviction_policy="evict_last",
                cache_modifier=".cg")
    y = x.to(Y.dtype.element_ty) * GLOBAL_SCALE
    tl.store(Y + offs, y, mask=offs < N, cache_modifier=".wb")


def test_hints_keywords_and_element_ty(device, rng, poison):
    x = rng.standard_normal(300).astype(np.float32)
    y = on(device, poison(300, np.float16))
    copy_with_hints[(at.cdiv(300, 128),)](on(device, x), y, 300)
    x16 = x.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(y.numpy().astype(np.float64), x16 * 3,
                               rtol=1e-3)


# -- 2-D reductions: keep_dims, axis=1, a.T, tl.dot options -----------------------------------
@at.jit
def row_stats(X, OUT_MAX, OUT_NORM, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(X + rows[:, None] * N + cols[None, :])
    tl.store(OUT_MAX + rows, tl.max(x, axis=1))
    s = tl.sum(x, axis=1, keep_dims=True)
    tl.store(OUT_NORM + rows[:, None] * N + cols[None, :], x / s)


def test_reductions_axis_and_keep_dims(device, rng, poison):
    x = rng.random((16, 32), dtype=np.float32) + 0.5
    mx, norm = on(device, poison(16, np.float32)), on(device, poison((16, 32), np.float32))
    row_stats[(1,)](on(device, x), mx, norm, M=16, N=32)
    np.testing.assert_array_equal(mx.numpy(), x.max(1))
    np.testing.assert_allclose(norm.numpy(), x / x.astype(np.float64).sum(1, keepdims=True),
                               rtol=1e-6)


@at.jit
def dot_variants(A, B, C, D, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(A + rm[:, None] * K + rk[None, :])
    b = tl.load(B + rk[:, None] * N + rn[None, :])
    acc = tl.full((M, N), 1.0, tl.float32)
    acc = tl.dot(a, b, acc=acc, out_dtype=tl.float32, allow_tf32=False)
    tl.store(C + rm[:, None] * N + rn[None, :], acc)
    bt = tl.load(B + rn[:, None] + rk[None, :] * N)  # B^T as [N, K]
    d = tl.dot(a, bt.T, input_precision="ieee")
    tl.store(D + rm[:, None] * N + rn[None, :], d)


def test_dot_keywords_and_transpose(device, rng, poison):
    M, N, K = 16, 32, 16
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c, d = on(device, poison((M, N), np.float32)), on(device, poison((M, N), np.float32))
    dot_variants[(1,)](on(device, a), on(device, b), c, d, M=M, N=N, K=K)
    ref = a.astype(np.float64) @ b
    np.testing.assert_allclose(c.numpy(), ref + 1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d.numpy(), ref, rtol=1e-5, atol=1e-5)


# -- where with scalars, clamp, fma, abs, log, sigmoid, exp via tl.math -----------------------
@at.jit
def elementwise_zoo(X, Y, OUT, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(X + offs, mask=m, other=1.0)
    y = tl.load(Y + offs, mask=m, other=1.0)
    r = tl.where(x > 0, 1.0, -1.0) * tl.clamp(x, -0.5, 0.5)
    r += tl.fma(x, y, 2.0) + tl.log(tl.abs(y)) + tl.sigmoid(x) + tl.math.exp(y * 0.1)
    if x.dtype == tl.float32:
        r = r * 2
    tl.store(OUT + offs, r, mask=m)


def test_elementwise_zoo(device, rng, poison):
    n = 700
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = on(device, poison(n, np.float32))
    elementwise_zoo[(at.cdiv(n, 256),)](on(device, x), on(device, y), out, n, BLOCK=256)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = np.sign(x64) * np.clip(x64, -0.5, 0.5) + x64 * y64 + 2 + np.log(np.abs(y64)) \
        + 1 / (1 + np.exp(-x64)) + np.exp(0.1 * y64)
    np.testing.assert_allclose(out.numpy(), 2 * ref, rtol=1e-5, atol=1e-5)


# -- scans, argmax, associative_scan with a jit combine function ------------------------------
@at.jit
def _pair_max(a, b):
    return tl.maximum(a, b)


@at.jit
def scans(X, CUMSUM, RUNMAX, ARGMAX, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    tl.store(CUMSUM + offs, tl.cumsum(x, axis=0))
    tl.store(RUNMAX + offs, tl.associative_scan(x, 0, _pair_max))
    tl.store(ARGMAX, tl.argmax(x, axis=0, tie_break_left=True))


def test_scans_and_argmax(device, rng, poison):
    x = rng.integers(-50, 50, 64).astype(np.int32)
    x[40] = x.max() + 5
    x[50] = x[40]
    cs, rm, am = (on(device, poison(s, np.int32)) for s in (64, 64, 1))
    scans[(1,)](on(device, x), cs, rm, am, N=64)
    np.testing.assert_array_equal(cs.numpy(), np.cumsum(x))
    np.testing.assert_array_equal(rm.numpy(), np.maximum.accumulate(x))
    assert am.numpy()[0] == 40


# -- full, zeros_like, broadcast_to, reshape(can_reorder), view, umulhi, int64 offsets ---------
@at.jit
def shapes_and_ints(X, OUT, HI, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    grid2d = tl.broadcast_to(x[None, :], (4, N)) + tl.zeros_like(tl.full((4, N), 7, tl.uint32))
    flat = tl.reshape(grid2d, (4 * N,), can_reorder=False)
    tl.store(OUT + tl.arange(0, 4 * N), flat)
    tl.store(HI + offs, tl.umulhi(x, 0x9E3779B9))


def test_shapes_and_umulhi(device, rng, poison):
    x = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    out, hi = on(device, poison(128, np.uint32)), on(device, poison(32, np.uint32))
    shapes_and_ints[(1,)](on(device, x), out, hi, N=32)
    np.testing.assert_array_equal(out.numpy(), np.tile(x, 4))
    ref = (x.astype(np.uint64) * np.uint64(0x9E3779B9)) >> np.uint64(32)
    np.testing.assert_array_equal(hi.numpy(), ref.astype(np.uint32))


# -- nested jit helpers, static ifs on constexpr bits, num_programs, pointer comparisons ---------
@at.jit
def _square(x):
    return x * x


@at.jit
def _helper(x, SQUARE: tl.constexpr):
    if SQUARE:
        return _square(x)
    return x + 1


@at.jit
def nested(X, OUT, N, BLOCK: tl.constexpr, MODE: tl.constexpr):
    # MODE bit 0: square instead of adding one; bit 1: add the number of programs
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    ptrs = X + offs
    m = ptrs < X + N  # pointers compare like addresses
    x = tl.load(ptrs, mask=m)
    y = _helper(x, MODE & 1)
    if MODE & 2:
        y += tl.num_programs(0)
    tl.store(OUT + offs, y, mask=offs < N)


@pytest.mark.parametrize("mode", [1, 2])
def test_nested_helpers_and_pointer_compare(device, rng, poison, mode):
    n = 300
    x = rng.standard_normal(n, dtype=np.float32)
    out = on(device, poison(n, np.float32))
    grid = (at.cdiv(n, 128),)
    nested[grid](on(device, x), out, n, BLOCK=128, MODE=mode)
    ref = x.astype(np.float64) ** 2 if mode & 1 else x + 1.0
    if mode & 2:
        ref = ref + grid[0]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


# -- libdevice through tl.extra.cuda.libdevice and tl.extra.libdevice -------------------------
@at.jit
def libdevice_zoo(X, OUT, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    libdevice = tl.extra.cuda.libdevice
    tl.store(OUT + offs * 6 + 0, libdevice.tanh(x))
    tl.store(OUT + offs * 6 + 1, libdevice.log1p(x * 1e-5))
    tl.store(OUT + offs * 6 + 2, libdevice.expm1(x * 1e-5))
    tl.store(OUT + offs * 6 + 3, libdevice.trunc(x * 3))
    tl.store(OUT + offs * 6 + 4, libdevice.isnan(tl.log(x)).to(tl.float32))
    tl.store(OUT + offs * 6 + 5, tl.extra.libdevice.tan(x * 0.5))


def test_libdevice_functions(device, rng, poison):
    x = (rng.standard_normal(64) * 2).astype(np.float32)
    out = on(device, poison(64 * 6, np.float32))
    libdevice_zoo[(1,)](on(device, x), out, N=64)
    got = out.numpy().reshape(64, 6).astype(np.float64)
    x64 = x.astype(np.float64)
    tiny = (x * np.float32(1e-5)).astype(np.float64)
    np.testing.assert_allclose(got[:, 0], np.tanh(x64), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 1], np.log1p(tiny), rtol=1e-5)
    np.testing.assert_allclose(got[:, 2], np.expm1(tiny), rtol=1e-5)
    np.testing.assert_array_equal(got[:, 3], np.trunc((x * np.float32(3)).astype(np.float64)))
    np.testing.assert_array_equal(got[:, 4], (x < 0).astype(np.float64))
    np.testing.assert_allclose(got[:, 5], np.tan(x64 * 0.5), rtol=1e-4, atol=1e-5)


# -- what is not supported says so, at the user's line ----------------------------------------
@at.jit
def uses_inline_asm(X, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True,
                              pack=1)


def test_unsupported_triton_builtin_is_named(rng):
    with pytest.raises(at.CompilationError) as info:
        uses_inline_asm[(1,)](rng.integers(0, 16, 16).astype(np.int32), N=16)
    msg = str(info.value)
    assert "tl.inline_asm_elementwise is a Triton builtin that anytile does not support yet" in msg
    assert "test_idioms.py" in msg and "anytile/language" not in msg


@at.jit
def compares_pointer_with_int(X, N: tl.constexpr):
    ptrs = X + tl.arange(0, N)
    tl.store(ptrs, 1.0, mask=ptrs < N)


def test_pointer_compared_with_int_is_a_clear_error(rng):
    with pytest.raises(at.CompilationError, match="compares a pointer only with another pointer"):
        compares_pointer_with_int[(1,)](np.zeros(16, np.float32), N=16)


# -- block pointers in loops and ifs, padding, tuples carried through loops -------------------
@at.jit
def block_ptr_walk(X, OUT, NAN_OUT, M, N, BM: tl.constexpr, BN: tl.constexpr):
    p = tl.make_block_ptr(X, shape=(M, N), strides=(N, 1), offsets=(-1, 0), block_shape=(BM, BN),
                          order=(1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    pair = (0, 0.0)
    for i in range(0, N, BN):
        acc += tl.load(p, boundary_check=(0, 1), padding_option="zero")
        if i == 0:
            p = tl.advance(p, (1, BN))  # the first step also fixes the row offset
        else:
            p = tl.advance(p, (0, BN))
        pair = (pair[0] + 1, pair[1] + 0.5)
    out = tl.make_block_ptr(OUT, (M, BN), (BN, 1), (0, 0), (BM, BN), (1, 0))
    tl.store(out, acc + pair[0] * 100 + pair[1], boundary_check=(0,))
    q = tl.make_block_ptr(X, (M, N), (N, 1), (M - 2, N - 2), (4, 4), (1, 0))
    tl.store(tl.make_block_ptr(NAN_OUT, (4, 4), (4, 1), (0, 0), (4, 4), (1, 0)),
             tl.load(q, boundary_check=(0, 1), padding_option="nan"))


def test_block_pointers_and_carried_tuples(device, rng, poison):
    M, N, BM, BN = 6, 20, 8, 8
    x = rng.standard_normal((M, N)).astype(np.float32)
    out, nan_out = on(device, poison((M, BN), np.float32)), on(device, poison((4, 4), np.float32))
    block_ptr_walk[(1,)](on(device, x), out, nan_out, M, N, BM=BM, BN=BN)
    padded = np.zeros((BM + 1, 3 * BN))
    padded[1:M + 1, :N] = x  # row -1 (first step) reads zeros
    ref = padded[0:BM, 0:BN] + padded[1:BM + 1, BN:2 * BN] + padded[1:BM + 1, 2 * BN:3 * BN]
    steps = at.cdiv(N, BN)
    np.testing.assert_allclose(out.numpy(), ref[:M] + steps * 100 + steps * 0.5, rtol=1e-6)
    want = np.full((4, 4), np.nan)
    want[:2, :2] = x[M - 2:, N - 2:]
    np.testing.assert_array_equal(nan_out.numpy(), want)
