"""Laid-out tile IR -> LLVM IR for one GPU thread (shared by every GPU backend).

The lowering is a small context (``KernelLowering``: the builder, the values lowered so far
scope by scope, this thread's lane and warp, the shared-memory plan) and a table of
``lower_<op>`` functions, one per IR op, from the modules that follow the op families:
``tile_ops`` (elementwise, index and shape ops), ``memory`` (loads, stores, atomics),
``collective`` (layout conversions, reductions, scans), ``dot``, ``control`` (for, while,
if) and ``shared`` (the pipeline's shared-memory ops).  Everything a target does its own way
goes through its ``GpuTarget`` hooks and tables; what a backend adds (``GpuTarget.dialects``)
through its lowering-table entries and its ``KernelExtension`` for the kernel as a whole.

Each thread holds, for each tile, the registers its layout gives it (``Regs``); scalars are
one LLVM value, the same in every thread.  Rematerialisable values (see ``assign.py``) are
emitted at their uses, in the layout the use asks for.  Values emitted inside a region are
cached in that region's scope only, so a value computed in a loop body is never used after
the loop.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
from llvmlite import ir

from ...errors import CompilationError
from ...ir import ops
from ...ir.nodes import Block, Value, walk
from ...ir.types import PointerType, ScalarType, TileType, elem_type, round_to_type
from ..llvm.elementwise import ElementwiseLowering
from ..llvm.types import I32, LLVMTypes
from . import collective, control, dot, memory, shared, tile_ops
from .assign import LaidOutKernel
from .dialects import KernelExtension
from .layouts import Layout
from .registers import Regs
from .scratch import convert
from .shared import plan_persistent_shared, shared_alignment
from .target import GpuTarget
from .tile_ops import rematerialise

__all__ = ["Regs", "KernelLowering", "Lowering", "lowering_table"]

#: how one op is lowered: ``lower(ctx, op)`` binds the op's results in ``ctx``
Lowering = Callable[["KernelLowering", ops.Op], None]


def lowering_table(target: Optional[GpuTarget] = None) -> dict[type, Lowering]:
    """Op class -> its ``lower_<op>`` function, from every module of the GPU lowering and
    then the entries of ``target``'s dialects."""
    table: dict[type, Lowering] = {}
    for module in (tile_ops, memory, collective, dot, control, shared):
        table.update(module.LOWERINGS)
    for dialect in target.dialects if target is not None else ():
        table.update(dialect.lowerings)
    return table


class _TargetMath:
    """The ``math`` object ``ElementwiseLowering`` calls: the target's functions."""

    def __init__(self, target: GpuTarget, b: ir.IRBuilder) -> None:
        self.target, self.b = target, b

    def emit(self, kind: str, x: ir.Value) -> ir.Value:
        out = self.target.math(self.b, kind, x)
        if out is None:
            raise NotImplementedError(f"math function '{kind}' on {x.type}")
        return out

    def relaxed(self, kind: str, x: ir.Value) -> Optional[ir.Value]:
        return self.target.relaxed_math(self.b, kind, x)


class KernelLowering:
    """The state of lowering one laid-out kernel (see the module docstring).  ``features``
    collects what the generated code needs of the target beyond the common hooks (dot
    strategies add to it; backends read it from ``GpuKernel.features``)."""

    def __init__(self, laid: LaidOutKernel, target: GpuTarget, debug: bool = False,
                 fp_fusion: bool = False) -> None:
        self.laid = laid
        self.target = target
        self.debug = debug
        self.fp_fusion = fp_fusion
        self.fn_ir = laid.kernel
        self.module = ir.Module(name=self.fn_ir.name)
        self.module.triple = target.triple
        if target.data_layout:
            self.module.data_layout = target.data_layout
        self.types = LLVMTypes(lambda p: target.global_address_space)
        self.threads = laid.num_warps * laid.warp_size
        self.shared_bytes = 0
        self.scopes: list[dict] = [{}]
        self.thread_consts: dict[Any, ir.Value] = {}
        self.shared_views: dict = {}
        self.features: set[str] = set()
        self.table = lowering_table(target)
        #: dialect name -> this kernel's ``KernelExtension`` of that dialect
        self.extensions: dict[str, KernelExtension] = {
            d.ir.name: d.kernel_extension(target, debug) for d in target.dialects
            if d.kernel_extension is not None}
        #: the ``for`` loops being lowered, innermost last
        self.loops: list[ops.ForOp] = []
        #: ``for`` loop -> (result index, rewrite) pairs ``at_loop_exit`` registered
        self.loop_exits: dict = {}

    # -- entry ---------------------------------------------------------------------------------
    def param_type(self, t: Any) -> ir.Type:
        if isinstance(t, PointerType):
            return self.types.pointer(t)
        if t.is_bool:
            return I32
        if t.name in ("f16", "bf16"):
            return self.types.storage(t)
        return self.types.compute(t)

    def run(self) -> ir.Module:
        """Lower the kernel; returns the LLVM module."""
        params = [self.param_type(a.type) for a in self.fn_ir.args]
        # with debug, a failed device_assert writes its number (1-based, first failure wins)
        # to an error word, a hidden last parameter the launcher reads after the launch
        self.asserts = [op for op in walk(self.fn_ir.body) if isinstance(op, ops.AssertOp)] \
            if self.debug else []
        if self.asserts:
            params.append(ir.PointerType(addrspace=self.target.global_address_space))
        # each extension's parameters, after the kernel's own
        added = []
        for ext in self.extensions.values():
            types = ext.parameters(self)
            added.append((ext, len(params)))
            params += types
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), params), self.fn_ir.name)
        self.target.declare_kernel(fn, self.threads)
        for ext, first in added:
            ext.declare(fn, first)
        entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.entry_b = ir.IRBuilder(entry)
        jump = self.entry_b.branch(body)
        self.entry_b.position_before(jump)
        self.b = ir.IRBuilder(body)
        zeros = self.target.min_max_order_zeros
        self.ew = ElementwiseLowering(self.b, _TargetMath(self.target, self.b), self.fp_fusion,
                                      min_max_order_zeros=zeros)
        self.entry_ew = ElementwiseLowering(self.entry_b, _TargetMath(self.target, self.entry_b),
                                            self.fp_fusion, min_max_order_zeros=zeros)
        warp_size = self.laid.warp_size
        self.tid = self.target.thread_id(self.entry_b)
        self.lane = self.entry_b.and_(self.tid, ir.Constant(I32, warp_size - 1), name="lane")
        self.warp = self.target.warp_uniform(self.entry_b, self.entry_b.lshr(
            self.tid, ir.Constant(I32, warp_size.bit_length() - 1), name="warp"))
        self.smem = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 0), "anytile_smem",
                                      addrspace=self.target.shared_address_space)
        self.smem.linkage = "external"
        self.smem.align = shared_alignment(self.fn_ir)
        self.smem.type = ir.PointerType(addrspace=self.target.shared_address_space)  # opaque
        # pipelined buffers first (fixed offsets), then the scratch space every other op shares
        self.persistent_offsets, self.persistent_shared = plan_persistent_shared(self.fn_ir)
        for ext in self.extensions.values():       # what extensions keep, after the buffers
            kept = ext.shared_bytes()
            if kept:
                ext.place_shared(self.entry_b.gep(self.smem, [ir.Constant(I32, self.persistent_shared)],
                                                  source_etype=ir.IntType(8)))
                self.persistent_shared += kept
        self.buffer_bytes = self.laid.buffer_bytes
        #: whether no pipelined buffer holds data at the op being lowered
        self.buffers_free = False
        self.shared_bytes = self.persistent_shared
        self.smem_base = self.smem if not self.persistent_shared else self.entry_b.gep(
            self.smem, [ir.Constant(I32, self.persistent_shared)], source_etype=ir.IntType(8))
        for arg, param in zip(self.fn_ir.args, fn.args):
            self.bind(arg, self.param_value(arg.type, param))
        self.error_word = fn.args[len(self.fn_ir.args)] if self.asserts else None
        for ext in self.extensions.values():
            ext.start(self)
        self.lower_block(self.fn_ir.body)
        self.b.ret_void()
        return self.module

    def param_value(self, t: Any, param: ir.Value) -> ir.Value:
        if isinstance(t, PointerType):
            return param
        if t.is_bool:
            return self.entry_b.icmp_unsigned("!=", param, ir.Constant(I32, 0))
        if t.name in ("f16", "bf16"):
            return self.entry_ew.from_storage(t, param)
        return param

    # -- values and scopes ---------------------------------------------------------------------
    def bind(self, v: Value, lowered: Any) -> None:
        key = (v, lowered.layout) if isinstance(lowered, Regs) else v
        self.scopes[-1][key] = lowered

    def lookup(self, key: Any) -> Any:
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def scalar(self, v: Value) -> ir.Value:
        found = self.lookup(v)
        if found is None:
            raise AssertionError(f"value {v} used before it was lowered")
        return found

    def tile(self, v: Value, layout: Optional[Layout] = None) -> Regs:
        """The registers of tile ``v`` in ``layout`` (default: its own)."""
        want = layout if layout is not None else v.type.layout
        found = self.lookup((v, want))
        if found is not None:
            return found
        if v in self.laid.remat and isinstance(v.owner, ops.Op):
            regs = rematerialise(self, v.owner, v, want)
            if regs is not None:
                self.bind(v, regs)
                return regs
        own = self.lookup((v, v.type.layout))
        if own is None:
            own = rematerialise(self, v.owner, v, v.type.layout) if v in self.laid.remat else None
            if own is None:
                raise AssertionError(f"tile {v} used before it was lowered")
            self.bind(v, own)
        regs = convert(self, own, want, elem_type(v.type))
        self.bind(v, regs)
        return regs

    def operand(self, v: Value, layout: Optional[Layout]) -> Any:
        """``v``'s registers in ``layout`` if it is a tile, else its scalar."""
        return self.tile(v, layout) if isinstance(v.type, TileType) else self.scalar(v)

    def set_result(self, op: ops.Op, value: Any, index: int = 0) -> None:
        self.bind(op.results[index], value)

    def constant(self, t: ScalarType, value: Any) -> ir.Constant:
        ct = self.types.compute(t)
        if t.is_float:
            v = float(value)
            if t.name == "f16":
                v = float(np.float16(v))
            elif t.name == "bf16" or t.is_float8:
                v = round_to_type(v, t)
            return ir.Constant(ct, v)
        v = int(value) & ((1 << t.bits) - 1)
        if t.bits > 1 and v >= 1 << (t.bits - 1):
            v -= 1 << t.bits
        return ir.Constant(ct, v)

    # -- blocks and ops ------------------------------------------------------------------------
    def at_loop_exit(self, loop: ops.ForOp, index: int, rewrite: Callable[[Any], Any]) -> None:
        """Have the ``index``-th result of ``loop`` (being lowered) pass through ``rewrite``
        where the loop exits: ``rewrite(lowered) -> lowered``, emitted with ``self.b`` at the
        exit (a dot whose instructions are still in flight waits for them there)."""
        self.loop_exits.setdefault(loop, []).append((index, rewrite))

    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            if op.has_trait("terminator"):
                continue
            self.lower_op(op)

    def fail(self, op: ops.Op, message: str) -> None:
        raise CompilationError(message, op.loc)

    def handler(self, cls: type) -> Optional[Lowering]:
        """The lowering of op class ``cls``: its own entry, else its nearest base class's (a
        dialect op refining a core op lowers as that one unless its dialect says otherwise)."""
        found = self.table.get(cls)
        if found is None:
            found = next((self.table[base] for base in cls.__mro__[1:] if base in self.table), None)
            if found is not None:
                self.table[cls] = found
        return found

    def buffers_reused(self, b: ir.IRBuilder) -> None:
        """Ordinary reads and writes of the pipeline buffers' place end here (the extensions'
        ``buffers_reused``)."""
        for ext in self.extensions.values():
            ext.buffers_reused(self, b)

    def lower_op(self, op: ops.Op) -> None:
        handler = self.handler(type(op))
        if handler is None:
            self.fail(op, f"the GPU backend cannot compile '{op.NAME}' yet")
        tile_results = [r for r in op.results if isinstance(r.type, TileType)]
        if tile_results and all(r in self.laid.remat for r in tile_results):
            return  # emitted at each use, in the layout the use wants
        outer, self.buffers_free = self.buffers_free, op not in self.laid.busy_shared
        handler(self, op)
        self.buffers_free = outer
