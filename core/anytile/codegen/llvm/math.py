"""Vectorised math functions as straight-line LLVM IR (no per-element library call).

``MathLowering.emit(kind, x)`` computes ``kind`` in {exp, exp2, log, log2, sin, cos, erf,
tanh} for a ``float`` or ``double`` scalar or vector ``x``.  The same code serves every lane
width, so any LLVM-based backend (CPU, or a GPU target without a vendor math library) can
use it.

float (f32, and f16/bf16 which are computed in f32 then rounded):
  * ``exp``: Cody-Waite reduction by ln2 in f32, degree-6 minimax polynomial (Cephes), scale
    by 2^k in two halves so results near overflow and in the subnormal range are right.
  * ``exp2 log log2 sin cos erf tanh``: evaluated in f64 on widened lanes, with polynomials
    accurate to ~1e-13, then rounded once to f32, so the f32 result is within 1 ulp:
      - log/log2: exponent split, ``log m = 2 atanh((m-1)/(m+1))`` series (m in [0.7, 1.42]);
      - sin/cos: k = rint(x*2/pi), 3-part Cody-Waite pi/2 (exact for |x| <= 1e7), Taylor
        polynomials on [-pi/4, pi/4], quadrant select.  Lanes with |x| > 1e7 take a cold
        path calling the f64 library once per lane (correct for the whole f32 range);
      - tanh: ``expm1(2|x|) / (expm1(2|x|) + 2)`` with an accurate f64 expm1, sign restored;
      - erf: Taylor series for |x| < 1; for 1 <= |x| <= 4, ``1 - exp(-x^2) * g(x)`` with
        g = erfc(x) e^(x^2) as a Chebyshev series (fitted to 1e-13); erf = 1 beyond 4.
  Accuracy is tested against NumPy/``math`` float64 in ``backends/cpu/tests``.

double: each lane calls the f64 library (``Float64Library``: the C library through LLVM's
intrinsics by default; a GPU backend passes its own, e.g. libdevice/ocml).  These are
correctly-rounded-ish libm results but one call per lane, not vectorised.
"""
from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from .types import F64, I1, I32, I64, const_like, intrinsic, vector_width
from .elementwise import like

__all__ = ["MathLowering", "Float64Library", "MATH_FUNCTIONS"]

MATH_FUNCTIONS = ("exp", "exp2", "log", "log2", "sin", "cos", "erf", "tanh")

# pi/2 = PIO2_1 + PIO2_2 + PIO2_3; the first two have 27 significant bits, so k*PIO2_i is
# exact for |k| < 2^26.
PIO2_1 = 1.570796325802803
PIO2_2 = 9.920935739593517e-10
PIO2_3 = 5.721188726109832e-18
SINCOS_POLY_LIMIT = 1.0e7
# ln2 split for f64 reduction (fdlibm): LN2_HI has 32 trailing zero bits.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
# Chebyshev coefficients of erfc(x) * exp(x^2) on [1, 4] (t = (2x - 5) / 3).
ERFC_SCALED_CHEB = (
    0.24442575284923582, -0.13589862891594595, 0.03563511414853497, -0.008884098618222508,
    0.002118423997553176, -0.00048539876408004436, 0.0001072737545377287,
    -2.2936634481879124e-05, 4.756874691570117e-06, -9.589944832292838e-07,
    1.8829006887811017e-07, -3.606320659443949e-08, 6.747602046969642e-09,
    -1.2349070149075058e-09, 2.2131503331975262e-10, -3.887954827332532e-11,
    6.701378566855521e-12, -1.1342363744195116e-12, 1.886489823103837e-13)
# Cephes expf polynomial: exp(r) ~ 1 + r + r^2 * P(r) on [-ln2/2, ln2/2].
EXPF_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
             1.6666665459e-1, 5.0000001201e-1)


class Float64Library:
    """Hook: how a backend computes f64 math functions.  The default calls the C library
    (LLVM intrinsics ``llvm.exp.f64``... become ``exp`` calls; ``erf``/``tanh`` are
    declared directly), one call per lane."""

    INTRINSICS = frozenset({"exp", "exp2", "log", "log2", "sin", "cos"})

    def scalar(self, b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
        """``name(x)`` for one f64 value."""
        if name in self.INTRINSICS:
            fn = intrinsic(b.module, "llvm." + name, F64, [F64], [F64])
        else:
            fn = b.module.globals.get(name) or ir.Function(
                b.module, ir.FunctionType(F64, [F64]), name)
        return b.call(fn, [x])

    def emit(self, b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
        """``name(x)`` for an f64 scalar or vector, lane by lane."""
        n = vector_width(x)
        if n == 0:
            return self.scalar(b, name, x)
        out = ir.Constant(x.type, ir.Undefined)
        for i in range(n):
            lane = b.extract_element(x, ir.Constant(I32, i))
            out = b.insert_element(out, self.scalar(b, name, lane), ir.Constant(I32, i))
        return out


class MathLowering:
    """Emits the math functions with builder ``b``; f64 goes to ``f64_library``."""

    def __init__(self, b: ir.IRBuilder, f64_library: Float64Library | None = None) -> None:
        self.b = b
        self.f64_library = f64_library or Float64Library()

    def emit(self, kind: str, x: ir.Value) -> ir.Value:
        """``kind(x)`` for float or double ``x`` (scalar or vector)."""
        if kind not in MATH_FUNCTIONS:
            raise NotImplementedError(f"math function '{kind}'")
        elem = x.type.element if vector_width(x) else x.type
        if elem == F64:
            return self.f64_library.emit(self.b, kind, x)
        if kind == "exp":
            return self.exp_f32(x)
        d = self.b.fpext(x, like(F64, x))
        body: Callable[[ir.Value], ir.Value] = getattr(self, f"_{kind}_f64")
        r = self.b.fptrunc(body(d), x.type)
        return self.b.select(self.b.fcmp_unordered("uno", x, x), x, r)

    def relaxed(self, kind: str, x: ir.Value) -> None:
        """No faster form that flushes denormals: every op gets ``emit``'s."""
        return None

    # -- small helpers -----------------------------------------------------------------------
    def _call(self, name: str, *args: ir.Value) -> ir.Value:
        t = args[0].type
        return self.b.call(intrinsic(self.b.module, name, t, [a.type for a in args], [t]),
                           list(args))

    def _poly(self, x: ir.Value, coeffs: tuple) -> ir.Value:
        """Horner: coeffs[0]*x^(n-1) + ... + coeffs[-1]."""
        acc = const_like(x, coeffs[0])
        for c in coeffs[1:]:
            acc = self._call("llvm.fma", acc, x, const_like(x, c))
        return acc

    def _pow2(self, k: ir.Value) -> ir.Value:
        """2^k for an integral-valued f64 ``k`` in [-1022, 1023]."""
        b = self.b
        ki = b.fptosi(k, like(I64, k))
        bits = b.shl(b.add(ki, const_like(ki, 1023)), const_like(ki, 52))
        return b.bitcast(bits, k.type)

    def _expm1_parts(self, d: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(k, p) with e^d = 2^k (1 + p) and p = expm1(r) accurate to f64 (|d| <= ~700)."""
        b = self.b
        k = self._call("llvm.rint", b.fmul(d, const_like(d, 1 / math.log(2))))
        r = self._call("llvm.fma", b.fneg(k), const_like(d, LN2_HI), d)
        r = self._call("llvm.fma", b.fneg(k), const_like(d, LN2_LO), r)
        taylor = tuple(1 / math.factorial(n) for n in range(13, 1, -1))  # r^2/2! .. r^13/13!
        inner = self._poly(r, taylor)            # 1/2 + r/6 + ...
        p = self._call("llvm.fma", b.fmul(r, r), inner, r)
        return k, p

    def _exp_f64(self, d: ir.Value) -> ir.Value:
        k, p = self._expm1_parts(d)
        return self.b.fmul(self.b.fadd(p, const_like(p, 1.0)), self._pow2(k))

    # -- f32 exp, native -----------------------------------------------------------------------
    def exp_f32(self, x: ir.Value) -> ir.Value:
        b = self.b
        xc = self._call("llvm.minnum", self._call("llvm.maxnum", x, const_like(x, -104.0)),
                        const_like(x, 89.0))
        k = self._call("llvm.rint", b.fmul(xc, const_like(x, 1.4426950408889634)))
        r = self._call("llvm.fma", b.fneg(k), const_like(x, 0.693359375), xc)
        r = self._call("llvm.fma", b.fneg(k), const_like(x, -2.12194440e-4), r)
        p = self._poly(r, EXPF_POLY)
        y = self._call("llvm.fma", b.fmul(r, r), p, b.fadd(r, const_like(x, 1.0)))
        ki = b.fptosi(k, like(I32, x))
        k1 = b.ashr(ki, const_like(ki, 1))
        k2 = b.sub(ki, k1)
        for half in (k1, k2):   # two factors keep each 2^k normal near both ends of the range
            scale = b.bitcast(b.shl(b.add(half, const_like(ki, 127)), const_like(ki, 23)),
                              x.type)
            y = b.fmul(y, scale)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    # -- f32 functions computed in f64 -----------------------------------------------------------
    def _exp2_f64(self, d: ir.Value) -> ir.Value:
        b = self.b
        dc = self._call("llvm.minnum", self._call("llvm.maxnum", d, const_like(d, -160.0)),
                        const_like(d, 130.0))
        k = self._call("llvm.rint", dc)
        _, p = self._expm1_parts(b.fmul(b.fsub(dc, k), const_like(d, math.log(2))))
        return b.fmul(b.fadd(p, const_like(p, 1.0)), self._pow2(k))

    def _log_parts(self, d: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(e, l) with log(d) = e*ln2 + l for positive finite ``d``."""
        b = self.b
        bits = b.bitcast(d, like(I64, d))
        e = b.sub(b.lshr(bits, const_like(bits, 52)), const_like(bits, 1023))
        m_bits = b.or_(b.and_(bits, const_like(bits, (1 << 52) - 1)),
                       const_like(bits, 1023 << 52))
        m = b.bitcast(m_bits, d.type)
        big = b.fcmp_ordered(">", m, const_like(d, math.sqrt(2)))
        m = b.select(big, b.fmul(m, const_like(d, 0.5)), m)
        ef = b.sitofp(b.add(e, b.zext(big, e.type)), d.type)
        s = b.fdiv(b.fsub(m, const_like(d, 1.0)), b.fadd(m, const_like(d, 1.0)))
        z = b.fmul(s, s)
        series = self._poly(z, tuple(1 / n for n in range(15, 0, -2)))   # 1 + z/3 + z^2/5..
        return ef, b.fmul(b.fmul(s, const_like(d, 2.0)), series)

    def _log_specials(self, d: ir.Value, r: ir.Value) -> ir.Value:
        b = self.b
        r = b.select(b.fcmp_ordered("==", d, const_like(d, 0.0)), const_like(d, -math.inf), r)
        r = b.select(b.fcmp_ordered("==", d, const_like(d, math.inf)), d, r)
        return b.select(b.fcmp_unordered("<", d, const_like(d, 0.0)), const_like(d, math.nan), r)

    def _log_f64(self, d: ir.Value) -> ir.Value:
        e, l = self._log_parts(d)
        return self._log_specials(d, self._call("llvm.fma", e, const_like(d, math.log(2)), l))

    def _log2_f64(self, d: ir.Value) -> ir.Value:
        e, l = self._log_parts(d)
        return self._log_specials(d, self._call("llvm.fma", l, const_like(d, 1 / math.log(2)), e))

    def _sincos_f64(self, d: ir.Value, is_cos: bool) -> ir.Value:
        b = self.b
        k = self._call("llvm.rint", b.fmul(d, const_like(d, 2 / math.pi)))
        r = d
        for part in (PIO2_1, PIO2_2, PIO2_3):
            r = self._call("llvm.fma", b.fneg(k), const_like(d, part), r)
        z = b.fmul(r, r)
        sin_c = tuple((-1) ** n / math.factorial(2 * n + 1) for n in range(7, -1, -1))
        cos_c = tuple((-1) ** n / math.factorial(2 * n) for n in range(8, -1, -1))
        s = b.fmul(r, self._poly(z, sin_c))
        c = self._poly(z, cos_c)
        q = b.fptosi(k, like(I64, d))
        if is_cos:
            q = b.add(q, const_like(q, 1))
        swap = b.trunc(b.and_(q, const_like(q, 1)), like(I1, d))
        neg = b.trunc(b.lshr(b.and_(q, const_like(q, 2)), const_like(q, 1)), like(I1, d))
        v = b.select(swap, c, s)
        v = b.select(neg, b.fneg(v), v)
        if not is_cos:  # sin(-0) is -0; the reduction above lost the sign
            v = b.select(b.fcmp_ordered("==", d, const_like(d, 0.0)), d, v)
        return self._with_library_lanes(d, v, "cos" if is_cos else "sin")

    def _with_library_lanes(self, d: ir.Value, v: ir.Value, name: str) -> ir.Value:
        """``v`` with the lanes where |d| > SINCOS_POLY_LIMIT replaced by the f64 library's
        result, computed in a cold branch taken only when such a lane exists."""
        b = self.b
        huge = b.fcmp_ordered(">", self._call("llvm.fabs", d), const_like(d, SINCOS_POLY_LIMIT))
        n = vector_width(d)
        any_huge = huge
        if n:
            any_huge = b.call(intrinsic(b.module, "llvm.vector.reduce.or", I1, [huge.type],
                                        [huge.type]), [huge])
        before = b.block
        with b.if_then(any_huge, likely=False):
            slow = b.select(huge, self.f64_library.emit(b, name, d), v)
            slow_block = b.block
        merged = b.phi(v.type)
        merged.add_incoming(v, before)
        merged.add_incoming(slow, slow_block)
        return merged

    def _sin_f64(self, d: ir.Value) -> ir.Value:
        return self._sincos_f64(d, False)

    def _cos_f64(self, d: ir.Value) -> ir.Value:
        return self._sincos_f64(d, True)

    def _tanh_f64(self, d: ir.Value) -> ir.Value:
        b = self.b
        a = self._call("llvm.minnum", self._call("llvm.fabs", d), const_like(d, 20.0))
        k, p = self._expm1_parts(b.fmul(a, const_like(d, 2.0)))
        scale = self._pow2(k)
        em = self._call("llvm.fma", p, scale, b.fsub(scale, const_like(d, 1.0)))
        t = b.fdiv(em, b.fadd(em, const_like(d, 2.0)))
        return self._call("llvm.copysign", t, d)

    def _erf_f64(self, d: ir.Value) -> ir.Value:
        b = self.b
        a = self._call("llvm.fabs", d)
        z = b.fmul(a, a)
        taylor = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(17, -1, -1))
        small = b.fmul(b.fmul(a, const_like(d, 2 / math.sqrt(math.pi))), self._poly(z, taylor))
        ac = self._call("llvm.minnum", self._call("llvm.maxnum", a, const_like(d, 1.0)),
                        const_like(d, 4.0))
        t = b.fmul(b.fsub(b.fmul(ac, const_like(d, 2.0)), const_like(d, 5.0)),
                   const_like(d, 1 / 3))
        g = self._chebyshev(t, ERFC_SCALED_CHEB)
        erfc = b.fmul(self._exp_f64(b.fneg(b.fmul(ac, ac))), g)
        large = b.fsub(const_like(d, 1.0), erfc)
        large = b.select(b.fcmp_ordered(">=", a, const_like(d, 4.0)), const_like(d, 1.0), large)
        r = b.select(b.fcmp_ordered("<", a, const_like(d, 1.0)), small, large)
        return self._call("llvm.copysign", r, d)

    def _chebyshev(self, t: ir.Value, coeffs: tuple) -> ir.Value:
        """Clenshaw evaluation of sum(c_i T_i(t))."""
        b = self.b
        two_t = b.fmul(t, const_like(t, 2.0))
        b1 = const_like(t, 0.0)
        b2 = const_like(t, 0.0)
        for c in reversed(coeffs[1:]):
            b1, b2 = b.fadd(b.fsub(b.fmul(two_t, b1), b2), const_like(t, c)), b1
        return b.fadd(b.fsub(b.fmul(t, b1), b2), const_like(t, coeffs[0]))
