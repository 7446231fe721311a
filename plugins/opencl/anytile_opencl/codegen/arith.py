"""Elementwise ops on chunks, as OpenCL C: the meaning ``anytile.ir.ops`` gives each op, in
expressions that are well-defined C (signed integers wrap through their unsigned twins,
divisions and shifts the IR leaves undefined give the interpreter's values instead of
trapping).

Every method takes and returns ``Chunk``s.  Uniform operands give a uniform result (scalar
code); ramps stay ramps through the index arithmetic (``+ - *`` by constants, ``<<``, casts,
``addptr``), so that contiguous loads and stores are seen as such; anything else becomes a
vector expression kept in a temporary.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from anytile.errors import CompilationError
from anytile.ir import PointerType, ScalarType, bf16, f32, i1

from .chunk import Chunk, Writer, is_int_type, ramp, uniform, vector
from .ctypes import (is_narrow_float, literal, scalar_name, signed_name, size_of, unsigned_name,
                     vector_name)
from .helpers import Helpers

__all__ = ["Arith", "FLOAT_FUNCTIONS"]

#: IR unary math kinds and their OpenCL C builtins (f32 and f64)
FLOAT_FUNCTIONS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
                   "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "floor": "floor",
                   "ceil": "ceil", "erf": "erf", "tanh": "tanh"}
#: vector math whose lanes are computed one by one when one of them is huge (``helpers``)
_LANEWISE_TRIG = ("sin", "cos")
_C_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_C_WRAPPING = {"add": "+", "sub": "-", "mul": "*"}
_C_BITWISE = {"and": "&", "or": "|", "xor": "^"}
#: ``i1`` arithmetic as the interpreter defines it (0/1 chars)
_BOOL_BINARY = {"add": "({a} ^ {b})", "sub": "({a} ^ {b})", "xor": "({a} ^ {b})",
                "mul": "({a} & {b})", "and": "({a} & {b})", "div": "({a} & {b})",
                "min": "({a} & {b})", "or": "({a} | {b})", "max": "({a} | {b})",
                "rem": "({a} ^ {a})", "shl": "({a} & ({b} ^ {one}))",
                "shr": "({a} & ({b} ^ {one}))"}


_MOST = 1 << 30


def _pow2_part(n: int) -> int:
    """The largest power of 2 dividing ``n`` (``_MOST`` for 0)."""
    return min(n & -n, _MOST) if n else _MOST


def _divisor(kind: str, a: Chunk, b: Chunk) -> int:
    """A power of 2 known to divide the integer result (``align``: for vector memory access)."""
    if kind == "mul":
        return min(a.align * b.align, _MOST)
    if kind in ("add", "sub"):
        return min(a.align, b.align)
    if kind == "shl" and b.const is not None and 0 <= b.const < 31:
        return min(a.align << b.const, _MOST)
    return 1


class Arith:
    """Emits elementwise ops into ``w``; 16-bit float conversions come from ``helpers``."""

    def __init__(self, w: Writer, helpers: Helpers) -> None:
        self.w = w
        self.helpers = helpers

    # -- plumbing ------------------------------------------------------------------------------
    def let(self, expr: str, t: Any, lanes: int, prefix: str = "t") -> str:
        """``expr`` kept in a fresh temporary of the register type of ``t``."""
        name = self.w.fresh(prefix)
        self.w.line(f"{vector_name(t, lanes)} {name} = {expr};")
        return name

    def apply(self, args: list[Chunk], out: Any, make: Callable[[list[str], int], str],
              all_true: Optional[Callable[[], Optional[str]]] = None) -> Chunk:
        """``make(operand expressions, lanes)`` over whole chunks: scalar code when every
        operand is uniform, vector code otherwise."""
        lanes = args[0].lanes
        if all(a.is_uniform for a in args):
            return uniform(self.let(make([a.expr for a in args], 1), out, 1), out, lanes)
        expr = make([a.as_vector() for a in args], lanes)
        return vector(self.let(expr, out, lanes), out, lanes, all_true() if all_true else None)

    def to_f32(self, x: str, t: ScalarType, n: int) -> str:
        """A narrow float register (bits) as ``float``."""
        kind = {"f16": "h2f", "bf16": "bf2f"}.get(t.name, f"{t.name}_2f")
        return f"{self.helpers.need(kind, n)}({x})"

    def from_f32(self, x: str, t: ScalarType, n: int) -> str:
        """``float`` rounded once to the narrow float ``t`` (its bits)."""
        kind = {"f16": "f2h", "bf16": "f2bf"}.get(t.name, f"f2_{t.name}")
        return f"{self.helpers.need(kind, n)}({x})"

    def _float_op(self, t: ScalarType, n: int, make: Callable[..., str], *xs: str) -> str:
        """``make`` on f32/f64 operands; on 16-bit floats computed in f32, rounded once."""
        if not is_narrow_float(t):
            return make(*xs)
        return self.from_f32(make(*(self.to_f32(x, t, n) for x in xs)), t, n)

    @staticmethod
    def _wrapping(op: str, t: Any, x: str, y: str, n: int) -> str:
        """``x op y`` wrapping modulo 2^bits (through the unsigned type: no C overflow)."""
        u, v = unsigned_name(t, n), vector_name(t, n)
        signed = isinstance(t, ScalarType) and t.is_signed
        ux, uy = (f"as_{u}({x})", f"as_{u}({y})") if signed else (x, y)
        if n == 1 and size_of(t) < 4:     # narrow scalars promote to int: compute in uint
            expr = f"(({u})((uint)({ux}) {op} (uint)({uy})))"
        else:
            expr = f"(({u})({ux} {op} {uy}))" if n == 1 else f"({ux} {op} {uy})"
        return f"as_{v}({expr})" if signed else expr

    # -- binary --------------------------------------------------------------------------------
    def binary(self, kind: str, a: Chunk, b: Chunk, loc: Any = None) -> Chunk:
        t = a.type
        if is_int_type(t):
            folded = self._ramp_binary(kind, a, b)
            if folded is not None:
                return folded
        if isinstance(t, ScalarType) and t.is_bool:
            template = _BOOL_BINARY[kind]
            one = literal(1, i1)
            return self.apply([a, b], t, lambda x, n: template.format(a=x[0], b=x[1], one=one),
                              lambda: self._and_all(a, b) if kind in ("and", "mul", "min") else None)
        if isinstance(t, ScalarType) and t.is_float:
            return self.apply([a, b], t, lambda x, n: self._float_binary(kind, t, x[0], x[1], n))
        if isinstance(t, PointerType):
            raise CompilationError(f"binary '{kind}' is not defined on pointers", loc)
        out = self.apply([a, b], t, lambda x, n: self._int_binary(kind, t, x[0], x[1], n))
        return out if not out.is_uniform else \
            uniform(out.expr, t, out.lanes, _divisor(kind, a, b))

    @staticmethod
    def _and_all(a: Chunk, b: Chunk) -> Optional[str]:
        conds = []
        for c in (a, b):
            if c.is_uniform:
                conds.append(f"({c.expr})")
            elif c.all_true:
                conds.append(f"({c.all_true})")
            else:
                return None
        return " && ".join(conds)

    def _float_binary(self, kind: str, t: ScalarType, x: str, y: str, n: int) -> str:
        ops = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "fdiv": "({} / {})",
               "rem": "fmod({}, {})", "min": "fmin({}, {})", "max": "fmax({}, {})"}
        if kind == "div":           # floor of the quotient rounded to t
            quotient = self._float_op(t, n, lambda p, q: f"({p} / {q})", x, y)
            return self._float_op(t, n, lambda q: f"floor({q})", quotient)
        if kind not in ops:
            raise CompilationError(f"binary '{kind}' is not defined on {t}")
        if kind in ("min", "max"):
            return self._float_op(t, n, lambda p, q: _min_max(kind, t, n, p, q), x, y)
        return self._float_op(t, n, ops[kind].format, x, y)

    def _int_binary(self, kind: str, t: ScalarType, x: str, y: str, n: int) -> str:
        v = vector_name(t, n)
        if kind in _C_WRAPPING:
            return self._wrapping(_C_WRAPPING[kind], t, x, y, n)
        if kind in _C_BITWISE:
            return f"(({v})({x} {_C_BITWISE[kind]} {y}))" if n == 1 else \
                f"({x} {_C_BITWISE[kind]} {y})"
        if kind in ("min", "max"):
            return f"{kind}({x}, {y})"
        zero, one = literal(0, t), literal(1, t)
        if kind in ("div", "rem"):
            return self._int_divide(kind, t, x, y, n, zero, one)
        if kind in ("shl", "shr"):
            return self._shift(kind, t, x, y, n, zero)
        raise CompilationError(f"binary '{kind}' is not defined on {t}")

    def _int_divide(self, kind: str, t: ScalarType, x: str, y: str, n: int, zero: str,
                    one: str) -> str:
        """C division by a non-zero divisor; by 0 gives 0, ``INT_MIN / -1`` wraps (the
        interpreter's choices), never a trap."""
        op = "/" if kind == "div" else "%"
        v = vector_name(t, n)
        if n == 1:
            if not t.is_signed:
                return f"(({y}) == {zero} ? {zero} : ({v})(({x}) {op} ({y})))"
            minus_one = literal(-1, t)
            special = self._wrapping("-", t, zero, x, 1) if kind == "div" else zero
            return (f"(({y}) == {zero} ? {zero} : (({y}) == {minus_one} ? {special} : "
                    f"({v})(({x}) {op} ({y}))))")
        zeros, ones = f"(({v}){zero})", f"(({v}){one})"
        if not t.is_signed:
            bad = f"(({y}) == {zeros})"
            return f"select(({x}) {op} select({y}, {ones}, {bad}), {zeros}, {bad})"
        minus = f"(({v}){literal(-1, t)})"
        bad = f"((({y}) == {zeros}) | (({y}) == {minus}))"
        quotient = f"(({x}) {op} select({y}, {ones}, {bad}))"
        special = self._wrapping("-", t, zeros, x, n) if kind == "div" else zeros
        return f"select(select({quotient}, {special}, ({y}) == {minus}), {zeros}, ({y}) == {zeros})"

    def _shift(self, kind: str, t: ScalarType, x: str, y: str, n: int, zero: str) -> str:
        """Shifts by amounts in ``[0, bits)``; others give 0 (or the sign fill for an
        arithmetic right shift), as the interpreter does."""
        bits = literal(t.bits, t)
        v = vector_name(t, n)
        if n == 1:
            ok = f"(({y}) < {bits})" if not t.is_signed else f"(({y}) >= {zero} && ({y}) < {bits})"
            if kind == "shl":
                shifted = self._wrapping("<<", t, x, f"({unsigned_name(t)})({y})", 1)
                return f"({ok} ? {shifted} : {zero})"
            if t.is_signed:
                return f"(({v})(({x}) >> ({ok} ? ({y}) : {literal(t.bits - 1, t)})))"
            return f"({ok} ? ({v})(({x}) >> ({y})) : {zero})"
        zeros = f"(({v}){zero})"
        ok = f"(({y}) < (({v}){bits}))" if not t.is_signed else \
            f"((({y}) >= {zeros}) & (({y}) < (({v}){bits})))"
        if kind == "shl":
            u = unsigned_name(t, n)
            shifted = f"as_{v}(as_{u}({x}) << as_{u}({y}))" if t.is_signed else f"(({x}) << ({y}))"
            return f"select({zeros}, {shifted}, {ok})"
        if t.is_signed:
            return f"(({x}) >> select((({v}){literal(t.bits - 1, t)}), {y}, {ok}))"
        return f"select({zeros}, ({x}) >> ({y}), {ok})"

    def _ramp_binary(self, kind: str, a: Chunk, b: Chunk) -> Optional[Chunk]:
        """Index arithmetic that keeps ramps ramps (``None``: not such a case)."""
        if not (a.is_ramp or b.is_ramp) or a.kind == "vector" or b.kind == "vector":
            return None
        t, n = a.type, a.lanes
        base = lambda op, x, y: self.let(self._wrapping(op, t, x, y, 1), t, 1, "i")  # noqa: E731
        if kind in ("add", "sub"):
            sign = 1 if kind == "add" else -1
            step = a.step + sign * b.step
            return ramp(base(_C_WRAPPING[kind], a.expr, b.expr), step, t, n,
                        min(a.align, b.align))
        if kind in ("mul", "shl"):
            r, c = (a, b) if a.is_ramp else (b, a)
            if c.const is None or (kind == "shl" and (r is b or not 0 <= c.const < t.bits)):
                return None
            factor = c.const if kind == "mul" else 1 << c.const
            op = "*" if kind == "mul" else "<<"
            return ramp(base(op, r.expr, c.expr), r.step * factor, t, n,
                        min(r.align * _pow2_part(factor), _MOST))
        return None

    # -- compare, select -----------------------------------------------------------------------
    def compare(self, pred: str, a: Chunk, b: Chunk) -> Chunk:
        t, op = a.type, _C_COMPARE[pred]

        def make(x: list[str], n: int) -> str:
            p, q = x
            if is_narrow_float(t):
                p, q = self.to_f32(p, t, n), self.to_f32(q, t, n)
            expr = f"({p} {op} {q})"
            return f"((char){expr})" if n == 1 else f"convert_{vector_name(i1, n)}(-{expr})"

        def all_true() -> Optional[str]:
            return self._ramp_compare_all(pred, a, b)
        return self.apply([a, b], i1, make, all_true)

    def _ramp_compare_all(self, pred: str, a: Chunk, b: Chunk) -> Optional[str]:
        """``offs < n`` for a ramp ``offs``: every lane holds iff the extreme lane does."""
        if not (a.is_ramp and b.is_uniform and a.step > 0 and pred in ("lt", "le")):
            return None
        span = a.step * (a.lanes - 1)
        signed = isinstance(a.type, ScalarType) and a.type.is_signed
        largest = (1 << (size_of(a.type) * 8 - (1 if signed else 0))) - 1
        last = f"(({a.expr}) + {literal(span, a.type)})"
        return (f"(({a.expr}) <= {literal(largest - span, a.type)} && "
                f"{last} {_C_COMPARE[pred]} ({b.expr}))")

    def select(self, c: Chunk, a: Chunk, b: Chunk) -> Chunk:
        t = a.type
        if c.is_uniform:                 # a scalar condition picks whole vectors
            return self.apply([a, b], t, lambda x, n: f"(({c.expr}) ? ({x[0]}) : ({x[1]}))")

        def make(x: list[str], n: int) -> str:
            mask = signed_name(t, n)
            return f"select({x[1]}, {x[0]}, -convert_{mask}({x[2]}))"
        return self.apply([a, b, c], t, make)

    # -- unary ---------------------------------------------------------------------------------
    def unary(self, kind: str, a: Chunk, loc: Any = None) -> Chunk:
        t = a.type
        if isinstance(t, PointerType):
            raise CompilationError(f"unary '{kind}' is not defined on pointers", loc)
        if kind == "neg" and a.is_ramp:
            return ramp(self.let(self._wrapping("-", t, literal(0, t), a.expr, 1), t, 1, "i"),
                        -a.step, t, a.lanes, a.align)
        return self.apply([a], t, lambda x, n: self._unary_expr(kind, t, x[0], n, loc))

    def _unary_expr(self, kind: str, t: ScalarType, x: str, n: int, loc: Any) -> str:
        v = vector_name(t, n)
        if t.is_bool:
            return {"neg": x, "abs": x, "not": f"({x} ^ {literal(1, t)})"}[kind]
        if t.is_float:
            if is_narrow_float(t) and kind in ("neg", "abs"):   # sign bit of the narrow pattern
                sign = 1 << (t.bits - 1)
                mask = hex(sign) if kind == "neg" else hex(sign - 1)
                return f"({x} {'^' if kind == 'neg' else '&'} (({v}){mask}))"
            if kind == "neg":
                return f"(-{x})"
            if kind == "abs":
                return f"fabs({x})"
            if kind == "tanh":
                return self._float_op(t, n, lambda y: self._tanh(y, t, n), self.let(x, t, n))
            if kind in _LANEWISE_TRIG and n > 1:      # see helpers.TRIG_VECTOR_LIMIT
                helper = self.helpers.need(f"{kind}_{'f64' if t.name == 'f64' else 'f32'}", n)
                return self._float_op(t, n, lambda y: f"{helper}({y})", x)
            if kind in FLOAT_FUNCTIONS:
                return self._float_op(t, n, lambda y: f"{FLOAT_FUNCTIONS[kind]}({y})", x)
            raise CompilationError(f"unary '{kind}' is not defined on {t}", loc)
        if kind == "neg":
            zero = literal(0, t) if n == 1 else f"(({v}){literal(0, t)})"
            return self._wrapping("-", t, zero, x, n)
        if kind == "not":
            return f"(({v})(~{x}))" if n == 1 else f"(~{x})"
        if kind == "abs":
            return f"as_{v}(abs({x}))" if t.is_signed else x
        raise CompilationError(f"unary '{kind}' is not defined on {t}", loc)

    @staticmethod
    def _tanh(y: str, t: ScalarType, n: int) -> str:
        """``tanh(y)``, exactly +-1 where that is the correctly rounded result (|y| > 9.1 in
        f32, 19.1 in f64): OpenCL lets ``tanh`` be a few ulp off, and PoCL's gives
        -0.99999994 for -10769, which ``1 - tanh(y)**2`` (GELU's gradient) turns from 0 into
        1.2e-7 times whatever multiplies it."""
        wide = t.name == "f64"
        v = vector_name(t if wide else f32, n)
        limit = "19.1" if wide else "9.1f"
        return f"select(tanh({y}), copysign(({v})1, {y}), isgreater(fabs({y}), ({v}){limit}))"

    # -- fma, umulhi, bitcast, addptr -------------------------------------------------------------
    def fma(self, a: Chunk, b: Chunk, c: Chunk) -> Chunk:
        t = a.type

        def make(x: list[str], n: int) -> str:
            if not is_narrow_float(t):
                return f"fma({x[0]}, {x[1]}, {x[2]})"
            wide = [self.to_f32(y, t, n) for y in x]     # exact products, rounded to odd
            return self.from_f32(f"{self.helpers.need('rto_fma', n)}({', '.join(wide)})", t, n)
        return self.apply([a, b, c], t, make)

    def umulhi(self, a: Chunk, b: Chunk) -> Chunk:
        return self.apply([a, b], a.type, lambda x, n: f"mul_hi({x[0]}, {x[1]})")

    def bitcast(self, a: Chunk, out: Any) -> Chunk:
        if scalar_name(out) == scalar_name(a.type):
            return Chunk(a.kind, a.expr, out, a.lanes, a.step, a.align, a.const, a.all_true)
        return self.apply([a], out, lambda x, n: f"as_{vector_name(out, n)}({x[0]})")

    def addptr(self, p: Chunk, off: Chunk) -> Chunk:
        """``p + off`` elements: addresses in bytes, ramps kept (step = bytes per lane);
        ``align`` is a power of 2 known to divide the address."""
        size = size_of(p.type.pointee)
        signed = off.type.is_signed
        align = min(p.align, off.align * size)
        if not p.kind == "vector" and not off.kind == "vector":
            wide = f"(ulong)((long)({off.expr}) * {size}L)" if signed else \
                f"((ulong)({off.expr}) * {size}UL)"
            base = self.let(f"{p.expr} + {wide}", p.type, 1, "a")
            return ramp(base, p.step + off.step * size, p.type, p.lanes, align)

        def make(x: list[str], n: int) -> str:
            if signed:
                wide = f"as_{vector_name(p.type, n)}(convert_{signed_name(p.type, n)}({x[1]}) * {size}L)"
            else:
                wide = f"(convert_{vector_name(p.type, n)}({x[1]}) * {size}UL)"
            return f"({x[0]} + {wide})"
        return self.apply([p, off], p.type, make)

    # -- casts ---------------------------------------------------------------------------------
    def cast(self, a: Chunk, out: Any) -> Chunk:
        src = a.type
        if src == out:
            return a
        if not a.kind == "vector" and is_int_type(src) and is_int_type(out):
            base = self.let(self._cast_expr(a.expr, src, out, 1), out, 1, "i")
            return Chunk(a.kind, base, out, a.lanes, a.step, a.align)
        return self.apply([a], out, lambda x, n: self._cast_expr(x[0], src, out, n))

    def _cast_expr(self, x: str, src: Any, dst: Any, n: int) -> str:
        d = vector_name(dst, n)
        if isinstance(src, PointerType) or isinstance(dst, PointerType):
            return self._int_cast(x, src, dst, n)
        if dst.is_bool:
            if is_narrow_float(src):
                x, src = self.to_f32(x, src, n), f32
            zero = f"(({vector_name(src, n)}){literal(0, src)})"
            return f"((char)(({x}) != {literal(0, src)}))" if n == 1 else \
                f"convert_{d}(-(({x}) != {zero}))"
        if src.is_bool:
            if dst.is_float:
                as_float = f"convert_{vector_name(f32, n)}({x})"
                return self.from_f32(as_float, dst, n) if is_narrow_float(dst) else \
                    f"convert_{d}({x})"
            return f"convert_{d}({x})"
        if src.is_int and dst.is_int:
            return self._int_cast(x, src, dst, n)
        if src.is_int:
            return self._int_to_float(x, src, dst, n)
        if dst.is_int:
            # NaN -> 0 is what OpenCL's saturating conversion promises, but NVIDIA's driver
            # gives the most negative integer: make the NaNs zeros first
            wide_t = f32 if is_narrow_float(src) else src
            wide = self.to_f32(x, src, n) if is_narrow_float(src) else x
            zero = f"(({vector_name(wide_t, n)}){literal(0, wide_t)})"
            if n == 1:      # (a scalar double's isnan is an int: select would not match)
                return f"convert_{d}_sat_rtz(isnan({wide}) ? {zero} : ({wide}))"
            return f"convert_{d}_sat_rtz(select({wide}, {zero}, isnan({wide})))"
        return self._float_to_float(x, src, dst, n)

    @staticmethod
    def _int_cast(x: str, src: Any, dst: Any, n: int) -> str:
        """Truncate, or extend by the source's signedness (C's rules, through unsigned)."""
        d = vector_name(dst, n)
        if size_of(dst) <= size_of(src):          # truncation: modulo 2^bits, then reinterpret
            ud = unsigned_name(dst, n)
            us = f"as_{unsigned_name(src, n)}({x})"
            narrowed = f"convert_{ud}({us})" if size_of(dst) < size_of(src) else us
            return f"as_{d}({narrowed})"
        return f"convert_{d}({x})"

    def _int_to_float(self, x: str, src: ScalarType, dst: ScalarType, n: int) -> str:
        d = vector_name(dst, n)
        if dst.name == "f64":
            self.helpers.require_fp64()
            return f"convert_{d}_rte({x})"
        if dst.name == "f32":
            return f"convert_{d}_rte({x})"
        if dst == bf16 and src.bits >= 32:          # round to odd in f32, then once to bf16
            kind = "rto_i2f_" + scalar_name(src)
            return self.from_f32(f"{self.helpers.need(kind, n)}({x})", dst, n)
        return self.from_f32(f"convert_{vector_name(f32, n)}_rte({x})", dst, n)

    def _float_to_float(self, x: str, src: ScalarType, dst: ScalarType, n: int) -> str:
        d = vector_name(dst, n)
        if src.name == "f64" or dst.name == "f64":
            self.helpers.require_fp64()
        if src.name == "f64":
            if dst.name == "f32":
                return f"convert_{d}_rte({x})"
            if dst.name == "f16":
                return f"{self.helpers.need('d2h', n)}({x})"
            return self.from_f32(f"{self.helpers.need('rto_d2f', n)}({x})", dst, n)
        wide = self.to_f32(x, src, n) if is_narrow_float(src) else x
        if dst.name == "f64":
            return f"convert_{d}({wide})"
        return wide if dst.name == "f32" else self.from_f32(wide, dst, n)


def _min_max(kind: str, t: ScalarType, n: int, x: str, y: str) -> str:
    """IEEE 754-2019 minimumNumber/maximumNumber on f32/f64 operands (16-bit floats arrive in
    f32): a NaN gives the other operand, and -0 orders below +0. OpenCL's fmin and fmax leave
    the sign of a zero result open, so equal operands (only +0 and -0 differ then) combine
    their bits: OR keeps a -0 for min, AND keeps a +0 for max."""
    suffix = "" if n == 1 else str(n)
    real, bits = ("double", "ulong") if t.bits == 64 else ("float", "uint")
    tie = "|" if kind == "min" else "&"
    picked = f"f{kind}({x}, {y})"
    joined = f"as_{real}{suffix}(as_{bits}{suffix}({x}) {tie} as_{bits}{suffix}({y}))"
    if n == 1:      # a scalar comparison is an int, which select takes for no double
        return f"((({x}) == ({y})) ? {joined} : {picked})"
    return f"select({picked}, {joined}, ({x}) == ({y}))"

