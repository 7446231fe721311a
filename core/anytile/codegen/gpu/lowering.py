"""Laid-out tile IR -> LLVM IR for one GPU thread (shared by every GPU backend).

Each thread holds, for each tile, the registers its layout gives it (``Regs``); scalars are
one LLVM value, the same in every thread.  Elementwise ops run per register through the
shared ``ElementwiseLowering``; loads and stores are grouped into vector accesses
(``memory.py``); reductions, scans, dots and layout conversions go through warp shuffles
and shared memory (``collective.py``); structured control flow becomes LLVM loops and
branches with one phi per register.

Rematerialisable values (see ``assign.py``) are emitted at their uses, in the layout the
use asks for.  Values emitted inside a region are cached in that region's scope only, so a
value computed in a loop body is never used after the loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import ml_dtypes
import numpy as np
from llvmlite import ir

from ...errors import CompilationError
from ...ir import ops
from ...ir.core import Block, Value, walk
from ...ir.types import PointerType, ScalarType, TileType, elem_type, shape_of
from ..llvm.elementwise import ElementwiseLowering
from ..llvm.types import I32, LLVMTypes
from .assign import LaidOutKernel
from .layouts import BlockedLayout, Layout, SliceLayout, blocked_of, default_blocked, register_indices
from .target import GpuTarget

__all__ = ["Regs", "lower_kernel", "KernelLowering"]


@dataclass
class Regs:
    """The registers one thread holds of a tile, in register order of ``layout``."""

    layout: Layout
    shape: tuple[int, ...]
    values: list


class _TargetMath:
    """The ``math`` object ``ElementwiseLowering`` calls: the target's functions."""

    def __init__(self, target: GpuTarget, b: ir.IRBuilder) -> None:
        self.target, self.b = target, b

    def emit(self, kind: str, x: ir.Value) -> ir.Value:
        out = self.target.math(self.b, kind, x)
        if out is None:
            raise NotImplementedError(f"math function '{kind}' on {x.type}")
        return out


class KernelLowering:
    """Lowers one laid-out kernel; see the module docstring.  Subclass mixins (memory,
    collectives) add the ops that need more than one register at a time."""

    def __init__(self, laid: LaidOutKernel, target: GpuTarget, debug: bool = False) -> None:
        self.laid = laid
        self.target = target
        self.debug = debug
        self.fn_ir = laid.kernel
        self.module = ir.Module(name=self.fn_ir.name)
        self.module.triple = target.triple
        if target.data_layout:
            self.module.data_layout = target.data_layout
        self.types = LLVMTypes(lambda p: target.global_address_space)
        self.threads = laid.num_warps * laid.warp_size
        self.shared_bytes = 0
        self.scopes: list[dict] = [{}]
        self._thread_consts: dict[Any, ir.Value] = {}

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
        params = [self.param_type(a.type) for a in self.fn_ir.args]
        # with debug, a failed device_assert writes its number (1-based, first failure wins)
        # to an error word, a hidden last parameter the launcher reads after the launch
        self.asserts = [op for op in walk(self.fn_ir.body) if isinstance(op, ops.AssertOp)] \
            if self.debug else []
        if self.asserts:
            params.append(ir.PointerType(addrspace=self.target.global_address_space))
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), params), self.fn_ir.name)
        self.target.declare_kernel(fn, self.threads)
        entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.entry_b = ir.IRBuilder(entry)
        jump = self.entry_b.branch(body)
        self.entry_b.position_before(jump)
        self.b = ir.IRBuilder(body)
        self.ew = ElementwiseLowering(self.b, _TargetMath(self.target, self.b))
        self.entry_ew = ElementwiseLowering(self.entry_b, _TargetMath(self.target, self.entry_b))
        tid = self.target.thread_id(self.entry_b)
        self.tid = tid
        self.lane = self.entry_b.and_(tid, ir.Constant(I32, self.laid.warp_size - 1), name="lane")
        self.warp = self.entry_b.lshr(tid, ir.Constant(I32, self.laid.warp_size.bit_length() - 1),
                                      name="warp")
        self.smem = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 0), "anytile_smem",
                                      addrspace=self.target.shared_address_space)
        self.smem.linkage = "external"
        self.smem.align = 16
        self.smem.type = ir.PointerType(addrspace=self.target.shared_address_space)  # opaque
        # pipelined buffers first (fixed offsets), then the scratch space every other op shares
        from .shared import plan_persistent_shared
        self.persistent_offsets, self.persistent_shared = plan_persistent_shared(self.fn_ir)
        self.shared_bytes = self.persistent_shared
        self.shared_views: dict = {}
        self.smem_base = self.smem if not self.persistent_shared else self.entry_b.gep(
            self.smem, [ir.Constant(I32, self.persistent_shared)], source_etype=ir.IntType(8))
        for arg, param, t in zip(self.fn_ir.args, fn.args, params):
            self.bind(arg, self.param_value(arg.type, param))
        self.error_word = fn.args[-1] if self.asserts else None
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
            regs = self.rematerialise(v.owner, v, want)
            if regs is not None:
                self.bind(v, regs)
                return regs
        own = self.lookup((v, v.type.layout))
        if own is None:
            own = self.rematerialise(v.owner, v, v.type.layout) if v in self.laid.remat else None
            if own is None:
                raise AssertionError(f"tile {v} used before it was lowered")
            self.bind(v, own)
        regs = self.convert(own, want)
        self.bind(v, regs)
        return regs

    def operand(self, v: Value, layout: Optional[Layout]) -> Any:
        return self.tile(v, layout) if isinstance(v.type, TileType) else self.scalar(v)

    # -- thread-dependent coordinates ----------------------------------------------------------
    def thread_offset(self, root: BlockedLayout, root_shape: tuple, d: int) -> ir.Value:
        """This thread's offset along root dimension ``d`` (computed once, in the entry)."""
        key = ("off", root, root_shape, d)
        found = self._thread_consts.get(key)
        if found is not None:
            return found
        b = self.entry_b
        spt, tpw, size = root.size_per_thread[d], root.threads_per_warp[d], root_shape[d]
        lane_d = b.and_(b.udiv(self.lane, ir.Constant(I32, root.lane_stride(d))), ir.Constant(I32, tpw - 1))
        warp_d = b.and_(b.udiv(self.warp, ir.Constant(I32, root.warp_stride(d))),
                        ir.Constant(I32, root.warps_per_cta[d] - 1))
        off = b.add(b.mul(lane_d, ir.Constant(I32, spt)), b.mul(warp_d, ir.Constant(I32, spt * tpw)))
        if size >= root.cta_tile(d):
            out = off
        elif spt <= size:
            out = b.and_(off, ir.Constant(I32, size - 1))
        else:
            out = ir.Constant(I32, 0)
        self._thread_consts[key] = out
        return out

    def owner_predicate(self, layout: Layout, shape: tuple) -> Optional[ir.Value]:
        """True in exactly one of the threads holding each element (None: no replicas)."""
        root, root_shape, _ = blocked_of(layout, shape)
        key = ("owner", root, root_shape)
        if key in self._thread_consts:
            return self._thread_consts[key]
        b = self.entry_b
        pred = None
        for d in range(root.rank):
            if root_shape[d] >= root.cta_tile(d):
                continue
            spt, tpw = root.size_per_thread[d], root.threads_per_warp[d]
            lane_d = b.and_(b.udiv(self.lane, ir.Constant(I32, root.lane_stride(d))), ir.Constant(I32, tpw - 1))
            warp_d = b.and_(b.udiv(self.warp, ir.Constant(I32, root.warp_stride(d))),
                            ir.Constant(I32, root.warps_per_cta[d] - 1))
            off = b.add(b.mul(lane_d, ir.Constant(I32, spt)), b.mul(warp_d, ir.Constant(I32, spt * tpw)))
            ok = b.icmp_unsigned("<", off, ir.Constant(I32, max(root_shape[d], spt)))
            pred = ok if pred is None else b.and_(pred, ok)
        self._thread_consts[key] = pred
        return pred

    def register_is_replica(self, layout: Layout, shape: tuple, j: tuple) -> bool:
        """Whether register ``j`` repeats an element another register of the thread holds."""
        root, root_shape, dims = blocked_of(layout, shape)
        return any(root.size_per_thread[d] > root_shape[d] and jd % root.size_per_thread[d] >= root_shape[d]
                   for jd, d in zip(j, dims))

    def coords(self, layout: Layout, shape: tuple) -> list[tuple]:
        """Per register, its element coordinates as i32 values."""
        root, root_shape, dims = blocked_of(layout, shape)
        b = self.b
        offsets = [self.thread_offset(root, root_shape, d) for d in dims]
        out = []
        for j in register_indices(layout, shape):
            coord = []
            for jd, d, off in zip(j, dims, offsets):
                spt, size = root.size_per_thread[d], root_shape[d]
                base = root.base(root_shape, d, jd) if size >= root.cta_tile(d) else (
                    jd if spt <= size else jd % size)
                coord.append(off if base == 0 else b.add(off, ir.Constant(I32, base)))
            out.append(tuple(coord))
        return out

    def linear_index(self, coord: tuple, shape: tuple) -> ir.Value:
        b = self.b
        idx = None
        stride = 1
        for c, n in zip(reversed(coord), reversed(shape)):
            term = c if stride == 1 else b.mul(c, ir.Constant(I32, stride))
            idx = term if idx is None else b.add(idx, term)
            stride *= n
        return idx if idx is not None else ir.Constant(I32, 0)

    # -- constants -----------------------------------------------------------------------------
    def constant(self, t: ScalarType, value: Any) -> ir.Constant:
        ct = self.types.compute(t)
        if t.is_float:
            v = float(value)
            if t.name == "f16":
                v = float(np.float16(v))
            elif t.name == "bf16":
                v = float(ml_dtypes.bfloat16(v))
            return ir.Constant(ct, v)
        v = int(value) & ((1 << t.bits) - 1)
        if t.bits > 1 and v >= 1 << (t.bits - 1):
            v -= 1 << t.bits
        return ir.Constant(ct, v)

    # -- blocks and ops ------------------------------------------------------------------------
    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            if op.has_trait("terminator"):
                continue
            self.lower_op(op)

    def fail(self, op: ops.Op, message: str) -> None:
        raise CompilationError(message, op.loc)

    def lower_op(self, op: ops.Op) -> None:
        handler = getattr(self, "lower_" + op.NAME, None)
        if handler is None:
            self.fail(op, f"the GPU backend cannot compile '{op.NAME}' yet")
        tile_results = [r for r in op.results if isinstance(r.type, TileType)]
        if tile_results and all(r in self.laid.remat for r in tile_results):
            return  # emitted at each use, in the layout the use wants
        handler(op)

    def set_result(self, op: ops.Op, value: Any, index: int = 0) -> None:
        self.bind(op.results[index], value)

    # elementwise ------------------------------------------------------------------------------
    def map_registers(self, op: ops.Op, layout: Optional[Layout], fn) -> Any:
        """Apply ``fn`` to the operands' scalars (one register of each at a time)."""
        shape = shape_of(op.results[0].type)
        if not shape:
            return fn(*[self.scalar(v) for v in op.operands])
        regs = [self.tile(v, layout) if isinstance(v.type, TileType) else None for v in op.operands]
        scalars = [None if r is not None else self.scalar(v) for r, v in zip(regs, op.operands)]
        n = len(next(r for r in regs if r is not None).values)
        values = []
        for i in range(n):
            args = [r.values[i] if r is not None else s for r, s in zip(regs, scalars)]
            values.append(fn(*args))
        return Regs(layout, shape, values)

    def elementwise(self, op: ops.Op, layout: Optional[Layout]) -> Any:
        ew = self.ew
        if isinstance(op, ops.BinaryOp):
            e = elem_type(op.lhs.type)
            return self.map_registers(op, layout, lambda x, y: ew.binary(op.kind, e, x, y))
        if isinstance(op, ops.CompareOp):
            e = elem_type(op.lhs.type)
            if isinstance(e, PointerType):
                return self.map_registers(op, layout, lambda x, y: self.b.icmp_unsigned(
                    {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op.pred],
                    self.b.ptrtoint(x, ir.IntType(64)), self.b.ptrtoint(y, ir.IntType(64))))
            return self.map_registers(op, layout, lambda x, y: ew.compare(op.pred, e, x, y))
        if isinstance(op, ops.UnaryOp):
            e = elem_type(op.src.type)
            return self.map_registers(op, layout, lambda x: ew.unary(op.kind, e, x))
        if isinstance(op, ops.FmaOp):
            e = elem_type(op.a.type)
            return self.map_registers(op, layout, lambda x, y, z: ew.fma(e, x, y, z))
        if isinstance(op, ops.UMulHiOp):
            e = elem_type(op.lhs.type)
            return self.map_registers(op, layout, lambda x, y: ew.umulhi(e, x, y))
        if isinstance(op, ops.SelectOp):
            return self.map_registers(op, layout, lambda c, x, y: self.b.select(c, x, y))
        if isinstance(op, ops.CastOp):
            src, dst = elem_type(op.src.type), elem_type(op.result.type)
            if isinstance(src, PointerType) or isinstance(dst, PointerType):
                return self.map_registers(op, layout, lambda x: self.pointer_cast(x, src, dst))
            return self.map_registers(op, layout, lambda x: ew.cast(src, dst, x))
        if isinstance(op, ops.BitcastOp):
            src, dst = elem_type(op.src.type), elem_type(op.result.type)
            return self.map_registers(op, layout, lambda x: ew.bitcast(src, dst, x))
        if isinstance(op, ops.HintOp):
            return self.map_registers(op, layout, lambda x: x)
        if isinstance(op, ops.AddPtrOp):
            pointee = elem_type(op.ptr.type).pointee
            st = self.types.storage(pointee)
            return self.map_registers(op, layout, lambda p, o: self.b.gep(p, [o], source_etype=st))
        raise AssertionError(op.NAME)

    def pointer_cast(self, x: ir.Value, src: Any, dst: Any) -> ir.Value:
        if isinstance(src, PointerType) and isinstance(dst, PointerType):
            return x
        if isinstance(dst, PointerType):
            return self.b.inttoptr(x, self.types.pointer(dst))
        return self.b.ptrtoint(x, self.types.compute(dst))

    def _ew(self, op: ops.Op) -> None:
        self.set_result(op, self.elementwise(op, op.result.type.layout
                                             if isinstance(op.result.type, TileType) else None))

    lower_binary = lower_compare = lower_unary = lower_fma = lower_umulhi = _ew
    lower_select = lower_cast = lower_bitcast = lower_hint = lower_addptr = _ew

    # index and shape ops -----------------------------------------------------------------------
    def rematerialise(self, op: ops.Op, v: Value, layout: Layout) -> Optional[Regs]:
        """Emit ``op``'s result ``v`` in ``layout`` here; ``None`` when the layout cannot be
        reached without moving data (the caller then converts)."""
        shape = shape_of(v.type)
        if isinstance(op, ops.ArangeOp):
            return Regs(layout, shape, [self.b.add(c[0], ir.Constant(I32, op.start)) if op.start
                                        else c[0] for c in self.coords(layout, shape)])
        if isinstance(op, ops.ConstantOp):
            c = self.constant(elem_type(v.type), op.value)
            return Regs(layout, shape, [c] * len(register_indices(layout, shape)))
        if isinstance(op, ops.SplatOp):
            s = self.scalar(op.src)
            return Regs(layout, shape, [s] * len(register_indices(layout, shape)))
        if isinstance(op, ops.ExpandDimsOp):
            return self.expand_dims(op, layout)
        if isinstance(op, ops.BroadcastOp):
            return self.broadcast(op, layout)
        if isinstance(op, ops.PermuteOp):
            return self.permute(op, layout)
        if isinstance(op, (ops.BinaryOp, ops.CompareOp, ops.UnaryOp, ops.FmaOp, ops.UMulHiOp,
                           ops.SelectOp, ops.CastOp, ops.BitcastOp, ops.HintOp, ops.AddPtrOp)):
            return self.elementwise(op, layout)
        return None

    def expand_dims(self, op: ops.ExpandDimsOp, layout: Layout) -> Regs:
        shape = shape_of(op.result.type)
        if not shape_of(op.src.type):
            s = self.scalar(op.src)
            return Regs(layout, shape, [s] * len(register_indices(layout, shape)))
        src = self.tile(op.src, SliceLayout(layout, op.axis))
        src_index = {j: i for i, j in enumerate(register_indices(src.layout, src.shape))}
        values = [src.values[src_index[j[:op.axis] + j[op.axis + 1:]]]
                  for j in register_indices(layout, shape)]
        return Regs(layout, shape, values)

    def broadcast(self, op: ops.BroadcastOp, layout: Layout) -> Regs:
        shape = shape_of(op.result.type)
        src_shape = shape_of(op.src.type)
        src = self.tile(op.src, layout)
        src_index = {j: i for i, j in enumerate(register_indices(layout, src_shape))}
        values = []
        for j in register_indices(layout, shape):
            k = tuple(0 if s == 1 and n != 1 else jd for jd, s, n in zip(j, src_shape, shape))
            values.append(src.values[src_index[k]])
        return Regs(layout, shape, values)

    def permute(self, op: ops.PermuteOp, layout: Layout) -> Optional[Regs]:
        if not isinstance(layout, BlockedLayout):
            return None
        order = tuple(op.order)
        inverse = tuple(order.index(i) for i in range(len(order)))
        shape = shape_of(op.result.type)
        src = self.tile(op.src, layout.permuted(inverse))
        src_index = {j: i for i, j in enumerate(register_indices(src.layout, src.shape))}
        values = []
        for j in register_indices(layout, shape):
            k = [0] * len(j)
            for i, jd in enumerate(j):
                k[order[i]] = jd
            values.append(src.values[src_index[tuple(k)]])
        return Regs(layout, shape, values)

    def _shape_op(self, op: ops.Op) -> None:
        regs = self.rematerialise(op, op.result, op.result.type.layout)
        if regs is None:  # e.g. a permute wanted in a slice layout: build it blocked, convert
            blocked = default_blocked(shape_of(op.result.type), self.laid.num_warps, self.laid.warp_size)
            regs = self.convert(self.rematerialise(op, op.result, blocked), op.result.type.layout)
        self.set_result(op, regs)

    lower_expand_dims = lower_broadcast = lower_permute = _shape_op

    def lower_arange(self, op: ops.ArangeOp) -> None:
        self.set_result(op, self.rematerialise(op, op.result, op.result.type.layout))

    lower_splat = lower_arange

    def lower_constant(self, op: ops.ConstantOp) -> None:
        if isinstance(op.result.type, TileType):
            self.set_result(op, self.rematerialise(op, op.result, op.result.type.layout))
        else:
            self.set_result(op, self.constant(op.result.type, op.value))

    def lower_program_id(self, op: ops.ProgramIdOp) -> None:
        self.set_result(op, self.target.program_id(self.entry_b, op.axis))

    def lower_num_programs(self, op: ops.NumProgramsOp) -> None:
        self.set_result(op, self.target.num_programs(self.entry_b, op.axis))

    def lower_reshape(self, op: ops.ReshapeOp) -> None:
        src = self.tile(op.src)
        self.set_result(op, self.through_shared(src, op.result.type.layout, shape_of(op.result.type)))

    def lower_barrier(self, op: ops.BarrierOp) -> None:
        self.target.barrier(self.b)

    def lower_assert(self, op: ops.AssertOp) -> None:
        if not self.debug:
            return
        cond = self.operand(op.cond, None)
        values = cond.values if isinstance(cond, Regs) else [cond]
        ok = values[0]
        for v in values[1:]:
            ok = self.b.and_(ok, v)
        number = ir.Constant(I32, self.asserts.index(op) + 1)
        with self.b.if_then(self.b.not_(ok), likely=False):
            self.b.cmpxchg(self.error_word, ir.Constant(I32, 0), number, "monotonic", "monotonic")

    def lower_call(self, op: ops.CallOp) -> None:
        self.fail(op, f"call to '{op.callee}' was not inlined before GPU lowering")


def lower_kernel(laid: LaidOutKernel, target: GpuTarget,
                 debug: bool = False) -> tuple[ir.Module, int, list]:
    """LLVM IR for the kernel of ``laid``, the bytes of shared memory it needs, and (with
    ``debug``) its checks: ``[message, file, line]`` of each ``device_assert``, numbered from 1
    in the error word the kernel then takes as a hidden last parameter (0: all held)."""
    from .collective import CollectiveLowering
    from .control import ControlFlowLowering
    from .memory import MemoryLowering
    from .mma import MmaLowering
    from .shared import SharedLowering

    class _Lowering(MemoryLowering, MmaLowering, SharedLowering, CollectiveLowering, ControlFlowLowering,
                    KernelLowering):
        pass

    lowering = _Lowering(laid, target, debug)
    module = lowering.run()
    checks = [[op.message, op.loc.file, op.loc.line] for op in lowering.asserts]
    return module, lowering.shared_bytes, checks
