"""OpenCL C functions generated on demand and placed before the kernel: 16-bit float
conversions, round-to-odd steps (so that two roundings round once), vector ``sin``/``cos``
that do not trust a driver's vector builtin with huge lanes, and atomics OpenCL C 1.2 lacks
(float and narrow atomics as compare-and-swap loops).

``Helpers.need(kind, lanes)`` returns the function's name and remembers its source; one
source per (kind, lanes), in the order first needed, is written by ``prelude()``.
"""
from __future__ import annotations

from typing import Any, Callable

from anytile.errors import CompilationError

__all__ = ["Helpers", "TRIG_VECTOR_LIMIT"]


def _v(base: str, n: int) -> str:
    return base if n == 1 else f"{base}{n}"


def _rel01(expr: str, n: int, out: str) -> str:
    """A relational result (0/1 scalar, -1/0 vector) as 0/1 of type ``out``."""
    return f"(({out})({expr}))" if n == 1 else f"convert_{_v(out, n)}(-({expr}))"


def _sel(false: str, true: str, cond: str, n: int) -> str:
    """``cond ? true : false`` per lane; ``cond`` is a relational result."""
    return f"(({cond}) ? ({true}) : ({false}))" if n == 1 else f"select({false}, {true}, {cond})"


def _vload_suffix(n: int) -> str:
    return "" if n == 1 else str(n)


def _h2f(name: str, n: int) -> str:
    return (f"{_v('float', n)} {name}({_v('ushort', n)} x) {{\n"
            f"  return vload_half{_vload_suffix(n)}(0, (const __private half*)&x);\n}}")


def _to_half(source: str) -> Callable[[str, int], str]:
    """``source`` (float or double) to f16 bits, rounded once (``vstore_half_rte``)."""
    def make(name: str, n: int) -> str:
        return (f"{_v('ushort', n)} {name}({_v(source, n)} x) {{\n  {_v('ushort', n)} r;\n"
                f"  vstore_half{_vload_suffix(n)}_rte(x, 0, (__private half*)&r);\n"
                f"  return r;\n}}")
    return make


def _bf2f(name: str, n: int) -> str:
    return (f"{_v('float', n)} {name}({_v('ushort', n)} x) {{\n"
            f"  return as_{_v('float', n)}(convert_{_v('uint', n)}(x) << 16);\n}}")


def _f2bf(name: str, n: int) -> str:
    u = _v("uint", n)
    nan = "isnan(x)" if n == 1 else f"as_{u}(isnan(x))"
    return (f"{_v('ushort', n)} {name}({_v('float', n)} x) {{\n"
            f"  {u} u = as_{u}(x);\n"
            f"  {u} r = (u + ({u})0x7FFFu + ((u >> 16) & ({u})1u)) >> 16;\n"
            f"  r = {_sel('r', f'(u >> 16) | ({u})0x40u', nan, n)};\n"
            f"  return convert_{_v('ushort', n)}(r);\n}}")


#: the float8 formats: (mantissa bits, exponent bias, smallest normal exponent, largest
#: finite value, has infinities) -- e4m3 (OCP e4m3fn), e5m2 and e4b15 (Triton's float8e4b15)
_FLOAT8 = {"f8e4m3": (3, 7, -6, 448.0, False), "f8e5m2": (2, 15, -14, 57344.0, True),
           "f8e4b15": (3, 15, -14, 1.75, False)}
#: formats whose conversions saturate at the largest finite value (infinities too)
_SATURATING = frozenset({"f8e4b15"})


def _f8_to_f(fmt: str) -> Callable[[str, int], str]:
    """float8 code (``uchar``) -> ``float``: sign, exponent and mantissa fields placed in a
    ``float``'s bits (subnormals scaled), infinities and NaNs as the format has them."""
    m, bias, emin, _, has_inf = _FLOAT8[fmt]

    def make(name: str, n: int) -> str:
        f, u = _v("float", n), _v("uint", n)
        top = (1 << (7 - m)) - 1
        nan, inf = f"(({f})NAN)", f"(({f})INFINITY)"
        special = (_sel("v", _sel(nan, inf, f"m == ({u})0u", n), f"e == ({u}){top}u", n)
                   if has_inf else _sel("v", nan, f"(c & ({u})0x7Fu) == ({u})0x7Fu", n))
        return (f"{f} {name}({_v('uchar', n)} x) {{\n"
                f"  {u} c = convert_{u}(x);\n"
                f"  {u} e = (c >> {m}u) & ({u}){top}u;\n  {u} m = c & ({u}){(1 << m) - 1}u;\n"
                f"  {f} v = as_{f}(((e + ({u}){127 - bias}u) << 23) | (m << {23 - m}u));\n"
                f"  v = {_sel('v', f'convert_{f}(m) * ({f}){2.0 ** (emin - m)!r}f', f'e == ({u})0u', n)};\n"
                f"  v = {special};\n"
                f"  return {_sel('v', '-v', f'(c & ({u})0x80u) != ({u})0u', n)};\n}}")
    return make


def _f_to_f8(fmt: str) -> Callable[[str, int], str]:
    """``float`` -> float8 code, rounded once to nearest even: the binade's quantum (at least
    the subnormal one) made the ulp of ``|x| + C`` so one add rounds; past the largest finite
    value: infinity (e5m2) or NaN (e4m3, which has none), as ml_dtypes and torch do, or that
    value (e4b15, infinities too)."""
    m, bias, emin, largest, has_inf = _FLOAT8[fmt]
    emax = int(largest).bit_length() - 1

    def make(name: str, n: int) -> str:
        f, u, i = _v("float", n), _v("uint", n), _v("int", n)
        over = f"(({f}){largest!r}f)" if fmt in _SATURATING else \
            f"(({f})INFINITY)" if has_inf else f"(({f})NAN)"
        return (f"{_v('uchar', n)} {name}({f} x) {{\n"
                f"  {f} a = fabs(x);\n"
                f"  {i} e = clamp(as_{i}(as_{u}(a) >> 23) - 127, {emin}, {emax + 1});\n"
                f"  {f} c = as_{f}(as_{u}(e + {127 + 23 - m}) << 23);\n"
                f"  {f} r = (a + c) - c;\n"
                f"  r = {_sel('r', over, f'r > ({f}){largest!r}f', n)};\n"
                f"  r = {_sel('r', f'(({f})NAN)', 'isnan(x)', n)};\n"
                f"  {u} b = as_{u}(r);\n"
                f"  {i} ex = as_{i}(b >> 23) - 127;\n"
                f"  {u} code = ((as_{u}(ex + {bias}) << {m}u) | ((b >> {23 - m}u) & ({u}){(1 << m) - 1}u));\n"
                f"  code = {_sel('code', f'convert_{u}(r * ({f}){2.0 ** (m - emin)!r}f)', f'ex < {emin}', n)};\n"
                f"  code = {_sel('code', f'({u}){0x7C if has_inf else 0x7F}u', 'isinf(r)', n)};\n"
                f"  code = {_sel('code', f'({u}){0x7E if has_inf else 0x7F}u', 'isnan(r)', n)};\n"
                f"  code |= (as_{u}(x) >> 24) & ({u})0x80u;\n"
                f"  return convert_{_v('uchar', n)}(code);\n}}")
    return make


def _rto_d2f(name: str, n: int) -> str:
    f, u, d = _v("float", n), _v("uint", n), _v("double", n)
    odd = _rel01(f"convert_{d}(r) != x", n, "uint")
    return (f"{f} {name}({d} x) {{\n"
            f"  {f} r = convert_{f}_rtz(x);\n"
            f"  return as_{f}(as_{u}(r) | {odd});\n}}")


def _rto_i2f(src: str) -> Callable[[str, int], str]:
    def make(name: str, n: int) -> str:
        f, u, s = _v("float", n), _v("uint", n), _v(src, n)
        odd = _rel01(f"convert_{s}_sat_rtz(r) != x", n, "uint")
        return (f"{f} {name}({s} x) {{\n"
                f"  {f} r = convert_{f}_rtz(x);\n"
                f"  return as_{f}(as_{u}(r) | {odd});\n}}")
    return make


def _rto_fma(name: str, n: int) -> str:
    """``a*b + c`` rounded to odd in f32, for 16-bit inputs whose product f32 holds exactly:
    TwoSum gives the exact error; an inexact even result moves one ulp towards it."""
    f, u = _v("float", n), _v("uint", n)
    inexact = f"(e != ({f})0.0f) & isfinite(s) & (({u})(bits & ({u})1u) == ({u})0u)" if n > 1 else \
        "e != 0.0f && isfinite(s) && (bits & 1u) == 0u"
    toward = f"((as_{u}(e) ^ bits) >> 31) == ({u})0u" if n > 1 else "((as_uint(e) ^ bits) >> 31) == 0u"
    moved = _sel(f"bits - ({u})1u", f"bits + ({u})1u", toward, n)
    keep_mask = inexact if n == 1 else f"as_{u}(convert_{_v('int', n)}({inexact}))"
    return (f"{f} {name}({f} a, {f} b, {f} c) {{\n"
            f"  {f} p = a * b;\n  {f} s = p + c;\n  {f} bp = s - p;\n"
            f"  {f} e = (p - (s - bp)) + (c - bp);\n"
            f"  {u} bits = as_{u}(s);\n"
            f"  return as_{f}({_sel('bits', moved, keep_mask, n)});\n}}")


#: the largest magnitude a vector ``sin``/``cos`` argument may have before the vector's lanes
#: are computed one by one: PoCL 3.1's vector builtins switch every lane to a method that is
#: wrong for small ones once one lane reaches about 1e7 (the scalar builtins are right)
TRIG_VECTOR_LIMIT = 2.0 ** 17


def _lanewise_trig(fn: str, scalar: str) -> Callable[[str, int], str]:
    """``fn`` of a vector: the driver's vector builtin when every lane is finite and below
    ``TRIG_VECTOR_LIMIT``, else the scalar builtin lane by lane."""
    def make(name: str, n: int) -> str:
        v = _v(scalar, n)
        suffix = "f" if scalar == "float" else ""
        return (f"{v} {name}({v} x) {{\n"
                f"  if (all(fabs(x) < ({v}){TRIG_VECTOR_LIMIT.hex()}{suffix})) return {fn}(x);\n"
                f"  {scalar} l[{n}];\n  vstore{n}(x, 0, l);\n"
                f"  for (int j = 0; j < {n}; j++) l[j] = {fn}(l[j]);\n"
                f"  return vload{n}(0, l);\n}}")
    return make


_GENERATORS: dict[str, Callable[[str, int], str]] = {
    "h2f": _h2f, "f2h": _to_half("float"), "d2h": _to_half("double"), "bf2f": _bf2f, "f2bf": _f2bf,
    "rto_d2f": _rto_d2f, "rto_fma": _rto_fma,
    "rto_i2f_int": _rto_i2f("int"), "rto_i2f_uint": _rto_i2f("uint"),
    "rto_i2f_long": _rto_i2f("long"), "rto_i2f_ulong": _rto_i2f("ulong"),
    **{f"{fmt}_2f": _f8_to_f(fmt) for fmt in _FLOAT8},
    **{f"f2_{fmt}": _f_to_f8(fmt) for fmt in _FLOAT8},
    **{f"{fn}_{t}": _lanewise_trig(fn, c) for fn in ("sin", "cos")
       for t, c in (("f32", "float"), ("f64", "double"))},
}
_NEEDS_FP64 = {"d2h", "rto_d2f", "sin_f64", "cos_f64"}


class Helpers:
    """The helper functions one kernel needs, and the extensions they use."""

    def __init__(self, fp64: bool) -> None:
        self.fp64 = fp64
        self.sources: dict[str, str] = {}
        self.uses_fp64 = False

    def need(self, kind: str, lanes: int) -> str:
        """The name of helper ``kind`` for ``lanes``-wide vectors (made once)."""
        name = f"at_{kind}_{lanes}"
        if name not in self.sources:
            if kind in _NEEDS_FP64:
                self.require_fp64()
            self.sources[name] = _GENERATORS[kind](name, lanes)
        return name

    def define(self, name: str, make: Callable[[], str]) -> str:
        """A helper written elsewhere (atomics): ``make()`` gives its source, once."""
        if name not in self.sources:
            source = make()                  # first: the helpers it needs come before it
            self.sources[name] = source
        return name

    def require_fp64(self, loc: Any = None) -> None:
        if not self.fp64:
            raise CompilationError("this OpenCL device has no 64-bit floats (cl_khr_fp64): "
                                   "use float32", loc)
        self.uses_fp64 = True

    def prelude(self) -> str:
        return "\n\n".join(s for s in self.sources.values() if s)
