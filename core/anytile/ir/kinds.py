"""The enumerations of the tile IR: op traits, op kinds and predicates, memory orderings.

Every enumeration is a ``str`` enum whose members *are* their text (``BinaryKind.ADD ==
"add"``, same hash, ``str()`` and ``format()`` give ``"add"``), so the IR's text form is the
members' values, code may compare a kind with a plain string, and tables keyed by the strings
find the members.  Ops normalise a plain string to the member when built and reject unknown
ones (``parse``).
"""
from __future__ import annotations

import enum
import re
from typing import Any

__all__ = ["IREnum", "Trait", "BinaryKind", "UnaryKind", "ComparePredicate", "AtomicKind",
           "MemorySemantics", "MemoryScope", "InputPrecision"]


class IREnum(str, enum.Enum):
    """Base of the IR's enumerations: a member is the string it prints as."""

    # the member must stand for its string everywhere, on Python 3.10 as on 3.12
    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    @classmethod
    def describe(cls) -> str:
        """What a value of this enumeration is, in words (``BinaryKind`` -> 'binary kind')."""
        return re.sub(r"(?<!^)(?=[A-Z])", " ", cls.__name__).lower()

    @classmethod
    def parse(cls, value: Any) -> "IREnum":
        """The member equal to ``value`` (a member or its string); ``ValueError`` naming the
        allowed values otherwise."""
        member = cls._value2member_map_.get(value) if isinstance(value, str) else None
        if member is None:
            allowed = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown {cls.describe()} {value!r} (expected one of: {allowed})")
        return member


class Trait(IREnum):
    """What kind of op an op is; generic passes read these instead of op names."""

    PURE = "pure"                  # no side effect: may be folded, CSE'd, deleted when unused
    COMMUTATIVE = "commutative"    # operands 0 and 1 may be swapped
    ELEMENTWISE = "elementwise"    # result[i] depends only on operands[i] (same shape)
    TERMINATOR = "terminator"      # last op of a block
    MEMORY = "memory"              # reads or writes global memory
    SIDE_EFFECT = "side_effect"    # must be kept and kept in order
    CONTROL = "control"            # owns regions that run under control flow


class BinaryKind(IREnum):
    """The operation of a ``binary`` op (see ``BinaryOp``)."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    FDIV = "fdiv"
    DIV = "div"
    REM = "rem"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"
    MIN = "min"
    MAX = "max"

    @property
    def is_commutative(self) -> bool:
        return self in _COMMUTATIVE

    @property
    def integers_only(self) -> bool:
        """Bitwise and shift kinds: undefined on floats."""
        return self in _INTEGERS_ONLY


_COMMUTATIVE = frozenset({BinaryKind.ADD, BinaryKind.MUL, BinaryKind.AND, BinaryKind.OR,
                          BinaryKind.XOR, BinaryKind.MIN, BinaryKind.MAX})
_INTEGERS_ONLY = frozenset({BinaryKind.AND, BinaryKind.OR, BinaryKind.XOR, BinaryKind.SHL,
                            BinaryKind.SHR})


class UnaryKind(IREnum):
    """The operation of a ``unary`` op (see ``UnaryOp``)."""

    NEG = "neg"
    NOT = "not"
    ABS = "abs"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    FLOOR = "floor"
    CEIL = "ceil"
    ERF = "erf"
    TANH = "tanh"

    @property
    def floats_only(self) -> bool:
        """The math functions: defined on floats only."""
        return self not in (UnaryKind.NEG, UnaryKind.NOT, UnaryKind.ABS)


class ComparePredicate(IREnum):
    """The predicate of a ``compare`` op (see ``CompareOp``)."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


class AtomicKind(IREnum):
    """The read-modify-write operation of an ``atomic_rmw`` op."""

    ADD = "add"
    MAX = "max"
    MIN = "min"
    XCHG = "xchg"
    AND = "and"
    OR = "or"
    XOR = "xor"


class MemorySemantics(IREnum):
    """The memory ordering of an atomic op."""

    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"


class MemoryScope(IREnum):
    """Which threads an atomic op's ordering is with respect to."""

    GPU = "gpu"
    CTA = "cta"
    SYS = "sys"


class InputPrecision(IREnum):
    """How a ``dot`` may round f32 inputs (see ``DotOp``)."""

    IEEE = "ieee"
    TF32 = "tf32"
    TF32X3 = "tf32x3"
    BF16X3 = "bf16x3"
    BF16X6 = "bf16x6"
