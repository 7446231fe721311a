"""Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a) as a dot strategy of the NVIDIA target.

When both operands of an fp16/bf16 dot come through the shared-memory pipeline (each feeding
only that dot), ``WarpgroupDot`` asks for its own buffer layouts -- the canonical layouts
the instruction reads by descriptor, without swizzling -- and runs the dot with
``wgmma.m64nNk16`` per 64-row M-tile and K step:

* ``WarpgroupA``: the K-major layout of an ``M x K`` operand: 8 x 8 core matrices of 128
  bytes, the K-chunks of one 8-row group side by side (leading byte offset 128), row groups
  ``16 K`` bytes apart; rows are permuted so that warpgroup row ``16 w + 8 h + g`` holds the
  accumulator layout's row of warp ``w``, repetition ``h``, lane row ``g`` (``warpgroup_row``);
* ``WarpgroupB``: the MN-major layout of a ``K x N`` operand: 8 x 8 core matrices (8
  N-elements a 16-byte row, 8 K-rows), N-groups ``B_GROUP`` = 144 bytes apart (the stride
  byte offset: 16 bytes of padding, so a warp's copies of one K-row's chunks spread over all
  banks), K-groups ``144 N / 8`` bytes apart.

The accumulator keeps the ``mma.m16n8k16`` accumulator layout with every warp along M, whose
rows the A buffer was permuted to match.  Waiting for these buffers' copies adds
``fence.proxy.async`` (their reader is the async proxy).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from llvmlite import ir

from anytile.codegen.gpu import DotPlan, DotStrategy, SharedBufferLayout, acc_layout, acc_slots, geometry
from anytile.codegen.gpu.registers import Regs
from anytile.codegen.gpu.shared_ops import SharedLoadOp, register_buffer_layout
from anytile.ir import ops
from anytile.ir.types import ScalarType, elem_type, shape_of

from .matrix import MMA_F16

__all__ = ["WarpgroupDot", "WarpgroupA", "WarpgroupB", "warpgroup_row", "warpgroup_fits", "B_GROUP"]

I32 = ir.IntType(32)
I8 = ir.IntType(8)
#: bytes between the 8 x 8 core matrices of neighbouring N-groups of a ``WarpgroupB`` buffer
B_GROUP = 144


def warpgroup_row(m: int, warps: int) -> int:
    """The shared-memory row of accumulator row ``m`` in a ``WarpgroupA`` buffer: the
    accumulator layout puts row ``m`` in repetition ``m // (8 W)``, warp ``m % (8 W) // 8``,
    lane row ``m % 8``; warpgroup ``G`` of M-tile ``i`` (two repetitions) reads rows
    ``64 (i G_count + G) .. + 64`` in its own order."""
    groups = warps // 4
    rep, rest = divmod(m, 8 * warps)
    warp, g = divmod(rest, 8)
    tile, half = divmod(rep, 2)
    group, w = divmod(warp, 4)
    return (tile * groups + group) * 64 + 16 * w + 8 * half + g


def _core_matrix_offset(b: ir.IRBuilder, row: ir.Value, col: ir.Value, row_stride: int,
                        col_stride: int) -> ir.Value:
    """Byte offset of 16-bit element (row, col) in a grid of 8 x 8 core matrices (16-byte
    rows) ``row_stride``/``col_stride`` bytes apart."""
    k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
    return b.add(b.add(b.mul(b.lshr(row, k32(3)), k32(row_stride)),
                       b.mul(b.lshr(col, k32(3)), k32(col_stride))),
                 b.add(b.mul(b.and_(row, k32(7)), k32(16)), b.mul(b.and_(col, k32(7)), k32(2))))


@dataclass(frozen=True)
class WarpgroupA(SharedBufferLayout):
    """The A operand's layout (see the module docstring); ``warps``: the program's warps."""

    warps: int
    async_readers = True

    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        return (shape[0] * shape[1] * elem.nbytes + 15) // 16 * 16

    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        row = self._row(b, coord[0])
        return b.gep(slot, [_core_matrix_offset(b, row, coord[1], 16 * shape[1], 128)], source_etype=I8)

    def _row(self, b: ir.IRBuilder, m: ir.Value) -> ir.Value:
        """``warpgroup_row`` on an i32 value (``warps`` a power of two)."""
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        warps = self.warps
        rep, rest = b.udiv(m, k32(8 * warps)), b.urem(m, k32(8 * warps))
        warp, g = b.lshr(rest, k32(3)), b.and_(rest, k32(7))
        tile, half = b.lshr(rep, k32(1)), b.and_(rep, k32(1))
        group, w = b.lshr(warp, k32(2)), b.and_(warp, k32(3))
        block = b.add(b.mul(tile, k32(warps // 4)), group)
        return b.add(b.add(b.mul(block, k32(64)), b.mul(w, k32(16))), b.add(b.mul(half, k32(8)), g))

    def problem(self, shape: tuple[int, ...], elem: ScalarType) -> Optional[str]:
        if self.warps < 4 or self.warps % 4:
            return f"needs whole warpgroups (a multiple of 4 warps), found {self.warps}"
        return None

    def __str__(self) -> str:
        return f"wgmma-a warps {self.warps}"

    @classmethod
    def parse(cls, text: str) -> "WarpgroupA":
        words = text.split()
        if len(words) != 3 or words[1] != "warps" or not words[2].isdigit():
            raise ValueError(f"malformed buffer layout {text!r}: expected 'wgmma-a warps W'")
        return cls(int(words[2]))


@dataclass(frozen=True)
class WarpgroupB(SharedBufferLayout):
    """The B operand's layout (see the module docstring)."""

    async_readers = True

    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        return shape[0] // 8 * (shape[1] // 8) * B_GROUP

    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        offset = _core_matrix_offset(b, coord[0], coord[1], shape[1] // 8 * B_GROUP, B_GROUP)
        return b.gep(slot, [offset], source_etype=I8)

    def __str__(self) -> str:
        return "wgmma-b"

    @classmethod
    def parse(cls, text: str) -> "WarpgroupB":
        if text.strip() != "wgmma-b":
            raise ValueError(f"malformed buffer layout {text!r}: expected 'wgmma-b'")
        return cls()


register_buffer_layout("wgmma-a", WarpgroupA.parse)
register_buffer_layout("wgmma-b", WarpgroupB.parse)


def warpgroup_fits(op: ops.DotOp, num_warps: int) -> bool:
    """Whether a warpgroup MMA can compute ``op`` with ``num_warps`` warps, all along M:
    fp16/bf16 into f32, M a multiple of 64 per warpgroup, N a multiple of 8 up to 256, K of
    16."""
    a, acc = elem_type(op.a.type), elem_type(op.acc.type)
    if a.name not in ("f16", "bf16") or elem_type(op.b.type) != a or acc.name != "f32":
        return False
    (m, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
    return num_warps % 4 == 0 and m % (16 * num_warps) == 0 and n % 8 == 0 and n <= 256 and k % 16 == 0


def _buffer_layout(v: Any) -> Optional[SharedBufferLayout]:
    owner = v.owner
    return owner.buffer.type.layout if isinstance(owner, SharedLoadOp) else None


class WarpgroupDot(DotStrategy):
    """Dots whose operands both sit in ``WarpgroupA``/``WarpgroupB`` pipeline buffers."""

    def plan(self, op: ops.DotOp, num_warps: int) -> Optional[DotPlan]:
        if isinstance(_buffer_layout(op.a), WarpgroupA) and isinstance(_buffer_layout(op.b), WarpgroupB):
            return DotPlan(self, acc_layout(MMA_F16, (num_warps, 1)))
        return None

    def operand_buffers(self, op: ops.DotOp, num_warps: int, both: bool) -> Optional[tuple]:
        if both and warpgroup_fits(op, num_warps):
            return WarpgroupA(num_warps), WarpgroupB()
        return None

    def lower(self, ctx: Any, op: ops.DotOp, plan: DotPlan) -> None:
        """Each warpgroup runs ``wgmma.m64nNk16`` per 64-row M-tile and K step, reading A and
        B by descriptor; the results are valid after one commit-and-wait at the end."""
        b = ctx.b
        ctx.features.add("wgmma")
        layout = plan.layout
        groups = ctx.laid.num_warps // 4
        elem = elem_type(op.a.type)
        (M, K), (_, N) = shape_of(op.a.type), shape_of(op.b.type)
        acc = ctx.tile(op.acc, layout)
        a_view, b_view = ctx.shared_views[op.a], ctx.shared_views[op.b]
        i64 = ir.IntType(64)
        k64 = lambda v: ir.Constant(i64, v)  # noqa: E731

        def descriptor(address: ir.Value, leading: int, stride: int) -> ir.Value:
            start = b.lshr(b.and_(b.ptrtoint(address, i64), k64(0x3FFFF)), k64(4))
            return b.or_(start, k64(((leading >> 4) << 16) | ((stride >> 4) << 32)))
        group = b.lshr(ctx.warp, ir.Constant(I32, 2))
        geo = geometry(MMA_F16)
        regs_along_n = layout.registers_along((M, N), 1)
        values = list(acc.values)
        touched: list[int] = []
        _fence(b)
        for i in range(M // (64 * groups)):
            slots = []
            for s in range(N // 8):
                slots += acc_slots(geo, i, s, regs_along_n)
            current = [values[x] for x in slots]
            block = b.add(b.mul(ir.Constant(I32, i), ir.Constant(I32, groups)), group)
            a_tile = b.gep(a_view.base, [b.mul(block, ir.Constant(I32, 8 * 16 * K))], source_etype=I8)
            for kk in range(0, K, 16):
                a_at = b.gep(a_tile, [ir.Constant(I32, kk * 16)], source_etype=I8)
                k_groups = N // 8 * B_GROUP      # bytes between B's 8-row K-groups
                b_at = b.gep(b_view.base, [ir.Constant(I32, kk // 8 * k_groups)], source_etype=I8)
                current = _mma_m64k16(b, elem.name, N, descriptor(a_at, 128, 16 * K),
                                      descriptor(b_at, k_groups, B_GROUP), current)
            for x, v in zip(slots, current):
                values[x] = v
            touched += slots
        done = _commit_and_wait(b, [values[x] for x in touched])
        for x, v in zip(touched, done):
            values[x] = v
        ctx.set_result(op, Regs(layout, (M, N), values))


def _mma_m64k16(b: ir.IRBuilder, in_type: str, n: int, desc_a: ir.Value, desc_b: ir.Value,
                acc: list) -> list:
    """Start one warpgroup-wide ``D = A @ B + D`` on a 64 x ``n`` x 16 tile, A K-major and B
    N-major in shared memory; ``acc``: the thread's ``n / 2`` floats."""
    f32 = ir.FloatType()
    count = n // 2
    regs = ", ".join(f"${i}" for i in range(count))
    # scale-d is a predicate: always accumulate; A K-major (0), B N-major (1)
    asm = ("{ .reg .pred p; setp.ne.b32 p, $" + str(count + 2) + ", 0; "
           f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{in_type}.{in_type} "
           f"{{{regs}}}, ${count}, ${count + 1}, p, 1, 1, 0, 1; }}")
    constraint = ",".join(["=f"] * count + ["l", "l", "r"] + [str(i) for i in range(count)])
    fty = ir.FunctionType(ir.LiteralStructType([f32] * count), [ir.IntType(64)] * 2 + [I32] + [f32] * count)
    call = b.asm(fty, asm, constraint, [desc_a, desc_b, ir.Constant(I32, 1)] + list(acc), side_effect=True)
    return [b.extract_value(call, i) for i in range(count)]


def _fence(b: ir.IRBuilder) -> None:
    """Order register writes before the next warpgroup MMAs."""
    b.asm(ir.FunctionType(ir.VoidType(), []), "wgmma.fence.sync.aligned;", "~{memory}", [],
          side_effect=True)


def _commit_and_wait(b: ir.IRBuilder, acc: list) -> list:
    """Close the group of warpgroup MMAs and wait for it; ``acc`` pass through (their values
    are those the MMAs wrote)."""
    f32 = ir.FloatType()
    count = len(acc)
    asm = "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;"
    constraint = ",".join(["=f"] * count + [str(i) for i in range(count)] + ["~{memory}"])
    fty = ir.FunctionType(ir.LiteralStructType([f32] * count), [f32] * count)
    call = b.asm(fty, asm, constraint, list(acc), side_effect=True)
    return [b.extract_value(call, i) for i in range(count)]
