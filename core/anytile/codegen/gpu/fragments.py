"""Reading a matrix instruction's A and B fragments from shared memory (for ``MatrixDot``).

A ``FragmentLoader`` emits, once per dot, each lane's address arithmetic and then, per K step,
the registers of every instruction tile of the warp.  Core's ``GenericFragments`` follows the
instruction's fragment maps: each lane's part of an operand's index is a sum of bit fields
of its lane id (``lane_value``), each register adds a constant, and a register whose
elements are consecutive and aligned in memory is one vector load.  A target may supply a
faster loader for some of its instructions (``GpuTarget.fragment_loader``).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from llvmlite import ir

from ..llvm.types import I32
from .matrix import TYPE_BITS
from .registers import warp_coordinate

if TYPE_CHECKING:
    from .dot import MatrixDotPlan
    from .lowering import KernelLowering

__all__ = ["OperandSource", "FragmentLoader", "GenericFragments", "lane_value"]


@dataclass
class OperandSource:
    """One operand of a matrix dot in shared memory from ``base``, of LLVM type ``storage``:
    element (r, c) (A: M x K; B: K x N) at ``r * row + c * col`` (row-major: ``col`` 1;
    column-major: ``row`` 1)."""

    base: ir.Value
    row: int
    storage: ir.Type
    col: int = 1


class FragmentLoader(abc.ABC):
    """Reads an instruction's A and B fragments from shared memory for a ``MatrixDot``."""

    def reads(self, a: OperandSource, b: OperandSource) -> bool:
        """Whether this loader reads operands laid out as ``a`` and ``b`` (the default:
        row-major ones); ``GenericFragments`` reads any."""
        return a.col == 1 and b.col == 1

    @abc.abstractmethod
    def prepare(self, ctx: "KernelLowering", plan: "MatrixDotPlan", a: OperandSource,
                b: OperandSource) -> Any:
        """Emit the per-lane address arithmetic (once per dot); returns a state for loads."""

    @abc.abstractmethod
    def load_a(self, ctx: "KernelLowering", state: Any, kk: int) -> list[list[ir.Value]]:
        """The A registers of each instruction tile along M at K offset ``kk``."""

    @abc.abstractmethod
    def load_b(self, ctx: "KernelLowering", state: Any, kk: int) -> list[list[ir.Value]]:
        """The B registers of each instruction tile along N at K offset ``kk``."""


def lane_value(b: ir.IRBuilder, lane: ir.Value, lanes: int, fields: list,
               cache: Optional[dict] = None) -> Optional[ir.Value]:
    """The sum of ``matrix.LaneField`` values for ``lane`` (an i32 below ``lanes``; ``None``
    when there are no fields).  ``cache`` shares the extracted bit runs between calls."""
    cache = {} if cache is None else cache
    total = None
    for f in fields:
        key = (f.shift, f.width)
        v = cache.get(key)
        if v is None:
            v = lane if f.shift == 0 else b.lshr(lane, ir.Constant(I32, f.shift))
            if f.shift + f.width < lanes.bit_length() - 1:
                v = b.and_(v, ir.Constant(I32, (1 << f.width) - 1))
            cache[key] = v
        if f.unit != 1:
            v = b.mul(v, ir.Constant(I32, f.unit))
        total = v if total is None else b.add(total, v)
    return total


class GenericFragments(FragmentLoader):
    """Fragments read element by element from the instruction's maps: each lane computes once
    where its part of a fragment starts, and each register adds a constant (a register whose
    elements are consecutive in memory is one vector load)."""

    def reads(self, a: OperandSource, b: OperandSource) -> bool:
        return True

    def prepare(self, ctx: "KernelLowering", plan: "MatrixDotPlan", a: OperandSource,
                b: OperandSource) -> Any:
        geo, bld = plan.geo, ctx.b
        cache: dict = {}

        def part(fields: list) -> Optional[ir.Value]:
            return lane_value(bld, ctx.lane, plan.instr.lanes, fields, cache)
        a_m = part(geo.a.fields(0, lambda v: plan.offset(0, v)))
        a_k = part(geo.a.fields(1))
        b_k = part(geo.b.fields(0))
        b_n = part(geo.b.fields(1, lambda v: plan.offset(1, v)))
        warp_m = warp_coordinate(ctx, plan.layout, 0)
        warp_n = warp_coordinate(ctx, plan.layout, 1)
        row = _plus(bld, bld.mul(warp_m, ir.Constant(I32, geo.block(0))), a_m)
        a_lane = _plus(bld, _times(bld, row, a.row), None if a_k is None else _times(bld, a_k, a.col))
        col = _plus(bld, bld.mul(warp_n, ir.Constant(I32, geo.block(1))), b_n)
        b_lane = _plus(bld, _times(bld, col, b.col), None if b_k is None else _times(bld, b_k, b.row))
        instr = plan.instr
        # vector reads need every part of an index aligned: the lane's, and the rows' (A,
        # row-major) or the columns' (B) steps
        a_ok = _lane_aligned(geo.a, instr.a_pack, (a.row, a.col)) and a.row % instr.a_pack == 0
        b_ok = _lane_aligned(geo.b, instr.b_pack, (b.row, b.col)) and \
            (b.row if b.col == 1 else b.col) % instr.b_pack == 0 and \
            geo.block(1) * b.col % instr.b_pack == 0
        return (plan, a, a_lane, a_ok, b, b_lane, b_ok)

    def load_a(self, ctx: "KernelLowering", state: Any, kk: int) -> list[list[ir.Value]]:
        plan, a, a_lane, aligned = state[:4]
        out = []
        for i in range(plan.tiles(0)):
            tile = i * plan.tile_stride(0)
            offsets = [(plan.offset(0, r) + tile) * a.row + (kk + k) * a.col
                       for r, k in plan.geo.a.base]
            out.append(_registers(ctx, a, a_lane, offsets, plan.instr.a_pack, plan.instr.a_type,
                                  aligned))
        return out

    def load_b(self, ctx: "KernelLowering", state: Any, kk: int) -> list[list[ir.Value]]:
        plan, b, b_lane, aligned = state[0], *state[4:]
        out = []
        for s in range(plan.tiles(1)):
            tile = s * plan.tile_stride(1)
            offsets = [(kk + k) * b.row + (plan.offset(1, c) + tile) * b.col
                       for k, c in plan.geo.b.base]
            out.append(_registers(ctx, b, b_lane, offsets, plan.instr.b_pack, plan.instr.b_type,
                                  aligned))
        return out


def _lane_aligned(frag: Any, pack: int, strides: tuple[int, int]) -> bool:
    """Whether every lane's part of an operand's index (element (r, c) at ``r * strides[0] +
    c * strides[1]``) is a multiple of ``pack``."""
    return all(bit is None or bit[1] * strides[bit[0]] % pack == 0 for bit in frag.bits)


def _times(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    return x if n == 1 else b.mul(x, ir.Constant(I32, n))


def _plus(b: ir.IRBuilder, x: ir.Value, y: Optional[ir.Value]) -> ir.Value:
    return x if y is None else b.add(x, y)


def _registers(ctx: "KernelLowering", src: OperandSource, lane: ir.Value, offsets: list,
               pack: int, type_name: str, lane_aligned: bool) -> list[ir.Value]:
    """The lane's registers of one fragment: element ``e`` at ``lane + offsets[e]``; one
    vector load where a register's elements are consecutive and aligned."""
    b = ctx.b
    bits = TYPE_BITS[type_name]

    def at(offset: int) -> ir.Value:
        return b.gep(src.base, [b.add(lane, ir.Constant(I32, offset))], source_etype=src.storage)
    out = []
    for start in range(0, len(offsets), pack):
        if pack == 1:
            value = b.load(at(offsets[start]), typ=src.storage)
            out.append(value if isinstance(value.type, ir.IntType) else b.bitcast(value, ir.IntType(bits)))
            continue
        word = ir.IntType(bits * pack)
        run = offsets[start:start + pack]
        if lane_aligned and run[0] % pack == 0 and run == list(range(run[0], run[0] + pack)):
            vec = b.load(at(offsets[start]), typ=ir.VectorType(src.storage, pack))
            vec.align = bits * pack // 8
            out.append(b.bitcast(vec, word))
            continue
        reg = None
        for p in range(pack):
            raw = b.load(at(offsets[start + p]), typ=src.storage)
            if raw.type != ir.IntType(bits):
                raw = b.bitcast(raw, ir.IntType(bits))
            piece = b.zext(raw, word)
            piece = piece if p == 0 else b.shl(piece, ir.Constant(word, bits * p))
            reg = piece if reg is None else b.or_(reg, piece)
        out.append(reg)
    return out
