"""Triton's semantics where anytile once differed (each found by running Triton programs), on
every usable device against NumPy."""
import numpy as np

import anytile as at
import anytile.language as tl


@at.jit
def max_with_index(x_ptr, v_ptr, i_ptr, N: tl.constexpr):
    v, i = tl.max(tl.load(x_ptr + tl.arange(0, N)), axis=0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)


def test_max_with_indices_of_a_32_element_tile(device, rng):
    """It once never finished compiling on cpu."""
    x = rng.standard_normal(32).astype(np.float32)
    v = at.asarray(np.full(1, np.nan, np.float32), device=device)
    i = at.asarray(np.full(1, -1, np.int32), device=device)
    max_with_index[(1,)](at.asarray(x, device=device), v, i, N=32)
    assert v.numpy()[0] == x.max() and i.numpy()[0] == x.argmax()


@at.jit
def _sum_and_max(a, b, c, d):
    return a + c, tl.maximum(b, d)


@at.jit
def scan_pair_down_columns(x_ptr, sum_ptr, max_ptr):
    r = tl.arange(0, 8)
    offs = r[:, None] * 8 + r[None, :]
    x = tl.load(x_ptr + offs)
    s, m = tl.associative_scan((x, x * 2.0), 0, _sum_and_max)
    tl.store(sum_ptr + offs, s)
    tl.store(max_ptr + offs, m)


def test_associative_scan_of_a_tuple_along_axis_0(device, rng, poison):
    """It once failed in cpu's llir stage."""
    x = rng.standard_normal((8, 8)).astype(np.float32)
    s = at.asarray(poison((8, 8), np.float32), device=device)
    m = at.asarray(poison((8, 8), np.float32), device=device)
    scan_pair_down_columns[(1,)](at.asarray(x, device=device), s, m)
    np.testing.assert_allclose(s.numpy(), np.cumsum(x.astype(np.float64), axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(m.numpy(), np.maximum.accumulate(2 * x, axis=0))


@at.jit
def shift_right(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) >> tl.load(y_ptr + offs))


def test_right_shift_follows_the_left_operands_own_signedness(device):
    """int8 >> uint16 promotes to uint16 but shifts arithmetically (Triton: -8 >> 1 is 65532);
    uint8 >> int32 shifts logically; same-signedness pairs as before."""
    cases = [(np.int8, np.uint16, np.uint16, [-8, 5, -128, 127], [1, 1, 7, 3]),
             (np.int32, np.uint32, np.uint32, [-1024, 7, -1, 2**30], [2, 1, 31, 4]),
             (np.uint8, np.int32, np.int32, [255, 128, 3, 200], [1, 7, 1, 3]),
             (np.int16, np.int16, np.int16, [-300, 300, -1, 5], [3, 3, 15, 1])]
    for xt, yt, rt, xs, ys in cases:
        x, y = np.array(xs, xt), np.array(ys, yt)
        bits = 8 * np.dtype(rt).itemsize
        # the left operand widened by its own signedness, shifted, cut to the result's width
        expected = ((x.astype(np.int64) >> y.astype(np.int64)) & ((1 << bits) - 1)).astype(np.uint64)
        out = at.empty(4, rt, device=device)
        shift_right[(1,)](at.asarray(x, device=device), at.asarray(y, device=device), out, BLOCK=4)
        np.testing.assert_array_equal(out.numpy(), expected.astype(f"u{bits // 8}").view(rt),
                                      err_msg=f"{np.dtype(xt)} >> {np.dtype(yt)}")


@at.jit
def bf16_scans_and_max(x_ptr, sum_ptr, prod_ptr, max_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    s = tl.cumsum(x, axis=0)
    p = tl.cumprod(x, axis=0)
    m = tl.max(x, axis=0)
    tl.static_assert(s.dtype == tl.float32 and p.dtype == tl.float32 and m.dtype == tl.float32)
    tl.store(sum_ptr + tl.arange(0, BLOCK), s)
    tl.store(prod_ptr + tl.arange(0, BLOCK), p)
    tl.store(max_ptr, m)


def test_bf16_scans_and_max_compute_in_f32(device, rng, poison):
    """Triton computes cumsum, cumprod and max/min of bf16 in f32 (and returns f32): a running
    sum of 1024 bf16 values then agrees with f32 arithmetic on every backend."""
    import ml_dtypes
    x = (rng.uniform(0.5, 1.5, 1024)).astype(ml_dtypes.bfloat16)
    s = at.asarray(poison(1024, np.float32), device=device)
    p = at.asarray(poison(1024, np.float32), device=device)
    m = at.asarray(poison(1, np.float32), device=device)
    bf16_scans_and_max[(1,)](at.asarray(x, device=device), s, p, m, BLOCK=1024)
    wide = x.astype(np.float64)
    np.testing.assert_allclose(s.numpy(), np.cumsum(wide), rtol=1e-5)
    np.testing.assert_allclose(p.numpy()[:64], np.cumprod(wide)[:64], rtol=1e-5)
    assert m.numpy()[0] == wide.max()


@at.jit
def narrow_min_max(x_ptr, max_ptr, min_ptr, arg_ptr, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    hi = tl.max(x, axis=0)
    lo = tl.min(x, axis=0)
    v, i = tl.max(x, axis=0, return_indices=True)
    tl.static_assert(hi.dtype == WIDE and lo.dtype == WIDE)
    tl.static_assert(v.dtype == x.dtype or x.dtype == tl.bfloat16)
    tl.store(max_ptr, hi)
    tl.store(min_ptr, lo)
    tl.store(arg_ptr, i)


def test_min_max_of_narrow_types_return_f32_or_i32(device, rng, poison):
    """Triton's tl.max/tl.min without indices widen values under 32 bits (f16 to f32, 8- and
    16-bit integers of either sign to i32), so `tl.max(x) + y` promotes as in Triton; with
    indices the value keeps its type."""
    for dtype, wide, npwide in ((np.float16, tl.float32, np.float32), (np.int8, tl.int32, np.int32),
                                (np.uint16, tl.int32, np.int32)):
        info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
        x = rng.uniform(float(info.min) / 2, float(info.max) / 2, 64).astype(dtype)
        hi, lo = (at.asarray(poison(1, npwide), device=device) for _ in range(2))
        arg = at.asarray(poison(1, np.int32), device=device)
        narrow_min_max[(1,)](at.asarray(x, device=device), hi, lo, arg, BLOCK=64, WIDE=wide)
        assert hi.numpy()[0] == x.max() and lo.numpy()[0] == x.min(), dtype
        assert arg.numpy()[0] == int(np.argmax(x)), dtype


def test_store_does_not_add_dimensions_to_its_value():
    """As in Triton, a stored value keeps its rank: an (n, m, 1) value through (n, m, k, l)
    pointers once wrote k*l times as many elements as the value held, past the array's end
    (a segfault on cpu in Triton's own test_index1d)."""
    import pytest

    @at.jit
    def store_rank_up(z_ptr, N: tl.constexpr):
        r = tl.arange(0, N)
        z = r[:, None] + r[None, :]
        ptrs = z_ptr + r[:, None, None] * N * N + r[None, :, None] * N + r[None, None, :]
        tl.store(ptrs, z[:, :, None] + z[:, None, :] * 0)     # same rank: fine
        tl.store(ptrs, z)                                     # rank 2 into rank 3: an error

    with pytest.raises(at.CompilationError, match=r"cannot broadcast a value of shape \[4, 4\] "
                                                  r"to pointers of shape \[4, 4, 4\]: rank"):
        store_rank_up[(1,)](np.zeros(64, np.int32), N=4, device="interpreter")


@at.jit
def count_down(out_ptr, lo, hi, STEP: tl.constexpr):
    acc = 0
    acc = acc.to(tl.int64)                  # a Python number used as a tensor
    one = 1
    n = tl.zeros((), dtype=one.dtype)
    for i in range(lo, hi, STEP):
        acc += i
        n += 1
    tl.store(out_ptr, acc)
    tl.store(out_ptr + 1, n.to(tl.int64))


def test_range_with_a_negative_constexpr_step(device):
    for lo, hi, step in [(15, -16, -1), (15, -16, -3), (22, 18, -1), (3, 5, -1), (2**35, 2**35 - 7, -2)]:
        out = at.asarray(np.zeros(2, np.int64), device=device)
        count_down[(1,)](out, lo, hi, STEP=step)
        expected = list(range(lo, hi, step))
        assert out.numpy().tolist() == [sum(expected), len(expected)], (lo, hi, step)


@at.jit
def _roll(a1, b1_last, b1_cur, a2, b2_last, b2_cur):
    return a1 + a2, tl.where(a2 == 1, b1_cur, 0) + b2_last, b2_cur


@at.jit
def roll_scan(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    r, c = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + c[None, :])
    _, z, _ = tl.associative_scan((1 + 0 * x, 0 * x, x), axis=AXIS, combine_fn=_roll)
    tl.store(z_ptr + r[:, None] * N + c[None, :], z)


def test_scan_whose_combine_mixes_constants_and_tiles(device, poison):
    """Triton's test_scan2d 'roll' once failed in the cpu backend's llir stage (a constant
    made inside the combine function stayed a scalar beside vector operands)."""
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    for axis in (0, 1):
        z = at.asarray(poison((8, 4), np.float32), device=device)
        roll_scan[(1,)](at.asarray(x, device=device), z, M=8, N=4, AXIS=axis)
        want = np.roll(x, 1, axis=axis)
        want[(slice(0, 1), slice(None))[::1 if axis == 0 else -1]] = 0
        np.testing.assert_array_equal(z.numpy(), want)


@at.jit
def index_like_triton(x_ptr, out_ptr):
    p = out_ptr[None, None, :]              # a scalar pointer: two new dimensions, `:` passes
    v = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(p + tl.arange(0, 4)[None, None, :], v[None, None, :])


def test_indexing_follows_triton(device, poison):
    out = at.asarray(poison(4, np.float32), device=device)
    index_like_triton[(1,)](at.asarray(np.arange(4, dtype=np.float32), device=device), out)
    np.testing.assert_array_equal(out.numpy(), np.arange(4))


@at.jit
def nested_return(c1_ptr, c2_ptr, c3_ptr, out_ptr):
    val = 0
    if tl.load(c1_ptr) != 0:
        if tl.load(c2_ptr) != 0:
            val = 1
        else:
            return
    else:
        if tl.load(c3_ptr) != 0:
            val = 2
        else:
            val = 3
    tl.store(out_ptr, val)


def test_return_nested_in_a_branch_skips_the_rest(device):
    for c1 in (0, 1):
        for c2 in (0, 1):
            for c3 in (0, 1):
                out = at.asarray(np.full(1, -1, np.int32), device=device)
                flags = [at.asarray(np.array([c], np.int32), device=device) for c in (c1, c2, c3)]
                nested_return[(1,)](*flags, out)
                want = (1 if c2 else -1) if c1 else (2 if c3 else 3)
                assert out.numpy()[0] == want, (c1, c2, c3)


@at.jit
def store_by_conditional_expression(x_ptr, out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, tl.load(x_ptr)) if pid % 2 == 0 else \
        tl.store(out_ptr + pid, tl.load(x_ptr + 1))


def test_conditional_expression_whose_branches_are_both_stores(device, rng, poison):
    x = rng.standard_normal(2).astype(np.float32)
    out = at.asarray(poison(5, np.float32), device=device)
    store_by_conditional_expression[(5,)](at.asarray(x, device=device), out)
    np.testing.assert_array_equal(out.numpy(), x[[0, 1, 0, 1, 0]])
