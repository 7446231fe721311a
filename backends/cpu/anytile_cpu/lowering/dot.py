"""``dot``: a register-blocked micro-kernel.

MR rows x NV vectors of accumulators stay in registers across the k loop, each step one
broadcast of A and NV vector loads of B feeding fused multiply-adds (integers: multiply +
add in the accumulator type).  bf16 inputs on a cpu with AVX-512 BF16 take two k steps per
``vdpbf16ps`` instead, from B repacked as pairs of rows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from anytile.codegen.llvm.types import F32, I32, I64, const_like, intrinsic, splat, vector_width
from anytile.ir import DotOp, elem_type
from anytile.ir.types import i32 as i32_type

from .values import Index, Point, TileBuffer

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["LOWERINGS"]


class _BFloatType(ir.Type):
    """LLVM's ``bfloat``, which llvmlite lacks: here only the operand type of ``vdpbf16ps``."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloatType)

    def __hash__(self) -> int:
        return hash(_BFloatType)


_BFLOAT = _BFloatType()


def _bf16_pair(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """Two f32s (scalars or vectors) holding bf16 values as i32s of two bf16s, ``lo`` in
    the low half: a bf16 is the high half of its f32, so no rounding happens."""
    t = ir.VectorType(I32, lo.type.count) if isinstance(lo.type, ir.VectorType) else I32
    lo, hi = b.bitcast(lo, t), b.bitcast(hi, t)
    return b.or_(b.lshr(lo, const_like(lo, 16)), b.and_(hi, const_like(hi, 0xFFFF0000)))


def _pow2_divisor(n: int, limit: int) -> int:
    d = 1
    while d * 2 <= limit and n % (d * 2) == 0:
        d *= 2
    return d


def lower_dot(ctx: "ProgramLowering", op: DotOp) -> None:
    b = ctx.b
    a, bm = ctx.buffer_of(op.a), ctx.buffer_of(op.b)
    (m_size, k_size), n_size = a.shape, bm.shape[1]
    acc_elem = elem_type(op.acc.type)
    a_elem, b_elem = elem_type(op.a.type), elem_type(op.b.type)
    mr = _pow2_divisor(m_size, 4)
    vw = ctx.chunk_width(n_size) or 1
    nv = _pow2_divisor(n_size // vw, 4 if ctx.lanes >= 16 else 2)
    is_float = acc_elem.is_float
    fma = None
    acc_value, result = op.acc, op.result
    folded = ctx.plan.dot_accumulates.get(id(op))
    if folded is not None:      # x + dot(a, b, 0): accumulate onto x
        add, acc_value = folded
        result = add.result
        ctx.lowered_with_other.add(id(add))
    if id(op) in ctx.plan.dot_in_place:   # each block of acc is read before it is written
        out = ctx.tiles[acc_value]
    else:
        out = ctx.new_buffer((m_size, n_size), acc_elem)
    pairs = _bf16_pairs_of(ctx, bm) if _uses_bf16_pairs(ctx, op, vw, k_size) else None
    with ctx.loop(m_size, mr) as m0:
        with ctx.loop(n_size, vw * nv) as n0:
            rows = [b.add(m0, ir.Constant(I64, i)) for i in range(mr)]
            cols = [b.add(n0, ir.Constant(I64, j * vw)) for j in range(nv)]
            points = [[Point((Index(r), Index(c, True)), vw) for c in cols] for r in rows]
            slots = [ctx.slots_holding([_as_vector(ctx, ctx.value_at(acc_value, p), vw)
                                        for p in prow]) for prow in points]
            if pairs is not None:
                _bf16_pair_steps(ctx, a, pairs, rows, cols, slots)
            else:
                with ctx.loop(k_size) as k:
                    bvec = [_as_vector(ctx, ctx.ew.cast(b_elem, acc_elem, ctx.buffer_load(
                        bm, Point((Index(k), Index(c, True)), vw)).value), vw) for c in cols]
                    for i, r in enumerate(rows):
                        av = ctx.buffer_load(a, Point((Index(r), Index(k)), 0)).value
                        av = splat(b, ctx.ew.cast(a_elem, acc_elem, av), vw)
                        for j in range(nv):
                            acc = ctx.load_slot(slots[i][j])
                            if is_float:
                                fma = fma or intrinsic(ctx.module, "llvm.fma", acc.type,
                                                       [acc.type] * 3, [acc.type])
                                acc = b.call(fma, [av, bvec[j], acc])
                            else:
                                acc = b.add(acc, b.mul(av, bvec[j]))
                            b.store(acc, slots[i][j])
            for i, prow in enumerate(points):
                for j, p in enumerate(prow):
                    v = ctx.load_slot(slots[i][j])
                    if is_float:
                        v = ctx.ew.round_to(acc_elem, v)
                    ctx.buffer_store(out, p, v)
    ctx.tiles[result] = out


def _uses_bf16_pairs(ctx: "ProgramLowering", op: DotOp, vw: int, k_size: int) -> bool:
    """bf16 x bf16 -> f32 on ``vdpbf16ps`` (16 lanes, two k steps per instruction) where the
    target has it.  Products of bf16 values are exact in f32, so only the order of the
    additions differs from the FMA loop (and denormal inputs/outputs flush to zero)."""
    return ctx.bf16_pairs and vw == 16 and k_size % 2 == 0 and \
        elem_type(op.a.type).name == elem_type(op.b.type).name == "bf16" and \
        elem_type(op.acc.type).name == "f32"


def _bf16_pairs_of(ctx: "ProgramLowering", bm: TileBuffer) -> TileBuffer:
    """B (k x n, f32 holding bf16 values) as (k/2 x n) i32: rows 2p and 2p+1 of a column
    side by side as bf16 (low half: row 2p), the operand layout of ``vdpbf16ps``."""
    b = ctx.b
    k_size, n_size = bm.shape
    pairs = ctx.new_buffer((k_size // 2, n_size), i32_type)

    def pack(p: Point) -> None:
        kp, col = p.indices
        lo, hi = (ctx.buffer_load(bm, Point((Index(b.add(b.mul(kp.base, ir.Constant(
            I64, 2)), ir.Constant(I64, d))), col), p.width)).value for d in (0, 1))
        ctx.buffer_store(pairs, p, _bf16_pair(b, lo, hi))
    ctx.for_each_point(pairs.shape, pack)
    return pairs


def _bf16_pair_steps(ctx: "ProgramLowering", a: TileBuffer, pairs: TileBuffer, rows: list,
                     cols: list, slots: list) -> None:
    """The k loop of one register block, two k steps per ``vdpbf16ps``: each row's pair
    of A values broadcast against each column vector of B pairs."""
    b = ctx.b
    f32x16, bf16x32 = ir.VectorType(F32, 16), ir.VectorType(_BFLOAT, 32)
    dp = intrinsic(ctx.module, "llvm.x86.avx512bf16.dpbf16ps.512", f32x16,
                   [f32x16, bf16x32, bf16x32])
    with ctx.loop(pairs.shape[0]) as kp:
        bvec = [b.bitcast(ctx.buffer_load(pairs, Point((Index(kp), Index(c, True)), 16))
                          .value, bf16x32) for c in cols]
        k0 = b.mul(kp, ir.Constant(I64, 2))
        ks = (k0, b.add(k0, ir.Constant(I64, 1)))
        for i, r in enumerate(rows):
            lo, hi = (ctx.buffer_load(a, Point((Index(r), Index(k)), 0)).value for k in ks)
            av = b.bitcast(splat(b, _bf16_pair(b, lo, hi), 16), bf16x32)
            for j, bv in enumerate(bvec):
                b.store(b.call(dp, [ctx.load_slot(slots[i][j]), av, bv]), slots[i][j])


def _as_vector(ctx: "ProgramLowering", v: ir.Value, width: int) -> ir.Value:
    return v if vector_width(v) else splat(ctx.b, v, width)


LOWERINGS = {DotOp: lower_dot}
