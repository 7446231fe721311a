"""IR elementwise ops -> llvmlite instructions, for scalars and vectors alike.

``ElementwiseLowering`` is a table from (op kind, element type) to builder calls.  Values
are in their *compute* form (see ``types``): ``f16``/``bf16`` live in ``float`` registers and
every op on them is followed by one rounding to the narrow type (``round_to``), which is
exact IEEE behaviour for + - * / sqrt because float has more than 2p+2 bits.

Semantics follow ``anytile.ir.ops``: integer division truncates (C), the divisor is made
safe (0 -> 1, ``INT_MIN / -1`` wraps) so a masked-off lane can never trap; shifts by amounts
outside ``[0, bits)`` give what the interpreter gives, never LLVM poison; float->int casts
saturate (``llvm.fpto[su]i.sat``, NaN -> 0); float min/max are IEEE 754-2019
minimumNumber/maximumNumber (a NaN operand gives the other; -0 < +0).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from ...ir.types import FLOAT8, FLOAT8_SATURATING, PointerType, ScalarType
from .types import F16, F32, F64, I1, I8, I16, I32, I64, const_like, intrinsic, vector_width

if TYPE_CHECKING:
    from .math import MathLowering    # math.py imports this module

__all__ = ["ElementwiseLowering", "like"]


def _unwidened(v: ir.Value) -> ir.Value:
    """``x`` when ``v`` is ``fpext(fptrunc(x))`` of an f32 ``x`` through f16, else ``v``."""
    if isinstance(v, ir.CastInstr) and v.opname == "fpext":
        inner = v.operands[0]
        if isinstance(inner, ir.CastInstr) and inner.opname == "fptrunc" and \
                inner.type == F16 and inner.operands[0].type == v.type:
            return inner.operands[0]
    return v


def like(t: ir.Type, value: ir.Value) -> ir.Type:
    """``t`` as a vector of ``value``'s width (``t`` itself when ``value`` is a scalar)."""
    n = vector_width(value)
    return ir.VectorType(t, n) if n else t


class ElementwiseLowering:
    """Emits elementwise IR ops with builder ``b``; math functions go to ``math``
    (a ``MathLowering``).  Every method takes and returns compute-form values.
    ``contract``: the kernel's own f32 and f64 adds, subtracts and multiplies carry LLVM's
    ``contract`` flag, so that a multiply feeding an add may become one fused multiply-add
    (``CompileOptions.enable_fp_fusion``); arithmetic the lowering itself emits (rounding
    to narrow floats, the math functions) never does.  ``min_max_order_zeros``: the target's
    ``minnum``/``maxnum`` instructions already put -0 below +0, so no tie select follows them."""

    def __init__(self, b: ir.IRBuilder, math: "MathLowering", contract: bool = False,
                 min_max_order_zeros: bool = False) -> None:
        self.b = b
        self.math = math
        self.contract = contract
        self.min_max_order_zeros = min_max_order_zeros

    @property
    def module(self) -> ir.Module:
        return self.b.module

    def call(self, name: str, args: list, overload: Optional[ir.Type] = None) -> ir.Value:
        """Call LLVM intrinsic ``name`` overloaded on ``overload`` (default: args[0]'s type)."""
        t = overload or args[0].type
        fn = intrinsic(self.module, name, t, [a.type for a in args], [t])
        return self.b.call(fn, args)

    # -- narrow floats -----------------------------------------------------------------------
    def round_to(self, elem: ScalarType, v: ir.Value) -> ir.Value:
        """Round a float value to ``elem``'s precision (no-op for f32/f64)."""
        b = self.b
        if elem.name == "f16":
            return b.fpext(b.fptrunc(v, like(F16, v)), v.type)
        if elem.name == "bf16":
            return b.bitcast(self._bf16_bits32(v), v.type)
        if elem.is_float8:
            return self._float8_round(elem, v)
        return v

    def _float8_round(self, elem: ScalarType, v: ir.Value) -> ir.Value:
        """``v`` (a float) rounded to the float8 format ``elem``, nearest even, kept as a
        float: the quantum of ``v``'s binade (at least the format's subnormal one) is made
        the ulp of ``|v| + C`` so that one float add rounds; results past the largest finite
        value become infinity (e5m2) or NaN (e4m3, which has no infinity), as ml_dtypes and
        torch do, or that largest value (e4b15: ``FLOAT8_SATURATING``, infinities too)."""
        b = self.b
        bias, emin, largest, has_inf = FLOAT8[elem.name]
        m = elem.fp_mantissa_bits
        mag, bits, exp = self._float_fields(v)
        emax = int(largest).bit_length() - 1
        exp = self.call("llvm.smax", [exp, const_like(exp, emin)])
        exp = self.call("llvm.smin", [exp, const_like(exp, emax + 1)])
        c_bits = b.shl(b.add(exp, const_like(exp, 127 + 23 - m)), const_like(exp, 23))
        c = b.bitcast(c_bits, mag.type)
        rounded = b.fsub(b.fadd(mag, c), c)
        too_big = b.fcmp_ordered(">", rounded, const_like(mag, largest))
        past = largest if elem.name in FLOAT8_SATURATING else \
            float("inf") if has_inf else float("nan")
        rounded = b.select(too_big, const_like(mag, past), rounded)
        rounded = b.select(b.fcmp_unordered("uno", v, v), const_like(mag, float("nan")), rounded)
        return self.call("llvm.copysign", [rounded, v])

    def _float_fields(self, v: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """``|v|`` (a float), its bits and its unbiased exponent (-127 for zero/subnormals)."""
        b = self.b
        mag = b.call(self._fabs(v.type), [v])
        bits = b.bitcast(mag, like(I32, v))
        return mag, bits, b.sub(b.lshr(bits, const_like(bits, 23)), const_like(bits, 127))

    def _float8_bits(self, elem: ScalarType, v: ir.Value) -> ir.Value:
        """The float8 code (an ``i8``) of a float holding a value of format ``elem``."""
        b = self.b
        bias, emin, largest, has_inf = FLOAT8[elem.name]
        m = elem.fp_mantissa_bits
        mag, bits, exp = self._float_fields(v)
        mant = b.and_(b.lshr(bits, const_like(bits, 23 - m)), const_like(bits, (1 << m) - 1))
        normal = b.or_(b.shl(b.add(exp, const_like(exp, bias)), const_like(exp, m)), mant)
        scaled = b.fmul(mag, const_like(mag, float(2.0 ** (m - emin))))
        sub = b.fptoui(scaled, like(I32, v))
        code = b.select(b.icmp_signed(">=", exp, const_like(exp, emin)), normal, sub)
        special = (0x7C if has_inf else 0x7F)
        code = b.select(b.fcmp_ordered("==", mag, const_like(mag, float("inf"))),
                        const_like(code, special), code)
        code = b.select(b.fcmp_unordered("uno", v, v), const_like(code, 0x7E if has_inf else 0x7F),
                        code)
        sign = b.and_(b.lshr(b.bitcast(v, like(I32, v)), const_like(bits, 24)),
                      const_like(bits, 0x80))
        return b.trunc(b.or_(code, sign), like(I8, v))

    def _float8_value(self, elem: ScalarType, raw: ir.Value) -> ir.Value:
        """The float value of float8 code ``raw`` (an ``i8``) of format ``elem``."""
        b = self.b
        bias, emin, largest, has_inf = FLOAT8[elem.name]
        m = elem.fp_mantissa_bits
        code = b.zext(raw, like(I32, raw))
        e = b.and_(b.lshr(code, const_like(code, m)), const_like(code, (1 << (7 - m)) - 1))
        mant = b.and_(code, const_like(code, (1 << m) - 1))
        normal_bits = b.or_(b.shl(b.add(e, const_like(e, 127 - bias)), const_like(e, 23)),
                            b.shl(mant, const_like(mant, 23 - m)))
        normal = b.bitcast(normal_bits, like(F32, raw))
        sub = b.fmul(b.uitofp(mant, like(F32, raw)), const_like(like(F32, raw),
                                                              float(2.0 ** (emin - m))))
        value = b.select(b.icmp_unsigned("==", e, const_like(e, 0)), sub, normal)
        low7 = b.and_(code, const_like(code, 0x7F))
        if has_inf:
            top = (1 << (7 - m)) - 1
            value = b.select(b.icmp_unsigned("==", e, const_like(e, top)),
                             b.select(b.icmp_unsigned("==", mant, const_like(mant, 0)),
                                      const_like(value, float("inf")),
                                      const_like(value, float("nan"))), value)
        else:
            value = b.select(b.icmp_unsigned("==", low7, const_like(low7, 0x7F)),
                             const_like(value, float("nan")), value)
        negative = b.icmp_unsigned("!=", b.and_(code, const_like(code, 0x80)),
                                   const_like(code, 0))
        return b.select(negative, b.fneg(value), value)

    def _bf16_bits32(self, v: ir.Value) -> ir.Value:
        """The f32 bit pattern of ``v`` rounded to bf16 (nearest even), low 16 bits zero."""
        b = self.b
        bits = b.bitcast(v, like(I32, v))
        lsb = b.and_(b.lshr(bits, const_like(bits, 16)), const_like(bits, 1))
        rounded = b.add(bits, b.add(lsb, const_like(bits, 0x7FFF)))
        rounded = b.and_(rounded, const_like(bits, 0xFFFF0000 - (1 << 32)))
        is_nan = b.fcmp_unordered("uno", v, v)
        return b.select(is_nan, const_like(bits, 0x7FC00000), rounded)

    def _f64_to_f32_round_to_odd(self, v: ir.Value) -> ir.Value:
        """``v`` (f64) -> f32 rounded to odd, so a second rounding to a narrower type is
        correct (no double-rounding error)."""
        b = self.b
        t = b.fptrunc(v, like(F32, v))
        back = b.fpext(t, v.type)
        bits = b.bitcast(t, like(I32, v))
        too_big = b.fcmp_ordered(">", b.call(self._fabs(v.type), [back]),
                                 b.call(self._fabs(v.type), [v]))
        bits = b.select(too_big, b.sub(bits, const_like(bits, 1)), bits)
        inexact = b.fcmp_ordered("!=", back, v)
        bits = b.select(inexact, b.or_(bits, const_like(bits, 1)), bits)
        odd = b.bitcast(bits, t.type)
        return b.select(b.fcmp_unordered("uno", v, v), t, odd)

    def _int64_to_f64_round_to_odd(self, src: ScalarType, x: ir.Value) -> ir.Value:
        """A 64-bit integer -> f64 rounded to odd: the high and low 32-bit parts convert
        exactly, their sum's rounding error (TwoSum) says whether to move to the odd
        neighbour, so that a later rounding to bf16 rounds the exact integer once."""
        b = self.b
        conv = b.sitofp if src.is_signed else b.uitofp
        low = b.and_(x, const_like(x, 0xFFFFFFFF))
        hi_f, lo_f = conv(b.sub(x, low), like(F64, x)), b.uitofp(low, like(F64, x))
        s = b.fadd(hi_f, lo_f)
        bp = b.fsub(s, hi_f)
        err = b.fadd(b.fsub(hi_f, b.fsub(s, bp)), b.fsub(lo_f, bp))
        bits = b.bitcast(s, like(I64, x))
        even = b.icmp_unsigned("==", b.and_(bits, const_like(bits, 1)), const_like(bits, 0))
        inexact = b.fcmp_ordered("!=", err, const_like(err, 0.0))
        # one ulp toward the exact value: up in magnitude when err has s's sign
        away = b.icmp_unsigned("==", b.fcmp_ordered(">", err, const_like(err, 0.0)),
                               b.fcmp_ordered(">", s, const_like(s, 0.0)))
        step = b.select(away, const_like(bits, 1), const_like(bits, -1))
        bits = b.select(b.and_(inexact, even), b.add(bits, step), bits)
        return b.bitcast(bits, s.type)

    def _fabs(self, t: ir.Type) -> ir.Function:
        return intrinsic(self.module, "llvm.fabs", t, [t], [t])

    # -- memory forms ------------------------------------------------------------------------
    def from_storage(self, elem: ScalarType, raw: ir.Value) -> ir.Value:
        """A value loaded in storage form -> compute form."""
        b = self.b
        if elem.is_bool:
            return b.icmp_unsigned("!=", raw, const_like(raw, 0))
        if elem.name == "f16":
            return b.fpext(raw, like(F32, raw))
        if elem.name == "bf16":
            wide = b.shl(b.zext(raw, like(I32, raw)), const_like(like(I32, raw), 16))
            return b.bitcast(wide, like(F32, raw))
        if elem.is_float8:
            return self._float8_value(elem, raw)
        return raw

    def to_storage(self, elem: ScalarType, v: ir.Value) -> ir.Value:
        """A compute-form value -> the bits to store."""
        b = self.b
        if elem.is_bool:
            return b.zext(v, like(I8, v))
        if elem.name == "f16":
            return b.fptrunc(v, like(F16, v))
        if elem.name == "bf16":
            bits = b.bitcast(v, like(I32, v))
            return b.trunc(b.lshr(bits, const_like(bits, 16)), like(I16, v))
        if elem.is_float8:
            return self._float8_bits(elem, v)
        return v

    def pack_storage(self, elem: ScalarType, values: list) -> ir.Value:
        """The storage bits of ``values`` (compute form) as one ``<n x storage>`` vector,
        converted together: n f32 values to f16 in one vector conversion (NVPTX:
        ``cvt.rn.f16x2.f32``).  A value that is already ``elem`` rounded and widened back
        (``fpext(fptrunc(x))``) is taken as ``x``: rounding it again gives the same bits."""
        b = self.b
        if elem.name == "f16":
            values = [_unwidened(v) for v in values]
        vec = ir.Constant(ir.VectorType(values[0].type, len(values)), ir.Undefined)
        for k, v in enumerate(values):
            vec = b.insert_element(vec, v, ir.Constant(I32, k))
        return self.to_storage(elem, vec)

    # -- arithmetic ----------------------------------------------------------------------------
    def binary(self, kind: str, elem: ScalarType, x: ir.Value, y: ir.Value,
               strict: bool = True) -> ir.Value:
        """``x <kind> y`` as ``anytile.ir.ops.BinaryOp`` defines it (``strict``: the op's flag;
        an op that is not may be fused where ``contract`` is on)."""
        b = self.b
        if elem.is_float:
            if kind in ("add", "sub", "mul") and self.contract and not strict and elem.nbytes >= 4:
                r = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul}[kind](x, y, flags=("contract",))
            elif kind in ("add", "sub", "mul", "fdiv"):
                r = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "fdiv": b.fdiv}[kind](x, y)
            elif kind == "div":
                # floor of the quotient rounded to the operand type
                r = self.call("llvm.floor", [self.round_to(elem, b.fdiv(x, y))])
            elif kind == "rem":
                r = b.frem(x, y)
            elif kind in ("min", "max"):
                r = self._min_max_number(kind, x, y)
            else:
                raise NotImplementedError(f"binary '{kind}' on {elem}")
            return self.round_to(elem, r)
        signed = elem.is_signed
        if kind in ("add", "sub", "mul", "and", "or", "xor"):
            fn = {"add": b.add, "sub": b.sub, "mul": b.mul, "and": b.and_, "or": b.or_,
                  "xor": b.xor}[kind]
            return fn(x, y)
        if kind in ("shl", "shr"):
            return self._shift(kind, elem, x, y)
        if kind in ("div", "rem"):
            y = self._safe_divisor(elem, x, y)
            if kind == "div":
                return b.sdiv(x, y) if signed else b.udiv(x, y)
            return b.srem(x, y) if signed else b.urem(x, y)
        if kind in ("min", "max"):
            name = ("llvm.s" if signed else "llvm.u") + kind
            return self.call(name, [x, y])
        raise NotImplementedError(f"binary '{kind}' on {elem}")

    def _min_max_number(self, kind: str, x: ir.Value, y: ir.Value) -> ir.Value:
        """``minnum``/``maxnum`` (a NaN operand gives the other), and of two equal operands
        (only +0 and -0 differ then) the AND of their bits for max (+0 unless both are -0),
        the OR for min: LLVM's ``minnum`` may return either zero."""
        b = self.b
        r = self.call("llvm.minnum" if kind == "min" else "llvm.maxnum", [x, y])
        if self.min_max_order_zeros:
            return r
        width = vector_width(x)
        scalar = x.type.element if width else x.type
        bits: ir.Type = ir.IntType({F16: 16, F32: 32, F64: 64}[scalar])
        if width:
            bits = ir.VectorType(bits, width)
        xi, yi = b.bitcast(x, bits), b.bitcast(y, bits)
        tie = b.bitcast(b.or_(xi, yi) if kind == "min" else b.and_(xi, yi), x.type)
        return b.select(b.fcmp_ordered("==", x, y), tie, r)

    def _shift(self, kind: str, elem: ScalarType, x: ir.Value, y: ir.Value) -> ir.Value:
        """Shifts with the interpreter's results for amounts outside ``[0, bits)`` (which
        LLVM would make poison): 0, or the sign fill for an arithmetic right shift."""
        b = self.b
        bits = const_like(y, elem.bits)
        in_range = b.icmp_unsigned("<", y, bits)      # unsigned: negative amounts are huge
        if kind == "shr" and elem.is_signed:
            return b.ashr(x, b.select(in_range, y, const_like(y, elem.bits - 1)))
        shifted = b.shl(x, y) if kind == "shl" else b.lshr(x, y)
        return b.select(in_range, shifted, const_like(x, 0))

    def _safe_divisor(self, elem: ScalarType, x: ir.Value, y: ir.Value) -> ir.Value:
        """``y`` with 0 (undefined anyway) and, for signed types, -1 under INT_MIN replaced
        by 1, so that no lane traps; INT_MIN / -1 then gives INT_MIN (wrapping)."""
        b = self.b
        bad = b.icmp_unsigned("==", y, const_like(y, 0))
        if elem.is_signed:
            int_min = const_like(x, -(1 << (elem.bits - 1)))
            overflow = b.and_(b.icmp_signed("==", y, const_like(y, -1)),
                              b.icmp_signed("==", x, int_min))
            bad = b.or_(bad, overflow)
        return b.select(bad, const_like(y, 1), y)

    def unary(self, kind: str, elem: ScalarType, x: ir.Value, strict: bool = True) -> ir.Value:
        """``kind(x)`` as ``anytile.ir.ops.UnaryOp`` defines it (``strict``: the op's flag; for
        an op that is not, the math object's ``relaxed`` form serves where it has one)."""
        b = self.b
        if kind == "neg":
            return b.fneg(x) if elem.is_float else b.sub(const_like(x, 0), x)
        if kind == "not":
            return b.xor(x, const_like(x, -1))
        if kind == "abs":
            if elem.is_float:
                return b.call(self._fabs(x.type), [x])
            if elem.is_unsigned or elem.is_bool:
                return x
            return self.call("llvm.abs", [x, ir.Constant(I1, 0)])
        if not elem.is_float:
            raise NotImplementedError(f"unary '{kind}' on {elem}")
        if kind in ("sqrt", "floor", "ceil"):
            return self.round_to(elem, self.call("llvm." + kind, [x]))
        if kind == "rsqrt":
            return self.round_to(elem, self._rsqrt(x))
        fast = None if strict else self.math.relaxed(kind, x)
        return self.round_to(elem, fast if fast is not None else self.math.emit(kind, x))

    def _rsqrt(self, x: ir.Value) -> ir.Value:
        """1/sqrt(x); f32 goes through f64 so the result is correctly rounded."""
        b = self.b
        if x.type == F64 or getattr(x.type, "element", None) == F64:
            return b.fdiv(const_like(x, 1.0), self.call("llvm.sqrt", [x]))
        wide = b.fpext(x, like(F64, x))
        r = b.fdiv(const_like(wide, 1.0), self.call("llvm.sqrt", [wide]))
        return b.fptrunc(r, x.type)

    def compare(self, pred: str, elem: ScalarType, x: ir.Value, y: ir.Value) -> ir.Value:
        """``x <pred> y`` -> i1; float compares are ordered except ``ne``."""
        op = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[pred]
        b = self.b
        if isinstance(elem, PointerType):
            return b.icmp_unsigned(op, x, y)
        if elem.is_float:
            return b.fcmp_unordered(op, x, y) if pred == "ne" else b.fcmp_ordered(op, x, y)
        if elem.is_signed:
            return b.icmp_signed(op, x, y)
        return b.icmp_unsigned(op, x, y)

    def fma(self, elem: ScalarType, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        """``x * y + z`` rounded once.  f16/bf16 go through f64, not float: a float fma
        rounds, then ``round_to`` rounds again (1.75 * 0.857421875 + 2^-24 in f16).  In f64
        the product is exact and, with 16-bit inputs, the sum's f64 rounding cannot make a
        false tie, so the final rounding is the only one that matters."""
        if elem.name not in ("f16", "bf16"):
            return self.call("llvm.fma", [x, y, z])
        wide = [self.b.fpext(v, like(F64, v)) for v in (x, y, z)]
        return self._narrow_from_f64(elem, self.call("llvm.fma", wide))

    def umulhi(self, elem: ScalarType, x: ir.Value, y: ir.Value) -> ir.Value:
        """High half of the double-width product (signedness from ``elem``)."""
        b = self.b
        wide = like(ir.IntType(2 * elem.bits), x)
        ext = b.sext if elem.is_signed else b.zext
        p = b.mul(ext(x, wide), ext(y, wide))
        return b.trunc(b.lshr(p, const_like(wide, elem.bits)), x.type)

    def select(self, cond: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.select(cond, x, y)

    # -- conversions ---------------------------------------------------------------------------
    def cast(self, src: ScalarType, dst: ScalarType, x: ir.Value) -> ir.Value:
        """Value conversion as ``anytile.ir.ops.CastOp`` defines it (pointers <-> integers
        convert the address)."""
        b = self.b
        if src == dst:
            return x
        if isinstance(src, PointerType) or isinstance(dst, PointerType):
            return self._pointer_cast(src, dst, x)
        dst_t = like(F64 if dst.name == "f64" else F32, x) if dst.is_float else \
            like(ir.IntType(dst.bits), x)
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", x, const_like(x, 0.0))
            return b.icmp_unsigned("!=", x, const_like(x, 0))
        if src.is_bool:
            return b.uitofp(x, dst_t) if dst.is_float else b.zext(x, dst_t)
        if src.is_int and dst.is_int:
            if dst.bits < src.bits:
                return b.trunc(x, dst_t)
            if dst.bits == src.bits:
                return x
            return b.sext(x, dst_t) if src.is_signed else b.zext(x, dst_t)
        if src.is_int:  # int -> float
            conv = b.sitofp if src.is_signed else b.uitofp
            if dst.name in ("f32", "f64"):
                return conv(x, dst_t)
            if src.bits > 32:   # f64 cannot hold every 64-bit integer: round to odd first
                return self._narrow_from_f64(dst, self._int64_to_f64_round_to_odd(src, x))
            return self._narrow_from_f64(dst, conv(x, like(F64, x)))
        if dst.is_int:  # float -> int, truncating and saturating; NaN -> 0
            return self._saturating_float_to_int(dst, x, dst_t)
        if src.name == "f64":
            if dst.name == "f32":
                return b.fptrunc(x, dst_t)
            return self._narrow_from_f64(dst, x)
        if dst.name == "f64":
            return b.fpext(x, dst_t)
        return self.round_to(dst, x)  # among f32/f16/bf16, all held as float

    def _pointer_cast(self, src, dst, x: ir.Value) -> ir.Value:
        b = self.b
        if isinstance(src, PointerType) and isinstance(dst, PointerType):
            return x    # opaque pointers: only the pointee type changes
        if isinstance(src, PointerType):
            return b.ptrtoint(x, like(ir.IntType(dst.bits), x))
        return b.inttoptr(x, like(ir.PointerType(), x))

    def _saturating_float_to_int(self, dst: ScalarType, x: ir.Value, dst_t: ir.Type) -> ir.Value:
        """``llvm.fpto[su]i.sat`` written as clamp + convert + fix-ups: the same result, but
        it stays vectorised where the intrinsic is expanded lane by lane (64-bit targets)."""
        b = self.b
        mantissa = 53 if x.type == F64 or getattr(x.type, "element", None) == F64 else 24
        k = dst.bits - 1 if dst.is_signed else dst.bits
        lo = -float(2 ** k) if dst.is_signed else 0.0
        hi = float(2 ** k - 1) if k <= mantissa else float(2 ** k - 2 ** (k - mantissa))
        clamped = self.call("llvm.minnum", [self.call("llvm.maxnum", [x, const_like(x, lo)]),
                                            const_like(x, hi)])
        r = b.fptosi(clamped, dst_t) if dst.is_signed else b.fptoui(clamped, dst_t)
        top = const_like(dst_t, (1 << k) - 1)
        r = b.select(b.fcmp_ordered(">=", x, const_like(x, float(2 ** k))), top, r)
        return b.select(b.fcmp_unordered("uno", x, x), const_like(dst_t, 0), r)

    def _narrow_from_f64(self, dst: ScalarType, x: ir.Value) -> ir.Value:
        """f64 -> f16/bf16 (held as float) with a single correct rounding."""
        return self.round_to(dst, self._f64_to_f32_round_to_odd(x))

    def bitcast(self, src: ScalarType, dst: ScalarType, x: ir.Value) -> ir.Value:
        """Reinterpret the bits of ``x`` (types of equal width)."""
        b = self.b
        if isinstance(src, PointerType) or isinstance(dst, PointerType):
            return self._pointer_cast(src, dst, x)
        narrow = ("f16", "bf16")
        raw = self.to_storage(src, x) if src.name in narrow or src.is_float8 else x
        if dst.name in narrow or dst.is_float8:
            raw = b.bitcast(raw, like(I16, x)) if src.bits == 16 else raw
            stored = b.bitcast(raw, like(F16, x)) if dst.name == "f16" else raw
            return self.from_storage(dst, stored)
        target = like(F64 if dst.name == "f64" else F32, x) if dst.is_float else \
            like(ir.IntType(dst.bits), x)
        return b.bitcast(raw, target)
