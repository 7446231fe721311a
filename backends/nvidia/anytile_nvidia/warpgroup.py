"""Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a) as a dot strategy of the NVIDIA target.

When both operands of an fp16/bf16 dot come through the shared-memory pipeline (each feeding
only that dot), ``WarpgroupDot`` asks for buffers in the layout the instruction reads by
descriptor, ``SwizzledPanels``, and runs the dot with ``wgmma.m64nNk16`` per 64-row M-tile and
K step: A K-major, B N-major (both are row-major tiles, rows along their last dimension).

``SwizzledPanels``: a ``R x C`` tile of 16-bit elements cut into panels ``width`` bytes wide
(32, 64 or 128: the swizzle's span), each panel ``R`` rows of ``width`` bytes one after the
other; inside a panel, the 16-byte chunk ``j`` of row ``r`` sits at chunk
``j ^ (r // (128 / width)) % (width / 16)`` -- bits 4.. of the byte offset XOR bits 7.. of it,
the hardware's swizzle, applied to the address, so slots are 1024-byte aligned.  Eight rows
(one *atom*) of a panel then cover all 32 banks whatever their chunk, so neither the 16-byte
copies into a slot nor the MMA's reads conflict.  A's rows are permuted (``warpgroup_row``):
warpgroup row ``16 w + 8 h + g`` holds the accumulator layout's row of warp ``w``, repetition
``h``, lane row ``g``, so the accumulator keeps the ``mma.m16n8k16`` layout with every warp
along M.

float8 dots (e4m3, e5m2, mixed: the operands ``narrow.py`` gives back to a dot the language
widened) run as ``wgmma.m64nNk32`` from panels of 8-bit elements (``elem_bytes`` 1): the
instruction reads 8-bit operands K-major only, so B's slot is the column-major one (B read
along K, as ``x @ W.T`` and Triton's float8 matmuls hold it), and A always comes from shared
memory (staged there when computed).

int8 dots into int32 run as ``wgmma.m64nNk32.s32.s8.s8`` from the same 8-bit panels, and only
where B is loaded along K (``x @ W.T`` with ``W`` stored N x K, the layout of quantised
weights; ``DotStrategy.reads_k_major``): a B read along N stays on ``mma.sync``, which takes
it from registers, as the instruction cannot read 8-bit B N-major.

Descriptors (the matrix-descriptor format of the PTX ISA): the start address, the *leading*
byte offset (between panels: ``R * width``) and the *stride* byte offset (between the 8-row
atoms along the other dimension: ``8 * width``) in 16-byte units, and the swizzle mode.

In a pipelined loop whose accumulator only this dot reads and updates, the MMAs stay in
flight: each iteration waits only for the previous iteration's group (``wgmma.wait_group 1``),
so the next copies, address arithmetic and the next MMAs overlap it; the buffers say
``reads_in_flight = 1``, so the pipeline keeps one more slot and never copies into a slot an
MMA still reads, and the loop's exit waits for the last group.  Elsewhere a dot waits for its
own group.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Optional

from llvmlite import ir

from anytile.codegen.gpu import (DotPlan, DotStrategy, SharedBufferLayout, acc_layout, acc_slots, geometry,
                                 register_table)
from anytile.codegen.gpu.pipeline import accumulates_in_place
from anytile.codegen.gpu.registers import Regs, coords
from anytile.codegen.gpu.scratch import aligned_scratch
from anytile.codegen.gpu.shared import SharedView
from anytile.codegen.gpu.shared_ops import SharedLoadOp, register_buffer_layout
from anytile.codegen.llvm.types import intrinsic
from anytile.ir import ops
from anytile.ir.types import FLOAT8, ScalarType, elem_type, scalar_type, shape_of

from .matrix import MMA_F16

__all__ = ["WarpgroupDot", "WarpgroupInstructions", "SwizzledPanels", "warpgroup_row", "warpgroup_fits", "swizzle_width",
           "SWIZZLE_MODES"]

I32 = ir.IntType(32)
I8 = ir.IntType(8)
#: panel width in bytes -> the descriptor's swizzle mode (bits 62-63)
SWIZZLE_MODES = {128: 1, 64: 2, 32: 3}


def swizzle_width(row_bytes: int) -> Optional[int]:
    """The widest panel (swizzle span) that divides rows of ``row_bytes``, or ``None``."""
    return next((w for w in (128, 64, 32) if row_bytes % w == 0), None)


def warpgroup_row(m: int, warps: int) -> int:
    """The shared-memory row of accumulator row ``m`` in an A buffer: the accumulator layout
    puts row ``m`` in repetition ``m // (8 W)``, warp ``m % (8 W) // 8``, lane row ``m % 8``;
    warpgroup ``G`` of M-tile ``i`` (two repetitions) reads rows ``64 (i G_count + G) .. + 64``
    in its own order."""
    groups = warps // 4
    rep, rest = divmod(m, 8 * warps)
    warp, g = divmod(rest, 8)
    tile, half = divmod(rep, 2)
    group, w = divmod(warp, 4)
    return (tile * groups + group) * 64 + 16 * w + 8 * half + g


def swizzled_offset(row: int, col_byte: int, rows: int, width: int) -> int:
    """Byte offset of byte ``col_byte`` of (already permuted) row ``row`` in a
    ``SwizzledPanels`` slot of ``rows`` rows and panels ``width`` bytes wide."""
    panel, inside = divmod(col_byte, width)
    linear = panel * rows * width + row * width + inside
    return linear ^ (((linear >> 7) & (width // 16 - 1)) << 4)


@dataclass(frozen=True)
class SwizzledPanels(SharedBufferLayout):
    """A warpgroup MMA operand's slot (see the module docstring): panels ``width`` bytes
    wide; ``warps`` > 0 permutes rows as ``warpgroup_row`` says for a program of that many
    warps (the A operand), 0 keeps them (B); ``columns``: the tile is kept transposed, its
    columns as the panels' rows (a B read from global memory along K, which the MMA then
    reads K-major)."""

    width: int
    warps: int = 0
    reads_in_flight: int = 1
    columns: bool = False
    #: bytes an element: 2 (f16, bf16) or 1 (float8, int8: the MMA reads them K-major)
    elem_bytes: int = 2
    async_readers = True
    alignment = 1024

    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        return -(-shape[0] * shape[1] * elem.nbytes // 1024) * 1024

    def stored(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """(rows, columns) of the panels' rows: the tile's, or transposed with ``columns``."""
        return (shape[1], shape[0]) if self.columns else (shape[0], shape[1])

    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        row, col = (coord[1], coord[0]) if self.columns else (coord[0], coord[1])
        row = self._row(b, row) if self.warps else row
        per_row = self.width // self.elem_bytes           # elements of a panel's row
        panel, inside = b.lshr(col, k32(per_row.bit_length() - 1)), b.and_(col, k32(per_row - 1))
        rows = self.stored(shape)[0]
        linear = b.add(b.add(b.mul(panel, k32(rows * self.width)), b.mul(row, k32(self.width))),
                       b.shl(inside, k32(self.elem_bytes.bit_length() - 1)))
        phase = b.and_(b.lshr(linear, k32(7)), k32(self.width // 16 - 1))
        return b.gep(slot, [b.xor(linear, b.shl(phase, k32(4)))], source_etype=I8)

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

    def contiguous_dim(self, shape: tuple[int, ...]) -> Optional[int]:
        return 0 if self.columns else 1

    def along_columns(self, shape: tuple[int, ...]) -> SharedBufferLayout:
        width = swizzle_width(self.elem_bytes * shape[0]) if len(shape) == 2 else None
        if self.warps or self.columns or width is None:
            return self            # A stays M-major: its transposed reads go element-wise
        return dataclasses.replace(self, width=width, columns=True)

    def transposed(self, shape: tuple[int, ...]) -> Optional[SharedBufferLayout]:
        # the panels' rows read as the other dimension's: B's N-major and K-major views of
        # one slot; A's rows are permuted for the warps and have no transposed view
        if self.warps or len(shape) != 2:
            return None
        return dataclasses.replace(self, columns=not self.columns)

    def problem(self, shape: tuple[int, ...], elem: ScalarType) -> Optional[str]:
        if self.width not in SWIZZLE_MODES:
            return f"panels are 32, 64 or 128 bytes wide, not {self.width}"
        if len(shape) != 2 or elem.nbytes != self.elem_bytes or self.elem_bytes not in (1, 2):
            return f"holds 2-D tiles of {8 * self.elem_bytes}-bit elements, not {len(shape)}-D ones of {elem}"
        if self.warps and self.columns:
            return "an A operand (rows permuted for the warps) is kept row-major"
        rows, cols = self.stored(shape)
        if rows % 8 or cols * self.elem_bytes % self.width:
            return f"a {shape[0]} x {shape[1]} tile is not whole 8-row atoms of {self.width}-byte panels"
        if self.warps and (self.warps % 4 or shape[0] % 64):
            return f"needs whole warpgroups (a multiple of 4 warps) and 64-row M-tiles, " \
                   f"found {self.warps} warps and {shape[0]} rows"
        return None

    def __str__(self) -> str:
        return f"swizzle {self.width}" + (" columns" if self.columns else "") + \
            (f" warps {self.warps}" if self.warps else "") + f" in-flight {self.reads_in_flight}" + \
            (f" bytes {self.elem_bytes}" if self.elem_bytes != 2 else "")

    @classmethod
    def parse(cls, text: str) -> "SwizzledPanels":
        words = text.split()
        columns = "columns" in words[2:3]
        if columns:
            words = words[:2] + words[3:]
        fields = dict(zip(words[2::2], words[3::2]))
        if len(words) % 2 or words[0] != "swizzle" or not words[1].isdigit() or \
                not set(fields) <= {"warps", "in-flight", "bytes"} or \
                not all(v.isdigit() for v in fields.values()):
            raise ValueError(f"malformed buffer layout {text!r}: expected "
                             f"'swizzle W [columns] [warps N] [in-flight K] [bytes B]'")
        return cls(int(words[1]), int(fields.get("warps", 0)), int(fields.get("in-flight", 1)),
                   columns, int(fields.get("bytes", 2)))


register_buffer_layout("swizzle", SwizzledPanels.parse)

#: a number for each lowered warpgroup dot (``WarpgroupInstructions.mma``'s ``site``)
_SITES = itertools.count()


#: the instruction's names of the element types it reads
PTX_TYPES = {"f16": "f16", "bf16": "bf16", "f8e4m3": "e4m3", "f8e5m2": "e5m2", "i8": "s8"}


def k_step(elem: ScalarType) -> int:
    """The K of one warpgroup MMA on ``elem`` operands: 32 bytes of each row."""
    return 32 // elem.nbytes


def warpgroup_fits(op: ops.DotOp, num_warps: int) -> bool:
    """Whether a warpgroup MMA can compute ``op`` with ``num_warps`` warps (``_fits``)."""
    return _fits(elem_type(op.a.type), elem_type(op.b.type), op, num_warps)


def _fits(a: ScalarType, b: ScalarType, op: ops.DotOp, num_warps: int) -> bool:
    """Whether a warpgroup MMA can compute ``op`` read as ``a`` and ``b`` elements, all along
    M: fp16/bf16 (or two float8 types) into f32, or int8 into i32, M a multiple of 64 per
    warpgroup, N a multiple of 16 up to 256, K of the instruction's K (16, or 32 for 8-bit
    types)."""
    acc = "i32" if a.is_int else "f32"
    if a.name not in PTX_TYPES or b.name not in PTX_TYPES or elem_type(op.acc.type).name != acc or \
            (a != b and not (a.is_float8 and b.is_float8)) or \
            len(shape_of(op.a.type)) != 2:        # batched (3-D) dots: mma.sync
        return False
    (m, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
    return num_warps % 4 == 0 and m % (16 * num_warps) == 0 and n % 16 == 0 and n <= 256 and \
        k % k_step(a) == 0


def _narrow(op: ops.DotOp) -> bool:
    return elem_type(op.a.type).nbytes == 1


def _integer(op: ops.DotOp) -> bool:
    return elem_type(op.a.type).is_int


def operand_layouts(op: ops.DotOp, num_warps: int, in_flight: int = 1) -> tuple:
    """The ``SwizzledPanels`` of ``op``'s A and B: A K-major, rows permuted for the warps;
    B N-major, or K-major (``columns``) for 8-bit types, which the MMA reads K-major only."""
    (_, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
    size = elem_type(op.a.type).nbytes
    a = SwizzledPanels(swizzle_width(size * k), num_warps, in_flight, elem_bytes=size)
    if size == 1:
        return a, SwizzledPanels(swizzle_width(k), 0, in_flight, columns=True, elem_bytes=1)
    return a, SwizzledPanels(swizzle_width(2 * n), 0, in_flight)


def _buffer_layout(v: Any) -> Optional[SharedBufferLayout]:
    owner = v.owner
    return owner.view_layout if isinstance(owner, SharedLoadOp) else None


class WarpgroupInstructions:
    """The warpgroup MMA's instructions as PTX (inline assembly); the host simulator has an
    emulation with the same methods (``warpgroup_sim.py``)."""

    def descriptor(self, b: ir.IRBuilder, address: ir.Value, leading: int, width: int) -> ir.Value:
        """The matrix descriptor of a ``SwizzledPanels`` operand starting at ``address``:
        panels ``leading`` bytes apart, 8-row atoms ``8 width`` bytes apart, ``width``-byte
        swizzle."""
        i64 = ir.IntType(64)
        start = b.lshr(b.and_(b.ptrtoint(address, i64), ir.Constant(i64, 0x3FFFF)), ir.Constant(i64, 4))
        fields = ((leading >> 4) << 16) | ((8 * width >> 4) << 32) | (SWIZZLE_MODES[width] << 62)
        return b.or_(start, ir.Constant(i64, fields))

    def fence(self, b: ir.IRBuilder) -> None:
        """Order register writes before the next warpgroup MMAs."""
        b.asm(ir.FunctionType(ir.VoidType(), []), "wgmma.fence.sync.aligned;", "~{memory}", [],
              side_effect=True)

    def mma(self, b: ir.IRBuilder, in_types: tuple[str, str], n: int, a: Any, desc_b: ir.Value,
            b_k_major: bool, acc: list, place: int, site: int) -> list:
        """Start one warpgroup-wide ``D = A @ B + D`` on a 64 x ``n`` x K tile (K: 32 bytes of
        the element types ``in_types``, the IR's names of A's and B's): ``a`` is A's
        descriptor (K-major in shared memory) or the thread's four A registers (two 16-bit
        elements each, the ``mma.m16n8k16`` A fragment of its warp's 16 rows); B in shared
        memory, K-major with ``b_k_major`` (always, for 8-bit types), else N-major.  ``acc``:
        the thread's ``n / 2`` floats (or 32-bit integers, for int8), found from ``place`` on
        in the list the waits of the dot ``site`` (a number for each lowered dot) pass (what
        an emulation needs)."""
        acc_t, reg, d_type = _acc_kind(acc)
        count = n // 2
        ta, tb = (PTX_TYPES[t] for t in in_types)
        k = k_step(scalar_type(in_types[0]))
        regs = ", ".join(f"${i}" for i in range(count))
        in_registers = isinstance(a, list)
        a_text = "{" + ", ".join(f"${count + i}" for i in range(4)) + "}" if in_registers else f"${count}"
        b_at = count + (4 if in_registers else 1)
        # scale-d is a predicate: always accumulate; scales of A and B 1 (floating point
        # only); the transposes (16-bit types only): A K-major (trans-a 0), B as said
        if d_type == "s32":
            trans = ""
        elif k == 32:
            trans = ", 1, 1"
        else:
            trans = f", 1, 1, {0 if b_k_major else 1}" if in_registers else f", 1, 1, 0, {0 if b_k_major else 1}"
        asm = ("{ .reg .pred p; setp.ne.b32 p, $" + str(b_at + 1) + ", 0; "
               f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{d_type}.{ta}.{tb} "
               f"{{{regs}}}, {a_text}, ${b_at}, p{trans}; }}")
        a_args = list(a) if in_registers else [a]
        constraint = ",".join([reg] * count + (["r"] * 4 if in_registers else ["l"]) + ["l", "r"] +
                              [str(i) for i in range(count)])
        fty = ir.FunctionType(ir.LiteralStructType([acc_t] * count),
                              [x.type for x in a_args] + [ir.IntType(64), I32] + [acc_t] * count)
        call = b.asm(fty, asm, constraint, a_args + [desc_b, ir.Constant(I32, 1)] + list(acc),
                     side_effect=True)
        return [b.extract_value(call, i) for i in range(count)]

    def float8_pair(self, b: ir.IRBuilder, elem: ScalarType, lo: ir.Value,
                    hi: ir.Value) -> Optional[ir.Value]:
        """The float8 codes of f32 values ``lo`` and ``hi`` (rounded to nearest even) in the
        low and high byte of an i16, by one conversion instruction (sm_89 on), or ``None``
        where there is none for ``elem``.  The instruction saturates; the IR's cast does not
        (past the largest value: infinity for e5m2, NaN for e4m3), so those codes are put
        back."""
        fmt = {"f8e5m2": "e5m2x2", "f8e4m3": "e4m3x2"}.get(elem.name)
        if fmt is None:
            return None
        i16 = ir.IntType(16)
        pair = b.asm(ir.FunctionType(i16, [ir.FloatType()] * 2), f"cvt.rn.satfinite.{fmt}.f32 $0, $1, $2;",
                     "=h,f,f", [hi, lo], side_effect=False)
        return _unsaturated(b, elem, pair, (lo, hi))

    def commit(self, b: ir.IRBuilder) -> None:
        """Close the group of warpgroup MMAs this thread issued since the last commit."""
        b.asm(ir.FunctionType(ir.VoidType(), []), "wgmma.commit_group.sync.aligned;", "~{memory}",
              [], side_effect=True)

    def wait(self, b: ir.IRBuilder, acc: list, pending: int, site: int) -> list:
        """Wait until at most ``pending`` groups are in flight, the accumulator registers of
        the dot ``site`` passed through (so nothing reads them before; once waited for, their
        values are those the MMAs wrote)."""
        acc_t, reg, _ = _acc_kind(acc)
        count = len(acc)
        asm = f"wgmma.wait_group.sync.aligned {pending};"
        constraint = ",".join([reg] * count + [str(i) for i in range(count)] + ["~{memory}"])
        fty = ir.FunctionType(ir.LiteralStructType([acc_t] * count), [acc_t] * count)
        call = b.asm(fty, asm, constraint, list(acc), side_effect=True)
        return [b.extract_value(call, i) for i in range(count)]


class WarpgroupDot(DotStrategy):
    """fp16/bf16 dots on the warpgroup MMA when the pipeline keeps an operand in a
    ``SwizzledPanels`` buffer (see the module docstring), emitted with ``unit``'s
    instructions (PTX by default).  A may come from registers instead, when every thread
    already holds its fragments (a chained dot's ``p``); an operand in neither place is
    written to the scratch space, swizzled, first."""

    def __init__(self, unit: Optional[WarpgroupInstructions] = None) -> None:
        self.unit = unit or WarpgroupInstructions()

    def plan(self, op: ops.DotOp, num_warps: int) -> Optional[DotPlan]:
        a, b = _buffer_layout(op.a), _buffer_layout(op.b)
        # a float8 dot has no other matrix instruction: it stages what is not in a buffer;
        # an int8 one has ``mma.sync`` when neither operand is
        if a is None and b is None and (not _narrow(op) or _integer(op)) or \
                not warpgroup_fits(op, num_warps):
            return None
        a_ok = a is None or isinstance(a, SwizzledPanels) and a.warps == num_warps
        b_ok = b is None or isinstance(b, SwizzledPanels) and not b.warps and \
            (b.columns or not _narrow(op))
        return DotPlan(self, acc_layout(MMA_F16, (num_warps, 1))) if a_ok and b_ok else None

    def operand_buffers(self, op: ops.DotOp, num_warps: int, both: bool) -> Optional[tuple]:
        return operand_layouts(op, num_warps) if warpgroup_fits(op, num_warps) else None

    def reads_narrow(self, op: ops.DotOp, num_warps: int, a: ScalarType, b: ScalarType) -> bool:
        return a.is_float8 and b.is_float8 and _fits(a, b, op, num_warps)

    def reads_k_major(self, op: ops.DotOp, num_warps: int) -> bool:
        # int8 (float8 dots narrow only where both operands are read along K)
        return _integer(op) and warpgroup_fits(op, num_warps)

    def lower(self, ctx: Any, op: ops.DotOp, plan: DotPlan) -> None:
        """Each warpgroup runs ``wgmma.m64nNkK`` per 64-row M-tile and K step, then commits
        them as one group; it waits for that group here, or, when both operands are pipeline
        slots and the loop around carries the accumulator through this dot alone, for the
        previous iteration's (the loop's exit waits for the last)."""
        b, unit = ctx.b, self.unit
        ctx.features.add("wgmma")
        layout = plan.layout
        warps = ctx.laid.num_warps
        groups = warps // 4
        elem, elem_b = elem_type(op.a.type), elem_type(op.b.type)
        size, step = elem.nbytes, k_step(elem)
        (M, K), (_, N) = shape_of(op.a.type), shape_of(op.b.type)
        acc = ctx.tile(op.acc, layout)
        a_view, b_view = ctx.shared_views.get(op.a), ctx.shared_views.get(op.b)
        # A from registers: the accumulator layout holds the 16-bit fragments of
        # ``mma.m16n8k16``, and the 8-bit ones after a swap inside each quad of lanes
        a_regs = None if a_view is not None else _a_fragments(ctx, op, warps)
        layouts = operand_layouts(op, warps, 0)
        staged = [(v, lay) for v, lay, needed in ((op.a, layouts[0], a_view is None and a_regs is None),
                                                  (op.b, layouts[1], b_view is None)) if needed]
        views = _stage(ctx, staged)
        a_view, b_view = views.get(op.a, a_view), views.get(op.b, b_view)
        wb, b_k_major = b_view.layout.width, b_view.layout.columns
        geo = geometry(MMA_F16)
        regs_along_n = layout.registers_along((M, N), 1)
        group = b.lshr(ctx.warp, ir.Constant(I32, 2))
        values = list(acc.values)
        touched: list[int] = []
        site = next(_SITES)
        # A's registers are written before the fence that orders them before the MMAs
        if size == 2:
            pack = _pack_fragment
        else:
            wide = _cast_from_f32(ctx, op.a)
            pack = lambda ctx, regs, i, kk: _pack_narrow_fragment(ctx, regs, i, kk, unit, wide)  # noqa: E731
        a_frags = {(i, kk): pack(ctx, a_regs, i, kk) for i in range(M // (64 * groups))
                   for kk in range(0, K, step)} if a_regs is not None else {}
        # one descriptor a slot, the MMAs' by a constant added to it
        b_tile = unit.descriptor(b, b_view.base, N * wb if b_k_major else K * wb, wb)
        unit.fence(b)
        for i in range(M // (64 * groups)):
            slots = []
            for s in range(N // 8):
                slots += acc_slots(geo, i, s, regs_along_n)
            current = [values[x] for x in slots]
            if a_regs is None:
                wa = a_view.layout.width
                block = b.add(b.mul(ir.Constant(I32, i), ir.Constant(I32, groups)), group)
                a_tile = unit.descriptor(b, _at(b, a_view.base, b.mul(block, ir.Constant(I32, 64 * wa))),
                                         M * wa, wa)
            for kk in range(0, K, step):
                if a_regs is None:
                    panel, inside = divmod(size * kk, wa)
                    a = _shifted(b, a_tile, panel * M * wa + inside)
                else:
                    a = a_frags[(i, kk)]
                if b_k_major:        # N rows of K: like A's
                    panel, inside = divmod(size * kk, wb)
                    desc_b = _shifted(b, b_tile, panel * N * wb + inside)
                else:
                    desc_b = _shifted(b, b_tile, kk * wb)
                current = unit.mma(b, (elem.name, elem_b.name), N, a, desc_b, b_k_major, current,
                                   len(touched), site)
            for x, v in zip(slots, current):
                values[x] = v
            touched += slots
        pipelined = a_regs is None and not views and \
            min(a_view.layout.reads_in_flight, b_view.layout.reads_in_flight) > 0
        loop = _carrying_loop(ctx, op) if pipelined else None
        unit.commit(b)

        def wait(regs: list, pending: int) -> list:
            """``regs`` once at most ``pending`` groups are left (passed in issue order)."""
            out = list(regs)
            for x, v in zip(touched, unit.wait(b, [regs[x] for x in touched], pending, site)):
                out[x] = v
            return out
        values = wait(values, 0 if loop is None else 1)
        ctx.set_result(op, Regs(layout, (M, N), values))
        if loop is not None:
            index = loop.body.terminator.values.index(op.result)
            ctx.at_loop_exit(loop, index, lambda regs: Regs(regs.layout, regs.shape,
                                                            wait(list(regs.values), 0)))


def _acc_kind(acc: list) -> tuple[ir.Type, str, str]:
    """(the LLVM type, the register constraint, the PTX type) of accumulator registers ``acc``:
    f32, or s32 (an int8 dot's)."""
    if isinstance(acc[0].type, ir.IntType):
        return I32, "=r", "s32"
    return ir.FloatType(), "=f", "f32"


def _a_fragments(ctx: Any, op: ops.DotOp, warps: int) -> Optional[tuple]:
    """(A's registers, the register of A's layout holding element ``e`` of the fragment of
    M-tile ``i`` at K offset ``kk``: a dict keyed ``(i, kk, e)``, A's element type) when every
    thread already holds its warpgroup MMA A fragments -- the ``mma.m16n8k16`` A fragment of
    its warp's 16 rows of each 64-row M-tile, rows in ``warpgroup_row``'s order -- else
    ``None``."""
    (M, K) = shape_of(op.a.type)
    logical = {warpgroup_row(m, warps): m for m in range(M)}
    groups = warps // 4

    def wanted(warp: int, lane: int):
        group, w = divmod(warp, 4)
        g, t = lane >> 2, lane & 3
        for i in range(M // (64 * groups)):
            for kk in range(0, K, 16):
                for e in range(8):
                    row = (i * groups + group) * 64 + 16 * w + g + 8 * (e >> 1 & 1)
                    yield (i, kk, e), (logical[row], kk + 2 * t + (e & 1) + 8 * (e >> 2))
    table = register_table(op.a.type.layout, (M, K), warps, 32, wanted)
    return None if table is None else (ctx.tile(op.a), table, elem_type(op.a.type))


def _cast_from_f32(ctx: Any, v: Any) -> Optional[Regs]:
    """The registers of the f32 tile ``v`` is a cast of, when it is one in ``v``'s layout
    (attention's ``p.to(float8)``), else ``None``."""
    cast = v.owner
    if not isinstance(cast, ops.CastOp) or elem_type(cast.src.type).name != "f32" or \
            cast.src.type.layout != v.type.layout:
        return None
    return ctx.tile(cast.src)


def _pack_fragment(ctx: Any, source: tuple, i: int, kk: int) -> list:
    """The four A registers of M-tile ``i`` at K offset ``kk`` (``_a_fragments``): two
    16-bit elements each, the first in the low half, converted two at a time."""
    b = ctx.b
    regs, table, elem = source
    return [b.bitcast(ctx.ew.pack_storage(elem, [regs.values[table[(i, kk, 2 * r + h)]] for h in (0, 1)]), I32)
            for r in range(4)]


def _pack_narrow_fragment(ctx: Any, source: tuple, i: int, kk: int, unit: Any = None,
                          wide: Optional[Regs] = None) -> list:
    """The four A registers of M-tile ``i`` at K offset ``kk`` (a multiple of 32) for 8-bit
    elements: register ``r`` holds row ``g + 8 (r % 2)``, columns ``kk + 16 (r // 2) + 4 t``
    and the three after (``g``, ``t``: the lane's row and column in its quad), while the
    thread holds (``_a_fragments``, in 16-column chunks) columns ``2 t``, ``2 t + 1`` and
    ``8 + 2 t``, ``9 + 2 t`` of each chunk.  Lane ``t`` needs the low or high pairs
    (``h = t // 2``) of lanes ``2 (t % 2)`` and ``2 (t % 2) + 1``: each lane packs its low
    pairs of both chunks in one word and its high pairs in another, and two shuffles of
    the quad, each lane read by one reader, bring them over.  ``wide``: the f32 registers
    A was cast from, in the same layout, which ``unit.float8_pair`` converts two at a time."""
    b, target = ctx.b, ctx.target
    regs, table, elem = source
    k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
    lane = ctx.lane
    t = b.and_(lane, k32(3))
    high = b.icmp_unsigned("!=", b.and_(t, k32(2)), k32(0))
    odd = b.icmp_unsigned("!=", b.and_(t, k32(1)), k32(0))
    # the quad's lane 2 (t % 2) + h: t with its two bits swapped; the other one, ^ 1
    swapped = b.or_(b.shl(b.and_(t, k32(1)), k32(1)), b.lshr(t, k32(1)))
    first_src = b.or_(b.and_(lane, k32(~3 & 0xFFFFFFFF)), swapped)
    second_src = b.xor(first_src, k32(1))

    def word(half: int, row: int) -> ir.Value:
        # columns 8 half + 2 t, + 1 of chunks kk and kk + 16, row g + 8 row
        es = [4 * half + 2 * row + c for c in (0, 1)]
        places = [table[(i, kk + 16 * c, e)] for c in (0, 1) for e in es]
        if wide is not None:          # converted from the f32 values by pairs
            pairs = [unit.float8_pair(b, elem, wide.values[places[p]], wide.values[places[p + 1]])
                     for p in (0, 2)]
            if None not in pairs:
                low16, high16 = (b.zext(x, I32) for x in pairs)
                return b.or_(low16, b.shl(high16, k32(16)))
        return b.bitcast(ctx.ew.pack_storage(elem, [regs.values[x] for x in places]), I32)
    out = {}
    for row in (0, 1):
        low, hi = word(0, row), word(1, row)
        # the reader of shuffle 1 wants this lane's low pairs when the lane is even
        x1 = target.shuffle_idx(b, b.select(odd, hi, low), first_src)
        x2 = target.shuffle_idx(b, b.select(odd, low, hi), second_src)
        first, second = b.select(high, x2, x1), b.select(high, x1, x2)
        out[row] = b.or_(b.and_(first, k32(0xFFFF)), b.shl(second, k32(16)))
        out[2 + row] = b.or_(b.lshr(first, k32(16)), b.and_(second, k32(0xFFFF0000)))
    return [out[r] for r in range(4)]


def _unsaturated(b: ir.IRBuilder, elem: ScalarType, pair: ir.Value, values: tuple) -> ir.Value:
    """``pair`` (two float8 codes from a saturating conversion of ``values``) with the code
    the IR's cast gives a value that rounds past the largest finite one: infinity (e5m2) or
    NaN (e4m3), signed."""
    _, _, largest, has_inf = FLOAT8[elem.name]
    m = elem.fp_mantissa_bits
    emax = int(largest).bit_length() - 1
    half_ulp = 2.0 ** (emax - m - 1)
    odd = int(largest) >> (emax - m) & 1          # a tie rounds up past an odd largest value
    special = 0x7C if has_inf else 0x7F
    i16, f32 = ir.IntType(16), ir.FloatType()
    fabs = intrinsic(b.module, "llvm.fabs", f32, [f32], [f32])
    for byte, v in enumerate(values):
        past = b.fcmp_ordered(">=" if odd else ">", b.call(fabs, [v]), ir.Constant(f32, largest + half_ulp))
        sign = b.trunc(b.and_(b.lshr(b.bitcast(v, I32), ir.Constant(I32, 24)), ir.Constant(I32, 0x80)), i16)
        code = b.shl(b.or_(sign, ir.Constant(i16, special)), ir.Constant(i16, 8 * byte))
        kept = b.and_(pair, ir.Constant(i16, 0xFF00 >> 8 * byte))
        pair = b.select(past, b.or_(kept, code), pair)
    return pair


def _stage(ctx: Any, operands: list) -> dict:
    """Write each (value, layout) of ``operands`` from registers into the scratch space, in
    ``layout`` from a 1024-byte aligned start; returns value -> ``SharedView``."""
    if not operands:
        return {}
    b = ctx.b
    sizes = [layout.slot_bytes(shape_of(v.type), elem_type(v.type)) for v, layout in operands]
    base = aligned_scratch(ctx, sum(sizes), 1024)
    ctx.target.barrier(b)            # whoever used the scratch space before is done with it
    views, offset = {}, 0
    for (v, layout), size in zip(operands, sizes):
        slot = _at(b, base, ir.Constant(I32, offset))
        regs = ctx.tile(v)
        storage = ctx.types.storage(elem_type(v.type))
        for value, coord in zip(regs.values, coords(ctx, regs.layout, regs.shape)):
            b.store(ctx.ew.to_storage(elem_type(v.type), value),
                    layout.emit_address(b, slot, coord, regs.shape, storage))
        views[v] = SharedView(slot, layout)
        offset += size
    ctx.target.fence_async_shared(b)
    ctx.target.barrier(b)
    return views


def _carrying_loop(ctx: Any, op: ops.DotOp) -> Optional[ops.ForOp]:
    """The ``for`` loop being lowered when it carries its accumulator through ``op`` alone
    (``pipeline.accumulates_in_place``) in one layout, so ``op``'s MMAs may stay in flight
    into the next iteration; else ``None``."""
    loop = ctx.loops[-1] if ctx.loops else None
    if loop is None or not accumulates_in_place(loop, op) or op.acc.type != op.result.type:
        return None
    return loop


def _shifted(b: ir.IRBuilder, descriptor: ir.Value, offset: int) -> ir.Value:
    """The descriptor of the operand ``offset`` bytes (a multiple of 16) after the one
    ``descriptor`` describes: its start-address field (address / 16, 14 bits) plus offset / 16,
    which cannot carry out of the field inside the 256 KiB the field spans."""
    assert offset % 16 == 0, "operands start on 16-byte boundaries"
    return descriptor if not offset else b.add(descriptor, ir.Constant(ir.IntType(64), offset >> 4))


def _at(b: ir.IRBuilder, base: ir.Value, offset: ir.Value) -> ir.Value:
    return b.gep(base, [offset], source_etype=I8)
