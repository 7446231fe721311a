"""``ProgramLowering``: one kernel ``Function`` -> an LLVM function running one program.

The generated function takes the kernel's runtime arguments (compute form), the program id
and grid size per axis, a pointer to the launch's error word, whether streaming stores may
be used (``streaming``) and in checked mode the span of each pointer parameter's memory
(see ``checked``).  Scalars become SSA values; tiles follow ``values``/``plan``: lazy tiles
are evaluated inside their consumer's loop, the others live in 64-byte-aligned stack
buffers allocated in the entry block.
Structured control flow and run-time checks are in ``control``.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Union

from llvmlite import ir

from anytile.codegen.llvm import ElementwiseLowering, LLVMTypes, MathLowering
from anytile.codegen.llvm.types import I1, I32, I64, intrinsic
from anytile.errors import CompilationError
from anytile.ir import (AssertOp, PrintOp, AtomicCASOp, AtomicRMWOp, BarrierOp, Block, CallOp,
                        ConditionOp, ConstantOp, DotOp, ForOp, Function, IfOp, LoadOp,
                        NumProgramsOp, Op, PointerType, ProgramIdOp, ReduceOp, ReshapeOp, ScanOp,
                        StoreOp, TileType, Value, WhileOp, YieldOp, elem_type, shape_of)

from .algorithms import TileAlgorithms
from .atomics import AtomicLowering
from .checked import CheckedMode
from .control import ControlFlowLowering, PrintLowering, RuntimeCheck
from .evaluate import ChunkEvaluator
from .plan import ELEMENTWISE_OPS, SHAPE_OPS, FusionPlan
from .streaming import StreamingStores
from .values import Index, Lazy, Point, TileBuffer

__all__ = ["ProgramLowering", "RuntimeCheck"]


class ProgramLowering(ChunkEvaluator, TileAlgorithms, AtomicLowering, ControlFlowLowering,
                      PrintLowering, StreamingStores):
    """Lowers ``fn`` into ``module`` as function ``name``; ``lanes`` is the SIMD width
    (in 32-bit lanes) that loops over tiles are chunked by; ``checked``: with the checks of
    ``debug=True`` (``checked.CheckedMode``); ``bf16_pairs``: the target has AVX-512 BF16."""

    def __init__(self, module: ir.Module, fn: Function, lanes: int,
                 types: Optional[LLVMTypes] = None, checked: bool = False,
                 bf16_pairs: bool = False) -> None:
        self.module = module
        self.bf16_pairs = bf16_pairs      # AVX-512 BF16: bf16 dots on vdpbf16ps
        self.fn = fn
        self.lanes = lanes
        self.types = types or LLVMTypes()
        self.plan = FusionPlan(fn)
        self.scalars: dict[Value, ir.Value] = {}
        self.tiles: dict[Value, Union[TileBuffer, Lazy]] = {}
        self.memo: dict = {}
        self.asserts: list[RuntimeCheck] = []
        self.stack_bytes = 0     # tile buffers in the program's frame
        self.lowered_with_other: set[int] = set()   # ops folded into an earlier op
        self.checked = checked
        self.checks: Optional[CheckedMode] = None

    # -- entry ---------------------------------------------------------------------------------
    def build(self, name: str) -> ir.Function:
        args = self.fn.args
        params = [self.ctype(a.type) for a in args] + [I32] * 6 + [ir.PointerType(), I1]
        pointers = [i for i, a in enumerate(args) if isinstance(a.type, PointerType)]
        if self.checked:
            params += [I64, I64] * len(pointers)
        func = ir.Function(self.module, ir.FunctionType(ir.VoidType(), params), name)
        func.linkage = "internal"
        entry = func.append_basic_block("entry")
        body = func.append_basic_block("body")
        self.alloca_b = ir.IRBuilder(entry)
        self.b = ir.IRBuilder(body)
        self.ew = ElementwiseLowering(self.b, MathLowering(self.b))
        for a, p in zip(args, func.args):
            if isinstance(a.type, TileType):
                raise CompilationError("a kernel parameter cannot be a tile", self.fn.loc)
            self.scalars[a] = p
        n = len(args)
        self.program_ids = list(func.args[n:n + 3])
        self.grid = list(func.args[n + 3:n + 6])
        self.error_word = func.args[n + 6]
        self.may_stream = func.args[n + 7]      # the launch is big enough for streaming stores
        if self.checked:
            spans = func.args[n + 8:]
            self.checks = CheckedMode(self, {k: (spans[2 * j], spans[2 * j + 1])
                                             for j, k in enumerate(pointers)})
        self.lower_block(self.fn.body)
        self.b.ret_void()
        self.alloca_b.branch(body)
        return func

    def unsupported(self, op: Op) -> CompilationError:
        return CompilationError(f"the cpu backend cannot lower op '{op.NAME}' here", op.loc)

    # -- loops and buffers ---------------------------------------------------------------------
    @contextmanager
    def loop(self, count: Union[int, ir.Value], step: int = 1) -> Iterator[ir.Value]:
        """``for i in range(0, count, step)`` (i64; ``count`` a constant or an i64 value);
        a single iteration emits no loop."""
        b = self.b
        if isinstance(count, int) and count <= step:
            yield ir.Constant(I64, 0)
            return
        if isinstance(count, int):
            count = ir.Constant(I64, count)
        pre = b.block
        header = b.append_basic_block("loop")
        body = b.append_basic_block("loop.body")
        done = b.append_basic_block("loop.end")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        b.cbranch(b.icmp_signed("<", i, count), body, done)
        b.position_at_end(body)
        self.memo = {}
        yield i
        i.add_incoming(b.add(i, ir.Constant(I64, step)), b.block)
        b.branch(header)
        b.position_at_end(done)
        self.memo = {}

    def chunk_width(self, n: int) -> int:
        """Lanes per chunk along a dimension of size ``n`` (0: element by element)."""
        w = 1
        while w * 2 <= self.lanes and n % (w * 2) == 0:
            w *= 2
        return w if w > 1 else 0

    def for_each_point(self, shape: tuple[int, ...], body: Callable[[Point], None],
                       vector: bool = True) -> None:
        """Emit loops visiting every element of ``shape``, SIMD chunks along the last dim."""
        self.memo = {}
        if not shape:
            body(Point((), 0))
            return
        w = self.chunk_width(shape[-1]) if vector else 0

        def nest(d: int, indices: tuple[Index, ...]) -> None:
            if d == len(shape) - 1:
                with self.loop(shape[d], w or 1) as j:
                    body(Point(indices + (Index(j, w > 0),), w))
                return
            with self.loop(shape[d]) as i:
                nest(d + 1, indices + (Index(i),))

        nest(0, ())
        self.memo = {}

    def new_buffer(self, shape: tuple[int, ...], elem) -> TileBuffer:
        n = _numel(shape)
        self.stack_bytes += n * self.btype_bytes(elem)
        return TileBuffer(self.stack_slot(ir.ArrayType(self.btype(elem), n), 64), tuple(shape), elem)

    def new_scalar_slot(self, t) -> ir.Value:
        return self.stack_slot(self.ctype(t))

    def stack_slot(self, t: ir.Type, align: Optional[int] = None) -> ir.Value:
        """An entry-block ``alloca`` of ``t``, typed as an opaque ``ptr`` (llvmlite would
        otherwise print a typed pointer, which LLVM no longer parses)."""
        slot = self.alloca_b.alloca(t)
        slot.align = align
        slot.type = ir.PointerType()
        return slot

    def load_slot(self, slot: ir.Value) -> ir.Value:
        return self.b.load(slot, typ=slot.allocated_type)

    def copy_into(self, value: Value, dst: TileBuffer) -> None:
        src = self.tiles[value]
        if isinstance(src, TileBuffer):
            if src.ptr is dst.ptr:
                return
            nbytes = self.btype_bytes(dst.elem) * _numel(dst.shape)
            memcpy = intrinsic(self.module, "llvm.memcpy", ir.VoidType(),
                               [ir.PointerType(), ir.PointerType(), I64, I1],
                               [ir.PointerType(), ir.PointerType(), I64])
            self.b.call(memcpy, [dst.ptr, src.ptr, ir.Constant(I64, nbytes), ir.Constant(I1, 0)])
            return
        self.for_each_point(dst.shape, lambda p: self.buffer_store(dst, p, self.value_at(value, p)))

    @staticmethod
    def btype_bytes(elem) -> int:
        """Bytes of one element in a stack buffer (compute form: f16/bf16 take 4)."""
        if isinstance(elem, PointerType):
            return 8
        if elem.is_float:
            return 8 if elem.name == "f64" else 4
        return elem.nbytes

    def buffer_of(self, value: Value) -> TileBuffer:
        """``value`` as a buffer, materialising a lazy (cheap) value here if needed."""
        ref = self.tiles[value]
        if isinstance(ref, TileBuffer):
            return ref
        buf = self.new_buffer(value.type.shape, value.type.elem)
        self.copy_into(value, buf)
        return buf

    def materialize(self, op: Op) -> None:
        r = op.result
        buf = self.new_buffer(r.type.shape, r.type.elem)
        self.tiles[r] = Lazy(op)
        self.copy_into(r, buf)
        self.tiles[r] = buf

    # -- ops -----------------------------------------------------------------------------------
    def lower_block(self, block: Block) -> Optional[Op]:
        """Lower every op of ``block``; return its terminator (unlowered) if any."""
        for op in block.ops:
            if isinstance(op, (YieldOp, ConditionOp)):
                return op
            self.lower_op(op)
        return None

    def lower_op(self, op: Op) -> None:
        try:
            self._lower_op(op)
        except NotImplementedError as exc:   # an op kind or type the tables do not cover
            raise CompilationError(f"the cpu backend cannot lower op '{op.NAME}': {exc}",
                                   op.loc) from None

    def _lower_op(self, op: Op) -> None:
        if id(op) in self.lowered_with_other:
            return
        tile_result = len(op.results) == 1 and isinstance(op.result.type, TileType)
        if tile_result and self.plan.is_lazy(op):
            self.tiles[op.result] = Lazy(op)
            return
        handler = _HANDLERS.get(type(op))
        if handler is not None:
            getattr(self, handler)(op)
        elif isinstance(op, ELEMENTWISE_OPS + SHAPE_OPS + (LoadOp,)):
            if tile_result:
                self.materialize(op)
            elif isinstance(op, LoadOp):
                self.lower_scalar_load(op)
            else:
                self.scalars[op.result] = self.scalar_op(op, [self.scalars[v] for v in op.operands])
        else:
            raise self.unsupported(op)

    def lower_constant(self, op: ConstantOp) -> None:
        if isinstance(op.result.type, TileType):
            self.materialize(op)
        else:
            self.scalars[op.result] = self.constant(op.result.type, op.value)

    def lower_program_id(self, op: ProgramIdOp) -> None:
        self.scalars[op.result] = self.program_ids[op.axis]

    def lower_num_programs(self, op: NumProgramsOp) -> None:
        self.scalars[op.result] = self.grid[op.axis]

    def lower_scalar_load(self, op: LoadOp) -> None:
        elem = op.result.type
        mask = self.scalars[op.mask] if op.mask is not None else None
        if self.checks is not None:
            self.checks.access(op, self.scalars[op.ptr], mask, elem.nbytes, Point((), 0))
        raw = self.guarded_scalar_load(self.scalars[op.ptr], self.stype(elem), elem.nbytes, mask)
        value = self.ew.from_storage(elem, raw)
        if mask is not None and op.other is not None:
            value = self.b.select(mask, value, self.scalars[op.other])
        self.scalars[op.result] = value

    def lower_store(self, op: StoreOp) -> None:
        elem = elem_type(op.value.type)
        ptr_elem = elem_type(op.ptr.type)
        mask_elem = elem_type(op.mask.type) if op.mask is not None else None

        def body(p: Point) -> None:
            m = self.chunk(op.mask, p) if op.mask is not None else None
            if self.checks is not None:
                self.check_access(op, self.chunk(op.ptr, p), m, elem.nbytes, p)
            self.emit_store(elem, self.chunk(op.ptr, p), self.chunk(op.value, p), m, ptr_elem,
                            mask_elem, p.width)

        def ordinary() -> None:
            self.for_each_point(shape_of(op.ptr.type), body)
        if not self.lower_streaming_store(op, ordinary):
            ordinary()

    def lower_reshape(self, op: ReshapeOp) -> None:
        src = self.buffer_of(op.src)
        self.tiles[op.result] = TileBuffer(src.ptr, op.result.type.shape, src.elem)

    def lower_barrier(self, op: BarrierOp) -> None:
        self.b.fence("seq_cst")

    def lower_call(self, op: CallOp) -> None:
        raise CompilationError(f"call to '{op.callee}' was not inlined before code generation "
                               "(the cpu backend needs the inliner pass to have run)", op.loc)



def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


_HANDLERS = {
    ConstantOp: "lower_constant", ProgramIdOp: "lower_program_id",
    NumProgramsOp: "lower_num_programs", StoreOp: "lower_store", ReshapeOp: "lower_reshape",
    BarrierOp: "lower_barrier", CallOp: "lower_call", AssertOp: "lower_assert",
    PrintOp: "lower_print",
    ForOp: "lower_for", IfOp: "lower_if", WhileOp: "lower_while",
    ReduceOp: "lower_reduce", ScanOp: "lower_scan", DotOp: "lower_dot",
    AtomicRMWOp: "lower_atomic_rmw", AtomicCASOp: "lower_atomic_cas",
}
