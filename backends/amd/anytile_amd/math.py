"""Math functions for AMD GPUs as plain LLVM IR: f32 computed in f32, f64 in f64.

LLVM's AMDGPU target has no library for ``sin``, ``erf`` or any f64 function (ROCm's device
library is not assumed), so each function is written here once, generically over the
format, as an internal function of the kernel's module (``MathLibrary.emit`` calls it).  It
uses only IEEE arithmetic, FMA, bit and integer operations, so it computes the same on the
GPU and in the host simulation that tests it.  Accuracy (checked in ``tests/test_math.py``
against float64/mpmath references) is within the conformance suite's ULP table:

* exp, exp2: ``2^k * e^r`` with ``k`` an integer, ``r`` reduced exactly (Cody-Waite, ln 2 in
  two parts), ``e^r`` a Taylor polynomial; ``2^k`` applied in two halves so results near
  overflow and in the subnormal range are rounded once;
* log, log2: ``x = m 2^e`` with ``m`` in [sqrt(1/2), sqrt(2)), ``log m = 2 atanh(s)``,
  ``s = (m - 1) / (m + 1)``; ``e * ln2`` added exactly, log2's product by log2(e) in two
  parts;
* sin, cos: ``x = q pi/2 + r``, ``r`` as a pair of floats: Cody-Waite with pi/2 in three
  parts below 2^13 (f32) or 2^20 (f64), Payne-Hanek above (integer products with the bits
  of 2/pi, exact for every finite input); Taylor polynomials on [-pi/4, pi/4];
* tanh: ``E / (E + 2)`` with ``E = expm1(2|x|)``;
* erf: a Taylor series below 1; ``1 - exp(-x^2) g(x)`` above, ``g = erfc(x) exp(x^2)`` a
  Chebyshev series on [1, 6] (fitted with 40-digit arithmetic); 1 beyond.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from llvmlite import ir

from .constants import (SCALE, inverse_sqrt_pi_scaled, ln2_scaled, pi_scaled, rounded, split,
                        two_over_pi_scaled, two_over_pi_word)

__all__ = ["MathLibrary", "MATH_KINDS"]

MATH_KINDS = ("exp", "exp2", "log", "log2", "sin", "cos", "erf", "tanh")
I1, I32, I64, I128 = ir.IntType(1), ir.IntType(32), ir.IntType(64), ir.IntType(128)

#: Chebyshev coefficients (first one halved) of erfc(x) exp(x^2) on [1, 6], t = (2x - 7) / 5:
#: interpolation at 60 Chebyshev nodes in 40-digit arithmetic, cut below 1e-19
ERFC_SCALED = (
    0.20196598791223083, -0.147884835533987, 0.05188222158351389,
    -0.017525709964867527, 0.005721802417478219, -0.0018109803028142997,
    0.0005570714353927344, -0.00016689473052528832, 4.878565911493746e-05,
    -1.3935932859822488e-05, 3.895514595190115e-06, -1.0668392337070025e-06,
    2.865502572057316e-07, -7.555861081756622e-08, 1.957586342968354e-08,
    -4.987110132992565e-09, 1.2501871239431183e-09, -3.0858852312872416e-10,
    7.504484747602075e-11, -1.7990193064432053e-11, 4.25347830122088e-12,
    -9.92315607537652e-13, 2.285294689027943e-13, -5.197545128838963e-14,
    1.1678402647273797e-14, -2.593300539647079e-15, 5.693144752523706e-16,
    -1.2360008955300707e-16, 2.65449529106721e-17, -5.641103352342304e-18,
    1.1865358108872195e-18, -2.4708256387281944e-19)


def _factorial_inverse(n: int) -> Fraction:
    out = Fraction(1)
    for k in range(2, n + 1):
        out /= k
    return out


@dataclass(frozen=True)
class _Format:
    """A float format and the constants its functions use."""

    type: ir.Type
    int_type: ir.IntType
    precision: int            # significand bits, the implicit one included
    bias: int
    #: below this |x|, sin(x) rounds to x; Cody-Waite reduces below ``reduce_limit``
    tiny: float
    reduce_limit: float
    #: tanh and erf are +-1 beyond these
    tanh_limit: float
    erf_limit: float
    #: terms kept: Taylor degree of e^r, log's atanh series, sin/cos, erf; Chebyshev terms
    exp_terms: int
    log_terms: int
    trig_terms: int
    erf_terms: int
    cheb_terms: int

    @property
    def name(self) -> str:
        return "f32" if self.precision == 24 else "f64"

    def const(self, scaled: int, parts: int = 1, first_bits: int = 0) -> tuple[float, ...]:
        return split(scaled, parts, self.precision, first_bits)


_F32 = _Format(ir.FloatType(), I32, 24, 127, 2.0 ** -13, 2.0 ** 13, 9.1, 4.0,
               exp_terms=9, log_terms=6, trig_terms=7, erf_terms=12, cheb_terms=17)
_F64 = _Format(ir.DoubleType(), I64, 53, 1023, 2.0 ** -27, 2.0 ** 20, 19.1, 6.0,
               exp_terms=15, log_terms=11, trig_terms=11, erf_terms=21, cheb_terms=32)


class MathLibrary:
    """The math hook of ``GpuTarget``: ``emit(b, kind, x)`` calls this module's internal
    ``anytile.<kind>.<f32|f64>`` function, defining it on first use."""

    def emit(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        fmt = {"float": _F32, "double": _F64}.get(str(x.type))
        if kind not in MATH_KINDS or fmt is None:
            return None
        name = f"anytile.{kind}.{fmt.name}"
        fn = b.module.globals.get(name)
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(fmt.type, [fmt.type]), name)
            fn.linkage = "internal"
            fn.attributes.add("nounwind")
            body = ir.IRBuilder(fn.append_basic_block("entry"))
            body.ret(getattr(_Emitter(body, fmt), kind)(fn.args[0]))
        return b.call(fn, [x])


class _Emitter:
    """One function's body: ``b`` the builder, ``f`` the format."""

    def __init__(self, b: ir.IRBuilder, f: _Format) -> None:
        self.b, self.f, self.t = b, f, f.type

    # -- small helpers ---------------------------------------------------------------------
    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.t, v)

    def i(self, v: int, t: Optional[ir.IntType] = None) -> ir.Constant:
        return ir.Constant(t or self.f.int_type, v)

    def call(self, name: str, *args: ir.Value) -> ir.Value:
        suffix = {"float": "f32", "double": "f64"}[str(self.t)]
        full = f"{name}.{suffix}"
        module = self.b.module
        fn = module.globals.get(full) or ir.Function(
            module, ir.FunctionType(self.t, [a.type for a in args]), full)
        return self.b.call(fn, list(args))

    def fma(self, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        return self.call("llvm.fma", x, y, z)

    def poly(self, x: ir.Value, coeffs: tuple) -> ir.Value:
        """Horner with FMAs: ``coeffs[0] x^(n-1) + ... + coeffs[-1]``."""
        acc = self.c(coeffs[0])
        for c in coeffs[1:]:
            acc = self.fma(acc, x, self.c(c))
        return acc

    def isnan(self, x: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", x, x)

    def pow2(self, k: ir.Value) -> ir.Value:
        """2^k for an integer ``k`` (of the format's width) in the normal range."""
        b, f = self.b, self.f
        return b.bitcast(b.shl(b.add(k, self.i(f.bias)), self.i(f.precision - 1)), self.t)

    def scale(self, y: ir.Value, k: ir.Value) -> ir.Value:
        """``y * 2^k`` for a float integer ``k``, in two halves (one rounding)."""
        b = self.b
        ki = b.fptosi(k, self.f.int_type)
        half = b.ashr(ki, self.i(1))
        return b.fmul(b.fmul(y, self.pow2(half)), self.pow2(b.sub(ki, half)))

    def two_sum(self, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(s, e) with s = fl(x + y) and x + y = s + e exactly."""
        b = self.b
        s = b.fadd(x, y)
        yy = b.fsub(s, x)
        return s, b.fadd(b.fsub(x, b.fsub(s, yy)), b.fsub(y, yy))

    def fast_two_sum(self, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        """``two_sum`` for |x| >= |y|."""
        s = self.b.fadd(x, y)
        return s, self.b.fsub(y, self.b.fsub(s, x))

    def select(self, cond: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.select(cond, x, y)

    # -- exp, exp2 -------------------------------------------------------------------------
    def _exp_taylor(self, scale_num: Fraction = Fraction(1)) -> tuple:
        """Coefficients of sum (c r)^n / n!, highest first."""
        return tuple(rounded(scale_num ** n * _factorial_inverse(n), self.f.precision)
                     for n in reversed(range(self.f.exp_terms)))

    def _exp(self, x: ir.Value) -> ir.Value:
        """e^x for non-NaN ``x`` (clamped: overflow to inf, underflow to 0)."""
        b, f = self.b, self.f
        lo, hi = (-104.0, 89.0) if f.precision == 24 else (-746.0, 710.0)
        xc = self.call("llvm.minnum", self.call("llvm.maxnum", x, self.c(lo)), self.c(hi))
        ln2_hi, ln2_lo = f.const(ln2_scaled(), 2, first_bits=f.precision - 11)
        log2e = rounded(Fraction(1 << SCALE, ln2_scaled()), f.precision)
        k = self.call("llvm.rint", b.fmul(xc, self.c(log2e)))
        r = self.fma(b.fneg(k), self.c(ln2_hi), xc)
        r = self.fma(b.fneg(k), self.c(ln2_lo), r)
        return self.scale(self.poly(r, self._exp_taylor()), k)

    def exp(self, x: ir.Value) -> ir.Value:
        return self.select(self.isnan(x), x, self._exp(x))

    def exp2(self, x: ir.Value) -> ir.Value:
        b, f = self.b, self.f
        lo, hi = (-151.0, 129.0) if f.precision == 24 else (-1076.0, 1025.0)
        xc = self.call("llvm.minnum", self.call("llvm.maxnum", x, self.c(lo)), self.c(hi))
        k = self.call("llvm.rint", xc)
        ln2 = Fraction(ln2_scaled(), 1 << SCALE)
        y = self.poly(b.fsub(xc, k), self._exp_taylor(ln2))
        return self.select(self.isnan(x), x, self.scale(y, k))

    # -- log, log2 -------------------------------------------------------------------------
    def _log_parts(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(e, L) with log(x) = e ln2 + L for finite ``x`` > 0 (e a float integer)."""
        b, f = self.b, self.f
        smallest = 2.0 ** (1 - f.bias)
        small = b.fcmp_ordered("<", x, self.c(smallest))
        xs = self.select(small, b.fmul(x, self.c(2.0 ** f.precision)), x)
        adjust = self.select(small, self.i(-f.precision), self.i(0))
        sqrt_half = self._bits_of(0.7071067811865476)   # m's range starts here
        t = b.sub(b.bitcast(xs, f.int_type), self.i(sqrt_half))
        e = b.add(b.ashr(t, self.i(f.precision - 1)), adjust)
        mbits = b.add(b.and_(t, self.i((1 << (f.precision - 1)) - 1)), self.i(sqrt_half))
        fr = b.fsub(b.bitcast(mbits, self.t), self.c(1.0))
        s = b.fdiv(fr, b.fadd(fr, self.c(2.0)))
        z = b.fmul(s, s)
        series = tuple(rounded(Fraction(2, 2 * k + 1), f.precision)
                       for k in reversed(range(1, f.log_terms + 1)))
        big_r = b.fmul(z, self.poly(z, series))
        ell = b.fsub(fr, b.fmul(s, b.fsub(fr, big_r)))
        return b.sitofp(e, self.t), ell

    def _bits_of(self, value: float) -> int:
        if self.f.precision == 24:
            return struct.unpack("<I", struct.pack("<f", value))[0]
        return struct.unpack("<Q", struct.pack("<d", value))[0]

    def _log_specials(self, x: ir.Value, value: ir.Value) -> ir.Value:
        b = self.b
        inf = self.c(float("inf"))
        value = self.select(b.fcmp_ordered("==", x, inf), inf, value)
        value = self.select(b.fcmp_ordered("==", x, self.c(0.0)), self.c(float("-inf")), value)
        bad = b.or_(b.fcmp_ordered("<", x, self.c(0.0)), self.isnan(x))
        return self.select(bad, self.c(float("nan")), value)

    def log(self, x: ir.Value) -> ir.Value:
        f = self.f
        e, ell = self._log_parts(x)
        ln2_hi, ln2_lo = f.const(ln2_scaled(), 2, first_bits=f.precision - 11)
        value = self.fma(e, self.c(ln2_hi), self.fma(e, self.c(ln2_lo), ell))
        return self._log_specials(x, value)

    def log2(self, x: ir.Value) -> ir.Value:
        b, f = self.b, self.f
        e, ell = self._log_parts(x)
        l2e_hi, l2e_lo = split((1 << (2 * SCALE)) // ln2_scaled(), 2, f.precision)
        th = b.fmul(ell, self.c(l2e_hi))
        tl = self.fma(ell, self.c(l2e_lo), self.fma(ell, self.c(l2e_hi), b.fneg(th)))
        s, err = self.two_sum(e, th)
        return self._log_specials(x, b.fadd(s, b.fadd(err, tl)))

    # -- sin, cos --------------------------------------------------------------------------
    def _reduce(self, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(q, r_hi, r_lo): x = q pi/2 + r_hi + r_lo, |r| <~ pi/4, q an i32 (mod 4 counts)."""
        b, f = self.b, self.f
        ax = self.call("llvm.fabs", x)
        large = b.and_(b.fcmp_ordered(">=", ax, self.c(f.reduce_limit)),
                       b.fcmp_ordered("<", ax, self.c(float("inf"))))
        with b.if_else(large) as (then, otherwise):
            with then:
                big = self._reduce_large(x)
                big_block = b.block
            with otherwise:
                small = self._reduce_small(x)
                small_block = b.block
        out = []
        for v_big, v_small in zip(big, small):
            phi = b.phi(v_big.type)
            phi.add_incoming(v_big, big_block)
            phi.add_incoming(v_small, small_block)
            out.append(phi)
        return out[0], out[1], out[2]

    def _reduce_small(self, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Cody-Waite: pi/2 = P1 + P2 + P3; x - k P1 is exact below the limit."""
        b, f = self.b, self.f
        p1, p2, p3 = f.const(pi_scaled() >> 1, 3)
        two_over_pi = rounded(Fraction(two_over_pi_scaled(), 1 << SCALE), f.precision)
        k = self.call("llvm.rint", b.fmul(x, self.c(two_over_pi)))
        r1 = self.fma(b.fneg(k), self.c(p1), x)
        w_hi = b.fmul(k, self.c(p2))
        w_lo = self.fma(k, self.c(p2), b.fneg(w_hi))
        r_hi, err = self.two_sum(r1, b.fneg(w_hi))
        r_lo = b.fsub(b.fsub(err, w_lo), b.fmul(k, self.c(p3)))
        r_hi, r_lo = self.fast_two_sum(r_hi, r_lo)
        return b.fptosi(k, I32), r_hi, r_lo

    def _table_word(self, index: ir.Value, count: int) -> ir.Value:
        """Word ``index`` (< ``count``) of ``two_over_pi_word``."""
        b = self.b
        word = ir.Constant(I64, 0)
        for n in range(1, count):
            bits = two_over_pi_word(n)
            bits = bits - (1 << 64) if bits >= 1 << 63 else bits
            word = b.select(b.icmp_unsigned("==", index, ir.Constant(I64, n)),
                            ir.Constant(I64, bits), word)
        return word

    def _reduce_large(self, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Payne-Hanek: |x| = M 2^E; the bits of M * (2/pi) from weight 2 down, as integers."""
        b, f = self.b, self.f
        p = f.precision
        k64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        k128 = lambda v: ir.Constant(I128, v)  # noqa: E731
        bits = b.zext(b.bitcast(self.call("llvm.fabs", x), f.int_type), I64) \
            if f.precision == 24 else b.bitcast(self.call("llvm.fabs", x), I64)
        field = b.lshr(bits, k64(p - 1))
        mantissa = b.or_(b.and_(bits, k64((1 << (p - 1)) - 1)), k64(1 << (p - 1)))
        # window of 192 bits of 2/pi starting at fraction bit E - 1 (table position E + 62)
        start = b.add(field, k64(62 - f.bias - (p - 1)))
        n, shift = b.lshr(start, k64(6)), b.and_(start, k64(63))
        count = ((f.bias - (p - 1) + 62) >> 6) + 4       # words the largest exponent reads
        words = [self._table_word(b.add(n, k64(j)), count) for j in range(4)]
        fshl = ir.Function(b.module, ir.FunctionType(I64, [I64, I64, I64]), "llvm.fshl.i64") \
            if "llvm.fshl.i64" not in b.module.globals else b.module.globals["llvm.fshl.i64"]
        window = [b.call(fshl, [words[j], words[j + 1], shift]) for j in range(3)]
        m128 = b.zext(mantissa, I128)
        prod = [b.mul(m128, b.zext(w, I128)) for w in window]        # weights 2^128, 2^64, 1
        low = b.add(prod[2], b.shl(prod[1], k128(64)))
        carry = b.zext(b.icmp_unsigned("<", low, prod[2]), I64)
        top = b.add(b.add(b.trunc(b.lshr(prod[1], k128(64)), I64), b.trunc(prod[0], I64)), carry)
        mid, bottom = b.trunc(b.lshr(low, k128(64)), I64), b.trunc(low, I64)
        quadrant = b.lshr(top, k64(62))
        # the fraction times 2^192 as a signed number in [-1/2, 1/2)
        g2 = b.or_(b.shl(top, k64(2)), b.lshr(mid, k64(62)))
        g1 = b.or_(b.shl(mid, k64(2)), b.lshr(bottom, k64(62)))
        g0 = b.shl(bottom, k64(2))
        negative = b.icmp_signed("<", g2, k64(0))
        quadrant = b.add(quadrant, b.zext(negative, I64))
        high = b.or_(b.shl(b.zext(g2, I128), k128(64)), b.zext(g1, I128))
        neg_low = b.sub(k64(0), g0)
        neg_high = b.add(b.xor(high, k128(-1)), b.zext(b.icmp_unsigned("==", g0, k64(0)), I128))
        high = b.select(negative, neg_high, high)
        low64 = b.select(negative, neg_low, g0)
        ctlz = b.module.globals.get("llvm.ctlz.i128") or ir.Function(
            b.module, ir.FunctionType(I128, [I128, I1]), "llvm.ctlz.i128")
        lz = b.call(ctlz, [high, ir.Constant(I1, 0)])
        lz = b.select(b.icmp_unsigned(">", lz, k128(64)), k128(64), lz)
        norm = b.or_(b.shl(high, lz), b.lshr(b.shl(b.zext(low64, I128), lz), k128(64)))
        hi_int = b.trunc(b.lshr(norm, k128(128 - p)), I64)
        lo_int = b.and_(b.trunc(b.lshr(norm, k128(128 - 2 * p)), I64), k64((1 << p) - 1))
        lz_int = b.trunc(lz, f.int_type)
        f_hi = b.fmul(b.sitofp(hi_int, self.t), self.pow2(b.sub(self.i(-p), lz_int)))
        f_lo = b.fmul(b.sitofp(lo_int, self.t), self.pow2(b.sub(self.i(-2 * p), lz_int)))
        pio2_hi, pio2_lo = f.const(pi_scaled() >> 1, 2)
        r_hi = b.fmul(f_hi, self.c(pio2_hi))
        r_lo = b.fadd(self.fma(f_hi, self.c(pio2_hi), b.fneg(r_hi)),
                      self.fma(f_hi, self.c(pio2_lo), b.fmul(f_lo, self.c(pio2_hi))))
        r_hi, r_lo = self.fast_two_sum(r_hi, r_lo)
        sign = b.fcmp_ordered("<", x, self.c(0.0))
        flip = b.xor(negative, sign)
        r_hi = self.select(flip, b.fneg(r_hi), r_hi)
        r_lo = self.select(flip, b.fneg(r_lo), r_lo)
        q = b.trunc(quadrant, I32)
        return self.select(sign, b.sub(ir.Constant(I32, 0), q), q), r_hi, r_lo

    def _sin_cos_of_reduced(self, r_hi: ir.Value, r_lo: ir.Value) -> tuple[ir.Value, ir.Value]:
        b, f = self.b, self.f
        n = f.trig_terms
        sin_c = tuple(rounded(Fraction((-1) ** (j + 1)) * _factorial_inverse(2 * j + 3), f.precision)
                      for j in reversed(range(n - 1)))
        cos_c = tuple(rounded(Fraction((-1) ** j) * _factorial_inverse(2 * j + 4), f.precision)
                      for j in reversed(range(n - 1)))
        r2 = b.fmul(r_hi, r_hi)
        half_r2 = b.fmul(r2, self.c(0.5))
        tail = b.fmul(r_lo, b.fsub(self.c(1.0), half_r2))
        sin_r = b.fadd(r_hi, self.fma(b.fmul(r_hi, r2), self.poly(r2, sin_c), tail))
        w = b.fsub(self.c(1.0), half_r2)
        cos_tail = self.fma(b.fmul(r2, r2), self.poly(r2, cos_c), b.fneg(b.fmul(r_hi, r_lo)))
        cos_r = b.fadd(w, b.fadd(b.fsub(b.fsub(self.c(1.0), w), half_r2), cos_tail))
        return sin_r, cos_r

    def _trig(self, x: ir.Value, is_cos: bool) -> ir.Value:
        b, f = self.b, self.f
        q, r_hi, r_lo = self._reduce(x)
        sin_r, cos_r = self._sin_cos_of_reduced(r_hi, r_lo)
        if is_cos:
            q = b.add(q, ir.Constant(I32, 1))     # cos(x) = sin(x + pi/2)
        odd = b.trunc(q, I1)
        value = self.select(odd, cos_r, sin_r)
        negate = b.icmp_unsigned("!=", b.and_(q, ir.Constant(I32, 2)), ir.Constant(I32, 0))
        value = self.select(negate, b.fneg(value), value)
        ax = self.call("llvm.fabs", x)
        if not is_cos:
            value = self.select(b.fcmp_ordered("<", ax, self.c(f.tiny)), x, value)
        bad = b.fcmp_unordered("uno", b.fsub(x, x), self.c(0.0))   # inf or NaN
        return self.select(bad, b.fsub(x, x), value)

    def sin(self, x: ir.Value) -> ir.Value:
        return self._trig(x, False)

    def cos(self, x: ir.Value) -> ir.Value:
        return self._trig(x, True)

    # -- tanh, erf -------------------------------------------------------------------------
    def tanh(self, x: ir.Value) -> ir.Value:
        b, f = self.b, self.f
        ax = self.call("llvm.fabs", x)
        d = b.fmul(ax, self.c(2.0))
        # expm1(d) for d < 1.25: e^d = 2^k e^r with k in 0..2, then 2^k expm1(r) + (2^k - 1)
        ln2_hi, ln2_lo = f.const(ln2_scaled(), 2, first_bits=f.precision - 11)
        log2e = rounded(Fraction(1 << SCALE, ln2_scaled()), f.precision)
        k = self.call("llvm.rint", b.fmul(self.call("llvm.minnum", d, self.c(1.25)), self.c(log2e)))
        r = self.fma(b.fneg(k), self.c(ln2_hi), self.call("llvm.minnum", d, self.c(1.25)))
        r = self.fma(b.fneg(k), self.c(ln2_lo), r)
        taylor = tuple(rounded(_factorial_inverse(n), f.precision)
                       for n in reversed(range(2, f.exp_terms)))
        em1 = self.fma(b.fmul(r, r), self.poly(r, taylor), r)
        two_k = self.pow2(b.fptosi(k, f.int_type))
        small = self.fma(two_k, em1, b.fsub(two_k, self.c(1.0)))
        large = b.fsub(self._exp(self.call("llvm.minnum", d, self.c(2 * f.tanh_limit))), self.c(1.0))
        e = self.select(b.fcmp_ordered("<", d, self.c(1.25)), small, large)
        t = b.fdiv(e, b.fadd(e, self.c(2.0)))
        t = self.select(b.fcmp_ordered(">", ax, self.c(f.tanh_limit)), self.c(1.0), t)
        return self.select(self.isnan(x), x, self.call("llvm.copysign", t, x))

    def erf(self, x: ir.Value) -> ir.Value:
        b, f = self.b, self.f
        ax = self.call("llvm.fabs", x)
        inv_sqrt_pi = Fraction(inverse_sqrt_pi_scaled(), 1 << SCALE)
        series = tuple(rounded(2 * inv_sqrt_pi * (-1) ** n * _factorial_inverse(n) / (2 * n + 1),
                               f.precision) for n in reversed(range(f.erf_terms)))
        near = b.fmul(x, self.poly(b.fmul(x, x), series))
        # 1 <= |x| < limit: 1 - e^(-x^2) g(x), x^2 = h + l exactly
        t = self.fma(ax, self.c(0.4), self.c(-1.4))
        g = self._chebyshev(t, ERFC_SCALED[:f.cheb_terms])
        h = b.fmul(ax, ax)
        low = self.fma(ax, ax, b.fneg(h))
        decay = b.fmul(self._exp(b.fneg(h)), b.fsub(self.c(1.0), low))
        far = self.call("llvm.copysign", b.fsub(self.c(1.0), b.fmul(decay, g)), x)
        value = self.select(b.fcmp_ordered("<", ax, self.c(1.0)), near, far)
        one = self.call("llvm.copysign", self.c(1.0), x)
        value = self.select(b.fcmp_ordered(">=", ax, self.c(f.erf_limit)), one, value)
        return self.select(self.isnan(x), x, value)

    def _chebyshev(self, t: ir.Value, coeffs: tuple) -> ir.Value:
        """Clenshaw: sum of coeffs[j] T_j(t)."""
        b = self.b
        two_t = b.fmul(t, self.c(2.0))
        b1, b2 = self.c(0.0), self.c(0.0)
        for c in reversed(coeffs[1:]):
            b1, b2 = b.fadd(self.fma(two_t, b1, b.fneg(b2)), self.c(c)), b1
        return b.fadd(self.fma(t, b1, b.fneg(b2)), self.c(coeffs[0]))
