"""NVIDIA's matrix instructions as data (``mma.sync``), and ``ldmatrix`` as a fragment loader.

The fragment maps are the PTX ISA's tables for ``mma.m16n8k16`` (f16, bf16),
``mma.m16n8k8`` (tf32) and ``mma.m16n8k32`` (s8) with ``.row.col`` operands, for lane
``4 g + t`` (``g`` = groupID, ``t`` = threadID_in_group):

* m16n8k16: A register ``r`` holds row ``g + 8 (r & 1)``, columns ``2 t + 8 (r >> 1)`` and
  the next (low half first); B register ``r`` holds rows ``2 t + 8 r`` and the next, column
  ``g``; accumulator ``c`` is (``g + 8 (c >> 1)``, ``2 t + (c & 1)``);
* m16n8k8.tf32: A ``r`` is (``g + 8 (r & 1)``, ``t + 4 (r >> 1)``), B ``r`` is
  (``t + 4 r``, ``g``), one element a register; the accumulator as above;
* m16n8k32.s8: A register ``r`` holds row ``g + 8 (r & 1)``, columns ``4 t + 16 (r >> 1)``
  and the next three; B register ``r`` holds rows ``4 t + 16 r`` .. ``+ 3``, column ``g``; the
  s32 accumulator as above.

``LdmatrixFragments`` reads the 16-bit fragments with ``ldmatrix.x4`` (four 8 x 8 matrices of
16-bit elements a call: a whole A fragment, or the B fragments of two n-tiles with
``.trans``) instead of element by element; it is given the ``ldmatrix`` emitter, the real one
(``ldmatrix_x4``) or one written with the generic hooks (``emulated_ldmatrix_x4``) so the
host simulator runs the same address arithmetic.
"""
from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir

from anytile.codegen.gpu import FragmentLoader, GpuTarget, MatrixDotPlan, MatrixInstr, OperandSource
from anytile.codegen.gpu.registers import warp_coordinate

__all__ = ["MMA_F16", "MMA_BF16", "MMA_TF32", "MMA_S8", "MATRIX_INSTRS", "LdmatrixFragments", "ldmatrix_x4",
           "emulated_ldmatrix_x4", "emit_mma"]

I32 = ir.IntType(32)


def _a16(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    r, half = divmod(e, 2)
    return g + 8 * (r & 1), 2 * t + half + 8 * (r >> 1)


def _b16(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    r, half = divmod(e, 2)
    return 2 * t + half + 8 * r, g


def _acc(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    return g + 8 * (e >> 1), 2 * t + (e & 1)


def _a8(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    return g + 8 * (e >> 2 & 1), 4 * t + (e & 3) + 16 * (e >> 3)


def _b8(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    return 4 * t + (e & 3) + 16 * (e >> 2), g


def _a_tf32(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    return g + 8 * (e & 1), t + 4 * (e >> 1)


def _b_tf32(lane: int, e: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    return t + 4 * e, g


# 16-byte row padding: the 8 row addresses of one ldmatrix hit all 32 banks
MMA_F16 = MatrixInstr("mma.m16n8k16.f16", 16, 8, 16, "f16", "f16", "f32", 32, _a16, _b16, _acc,
                      a_pack=2, b_pack=2)
MMA_BF16 = MatrixInstr("mma.m16n8k16.bf16", 16, 8, 16, "bf16", "bf16", "f32", 32, _a16, _b16, _acc,
                       a_pack=2, b_pack=2)
# A rows padded by 4 words, B rows by 8: a warp's fragment reads hit 32 distinct banks
MMA_TF32 = MatrixInstr("mma.m16n8k8.tf32", 16, 8, 8, "tf32", "tf32", "f32", 32, _a_tf32, _b_tf32,
                       _acc, pad_bytes=(16, 32))
# int8 into int32 (wrapping, as Triton's integer dot): four bytes a register
MMA_S8 = MatrixInstr("mma.m16n8k32.s8", 16, 8, 32, "i8", "i8", "i32", 32, _a8, _b8, _acc,
                     a_pack=4, b_pack=4)
#: every supported architecture (sm_80+) has these
MATRIX_INSTRS = (MMA_F16, MMA_BF16, MMA_TF32, MMA_S8)
#: PTX's names of the instructions' types
_PTX_TYPES = {"i8": "s8", "i32": "s32"}


def emit_mma(b: ir.IRBuilder, instr: MatrixInstr, a: list, bregs: list, acc: list) -> list:
    """``mma.sync.aligned.mMnNkK.row.col.D.A.B.D`` as inline PTX (D: f32 or s32)."""
    integer = instr.acc_type == "i32"
    acc_type = I32 if integer else ir.FloatType()
    n_acc, n_a, n_b = len(acc), len(a), len(bregs)
    d, ta, tb = (_PTX_TYPES.get(t, t) for t in (instr.acc_type, instr.a_type, instr.b_type))

    def group(first: int, count: int) -> str:
        return "{" + ", ".join(f"${i}" for i in range(first, first + count)) + "}"
    asm = (f"mma.sync.aligned.m{instr.m}n{instr.n}k{instr.k}.row.col.{d}.{ta}.{tb}.{d} "
           f"{group(0, n_acc)}, {group(n_acc, n_a)}, {group(n_acc + n_a, n_b)}, "
           f"{group(n_acc + n_a + n_b, n_acc)};")
    constraints = ",".join(["=r" if integer else "=f"] * n_acc + ["r"] * (n_a + n_b) +
                           [str(i) for i in range(n_acc)])
    fty = ir.FunctionType(ir.LiteralStructType([acc_type] * n_acc), [I32] * (n_a + n_b) + [acc_type] * n_acc)
    call = b.asm(fty, asm, constraints, list(a) + list(bregs) + list(acc), side_effect=False)
    return [b.extract_value(call, i) for i in range(n_acc)]


def ldmatrix_x4(b: ir.IRBuilder, address: ir.Value, trans: bool) -> list:
    """Warp-wide load of four 8x8 matrices of 16-bit elements from shared memory: lane
    ``8q + r`` gives the address of row ``r`` of matrix ``q``; lane ``4g + t`` receives, as
    i32 ``q``, elements (g, 2t) and (g, 2t + 1) of matrix ``q`` ((2t, g) and (2t + 1, g)
    when ``trans``), the smaller column (row) in the low half."""
    i64 = ir.IntType(64)
    shape = ".trans" if trans else ""
    asm = f"ldmatrix.sync.aligned.m8n8.x4{shape}.shared.b16 {{$0, $1, $2, $3}}, [$4];"
    fty = ir.FunctionType(ir.LiteralStructType([I32] * 4), [i64])
    call = b.asm(fty, asm, "=r,=r,=r,=r,l", [b.ptrtoint(address, i64)], side_effect=True)
    return [b.extract_value(call, i) for i in range(4)]


def emulated_ldmatrix_x4(target: GpuTarget) -> Callable[[ir.IRBuilder, ir.Value, bool], list]:
    """``ldmatrix_x4`` written with ``target``'s generic hooks (``shuffle_idx`` and shared
    loads), for the host simulator: each lane fetches the row addresses it reads from the
    lanes that give them."""
    i16, i64 = ir.IntType(16), ir.IntType(64)
    pointer = ir.PointerType(addrspace=target.shared_address_space)

    def load(b: ir.IRBuilder, address: ir.Value, trans: bool) -> list:
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        bits = b.ptrtoint(address, i64)
        halves = b.trunc(bits, I32), b.trunc(b.lshr(bits, ir.Constant(i64, 32)), I32)
        lane = b.and_(target.thread_id(b), k32(31))
        g, t = b.lshr(lane, k32(2)), b.and_(lane, k32(3))

        def row_address(source: ir.Value) -> ir.Value:
            lo, hi = (target.shuffle_idx(b, h, source) for h in halves)
            joined = b.or_(b.zext(lo, i64), b.shl(b.zext(hi, i64), ir.Constant(i64, 32)))
            return b.inttoptr(joined, pointer)
        out = []
        for q in range(4):
            if not trans:
                row = row_address(b.add(k32(8 * q), g))
                out.append(b.load(b.gep(row, [t], source_etype=I32), typ=I32))
                continue
            first = b.add(k32(8 * q), b.mul(t, k32(2)))
            lo = b.load(b.gep(row_address(first), [g], source_etype=i16), typ=i16)
            hi = b.load(b.gep(row_address(b.add(first, k32(1))), [g], source_etype=i16), typ=i16)
            out.append(b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), k32(16))))
        return out
    return load


class LdmatrixFragments(FragmentLoader):
    """The A and B fragments of ``MMA_F16``/``MMA_BF16`` by ``ldmatrix.x4``.

    A: lane ``8q + r`` gives row ``r`` of matrix ``q`` = (instruction rows ``8 (q & 1)`` ..,
    columns ``8 (q >> 1)`` ..), which yields exactly a0..a3; B row-major (transposed on load):
    matrices (k, k + 8) x (tile s, tile s + 1) yield b0, b1 of two n-tiles; B column-major (a
    ``PaddedColumns`` slot: its columns are ldmatrix's rows, no transpose): matrices (tile s,
    tile s + 1) x (k, k + 8) yield the same registers.  Instruction row 8 is one repetition of
    the result layout further (``plan.offset``), wherever that is.  A must be row-major."""

    def __init__(self, load_x4: Callable[[ir.IRBuilder, ir.Value, bool], list]) -> None:
        self.load_x4 = load_x4

    def reads(self, a: OperandSource, b: OperandSource) -> bool:
        return a.col == 1                  # B row- or column-major

    def prepare(self, ctx: Any, plan: MatrixDotPlan, a: OperandSource, b: OperandSource) -> Any:
        bld = ctx.b
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        r = bld.and_(ctx.lane, k32(7))      # the row of an 8x8 matrix whose address I give
        q = bld.lshr(ctx.lane, k32(3))      # ... of matrix q of the four
        q_lo, q_hi = bld.and_(q, k32(1)), bld.lshr(q, k32(1))
        warp_m = warp_coordinate(ctx, plan.layout, 0)
        warp_n = warp_coordinate(ctx, plan.layout, 1)
        block_m, block_n = plan.geo.block(0), plan.geo.block(1)
        a_row = bld.add(bld.add(bld.mul(warp_m, k32(block_m)), r), bld.mul(q_lo, k32(plan.offset(0, 8))))
        a_lane = bld.add(bld.mul(a_row, k32(a.row)), bld.mul(q_hi, k32(8)))
        b_col = bld.mul(warp_n, k32(block_n))
        if b.col != 1:                      # column-major: ldmatrix rows are B's columns
            pair_n = bld.add(bld.add(b_col, r), bld.mul(q_hi, k32(plan.tile_stride(1))))
            b_pair = bld.add(bld.mul(pair_n, k32(b.col)), bld.mul(q_lo, k32(8)))
            b_single = bld.add(bld.mul(bld.add(b_col, r), k32(b.col)), bld.mul(q_lo, k32(8)))
            return plan, a, a_lane, b, b_pair, b_single
        b_k = bld.add(r, bld.mul(q_lo, k32(8)))
        b_pair = bld.add(bld.mul(b_k, k32(b.row)), bld.add(b_col, bld.mul(q_hi, k32(plan.tile_stride(1)))))
        b_single = bld.add(bld.mul(b_k, k32(b.row)), b_col)
        return plan, a, a_lane, b, b_pair, b_single

    @staticmethod
    def _at(ctx: Any, src: OperandSource, lane: ir.Value, offset: int) -> ir.Value:
        b = ctx.b
        return b.gep(src.base, [b.add(lane, ir.Constant(I32, offset))], source_etype=ir.IntType(16))

    def load_a(self, ctx: Any, state: Any, kk: int) -> list:
        plan, a, a_lane = state[:3]
        return [self.load_x4(ctx.b, self._at(ctx, a, a_lane, i * plan.tile_stride(0) * a.row + kk), False)
                for i in range(plan.tiles(0))]

    def load_b(self, ctx: Any, state: Any, kk: int) -> list:
        plan, _, _, b, b_pair, b_single = state
        tiles = plan.tiles(1)
        frags = []
        for s in range(0, tiles, 2):
            single = s + 1 == tiles
            offset = kk * b.row + s * plan.tile_stride(1) * b.col
            regs = self.load_x4(ctx.b, self._at(ctx, b, b_single if single else b_pair, offset),
                                b.col == 1)
            frags += [regs[0:2]] if single else [regs[0:2], regs[2:4]]
        return frags
