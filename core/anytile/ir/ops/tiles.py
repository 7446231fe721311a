"""Ops that make tiles and change their shape: constants, program ids, ``arange``, splat,
broadcast, expand_dims, reshape, permute (row-major element order throughout)."""
from __future__ import annotations

from dataclasses import dataclass

from ..nodes import TRAIT_PURE, Op, Value
from ..rules import bit_width, expect
from ..types import ScalarType, TileType, Type, elem_type, i32, shape_of

__all__ = ["ConstantOp", "ProgramIdOp", "NumProgramsOp", "ArangeOp", "SplatOp", "BroadcastOp",
           "ExpandDimsOp", "ReshapeOp", "PermuteOp", "PURE"]

PURE = frozenset({TRAIT_PURE})


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

    def verify(self) -> None:
        t = self.result.type
        e = elem_type(t)
        v = self.value
        if isinstance(e, ScalarType) and e.is_float:
            expect(isinstance(v, (int, float)), f"float constant needs a number, found {v!r}")
            return
        expect(isinstance(v, int), f"constant of type {t} needs an int value, found {v!r}")
        bits = bit_width(e)
        lo = 0 if bits == 1 else -(1 << (bits - 1))
        expect(lo <= v < (1 << bits), f"constant {v} does not fit in {e}")


class _GridAxisOp(Op):
    """An op reading one axis of the launch grid."""

    def verify(self) -> None:
        expect(self.axis in (0, 1, 2), f"axis must be 0, 1 or 2, found {self.axis!r}")

    def infer_types(self) -> list[Type]:
        return [i32]


@dataclass(eq=False)
class ProgramIdOp(_GridAxisOp):
    """The index of this program along grid axis ``axis`` (0, 1 or 2), as ``i32``."""

    NAME = "program_id"
    ATTRS = ("axis",)
    TRAITS = PURE
    axis: int


@dataclass(eq=False)
class NumProgramsOp(_GridAxisOp):
    """The grid's size along axis ``axis``, as ``i32``."""

    NAME = "num_programs"
    ATTRS = ("axis",)
    TRAITS = PURE
    axis: int


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

    def verify(self) -> None:
        n = self.end - self.start
        expect(n > 0 and n & (n - 1) == 0, f"arange size end - start must be a power of 2, "
                                           f"found {self.end} - {self.start} = {n}")


# ---------------------------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class SplatOp(Op):
    """A tile of the (explicit) result shape whose every element is the scalar ``src``."""

    NAME = "splat"
    OPERANDS = ("src",)
    TRAITS = PURE
    src: Value

    def verify(self) -> None:
        src, res = self.src.type, self.result.type
        expect(not isinstance(src, TileType), f"splat source must be a scalar, found {src}")
        expect(isinstance(res, TileType) and res.elem == src,
               f"splat of {src} must give a tile of {src}, found {res}")


@dataclass(eq=False)
class BroadcastOp(Op):
    """``src`` (a tile of the same rank) repeated along every dimension where its size is 1
    and the (explicit) result's is larger.  Laid out, the result usually keeps the source's
    layout where that layout fits any shape (``KEPT_BY_BROADCAST``, the GPU ones), but may
    take another (the lowering brings the source into it: a source whose layout leaves threads
    on its size-1 dimensions is not worth keeping); one that encodes the shape (OpenCL's)
    cannot be kept."""

    NAME = "broadcast"
    OPERANDS = ("src",)
    TRAITS = PURE
    src: Value

    def verify(self) -> None:
        src, res = self.src.type, self.result.type
        expect(isinstance(src, TileType) and isinstance(res, TileType),
               f"broadcast needs tiles, found {src} -> {res}")
        expect(src.elem == res.elem, f"broadcast changes element type {src.elem} -> {res.elem}")
        expect(src.rank == res.rank, f"broadcast changes rank {src} -> {res}")
        for s, r in zip(src.shape, res.shape):
            expect(s == r or s == 1, f"cannot broadcast {src} to {res}")


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

    def verify(self) -> None:
        rank = len(shape_of(self.src.type))
        expect(0 <= self.axis <= rank,
               f"expand_dims axis {self.axis} out of range for {self.src.type}")


@dataclass(eq=False)
class ReshapeOp(Op):
    """``src``'s elements in row-major order, viewed with the (explicit) result shape of the
    same number of elements."""

    NAME = "reshape"
    OPERANDS = ("src",)
    TRAITS = PURE
    src: Value

    def verify(self) -> None:
        src, res = self.src.type, self.result.type
        expect(isinstance(res, TileType), f"reshape result must be a tile, found {res}")
        expect(elem_type(src) == res.elem, f"reshape changes element type {src} -> {res}")
        n = src.numel if isinstance(src, TileType) else 1
        expect(n == res.numel, f"reshape changes the element count {src} -> {res}")


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

    def verify(self) -> None:
        rank = len(shape_of(self.src.type))
        expect(isinstance(self.src.type, TileType), f"permute needs a tile, found {self.src.type}")
        expect(sorted(self.order) == list(range(rank)),
               f"permute order {self.order} is not a permutation of {rank} dimensions")
