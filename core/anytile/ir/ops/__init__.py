"""The ops of anytile's tile IR, what each one means and the rules each one checks.

Each op computes on whole tiles of one *program* (one element of the launch grid); nothing
here knows about threads, lanes or registers.  The reference interpreter
(``anytile.interpreter``) is the executable definition of these docstrings, and each op's
``verify()`` checks the typing rules its docstring states.

Conventions shared by all ops:

* Operands of an elementwise op have the same type (the frontend inserts casts and
  broadcasts); scalar operands are scalar types, not 1-element tiles.
* Integer arithmetic wraps modulo 2^bits.  Signedness comes from the type (``i*`` vs ``u*``).
* Float arithmetic is IEEE-754 round-to-nearest-even in the operand type; ``f16``/``bf16``
  may be computed in ``f32`` and rounded once per op.
* ``i1`` is a boolean: 0 or 1.
* Kinds and predicates are members of the enumerations of ``anytile.ir.kinds``
  (``BinaryKind.ADD``, which equals ``"add"``).
* Laid-out IR (after a backend's layout stage) follows the same rules with layouts ignored,
  plus the layout rules an op's docstring states.

The ops are grouped by what they do: ``tiles`` (constants, program ids, shapes), ``arith``
(elementwise), ``memory``, ``reductions`` (reduce, scan, dot) and ``control``.
"""
from __future__ import annotations

from ..nodes import Block, Op, Value
from ..kinds import (AtomicKind, BinaryKind, ComparePredicate, InputPrecision, MemoryScope,
                     MemorySemantics, Trait, UnaryKind)
from ..types import PointerType, ScalarType, Type, elem_type
from .arith import (PURE_EW, BinaryOp, BitcastOp, CastOp, CompareOp, FmaOp, HintOp, SelectOp,
                    UMulHiOp, UnaryOp)
from .control import (AssertOp, AssumeOp, BarrierOp, CallOp, ConditionOp, ForOp, IfOp, PrintOp,
                      ReturnOp, WhileOp, YieldOp)
from .memory import AddPtrOp, AtomicCASOp, AtomicRMWOp, LoadOp, StoreOp
from .reductions import DotOp, ReduceOp, ScanOp
from .tiles import (PURE, ArangeOp, BroadcastOp, ConstantOp, ExpandDimsOp, NumProgramsOp,
                    PermuteOp, ProgramIdOp, ReshapeOp, SplatOp)

__all__ = [
    "ConstantOp", "ProgramIdOp", "NumProgramsOp", "ArangeOp", "SplatOp", "BroadcastOp",
    "ExpandDimsOp", "ReshapeOp", "PermuteOp", "BinaryOp", "CompareOp", "UnaryOp", "FmaOp",
    "UMulHiOp", "SelectOp", "CastOp", "BitcastOp", "HintOp", "AddPtrOp", "LoadOp", "StoreOp",
    "AtomicRMWOp", "AtomicCASOp", "ReduceOp", "ScanOp", "DotOp", "YieldOp", "ConditionOp",
    "ReturnOp", "ForOp", "IfOp", "WhileOp", "CallOp", "AssertOp", "AssumeOp",
    "BarrierOp", "PrintOp", "BinaryKind", "UnaryKind", "ComparePredicate", "AtomicKind", "MemorySemantics",
    "MemoryScope", "InputPrecision", "Trait",
    "BINARY_KINDS", "COMMUTATIVE_BINARY", "UNARY_KINDS", "FLOAT_ONLY_UNARY",
    "COMPARE_PREDICATES", "ATOMIC_KINDS", "PURE", "PURE_EW", "is_float_type",
    "is_pointer_type", "Op", "Block", "Value",
]

# The kinds as collections of members (each member equals its string).
BINARY_KINDS = tuple(BinaryKind)
COMMUTATIVE_BINARY = frozenset(k for k in BinaryKind if k.is_commutative)
UNARY_KINDS = tuple(UnaryKind)
FLOAT_ONLY_UNARY = frozenset(k for k in UnaryKind if k.floats_only)
COMPARE_PREDICATES = tuple(ComparePredicate)
ATOMIC_KINDS = tuple(AtomicKind)


def is_float_type(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_float


def is_pointer_type(t: Type) -> bool:
    return isinstance(elem_type(t), PointerType)
