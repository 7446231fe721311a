"""The state of writing one kernel, and the tables that say how each op is written.

``EmitContext`` holds what the emission of one kernel knows (where each value lives, the
text being written, scratch memory, the checks, the writes not yet made visible) and two
lookups: ``scalar``/``chunk`` give a value's C expression.  Each op is written by one
function of its family's module, found by the op's class in one of two tables:

* ``EMITTERS``: ``emit(ctx, op)`` writes a whole op where it stands in its block (stores,
  atomics, reductions, scans, ``dot``, control flow; value ops go to ``tile_ops.emit_value``,
  which stores them, or not, as ``plan`` says);
* ``CHUNKS``: ``chunk(ctx, op, point)`` computes one chunk of an op's result, where it is
  needed (elementwise and shape ops, constants, loads).

Modules: ``tile_ops`` (elementwise, index and shape ops), ``memory`` (loads, stores,
atomics), ``collective`` (reductions, scans, moves between work-items), ``dot``, ``control``
(``for``, ``if``, ``while``, ``assert``, ``print``, ``barrier``); ``values`` keeps tiles in
private arrays and does the index arithmetic.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from anytile.errors import CompilationError
from anytile.ir import (AtomicCASOp, AtomicRMWOp, Block, ConditionOp, ForOp, IfOp, LoadOp,
                        Op, TileType, Value, WhileOp, YieldOp)

from ..layout import LayoutPolicy
from ..target import OpenCLArch
from . import collective, control, dot, memory, tile_ops, values
from .arith import Arith
from .chunk import Chunk, Point, Writer, uniform
from .helpers import Helpers
from .plan import Plan

__all__ = ["EmitContext", "Emitter", "ChunkFunction", "EMITTERS", "CHUNKS"]

#: how one op is written where it stands: ``emit(ctx, op)``
Emitter = Callable[["EmitContext", Op], None]
#: how one chunk of an op's result is computed: ``chunk(ctx, op, point) -> Chunk``
ChunkFunction = Callable[["EmitContext", Op, Point], Chunk]

EMITTERS: dict[type, Emitter] = {}
CHUNKS: dict[type, ChunkFunction] = {}
for _module in (tile_ops, memory, collective, dot, control):
    EMITTERS.update(getattr(_module, "EMITTERS", {}))
    CHUNKS.update(getattr(_module, "CHUNKS", {}))


class EmitContext:
    """What the emission of one kernel knows (see the module docstring)."""

    def __init__(self, fn: Any, arch: OpenCLArch, policy: LayoutPolicy, debug: bool) -> None:
        self.fn = fn
        self.arch = arch
        self.work_items = policy.work_items
        self.debug = debug
        self.plan = Plan(fn, policy.work_items)
        self.w = Writer(indent=2)
        self.helpers = Helpers(arch.fp64)
        self.arith = Arith(self.w, self.helpers)
        self.scalars: dict[Value, str] = {}
        self.divisors: dict[Value, int] = {}      # a power of 2 dividing each scalar
        self.stored: dict[Value, Any] = {}
        self.staged: dict[Value, tuple] = {}      # operands readable at any index (scratch)
        self.own_masks: set[int] = set()
        self.extensions: set[str] = set()
        self.checks: list = []
        self.check_facts: list = []               # per check: how to word a failure (checks)
        self.private_bytes = 0                    # the private arrays of one work-item
        self.largest_private: Optional[list] = None   # [bytes, elements, dtype, file, line]
        self.scratch_bytes = 0
        self.scratch_in_use = False
        self.pending_writes = False
        self.uses_streaming = False
        self.saved_writes: list[bool] = []
        self.current_loc = fn.loc
        self.done: set[int] = set()          # ops computed early (fused reductions)
        self.following: Any = ()             # the ops after the one being written, in its block

    # -- where values are --------------------------------------------------------------------
    def scalar(self, value: Value) -> str:
        """The C expression of a scalar value."""
        name = self.scalars.get(value)
        if name is None:
            raise CompilationError(f"internal: scalar {value} used before it is defined",
                                   getattr(value.owner, "loc", None))
        return name

    def chunk(self, value: Value, point: Point) -> Chunk:
        """``value`` over the chunk ``point`` (scalars are uniform)."""
        bound = point.bound.get(value)
        if bound is not None:
            return bound
        if not isinstance(value.type, TileType):
            name = self.scalars.get(value)
            if name is not None:
                return uniform(name, value.type, point.lanes, self.divisors.get(value, 1))
            return self._computed(value, point)
        staged = self.staged.get(value)
        if staged is not None:
            return values.read_flat(self, staged[0], value.type.elem, point.flat(), staged[1])
        stored = self.stored.get(value)
        if stored is not None:
            return values.read_stored(self, stored, point)
        return self._computed(value, point)

    def _computed(self, value: Value, point: Point) -> Chunk:
        cached = point.memo.get(id(value))
        if cached is None:
            owner = value.owner
            if not isinstance(owner, Op):
                raise CompilationError(f"internal: {value} has no value here")
            cached = point.memo[id(value)] = self.eval_op(owner, point)
        return cached

    def eval_op(self, op: Op, point: Point) -> Chunk:
        """``op``'s result over the chunk ``point`` (elementwise ops, loads, shape ops)."""
        compute: Optional[ChunkFunction] = CHUNKS.get(type(op))
        if compute is None:
            raise CompilationError(f"the opencl backend cannot compute op '{op.NAME}' here",
                                   op.loc)
        return compute(self, op, point)

    def index_math(self, point: Point) -> None:
        """Fill in a point's flat index from its dims, or its dims from its flat index."""
        values.index_math(self, point)

    # -- blocks and ops ------------------------------------------------------------------------
    def emit_block(self, block: Block) -> None:
        for i, op in enumerate(block.ops):
            if isinstance(op, (YieldOp, ConditionOp)):
                break
            if id(op) in self.done:
                continue
            self.current_loc = op.loc
            _global_barrier_before(self, op)
            self.following = block.ops[i + 1:]
            self.emit_op(op)

    def emit_op(self, op: Op) -> None:
        emit = EMITTERS.get(type(op))
        if emit is None:
            raise CompilationError(f"the opencl backend cannot lower op '{op.NAME}'", op.loc)
        emit(self, op)

    # -- memory order between work-items -------------------------------------------------------
    def note_write(self) -> None:
        """A write to global memory was emitted: a later read waits at a barrier first."""
        self.pending_writes = True


def _global_barrier_before(ctx: EmitContext, op: Op) -> None:
    """With several work-items, a barrier before ``op`` when it may read what was written."""
    if ctx.work_items == 1 or not ctx.pending_writes or not _may_read(ctx, op):
        return
    ctx.w.line("barrier(CLK_GLOBAL_MEM_FENCE);")
    ctx.pending_writes = False


def _may_read(ctx: EmitContext, op: Op) -> bool:
    """Whether emitting ``op`` may read global memory (lazy loads included)."""
    if isinstance(op, (LoadOp, AtomicRMWOp, AtomicCASOp, ForOp, IfOp, WhileOp)):
        return True
    seen: set[int] = set()
    stack = list(op.operands)
    while stack:
        v = stack.pop()
        owner = v.owner
        if id(v) in seen or not isinstance(owner, Op) or v in ctx.stored or v in ctx.scalars:
            continue
        seen.add(id(v))
        if isinstance(owner, LoadOp):
            return True
        stack.extend(owner.operands)
    return False
