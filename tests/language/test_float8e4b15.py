"""``tl.float8e4b15`` (IR ``f8e4b15``): Triton's 8-bit float with e4m3fn's layout and exponent
bias 15 -- sign bit, 4 exponent bits, 3 mantissa bits; exponent 0 is subnormal
(``m / 8 * 2**-14``), S.1111.111 is NaN, no infinities, largest finite value 1.75.  Conversions
to it round to nearest even and saturate: a value past 1.75 (an infinity too) becomes 1.75.

The reference below is written from that definition alone (every value, then rounding by
search over them), and each device is checked against it bit for bit: all 256 codes to f16,
bf16, f32 and back, random values of every float type down to it, integers both ways,
constants, bitcasts, and memory read through ``triton.reinterpret``."""
import math

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.ir.types import f8e4b15, float8_codes, float8_values, parse_type

CODES = np.arange(256, dtype=np.uint8)
POISON = 0x5A                    # a code no test's kernel writes by chance everywhere


def _reference_value(code: int) -> float:
    """The value of one code, from the format's definition."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -14
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 15)


REFERENCE = np.array([_reference_value(c) for c in range(256)])
_FINITE = [c for c in range(128) if not math.isnan(REFERENCE[c])]   # 0 .. 1.75, ascending


def _reference_code(x: float) -> int:
    """The code nearest to ``x`` (ties to the even code), 1.75 past the largest, NaN kept."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign | 0x7F
    a = abs(x)
    if a >= 1.75:                          # saturation: 1.75 and everything past it
        return sign | _FINITE[-1]
    return sign | min(_FINITE, key=lambda c: (abs(REFERENCE[c] - a), c & 1))


def _reference_codes(values: np.ndarray) -> np.ndarray:
    return np.array([_reference_code(float(v)) for v in values.ravel()], np.uint8)


def _same_values(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal as numbers, NaN where NaN, and the sign of zeros kept."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    return bool(np.array_equal(got, want, equal_nan=True) and
                np.array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0])))


def _assert_codes(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Equal codes; a NaN's sign is left open (the IR keeps it only where it says so)."""
    want = np.asarray(want, np.uint8)
    nan = (want & 0x7F) == 0x7F
    np.testing.assert_array_equal(np.where(nan, got & 0x7F, got), np.where(nan, 0x7F, want),
                                  err_msg=what)


def _codes_on(device, codes: np.ndarray) -> at.Array:
    return at.asarray(np.ascontiguousarray(codes, np.uint8).view(f8e4b15.np), device=device)


def _poisoned_codes(device, n: int) -> at.Array:
    return _codes_on(device, np.full(n, POISON, np.uint8))


def _read_codes(arr: at.Array) -> np.ndarray:
    return arr.numpy().view(np.uint8)


def test_the_format_helpers_agree_with_the_definition():
    assert _same_values(float8_values(CODES, f8e4b15), REFERENCE)
    rng = np.random.default_rng(15)
    x = np.concatenate([rng.standard_normal(4000) * s for s in (2.0 ** -16, 1e-3, 0.5, 3.0)])
    np.testing.assert_array_equal(float8_codes(x, f8e4b15), _reference_codes(x))


def test_language_names_and_ir_text():
    assert (tl.float8e4b15.fp_mantissa_width, tl.float8e4b15.exponent_bias) == (3, 15)
    assert tl.float8e4b15.primitive_bitwidth == 8 and tl.float8e4b15.is_fp8()
    assert tl.float8e4b15.is_fp8e4b15() and not tl.float8e4nv.is_fp8e4b15()
    assert tl.str_to_ty("fp8e4b15") == tl.float8e4b15 and tl.float8e4b15 != tl.float8e4nv
    assert repr(tl.float8e4b15) == "tl.float8e4b15" and tl.float8e4b15.ir == f8e4b15
    assert parse_type("ptr<f8e4b15>").pointee == f8e4b15


@at.jit
def widen(x_ptr, f16_ptr, bf16_ptr, f32_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(f16_ptr + offs, x.to(tl.float16))
    tl.store(bf16_ptr + offs, x.to(tl.bfloat16))
    tl.store(f32_ptr + offs, x.to(tl.float32))


@at.jit
def narrow(src_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs).to(tl.float8e4b15))


def test_every_code_widens_exactly_and_comes_back(device):
    """Triton's fp8 -> fpN -> fp8 round trip over all 256 codes, for f16, bf16 and f32."""
    import ml_dtypes
    wide = {name: at.asarray(np.full(256, np.nan, dtype), device=device)
            for name, dtype in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
                                ("f32", np.float32))}
    widen[(1,)](_codes_on(device, CODES), wide["f16"], wide["bf16"], wide["f32"], N=256)
    for name, arr in wide.items():
        assert _same_values(arr.numpy(), REFERENCE), name
        back = _poisoned_codes(device, 256)
        narrow[(1,)](arr, back, N=256)
        _assert_codes(_read_codes(back), CODES, name)


@pytest.mark.parametrize("src", ["f16", "bf16", "f32", "f64"])
def test_random_values_round_to_nearest_even_and_saturate(device, rng, src):
    import ml_dtypes
    if src == "f64" and "fp64" not in device.backend.capabilities:
        pytest.skip(f"{device} has no f64")
    dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
             "f64": np.float64}[src]
    grid = REFERENCE[_FINITE]
    ties = (grid[1:] + grid[:-1]) / 2                      # halfway between neighbours
    special = [1.75, 1.8, 1.8125, 2.0, 1e4, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan]
    x = np.concatenate([special, ties, -ties] +
                       [rng.standard_normal(200) * s for s in (2.0 ** -15, 1e-3, 0.4, 1.0, 40.0)])
    x = x[:1024].astype(dtype)
    out = _poisoned_codes(device, 1024)
    narrow[(1,)](at.asarray(x, device=device), out, N=1024)
    _assert_codes(_read_codes(out), _reference_codes(x.astype(np.float64)))


@at.jit
def to_and_from_ints(codes_ptr, ints_ptr, as_int_ptr, from_int_ptr, as_bool_ptr,
                     N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(codes_ptr + offs)
    tl.store(as_int_ptr + offs, x.to(tl.int32))
    tl.store(as_bool_ptr + offs, x.to(tl.int1).to(tl.int8))
    tl.store(from_int_ptr + offs, tl.load(ints_ptr + offs).to(tl.float8e4b15))


def test_integers_both_ways(device, rng):
    finite = CODES[~np.isnan(REFERENCE)]
    codes = rng.choice(finite, 256)
    ints = rng.integers(-4, 5, 256).astype(np.int32)
    as_int = at.asarray(np.full(256, -77, np.int32), device=device)
    as_bool = at.asarray(np.full(256, 9, np.int8), device=device)
    from_int = _poisoned_codes(device, 256)
    to_and_from_ints[(1,)](_codes_on(device, codes), at.asarray(ints, device=device), as_int,
                           from_int, as_bool, N=256)
    np.testing.assert_array_equal(as_int.numpy(), np.trunc(REFERENCE[codes]).astype(np.int32))
    np.testing.assert_array_equal(as_bool.numpy(), (REFERENCE[codes] != 0).astype(np.int8))
    _assert_codes(_read_codes(from_int), _reference_codes(ints))


@at.jit
def constants(x_ptr, out_ptr, FILL: tl.constexpr, OTHER: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    kept = tl.load(x_ptr + offs, mask=offs < N // 2, other=OTHER)
    tl.store(out_ptr + offs, kept)
    tl.store(out_ptr + N + offs, tl.full((N,), FILL, tl.float8e4b15))


@pytest.mark.parametrize("fill, other", [(0.3, -0.0), (1.3, 5.0), (-1e-5, 1.8125)])
def test_constants_are_rounded_as_conversions_are(device, rng, fill, other):
    codes = rng.integers(0, 256, 16).astype(np.uint8)
    out = _poisoned_codes(device, 32)
    constants[(1,)](_codes_on(device, codes), out, FILL=fill, OTHER=other, N=16)
    want = np.concatenate([codes[:8], [_reference_code(other)] * 8, [_reference_code(fill)] * 16])
    _assert_codes(_read_codes(out), want)


@at.jit
def bitcasts(codes_ptr, bytes_ptr, out_ptr, back_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(codes_ptr + offs).to(tl.uint8, bitcast=True))
    tl.store(back_ptr + offs, tl.load(bytes_ptr + offs).to(tl.float8e4b15, bitcast=True))


def test_bitcasts_keep_every_bit(device, rng):
    codes = rng.permutation(CODES)
    out = at.asarray(np.full(256, POISON, np.uint8), device=device)
    back = _poisoned_codes(device, 256)
    bitcasts[(1,)](_codes_on(device, codes), at.asarray(codes[::-1].copy(), device=device), out,
                   back, N=256)
    np.testing.assert_array_equal(out.numpy(), codes)
    np.testing.assert_array_equal(_read_codes(back), codes[::-1])


def test_arrays_take_numbers_rounded(device):
    x = np.array([1.5, -0.3, 5.0, np.nan, 2.0 ** -17, -np.inf], np.float32)
    arr = at.asarray(x, dtype=tl.float8e4b15, device=device)
    _assert_codes(_read_codes(arr), _reference_codes(x))
    filled = at.full((4,), 0.3, tl.float8e4b15, device=device)
    _assert_codes(_read_codes(filled), [_reference_code(0.3)] * 4)


def test_reinterpret_reads_bytes_as_float8e4b15(device, rng):
    from anytile import triton_compat
    codes = rng.permutation(CODES).astype(np.int8)
    out = np.full(256, np.nan, np.float32)
    wrapped = triton_compat.reinterpret(codes, tl.float8e4b15)
    assert wrapped.base is codes and wrapped.dtype == tl.float8e4b15
    widen_f32 = at.jit(_widen_f32)
    widen_f32[(1,)](wrapped, out, N=256, device=device)
    assert _same_values(out, REFERENCE[codes.view(np.uint8)])


def _widen_f32(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))



@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "f8e4b15"])
def test_a_strided_float8_array_reads_back(device, rng, fmt):
    """A transposed (strided) view of a float8 array on the device reads back whole (a torch
    tensor's permuted view copied to a device comes back this way): NumPy rejects the
    typestr of ml_dtypes' arrays when it rebuilds one from its interface."""
    import ml_dtypes
    dtype = f8e4b15.np if fmt == "f8e4b15" else np.dtype(getattr(ml_dtypes, fmt))
    codes = rng.integers(0, 0x70, (8, 8)).astype(np.uint8)   # finite in all three formats
    whole = at.asarray(codes.view(dtype), device=device)
    view = at.Array(whole.buffer, (8, 8), whole.element_type, whole.device, strides=(1, 8),
                    offset=whole.offset, keep=whole)             # strides in elements
    np.testing.assert_array_equal(view.numpy().view(np.uint8), codes.T)


@at.jit
def _signs(x_ptr, abs_ptr, neg_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(abs_ptr + offs, tl.abs(x))
    tl.store(neg_ptr + offs, -x)


def test_abs_and_negation_work_on_the_sign_bit(device, rng):
    codes = rng.permutation(CODES)
    absolute, negated = _poisoned_codes(device, 256), _poisoned_codes(device, 256)
    _signs[(1,)](_codes_on(device, codes), absolute, negated, N=256)
    _assert_codes(_read_codes(absolute), codes & 0x7F)
    _assert_codes(_read_codes(negated), codes ^ 0x80)


@at.jit
def _print_float8(x_ptr):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    tl.device_print("v", x)
    tl.device_print("bits", x, hex=True)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "f8e4b15"])
def test_device_print_shows_float8_values(device, capfd, fmt):
    import ml_dtypes
    if "device_print" not in device.backend.capabilities:
        pytest.skip(f"{device} has no device_print")
    dtype = f8e4b15.np if fmt == "f8e4b15" else np.dtype(getattr(ml_dtypes, fmt))
    codes = np.array([0x3A, 0xC1, 0x05, 0x28], np.uint8)
    values = float8_values(codes, f8e4b15) if fmt == "f8e4b15" else \
        codes.view(dtype).astype(np.float32)
    _print_float8[(1,)](at.asarray(codes.view(dtype), device=device))
    device.synchronize()
    lines = capfd.readouterr().out.splitlines()
    want = [f"pid (0, 0, 0) idx ({i}) v {float(v):.9g}" for i, v in enumerate(values)]
    want += [f"pid (0, 0, 0) idx ({i}) bits 0x{c:x}" for i, c in enumerate(codes)]
    assert sorted(lines) == sorted(want)
