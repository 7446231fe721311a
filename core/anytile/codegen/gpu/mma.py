"""``dot`` on tensor cores with warp-wide ``mma.sync.m16n8k16`` (fp16/bf16 in, fp32 out).

The accumulator keeps an ordinary ``BlockedLayout``: ``size_per_thread=[1, 2]``,
``threads_per_warp=[8, 4]``, ``warps_per_cta=[wm, wn]``.  A thread's registers then sit
exactly where one m16n8 accumulator fragment wants them, if a 16-row mma tile is taken to be
two consecutive *repetitions* of the layout along M (rows ``g`` and ``g + 8`` of the fragment
are rows of repetitions ``2i`` and ``2i + 1``).  Nothing requires the 16 rows of an mma to
be adjacent in the matrix: the A fragment is simply read from those same rows.  So stores,
reductions and conversions of a dot's result need nothing special.

Operands go through shared memory in their storage type (A as ``[M][K + 8]``, B transposed
as ``[N][K + 8]``: the 16-byte row padding spreads a fragment load over all banks); each
fragment register is one 32-bit shared load of two consecutive k.  Fragment positions
(PTX ISA, ``mma.m16n8k16`` with ``.row.col``), for lane = 4 * g + t:

* A: reg0 = (row g, k 2t..2t+1), reg1 = (row g+8, k 2t..), reg2 = (row g, k 2t+8..),
  reg3 = (row g+8, k 2t+8..);
* B: reg0 = (k 2t..2t+1, col g), reg1 = (k 2t+8.., col g);
* C/D: c0, c1 = (row g, cols 2t, 2t+1); c2, c3 = (row g+8, cols 2t, 2t+1).
"""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from ...ir import ops
from ...ir.types import elem_type, shape_of
from ..llvm.types import I16, I32
from .layouts import BlockedLayout

__all__ = ["mma_warps", "mma_layout", "MmaLowering", "MMA_INPUTS"]

MMA_INPUTS = ("f16", "bf16")
_PAD = 8  # elements of padding per shared-memory row


def mma_warps(op: ops.DotOp, num_warps: int, warp_size: int) -> Optional[tuple[int, int]]:
    """(warps along M, warps along N) for an mma lowering of ``op``, or ``None`` when the
    dot does not fit (types, shapes)."""
    if warp_size != 32:
        return None
    a, b, acc = elem_type(op.a.type), elem_type(op.b.type), elem_type(op.acc.type)
    if a.name not in MMA_INPUTS or b != a or acc.name != "f32":
        return None
    (m, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
    if k % 16:
        return None
    best = None
    wm = 1
    while wm <= num_warps:
        wn = num_warps // wm
        if m % (16 * wm) == 0 and n % (8 * wn) == 0:
            score = abs((m // wm) - (n // wn))  # square-ish tiles per warp share operands best
            if best is None or score < best[0]:
                best = (score, wm, wn)
        wm *= 2
    return None if best is None else (best[1], best[2])


def mma_layout(warps: tuple[int, int]) -> BlockedLayout:
    return BlockedLayout((1, 2), (8, 4), warps, (1, 0))


class MmaLowering:
    """Mixin of ``KernelLowering``: ``dot`` through the target's ``mma_m16n8k16`` hook."""

    def lower_dot_mma(self, op: ops.DotOp, warps: tuple[int, int]) -> None:
        b = self.b
        layout = op.result.type.layout
        assert layout == mma_layout(warps), (layout, warps)
        wm, wn = warps
        elem = elem_type(op.a.type)
        (M, K), (_, N) = shape_of(op.a.type), shape_of(op.b.type)
        a, bm = self.tile(op.a), self.tile(op.b)
        acc = self.tile(op.acc, layout)
        row = K + _PAD
        a_bytes = (M * row * 2 + 15) // 16 * 16
        self.reserve_shared(a_bytes + N * row * 2)
        storage = self.types.storage(elem)
        self.target.barrier(b)
        for v, (m, k) in zip(a.values, self.coords(a.layout, a.shape)):
            idx = b.add(b.mul(m, ir.Constant(I32, row)), k)
            b.store(self.ew.to_storage(elem, v), b.gep(self.smem_base, [idx], source_etype=storage))
        b_base = b.gep(self.smem_base, [ir.Constant(I32, a_bytes)], source_etype=ir.IntType(8))
        for v, (k, n) in zip(bm.values, self.coords(bm.layout, bm.shape)):
            idx = b.add(b.mul(n, ir.Constant(I32, row)), k)
            b.store(self.ew.to_storage(elem, v), b.gep(b_base, [idx], source_etype=storage))
        self.target.barrier(b)

        g = b.lshr(self.lane, ir.Constant(I32, 2))
        t = b.and_(self.lane, ir.Constant(I32, 3))
        warp_m = b.and_(b.udiv(self.warp, ir.Constant(I32, layout.warp_stride(0))), ir.Constant(I32, wm - 1))
        warp_n = b.and_(b.udiv(self.warp, ir.Constant(I32, layout.warp_stride(1))), ir.Constant(I32, wn - 1))
        my_row = b.add(b.mul(warp_m, ir.Constant(I32, 8)), g)
        my_col = b.add(b.mul(warp_n, ir.Constant(I32, 8)), g)
        two_t = b.mul(t, ir.Constant(I32, 2))
        tiles_m, tiles_n = M // (16 * wm), N // (8 * wn)

        def pair(base: ir.Value, r: ir.Value, k: int) -> ir.Value:
            """Two consecutive k of row ``r`` as one i32 (low half: the smaller k)."""
            idx = b.add(b.add(b.mul(r, ir.Constant(I32, row)), two_t), ir.Constant(I32, k))
            return b.load(b.gep(base, [idx], source_etype=I16), typ=I32)

        rows = [(b.add(my_row, ir.Constant(I32, (2 * i) * 8 * wm)),
                 b.add(my_row, ir.Constant(I32, (2 * i + 1) * 8 * wm))) for i in range(tiles_m)]
        cols = [b.add(my_col, ir.Constant(I32, s * 8 * wn)) for s in range(tiles_n)]
        n_regs_1 = 2 * tiles_n  # registers of the accumulator along N
        values = list(acc.values)
        for kk in range(0, K, 16):
            a_frags = [[pair(self.smem_base, lo, kk), pair(self.smem_base, hi, kk),
                        pair(self.smem_base, lo, kk + 8), pair(self.smem_base, hi, kk + 8)]
                       for lo, hi in rows]
            b_frags = [[pair(b_base, c, kk), pair(b_base, c, kk + 8)] for c in cols]
            for i in range(tiles_m):
                for s in range(tiles_n):
                    slots = [(2 * i) * n_regs_1 + 2 * s, (2 * i) * n_regs_1 + 2 * s + 1,
                             (2 * i + 1) * n_regs_1 + 2 * s, (2 * i + 1) * n_regs_1 + 2 * s + 1]
                    out = self.target.mma_m16n8k16(b, elem.name, a_frags[i], b_frags[s],
                                                   [values[x] for x in slots])
                    for x, v in zip(slots, out):
                        values[x] = v
        self.set_result(op, self.new_regs(layout, (M, N), values))
