"""The shared-memory scratch space and the exchanges that go through it.

The kernel's shared memory is one external array: the pipelined buffers first (fixed
offsets, ``shared.py``), then a scratch space every other op reuses (layout conversions,
reductions across warps, dot operands, scalar broadcasts).  Each use of the scratch space
starts with a barrier, so consecutive uses may share addresses; ``reserve`` grows the
kernel's total to the largest use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ..llvm.types import I8, I32, I64
from .layouts import Layout
from .registers import Regs, coords, first_thread, linear_index

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["reserve", "aligned_scratch", "llvm_bytes", "shared_type", "shared_ptr", "shared_store", "shared_load",
           "broadcast_from_first_thread", "through_shared", "convert"]


def aligned_scratch(ctx: "KernelLowering", nbytes: int, alignment: int) -> ir.Value:
    """Scratch space of ``nbytes`` starting on an ``alignment``-byte boundary (a power of two)
    of the shared-memory address: its start (an i8 pointer)."""
    b = ctx.b
    reserve(ctx, nbytes + alignment)
    start = b.ptrtoint(ctx.smem_base, I64)
    aligned = b.and_(b.add(start, ir.Constant(I64, alignment - 1)), ir.Constant(I64, -alignment))
    return b.gep(ctx.smem_base, [b.sub(aligned, start)], source_etype=I8)


def llvm_bytes(t: ir.Type) -> int:
    """Bytes of one value of ``t`` in memory."""
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    if isinstance(t, ir.PointerType):
        return 8
    return {"half": 2, "float": 4, "double": 8}[str(t)]


def reserve(ctx: "KernelLowering", nbytes: int) -> None:
    """Scratch space of ``nbytes`` at ``ctx.smem_base`` (after the pipelined buffers)."""
    ctx.shared_bytes = max(ctx.shared_bytes, ctx.persistent_shared + (nbytes + 15) // 16 * 16)


def shared_type(t: ir.Type) -> ir.Type:
    """How a register of type ``t`` is kept in shared memory (i1 as a byte, pointers as i64)."""
    if isinstance(t, ir.IntType) and t.width == 1:
        return I8
    if isinstance(t, ir.PointerType):
        return I64
    return t


def shared_ptr(ctx: "KernelLowering", t: ir.Type, index: ir.Value, region: int = 0) -> ir.Value:
    b = ctx.b
    base = ctx.smem_base if region == 0 else b.gep(ctx.smem_base, [ir.Constant(I32, region)],
                                                   source_etype=I8)
    return b.gep(base, [index], source_etype=shared_type(t))


def shared_store(ctx: "KernelLowering", value: ir.Value, index: ir.Value, region: int = 0) -> None:
    """Store ``value`` at element ``index`` of the scratch space (from byte ``region``)."""
    b, t = ctx.b, value.type
    if isinstance(t, ir.IntType) and t.width == 1:
        value = b.zext(value, I8)
    elif isinstance(t, ir.PointerType):
        value = b.ptrtoint(value, I64)
    b.store(value, shared_ptr(ctx, t, index, region))


def shared_load(ctx: "KernelLowering", t: ir.Type, index: ir.Value, region: int = 0) -> ir.Value:
    """The value of type ``t`` at element ``index`` of the scratch space."""
    b = ctx.b
    raw = b.load(shared_ptr(ctx, t, index, region), typ=shared_type(t))
    if isinstance(t, ir.IntType) and t.width == 1:
        return b.trunc(raw, t)
    if isinstance(t, ir.PointerType):
        return b.inttoptr(raw, t)
    return raw


def broadcast_from_first_thread(ctx: "KernelLowering", value: ir.Value) -> ir.Value:
    """Thread 0's ``value``, in every thread."""
    reserve(ctx, 8)
    ctx.target.barrier(ctx.b)
    with ctx.b.if_then(first_thread(ctx)):
        shared_store(ctx, value, ir.Constant(I32, 0))
    ctx.target.barrier(ctx.b)
    return shared_load(ctx, value.type, ir.Constant(I32, 0))


def through_shared(ctx: "KernelLowering", src: Regs, want: Layout, shape: tuple) -> Regs:
    """``src`` re-distributed as ``want`` over ``shape`` (same row-major elements)."""
    t = src.values[0].type
    numel = 1
    for s in shape:
        numel *= s
    reserve(ctx, numel * llvm_bytes(shared_type(t)))
    ctx.target.barrier(ctx.b)
    for v, c in zip(src.values, coords(ctx, src.layout, src.shape)):
        shared_store(ctx, v, linear_index(ctx.b, c, src.shape))
    ctx.target.barrier(ctx.b)
    values = [shared_load(ctx, t, linear_index(ctx.b, c, shape)) for c in coords(ctx, want, shape)]
    return Regs(want, shape, values)


def convert(ctx: "KernelLowering", regs: Any, want: Layout) -> Any:
    """``regs`` in layout ``want`` (themselves when already in it)."""
    if regs.layout == want:
        return regs
    return through_shared(ctx, regs, want, regs.shape)
