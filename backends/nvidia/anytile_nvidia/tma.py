"""Hopper's tensor memory accelerator (TMA) copying pipelined tiles by descriptor, on sm_90:
the copies of the ``nvidia`` dialect's box ops (``dialect.py``, lowered by ``box_lowering.py``).

A pipelined operand read from an array the kernel's parameters describe (a block of an
``at.TensorDescriptor`` argument, or of a block pointer over a pointer argument, or the box
a pointer load reads: ``BoxCopyOp.array``, ``box_maps.array_leaves``) into a
``SwizzledPanels`` slot (a warpgroup MMA operand; a block read and transposed, as attention's
K, into the column-major slot, which keeps it as the array does) is copied by
``cp.async.bulk.tensor``:
the slot is cut into boxes, one per panel (``width`` bytes of columns) and per run of rows,
which thread 0 issues one after another, written by the copy unit in the panel's own swizzle.
A's rows are permuted (``warpgroup_row``): a whole block of ``16 W`` rows comes as one box
of a 5-D view of the rows whose dimensions put them in that order; a block that is not
whole inside the array comes as boxes of eight rows (which the permutation keeps together).
The descriptors (``CUtensorMap``, 128 bytes) are made by the host for each launch from the
parameters' values (``encode_tensor_map``, cached) and passed as ``__grid_constant__``
parameters.

Completion goes through sixteen ``mbarrier``s in shared memory, one per pipeline group in
turn: group ``g`` (counted by every thread at each ``async_commit``) uses barrier ``g % 16``
in phase ``g // 16``.  The issuing thread announces the bytes of each copy
(``mbarrier.expect_tx``) before starting it, thread 0 arrives on the group's barrier at the
commit, and ``async_wait(pending)`` has every thread wait, group after group, for the phase
parity of each group it has not waited for yet, up to the last ``pending`` (the first
outside the loop over them: a pipeline's steady state waits for one).  A pipeline
keeps at most ``stages`` groups in flight and waits every iteration behind a program
barrier, so no barrier is reused while a thread could still be waiting on its previous
phase.

A store of a box (``nvidia.box_store``: a descriptor's ``store``) goes the other way
(``TensorCopies.store``): registers into 128-byte (or narrower) swizzled panels of the
scratch space, a proxy fence and a barrier, one ``cp.async.bulk.tensor`` global store per
panel (the copy unit clips the box to the array), and the issuing lane waits until its
stores have read shared memory (``cp.async.bulk.wait_group.read``).  It is used only where
its panels leave as many programs on a multiprocessor as the kernel's other uses of shared
memory (measured: attention D=64 lost 10-35% with one program fewer).
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any, Optional

from llvmlite import ir

from anytile.codegen.gpu.layouts import register_indices
from anytile.codegen.gpu.memory import access_groups, guarded
from anytile.codegen.gpu.registers import coords, register_is_replica
from anytile.codegen.gpu.scratch import aligned_scratch
from anytile.codegen.gpu.shared_ops import AsyncWaitOp
from anytile.ir import walk
from anytile.errors import LaunchError
from anytile.ir.types import elem_type, scalar_type, shape_of

from .box_maps import BoxMap, array_leaves
from .dialect import BoxCopyOp, BoxStoreOp
from .warpgroup import SwizzledPanels, swizzle_width, warpgroup_row

__all__ = ["TensorCopies", "BARRIERS", "box_layout", "encode_tensor_map", "map_geometry",
           "tensor_map_maker", "tensor_map_parameters"]

I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8 = ir.IntType(8)
#: mbarriers of the ring (groups in flight stay well below it)
BARRIERS = 16
#: bytes of a ``CUtensorMap``
MAP_BYTES = 128
#: what the system keeps of a multiprocessor's shared memory per program (sm_90: 228 KiB a
#: multiprocessor, at most 227 KiB a program)
RESERVED_PER_PROGRAM = 1024


def box_layout(rows: int, cols: int, layout: SwizzledPanels, elem_bytes: int) -> Optional[tuple]:
    """(box rows, box columns, copies) of a slot in ``layout`` whose panels hold ``rows x
    cols`` (``SwizzledPanels.stored``) cut into 2-D boxes, or ``None`` when the copy unit
    cannot write it (rows not in eights, or boxes over 256 rows) or it would take more than
    32 boxes (one thread issues them all, one instruction each)."""
    if rows % 8:
        return None
    box_cols = layout.width // elem_bytes
    box_rows = 8 if layout.warps else rows
    if cols % box_cols or box_rows > 256:
        return None
    copies = (rows // box_rows) * (cols // box_cols)
    return (box_rows, box_cols, copies) if copies <= 32 else None


class TensorCopies:
    """``cp.async.bulk.tensor`` copies completed on a ring of ``mbarrier``s (the module
    doc).  The instruction emitters are small methods, which the host emulation replaces.
    The lowering's methods take the kernel's ``box_lowering.BoxCopyKernel`` (``k``): where
    the ring lives and the counts of groups committed and waited for."""

    #: bytes of persistent shared memory the ring takes (at ``k.barriers``)
    shared_bytes = 8 * BARRIERS
    #: the fewest elements (M x N) a dot's result must have for its operands read through
    #: plain pointers to be copied as the boxes they read (``passes/pointer_boxes.py``); 0:
    #: never.  Each copy then runs run-time checks, with the per-thread copy beside it, which
    #: pay only where each step's work is large enough.
    #: Measured on an H200 (Nsight Compute, 4096^3 fp16, against the same kernel by cp.async):
    #: 128x256 and 256x128 tiles on eight warps 6-7% faster, the persistent 128x256 11%;
    #: 128x128 tiles 10% (eight warps) and 24% (four) slower, 64x256 2% slower
    pointer_box_tile = 128 * 256

    # -- planning ------------------------------------------------------------------------------
    def plan(self, op: BoxCopyOp, kernel: Any) -> tuple[BoxMap, ...]:
        """The maps ``op`` would copy through, or ``()`` (the copy then takes the per-thread
        path).  ``kernel``: the IR function (its parameters' ``divisibility`` facts say how
        the array's base and rows are aligned)."""
        t = op.buffer.type
        layout = t.layout
        if not isinstance(layout, SwizzledPanels) or len(t.shape) != 2 or t.elem.nbytes != layout.elem_bytes:
            return ()
        # group g uses barrier g % BARRIERS: the groups in flight must stay below the ring
        deepest = max([w.pending for w in walk(kernel.body) if isinstance(w, AsyncWaitOp)],
                      default=0)
        if deepest + 2 > BARRIERS:
            return ()
        leaves = _aligned_leaves(op.array, kernel, t.elem.nbytes)
        if leaves is None:
            return ()
        # the slot keeps the box as the array holds it: rows along the panels' rows, which
        # for a tile read transposed (``box_order`` (1, 0)) is the column-major slot
        if layout.columns != (tuple(op.box_order) == (1, 0)) or \
                tuple(op.box_order) not in ((), (0, 1), (1, 0)):
            return ()
        rows, cols = layout.stored(t.shape)
        shape = box_layout(rows, cols, layout, t.elem.nbytes)
        if shape is None:
            return ()
        guarded = bool(op.box_exact)
        plain = BoxMap(leaves, t.elem.name, shape[:2], layout.width, guarded=guarded)
        if not layout.warps:
            return (plain,)
        # A's rows permuted: one box of 16 W rows a panel (a 5-D view of the rows, the
        # interleave ``W``) where the block is whole and aligned, else boxes of 8 rows
        block = 16 * layout.warps
        if rows % block or (rows // block) * (cols // shape[1]) > 32:
            return (plain,)
        return (BoxMap(leaves, t.elem.name, (block, shape[1]), layout.width, layout.warps, guarded),
                plain)

    def plan_store(self, op: BoxStoreOp, kernel: Any) -> tuple[BoxMap, ...]:
        """The maps the store ``op`` would write through, or ``()`` (the per-thread path)."""
        shape, elem = shape_of(op.ptr.type), elem_type(op.ptr.type).pointee
        if len(shape) != 2 or elem.nbytes not in (1, 2, 4) or elem.name not in _DATA_TYPES:
            return ()
        rows, cols = shape
        width = swizzle_width(cols * elem.nbytes)
        leaves = _aligned_leaves(op.array, kernel, elem.nbytes)
        if width is None or rows % 8 or rows > 256 or leaves is None:
            return ()
        return (BoxMap(leaves, elem.name, (rows, width // elem.nbytes), width),)

    def parameter_type(self) -> ir.Type:
        """The LLVM type of a map's kernel parameter."""
        return ir.PointerType(ir.ArrayType(I8, MAP_BYTES))

    def declare(self, fn: ir.Function, index: int) -> None:
        """A ``byval`` parameter kept in the parameter space (``nvvm.grid_constant``): its
        generic address (``cvta.param``) is what the copy instruction reads."""
        arg = fn.args[index]
        arg.add_attribute("byval")
        arg.attributes.align = 64
        m = fn.module
        m.add_named_metadata("nvvm.annotations",
                             [fn, ir.MetaDataString(m, "grid_constant"),
                              m.add_metadata([ir.Constant(I32, index + 1)])])

    # -- lowering ------------------------------------------------------------------------------
    def start(self, ctx: Any, k: Any) -> None:
        """At the kernel's start, before any copy (every thread runs it)."""
        entry = ctx.entry_b
        k.groups = entry.alloca(I32, name="box_groups")      # groups committed
        k.waited = entry.alloca(I32, name="box_waited")      # groups waited for
        entry.store(ir.Constant(I32, 0), k.groups)
        entry.store(ir.Constant(I32, 0), k.waited)
        b = ctx.b
        with b.if_then(b.icmp_unsigned("==", ctx.tid, ir.Constant(I32, 0))):
            for i in range(BARRIERS):
                self.init_barrier(b, self._barrier(k, b, ir.Constant(I32, i)))
            self.fence_init(b)
        ctx.target.barrier(b)

    def _barrier(self, k: Any, b: ir.IRBuilder, index: ir.Value) -> ir.Value:
        """The shared-memory address (i32) of barrier ``index``."""
        at = b.gep(k.barriers, [b.mul(index, ir.Constant(I32, 8))], source_etype=I8)
        return self.shared_address(b, at)

    def _group_barrier(self, k: Any, b: ir.IRBuilder, group: ir.Value) -> ir.Value:
        return self._barrier(k, b, b.and_(group, ir.Constant(I32, BARRIERS - 1)))

    def copy(self, ctx: Any, k: Any, op: BoxCopyOp, maps: list, slot: ir.Value) -> None:
        """Start ``op``'s copy into the slot at ``slot`` through the maps ``plan`` gave it
        (``maps``: ``(BoxMap, its kernel parameter)`` each), unless its ``when`` is false."""
        b = ctx.b
        issue = b.icmp_unsigned("==", ctx.tid, ir.Constant(I32, 0))
        for when in op.when:
            issue = b.and_(issue, ctx.scalar(when))
        row0, col0 = (b.trunc(v, I32) if v.type.width > 32 else v
                      for v in (ctx.scalar(op.box[0]), ctx.scalar(op.box[1])))
        with b.if_then(issue):
            self._copy(ctx, k, op, maps, slot, row0, col0, ctx.scalar(op.array[1]))

    def _copy(self, ctx: Any, k: Any, op: BoxCopyOp, maps: list, slot: ir.Value, row0: ir.Value,
              col0: ir.Value, rows: ir.Value) -> None:
        b = ctx.b
        t = op.buffer.type
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        bar = self._group_barrier(k, b, b.load(k.groups))
        self.expect_bytes(b, bar, k32(t.shape[0] * t.shape[1] * t.elem.nbytes))
        if len(maps) == 1:
            self._boxes(ctx, t, maps[0], slot, row0, col0, bar)
            return
        # whole blocks of 16 W rows inside the array: one 5-D box each; else 8-row boxes
        (blocks, blocks_param), plain = maps
        end = b.add(b.sext(row0, rows.type), ir.Constant(rows.type, t.shape[0]))
        whole = b.and_(b.icmp_unsigned("==", b.urem(row0, k32(blocks.box[0])), k32(0)),
                       b.and_(b.icmp_signed(">=", row0, k32(0)), b.icmp_signed("<=", end, rows)))
        with b.if_else(whole) as (then, otherwise):
            with then:
                self._boxes(ctx, t, (blocks, blocks_param), slot, row0, col0, bar)
            with otherwise:
                self._boxes(ctx, t, plain, slot, row0, col0, bar)

    def _boxes(self, ctx: Any, t: Any, box_map: tuple, slot: ir.Value, row0: ir.Value,
               col0: ir.Value, bar: ir.Value) -> None:
        """The one issuing thread copies every box of the slot through the map, one after
        another: where each lands is a constant, and its coordinates are the program's, so
        they stay in uniform registers (a box a lane would make the compiler issue them one
        lane at a time, in a loop: measured slower on an H200)."""
        b = ctx.b
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        m, param = box_map
        layout = t.layout
        rows, cols = layout.stored(t.shape)     # the slot's rows are the array's
        box_rows, box_cols = m.box
        per_panel = rows // box_rows
        tmap = self.map_address(b, param)
        for i in range(per_panel * (cols // box_cols)):
            run, panel = i % per_panel, i // per_panel
            first = run * box_rows
            # a block of 16 W rows lands whole, permuted by the copy unit; 8-row boxes land
            # where the permutation puts their rows
            row = warpgroup_row(first, layout.warps) if layout.warps and not m.interleave else first
            dst = self.shared_address(b, b.gep(slot, [k32(panel * rows * layout.width + row * layout.width)],
                                               source_etype=I8))
            col = b.add(col0, k32(panel * box_cols))
            if m.interleave:     # (column, row in 8, half, warp, block) of the 5-D view
                block = b.udiv(b.add(row0, k32(first)), k32(box_rows))
                coords = [col, k32(0), k32(0), k32(0), block]
            else:
                coords = [col, b.add(row0, k32(first))]
            self.copy_box(b, dst, tmap, coords, bar)

    def store(self, ctx: Any, op: BoxStoreOp, maps: list, value: Any) -> bool:
        """The tile goes from registers into the scratch space (or, where the pipeline's
        buffers hold nothing, their place), in panels of ``swizzle`` bytes
        (``SwizzledPanels`` rows unpermuted: each panel is one box as the copy unit
        keeps it in shared memory), as many panels at a time as the shared memory left
        holds; after a proxy fence and a barrier, lane ``i`` of warp 0 stores panel ``i``
        (``cp.async.bulk.tensor`` to global memory, clipped to the array) and waits until
        the copy unit has read it, before the next round or the next use of the scratch
        space (each starts with a barrier) may write there.  (Only the reads are waited
        for, as Triton does: the global writes land in the background, so a later load of
        the same addresses by the same program is not ordered after them.)  Not where even
        one panel would leave room for fewer programs on a multiprocessor (``False``: the
        per-thread path)."""
        b = ctx.b
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        (m, param), = maps
        rows, cols = value.shape
        elem = elem_type(op.ptr.type).pointee
        box_cols = m.box[1]
        panel_bytes = rows * m.swizzle
        panels = cols // box_cols
        # where the pipeline's buffers hold nothing (an epilogue after the K loop), the
        # panels take their place; else no more shared memory than keeps as many programs
        # on a multiprocessor as the kernel's other uses allow (measured: attention lost
        # 10-35% a program fewer).  A panel a lane of warp 0.
        in_buffers = ctx.buffers_free and ctx.buffer_bytes >= panel_bytes and ctx.smem.align >= 1024
        if in_buffers:
            per_round = min(panels, 32, ctx.buffer_bytes // panel_bytes)
            base = ctx.smem
        else:
            per_multiprocessor = ctx.target.shared_memory_limit + RESERVED_PER_PROGRAM
            used = max(ctx.shared_bytes, ctx.persistent_shared) + RESERVED_PER_PROGRAM
            programs = max(1, per_multiprocessor // used)
            allowed = per_multiprocessor // programs - RESERVED_PER_PROGRAM
            per_round = min(panels, 32, (allowed - ctx.persistent_shared - 1024) // panel_bytes)
            if per_round < 1:
                return False
            base = aligned_scratch(ctx, per_round * panel_bytes, 1024)
        layout = SwizzledPanels(m.swizzle, reads_in_flight=0, elem_bytes=elem.nbytes)
        storage = ctx.types.storage(elem)
        _, groups = access_groups(ctx, op, value.layout, value.shape)
        where = coords(ctx, value.layout, value.shape)
        indices = register_indices(value.layout, value.shape)
        row0, col0 = (b.trunc(v, I32) if v.type.width > 32 else v
                      for v in (ctx.scalar(op.box[0]), ctx.scalar(op.box[1])))
        tmap = self.map_address(b, param)
        for first_panel in range(0, panels, per_round):
            count = min(per_round, panels - first_panel)
            lo = first_panel * box_cols
            ctx.target.barrier(b)        # the scratch space's last readers are done
            for group in groups:
                first = group[0]
                if register_is_replica(value.layout, value.shape, indices[first]):
                    continue
                row, col = where[first]

                def emit(group=group, row=row, col=col) -> list:
                    at = layout.emit_address(b, base, (row, b.sub(col, k32(lo))),
                                             (rows, count * box_cols), storage)
                    if len(group) == 1:
                        b.store(ctx.ew.to_storage(elem, value.values[first]), at)
                    else:   # converted together (f32 pairs to f16 by one instruction)
                        vec = ctx.ew.pack_storage(elem, [value.values[i] for i in group])
                        b.store(vec, at).align = len(group) * elem.nbytes
                    return []
                inside = None if count == panels else b.and_(
                    b.icmp_unsigned(">=", col, k32(lo)), b.icmp_unsigned("<", col, k32(lo + count * box_cols)))
                guarded(ctx, inside, emit, [])
            ctx.target.fence_async_shared(b)
            ctx.target.barrier(b)
            issue = b.and_(b.icmp_unsigned("==", ctx.warp, k32(0)), b.icmp_unsigned("<", ctx.lane, k32(count)))
            with b.if_then(issue):
                src = b.gep(base, [b.mul(ctx.lane, k32(panel_bytes))], source_etype=I8)
                col = b.add(col0, b.mul(b.add(ctx.lane, k32(first_panel)), k32(box_cols)))
                self.store_box(b, tmap, [col, row0], self.shared_address(b, src))
                self.store_commit(b)
                self.store_wait_read(b)
        if in_buffers:
            ctx.target.barrier(b)    # an enclosing loop's next prologue refills the buffers
        return True

    def commit(self, ctx: Any, k: Any) -> None:
        """Close the current group (every ``async_commit`` of a kernel with box copies)."""
        b = ctx.b
        group = b.load(k.groups)
        with b.if_then(b.icmp_unsigned("==", ctx.tid, ir.Constant(I32, 0))):
            self.arrive(b, self._group_barrier(k, b, group))
        b.store(b.add(group, ir.Constant(I32, 1)), k.groups)

    def wait(self, ctx: Any, k: Any, pending: int) -> None:
        """Every group up to the last ``pending`` committed, in order.  The first is waited
        for before the loop over the others: in a pipeline's steady state it is the only one,
        and its path is then a compare and the spin (the loop alone, unrolled by LLVM, had
        put a dozen branches on it)."""
        b = ctx.b
        target = b.sub(b.load(k.groups), ir.Constant(I32, pending))
        fn = b.function
        first, check, body, done = (fn.append_basic_block(n) for n in
                                    ("box_wait_first", "box_wait", "box_wait_group", "box_waited"))
        b.cbranch(b.icmp_signed("<", b.load(k.waited), target), first, done)
        for block, after in ((first, check), (body, check)):
            b.position_at_end(block)
            self._wait_group(ctx, k, b.load(k.waited))
            b.branch(after)
        b.position_at_end(check)
        b.cbranch(b.icmp_signed("<", b.load(k.waited), target), body, done)
        b.position_at_end(done)

    def _wait_group(self, ctx: Any, k: Any, group: ir.Value) -> None:
        """Spin until group ``group``'s phase of its barrier completes; count it waited."""
        b = ctx.b
        bar = self._group_barrier(k, b, group)
        parity = b.and_(b.lshr(group, ir.Constant(I32, BARRIERS.bit_length() - 1)),
                        ir.Constant(I32, 1))
        spin = b.function.append_basic_block("box_wait_spin")
        b.branch(spin)
        b.position_at_end(spin)
        ready = self.try_wait(b, bar, parity)
        after = b.function.append_basic_block("box_wait_next")
        b.cbranch(b.icmp_unsigned("!=", ready, ir.Constant(I32, 0)), after, spin)
        b.position_at_end(after)
        b.store(b.add(group, ir.Constant(I32, 1)), k.waited)

    # -- the instructions (PTX; the emulation replaces these) ----------------------------------
    @staticmethod
    def _asm(b: ir.IRBuilder, text: str, constraints: str, args: list,
             ret: ir.Type = ir.VoidType()) -> ir.Value:
        ft = ir.FunctionType(ret, [a.type for a in args])
        return b.asm(ft, text, constraints + ("," if constraints else "") + "~{memory}", args,
                     side_effect=True)

    @staticmethod
    def shared_address(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
        return b.ptrtoint(ptr, I32)

    @staticmethod
    def map_address(b: ir.IRBuilder, param: ir.Value) -> ir.Value:
        return b.ptrtoint(param, I64)           # cvta.param of the grid-constant parameter

    def init_barrier(self, b: ir.IRBuilder, bar: ir.Value) -> None:
        self._asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", "r", [bar])

    def fence_init(self, b: ir.IRBuilder) -> None:
        self._asm(b, "fence.mbarrier_init.release.cluster;", "", [])

    def expect_bytes(self, b: ir.IRBuilder, bar: ir.Value, nbytes: ir.Value) -> None:
        self._asm(b, "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;", "r,r", [bar, nbytes])

    def copy_box(self, b: ir.IRBuilder, dst: ir.Value, tmap: ir.Value, coords: list,
                 bar: ir.Value) -> None:
        """One box whose first element is at ``coords`` (innermost dimension first)."""
        n = len(coords)
        places = ", ".join(f"${2 + i}" for i in range(n))
        self._asm(b, f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::"
                     f"complete_tx::bytes [$0], [$1, {{{places}}}], [${2 + n}];",
                  "r,l," + "r," * n + "r", [dst, tmap, *coords, bar])

    def store_box(self, b: ir.IRBuilder, tmap: ir.Value, coords: list, src: ir.Value) -> None:
        """Write the box at ``coords`` (innermost dimension first) from shared memory at
        ``src`` (its elements outside the array are not written)."""
        n = len(coords)
        places = ", ".join(f"${1 + i}" for i in range(n))
        self._asm(b, f"cp.async.bulk.tensor.{n}d.global.shared::cta.bulk_group [$0, {{{places}}}], "
                     f"[${1 + n}];", "l," + "r," * n + "r", [tmap, *coords, src])

    def store_commit(self, b: ir.IRBuilder) -> None:
        self._asm(b, "cp.async.bulk.commit_group;", "", [])

    def store_wait_read(self, b: ir.IRBuilder) -> None:
        """Until this thread's committed box stores have read their shared memory."""
        self._asm(b, "cp.async.bulk.wait_group.read 0;", "", [])

    def arrive(self, b: ir.IRBuilder, bar: ir.Value) -> None:
        self._asm(b, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r", [bar])

    def try_wait(self, b: ir.IRBuilder, bar: ir.Value, parity: ir.Value) -> ir.Value:
        return self._asm(b, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                            "selp.u32 $0, 1, 0, p; }", "=r,r,r", [bar, parity], I32)


# ---------------------------------------------------------------------------------------------
# The host's side: a CUtensorMap per map and launch
# ---------------------------------------------------------------------------------------------
#: IR element type -> CUtensorMapDataType
_DATA_TYPES = {"f16": 6, "bf16": 9, "f32": 7, "i8": 0, "u8": 0, "f8e4m3": 0, "f8e5m2": 0, "i16": 1, "u16": 1,
               "i32": 3, "u32": 2, "f64": 8, "i64": 5, "u64": 4}
#: swizzle bytes -> CUtensorMapSwizzle
_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
_L2_PROMOTION_128B = 2
_ENCODE: Any = None
_ENCODE_LOCK = threading.Lock()


def _encoder() -> Any:
    """``cuTensorMapEncodeTiled`` from libcuda, by ``ctypes``."""
    global _ENCODE
    with _ENCODE_LOCK:
        if _ENCODE is None:
            lib = ctypes.CDLL("libcuda.so.1")
            fn = lib.cuTensorMapEncodeTiled
            u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p,
                           u64p, u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
            fn.restype = ctypes.c_int
            _ENCODE = fn
    return _ENCODE


def _aligned_leaves(array: list, kernel: Any, elem_bytes: int) -> Optional[tuple]:
    """``array_leaves`` of a 2-D array whose base and rows are 16-byte aligned, as the copy
    unit reads and writes them (the parameters' ``divisibility`` facts say so), else
    ``None``."""
    leaves = array_leaves(array, kernel)     # base, rows, columns, row stride, 1
    if leaves is None or len(leaves) != 5 or not isinstance(leaves[0], str) or leaves[4] != 1:
        return None
    facts = {a.name: attrs for a, attrs in zip(kernel.args, kernel.arg_attrs)}
    stride = leaves[3]
    if facts[leaves[0]].get("divisibility", 1) % 16 or \
            (isinstance(stride, str) and facts[stride].get("divisibility", 1) % 16) or \
            (isinstance(stride, int) and stride * elem_bytes % 16):
        return None
    return leaves


def map_geometry(box_map: BoxMap, rows: int, cols: int, row_stride: int,
                 elem_bytes: int) -> tuple[list, list, list]:
    """(dimensions, byte strides of all but the first, box) of ``box_map``'s view of the
    ``rows x cols`` array (rows ``row_stride`` elements apart), innermost first: 2-D, or
    for an interleaved map the 5-D view (column, row in 8, half, warp, block of 16 W rows)
    whose boxes land as ``warpgroup_row`` permutes a block."""
    box_rows, box_cols = box_map.box
    rs = row_stride * elem_bytes
    w = box_map.interleave
    if not w:
        return [cols, rows], [rs], [box_cols, box_rows]
    return ([cols, 8, 2, w, max(1, rows // (16 * w))], [rs, 8 * w * rs, 8 * rs, 16 * w * rs],
            [box_cols, 8, 2, w, 1])


def encode_tensor_map(box_map: BoxMap, base: int, rows: int, cols: int, row_stride: int,
                      elem_bytes: int) -> bytes:
    """The 128-byte ``CUtensorMap`` of ``box_map`` over the ``rows x cols`` array at ``base``
    (rows ``row_stride`` elements apart)."""
    if max(rows, cols) >= 1 << 31:
        raise LaunchError(f"{box_map.name}: an array of shape [{rows}, {cols}] is past the GPU's "
                          f"copy unit's 32-bit coordinates: compile with tma=False")
    out = (ctypes.c_uint8 * MAP_BYTES)()
    dims, strides, box = map_geometry(box_map, rows, cols, row_stride, elem_bytes)
    n = len(dims)
    result = _encoder()(out, _DATA_TYPES[box_map.elem], n, ctypes.c_void_p(base),
                        (ctypes.c_uint64 * n)(*dims), (ctypes.c_uint64 * (n - 1))(*strides),
                        (ctypes.c_uint32 * n)(*box), (ctypes.c_uint32 * n)(*[1] * n), 0,
                        _SWIZZLES[box_map.swizzle], _L2_PROMOTION_128B, 0)
    if result != 0:
        raise LaunchError(
            f"{box_map.name}: the GPU's copy unit cannot describe "
            f"this array (cuTensorMapEncodeTiled error {result}; base {base:#x}, shape "
            f"[{rows}, {cols}], row stride {row_stride}, view {dims}, box {box})")
    return bytes(out)


def tensor_map_maker(box_map: BoxMap, context: Any = None, encode: Any = encode_tensor_map,
                     zeros: Any = None) -> Any:
    """``make(base, rows, cols, row_stride) -> bytes``: ``encode`` of ``box_map`` for a
    launch's descriptor leaves (inside ``context()``: the kernel's device current), remembered
    for the arrays seen last (a map depends on nothing else, so a remembered one is always
    right).  The copy unit takes no map of an empty array: one is a map of a single zero
    element at ``zeros()`` (a device address), so every box reads zeros, as it should.  A
    ``guarded`` map whose columns the kernel's checks refuse (none, or past 32 bits) is that
    map too: no copy reads it.  Any other map the driver refuses fails the launch."""
    elem_bytes = scalar_type(box_map.elem).nbytes
    cache: dict = {}

    def make(base: int, rows: int, cols: int, row_stride: int) -> bytes:
        key = (base, rows, cols, row_stride)
        found = cache.get(key)
        if found is None:
            if len(cache) >= 256:
                cache.clear()
            if (not rows or not cols) and zeros is not None:
                with context() if context is not None else contextlib.nullcontext():
                    base = zeros()
                rows, cols, row_stride = 1, 1, 16 // elem_bytes
            if box_map.guarded and zeros is not None and not 0 < cols < 1 << 31:
                # columns the kernel's checks refuse (a box fits in no row of them): no
                # copy reads this map, and the zeros map stands in
                with context() if context is not None else contextlib.nullcontext():
                    base = zeros()
                rows, cols, row_stride = 1, 1, 16 // elem_bytes
            with context() if context is not None else contextlib.nullcontext():
                found = encode(box_map, base, rows, cols, row_stride, elem_bytes)
            cache[key] = found
        return found
    return make



def tensor_map_parameters(box_maps: Optional[list], signature: list, context: Any = None,
                          zeros: Any = None) -> list:
    """The launcher's computed parameters for a kernel's ``metadata["box_maps"]``:
    ``(name, 128, make, sources)`` each, ``sources`` the indices in ``signature`` of the
    parameters among the array's base, rows, columns and row stride (the others are
    numbers, filled in here); ``context()`` makes the kernel's device current (the driver's
    encoder asks for one); ``zeros()``: the device address of 16 zero bytes (the stand-in
    for an empty array)."""
    names = [name for name, _ in signature]
    out = []
    for i, entry in enumerate(box_maps or ()):
        box_map = BoxMap.from_metadata(entry)
        make = tensor_map_maker(box_map, context, zeros=zeros)
        leaves = box_map.array[:4]          # base, rows, columns, row stride (the last is 1)
        sources = tuple(names.index(leaf) for leaf in leaves if isinstance(leaf, str))
        if len(sources) != len(leaves):
            make = _with_numbers(make, leaves)
        out.append((f"tensor map {i} of {box_map.name}", MAP_BYTES, make, sources))
    return out


def _with_numbers(make: Any, leaves: tuple) -> Any:
    """``make`` taking only the values of the leaves that are parameters."""
    def made(*values: int) -> bytes:
        given = iter(values)
        return make(*(next(given) if isinstance(leaf, str) else leaf for leaf in leaves))
    return made
