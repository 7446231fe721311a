"""One kernel ``Function`` -> an LLVM function running one program.

The lowering is a small context (``ProgramLowering``: the builder, the values lowered so
far, the loops and stack buffers tiles live in) and a table of ``lower_<op>`` functions, one
per IR op, from the modules that follow the op families: ``tile_ops`` (constants,
elementwise and shape ops, program ids), ``memory`` (loads, stores, barriers; streaming
stores in ``streaming``), ``atomics``, ``reductions`` (reduce, scan), ``dot`` and
``control`` (for, while, if, device_assert, device_print).  ``evaluate`` computes a lazy
tile at a point, ``access`` emits the memory accesses, ``checked`` adds checked mode's
checks.

The generated function takes the kernel's runtime arguments (compute form), the program id
and grid size per axis, a pointer to the launch's error word, whether streaming stores may
be used (``streaming``) and in checked mode the span of each pointer parameter's memory
(see ``checked``).  Scalars become SSA values; tiles follow ``values``/``plan``: lazy tiles
are evaluated inside their consumer's loop, the others live in 64-byte-aligned stack
buffers allocated in the entry block.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Union

from llvmlite import ir

from anytile.codegen.llvm import ElementwiseLowering, LLVMTypes, MathLowering
from anytile.codegen.llvm.types import I1, I8, I32, I64, const_like, intrinsic, splat
from anytile.errors import CompilationError
from anytile.ir import (Block, ConditionOp, Function, Op, PointerType, ScalarType, TileType,
                        Value, YieldOp, elem_type, round_to_type)

from . import atomics, control, dot, memory, reductions, tile_ops
from .access import masked_gather
from .checked import CheckedMode
from .control import RuntimeCheck
from .evaluate import eval_lazy
from .plan import FusionPlan
from .values import Chunk, Index, Lazy, Point, TileBuffer

__all__ = ["ProgramLowering", "RuntimeCheck", "Lowering", "lowering_table"]

Elem = Union[ScalarType, PointerType]
#: how one op is lowered: ``lower(ctx, op)`` binds the op's results in ``ctx``
Lowering = Callable[["ProgramLowering", Op], None]


def lowering_table() -> dict[type, Lowering]:
    """Op class -> its ``lower_<op>`` function, from every module of the cpu lowering."""
    table: dict[type, Lowering] = {}
    for module in (tile_ops, memory, atomics, reductions, dot, control):
        table.update(module.LOWERINGS)
    return table


class ProgramLowering:
    """The state of lowering ``fn`` into ``module`` (see the module docstring); ``lanes`` is
    the SIMD width (in 32-bit lanes) that loops over tiles are chunked by; ``checked``: with
    the checks of ``debug=True`` (``checked.CheckedMode``); ``bf16_pairs``: the target has
    AVX-512 BF16 (bf16 dots on ``vdpbf16ps``)."""

    def __init__(self, module: ir.Module, fn: Function, lanes: int,
                 types: Optional[LLVMTypes] = None, checked: bool = False,
                 bf16_pairs: bool = False) -> None:
        self.module = module
        self.bf16_pairs = bf16_pairs
        self.fn = fn
        self.lanes = lanes
        self.types = types or LLVMTypes()
        self.plan = FusionPlan(fn)
        self.scalars: dict[Value, ir.Value] = {}
        self.tiles: dict[Value, Union[TileBuffer, Lazy]] = {}
        #: chunks of lazy values evaluated at the current point (cleared as loops change)
        self.memo: dict = {}
        self.asserts: list[RuntimeCheck] = []
        self.stack_bytes = 0     # tile buffers in the program's frame
        self.stream_bytes = 0    # bytes the program may store non-temporally (``streaming``)
        #: pointer parameters streaming stores may write (``streaming``; found on first use)
        self.streamable: Optional[frozenset[int]] = None
        self.lowered_with_other: set[int] = set()   # ops folded into an earlier op
        self.checked = checked
        self.checks: Optional[CheckedMode] = None
        self.table = lowering_table()

    # -- entry ---------------------------------------------------------------------------------
    def build(self, name: str) -> ir.Function:
        """Lower the kernel as the internal function ``name``; returns it."""
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

    # -- blocks and ops ------------------------------------------------------------------------
    def lower_block(self, block: Block) -> Optional[Op]:
        """Lower every op of ``block``; return its terminator (unlowered) if any."""
        for op in block.ops:
            if isinstance(op, (YieldOp, ConditionOp)):
                return op
            self.lower_op(op)
        return None

    def lower_op(self, op: Op) -> None:
        if id(op) in self.lowered_with_other:
            return
        if len(op.results) == 1 and isinstance(op.result.type, TileType) and \
                self.plan.is_lazy(op):
            self.tiles[op.result] = Lazy(op)      # evaluated inside each consumer's loop
            return
        handler = self.table.get(type(op))
        if handler is None:
            raise self.unsupported(op)
        try:
            handler(self, op)
        except NotImplementedError as exc:   # an op kind or type the tables do not cover
            raise CompilationError(f"the cpu backend cannot lower op '{op.NAME}': {exc}",
                                   op.loc) from None

    # -- types ---------------------------------------------------------------------------------
    def ctype(self, elem: Elem) -> ir.Type:
        """An element's compute form."""
        return self.types.compute(elem)

    def btype(self, elem: Elem) -> ir.Type:
        """Element type inside a stack buffer (compute form, ``i1`` as a byte)."""
        if isinstance(elem, ScalarType) and elem.is_bool:
            return I8
        return self.types.compute(elem)

    def stype(self, elem: Elem) -> ir.Type:
        """An element's storage form (what memory holds)."""
        return self.types.storage(elem)

    def constant(self, elem: Elem, value: object) -> ir.Value:
        t = self.ctype(elem)
        if isinstance(elem, PointerType):
            return ir.Constant(t, None)
        if elem.is_float:
            if elem.bits < 32:     # a value of the narrow type, held as a float
                return ir.Constant(t, round_to_type(value, elem))
            return ir.Constant(t, float(value))
        v = int(value)
        if elem.is_bool:
            return ir.Constant(I1, 1 if v else 0)
        return ir.Constant(t, v & ((1 << elem.bits) - 1))

    # -- values at points ----------------------------------------------------------------------
    def chunk(self, value: Value, point: Point) -> Chunk:
        """``value`` at ``point`` (scalars are uniform)."""
        if not isinstance(value.type, TileType):
            return Chunk.uniform(self.scalars[value])
        ref = self.tiles[value]
        if isinstance(ref, TileBuffer):
            return self.buffer_load(ref, point)
        key = (id(value), point.key)
        hit = self.memo.get(key)
        if hit is None:
            hit = eval_lazy(self, ref, point)
            self.memo[key] = hit
        return hit

    def vec(self, c: Chunk, elem: Elem, width: int) -> ir.Value:
        """The chunk as a ``width``-lane vector (a scalar when ``width`` is 0)."""
        b = self.b
        if c.kind == "vector" or width == 0:
            return c.value
        if c.kind == "uniform":
            return splat(b, c.value, width)
        iota = ir.Constant(ir.VectorType(I64, width), list(range(width)))
        if isinstance(elem, PointerType):
            return b.gep(splat(b, c.value, width), [iota], source_etype=self.stype(elem.pointee))
        t = c.value.type
        lanes = ir.Constant(ir.VectorType(t, width), list(range(width)))
        return b.add(splat(b, c.value, width), lanes)

    def value_at(self, value: Value, point: Point) -> ir.Value:
        return self.vec(self.chunk(value, point), elem_type(value.type), point.width)

    # -- loops ---------------------------------------------------------------------------------
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

    # -- stack slots and buffers ---------------------------------------------------------------
    def stack_slot(self, t: ir.Type, align: Optional[int] = None) -> ir.Value:
        """An entry-block ``alloca`` of ``t``, typed as an opaque ``ptr`` (llvmlite would
        otherwise print a typed pointer, which LLVM no longer parses)."""
        slot = self.alloca_b.alloca(t)
        slot.align = align
        slot.type = ir.PointerType()
        return slot

    def load_slot(self, slot: ir.Value) -> ir.Value:
        return self.b.load(slot, typ=slot.allocated_type)

    def slots_holding(self, values: list[ir.Value]) -> list[ir.Value]:
        """A stack slot per value, holding it (accumulators that LLVM keeps in registers)."""
        slots = [self.stack_slot(v.type) for v in values]
        for s, v in zip(slots, values):
            self.b.store(v, s)
        return slots

    def new_scalar_slot(self, t: Elem) -> ir.Value:
        return self.stack_slot(self.ctype(t))

    def new_buffer(self, shape: tuple[int, ...], elem: Elem) -> TileBuffer:
        n = _numel(shape)
        self.stack_bytes += n * _buffer_element_bytes(elem)
        return TileBuffer(self.stack_slot(ir.ArrayType(self.btype(elem), n), 64), tuple(shape),
                          elem)

    def copy_into(self, value: Value, dst: TileBuffer) -> None:
        """Write the tile ``value`` into the buffer ``dst`` (a ``memcpy`` from a buffer)."""
        src = self.tiles[value]
        if isinstance(src, TileBuffer):
            if src.ptr is dst.ptr:
                return
            nbytes = _buffer_element_bytes(dst.elem) * _numel(dst.shape)
            memcpy = intrinsic(self.module, "llvm.memcpy", ir.VoidType(),
                               [ir.PointerType(), ir.PointerType(), I64, I1],
                               [ir.PointerType(), ir.PointerType(), I64])
            self.b.call(memcpy, [dst.ptr, src.ptr, ir.Constant(I64, nbytes), ir.Constant(I1, 0)])
            return
        self.for_each_point(dst.shape, lambda p: self.buffer_store(dst, p, self.value_at(value, p)))

    def buffer_of(self, value: Value) -> TileBuffer:
        """``value`` as a buffer, materialising a lazy (cheap) value here if needed."""
        ref = self.tiles[value]
        if isinstance(ref, TileBuffer):
            return ref
        buf = self.new_buffer(value.type.shape, value.type.elem)
        self.copy_into(value, buf)
        return buf

    def materialize(self, op: Op) -> None:
        """Compute ``op``'s tile result into a new buffer, here."""
        r = op.result
        buf = self.new_buffer(r.type.shape, r.type.elem)
        self.tiles[r] = Lazy(op)
        self.copy_into(r, buf)
        self.tiles[r] = buf

    def _offset(self, buf: TileBuffer, point: Point) -> tuple[ir.Value, Optional[int]]:
        b = self.b
        off: ir.Value = ir.Constant(I64, 0)
        ramp_stride = None
        for idx, stride in zip(point.indices, buf.strides):
            if idx.ramp:
                ramp_stride = stride
            if isinstance(idx.base, ir.Constant) and idx.base.constant == 0:
                continue
            term = idx.base if stride == 1 else b.mul(idx.base, ir.Constant(I64, stride))
            off = term if isinstance(off, ir.Constant) and off.constant == 0 else b.add(off, term)
        return off, ramp_stride

    def buffer_load(self, buf: TileBuffer, point: Point) -> Chunk:
        """The chunk of ``buf`` at ``point``."""
        b = self.b
        bt = self.btype(buf.elem)
        off, ramp_stride = self._offset(buf, point)
        ptr = b.gep(buf.ptr, [off], source_etype=bt)
        align = _aligned_to(buf.elem)
        if ramp_stride is None:
            raw = b.load(ptr, typ=bt, align=align)
            kind = "uniform"
        elif ramp_stride == 1:
            raw = b.load(ptr, typ=ir.VectorType(bt, point.width), align=align)
            kind = "vector"
        else:
            w = point.width
            steps = ir.Constant(ir.VectorType(I64, w), [i * ramp_stride for i in range(w)])
            ptrs = b.gep(splat(b, ptr, w), [steps], source_etype=bt)
            raw = masked_gather(self, ptrs, bt, align, None)
            kind = "vector"
        if isinstance(buf.elem, ScalarType) and buf.elem.is_bool:
            raw = b.icmp_unsigned("!=", raw, const_like(raw, 0))
        return Chunk(kind, raw)

    def buffer_store(self, buf: TileBuffer, point: Point, value: ir.Value) -> None:
        """Store a compute-form value (``point.width`` lanes along the last dim)."""
        b = self.b
        bt = self.btype(buf.elem)
        if isinstance(buf.elem, ScalarType) and buf.elem.is_bool:
            value = b.zext(value, ir.VectorType(I8, point.width) if point.width else I8)
        off, _ = self._offset(buf, point)
        b.store(value, b.gep(buf.ptr, [off], source_etype=bt), align=_aligned_to(buf.elem))


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _buffer_element_bytes(elem: Elem) -> int:
    """Bytes of one element in a stack buffer (compute form: f16/bf16 take 4)."""
    if isinstance(elem, PointerType):
        return 8
    if elem.is_float:
        return 8 if elem.name == "f64" else 4
    return elem.nbytes


def _aligned_to(elem: Elem) -> int:
    """The alignment stack-buffer accesses claim for ``elem``."""
    return elem.nbytes if not isinstance(elem, PointerType) else 8
