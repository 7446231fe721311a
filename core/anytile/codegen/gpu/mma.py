"""``dot`` on tensor cores with warp-wide ``mma.sync.m16n8k16`` (fp16/bf16 in, fp32 out).

The accumulator keeps an ordinary ``BlockedLayout``: ``size_per_thread=[1, 2]``,
``threads_per_warp=[8, 4]``, ``warps_per_cta=[wm, wn]``.  A thread's registers then sit
exactly where one m16n8 accumulator fragment wants them, if a 16-row mma tile is taken to be
two consecutive *repetitions* of the layout along M (rows ``g`` and ``g + 8`` of the fragment
are rows of repetitions ``2i`` and ``2i + 1``).  Nothing requires the 16 rows of an mma to
be adjacent in the matrix: the A fragment is simply read from those same rows.  So stores,
reductions and conversions of a dot's result need nothing special.

Operands go through shared memory in their storage type, row-major (A as ``[M][K + 8]``, B as
``[K][N + 8]``; the 16-byte padding lets the 8 row addresses of an ``ldmatrix`` hit all 32
banks), written in runs of up to 8 elements per store.  Fragments come back with
``ldmatrix.x4``: for A, lane ``8q + r`` gives row ``r`` of matrix ``q`` = (rows of
repetition ``2i`` or ``2i + 1``) x (k or k + 8), which yields exactly a0..a3; for B,
``ldmatrix.x4.trans`` over (k, k + 8) x (tile s, s + 1) yields b0, b1 of two n-tiles.  Fragment positions
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
from ..llvm.types import I32
from .layouts import BlockedLayout
from .shared_ops import PAD_ELEMENTS as _PAD  # 16 bytes a row: 8 ldmatrix rows hit 32 banks
from .shared_ops import WGMMA_B_GROUP

__all__ = ["mma_warps", "mma_layout", "MmaLowering", "MMA_INPUTS", "wgmma_operands", "wgmma_fits"]

MMA_INPUTS = ("f16", "bf16")


def mma_warps(op: ops.DotOp, num_warps: int, warp_size: int) -> Optional[tuple[int, int]]:
    """(warps along M, warps along N) for an mma lowering of ``op``, or ``None`` when the
    dot does not fit (types, shapes)."""
    if warp_size != 32:
        return None
    a, b, acc = elem_type(op.a.type), elem_type(op.b.type), elem_type(op.acc.type)
    if b != a or acc.name != "f32":
        return None
    (m, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
    if a.name in MMA_INPUTS:
        if k % 16:
            return None
    elif a.name != "f32" or op.input_precision != "tf32" or k % 8:
        return None   # f32 ``ieee`` (and ``tf32x3``) stay exact: FMAs
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
    """Mixin of ``KernelLowering``: ``dot`` through the target's ``ldmatrix_x4`` and
    ``mma_m16n8k16`` hooks (``to_tf32`` and ``mma_m16n8k8_tf32`` for f32 inputs)."""

    def store_operand(self, regs, elem, base: ir.Value, row: int) -> None:
        """Write a 2-D operand tile to shared memory, row-major with ``row`` elements per row,
        in runs of up to 8 consecutive elements per store where the layout has them."""
        b = self.b
        tf32 = elem.name == "f32"   # stored as tf32 bit patterns (rounded once, here)
        storage = I32 if tf32 else self.types.storage(elem)
        layout = regs.layout
        run = 1
        if isinstance(layout, BlockedLayout) and layout.order[0] == 1 and regs.shape[1] >= layout.size_per_thread[1]:
            run = min(layout.size_per_thread[1], 16 // elem.nbytes)
        coords = self.coords(layout, regs.shape)
        for first in range(0, len(regs.values), run):
            r, c = coords[first]
            ptr = b.gep(base, [b.add(b.mul(r, ir.Constant(I32, row)), c)], source_etype=storage)
            values = [self.target.to_tf32(b, v) if tf32 else self.ew.to_storage(elem, v)
                      for v in regs.values[first:first + run]]
            if run == 1:
                b.store(values[0], ptr)
                continue
            vec = ir.Constant(ir.VectorType(storage, run), ir.Undefined)
            for j, v in enumerate(values):
                vec = b.insert_element(vec, v, ir.Constant(I32, j))
            b.store(vec, ptr).align = elem.nbytes * run

    def lower_dot_mma(self, op: ops.DotOp, warps: tuple[int, int]) -> None:
        if elem_type(op.a.type).name == "f32":
            self.lower_dot_tf32(op, warps)
            return
        b = self.b
        layout = op.result.type.layout
        assert layout == mma_layout(warps), (layout, warps)
        wm, wn = warps
        elem = elem_type(op.a.type)
        (M, K), (_, N) = shape_of(op.a.type), shape_of(op.b.type)
        acc = self.tile(op.acc, layout)
        # operands a pipelined loop left in shared memory are read in place; the others are
        # written to the scratch space first
        a_view, b_view = self.shared_views.get(op.a), self.shared_views.get(op.b)
        row_a = a_view.row if a_view else K + _PAD
        row_b = b_view.row if b_view else N + _PAD
        a_bytes = 0 if a_view else (M * row_a * 2 + 15) // 16 * 16
        a_base = a_view.base if a_view else self.smem_base
        b_base = b_view.base if b_view else b.gep(self.smem_base, [ir.Constant(I32, a_bytes)],
                                                  source_etype=ir.IntType(8))
        if not (a_view and b_view):
            self.reserve_shared(a_bytes + (0 if b_view else K * row_b * 2))
            self.target.barrier(b)
            if not a_view:
                self.store_operand(self.tile(op.a), elem, a_base, row_a)
            if not b_view:
                self.store_operand(self.tile(op.b), elem, b_base, row_b)
            self.target.barrier(b)

        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        r = b.and_(self.lane, k32(7))      # the row of an 8x8 matrix whose address I give
        q = b.lshr(self.lane, k32(3))      # ... of matrix q of the four
        q_lo, q_hi = b.and_(q, k32(1)), b.lshr(q, k32(1))
        warp_m = b.and_(b.udiv(self.warp, k32(layout.warp_stride(0))), k32(wm - 1))
        warp_n = b.and_(b.udiv(self.warp, k32(layout.warp_stride(1))), k32(wn - 1))
        # A: matrices (rows of repetition 2i / 2i+1) x (k, k+8): exactly a0..a3
        a_row = b.add(b.add(b.mul(warp_m, k32(8)), r), b.mul(q_lo, k32(8 * wm)))
        a_lane = b.add(b.mul(a_row, k32(row_a)), b.mul(q_hi, k32(8)))
        # B (transposed on load): matrices (k, k+8) x (tile s, tile s+1): b0, b1 of two tiles
        b_k = b.add(r, b.mul(q_lo, k32(8)))
        b_col = b.mul(warp_n, k32(8))
        b_lane_pair = b.add(b.mul(b_k, k32(row_b)), b.add(b_col, b.mul(q_hi, k32(8 * wn))))
        b_lane_single = b.add(b.mul(b_k, k32(row_b)), b_col)
        tiles_m, tiles_n = M // (16 * wm), N // (8 * wn)
        storage = ir.IntType(16)

        def at(base: ir.Value, lane_offset: ir.Value, offset: int) -> ir.Value:
            return b.gep(base, [b.add(lane_offset, k32(offset))], source_etype=storage)
        n_regs_1 = 2 * tiles_n  # registers of the accumulator along N
        values = list(acc.values)
        for kk in range(0, K, 16):
            a_frags = [self.target.ldmatrix_x4(b, at(a_base, a_lane, 16 * i * wm * row_a + kk), False)
                       for i in range(tiles_m)]
            b_frags = []
            for s in range(0, tiles_n, 2):
                single = s + 1 == tiles_n
                regs = self.target.ldmatrix_x4(
                    b, at(b_base, b_lane_single if single else b_lane_pair, kk * row_b + s * 8 * wn), True)
                b_frags += [regs[0:2]] if single else [regs[0:2], regs[2:4]]
            for i in range(tiles_m):
                for s in range(tiles_n):
                    slots = [(2 * i) * n_regs_1 + 2 * s, (2 * i) * n_regs_1 + 2 * s + 1,
                             (2 * i + 1) * n_regs_1 + 2 * s, (2 * i + 1) * n_regs_1 + 2 * s + 1]
                    out = self.target.mma_m16n8k16(b, elem.name, a_frags[i], b_frags[s],
                                                   [values[x] for x in slots])
                    for x, v in zip(slots, out):
                        values[x] = v
        self.set_result(op, self.new_regs(layout, (M, N), values))

    def lower_dot_tf32(self, op: ops.DotOp, warps: tuple[int, int]) -> None:
        """f32 ``dot`` with ``input_precision="tf32"``: operands rounded to tf32 once, on
        their way to shared memory (A as ``[M][K + 4]``, B as ``[K][N + 8]`` words: a warp's
        fragment reads then hit 32 distinct banks), fragments read with plain shared loads,
        ``mma.m16n8k8.tf32`` (fragment positions for lane ``4g + t``: a0 = (g, t), a1 =
        (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4); b0 = (t, g), b1 = (t + 4, g))."""
        b = self.b
        layout = op.result.type.layout
        wm, wn = warps
        (M, K), (_, N) = shape_of(op.a.type), shape_of(op.b.type)
        acc = self.tile(op.acc, layout)
        row_a, row_b = K + 4, N + 8
        a_bytes = (M * row_a * 4 + 15) // 16 * 16
        self.reserve_shared(a_bytes + K * row_b * 4)
        a_base = self.smem_base
        b_base = b.gep(self.smem_base, [ir.Constant(I32, a_bytes)], source_etype=ir.IntType(8))
        f32 = elem_type(op.a.type)
        self.target.barrier(b)
        self.store_operand(self.tile(op.a), f32, a_base, row_a)
        self.store_operand(self.tile(op.b), f32, b_base, row_b)
        self.target.barrier(b)
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        g, t = b.lshr(self.lane, k32(2)), b.and_(self.lane, k32(3))
        warp_m = b.and_(b.udiv(self.warp, k32(layout.warp_stride(0))), k32(wm - 1))
        warp_n = b.and_(b.udiv(self.warp, k32(layout.warp_stride(1))), k32(wn - 1))
        row_lo = b.add(b.mul(warp_m, k32(8)), g)            # fragment row g of tile 0
        a_lane = b.add(b.mul(row_lo, k32(row_a)), t)
        b_lane = b.add(b.mul(t, k32(row_b)), b.add(b.mul(warp_n, k32(8)), g))
        tiles_m, tiles_n = M // (16 * wm), N // (8 * wn)

        def word(base: ir.Value, lane_offset: ir.Value, offset: int) -> ir.Value:
            return b.load(b.gep(base, [b.add(lane_offset, k32(offset))], source_etype=I32), typ=I32)
        n_regs_1 = 2 * tiles_n
        values = list(acc.values)
        for kk in range(0, K, 8):
            a_frags = []
            for i in range(tiles_m):
                lo, hi = 16 * i * wm * row_a + kk, (16 * i * wm + 8 * wm) * row_a + kk
                a_frags.append([word(a_base, a_lane, lo), word(a_base, a_lane, hi),
                                word(a_base, a_lane, lo + 4), word(a_base, a_lane, hi + 4)])
            b_frags = [[word(b_base, b_lane, kk * row_b + s * 8 * wn),
                        word(b_base, b_lane, (kk + 4) * row_b + s * 8 * wn)] for s in range(tiles_n)]
            for i in range(tiles_m):
                for s in range(tiles_n):
                    slots = [(2 * i) * n_regs_1 + 2 * s, (2 * i) * n_regs_1 + 2 * s + 1,
                             (2 * i + 1) * n_regs_1 + 2 * s, (2 * i + 1) * n_regs_1 + 2 * s + 1]
                    out = self.target.mma_m16n8k8_tf32(b, a_frags[i], b_frags[s], [values[x] for x in slots])
                    for x, v in zip(slots, out):
                        values[x] = v
        self.set_result(op, self.new_regs(layout, (M, N), values))

    def lower_dot_wgmma(self, op: ops.DotOp) -> None:
        """Both operands sit in pipeline slots in the warpgroup-MMA layouts (``"wgmma-a"``,
        ``"wgmma-b"``): each warpgroup runs ``wgmma.m64nNk16`` per 64-row M-tile and K step,
        reading A and B by descriptor; the accumulator keeps the blocked layout
        ``mma_layout((num_warps, 1))``, whose rows the A buffer was permuted to match."""
        b = self.b
        layout = op.result.type.layout
        warps = self.laid.num_warps
        groups = warps // 4
        elem = elem_type(op.a.type)
        (M, K), (_, N) = shape_of(op.a.type), shape_of(op.b.type)
        acc = self.tile(op.acc, layout)
        a_view, b_view = self.shared_views[op.a], self.shared_views[op.b]
        i64 = ir.IntType(64)
        k64 = lambda v: ir.Constant(i64, v)  # noqa: E731

        def descriptor(address: ir.Value, leading: int, stride: int) -> ir.Value:
            start = b.lshr(b.and_(b.ptrtoint(address, i64), k64(0x3FFFF)), k64(4))
            return b.or_(start, k64(((leading >> 4) << 16) | ((stride >> 4) << 32)))
        group = b.lshr(self.warp, ir.Constant(I32, 2))
        n_regs_1 = 2 * (N // 8)
        values = list(acc.values)
        touched: list[int] = []
        self.target.wgmma_fence(b)
        for i in range(M // (64 * groups)):
            slots = []
            for s in range(N // 8):
                slots += [(2 * i) * n_regs_1 + 2 * s, (2 * i) * n_regs_1 + 2 * s + 1,
                          (2 * i + 1) * n_regs_1 + 2 * s, (2 * i + 1) * n_regs_1 + 2 * s + 1]
            current = [values[x] for x in slots]
            block = b.add(b.mul(ir.Constant(I32, i), ir.Constant(I32, groups)), group)
            a_tile = b.gep(a_view.base, [b.mul(block, ir.Constant(I32, 8 * 16 * K))], source_etype=ir.IntType(8))
            for kk in range(0, K, 16):
                a_at = b.gep(a_tile, [ir.Constant(I32, kk * 16)], source_etype=ir.IntType(8))
                k_groups = N // 8 * WGMMA_B_GROUP      # bytes between B's 8-row K-groups
                b_at = b.gep(b_view.base, [ir.Constant(I32, kk // 8 * k_groups)], source_etype=ir.IntType(8))
                current = self.target.wgmma_m64k16(b, elem.name, N, descriptor(a_at, 128, 16 * K),
                                                   descriptor(b_at, k_groups, WGMMA_B_GROUP), current)
            for x, v in zip(slots, current):
                values[x] = v
            touched += slots
        done = self.target.wgmma_commit_and_wait(b, [values[x] for x in touched])
        for x, v in zip(touched, done):
            values[x] = v
        self.set_result(op, self.new_regs(layout, (M, N), values))


def wgmma_operands(op: ops.DotOp) -> bool:
    """Whether ``op`` reads both operands from warpgroup-MMA pipeline buffers."""
    from .shared_ops import SharedLoadOp
    a, b = op.a.owner, op.b.owner
    return isinstance(a, SharedLoadOp) and isinstance(b, SharedLoadOp) and \
        a.buffer.type.kind == "wgmma-a" and b.buffer.type.kind == "wgmma-b"


def wgmma_fits(op: ops.DotOp, num_warps: int) -> bool:
    """Whether a warpgroup MMA can compute ``op`` with ``num_warps`` warps, all along M:
    fp16/bf16 into f32, M a multiple of 64 per warpgroup, N a multiple of 8 up to 256, K of
    16."""
    a, acc = elem_type(op.a.type), elem_type(op.acc.type)
    if a.name not in MMA_INPUTS or elem_type(op.b.type) != a or acc.name != "f32":
        return False
    (m, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
    return num_warps % 4 == 0 and m % (16 * num_warps) == 0 and n % 8 == 0 and n <= 256 and k % 16 == 0
