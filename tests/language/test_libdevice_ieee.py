"""The rest of ``tl.extra.libdevice`` on every usable device: integer bit functions,
reinterpretations, conversions and arithmetic in each rounding mode (checked bit-exactly
against exact rational arithmetic), and the elementary functions added beside them (pow,
exp10, fmod, remainder, sinpi, cospi, ilogb, ...) within their documented bounds."""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.language.extra import libdevice as ld

MODES = ("rn", "rz", "rd", "ru")


def _dtypes(device):
    return [np.float32] + ([np.float64] if "fp64" in device.backend.device_capabilities(device.info)
                           else [])


def _int_type(dt):
    return np.int32 if np.dtype(dt).itemsize == 4 else np.int64


def round_exact(value, mode, dt):
    """The ``dt`` value ``mode`` rounds the rational ``value`` to (overflow included)."""
    dt = np.dtype(dt).type
    big = np.finfo(dt).max
    if value > Fraction(float(big)):
        lo, hi = big, dt(np.inf)
    elif value < -Fraction(float(big)):
        lo, hi = dt(-np.inf), -big
    else:
        r = dt(float(value))
        while Fraction(float(r)) > value:
            r = np.nextafter(r, dt(-np.inf))
        while Fraction(float(np.nextafter(r, dt(np.inf)))) <= value:
            r = np.nextafter(r, dt(np.inf))
        lo = r
        hi = r if Fraction(float(r)) == value else np.nextafter(r, dt(np.inf))
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if value >= 0 else hi
    if np.isinf(lo) or np.isinf(hi):        # beyond the largest finite value
        limit = Fraction(float(big)) + Fraction(float(big - np.nextafter(big, dt(0)))) / 2
        return (hi if value >= limit else lo) if value > 0 else (lo if value <= -limit else hi)
    dl, dh = value - Fraction(float(lo)), Fraction(float(hi)) - value
    if dl == dh:
        return lo if int(np.array(lo).view(_int_type(dt))) % 2 == 0 else hi
    return lo if dl < dh else hi


def _same(got, ref):
    """Bit-identical, NaNs of either sign alike."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(ref)
        return both_nan | (got.view(_int_type(got.dtype)) == ref.astype(got.dtype).view(
            _int_type(got.dtype)))
    return got == ref


def _check(name, got, ref, *inputs):
    bad = np.nonzero(~_same(got, ref))[0]
    assert bad.size == 0, (f"{name}: {bad.size} wrong, e.g. at {[x[bad[0]] for x in inputs]}: "
                           f"got {got[bad[0]]!r}, expected {ref[bad[0]]!r}")


# -- integers ----------------------------------------------------------------------------------
@at.jit
def int_bits_kernel(x_ptr, y_ptr, s_ptr, w_ptr, out_ptr, out64_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    x, y, s = tl.load(x_ptr + o), tl.load(y_ptr + o), tl.load(s_ptr + o)
    w = tl.load(w_ptr + o)
    tl.store(out_ptr + 0 * N + o, ld.clz(x))
    tl.store(out_ptr + 1 * N + o, ld.popc(x))
    tl.store(out_ptr + 2 * N + o, ld.ffs(x))
    tl.store(out_ptr + 3 * N + o, ld.brev(x))
    tl.store(out_ptr + 4 * N + o, ld.byte_perm(x, y, s))
    tl.store(out_ptr + 5 * N + o, ld.mul24(x, y))
    tl.store(out_ptr + 6 * N + o, ld.hadd(x, y))
    tl.store(out_ptr + 7 * N + o, ld.rhadd(x, y))
    tl.store(out_ptr + 8 * N + o, ld.sad(x, y, s.to(tl.uint32)).to(tl.int32, bitcast=True))
    tl.store(out_ptr + 9 * N + o, ld.mulhi(x, y))
    tl.store(out64_ptr + 0 * N + o, ld.clz(w).to(tl.int64))
    tl.store(out64_ptr + 1 * N + o, ld.popc(w).to(tl.int64))
    tl.store(out64_ptr + 2 * N + o, ld.ffs(w).to(tl.int64))
    tl.store(out64_ptr + 3 * N + o, ld.brev(w))


def test_integer_bit_functions_match_their_definitions(device, rng):
    n = 128
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    y = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    s = rng.integers(0, 2**31, n, dtype=np.int64).astype(np.int32)
    w = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    x[:6] = [0, 1, -1, 2**31 - 1, -2**31, 0x00800000]
    y[:6] = [0, -1, -1, 2**31 - 1, -2**31, 3]
    w[:4] = [0, 1, -1, -2**63]
    out = at.asarray(np.zeros(10 * n, np.int32), device=device)
    out64 = at.asarray(np.zeros(4 * n, np.int64), device=device)
    int_bits_kernel[(1,)](*(at.asarray(a, device=device) for a in (x, y, s, w)), out, out64, N=n)
    got, got64 = out.numpy().reshape(10, n), out64.numpy().reshape(4, n)

    def bits(v, width):
        return int(v) & ((1 << width) - 1)

    def sext24(v):
        v = bits(v, 24)
        return v - (1 << 24) if v >> 23 else v

    def wrap32(v):
        return np.int64(v & 0xFFFFFFFF).astype(np.uint32).view(np.int32)

    ref = [[width - bits(v, width).bit_length() for v in a] for a, width in ((x, 32),)]
    ref += [[bin(bits(v, 32)).count("1") for v in x]]
    ref += [[(bits(v, 32) & -bits(v, 32)).bit_length() for v in x]]
    ref += [[wrap32(int(format(bits(v, 32), "032b")[::-1], 2)) for v in x]]
    ref += [[wrap32(sum(((((bits(b_, 32) << 32) | bits(a, 32)) >> (8 * ((int(c) >> 4 * i) & 7)))
                          & 0xFF) << 8 * i for i in range(4))) for a, b_, c in zip(x, y, s)]]
    ref += [[wrap32(sext24(a) * sext24(b_)) for a, b_ in zip(x, y)]]
    ref += [[(int(a) + int(b_)) >> 1 for a, b_ in zip(x, y)]]
    ref += [[(int(a) + int(b_) + 1) >> 1 for a, b_ in zip(x, y)]]
    ref += [[wrap32(abs(int(a) - int(b_)) + int(c)) for a, b_, c in zip(x, y, s)]]
    ref += [[(int(a) * int(b_)) >> 32 for a, b_ in zip(x, y)]]
    names = ["clz", "popc", "ffs", "brev", "byte_perm", "mul24", "hadd", "rhadd", "sad", "mulhi"]
    for name, g, r in zip(names, got, ref):
        _check(name, g, np.array(r, np.int64).astype(np.int32), x, y, s)
    ref64 = [[64 - bits(v, 64).bit_length() for v in w], [bin(bits(v, 64)).count("1") for v in w],
             [(bits(v, 64) & -bits(v, 64)).bit_length() for v in w],
             [np.uint64(int(format(bits(v, 64), "064b")[::-1], 2)).view(np.int64) for v in w]]
    for name, g, r in zip(["clz", "popc", "ffs", "brev"], got64, ref64):
        _check(name + " (int64)", g, np.array(r).astype(np.int64), w)


# -- arithmetic in each rounding mode ----------------------------------------------------------
@at.jit
def directed_kernel(a_ptr, b_ptr, c_ptr, out_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    a, b, c = tl.load(a_ptr + o), tl.load(b_ptr + o), tl.load(c_ptr + o)
    tl.store(out_ptr + 0 * N + o, ld.add_rn(a, b))
    tl.store(out_ptr + 1 * N + o, ld.add_rz(a, b))
    tl.store(out_ptr + 2 * N + o, ld.add_rd(a, b))
    tl.store(out_ptr + 3 * N + o, ld.add_ru(a, b))
    tl.store(out_ptr + 4 * N + o, ld.sub_rn(a, b))
    tl.store(out_ptr + 5 * N + o, ld.sub_rz(a, b))
    tl.store(out_ptr + 6 * N + o, ld.sub_rd(a, b))
    tl.store(out_ptr + 7 * N + o, ld.sub_ru(a, b))
    tl.store(out_ptr + 8 * N + o, ld.mul_rn(a, b))
    tl.store(out_ptr + 9 * N + o, ld.mul_rz(a, b))
    tl.store(out_ptr + 10 * N + o, ld.mul_rd(a, b))
    tl.store(out_ptr + 11 * N + o, ld.mul_ru(a, b))
    tl.store(out_ptr + 12 * N + o, ld.div_rn(a, b))
    tl.store(out_ptr + 13 * N + o, ld.div_rz(a, b))
    tl.store(out_ptr + 14 * N + o, ld.div_rd(a, b))
    tl.store(out_ptr + 15 * N + o, ld.div_ru(a, b))
    tl.store(out_ptr + 16 * N + o, ld.fma_rn(a, b, c))
    tl.store(out_ptr + 17 * N + o, ld.fma_rz(a, b, c))
    tl.store(out_ptr + 18 * N + o, ld.fma_rd(a, b, c))
    tl.store(out_ptr + 19 * N + o, ld.fma_ru(a, b, c))
    tl.store(out_ptr + 20 * N + o, ld.rcp_rn(b))
    tl.store(out_ptr + 21 * N + o, ld.rcp_rz(b))
    tl.store(out_ptr + 22 * N + o, ld.rcp_rd(b))
    tl.store(out_ptr + 23 * N + o, ld.rcp_ru(b))
    tl.store(out_ptr + 24 * N + o, ld.sqrt_rn(tl.abs(a)))
    tl.store(out_ptr + 25 * N + o, ld.sqrt_rz(tl.abs(a)))
    tl.store(out_ptr + 26 * N + o, ld.sqrt_rd(tl.abs(a)))
    tl.store(out_ptr + 27 * N + o, ld.sqrt_ru(tl.abs(a)))


def _sqrt_round(v, mode, dt):
    fr = Fraction(float(v))
    r = dt(math.sqrt(float(v)))
    cands = [np.nextafter(np.nextafter(r, dt(0)), dt(0)), np.nextafter(r, dt(0)), r,
             np.nextafter(r, dt(np.inf)), np.nextafter(np.nextafter(r, dt(np.inf)), dt(np.inf))]
    lo = max(c for c in cands if Fraction(float(c)) ** 2 <= fr)
    hi = min(c for c in cands if Fraction(float(c)) ** 2 >= fr)
    if mode in ("rd", "rz") or lo == hi:
        return lo if mode != "ru" else hi
    if mode == "ru":
        return hi
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    return lo if mid * mid > fr else hi


def test_arithmetic_in_each_rounding_mode_is_correctly_rounded(device, rng):
    n = 128
    for dt in _dtypes(device):
        a = (rng.standard_normal(n) * 10).astype(dt)
        b = (rng.standard_normal(n) * 3).astype(dt)
        c = (-a * b * dt(1.0000001)).astype(dt)         # fma cancels to a few bits
        big = np.finfo(dt).max
        a[:8] = [big, -big, big, 1.0, 3.0, -1.0, 0.0, 2.0 ** -20]
        b[:8] = [big, -big, 0.5, 3.0, 0.0, 3.0, 5.0, 1.0]
        c[:8] = [big, 0.0, -big, 1.0, 2.0, 1e-30, 0.0, -1.0]
        out = at.asarray(np.zeros(28 * n, dt), device=device)
        directed_kernel[(1,)](*(at.asarray(v, device=device) for v in (a, b, c)), out, N=n)
        got = out.numpy().reshape(28, n)
        F = lambda v: Fraction(float(v))     # noqa: E731
        exact = {
            "add": [F(p) + F(q) for p, q in zip(a, b)],
            "sub": [F(p) - F(q) for p, q in zip(a, b)],
            "mul": [F(p) * F(q) for p, q in zip(a, b)],
            "div": [F(p) / F(q) if q != 0 else None for p, q in zip(a, b)],
            "fma": [F(p) * F(q) + F(r) for p, q, r in zip(a, b, c)],
            "rcp": [1 / F(q) if q != 0 else None for q in b],
        }
        row = 0
        for op in ("add", "sub", "mul", "div", "fma", "rcp"):
            for mode in MODES:
                ref = np.array([round_exact(v, mode, dt) if v is not None else np.nan
                                for v in exact[op]], dt)
                g = got[row]
                if op in ("div", "rcp"):      # x / 0: the IEEE infinity (or NaN for 0 / 0)
                    num = a if op == "div" else np.ones_like(b)
                    with np.errstate(all="ignore"):
                        ref = np.where(b == 0, num / b, ref)
                _check(f"{op}_{mode} ({np.dtype(dt).name})", g, ref, a, b, c)
                row += 1
        for mode in MODES:
            ref = np.array([_sqrt_round(abs(v), mode, dt) for v in a], dt)
            _check(f"sqrt_{mode} ({np.dtype(dt).name})", got[row], ref, a)
            row += 1


# -- conversions -------------------------------------------------------------------------------
@at.jit
def float_to_int_kernel(f_ptr, d_ptr, i32_ptr, u32_ptr, i64_ptr, u64_ptr, N: tl.constexpr,
                        FP64: tl.constexpr):
    o = tl.arange(0, N)
    f = tl.load(f_ptr + o)
    tl.store(i32_ptr + 0 * N + o, ld.float2int_rn(f))
    tl.store(i32_ptr + 1 * N + o, ld.float2int_rz(f))
    tl.store(i32_ptr + 2 * N + o, ld.float2int_rd(f))
    tl.store(i32_ptr + 3 * N + o, ld.float2int_ru(f))
    tl.store(u32_ptr + 0 * N + o, ld.float2uint_rn(f))
    tl.store(u32_ptr + 1 * N + o, ld.float2uint_rz(f))
    tl.store(u32_ptr + 2 * N + o, ld.float2uint_rd(f))
    tl.store(u32_ptr + 3 * N + o, ld.float2uint_ru(f))
    tl.store(i64_ptr + 0 * N + o, ld.float2ll_rn(f))
    tl.store(i64_ptr + 1 * N + o, ld.float2ll_rz(f))
    tl.store(i64_ptr + 2 * N + o, ld.float2ll_rd(f))
    tl.store(i64_ptr + 3 * N + o, ld.float2ll_ru(f))
    tl.store(u64_ptr + 0 * N + o, ld.float2ull_rn(f))
    tl.store(u64_ptr + 1 * N + o, ld.float2ull_rz(f))
    tl.store(u64_ptr + 2 * N + o, ld.float2ull_rd(f))
    tl.store(u64_ptr + 3 * N + o, ld.float2ull_ru(f))
    if FP64:
        d = tl.load(d_ptr + o)
        tl.store(i32_ptr + 4 * N + o, ld.double2int_rn(d))
        tl.store(i32_ptr + 5 * N + o, ld.double2int_rz(d))
        tl.store(i32_ptr + 6 * N + o, ld.double2int_rd(d))
        tl.store(i32_ptr + 7 * N + o, ld.double2int_ru(d))
        tl.store(u32_ptr + 4 * N + o, ld.double2uint_rn(d))
        tl.store(u32_ptr + 5 * N + o, ld.double2uint_rz(d))
        tl.store(u32_ptr + 6 * N + o, ld.double2uint_rd(d))
        tl.store(u32_ptr + 7 * N + o, ld.double2uint_ru(d))
        tl.store(i64_ptr + 4 * N + o, ld.double2ll_rn(d))
        tl.store(i64_ptr + 5 * N + o, ld.double2ll_rz(d))
        tl.store(i64_ptr + 6 * N + o, ld.double2ll_rd(d))
        tl.store(i64_ptr + 7 * N + o, ld.double2ll_ru(d))
        tl.store(u64_ptr + 4 * N + o, ld.double2ull_rn(d))
        tl.store(u64_ptr + 5 * N + o, ld.double2ull_rz(d))
        tl.store(u64_ptr + 6 * N + o, ld.double2ull_rd(d))
        tl.store(u64_ptr + 7 * N + o, ld.double2ull_ru(d))


def _to_int_ref(v, mode, lo, hi):
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    fr = Fraction(v)
    r = {"rz": int(fr), "rd": math.floor(fr), "ru": math.ceil(fr), "rn": round(fr)}[mode]
    return min(max(r, lo), hi)


def test_float_to_integer_conversions_round_and_saturate(device, rng):
    n = 64
    fp64 = np.float64 in _dtypes(device)
    f = np.concatenate([rng.standard_normal(n - 16) * 100,
                        [0.5, 1.5, 2.5, -0.5, -2.5, -0.0, np.nan, np.inf, -np.inf, 3e9, -3e9,
                         5e18, 2e19, -1e19, 4294967295.5, 2147483647.5]])
    f32, f64 = f.astype(np.float32), f.astype(np.float64)
    bufs = {t: at.asarray(np.zeros(8 * n, t), device=device)
            for t in (np.int32, np.uint32, np.int64, np.uint64)}
    float_to_int_kernel[(1,)](at.asarray(f32, device=device), at.asarray(f64, device=device),
                              *bufs.values(), N=n, FP64=fp64)
    ranges = {np.int32: (-2**31, 2**31 - 1), np.uint32: (0, 2**32 - 1),
              np.int64: (-2**63, 2**63 - 1), np.uint64: (0, 2**64 - 1)}
    names = {np.int32: "int", np.uint32: "uint", np.int64: "ll", np.uint64: "ull"}
    for t, buf in bufs.items():
        got = buf.numpy().reshape(8, n)
        for k, (src, values) in enumerate((("float", f32), ("double", f64))):
            if src == "double" and not fp64:
                continue
            for m, mode in enumerate(MODES):
                ref = np.array([_to_int_ref(float(v), mode, *ranges[t]) for v in values],
                               dtype=object).astype(t)
                _check(f"{src}2{names[t]}_{mode}", got[4 * k + m], ref, values)


@at.jit
def int_to_float_kernel(i32_ptr, u32_ptr, i64_ptr, u64_ptr, f_ptr, d_ptr, N: tl.constexpr,
                        FP64: tl.constexpr):
    o = tl.arange(0, N)
    i, u = tl.load(i32_ptr + o), tl.load(u32_ptr + o)
    ll, ull = tl.load(i64_ptr + o), tl.load(u64_ptr + o)
    tl.store(f_ptr + 0 * N + o, ld.int2float_rn(i))
    tl.store(f_ptr + 1 * N + o, ld.int2float_rz(i))
    tl.store(f_ptr + 2 * N + o, ld.int2float_rd(i))
    tl.store(f_ptr + 3 * N + o, ld.int2float_ru(i))
    tl.store(f_ptr + 4 * N + o, ld.uint2float_rn(u))
    tl.store(f_ptr + 5 * N + o, ld.uint2float_rz(u))
    tl.store(f_ptr + 6 * N + o, ld.uint2float_rd(u))
    tl.store(f_ptr + 7 * N + o, ld.uint2float_ru(u))
    tl.store(f_ptr + 8 * N + o, ld.ll2float_rn(ll))
    tl.store(f_ptr + 9 * N + o, ld.ll2float_rz(ll))
    tl.store(f_ptr + 10 * N + o, ld.ll2float_rd(ll))
    tl.store(f_ptr + 11 * N + o, ld.ll2float_ru(ll))
    tl.store(f_ptr + 12 * N + o, ld.ull2float_rn(ull))
    tl.store(f_ptr + 13 * N + o, ld.ull2float_rz(ull))
    tl.store(f_ptr + 14 * N + o, ld.ull2float_rd(ull))
    tl.store(f_ptr + 15 * N + o, ld.ull2float_ru(ull))
    if FP64:
        tl.store(d_ptr + 0 * N + o, ld.ll2double_rn(ll))
        tl.store(d_ptr + 1 * N + o, ld.ll2double_rz(ll))
        tl.store(d_ptr + 2 * N + o, ld.ll2double_rd(ll))
        tl.store(d_ptr + 3 * N + o, ld.ll2double_ru(ll))
        tl.store(d_ptr + 4 * N + o, ld.ull2double_rn(ull))
        tl.store(d_ptr + 5 * N + o, ld.ull2double_rz(ull))
        tl.store(d_ptr + 6 * N + o, ld.ull2double_rd(ull))
        tl.store(d_ptr + 7 * N + o, ld.ull2double_ru(ull))
        tl.store(d_ptr + 8 * N + o, ld.int2double_rn(i))
        tl.store(d_ptr + 9 * N + o, ld.uint2double_rn(u))
        d = tl.load(d_ptr + 10 * N + o)
        tl.store(f_ptr + 16 * N + o, ld.double2float_rn(d))
        tl.store(f_ptr + 17 * N + o, ld.double2float_rz(d))
        tl.store(f_ptr + 18 * N + o, ld.double2float_rd(d))
        tl.store(f_ptr + 19 * N + o, ld.double2float_ru(d))


def test_integer_to_float_conversions_in_each_rounding_mode(device, rng):
    n = 64
    fp64 = np.float64 in _dtypes(device)
    i32 = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    u32 = i32.view(np.uint32)
    i64 = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    i64[:4] = [2**63 - 1, -2**63, 2**53 + 1, -(2**24 + 1)]
    u64 = i64.view(np.uint64)
    d = rng.standard_normal(n) * 1e3
    d[:6] = [1e300, -1e300, np.inf, np.nan, 3.4028235677973366e38, 1e-50]
    f_out = at.asarray(np.zeros(20 * n, np.float32), device=device)
    d_out = at.asarray(np.concatenate([np.zeros(10 * n), d]), device=device)
    int_to_float_kernel[(1,)](*(at.asarray(v, device=device) for v in (i32, u32, i64, u64)),
                              f_out, d_out, N=n, FP64=fp64)
    gf, gd = f_out.numpy().reshape(20, n), d_out.numpy().reshape(11, n)
    for row, (name, values) in enumerate((("int2float", i32), ("uint2float", u32),
                                          ("ll2float", i64), ("ull2float", u64))):
        for m, mode in enumerate(MODES):
            ref = np.array([round_exact(Fraction(int(v)), mode, np.float32) for v in values],
                           np.float32)
            _check(f"{name}_{mode}", gf[4 * row + m], ref, values)
    if not fp64:
        return
    for row, (name, values) in enumerate((("ll2double", i64), ("ull2double", u64))):
        for m, mode in enumerate(MODES):
            ref = np.array([round_exact(Fraction(int(v)), mode, np.float64) for v in values])
            _check(f"{name}_{mode}", gd[4 * row + m], ref, values)
    _check("int2double_rn", gd[8], i32.astype(np.float64), i32)
    _check("uint2double_rn", gd[9], u32.astype(np.float64), u32)
    for m, mode in enumerate(MODES):
        ref = np.array([round_exact(Fraction(float(v)), mode, np.float32) if np.isfinite(v)
                        else np.float32(v) for v in d], np.float32)
        _check(f"double2float_{mode}", gf[16 + m], ref, d)


@at.jit
def reinterpret_kernel(f_ptr, i_ptr, d_ptr, out_i_ptr, out_f_ptr, out_ll_ptr, out_d_ptr,
                       N: tl.constexpr):
    o = tl.arange(0, N)
    f, i, d = tl.load(f_ptr + o), tl.load(i_ptr + o), tl.load(d_ptr + o)
    tl.store(out_i_ptr + 0 * N + o, ld.float_as_int(f))
    tl.store(out_i_ptr + 1 * N + o, ld.float_as_uint(f).to(tl.int32, bitcast=True))
    tl.store(out_i_ptr + 2 * N + o, ld.double2loint(d))
    tl.store(out_i_ptr + 3 * N + o, ld.double2hiint(d))
    tl.store(out_f_ptr + 0 * N + o, ld.int_as_float(i))
    tl.store(out_f_ptr + 1 * N + o, ld.uint_as_float(i.to(tl.uint32, bitcast=True)))
    tl.store(out_ll_ptr + o, ld.double_as_longlong(d))
    tl.store(out_d_ptr + 0 * N + o, ld.longlong_as_double(ld.double_as_longlong(d)))
    tl.store(out_d_ptr + 1 * N + o, ld.hiloint2double(ld.double2hiint(d), ld.double2loint(d)))


def test_reinterpretations_keep_every_bit(device, rng):
    if np.float64 not in _dtypes(device):
        pytest.skip(f"{device} has no float64")
    n = 32
    f = rng.standard_normal(n).astype(np.float32)
    i = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    d = rng.standard_normal(n) * 1e10
    d[0], f[0] = -0.0, -0.0
    outs = [at.asarray(np.zeros(k * n, t), device=device)
            for k, t in ((4, np.int32), (2, np.float32), (1, np.int64), (2, np.float64))]
    reinterpret_kernel[(1,)](*(at.asarray(v, device=device) for v in (f, i, d)), *outs, N=n)
    gi, gf, gll, gd = (o.numpy().reshape(-1, n) for o in outs)
    bits = d.view(np.int64)
    _check("float_as_int", gi[0], f.view(np.int32), f)
    _check("float_as_uint", gi[1], f.view(np.int32), f)
    _check("double2loint", gi[2], (bits & 0xFFFFFFFF).astype(np.uint32).view(np.int32), d)
    _check("double2hiint", gi[3], (bits >> 32).astype(np.int32), d)
    _check("int_as_float", gf[0], i.view(np.float32), i)
    _check("uint_as_float", gf[1], i.view(np.float32), i)
    _check("double_as_longlong", gll[0], bits, d)
    _check("longlong_as_double", gd[0], d, d)
    _check("hiloint2double", gd[1], d, d)


# -- elementary functions ----------------------------------------------------------------------
@at.jit
def unary_kernel(x_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(out_ptr + o, getattr(ld, FN)(tl.load(x_ptr + o)))


@at.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(out_ptr + o, getattr(ld, FN)(tl.load(x_ptr + o), tl.load(y_ptr + o)))


def _ulps(got, exact, dt):
    exact_t = exact.astype(dt)
    with np.errstate(all="ignore"):
        spacing = np.abs(np.spacing(exact_t)).astype(np.longdouble)
        err = np.abs(got.astype(np.longdouble) - exact) / spacing
    same = (np.isnan(got) & np.isnan(exact_t)) | (got == exact_t)
    return np.where(same, 0, err)


def _run(device, fn, args, out_dtype):
    out = at.asarray(np.zeros(args[0].size, out_dtype), device=device)
    kernel = unary_kernel if len(args) == 1 else binary_kernel
    kernel[(1,)](*(at.asarray(a, device=device) for a in args), out, FN=fn, N=args[0].size)
    return out.numpy()


def _exactly(fn):
    """A NumPy reference evaluated in float64 arithmetic per element, through ``fn``."""
    return lambda *a: np.array([fn(*map(float, v)) for v in zip(*a)], np.longdouble)


def _c_remainder(p, q):
    if math.isnan(p) or math.isnan(q) or math.isinf(p) or q == 0:
        return math.nan
    return math.remainder(p, q)


def _fmod(p, q):
    if math.isnan(p) or math.isnan(q) or math.isinf(p) or q == 0:
        return math.nan
    return math.fmod(p, q)


def _sinpi(v):
    return math.nan if not math.isfinite(v) else float(mpmath.sinpi(mpmath.mpf(v)))


def _cospi(v):
    return math.nan if not math.isfinite(v) else float(mpmath.cospi(mpmath.mpf(v)))


def _pow(p, q):
    with np.errstate(all="ignore"):
        return np.power(np.longdouble(p), np.longdouble(q))


#: name -> (reference, inputs maker, bound in ulp for float32, for float64)
ELEMENTARY = {
    "pow": (_exactly(_pow), "pow", 1, 2),
    "exp10": (lambda a: np.power(np.longdouble(10), a), "exp", 1, 2),
    "fmod": (_exactly(_fmod), "rem", 0, 0),
    "remainder": (_exactly(_c_remainder), "rem", 0, 0),
    "sinpi": (_exactly(_sinpi), "trig", 2, 2),
    "cospi": (_exactly(_cospi), "trig", 2, 2),
    "nextafter": (None, "pair", 0, 0),
    "fdim": (lambda a, b: np.where(np.isnan(a) | np.isnan(b), np.nan,
                                   np.where(a > b, a - b, 0)), "pair", 0, 0),
    "rsqrt_rn": (lambda a: 1 / np.sqrt(a), "positive", 0, 2),
    "rhypot": (lambda a, b: 1 / np.hypot(a, b), "pair", 3, 3),
    "rcbrt": (lambda a: 1 / np.cbrt(a), "trig", 1, 3),
    "saturatef": (lambda a: np.where(np.isnan(a), 0, np.clip(a, 0, 1)), "trig", 0, 0),
    "logb": (_exactly(lambda v: math.nan if math.isnan(v) else math.inf if math.isinf(v)
                      else -math.inf if v == 0 else math.frexp(v)[1] - 1), "exp", 0, 0),
}


def _inputs(kind, rng, dt):
    """512 inputs of the kind a function is tested on, with the edge cases among them."""
    n = 496 if kind in ("exp", "trig", "positive") else 256
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, -2.0, 3.0, -3.0,
                     np.finfo(dt).smallest_subnormal, np.finfo(dt).max, 0.25, -0.5], dt)
    if kind == "pow":
        x = np.abs(rng.standard_normal(n) * 4).astype(dt)
        y = (rng.standard_normal(n) * 8).astype(dt)
        x[: n // 4] *= -1
        y[: n // 8] = np.round(y[: n // 8])
        ex, ey = np.resize(edge, 256), np.repeat(edge, 16)
        return [np.concatenate([x, ex]), np.concatenate([y, ey])]
    if kind == "exp":
        lim = 37.0 if dt == np.float32 else 300.0
        return [np.concatenate([rng.uniform(-lim, lim, n).astype(dt), edge])]
    if kind == "rem":
        x = (rng.standard_normal(n) * 1e3).astype(dt)
        x[: n // 4] = (rng.standard_normal(n // 4) * np.finfo(dt).max / 8).astype(dt)
        y = np.abs(rng.standard_normal(n) * 3).astype(dt)
        y[: n // 8] = np.finfo(dt).smallest_subnormal * 3
        return [np.concatenate([x, np.resize(edge, 256)]),
                np.concatenate([y, np.repeat(edge, 16)])]
    if kind == "trig":
        x = (rng.standard_normal(n) * 10).astype(dt)
        x[: 16] = np.arange(-8, 8) * 0.5
        return [np.concatenate([x, edge])]
    if kind == "positive":
        return [np.concatenate([np.abs(rng.standard_normal(n) * 100).astype(dt), np.abs(edge)])]
    x, y = (rng.standard_normal(n) * 10).astype(dt), (rng.standard_normal(n) * 3).astype(dt)
    return [np.concatenate([x, np.resize(edge, 256)]), np.concatenate([y, np.repeat(edge, 16)])]


@pytest.mark.parametrize("fn", sorted(ELEMENTARY))
def test_elementary_functions_within_their_bound(device, rng, fn):
    ref, kind, bound32, bound64 = ELEMENTARY[fn]
    for dt in _dtypes(device):
        args = _inputs(kind, rng, dt)
        got = _run(device, fn, args, dt)
        if fn == "nextafter":
            exact = np.nextafter(*args).astype(np.longdouble)
        else:
            with np.errstate(all="ignore"):
                exact = np.asarray(ref(*[a.astype(np.longdouble) for a in args]), np.longdouble)
        err = _ulps(got, exact, dt)
        bound = bound32 if dt == np.float32 else bound64
        worst = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
        assert err[worst] <= bound, (f"{fn}{tuple(a[worst] for a in args)} in "
                                     f"{np.dtype(dt).name}: got {got[worst]!r}, exact "
                                     f"{exact[worst]!r}, {err[worst]:.2f} ulp > {bound}")
        if bound == 0 and fn in ("fmod", "remainder", "nextafter", "fdim"):
            zero = (exact == 0) & ~np.isnan(got)
            assert np.array_equal(np.signbit(got[zero]), np.signbit(exact.astype(dt)[zero])), \
                f"{fn}: the sign of a zero result differs"


@at.jit
def int_result_kernel(x_ptr, n_ptr, i32_ptr, i64_ptr, f_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    x, k = tl.load(x_ptr + o), tl.load(n_ptr + o)
    tl.store(i32_ptr + o, ld.ilogb(x))
    tl.store(i64_ptr + 0 * N + o, ld.llrint(x))
    tl.store(i64_ptr + 1 * N + o, ld.llround(x))
    tl.store(f_ptr + 0 * N + o, ld.scalbn(x, k))
    tl.store(f_ptr + 1 * N + o, ld.fast_powf(tl.abs(x) + 0.5, 1.5))
    tl.store(f_ptr + 2 * N + o, ld.fast_exp10f(x * 0.01))
    tl.store(f_ptr + 3 * N + o, ld.rcp64h(x.to(tl.float64)).to(tl.float32))
    tl.store(i32_ptr + N + o, ld.isfinited(x.to(tl.float64)).to(tl.int32))


def test_exponent_access_and_64_bit_rounding(device, rng):
    n = 64
    x = (rng.standard_normal(n) * 1e3).astype(np.float32)
    x[:10] = [0.0, np.inf, -np.inf, np.nan, 1e-45, 2.5, -2.5, 0.5, 3e19, -1e20]
    k = rng.integers(-20, 20, n).astype(np.int32)
    i32 = at.asarray(np.zeros(2 * n, np.int32), device=device)
    i64 = at.asarray(np.zeros(2 * n, np.int64), device=device)
    f = at.asarray(np.zeros(4 * n, np.float32), device=device)
    if np.float64 not in _dtypes(device):
        pytest.skip(f"{device} has no float64 (rcp64h, isfinited)")
    int_result_kernel[(1,)](at.asarray(x, device=device), at.asarray(k, device=device), i32,
                            i64, f, N=n)
    gi, gl, gf = i32.numpy().reshape(2, n), i64.numpy().reshape(2, n), f.numpy().reshape(4, n)
    ilogb = [math.frexp(float(v))[1] - 1 if math.isfinite(v) and v != 0
             else (2**31 - 1 if math.isinf(v) else -2**31) for v in x]
    _check("ilogb", gi[0], np.array(ilogb, np.int32), x)
    _check("isfinited", gi[1], np.isfinite(x).astype(np.int32), x)
    sat = lambda v: 0 if math.isnan(v) else max(min(v, 2**63 - 1), -2**63)   # noqa: E731
    _check("llrint", gl[0], np.array([sat(float(np.rint(v))) for v in x],
                                     dtype=object).astype(np.int64), x)
    half_away = [sat(math.copysign(math.floor(abs(v) + 0.5), v)) if math.isfinite(v)
                 else sat(v) for v in map(float, x)]
    _check("llround", gl[1], np.array(half_away, dtype=object).astype(np.int64), x)
    with np.errstate(all="ignore"):
        _check("scalbn", gf[0], np.ldexp(x, k), x, k)
        np.testing.assert_allclose(gf[1], np.power(np.abs(x) + 0.5, 1.5), rtol=1e-5)
        np.testing.assert_allclose(gf[2], np.power(10.0, x * np.float32(0.01)).astype(np.float32),
                                   rtol=1e-5)
        finite = np.isfinite(x) & (x != 0) & (np.abs(x) > 1e-30)
        np.testing.assert_allclose(gf[3][finite], (1 / x.astype(np.float64))[finite], rtol=1e-6)


def test_every_triton_libdevice_name_is_provided():
    """The full list of Triton's CUDA libdevice wrapper (3.x), and HIP's."""
    names = """clz popc byte_perm mulhi mul24 brev sad abs floor rcp64h rsqrt ceil trunc exp2
    saturatef fma_rn fma_rz fma_rd fma_ru fast_dividef div_rn div_rz div_rd div_ru rcp_rn rcp_rz
    rcp_rd rcp_ru sqrt_rn sqrt_rz sqrt_rd sqrt_ru sqrt add_rn add_rz add_rd add_ru mul_rn mul_rz
    mul_rd mul_ru double2float_rn double2float_rz double2float_rd double2float_ru double2int_rn
    double2int_rz double2int_rd double2int_ru double2uint_rn double2uint_rz double2uint_rd
    double2uint_ru int2double_rn uint2double_rn float2int_rn float2int_rz float2int_rd
    float2int_ru float2uint_rn float2uint_rz float2uint_rd float2uint_ru int2float_rn
    int2float_rz int2float_rd int2float_ru uint2float_rn uint2float_rz uint2float_rd
    uint2float_ru hiloint2double double2loint double2hiint float2ll_rn float2ll_rz float2ll_rd
    float2ll_ru float2ull_rn float2ull_rz float2ull_rd float2ull_ru double2ll_rn double2ll_rz
    double2ll_rd double2ll_ru double2ull_rn double2ull_rz double2ull_rd double2ull_ru ll2float_rn
    ll2float_rz ll2float_rd ll2float_ru ull2float_rn ull2float_rz ull2float_rd ull2float_ru
    ll2double_rn ll2double_rz ll2double_rd ll2double_ru ull2double_rn ull2double_rz
    ull2double_rd ull2double_ru int_as_float float_as_int uint_as_float float_as_uint
    longlong_as_double double_as_longlong fast_sinf fast_cosf fast_log2f fast_logf fast_expf
    fast_tanf fast_exp10f fast_log10f fast_powf hadd rhadd sub_rn sub_rz sub_rd sub_ru rsqrt_rn
    ffs rint llrint nearbyint isnan signbit copysign finitef isinf nextafter sin cos sinpi cospi
    tan log2 exp exp10 cosh sinh tanh atan2 atan asin acos log log10 log1p acosh asinh atanh
    expm1 hypot rhypot norm3d rnorm3d norm4d rnorm4d cbrt rcbrt j0 j1 y0 y1 yn jn cyl_bessel_i0
    cyl_bessel_i1 erf erfinv erfc erfcx erfcinv normcdfinv normcdf lgamma ldexp scalbn fmod
    remainder fma pow tgamma round llround fdim ilogb logb isfinited""".split()
    missing = [n for n in names if not callable(getattr(ld, n, None))]
    assert not missing, missing
    assert tl.extra.hip.libdevice is ld and tl.extra.cuda.libdevice is ld


@at.jit
def norms_kernel(a_ptr, b_ptr, c_ptr, d_ptr, out_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    a, b = tl.load(a_ptr + o), tl.load(b_ptr + o)
    c, d = tl.load(c_ptr + o), tl.load(d_ptr + o)
    tl.store(out_ptr + 0 * N + o, ld.norm3d(a, b, c))
    tl.store(out_ptr + 1 * N + o, ld.norm4d(a, b, c, d))
    tl.store(out_ptr + 2 * N + o, ld.rnorm3d(a, b, c))
    tl.store(out_ptr + 3 * N + o, ld.rnorm4d(a, b, c, d))


def test_norms_neither_overflow_nor_underflow_in_between(device, rng):
    n = 64
    for dt in _dtypes(device):
        big, tiny = np.finfo(dt).max / 2, np.finfo(dt).smallest_subnormal * 8
        vs = [(rng.standard_normal(n) * 10).astype(dt) for _ in range(4)]
        for v in vs:
            v[:8] = [big, tiny, 0.0, np.inf, np.nan, -3.0, big, tiny]
        out = at.asarray(np.zeros(4 * n, dt), device=device)
        norms_kernel[(1,)](*(at.asarray(v, device=device) for v in vs), out, N=n)
        got = out.numpy().reshape(4, n)
        a, b, c, d = (v.astype(np.longdouble) for v in vs)
        with np.errstate(all="ignore"):
            n3 = np.sqrt(a * a + b * b + c * c)
            n4 = np.sqrt(a * a + b * b + c * c + d * d)
            anyinf3 = np.isinf(a) | np.isinf(b) | np.isinf(c)
            anyinf4 = anyinf3 | np.isinf(d)
            n3, n4 = np.where(anyinf3, np.inf, n3), np.where(anyinf4, np.inf, n4)
            refs = [n3, n4, 1 / n3, 1 / n4]
        for name, g, r, bound in zip(["norm3d", "norm4d", "rnorm3d", "rnorm4d"], got, refs,
                                     [2, 2, 3, 3]):
            err = _ulps(g, r, dt)
            worst = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
            assert err[worst] <= bound, (f"{name} in {np.dtype(dt).name} at {worst}: got "
                                         f"{g[worst]!r}, exact {r[worst]!r}")
