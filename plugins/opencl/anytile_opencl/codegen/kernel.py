"""A laid-out kernel ``Function`` as one OpenCL C ``__kernel``.

The kernel's parameters are the IR's runtime parameters (a pointer becomes its buffer and a
byte offset), then the grid size per axis, how many programs each work-group runs in turn
along axis 0 (several on CPUs: starting a work-group costs PoCL microseconds) and, when the
kernel checks something at run time, the error word.  Every program starts with
``#pragma OPENCL FP_CONTRACT OFF``: ``a*b + c`` is rounded twice, as the IR says, never fused.

With several work-items, a program that reads global memory after writing it first waits at
a barrier (another work-item may have written what it reads).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from anytile.errors import CompilationError
from anytile.ir import (AddPtrOp, AssertOp, PrintOp, AtomicCASOp, AtomicRMWOp, BarrierOp, BinaryOp, Block,
                        BitcastOp, BroadcastOp, CallOp, CastOp, CompareOp, ConditionOp, DotOp,
                        FmaOp, ForOp, IfOp, LoadOp, Module, Op, PermuteOp, PointerType,
                        ReduceOp, ScanOp, SelectOp, StoreOp, TileType, UMulHiOp, UnaryOp, Value,
                        WhileOp, YieldOp, elem_type)

from ..layout import LayoutPolicy
from ..target import OpenCLArch
from .arith import Arith
from .chunk import Chunk, Point, Writer
from .collective import CollectiveEmitter
from .control import ControlEmitter
from .ctypes import scalar_name, size_of
from .dot import DotEmitter
from .helpers import Helpers
from .memory import MemoryEmitter
from .plan import CHEAP, FUSED, VIEW, VIEWS, Plan
from .values import ValueEmitter

__all__ = ["EmittedKernel", "emit_kernel"]


@dataclass(frozen=True)
class EmittedKernel:
    """The ``opencl-c`` stage's result: the source, its ``__kernel``'s name, the scratch
    memory one work-group uses, the run-time checks (``[message, file, line]``) and the
    parameters written (a launch writing more than the cache holds streams its stores)."""

    name: str
    source: str
    scratch_bytes: int
    checks: list
    written: list               # the pointer parameters it may write through


def emit_kernel(module: Module, arch: OpenCLArch, policy: LayoutPolicy,
                debug: bool = False) -> EmittedKernel:
    """``module``'s kernel (after the ``laid-out ir`` stage) as OpenCL C."""
    return KernelEmitter(module, arch, policy, debug).emit()


class KernelEmitter(ValueEmitter, MemoryEmitter, CollectiveEmitter, DotEmitter, ControlEmitter):
    """Writes one kernel; the mixins hold values, memory, collectives and control flow."""

    def __init__(self, module: Module, arch: OpenCLArch, policy: LayoutPolicy,
                 debug: bool) -> None:
        self.fn = module.kernel
        self.arch = arch
        self.work_items = policy.work_items
        self.debug = debug
        self.plan = Plan(self.fn, policy.work_items)
        self.w = Writer(indent=2)
        self.helpers = Helpers(arch.fp64)
        self.arith = Arith(self.w, self.helpers)
        self.scalars: dict[Value, str] = {}
        self.divisors: dict[Value, int] = {}      # a power of 2 dividing each scalar
        self.stored: dict[Value, Any] = {}
        self.staged: dict[Value, tuple] = {}
        self.own_masks: set[int] = set()
        self.extensions: set[str] = set()
        self.checks: list = []
        self.scratch_bytes = 0
        self.scratch_in_use = False
        self.pending_writes = False
        self.uses_streaming = False
        self.saved_writes: list[bool] = []
        self.current_loc = self.fn.loc
        self.done: set[int] = set()          # ops computed early (fused reductions)

    # -- the kernel ----------------------------------------------------------------------------
    def emit(self) -> EmittedKernel:
        self._require_extensions()
        params = self._parameters()
        self.emit_block(self.fn.body)
        name = "at_" + re.sub(r"\W", "_", self.fn.name)
        if self.helpers.uses_fp64:
            self.extensions.add("cl_khr_fp64")
        lines = ["#pragma OPENCL FP_CONTRACT OFF"]
        lines += [f"#pragma OPENCL EXTENSION {e} : enable" for e in sorted(self.extensions)]
        if self.uses_streaming:
            lines += ["#if defined(__has_builtin)", "#if __has_builtin(__builtin_nontemporal_store)",
                      "#define AT_STREAM 1", "#endif", "#endif"]
        prelude = self.helpers.prelude()
        if prelude:
            lines += ["", prelude]
        extra = ["const int at_gx", "const int at_gy", "const int at_gz", "const int at_per_group",
                 "const int at_stream"]
        if self.checks:
            extra.append("__global int* at_error")
        lines += ["", f"__kernel __attribute__((reqd_work_group_size({self.work_items}, 1, 1)))",
                  f"void {name}({', '.join(params[0] + extra)}) {{"]
        if self.scratch_bytes:
            lines.append(f"  __local ulong at_scratch[{-(-self.scratch_bytes // 8)}];")
        lines.append("  const int lid = get_local_id(0);" if self.work_items > 1 else
                     "  const int lid = 0;")
        lines += [f"  const int own{m} = lid & {m - 1};" for m in sorted(self.own_masks)]
        lines += params[1]
        lines += ["  for (int at_p = 0; at_p < at_per_group; at_p++) {",
                  "    const int pid0 = (int)get_group_id(0) * at_per_group + at_p;",
                  "    if (pid0 >= at_gx) break;",
                  "    const int pid1 = (int)get_group_id(1), pid2 = (int)get_group_id(2);"]
        lines += self.w.lines
        if self.scratch_bytes and self.work_items > 1:
            lines.append("    barrier(CLK_LOCAL_MEM_FENCE);")
        lines += ["  }", "}", ""]
        return EmittedKernel(name, "\n".join(lines), self.scratch_bytes, self.checks,
                             self._written_parameters())

    def _written_parameters(self) -> list[int]:
        """The pointer parameters a store or atomic may write through."""
        pointers = [i for i, a in enumerate(self.fn.args) if isinstance(a.type, PointerType)]
        written: set[int] = set()
        for op in self.fn.walk():
            if isinstance(op, (StoreOp, AtomicRMWOp, AtomicCASOp)):
                origins = self.plan.origins(op.ptr)
                if origins is None:
                    return pointers
                written |= origins
        return sorted(written)

    def _require_extensions(self) -> None:
        """Doubles anywhere (values, pointees) need ``cl_khr_fp64``."""
        for op in self.fn.walk():
            for r in op.results + [a for b in op.regions for a in b.args]:
                elem = elem_type(r.type)
                if isinstance(elem, PointerType):
                    elem = elem.pointee
                if elem.name == "f64":
                    self.helpers.require_fp64(op.loc)
                    return

    def _parameters(self) -> tuple[list[str], list[str]]:
        """The C parameters, and the lines that turn buffers and offsets into addresses."""
        params, setup = [], []
        for i, arg in enumerate(self.fn.args):
            t = arg.type
            if isinstance(t, TileType):
                raise CompilationError("a kernel parameter cannot be a tile", self.fn.loc)
            divisible = (self.fn.arg_attrs[i] if i < len(self.fn.arg_attrs) else {}).get(
                "divisibility", 1)
            if isinstance(t, PointerType):
                params += [f"__global uchar* buf{i}", f"const long off{i}"]
                setup.append(f"  const ulong ptr{i} = (ulong)(buf{i} + off{i});")
                self.scalars[arg] = f"ptr{i}"
                self.divisors[arg] = max(divisible, size_of(t.pointee))
            else:
                if t.name == "f64":
                    self.helpers.require_fp64(self.fn.loc)
                params.append(f"const {scalar_name(t)} arg{i}")
                self.scalars[arg] = f"arg{i}"
                self.divisors[arg] = divisible
        return params, setup

    # -- blocks and ops ------------------------------------------------------------------------
    def emit_block(self, block: Block) -> None:
        for i, op in enumerate(block.ops):
            if isinstance(op, (YieldOp, ConditionOp)):
                break
            if id(op) in self.done:
                continue
            self.current_loc = op.loc
            self._global_barrier_before(op)
            self.emit_op(op, block.ops[i + 1:])

    def emit_op(self, op: Op, following: Any = ()) -> None:
        handler = _HANDLERS.get(type(op))
        if handler is not None:
            handler(self, op)
            return
        if isinstance(op, CallOp):
            raise CompilationError(f"the call to '{op.callee}' was not inlined; the opencl "
                                   f"backend runs kernels whose jit functions are inlined", op.loc)
        if len(op.results) != 1:
            raise CompilationError(f"the opencl backend cannot lower op '{op.NAME}'", op.loc)
        value = op.result
        if not isinstance(value.type, TileType):
            c = self.eval_op(op, self.scalar_point())
            self.scalars[value] = c.expr
            self.divisors[value] = c.align
            return
        kind = self.plan.kind(op)
        if kind in (CHEAP, FUSED):
            return
        if kind == VIEW:
            source = self.stored.get(op.src) if isinstance(op, VIEWS) else None
            if source is not None:
                self.stored[value] = source
            return
        if isinstance(op, (BroadcastOp, PermuteOp)):
            self.exchange(value)
            return
        self._store_with_reductions(value, following)

    # -- sums computed where their source is ----------------------------------------------------
    def _store_with_reductions(self, value: Value, following: Any) -> None:
        """Store ``value``; 1-D commutative reductions that follow it and read it (``sum(x)``,
        ``max(x * x)``) accumulate in the same loop: no second pass over the tile."""
        fused = self._fusable_reductions(value, following)
        accs = [(op, kind, self.start_accumulator(op)) for op, kind in fused]

        def accumulate(point: Point) -> None:
            for op, kind, acc in accs:
                self.accumulate(op, kind, acc, point)
        self.store_tile(value, lambda point: self.chunk(value, point), accumulate if accs else None)
        for op, kind, acc in accs:
            self.scalars[op.result] = self.finish_accumulator(op, kind, acc)
            self.done.add(id(op))

    def _fusable_reductions(self, value: Value, following: Any) -> list:
        found = []
        for later in following:
            if isinstance(later, (YieldOp, ConditionOp, ForOp, IfOp, WhileOp, CallOp)) or \
                    later.has_trait("side_effect"):
                break
            if isinstance(later, ReduceOp) and later.srcs[0].type.shape == value.type.shape and \
                    value.type.rank == 1 and self._ready(later.srcs[0], value):
                kind = self.commutative_kind(later)
                if kind is not None:
                    found.append((later, kind))
        return found

    def _ready(self, source: Value, value: Value) -> bool:
        """Whether ``source`` can be computed now from ``value`` and what is already known."""
        stack, seen = [source], set()
        while stack:
            v = stack.pop()
            if v is value or v in self.stored or v in self.scalars or id(v) in seen:
                continue
            seen.add(id(v))
            owner = v.owner
            if not isinstance(owner, Op) or not self.plan.is_lazy(owner):
                return False
            stack.extend(owner.operands)
        return True

    def eval_op(self, op: Op, point: Point) -> Chunk:
        """``op``'s result over the chunk ``point`` (elementwise ops, loads, shape ops)."""
        c = self.eval_shape_op(op, point)
        if c is not None:
            return c
        a = self.arith
        arg = lambda v: self.chunk(v, point)  # noqa: E731
        if isinstance(op, BinaryOp):
            return a.binary(op.kind, arg(op.lhs), arg(op.rhs), op.loc)
        if isinstance(op, CompareOp):
            return a.compare(op.pred, arg(op.lhs), arg(op.rhs))
        if isinstance(op, UnaryOp):
            return a.unary(op.kind, arg(op.src), op.loc)
        if isinstance(op, SelectOp):
            return a.select(arg(op.cond), arg(op.true_value), arg(op.false_value))
        if isinstance(op, CastOp):
            return a.cast(arg(op.src), elem_type(op.result.type))
        if isinstance(op, BitcastOp):
            return a.bitcast(arg(op.src), elem_type(op.result.type))
        if isinstance(op, FmaOp):
            return a.fma(arg(op.a), arg(op.b), arg(op.c))
        if isinstance(op, UMulHiOp):
            return a.umulhi(arg(op.lhs), arg(op.rhs))
        if isinstance(op, AddPtrOp):
            return a.addptr(arg(op.ptr), arg(op.offset))
        if isinstance(op, LoadOp):
            return self.eval_load(op, point)
        raise CompilationError(f"the opencl backend cannot compute op '{op.NAME}' here", op.loc)

    # -- memory order between work-items -------------------------------------------------------
    def note_write(self) -> None:
        self.pending_writes = True

    def _global_barrier_before(self, op: Op) -> None:
        if self.work_items == 1 or not self.pending_writes or not self._may_read(op):
            return
        self.w.line("barrier(CLK_GLOBAL_MEM_FENCE);")
        self.pending_writes = False

    def _may_read(self, op: Op) -> bool:
        """Whether emitting ``op`` may read global memory (lazy loads included)."""
        if isinstance(op, (LoadOp, AtomicRMWOp, AtomicCASOp, ForOp, IfOp, WhileOp)):
            return True
        seen: set[int] = set()
        stack = list(op.operands)
        while stack:
            v = stack.pop()
            owner = v.owner
            if id(v) in seen or not isinstance(owner, Op) or v in self.stored or v in self.scalars:
                continue
            seen.add(id(v))
            if isinstance(owner, LoadOp):
                return True
            stack.extend(owner.operands)
        return False


_HANDLERS = {
    StoreOp: MemoryEmitter.emit_store, AtomicRMWOp: MemoryEmitter.emit_atomic,
    AtomicCASOp: MemoryEmitter.emit_atomic, ReduceOp: CollectiveEmitter.emit_reduce,
    ScanOp: CollectiveEmitter.emit_scan, DotOp: DotEmitter.emit_dot,
    ForOp: ControlEmitter.emit_for, IfOp: ControlEmitter.emit_if,
    WhileOp: ControlEmitter.emit_while, AssertOp: ControlEmitter.emit_assert,
    PrintOp: ControlEmitter.emit_print,
    BarrierOp: lambda self, op: self.emit_barrier(),
}
