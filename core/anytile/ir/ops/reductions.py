"""Ops that combine elements across a tile: reduce, scan, dot."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..nodes import TRAIT_CONTROL, TRAIT_PURE, Block, Op, Value
from ..kinds import InputPrecision
from ..rules import check_block_args, check_terminator, expect, is_float, is_ptr, layout_of
from ..types import TileType, Type, elem_type, shape_of, with_shape
from .tiles import PURE

__all__ = ["ReduceOp", "ScanOp", "DotOp"]


class _CombineOp(Op):
    """reduce and scan: tiles of one shape combined along ``axis`` by the ``combine`` region
    ``(lhs_0..lhs_n-1, rhs_0..rhs_n-1) -> n scalars``."""

    def verify(self) -> None:
        expect(len(self.srcs) > 0, f"{self.NAME} needs at least one source")
        first = self.srcs[0].type
        shape = shape_of(first)
        expect(len(shape) > 0, f"{self.NAME} needs tiles, found {first}")
        for s in self.srcs:
            expect(shape_of(s.type) == shape,
                   f"{self.NAME} sources differ in shape: {first} vs {s.type}")
        expect(0 <= self.axis < len(shape), f"axis {self.axis} out of range for {first}")
        elems = [elem_type(s.type) for s in self.srcs]
        check_block_args(self.combine, elems + elems, "combine")
        check_terminator(self.combine, "yield", elems, "combine")
        layouts = {layout_of(r.type) for r in self.results if isinstance(r.type, TileType)}
        expect(len(layouts) <= 1, f"{self.NAME} results have different layouts: "
                                  f"{', '.join(str(r.type) for r in self.results)}")


@dataclass(eq=False)
class ReduceOp(_CombineOp):
    """Reduce the tiles ``srcs`` (one shape) along ``axis`` with ``combine``.

    ``combine`` has 2n scalar arguments ``(lhs_0..lhs_n-1, rhs_0..rhs_n-1)`` and yields n
    scalars; it must be associative.  Result ``i`` is ``srcs[i]`` with ``axis`` removed (a
    scalar when the tile was 1-D).  Elements are combined in index order (each combine's
    left operands come from lower indices than its right ones) unless ``commutative`` says
    the combine gives the same values with its operand lists swapped (sum, max, min, argmax
    with ties to the lower index...): the order is then free.  Laid out, the tile results
    share one layout."""

    NAME = "reduce"
    OPERANDS = ("srcs",)
    ATTRS = ("axis", "commutative")
    REGIONS = ("combine",)
    TRAITS = frozenset({TRAIT_PURE, TRAIT_CONTROL})
    srcs: list
    axis: int
    combine: Block = field(default_factory=Block)
    commutative: bool = False

    def infer_types(self) -> list[Type]:
        out = []
        for s in self.srcs:
            shape = list(shape_of(s.type))
            del shape[self.axis]
            out.append(with_shape(elem_type(s.type), tuple(shape)))
        return out


@dataclass(eq=False)
class ScanOp(_CombineOp):
    """Inclusive scan of ``srcs`` along ``axis`` with ``combine`` (as in ``reduce``);
    from the last element backwards when ``reverse``.  Results have the sources' types and,
    laid out, one layout."""

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

    ``a`` and ``b`` have one element type, or two float8 types (e4m3 times e5m2: the
    language widens float8 operands to f16, a target may narrow them back, ``narrow.py``).
    Products are summed in the accumulator's type.  ``input_precision`` for f32 inputs:
    ``ieee`` (exact f32 products), ``tf32`` (inputs may be rounded to tf32), ``tf32x3``,
    ``bf16x3`` or ``bf16x6`` (products of split inputs: at least as accurate as the tolerance
    table says; computing them exactly is always right)."""

    NAME = "dot"
    OPERANDS = ("a", "b", "acc")
    ATTRS = ("input_precision",)
    TRAITS = PURE
    ENUM_ATTRS = {"input_precision": InputPrecision}
    a: Value
    b: Value
    acc: Value
    input_precision: InputPrecision = InputPrecision.IEEE

    def infer_types(self) -> list[Type]:
        return [self.acc.type]

    def verify(self) -> None:
        a, b, acc = self.a.type, self.b.type, self.acc.type
        expect(all(isinstance(t, TileType) and t.rank in (2, 3) for t in (a, b, acc))
               and a.rank == b.rank == acc.rank,
               f"dot needs 2-D (or batched 3-D) tiles, found {a}, {b}, {acc}")
        *batch_a, m, k = a.shape
        *batch_b, k2, n = b.shape
        expect(k == k2 and batch_a == batch_b, f"dot inner dimensions differ: {a} @ {b}")
        expect(tuple(acc.shape) == (*batch_a, m, n), f"dot accumulator {acc} is not {m}x{n}")
        expect(a.elem == b.elem or all(getattr(t.elem, "is_float8", False) for t in (a, b)),
               f"dot inputs differ in element type: {a.elem} vs {b.elem}")
        expect(is_float(a) == is_float(acc) and not is_ptr(a),
               f"dot of {a.elem} cannot accumulate in {acc.elem}")
