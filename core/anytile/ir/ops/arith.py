"""Elementwise arithmetic: binary, compare, unary, fma, umulhi, select, cast, bitcast, hint."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..nodes import TRAIT_COMMUTATIVE, TRAIT_ELEMENTWISE, TRAIT_PURE, Op, Value
from ..kinds import BinaryKind, ComparePredicate, UnaryKind
from ..rules import (bit_width, bool_like, expect, expect_type, is_float, is_int, is_ptr,
                     same_type)
from ..types import ScalarType, Type, elem_type, i1, shape_of, with_shape
from .tiles import PURE

__all__ = ["BinaryOp", "CompareOp", "UnaryOp", "FmaOp", "UMulHiOp", "SelectOp", "CastOp",
           "BitcastOp", "HintOp", "PURE_EW"]

PURE_EW = frozenset({TRAIT_PURE, TRAIT_ELEMENTWISE})


def _operands_agree(*values: Value) -> None:
    types = [v.type for v in values]
    expect(all(same_type(t, types[0]) for t in types),
           f"operand types differ: {' vs '.join(str(t) for t in types)}"
           if len(types) == 2 else f"operand types differ: {', '.join(str(t) for t in types)}")


@dataclass(eq=False)
class BinaryOp(Op):
    """Elementwise ``lhs <kind> rhs``; both operands and the result have one type.

    add sub mul: wrapping for integers, IEEE for floats.  fdiv: float division.
    div: integer division truncating toward zero (C; undefined for a zero divisor);
    on floats it is ``floor(lhs / rhs)``.  rem: integer remainder with the sign of ``lhs``
    (C ``%``), float remainder ``fmod``.  and or xor: bitwise (logical on ``i1``).
    shl shr: shift by ``rhs`` (undefined when ``rhs`` is negative or >= the bit width); shr is
    arithmetic for signed, logical for unsigned types.  min max: for floats, if exactly one
    operand is NaN the other is returned (IEEE minNum/maxNum), and for two zeros of opposite
    sign either may be returned (as LLVM ``minnum``, C ``fmin``); for integers by signedness.

    ``strict``: every rounding is part of the arithmetic (the math library's formulas,
    error-free transformations): never fused into a fused multiply-add.  Otherwise a float
    add, sub or mul may be fused with a neighbouring multiply or add where the kernel is
    compiled with ``enable_fp_fusion`` (Triton's option, on by default).
    """

    NAME = "binary"
    OPERANDS = ("lhs", "rhs")
    ATTRS = ("kind", "strict")
    TRAITS = PURE_EW
    ENUM_ATTRS = {"kind": BinaryKind}
    kind: BinaryKind
    lhs: Value
    rhs: Value
    strict: bool = False

    def infer_types(self) -> list[Type]:
        return [self.lhs.type]

    @property
    def is_commutative(self) -> bool:
        return BinaryKind.parse(self.kind).is_commutative

    def verify(self) -> None:
        kind = BinaryKind.parse(self.kind)
        _operands_agree(self.lhs, self.rhs)
        t = self.lhs.type
        expect(not is_ptr(t), f"binary {kind} on pointers ({t}); use addptr")
        if kind == BinaryKind.FDIV:
            expect(is_float(t), f"fdiv needs floats, found {t}")
        if kind.integers_only:
            expect(is_int(t), f"{kind} needs integers, found {t}")


@dataclass(eq=False)
class CompareOp(Op):
    """Elementwise comparison -> ``i1`` of the operands' shape.  Signed, unsigned or float by
    the operand type; float comparisons are ordered except ``ne`` (true when either is NaN)."""

    NAME = "compare"
    OPERANDS = ("lhs", "rhs")
    ATTRS = ("pred",)
    TRAITS = PURE_EW
    ENUM_ATTRS = {"pred": ComparePredicate}
    pred: ComparePredicate
    lhs: Value
    rhs: Value

    def infer_types(self) -> list[Type]:
        return [with_shape(i1, shape_of(self.lhs.type))]

    def verify(self) -> None:
        _operands_agree(self.lhs, self.rhs)


@dataclass(eq=False)
class UnaryOp(Op):
    """Elementwise ``kind(src)``.  neg: negation (wrapping for integers).  not: bitwise not
    (logical on ``i1``).  abs: absolute value (wrapping: abs(INT_MIN) == INT_MIN).
    The rest are float-only math functions, accurate to the conformance suite's ULP table:
    exp exp2 log log2 sqrt rsqrt sin cos floor ceil erf tanh -- except that where ``strict``
    is off a backend may use a faster form that flushes single-precision denormal results to
    zero (NVIDIA's f32 exp2, as Triton's); ``strict`` (the math library's formulas, which
    build powers of two from exp2) keeps them."""

    NAME = "unary"
    OPERANDS = ("src",)
    ATTRS = ("kind", "strict")
    TRAITS = PURE_EW
    ENUM_ATTRS = {"kind": UnaryKind}
    kind: UnaryKind
    src: Value
    strict: bool = False

    def infer_types(self) -> list[Type]:
        return [self.src.type]

    def verify(self) -> None:
        kind = UnaryKind.parse(self.kind)
        t = self.src.type
        expect(not is_ptr(t), f"unary {kind} on pointers ({t})")
        if kind.floats_only:
            expect(is_float(t), f"{kind} needs a float operand, found {t}")
        if kind == UnaryKind.NOT:
            expect(is_int(t), f"not needs an integer operand, found {t}")


@dataclass(eq=False)
class FmaOp(Op):
    """Elementwise ``a * b + c`` with one rounding (floats only)."""

    NAME = "fma"
    OPERANDS = ("a", "b", "c")
    TRAITS = PURE_EW
    a: Value
    b: Value
    c: Value

    def infer_types(self) -> list[Type]:
        return [self.a.type]

    def verify(self) -> None:
        _operands_agree(self.a, self.b, self.c)
        expect(is_float(self.a.type), f"fma needs floats, found {self.a.type}")


@dataclass(eq=False)
class UMulHiOp(Op):
    """Elementwise high half of the double-width product of two integers (signedness from
    the type)."""

    NAME = "umulhi"
    OPERANDS = ("lhs", "rhs")
    TRAITS = frozenset({TRAIT_PURE, TRAIT_ELEMENTWISE, TRAIT_COMMUTATIVE})
    lhs: Value
    rhs: Value

    def infer_types(self) -> list[Type]:
        return [self.lhs.type]

    def verify(self) -> None:
        _operands_agree(self.lhs, self.rhs)
        expect(is_int(self.lhs.type), f"umulhi needs integers, found {self.lhs.type}")


@dataclass(eq=False)
class SelectOp(Op):
    """Elementwise ``cond ? true_value : false_value``; ``cond`` is ``i1`` of the same shape."""

    NAME = "select"
    OPERANDS = ("cond", "true_value", "false_value")
    TRAITS = PURE_EW
    cond: Value
    true_value: Value
    false_value: Value

    def infer_types(self) -> list[Type]:
        return [self.true_value.type]

    def verify(self) -> None:
        tv, fv = self.true_value.type, self.false_value.type
        expect(same_type(tv, fv), f"true and false values differ: {tv} vs {fv}")
        expect_type(self.cond.type, bool_like(tv), "select condition")


@dataclass(eq=False)
class CastOp(Op):
    """Elementwise value conversion to the (explicit) result element type, same shape.

    int -> int: truncate, or extend by the *source* signedness.  to ``i1``: ``src != 0``.
    float -> float: round to nearest even.  int -> float: round to nearest even.
    float -> int: truncate toward zero, saturating to the target range; NaN gives 0.
    ``i1`` -> anything: 0 or 1."""

    NAME = "cast"
    OPERANDS = ("src",)
    TRAITS = PURE_EW
    src: Value

    def verify(self) -> None:
        src, res = self.src.type, self.result.type
        expect(shape_of(src) == shape_of(res), f"cast changes shape {src} -> {res}")
        expect(isinstance(elem_type(src), ScalarType) == isinstance(elem_type(res), ScalarType),
               f"cast between a pointer and a number ({src} -> {res}); use bitcast")


@dataclass(eq=False)
class BitcastOp(Op):
    """Elementwise reinterpretation of the bits as the (explicit) result type of equal width."""

    NAME = "bitcast"
    OPERANDS = ("src",)
    TRAITS = PURE_EW
    src: Value

    def verify(self) -> None:
        src, res = self.src.type, self.result.type
        expect(shape_of(src) == shape_of(res), f"bitcast changes shape {src} -> {res}")
        expect(bit_width(elem_type(src)) == bit_width(elem_type(res)),
               f"bitcast changes bit width {src} -> {res}")


@dataclass(eq=False)
class HintOp(Op):
    """``src`` unchanged, with facts a backend may rely on: ``multiple_of[d]`` divides every
    element (per dimension) and ``max_contiguous[d]`` elements along ``d`` are consecutive."""

    NAME = "hint"
    OPERANDS = ("src",)
    ATTRS = ("multiple_of", "max_contiguous")
    TRAITS = PURE
    src: Value
    multiple_of: Optional[tuple] = None
    max_contiguous: Optional[tuple] = None

    def infer_types(self) -> list[Type]:
        return [self.src.type]

    def verify(self) -> None:
        for name in ("multiple_of", "max_contiguous"):
            v = getattr(self, name)
            expect(v is None or (isinstance(v, tuple) and all(isinstance(x, int) and x > 0
                                                              for x in v)),
                   f"{name} must be None or a tuple of positive ints, found {v!r}")
