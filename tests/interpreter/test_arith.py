"""Elementwise op semantics of the interpreter against Python-int and float64 references."""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from anytile.ir import BitcastOp, FmaOp, SelectOp, UMulHiOp
from anytile.ir.types import TileType, from_numpy
from interp_kit import rng, run_elementwise, run_scalarwise

N = 256
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
BF16 = np.dtype(ml_dtypes.bfloat16)


def random_ints(dtype, n=N, seed=0):
    info = np.iinfo(dtype)
    return rng(seed).integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def wrap(value: int, dtype) -> int:
    """``value`` modulo 2^bits, read back with ``dtype``'s signedness."""
    bits = np.dtype(dtype).itemsize * 8
    value %= 1 << bits
    if np.issubdtype(dtype, np.signedinteger) and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def nearest_even(x: float, dtype) -> float:
    """``x`` (an exact f64) rounded to nearest-even in a 16-bit float format, by searching
    every finite value of the format (independent of the code under test)."""
    table = _FINITE_16[np.dtype(dtype)]
    values, codes = table
    hi = int(np.searchsorted(values, x))
    lo = max(hi - 1, 0)
    hi = min(hi, values.size - 1)
    d_lo, d_hi = abs(x - values[lo]), abs(values[hi] - x)
    if d_lo < d_hi or (d_lo == d_hi and codes[lo] % 2 == 0):
        return float(values[lo])
    return float(values[hi])


def _finite_table(dtype):
    codes = np.arange(1 << 16, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        values = codes.view(dtype).astype(np.float64)
    keep = np.isfinite(values) & ~((values == 0) & (codes >= 0x8000))
    order = np.argsort(values[keep], kind="stable")
    return values[keep][order], codes[keep][order].astype(np.int64)


_FINITE_16 = {np.dtype(np.float16): _finite_table(np.float16), BF16: _finite_table(BF16)}


def nearest_f32(exact: Fraction) -> np.float32:
    """The f32 nearest to the rational ``exact``, ties to even (finite range only)."""
    guess = np.float32(float(exact))
    best = None
    for c in (np.nextafter(guess, np.float32(-np.inf)), guess,
              np.nextafter(guess, np.float32(np.inf))):
        d = abs(Fraction(float(c)) - exact)
        key = (d, int(np.array(c).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, c)
    return best[1]


# -- integer arithmetic -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("kind,ref", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                      ("mul", lambda a, b: a * b)])
def test_integer_arithmetic_wraps(dtype, kind, ref):
    a, b = random_ints(dtype, seed=1), random_ints(dtype, seed=2)
    out = run_elementwise(lambda kb, x, y: kb.binary(kind, x, y), [a, b], dtype)
    expected = [wrap(ref(int(x), int(y)), dtype) for x, y in zip(a, b)]
    assert out.tolist() == expected


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_signed_div_rem_truncate_toward_zero(dtype):
    a, b = random_ints(dtype, seed=3), random_ints(dtype, seed=4)
    b[:8] = [7, -7, 3, -3, 1, -1, 2, -2]
    a[:8] = [-20, -20, 20, -20, 5, -5, -9, 9]
    b[b == 0] = 5
    a[8], b[8] = np.iinfo(dtype).min, -1          # INT_MIN / -1 wraps to INT_MIN
    quotient = run_elementwise(lambda kb, x, y: kb.binary("div", x, y), [a, b], dtype)
    remainder = run_elementwise(lambda kb, x, y: kb.binary("rem", x, y), [a, b], dtype)
    expected_q = [wrap(c_div(int(x), int(y)), dtype) for x, y in zip(a, b)]
    expected_r = [wrap(int(x) - c_div(int(x), int(y)) * int(y), dtype) for x, y in zip(a, b)]
    assert quotient.tolist() == expected_q
    assert remainder.tolist() == expected_r
    assert quotient[0] == -2 and remainder[0] == -6 and remainder[2] == 2


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.uint8])
def test_division_by_zero_gives_zero(dtype):
    a = random_ints(dtype, seed=5)
    b = np.zeros_like(a)
    assert not run_elementwise(lambda kb, x, y: kb.binary("div", x, y), [a, b], dtype).any()
    assert not run_elementwise(lambda kb, x, y: kb.binary("rem", x, y), [a, b], dtype).any()


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_unsigned_div_rem(dtype):
    a, b = random_ints(dtype, seed=6), random_ints(dtype, seed=7)
    b[b == 0] = 3
    q = run_elementwise(lambda kb, x, y: kb.binary("div", x, y), [a, b], dtype)
    r = run_elementwise(lambda kb, x, y: kb.binary("rem", x, y), [a, b], dtype)
    assert q.tolist() == [int(x) // int(y) for x, y in zip(a, b)]
    assert r.tolist() == [int(x) % int(y) for x, y in zip(a, b)]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64])
def test_shifts(dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = random_ints(dtype, seed=8)
    s = rng(9).integers(0, bits, N).astype(dtype)
    left = run_elementwise(lambda kb, x, y: kb.binary("shl", x, y), [a, s], dtype)
    right = run_elementwise(lambda kb, x, y: kb.binary("shr", x, y), [a, s], dtype)
    assert left.tolist() == [wrap(int(x) << int(k), dtype) for x, k in zip(a, s)]
    # Python's >> on ints is arithmetic; unsigned values are non-negative, so logical
    assert right.tolist() == [int(x) >> int(k) for x, k in zip(a, s)]


def test_out_of_range_shifts_are_deterministic():
    a = np.array([-8, 8, -1, 1] * 4, np.int32)
    s = np.array([32, 40, -1, 33] * 4, np.int32)
    assert not run_elementwise(lambda kb, x, y: kb.binary("shl", x, y), [a, s], np.int32).any()
    right = run_elementwise(lambda kb, x, y: kb.binary("shr", x, y), [a, s], np.int32)
    assert right.tolist() == [-1, 0, -1, 0] * 4       # arithmetic: the sign fill


@pytest.mark.parametrize("dtype", [np.int16, np.uint32, np.int64])
@pytest.mark.parametrize("kind,ref", [("and", lambda a, b: a & b), ("or", lambda a, b: a | b),
                                      ("xor", lambda a, b: a ^ b), ("min", min), ("max", max)])
def test_bitwise_and_minmax(dtype, kind, ref):
    a, b = random_ints(dtype, seed=10), random_ints(dtype, seed=11)
    out = run_elementwise(lambda kb, x, y: kb.binary(kind, x, y), [a, b], dtype)
    assert out.tolist() == [wrap(ref(int(x), int(y)), dtype) for x, y in zip(a, b)]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_umulhi(dtype):
    a, b = random_ints(dtype, seed=12), random_ints(dtype, seed=13)
    bits = np.dtype(dtype).itemsize * 8
    out = run_elementwise(lambda kb, x, y: kb.op(UMulHiOp, x, y).result, [a, b], dtype)
    assert out.tolist() == [wrap((int(x) * int(y)) >> bits, dtype) for x, y in zip(a, b)]


def test_integer_unary_wraps():
    a = random_ints(np.int32, seed=14)
    a[0] = np.iinfo(np.int32).min
    neg = run_elementwise(lambda kb, x: kb.unary("neg", x), [a], np.int32)
    absolute = run_elementwise(lambda kb, x: kb.unary("abs", x), [a], np.int32)
    inverted = run_elementwise(lambda kb, x: kb.unary("not", x), [a], np.int32)
    assert neg.tolist() == [wrap(-int(x), np.int32) for x in a]
    assert absolute.tolist() == [wrap(abs(int(x)), np.int32) for x in a]
    assert absolute[0] == np.iinfo(np.int32).min
    assert inverted.tolist() == [~int(x) for x in a]


def test_i1_is_arithmetic_modulo_two():
    a, b = rng(15).random(N) < 0.5, rng(16).random(N) < 0.5
    for kind, ref in [("and", a & b), ("or", a | b), ("xor", a ^ b), ("add", a ^ b),
                      ("mul", a & b), ("max", a | b), ("min", a & b)]:
        out = run_elementwise(lambda kb, x, y: kb.binary(kind, x, y), [a, b], np.bool_)
        assert np.array_equal(out, ref), kind
    assert np.array_equal(run_elementwise(lambda kb, x: kb.unary("not", x), [a], np.bool_), ~a)


# -- floats --------------------------------------------------------------------------------------
FLOAT_BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                ("fdiv", np.divide)]


@pytest.mark.parametrize("kind,ref", FLOAT_BINARY)
def test_f32_arithmetic_is_ieee(kind, ref):
    a = rng(17).standard_normal(N).astype(np.float32)
    b = rng(18).standard_normal(N).astype(np.float32) + np.float32(3)
    out = run_elementwise(lambda kb, x, y: kb.binary(kind, x, y), [a, b], np.float32)
    expected = ref(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("kind,ref", FLOAT_BINARY)
def test_half_floats_round_once_per_op(dtype, kind, ref):
    a = (rng(19).standard_normal(N) * 4).astype(dtype)
    b = (rng(20).standard_normal(N) + 3).astype(dtype)
    out = run_elementwise(lambda kb, x, y: kb.binary(kind, x, y), [a, b], dtype)
    exact = ref(a.astype(np.float64), b.astype(np.float64))   # exact except fdiv (53 bits)
    expected = [nearest_even(float(e), dtype) for e in exact]
    assert out.astype(np.float64).tolist() == expected


def test_float_div_is_floor_and_rem_is_fmod():
    a = rng(21).standard_normal(N).astype(np.float32) * 10
    b = rng(22).standard_normal(N).astype(np.float32) + np.float32(0.5)
    floor_div = run_elementwise(lambda kb, x, y: kb.binary("div", x, y), [a, b], np.float32)
    rem = run_elementwise(lambda kb, x, y: kb.binary("rem", x, y), [a, b], np.float32)
    assert np.array_equal(floor_div, np.floor(a / b))
    assert np.array_equal(rem, np.fmod(a, b))


def test_float_min_max_ignore_a_single_nan():
    a = rng(23).standard_normal(N).astype(np.float32)
    b = rng(24).standard_normal(N).astype(np.float32)
    a[:4], b[:4] = [np.nan, 1.0, np.nan, -2.0], [3.0, np.nan, np.nan, 5.0]
    lo = run_elementwise(lambda kb, x, y: kb.binary("min", x, y), [a, b], np.float32)
    hi = run_elementwise(lambda kb, x, y: kb.binary("max", x, y), [a, b], np.float32)
    assert lo[0] == 3.0 and lo[1] == 1.0 and np.isnan(lo[2]) and lo[3] == -2.0
    assert hi[0] == 3.0 and hi[1] == 1.0 and np.isnan(hi[2]) and hi[3] == 5.0
    assert np.array_equal(lo[4:], np.minimum(a, b)[4:])
    assert np.array_equal(hi[4:], np.maximum(a, b)[4:])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_float_min_max_order_signed_zeros(dtype):
    """-0 < +0 whatever the operands' order: max(-0, +0) = +0, min(-0, +0) = -0 (IEEE
    754-2019 maximumNumber/minimumNumber), on tiles and on scalars."""
    zeros = np.array([0.0, -0.0], np.float64)
    a = rng(25).choice(zeros, N).astype(dtype)
    b = rng(26).choice(zeros, N).astype(dtype)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    for run in (run_elementwise, run_scalarwise):
        hi = run(lambda kb, x, y: kb.binary("max", x, y), [a, b], dtype)
        lo = run(lambda kb, x, y: kb.binary("min", x, y), [a, b], dtype)
        assert np.array_equal(hi.view(bits), a.view(bits) & b.view(bits))
        assert np.array_equal(lo.view(bits), a.view(bits) | b.view(bits))


@pytest.mark.parametrize("pred,ref", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                                      ("le", np.less_equal), ("gt", np.greater),
                                      ("ge", np.greater_equal)])
def test_compare_float_with_nan_and_unsigned(pred, ref):
    a = np.round(rng(25).standard_normal(N), 1).astype(np.float32)
    b = np.round(rng(26).standard_normal(N), 1).astype(np.float32)
    a[:3] = np.nan
    b[5:10] = a[5:10]
    out = run_elementwise(lambda kb, x, y: kb.compare(pred, x, y), [a, b], np.bool_)
    assert np.array_equal(out, ref(a, b))
    assert out[0] == (pred == "ne")
    u, v = random_ints(np.uint32, seed=27), random_ints(np.uint32, seed=28)
    out = run_elementwise(lambda kb, x, y: kb.compare(pred, x, y), [u, v], np.bool_)
    assert out.tolist() == [bool(ref(int(x), int(y))) for x, y in zip(u, v)]


@pytest.mark.parametrize("kind,ref", [("exp", math.exp), ("log", math.log), ("sqrt", math.sqrt),
                                      ("rsqrt", lambda x: 1 / math.sqrt(x)), ("sin", math.sin),
                                      ("cos", math.cos), ("erf", math.erf), ("tanh", math.tanh),
                                      ("exp2", lambda x: 2.0 ** x), ("log2", math.log2),
                                      ("floor", math.floor), ("ceil", math.ceil)])
def test_f32_math_is_correctly_rounded(kind, ref):
    a = (rng(29).random(N) * 4 + 0.01).astype(np.float32)
    out = run_elementwise(lambda kb, x: kb.unary(kind, x), [a], np.float32)
    expected = np.array([ref(float(x)) for x in a], np.float64).astype(np.float32)
    assert np.array_equal(out, expected)


def test_float_neg_abs_exact():
    a = rng(30).standard_normal(N).astype(BF16)
    assert np.array_equal(run_elementwise(lambda kb, x: kb.unary("neg", x), [a], BF16), -a)
    assert np.array_equal(run_elementwise(lambda kb, x: kb.unary("abs", x), [a], BF16), abs(a))


def test_fma_rounds_once():
    a = rng(31).standard_normal(N).astype(np.float32)
    b = rng(32).standard_normal(N).astype(np.float32)
    c = rng(33).standard_normal(N).astype(np.float32)
    out = run_elementwise(lambda kb, x, y, z: kb.op(FmaOp, x, y, z).result, [a, b, c], np.float32)
    expected = [nearest_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
                for x, y, z in zip(a, b, c)]
    assert out.tolist() == [float(e) for e in expected]
    a64 = np.full(4, 1 + 2.0 ** -30)
    b64, c64 = np.full(4, 1 - 2.0 ** -30), np.full(4, -1.0)
    out64 = run_elementwise(lambda kb, x, y, z: kb.op(FmaOp, x, y, z).result, [a64, b64, c64],
                            np.float64)
    assert out64.tolist() == [-2.0 ** -60] * 4          # a*b+c in two roundings gives 0


def test_select():
    cond = rng(34).random(N) < 0.5
    a, b = random_ints(np.int16, seed=35), random_ints(np.int16, seed=36)
    out = run_elementwise(lambda kb, c, x, y: kb.op(SelectOp, c, x, y).result, [cond, a, b],
                          np.int16)
    assert np.array_equal(out, np.where(cond, a, b))


# -- casts ---------------------------------------------------------------------------------------
def cast_kernel(dst):
    return lambda kb, x: kb.cast(x, from_numpy(dst))


def test_float_to_int_truncates_saturates_and_maps_nan_to_zero():
    a = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, -np.inf, -0.5] * 2, np.float32)
    i32 = run_elementwise(cast_kernel(np.int32), [a], np.int32)
    assert i32.tolist() == [1, -1, 2**31 - 1, -2**31, 0, 2**31 - 1, -2**31, 0] * 2
    u8 = run_elementwise(cast_kernel(np.uint8), [a], np.uint8)
    assert u8.tolist() == [1, 0, 255, 0, 0, 255, 0, 0] * 2
    big = np.array([2.0 ** 63, -2.0 ** 63, 2.0 ** 62, -1e300], np.float64)
    i64 = run_elementwise(cast_kernel(np.int64), [big], np.int64)
    assert i64.tolist() == [2**63 - 1, -2**63, 2**62, -2**63]
    u64 = run_elementwise(cast_kernel(np.uint64), [big], np.uint64)
    assert u64.tolist() == [2**63, 0, 2**62, 0]


def test_int_casts_truncate_or_extend_by_source_sign():
    a = random_ints(np.int8, seed=37)
    assert run_elementwise(cast_kernel(np.uint32), [a], np.uint32).tolist() == \
        [wrap(int(x), np.uint32) for x in a]
    u = random_ints(np.uint8, seed=38)
    assert run_elementwise(cast_kernel(np.int32), [u], np.int32).tolist() == u.tolist()
    w = random_ints(np.int32, seed=39)
    assert run_elementwise(cast_kernel(np.int8), [w], np.int8).tolist() == \
        [wrap(int(x), np.int8) for x in w]


def test_casts_to_and_from_i1():
    a = np.array([0.0, -0.0, 2.5, np.nan] * 4, np.float32)
    assert run_elementwise(cast_kernel(np.bool_), [a], np.bool_).tolist() == \
        [False, False, True, True] * 4
    flags = rng(40).random(N) < 0.5
    assert np.array_equal(run_elementwise(cast_kernel(np.float32), [flags], np.float32),
                          flags.astype(np.float32))
    assert np.array_equal(run_elementwise(cast_kernel(np.int64), [flags], np.int64),
                          flags.astype(np.int64))


def test_float_narrowing_rounds_once_to_nearest_even():
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
                  65519.0, 65520.0, -1e-9, 3.0e38, 1e-45] * 2, np.float64)
    bf = run_elementwise(cast_kernel(BF16), [x], BF16).astype(np.float64)
    assert bf.tolist()[:4] == [1 + 2.0 ** -7, 1.0, 1 + 2.0 ** -6,
                               nearest_even(65519.0, BF16)]
    half = run_elementwise(cast_kernel(np.float16), [x], np.float16).astype(np.float64)
    assert half[3] == 65504.0 and half[4] == np.inf
    r = rng(41).standard_normal(N) * 100
    for dtype in (BF16, np.float16):
        narrowed = run_elementwise(cast_kernel(dtype), [r], dtype).astype(np.float64)
        assert narrowed.tolist() == [nearest_even(float(v), dtype) for v in r]


def test_int64_to_float_rounds_once():
    x = np.array([2**60 + 2**36 + 1, -(2**60 + 2**36 + 1), 2**63 - 1, -2**63] * 4, np.int64)
    f32 = run_elementwise(cast_kernel(np.float32), [x], np.float32)
    assert f32.tolist()[:4] == [float(2**60 + 2**37), -float(2**60 + 2**37), 2.0**63, -2.0**63]
    big = random_ints(np.int64, seed=42)
    f32 = run_elementwise(cast_kernel(np.float32), [big], np.float32)
    assert f32.tolist() == [float(nearest_f32(Fraction(int(v)))) for v in big]
    u = random_ints(np.uint64, seed=43)
    f64 = run_elementwise(cast_kernel(np.float64), [u], np.float64)
    assert f64.tolist() == [float(int(v)) for v in u]    # Python rounds int->float exactly


def test_bitcast_reinterprets_bits():
    a = rng(44).standard_normal(N).astype(np.float32)
    to_i32 = [TileType((N,), from_numpy(np.int32))]
    out = run_elementwise(lambda kb, x: kb.op(BitcastOp, x, result_types=to_i32).result, [a],
                          np.int32)
    assert np.array_equal(out, a.view(np.int32))


# -- scalars follow the same rules as tiles -----------------------------------------------------
SCALAR_CASES = [
    ("div", np.int32, lambda kb, x, y: kb.binary("div", x, y)),
    ("rem", np.int64, lambda kb, x, y: kb.binary("rem", x, y)),
    ("udiv", np.uint16, lambda kb, x, y: kb.binary("div", x, y)),
    ("shr", np.int16, lambda kb, x, y: kb.binary("shr", x, y)),
    ("shl", np.uint64, lambda kb, x, y: kb.binary("shl", x, y)),
    ("f16 add", np.float16, lambda kb, x, y: kb.binary("add", x, y)),
    ("bf16 mul", BF16, lambda kb, x, y: kb.binary("mul", x, y)),
    ("fmin", np.float32, lambda kb, x, y: kb.binary("min", x, y)),
    ("floor div", np.float32, lambda kb, x, y: kb.binary("div", x, y)),
    ("umulhi64", np.int64, lambda kb, x, y: kb.op(UMulHiOp, x, y).result),
    ("fma", np.float32, lambda kb, x, y: kb.op(FmaOp, x, y, x).result),
    ("fma64", np.float64, lambda kb, x, y: kb.op(FmaOp, x, y, y).result),
    ("to i8", np.float32, lambda kb, x, y: kb.cast(x, from_numpy(np.int8))),
    ("i64 to bf16", np.int64, lambda kb, x, y: kb.cast(x, from_numpy(BF16))),
    ("erf", np.float16, lambda kb, x, y: kb.unary("erf", x)),
    ("abs", np.int8, lambda kb, x, y: kb.unary("abs", x)),
    ("lt", np.uint32, lambda kb, x, y: kb.compare("lt", x, y)),
    ("select", np.float64, lambda kb, x, y: kb.op(SelectOp, kb.compare("gt", x, y), x, y).result),
]


@pytest.mark.parametrize("name,dtype,body", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
def test_scalar_ops_agree_with_tile_ops(name, dtype, body):
    n = 32
    if np.issubdtype(dtype, np.integer):
        a, b = random_ints(dtype, n, seed=50), random_ints(dtype, n, seed=51)
        if name.startswith("sh"):
            b = (b % (np.dtype(dtype).itemsize * 8)).astype(dtype)
        b[:4] = [0, 1, 2, 3]
    else:
        a = (rng(50).standard_normal(n) * 8).astype(dtype)
        b = (rng(51).standard_normal(n) * 8).astype(dtype)
        a[0], b[1] = np.nan, np.nan
    tiles = run_elementwise(body, [a, b], _out_dtype(name, dtype))
    scalars = run_scalarwise(body, [a, b], _out_dtype(name, dtype))
    assert tiles.tobytes() == scalars.tobytes()


def _out_dtype(name, dtype):
    return {"to i8": np.int8, "i64 to bf16": BF16, "lt": np.bool_}.get(name, dtype)
