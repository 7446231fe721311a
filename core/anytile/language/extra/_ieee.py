"""libdevice's bit-level functions: integer bit counting and permutes, reinterpretations,
conversions in each rounding mode, and float arithmetic rounded toward zero, down or up.

The IR rounds to nearest; the other three modes are exact adjustments of that result: the
sign of the rounding error is found exactly (the error of a sum by Knuth's two-sum, of a
product, quotient or square root as a residual computed by a fused multiply-add, which is
exact for these operations), and the result is moved by one unit in the last place where
the error points the other way.  Conversions to integers saturate to the target range and
give 0 for NaN, as PTX's ``cvt`` does."""
from __future__ import annotations

from typing import Any, Callable

from ...ir import types as irt
from ...ir.builder import Builder
from .. import semantic
from ..objects import builtin, float32, float64, int16, int32, int64, tensor, uint32, uint64
from ._formula import _F, _float, _formula, _where

_MODES = ("rn", "rz", "rd", "ru")


# -- integers ----------------------------------------------------------------------------------
def _int(x: Any, name: str, b: Builder) -> tensor:
    t = semantic.to_tensor(x, b)
    e = irt.elem_type(t.type)
    if not (isinstance(e, irt.ScalarType) and e.is_int and not e.is_bool):
        raise TypeError(f"libdevice.{name} needs an integer input, got {t.dtype!r}")
    return t


def _unsigned(t: tensor, b: Builder) -> _F:
    """``t``'s bits as an unsigned 32- or 64-bit tile."""
    bits = irt.elem_type(t.type).bits
    wide = uint64 if bits == 64 else uint32
    if bits < 32:
        t = semantic.cast(t, int32 if irt.elem_type(t.type).is_signed else uint32, b)
    return _F(semantic.bitcast(t, wide, b) if bits in (32, 64) else semantic.cast(t, wide, b), b)


def _width(u: _F) -> int:
    return irt.elem_type(u.t.type).bits


def _clz(u: _F) -> _F:
    w = _width(u)
    n = (u & 0).to(int32)
    s = w // 2
    while s >= 1:
        top_clear = u < (1 << (w - s))
        n = n + _where(top_clear, s, 0).to(int32)
        u = _where(top_clear, u << s, u)
        s //= 2
    return n + _where(u.eq(0), 1, 0).to(int32)


def _popc(u: _F) -> _F:
    w = _width(u)
    m1, m2, m4, h01 = (int("01" * (w // 2), 2), int("0011" * (w // 4), 2),
                       int("00001111" * (w // 8), 2), int("00000001" * (w // 8), 2))
    v = u - ((u >> 1) & m1)
    v = (v & m2) + ((v >> 2) & m2)
    v = (v + (v >> 4)) & m4
    return ((v * h01) >> (w - 8)).to(int32)


@builtin
def clz(x: Any, _builder: Builder = None) -> tensor:
    """The number of leading zero bits (32 or 64 for 0), as ``int32``."""
    return _clz(_unsigned(_int(x, "clz", _builder), _builder)).t


@builtin
def popc(x: Any, _builder: Builder = None) -> tensor:
    """The number of set bits, as ``int32``."""
    return _popc(_unsigned(_int(x, "popc", _builder), _builder)).t


@builtin
def ffs(x: Any, _builder: Builder = None) -> tensor:
    """The 1-based position of the least significant set bit; 0 for 0. ``int32``."""
    u = _unsigned(_int(x, "ffs", _builder), _builder)
    low = u & (0 - u)
    return _where(u.eq(0), 0, (_clz(low) * -1) + _width(u)).to(int32).t


@builtin
def brev(x: Any, _builder: Builder = None) -> tensor:
    """The bits in reverse order, in ``x``'s type."""
    t = _int(x, "brev", _builder)
    u = _unsigned(t, _builder)
    w = _width(u)
    s = 1
    while s < w:
        mask = int(("0" * s + "1" * s) * (w // (2 * s)), 2)
        u = ((u >> s) & mask) | ((u & mask) << s)
        s *= 2
    return semantic.bitcast(u.t, t.dtype, _builder)


def _int32_args(name: str, b: Builder, *xs: Any) -> list[tensor]:
    ts = [_int(x, name, b) for x in xs]
    ts = list(semantic.broadcast_all(b, *ts))
    return ts


@builtin
def byte_perm(x: Any, y: Any, s: Any, _builder: Builder = None) -> tensor:
    """Byte ``i`` of the result is the byte of the 8-byte value ``y:x`` (``x`` the low half)
    selected by bits ``4i..4i+2`` of ``s``; ``int32``."""
    b = _builder
    tx, ty, ts = _int32_args("byte_perm", b, x, y, s)
    v = (_unsigned(semantic.cast(ty, uint32, b), b).to(uint64) << 32) | \
        _unsigned(semantic.cast(tx, uint32, b), b).to(uint64)
    sel = _unsigned(semantic.cast(ts, uint32, b), b).to(uint64)
    out = v & 0
    for i in range(4):
        byte = (v >> (((sel >> (4 * i)) & 7) * 8)) & 0xFF
        out = out | (byte << (8 * i))
    return semantic.bitcast(out.to(uint32).t, int32, b)


@builtin
def mul24(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """The low 32 bits of the product of the sign-extended low 24 bits of ``x`` and ``y``."""
    b = _builder
    tx, ty = _int32_args("mul24", b, x, y)
    ax = (_F(semantic.cast(tx, int32, b), b) << 8) >> 8
    ay = (_F(semantic.cast(ty, int32, b), b) << 8) >> 8
    return (ax * ay).t


def _wide_pair(name: str, x: Any, y: Any, b: Builder) -> tuple[_F, _F, Any]:
    tx, ty = semantic.promote_pair(_int(x, name, b), _int(y, name, b), b, op=name)
    return _F(semantic.cast(tx, int64, b), b), _F(semantic.cast(ty, int64, b), b), tx.dtype


@builtin
def hadd(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``(x + y) >> 1`` without overflow in between (32-bit integers)."""
    a, c, dt = _wide_pair("hadd", x, y, _builder)
    return ((a + c) >> 1).to(dt).t


@builtin
def rhadd(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``(x + y + 1) >> 1`` without overflow in between (32-bit integers)."""
    a, c, dt = _wide_pair("rhadd", x, y, _builder)
    return ((a + c + 1) >> 1).to(dt).t


@builtin
def sad(x: Any, y: Any, z: Any, _builder: Builder = None) -> tensor:
    """``|x - y| + z`` (the sum of absolute differences step), in ``z``'s type."""
    a, c, _ = _wide_pair("sad", x, y, _builder)
    tz = _int(z, "sad", _builder)
    d = a - c
    return (_where(d < 0, -d, d) + _F(semantic.cast(tz, int64, _builder), _builder)).to(tz.dtype).t


# -- reinterpretation --------------------------------------------------------------------------
def _reinterpret(name: str, src_kind: str, dst: Any, doc: str) -> Callable[..., tensor]:
    @builtin
    def fn(x: Any, _builder: Builder = None) -> tensor:
        t = semantic.to_tensor(x, _builder)
        e = irt.elem_type(t.type)
        ok = e.is_float if src_kind == "float" else (e.is_int and not e.is_bool)
        if not ok or e.bits != dst.primitive_bitwidth:
            raise TypeError(f"libdevice.{name} needs a {dst.primitive_bitwidth}-bit {src_kind} "
                            f"input, got {t.dtype!r}")
        return semantic.bitcast(t, dst, _builder)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


int_as_float = _reinterpret("int_as_float", "int", float32, "An int32's bits as a float32.")
uint_as_float = _reinterpret("uint_as_float", "int", float32, "A uint32's bits as a float32.")
float_as_int = _reinterpret("float_as_int", "float", int32, "A float32's bits as an int32.")
float_as_uint = _reinterpret("float_as_uint", "float", uint32, "A float32's bits as a uint32.")
longlong_as_double = _reinterpret("longlong_as_double", "int", float64,
                                  "An int64's bits as a float64.")
double_as_longlong = _reinterpret("double_as_longlong", "float", int64,
                                  "A float64's bits as an int64.")


@builtin
def hiloint2double(hi: Any, lo: Any, _builder: Builder = None) -> tensor:
    """The float64 whose high 32 bits are ``hi`` and low 32 bits ``lo``."""
    b = _builder
    th, tl_ = _int32_args("hiloint2double", b, hi, lo)
    h = _unsigned(semantic.cast(th, uint32, b), b).to(uint64)
    lo_ = _unsigned(semantic.cast(tl_, uint32, b), b).to(uint64)
    return semantic.bitcast(((h << 32) | lo_).t, float64, b)


def _double_bits(x: Any, name: str, b: Builder) -> _F:
    t = _float(x, name, b)
    return _F(semantic.bitcast(semantic.cast(t, float64, b), uint64, b), b)


@builtin
def double2loint(x: Any, _builder: Builder = None) -> tensor:
    """The low 32 bits of a float64, as ``int32``."""
    u = _double_bits(x, "double2loint", _builder)
    return semantic.bitcast((u & 0xFFFFFFFF).to(uint32).t, int32, _builder)


@builtin
def double2hiint(x: Any, _builder: Builder = None) -> tensor:
    """The high 32 bits of a float64, as ``int32``."""
    u = _double_bits(x, "double2hiint", _builder)
    return semantic.bitcast((u >> 32).to(uint32).t, int32, _builder)


# -- stepping by one unit in the last place ----------------------------------------------------
def _int_type(f: _F) -> Any:
    return {16: int16, 32: int32, 64: int64}[irt.elem_type(f.t.type).bits]


def step_up(r: _F) -> _F:
    """The next representable value above ``r`` (+inf and NaN unchanged)."""
    ity = _int_type(r)
    i = r.bitcast(ity)
    bits = _where(r.eq(0.0), i & 0 | 1, _where(r > 0.0, i + 1, i - 1))
    return _where(r.isnan() | r.eq(float("inf")), r, bits.bitcast(r.t.dtype))


def step_down(r: _F) -> _F:
    """The next representable value below ``r`` (-inf and NaN unchanged)."""
    return -step_up(-r)


def adjust(r: _F, below: _F, above: _F, mode: str) -> _F:
    """``r`` (the round-to-nearest result) rounded in ``mode`` instead, given whether the exact
    value lies ``below`` or ``above`` it."""
    if mode == "rn":
        return r
    if mode == "rd":
        return _where(below, step_down(r), r)
    if mode == "ru":
        return _where(above, step_up(r), r)
    return _where((r > 0.0) & below, step_down(r), _where((r < 0.0) & above, step_up(r), r))


def _narrowed(w: _F, lt: _F, gt: _F, out: Any, mode: str) -> _F:
    """``w`` (a result in the working type, the exact value being below it where ``lt`` and
    above where ``gt``) rounded to ``out`` in ``mode``."""
    if out.primitive_bitwidth == irt.elem_type(w.t.type).bits:
        return adjust(w, lt, gt, mode)
    r = w.to(out)
    rw = r.to(w.t.dtype)
    below = (w < rw) | (w.eq(rw) & lt)
    above = (w > rw) | (w.eq(rw) & gt)
    return adjust(r, below, above, mode)


def _two_sum_error(a: _F, c: _F, s: _F) -> _F:
    bb = s - a
    return (a - (s - bb)) + (c - bb)


def _overflowed(w: _F, *xs: _F) -> tuple[_F, _F]:
    """Where ``w`` overflowed to an infinity from finite inputs: the exact value lies below
    +inf and above -inf."""
    finite = None
    for x in xs:
        f = x.call("abs") < float("inf")
        finite = f if finite is None else finite & f
    return finite & w.eq(float("inf")), finite & w.eq(float("-inf"))


def _arith(kind: str, xs: list[_F]) -> tuple[_F, _F, _F]:
    """The round-to-nearest result of ``kind`` over ``xs`` (in the working type), and whether
    the exact value lies below / above it."""
    if kind == "add":
        a, c = xs
        w = a + c
        err = _two_sum_error(a, c, w)
    elif kind == "mul":
        a, c = xs
        w = a * c
        err = a.fma(c, -w)
    elif kind == "div":
        a, c = xs
        w = a / c
        err = (-w).fma(c, a) * _where(c < 0.0, -1.0, 1.0)
    elif kind == "rcp":
        (c,) = xs
        w = 1.0 / c
        err = (-w).fma(c, 1.0) * _where(c < 0.0, -1.0, 1.0)
    elif kind == "sqrt":
        (a,) = xs
        w = a.call("sqrt")
        err = (-w).fma(w, a)
    else:                                            # fma: a * c + d
        a, c, d = xs
        w = a.fma(c, d)
        p = a * c
        pe = a.fma(c, -p)                            # a * c == p + pe exactly
        s = p + d
        se = _two_sum_error(p, d, s)                 # p + d == s + se exactly
        # exact - w == (s - w) + se + pe; s - w is exact (Sterbenz) where it matters
        err = (s - w) + (se + pe)
    lt, gt = err < 0.0, err > 0.0
    hi, lo = _overflowed(w, *xs)
    if kind in ("div", "rcp"):                       # x / 0 is an exact infinity
        hi, lo = hi & xs[-1].ne(0.0), lo & xs[-1].ne(0.0)
    return w, lt | hi, gt | lo


def _rounded_op(kind: str, arity: int, mode: str) -> Callable[..., tensor]:
    name = f"{kind}_{mode}"

    @builtin
    def fn(*args: Any, _builder: Builder = None) -> tensor:
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} argument(s), got {len(args)}")
        xs, out = _formula(name, *args, b=_builder)
        if irt.elem_type(xs[0].t.type).bits < 64:
            # f32 in f64: +, * and the residuals are then exact, and rounding twice is not
            # an issue since the direction of the second rounding is decided exactly
            xs = [x.to(float64) for x in xs]
        w, lt, gt = _arith(kind, xs)
        return _narrowed(w, lt, gt, out, mode).t

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{kind}`` of the inputs, correctly rounded "
                  f"{dict(rn='to nearest (ties to even)', rz='toward zero', rd='down', ru='up')[mode]}.")
    return fn


def _sub(mode: str) -> Callable[..., tensor]:
    add = globals()[f"add_{mode}"]

    @builtin
    def fn(x: Any, y: Any, _builder: Builder = None) -> tensor:
        return add(x, semantic.neg(_float(y, f"sub_{mode}", _builder), _builder),
                   _builder=_builder)

    fn.__name__ = fn.__qualname__ = f"sub_{mode}"
    fn.__doc__ = f"``x - y``, rounded as add_{mode} rounds."
    return fn


for _mode in _MODES:
    for _kind, _arity in (("add", 2), ("mul", 2), ("div", 2), ("rcp", 1), ("sqrt", 1),
                          ("fma", 3)):
        globals()[f"{_kind}_{_mode}"] = _rounded_op(_kind, _arity, _mode)
for _mode in _MODES:
    globals()[f"sub_{_mode}"] = _sub(_mode)


# -- conversions -------------------------------------------------------------------------------
_ROUND_FN = {"rn": "rint", "rz": "trunc", "rd": "floor", "ru": "ceil"}


def _round_integral(f: _F, mode: str) -> _F:
    from .libdevice import rint, trunc
    if mode == "rd":
        return f.call("floor")
    if mode == "ru":
        return f.call("ceil")
    fn = rint if mode == "rn" else trunc
    return _F(fn(f.t, _builder=f.b), f.b)


def _float_to_int(name: str, src: Any, dst: Any, mode: str) -> Callable[..., tensor]:
    @builtin
    def fn(x: Any, _builder: Builder = None) -> tensor:
        t = _float(x, name, _builder)
        if irt.elem_type(t.type).bits != src.primitive_bitwidth:
            t = semantic.cast(t, src, _builder)
        f = _round_integral(_F(t, _builder), mode)
        return f.to(dst).t                       # the IR's cast saturates and maps NaN to 0

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``x`` rounded ({_ROUND_FN[mode]}) to {dst!r}, saturating at the type's "
                  f"limits; NaN gives 0.")
    return fn


_FLOATS = {"float": float32, "double": float64}
_INTS = {"int": int32, "uint": uint32, "ll": int64, "ull": uint64}
for _fname, _fty in _FLOATS.items():
    for _iname, _ity in _INTS.items():
        for _mode in _MODES:
            _n = f"{_fname}2{_iname}_{_mode}"
            globals()[_n] = _float_to_int(_n, _fty, _ity, _mode)


def _int_to_float(name: str, src: Any, dst: Any, mode: str) -> Callable[..., tensor]:
    @builtin
    def fn(x: Any, _builder: Builder = None) -> tensor:
        b = _builder
        t = semantic.cast(_int(x, name, b), src, b)
        r = _F(semantic.cast(t, dst, b), b)
        if mode == "rn":
            return r.t
        xi = _F(t, b)
        limit = 2.0 ** src.primitive_bitwidth if src.is_int_unsigned() else \
            2.0 ** (src.primitive_bitwidth - 1)
        inside = r < limit                           # r converts back to src exactly there
        back = _where(inside, r, 0.0).to(src)
        exact_below = ~inside | (back > xi)
        exact_above = inside & (back < xi)
        return adjust(r, exact_below, exact_above, mode).t

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``x`` ({src!r}) converted to {dst!r}, rounded {mode}."
    return fn


_INT_TO_FLOAT = {"int2float": (int32, float32), "uint2float": (uint32, float32),
                 "ll2float": (int64, float32), "ull2float": (uint64, float32),
                 "ll2double": (int64, float64), "ull2double": (uint64, float64)}
for _n, (_src, _dst) in _INT_TO_FLOAT.items():
    for _mode in _MODES:
        globals()[f"{_n}_{_mode}"] = _int_to_float(f"{_n}_{_mode}", _src, _dst, _mode)
int2double_rn = _int_to_float("int2double_rn", int32, float64, "rn")
uint2double_rn = _int_to_float("uint2double_rn", uint32, float64, "rn")


def _double2float(mode: str) -> Callable[..., tensor]:
    @builtin
    def fn(x: Any, _builder: Builder = None) -> tensor:
        t = semantic.cast(_float(x, f"double2float_{mode}", _builder), float64, _builder)
        w = _F(t, _builder)
        nothing = w.ne(w) & w.eq(w)                  # all false
        return _narrowed(w, nothing, nothing, float32, mode).t

    fn.__name__ = fn.__qualname__ = f"double2float_{mode}"
    fn.__doc__ = f"A float64 converted to float32, rounded {mode}."
    return fn


for _mode in _MODES:
    globals()[f"double2float_{_mode}"] = _double2float(_mode)


__all__ = (["clz", "popc", "ffs", "brev", "byte_perm", "mul24", "hadd", "rhadd", "sad",
            "int_as_float", "uint_as_float", "float_as_int", "float_as_uint",
            "longlong_as_double", "double_as_longlong", "hiloint2double", "double2loint",
            "double2hiint", "int2double_rn", "uint2double_rn"]
           + [f"{k}_{m}" for k in ("add", "sub", "mul", "div", "rcp", "sqrt", "fma")
              for m in _MODES]
           + [f"{f}2{i}_{m}" for f in _FLOATS for i in _INTS for m in _MODES]
           + [f"{n}_{m}" for n in _INT_TO_FLOAT for m in _MODES]
           + [f"double2float_{m}" for m in _MODES])
