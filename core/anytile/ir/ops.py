"""The ops of anytile's tile IR and what each one means.

Each op computes on whole tiles of one *program* (one element of the launch grid); nothing
here knows about threads, lanes or registers.  The reference interpreter
(``anytile.interpreter``) is the executable definition of these docstrings.

Conventions shared by all ops:

* Operands of an elementwise op have the same type (the frontend inserts casts and
  broadcasts); scalar operands are scalar types, not 1-element tiles.
* Integer arithmetic wraps modulo 2^bits.  Signedness comes from the type (``i*`` vs ``u*``).
* Float arithmetic is IEEE-754 round-to-nearest-even in the operand type; ``f16``/``bf16``
  may be computed in ``f32`` and rounded once per op.
* ``i1`` is a boolean: 0 or 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .core import (TRAIT_COMMUTATIVE, TRAIT_CONTROL, TRAIT_ELEMENTWISE, TRAIT_MEMORY,
                   TRAIT_PURE, TRAIT_SIDE_EFFECT, TRAIT_TERMINATOR, Block, Op, Value)
from .types import PointerType, ScalarType, TileType, Type, elem_type, i1, i32, shape_of, with_shape

PURE = frozenset({TRAIT_PURE})
PURE_EW = frozenset({TRAIT_PURE, TRAIT_ELEMENTWISE})

BINARY_KINDS = ("add", "sub", "mul", "fdiv", "div", "rem", "and", "or", "xor", "shl", "shr",
                "min", "max")
COMMUTATIVE_BINARY = frozenset({"add", "mul", "and", "or", "xor", "min", "max"})
UNARY_KINDS = ("neg", "not", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos",
               "floor", "ceil", "erf", "tanh")
FLOAT_ONLY_UNARY = frozenset({"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos",
                              "floor", "ceil", "erf", "tanh"})
COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
ATOMIC_KINDS = ("add", "max", "min", "xchg", "and", "or", "xor")


# ---------------------------------------------------------------------------------------------
# Constants and program ids
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class ConstantOp(Op):
    """A constant scalar, or a tile with every element equal to ``value``.

    ``value`` is a Python ``int`` (integers; ``i1`` uses 0/1) or ``float`` (floats, rounded
    to the result type).  The result type is given explicitly."""

    NAME = "constant"
    ATTRS = ("value",)
    TRAITS = PURE
    value: object


@dataclass(eq=False)
class ProgramIdOp(Op):
    """The index of this program along grid axis ``axis`` (0, 1 or 2), as ``i32``."""

    NAME = "program_id"
    ATTRS = ("axis",)
    TRAITS = PURE
    axis: int

    def infer_types(self) -> list[Type]:
        return [i32]


@dataclass(eq=False)
class NumProgramsOp(Op):
    """The grid's size along axis ``axis``, as ``i32``."""

    NAME = "num_programs"
    ATTRS = ("axis",)
    TRAITS = PURE
    axis: int

    def infer_types(self) -> list[Type]:
        return [i32]


@dataclass(eq=False)
class ArangeOp(Op):
    """The 1-D ``i32`` tile ``[start, start+1, ..., end-1]``; ``end - start`` is a power of 2."""

    NAME = "arange"
    ATTRS = ("start", "end")
    TRAITS = PURE
    start: int
    end: int

    def infer_types(self) -> list[Type]:
        return [TileType((self.end - self.start,), i32)]


# ---------------------------------------------------------------------------------------------
# Shape ops (row-major element order throughout)
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class SplatOp(Op):
    """A tile of the (explicit) result shape whose every element is the scalar ``src``."""

    NAME = "splat"
    OPERANDS = ("src",)
    TRAITS = PURE
    src: Value


@dataclass(eq=False)
class BroadcastOp(Op):
    """``src`` (a tile of the same rank) repeated along every dimension where its size is 1
    and the (explicit) result's is larger."""

    NAME = "broadcast"
    OPERANDS = ("src",)
    TRAITS = PURE
    src: Value


@dataclass(eq=False)
class ExpandDimsOp(Op):
    """``src`` with a new dimension of size 1 inserted at ``axis`` (a scalar becomes a
    1-element tile)."""

    NAME = "expand_dims"
    OPERANDS = ("src",)
    ATTRS = ("axis",)
    TRAITS = PURE
    src: Value
    axis: int

    def infer_types(self) -> list[Type]:
        shape = list(shape_of(self.src.type))
        shape.insert(self.axis, 1)
        return [TileType(tuple(shape), elem_type(self.src.type))]


@dataclass(eq=False)
class ReshapeOp(Op):
    """``src``'s elements in row-major order, viewed with the (explicit) result shape of the
    same number of elements."""

    NAME = "reshape"
    OPERANDS = ("src",)
    TRAITS = PURE
    src: Value


@dataclass(eq=False)
class PermuteOp(Op):
    """``src`` with its dimensions reordered: result dim ``i`` is source dim ``order[i]``."""

    NAME = "permute"
    OPERANDS = ("src",)
    ATTRS = ("order",)
    TRAITS = PURE
    src: Value
    order: tuple

    def infer_types(self) -> list[Type]:
        shape = shape_of(self.src.type)
        return [TileType(tuple(shape[i] for i in self.order), elem_type(self.src.type))]


# ---------------------------------------------------------------------------------------------
# Elementwise arithmetic
# ---------------------------------------------------------------------------------------------
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
    """

    NAME = "binary"
    OPERANDS = ("lhs", "rhs")
    ATTRS = ("kind",)
    TRAITS = PURE_EW
    kind: str
    lhs: Value
    rhs: Value

    def infer_types(self) -> list[Type]:
        return [self.lhs.type]

    @property
    def is_commutative(self) -> bool:
        return self.kind in COMMUTATIVE_BINARY


@dataclass(eq=False)
class CompareOp(Op):
    """Elementwise comparison -> ``i1`` of the operands' shape.  Signed, unsigned or float by
    the operand type; float comparisons are ordered except ``ne`` (true when either is NaN)."""

    NAME = "compare"
    OPERANDS = ("lhs", "rhs")
    ATTRS = ("pred",)
    TRAITS = PURE_EW
    pred: str
    lhs: Value
    rhs: Value

    def infer_types(self) -> list[Type]:
        return [with_shape(i1, shape_of(self.lhs.type))]


@dataclass(eq=False)
class UnaryOp(Op):
    """Elementwise ``kind(src)``.  neg: negation (wrapping for integers).  not: bitwise not
    (logical on ``i1``).  abs: absolute value (wrapping: abs(INT_MIN) == INT_MIN).
    The rest are float-only math functions, accurate to the conformance suite's ULP table:
    exp exp2 log log2 sqrt rsqrt sin cos floor ceil erf tanh."""

    NAME = "unary"
    OPERANDS = ("src",)
    ATTRS = ("kind",)
    TRAITS = PURE_EW
    kind: str
    src: Value

    def infer_types(self) -> list[Type]:
        return [self.src.type]


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


@dataclass(eq=False)
class BitcastOp(Op):
    """Elementwise reinterpretation of the bits as the (explicit) result type of equal width."""

    NAME = "bitcast"
    OPERANDS = ("src",)
    TRAITS = PURE_EW
    src: Value


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


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class AddPtrOp(Op):
    """Elementwise ``ptr + offset`` where ``offset`` (an integer of the same shape) counts
    elements of the pointee type."""

    NAME = "addptr"
    OPERANDS = ("ptr", "offset")
    TRAITS = PURE_EW
    ptr: Value
    offset: Value

    def infer_types(self) -> list[Type]:
        return [self.ptr.type]


@dataclass(eq=False)
class LoadOp(Op):
    """Read one element per pointer.  Where ``mask`` is 0 nothing is read and the result is
    ``other`` (a value of the result type), or unspecified when ``other`` is absent.  A read
    of an address outside every allocation where the mask is 1 is an error."""

    NAME = "load"
    OPERANDS = ("ptr", "mask", "other")
    ATTRS = ("volatile",)
    TRAITS = frozenset({TRAIT_MEMORY})
    ptr: Value
    mask: Optional[Value] = None
    other: Optional[Value] = None
    volatile: bool = False

    def infer_types(self) -> list[Type]:
        t = self.ptr.type
        return [with_shape(elem_type(t).pointee, shape_of(t))]


@dataclass(eq=False)
class StoreOp(Op):
    """Write ``value`` through ``ptr`` where ``mask`` is 1 (everywhere when absent).  When two
    elements of one store hit one address, one of them wins."""

    NAME = "store"
    OPERANDS = ("ptr", "value", "mask")
    TRAITS = frozenset({TRAIT_MEMORY, TRAIT_SIDE_EFFECT})
    ptr: Value
    value: Value
    mask: Optional[Value] = None


@dataclass(eq=False)
class AtomicRMWOp(Op):
    """Atomically ``*ptr = kind(*ptr, value)`` per element where ``mask`` is 1; the result is
    the old contents (unspecified where masked off).  kinds: add max min xchg and or xor;
    float add/max/min are allowed.  ``sem``: relaxed | acquire | release | acq_rel;
    ``scope``: gpu | cta | sys."""

    NAME = "atomic_rmw"
    OPERANDS = ("ptr", "value", "mask")
    ATTRS = ("kind", "sem", "scope")
    TRAITS = frozenset({TRAIT_MEMORY, TRAIT_SIDE_EFFECT})
    kind: str
    ptr: Value
    value: Value
    mask: Optional[Value] = None
    sem: str = "acq_rel"
    scope: str = "gpu"

    def infer_types(self) -> list[Type]:
        return [self.value.type]


@dataclass(eq=False)
class AtomicCASOp(Op):
    """Atomically, per element: ``old = *ptr; if old == cmp: *ptr = value``; result ``old``."""

    NAME = "atomic_cas"
    OPERANDS = ("ptr", "cmp", "value")
    ATTRS = ("sem", "scope")
    TRAITS = frozenset({TRAIT_MEMORY, TRAIT_SIDE_EFFECT})
    ptr: Value
    cmp: Value
    value: Value
    sem: str = "acq_rel"
    scope: str = "gpu"

    def infer_types(self) -> list[Type]:
        return [self.value.type]


# ---------------------------------------------------------------------------------------------
# Reductions, scans, dot
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class ReduceOp(Op):
    """Reduce the tiles ``srcs`` (one shape) along ``axis`` with ``combine``.

    ``combine`` has 2n scalar arguments ``(lhs_0..lhs_n-1, rhs_0..rhs_n-1)`` and yields n
    scalars; it must be associative.  Result ``i`` is ``srcs[i]`` with ``axis`` removed (a
    scalar when the tile was 1-D).  The order in which elements are combined is unspecified;
    for non-commutative combines the elements are combined in index order."""

    NAME = "reduce"
    OPERANDS = ("srcs",)
    ATTRS = ("axis",)
    REGIONS = ("combine",)
    TRAITS = frozenset({TRAIT_PURE, TRAIT_CONTROL})
    srcs: list
    axis: int
    combine: Block = field(default_factory=Block)

    def infer_types(self) -> list[Type]:
        out = []
        for s in self.srcs:
            shape = list(shape_of(s.type))
            del shape[self.axis]
            out.append(with_shape(elem_type(s.type), tuple(shape)))
        return out


@dataclass(eq=False)
class ScanOp(Op):
    """Inclusive scan of ``srcs`` along ``axis`` with ``combine`` (as in ``reduce``);
    from the last element backwards when ``reverse``.  Results have the sources' types."""

    NAME = "scan"
    OPERANDS = ("srcs",)
    ATTRS = ("axis", "reverse")
    REGIONS = ("combine",)
    TRAITS = frozenset({TRAIT_PURE, TRAIT_CONTROL})
    srcs: list
    axis: int
    reverse: bool = False
    combine: Block = field(default_factory=Block)

    def infer_types(self) -> list[Type]:
        return [s.type for s in self.srcs]


@dataclass(eq=False)
class DotOp(Op):
    """``acc + a @ b`` for ``a: MxK``, ``b: KxN``, ``acc: MxN``; the result has ``acc``'s type.

    Products are summed in the accumulator's type.  ``input_precision`` for f32 inputs:
    ``ieee`` (exact f32 products), ``tf32`` (inputs may be rounded to tf32) or ``tf32x3``."""

    NAME = "dot"
    OPERANDS = ("a", "b", "acc")
    ATTRS = ("input_precision",)
    TRAITS = PURE
    a: Value
    b: Value
    acc: Value
    input_precision: str = "ieee"

    def infer_types(self) -> list[Type]:
        return [self.acc.type]


# ---------------------------------------------------------------------------------------------
# Structured control flow and calls
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class YieldOp(Op):
    """Ends the region of a ``for``, ``if``, ``while`` (after), ``reduce`` or ``scan`` and
    hands ``values`` to the parent op."""

    NAME = "yield"
    OPERANDS = ("values",)
    TRAITS = frozenset({TRAIT_TERMINATOR})
    values: list = field(default_factory=list)


@dataclass(eq=False)
class ConditionOp(Op):
    """Ends the ``before`` region of a ``while``: continue with ``values`` in ``after`` when
    ``cond`` is 1, else leave the loop with ``values`` as its results."""

    NAME = "condition"
    OPERANDS = ("cond", "values")
    TRAITS = frozenset({TRAIT_TERMINATOR})
    cond: Value
    values: list = field(default_factory=list)


@dataclass(eq=False)
class ReturnOp(Op):
    """Ends a called function's body with its return values."""

    NAME = "return"
    OPERANDS = ("values",)
    TRAITS = frozenset({TRAIT_TERMINATOR})
    values: list = field(default_factory=list)


@dataclass(eq=False)
class ForOp(Op):
    """``for iv = lower; iv < upper; iv += step`` (signed compare, ``step`` > 0), with
    loop-carried values.  ``body`` has arguments ``(iv, *iter_args)`` and yields the next
    iter_args; the results are the last ones (``inits`` if the loop runs zero times).
    ``lower``, ``upper``, ``step`` are scalars of one integer type, which is ``iv``'s."""

    NAME = "for"
    OPERANDS = ("lower", "upper", "step", "inits")
    ATTRS = ("num_stages",)
    REGIONS = ("body",)
    TRAITS = frozenset({TRAIT_CONTROL})
    lower: Value
    upper: Value
    step: Value
    inits: list
    body: Block = field(default_factory=Block)
    num_stages: Optional[int] = None

    def infer_types(self) -> list[Type]:
        return [v.type for v in self.inits]


@dataclass(eq=False)
class IfOp(Op):
    """Runs ``then_body`` when the scalar ``i1`` ``cond`` is 1, else ``else_body``; each
    yields values of the (explicit) result types."""

    NAME = "if"
    OPERANDS = ("cond",)
    REGIONS = ("then_body", "else_body")
    TRAITS = frozenset({TRAIT_CONTROL})
    cond: Value
    then_body: Block = field(default_factory=Block)
    else_body: Block = field(default_factory=Block)

    def infer_types(self) -> list[Type]:
        return []


@dataclass(eq=False)
class WhileOp(Op):
    """A while loop over loop-carried values, starting from ``inits``.  ``before`` takes the
    values and ends with ``condition``; ``after`` takes the values that condition passes on
    and yields the next values for ``before``.  Results: the values of the final condition."""

    NAME = "while"
    OPERANDS = ("inits",)
    REGIONS = ("before", "after")
    TRAITS = frozenset({TRAIT_CONTROL})
    inits: list
    before: Block = field(default_factory=Block)
    after: Block = field(default_factory=Block)

    def infer_types(self) -> list[Type]:
        return [v.type for v in self.inits]


@dataclass(eq=False)
class CallOp(Op):
    """Call the module's function ``callee`` with ``args``; results of the explicit types."""

    NAME = "call"
    OPERANDS = ("args",)
    ATTRS = ("callee",)
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    callee: str
    args: list

    def infer_types(self) -> list[Type]:
        raise TypeError("call needs explicit result_types")


@dataclass(eq=False)
class AssertOp(Op):
    """``device_assert``: fail the launch with ``message`` (and this op's location) if any
    element of the ``i1`` ``cond`` is 0."""

    NAME = "assert"
    OPERANDS = ("cond",)
    ATTRS = ("message",)
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    cond: Value
    message: str = ""


@dataclass(eq=False)
class BarrierOp(Op):
    """``tl.debug_barrier``: all memory operations of the program issued before it are
    complete before any after it starts."""

    NAME = "barrier"
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})


def is_float_type(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_float


def is_pointer_type(t: Type) -> bool:
    return isinstance(elem_type(t), PointerType)
