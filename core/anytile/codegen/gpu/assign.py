"""The ``laid-out ir`` stage: give every tile value of a kernel a distributed layout.

Values come in two kinds:

* *rematerialisable* ones -- ``arange``, constants, ``splat`` and pure index arithmetic over
  them (elementwise ops, ``expand_dims``, ``broadcast``, ``permute``, ``hint``, ``addptr``).
  They cost a few integer instructions per register, so the lowering recomputes them in
  whatever layout a user asks for; their own layout is only a default;
* *anchored* ones -- loads, reductions, dots, loop-carried values... -- whose layout is chosen
  here once; a use in another layout goes through shared memory.

Loads and stores get a blocked layout whose per-thread run along the fastest dimension is
the widest access the axis analysis proves (16 bytes: four floats in one access); elementwise
ops follow their first anchored operand; a reduction's result is a ``SliceLayout`` of its
operand's; a dot's result takes the layout of the plan its strategy made (``dot.py``: a
matrix instruction's accumulator layout, or the FMA loop's); a loop-carried value takes the
layout its loop body yields when its start value is rematerialisable (``acc = zeros(...)``
then ``acc += dot(...)``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ...ir import ops
from ...ir.nodes import Block, Function, Module, Value, walk
from ...ir.uses import Uses
from ...ir.types import PointerType, TileType, elem_type, shape_of
from .axis_info import AxisInfo, analyse_function, vector_width_of_access
from .layouts import BlockedLayout, Layout, SliceLayout, default_blocked, register_count
from .shared import busy_buffer_ops, plan_persistent_shared
from .shared_ops import AsyncCopyOp, SharedLayout, SharedLoadOp

__all__ = ["LaidOutKernel", "assign_layouts", "REMAT_OPS"]

#: ops whose tile results are cheap to recompute in any layout when their tile operands are
REMAT_OPS = (ops.ArangeOp, ops.ConstantOp, ops.SplatOp, ops.BinaryOp, ops.CompareOp,
             ops.UnaryOp, ops.SelectOp, ops.CastOp, ops.BitcastOp, ops.FmaOp, ops.UMulHiOp,
             ops.ExpandDimsOp, ops.BroadcastOp, ops.PermuteOp, ops.HintOp, ops.AddPtrOp)

_CHEAP_UNARY = frozenset({"neg", "not", "abs"})


@dataclass(eq=False)
class LaidOutKernel:
    """The kernel's IR with a layout on every tile value (in its type), the axis facts, the
    vector width chosen for each memory access and each dot's plan (``dot.DotPlan``).
    ``str()`` is the IR text with layouts."""

    module: Module
    num_warps: int
    warp_size: int
    axis: dict[Value, AxisInfo] = field(default_factory=dict)
    vector: dict[ops.Op, int] = field(default_factory=dict)
    transposed: set = field(default_factory=set)   # accesses whose vectors run along dim 0
    remat: set = field(default_factory=set)
    store_layout: dict[ops.Op, Layout] = field(default_factory=dict)   # stores, async copies
    dot_plans: dict[ops.Op, Any] = field(default_factory=dict)
    #: ops while a pipelined buffer holds data (``shared.busy_buffer_ops``), and the bytes
    #: the buffers take: elsewhere a layout exchange may take their place
    busy_shared: set = field(default_factory=set)
    buffer_bytes: int = 0

    @property
    def kernel(self) -> Function:
        return self.module.kernel

    def layout(self, v: Value) -> Optional[Layout]:
        t = v.type
        return t.layout if isinstance(t, TileType) else None

    def __str__(self) -> str:
        return str(self.module)


class _Assigner:
    def __init__(self, out: LaidOutKernel, plan_dot: Callable[[ops.DotOp], Any]) -> None:
        self.out = out
        self.plan_dot = plan_dot
        self.num_warps = out.num_warps
        self.warp_size = out.warp_size
        #: loop-carried values whose start is rematerialisable: their layout is settled by
        #: what the body yields, so they anchor nothing while another operand can
        self.provisional: set = set()

    # -- helpers -------------------------------------------------------------------------------
    def default(self, shape: tuple[int, ...], vector: int = 1,
                order: tuple[int, ...] = ()) -> BlockedLayout:
        return default_blocked(shape, self.num_warps, self.warp_size, vector, order)

    def access_layout(self, op: ops.Op, ptr: Value, mask: Optional[Value]) -> BlockedLayout:
        """The layout of an access nothing anchors: vectors along the last dimension when the
        addresses run along it; when they run along the first instead (a transposed read,
        attention's K), lanes laid out fastest along that one, so a warp's accesses coalesce."""
        shape = shape_of(ptr.type)
        vector = self.access_vector(op, ptr, mask)
        if self.runs_along_rows(ptr, vector):
            width = self.transposed_vector(ptr, mask)
            self.out.vector[op] = width
            self.out.transposed.add(op)
            return self.default(shape, width, (0, 1))
        return self.default(shape, vector)

    def runs_along_rows(self, ptr: Value, vector: int) -> bool:
        """Whether accesses through ``ptr`` (``vector`` wide along the last dimension) are a
        transposed read: a 2-D tile whose addresses run along the first dimension only."""
        info = self.out.axis.get(ptr)
        return vector == 1 and len(shape_of(ptr.type)) == 2 and info is not None and \
            bool(info.contiguity) and info.contiguity[-1] == 1 and info.contiguity[0] > 1

    def pointer_layout(self, ptr: Value) -> BlockedLayout:
        """The layout accesses through the pointer tile ``ptr`` want (``access_layout``,
        recording nothing)."""
        vector = self.pointer_vector(ptr)
        if self.runs_along_rows(ptr, vector):
            return self.default(shape_of(ptr.type), self.transposed_vector(ptr, None), (0, 1))
        return self.default(shape_of(ptr.type), vector)

    def transposed_vector(self, ptr: Value, mask: Optional[Value]) -> int:
        """``pointer_vector`` for a 2-D pointer tile whose addresses run along dimension 0."""
        shape = shape_of(ptr.type)
        info = self.out.axis.get(ptr, AxisInfo.unknown(shape))
        mask_info = self.out.axis.get(mask, AxisInfo.unknown(shape)) if mask is not None else None
        width = vector_width_of_access(info, mask_info, elem_type(ptr.type).pointee.nbytes,
                                       dim=0)
        per_thread = max(1, shape[0] * shape[1] // (self.num_warps * self.warp_size))
        return min(width, shape[0], max(1, 1 << (per_thread.bit_length() - 1)))

    def set(self, v: Value, layout: Optional[Layout]) -> None:
        if isinstance(v.type, TileType):
            v.type = TileType(v.type.shape, v.type.elem, layout or self.default(v.type.shape))

    def is_remat(self, v: Value) -> bool:
        return v in self.out.remat

    def anchored_layout(self, values: list) -> Optional[Layout]:
        # a dot's accumulator layout first: converting a dot result costs the most
        # (``acc += dot(a, b)`` then keeps the accumulator in it across the loop)
        values = sorted(values, key=lambda v: (not isinstance(v.owner, ops.DotOp),
                                               v in self.provisional))
        for v in values:
            if isinstance(v.type, TileType) and not self.is_remat(v) and v.type.layout is not None:
                return v.type.layout
        return None

    def access_vector(self, op: ops.Op, ptr: Value, mask: Optional[Value]) -> int:
        width = self.pointer_vector(ptr, mask)
        if shape_of(ptr.type):
            self.out.vector[op] = width
        return width

    def pointer_vector(self, ptr: Value, mask: Optional[Value] = None) -> int:
        """The widest access (in elements) through the pointer tile ``ptr`` that the axis
        facts prove, capped by what one thread holds."""
        shape = shape_of(ptr.type)
        if not shape:
            return 1
        pointee = elem_type(ptr.type).pointee
        info = self.out.axis.get(ptr, AxisInfo.unknown(shape))
        mask_info = self.out.axis.get(mask, AxisInfo.unknown(shape)) if mask is not None else None
        width = vector_width_of_access(info, mask_info, pointee.nbytes)
        per_thread = max(1, shape[-1] * math.prod(shape[:-1]) // (self.num_warps * self.warp_size))
        return min(width, shape[-1], max(1, 1 << (per_thread.bit_length() - 1)))

    # -- the walk ------------------------------------------------------------------------------
    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: ops.Op) -> None:
        tile_operands = [v for v in op.operands if isinstance(v.type, TileType)]
        if isinstance(op, REMAT_OPS) and all(self.is_remat(v) for v in tile_operands) \
                and not (isinstance(op, ops.UnaryOp) and op.kind not in _CHEAP_UNARY
                         and elem_type(op.src.type).is_float):
            for r in op.results:
                self.out.remat.add(r)
        if isinstance(op, ops.ForOp):
            self.loop(op, op.inits, op.body.args[1:], op.body)
            return
        if isinstance(op, ops.WhileOp):
            self.while_loop(op)
            return
        if isinstance(op, ops.IfOp):
            self.block(op.then_body)
            self.block(op.else_body)
            then_yield = op.then_body.terminator
            for i, r in enumerate(op.results):
                src = then_yield.values[i] if then_yield is not None else None
                self.set(r, src.type.layout if src is not None and isinstance(src.type, TileType) else None)
            return
        for region in op.regions:  # reduce/scan combine regions: scalars only
            self.block(region)
        if not op.results:
            if isinstance(op, ops.StoreOp) and isinstance(op.ptr.type, TileType):
                vector = self.access_vector(op, op.ptr, op.mask)
                self.out.store_layout[op] = self.anchored_layout([op.value, op.ptr, op.mask]
                                                                 if op.mask is not None else
                                                                 [op.value, op.ptr]) \
                    or self.default(op.ptr.type.shape, vector)
            elif isinstance(op, AsyncCopyOp):
                fresh = self.access_layout(op, op.ptr, op.mask)     # records the vector width
                self.out.store_layout[op] = self.anchored_layout([v for v in (op.ptr, op.mask) if v]) \
                    or fresh
            return
        res = op.results[0]
        if not isinstance(res.type, TileType):
            return
        shape = res.type.shape
        layout: Optional[Layout]
        if isinstance(op, ops.LoadOp):
            fresh = self.access_layout(op, op.ptr, op.mask)         # records the vector width
            layout = self.anchored_layout([op.ptr]) or fresh
        elif isinstance(op, (ops.AtomicRMWOp, ops.AtomicCASOp)):
            layout = self.anchored_layout(op.operands) or self.default(shape)
        elif isinstance(op, ops.ExpandDimsOp):
            src = op.src.type.layout if isinstance(op.src.type, TileType) else None
            if isinstance(src, SliceLayout) and src.dim == op.axis:
                layout = src.parent
            else:
                layout = self.default(shape)
        elif isinstance(op, ops.BroadcastOp):
            # the source's layout unless it leaves threads on dimensions too short for them
            # (a 1x1x1 tile's layout broadcast to 1x32x64 would give every thread all of it)
            layout = op.src.type.layout
            fresh = self.default(shape)
            if layout is None or register_count(layout, shape) > register_count(fresh, shape):
                layout = fresh
        elif isinstance(op, ops.PermuteOp):
            src = op.src.type.layout
            layout = src.permuted(tuple(op.order)) if isinstance(src, BlockedLayout) else self.default(shape)
        elif isinstance(op, ops.ReduceOp):
            src = op.srcs[0].type.layout
            for r in op.results:
                self.set(r, SliceLayout(src, op.axis) if isinstance(r.type, TileType) else None)
            return
        elif isinstance(op, ops.ScanOp):
            layout = self.anchored_layout(op.srcs) or self.default(shape)
        elif isinstance(op, ops.DotOp):
            plan = self.out.dot_plans[op] = self.plan_dot(op)
            layout = plan.layout
        elif isinstance(op, ops.ReshapeOp):
            layout = self.default(shape)
        elif isinstance(op, SharedLoadOp):
            layout = SharedLayout(op.view_layout)
        else:
            layout = self.anchored_layout(tile_operands) or self.default(shape)
        for r in op.results:
            self.set(r, layout)

    def loop(self, op: ops.Op, inits: list, carried: list, body: Block) -> None:
        for arg, init in zip(carried, inits):
            layout = init.type.layout if isinstance(init.type, TileType) else None
            if isinstance(arg.type, TileType) and isinstance(arg.type.elem, PointerType) \
                    and self.is_remat(init):
                # a carried pointer tile (``ptrs += BK``) is anchored: lay it out for the
                # widest access the axis facts prove, as its loads and stores will want
                # (along the first dimension for a transposed read: B held K-major)
                layout = self.pointer_layout(arg)
            self.set(arg, layout)
            if isinstance(arg.type, TileType) and self.is_remat(init) and \
                    not isinstance(arg.type.elem, PointerType):
                self.provisional.add(arg)
        for _ in range(3):  # settle loop-carried layouts on what the body yields
            self.block(body)
            changed = False
            yielded = body.terminator.values if body.terminator is not None else []
            for arg, init, y in zip(carried, inits, yielded):
                if not isinstance(arg.type, TileType):
                    continue
                want = y.type.layout
                if self.is_remat(init) and not self.is_remat(y) and want != arg.type.layout:
                    self.set(arg, want)
                    changed = True
            if not changed:
                break
        for r, arg in zip(op.results, carried):
            self.set(r, arg.type.layout if isinstance(arg.type, TileType) else None)

    def while_loop(self, op: ops.WhileOp) -> None:
        for arg, init in zip(op.before.args, op.inits):
            self.set(arg, init.type.layout if isinstance(init.type, TileType) else None)
        self.block(op.before)
        cond = op.before.terminator
        for arg, v in zip(op.after.args, cond.values):
            self.set(arg, v.type.layout if isinstance(v.type, TileType) else None)
        self.block(op.after)
        for r, v in zip(op.results, cond.values):
            self.set(r, v.type.layout if isinstance(v.type, TileType) else None)


def assign_layouts(module: Module, num_warps: int, warp_size: int,
                   plan_dot: Callable[[ops.DotOp], Any]) -> LaidOutKernel:
    """Run the axis analysis and give every tile value of ``module``'s kernel a layout
    (in place: the values' types gain a ``layout``).  ``plan_dot(dot)`` returns the
    ``dot.DotPlan`` of each dot (``dot.DotSelector.plan``): its result takes the plan's layout,
    and the lowering follows the plan."""
    out = LaidOutKernel(module, num_warps, warp_size)
    kernel = module.kernel
    out.axis = analyse_function(kernel)
    out.busy_shared = busy_buffer_ops(kernel)
    out.buffer_bytes = plan_persistent_shared(kernel)[1]
    _Assigner(out, plan_dot).block(kernel.body)
    _lay_gathers_out_for_their_readers(out, kernel)
    return out


def _lay_gathers_out_for_their_readers(out: LaidOutKernel, kernel: Function) -> None:
    """A load whose accesses are one element wide (a gather, ``w[offs // n]``) gains nothing
    from a layout of its own: give it the layout its readers all compute in, when its address,
    mask and fill value are recomputed there anyway.  Else each reader would exchange the
    whole tile through shared memory (a 64K-element tile: 256 KiB, more than a program has)."""
    uses = Uses(kernel)
    for op in walk(kernel.body):
        if not isinstance(op, ops.LoadOp) or op in out.transposed or out.vector.get(op) != 1:
            continue
        res = op.result
        operands = [v for v in (op.ptr, op.mask, op.other) if v is not None]
        if not isinstance(res.type, TileType) or \
                not all(v in out.remat for v in operands if isinstance(v.type, TileType)):
            continue
        wanted = set()
        for user in uses.users(res):
            if isinstance(user, ops.StoreOp) and user.value is res and user.ptr is not res:
                wanted.add(out.store_layout.get(user))
            elif isinstance(user, REMAT_OPS) and user.results and \
                    isinstance(user.results[0].type, TileType) and \
                    user.results[0].type.shape == res.type.shape:
                wanted.add(user.results[0].type.layout)
            else:
                wanted.add(None)
        own = res.type.layout
        if len(wanted) == 1:
            (layout,) = wanted
            # lanes kept along the same dimension: a warp's reads stay as coalesced as they
            # were (a row gather with unaligned rows is contiguous though one element wide)
            if isinstance(layout, BlockedLayout) and isinstance(own, BlockedLayout) and \
                    layout.order == own.order and layout != own:
                res.type = TileType(res.type.shape, res.type.elem, layout)
