"""Software pipelining of loads in ``for`` loops: issue iteration ``i + 1``'s loads before
iteration ``i``'s work, so their latency hides behind it (Triton's ``num_stages`` = 2, held in
registers).

A tile ``load`` at the top level of a loop body is prefetched when its pointer, mask and
``other`` are computed from the induction variable and values defined outside the loop only,
through pure ops, and when the loop has no side effect (no store, atomic, assert, barrier or
call: a prefetched read must not miss a write of the same iteration).  The rewrite::

    x0 = load(p(lower), mask(lower) & lower < upper)          # before the loop
    for iv, (..., x) in ...:
        x_next = load(p(iv + step), mask(iv + step) & iv + step < upper)   # first in the body
        ... the body, reading x instead of loading ...
        yield ..., x_next

Masked-off lanes of the extra loads read nothing, so no address outside the original loop's
accesses is touched.  This runs on device-independent IR, before layouts are assigned.

A backend's dialect may refine ``load`` (a load that says more: ``PipelinedLoad``); the
passes here then ask the load how it is transposed and copied into a slot.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ...ir import ops
from ...ir.nodes import TRAIT_PURE, Block, Function, Op, Value, walk
from ...ir.rules import is_int, is_ptr as is_pointer
from ...ir.types import TileType, elem_type, i1, i32
from ...ir.uses import Uses
from .axis_info import analyse_function, vector_width_of_access
from .shared import held_across
from .shared_ops import (PAD_ELEMENTS, AsyncCommitOp, AsyncCopyOp, AsyncWaitOp,
                         PaddedRows, SharedAllocOp, SharedBufferLayout, SharedBufferType,
                         SharedLoadOp, slot_element)

__all__ = ["pipeline_loops", "pipeline_dot_operands", "stage_invariant_operands", "accumulates_in_place",
           "load_transposed", "dot_operand_loads", "PipelinedLoad"]


class PipelinedLoad:
    """Mixin of a dialect's refinement of ``LoadOp`` (a load carrying facts of its own) that
    the passes here rewrite its own way; core's ``load`` takes the defaults."""

    def reads_transposed(self) -> bool:
        """Whether its tile is read along its first dimension, whatever the axis facts say
        (its slots are then column-major)."""
        return False

    def permuted(self, order: Sequence[int], ptr: Value, mask: Optional[Value],
                 other: Optional[Value], result_type: Any) -> ops.LoadOp:
        """The load of its tile permuted by ``order`` (``load_transposed``), from the permuted
        ``ptr``, ``mask`` and ``other``."""
        return ops.LoadOp(ptr, mask, other, self.volatile, result_types=[result_type], loc=self.loc)

    def slot_copy(self, buffer: Value, slot: Value, ptr: Value, mask: Optional[Value],
                  value: Callable[[Value], Value], when: Optional[Value]) -> Op:
        """The ``async_copy`` (or a refinement of it) of its tile into ``slot`` of ``buffer``
        from ``ptr`` and ``mask`` (already at the copy's iteration); ``value(v)``: any other
        operand ``v`` at that iteration; ``when``: the copy's iteration is in the loop
        (``None``: always)."""
        return AsyncCopyOp(buffer, slot, ptr, mask, loc=self.loc)


def _permuted(load: ops.LoadOp, order: tuple, ptr: Value, mask: Optional[Value],
              other: Optional[Value], result_type: Any) -> ops.LoadOp:
    if isinstance(load, PipelinedLoad):
        return load.permuted(order, ptr, mask, other, result_type)
    # a block read stays one: the same block of the array, seen with permuted dimensions
    return ops.LoadOp(ptr, mask, other, load.volatile, result_types=[result_type], loc=load.loc,
                      **load.permuted_block(order))


def _slot_copy(load: ops.LoadOp, buffer: Value, slot: Value, ptr: Value, mask: Optional[Value],
               value: Callable[[Value], Value], when: Optional[Value]) -> Op:
    if isinstance(load, PipelinedLoad):
        return load.slot_copy(buffer, slot, ptr, mask, value, when)
    return AsyncCopyOp(buffer, slot, ptr, mask, loc=load.loc)

# loops holding these are not pipelined.  Assertions write no memory, but in checked mode the
# bounds tests make every copy's mask per element, so its 16-byte copies would become 2-byte
# ones: measured slower on an H200 (matmul 5.3x the unchecked time pipelined, 4.3x not)
_SIDE_EFFECTS = (ops.StoreOp, ops.AtomicRMWOp, ops.AtomicCASOp, ops.AssertOp, ops.BarrierOp,
                 ops.CallOp)


def pipeline_loops(fn: Function) -> int:
    """Prefetch the loads of every eligible ``for`` loop of ``fn``; returns how many."""
    return _visit(fn.body)


def _visit(block: Block) -> int:
    count = 0
    for op in list(block.ops):
        for region in op.regions:
            count += _visit(region)
        if isinstance(op, ops.ForOp) and op.num_stages != 1:
            count += _pipeline(op, block)
    return count


def _pipeline(loop: ops.ForOp, parent: Block) -> int:
    body = loop.body
    if any(isinstance(op, _SIDE_EFFECTS) for op in walk(body)):
        return 0
    iv = body.args[0]
    inside = _defined_in(body)
    index_only = {iv}            # body values computed from iv and outside values only
    for op in body.ops:
        if op.has_trait(TRAIT_PURE) and not op.regions and \
                all(v in index_only or v not in inside for v in op.operands):
            index_only.update(op.results)
    loads = [op for op in body.ops if isinstance(op, ops.LoadOp) and isinstance(op.ptr.type, TileType)
             and not op.volatile and all(v in index_only or v not in inside for v in op.operands)]
    if not loads:
        return 0
    where = parent.ops.index(loop)
    prologue: list[Op] = []
    prefetch: list[Op] = []
    # iteration i + 1's index, first thing in the body
    iv_next = ops.BinaryOp("add", iv, loop.step, loc=loop.loc)
    next_ok = ops.CompareOp("lt", iv_next.result, loop.upper, loc=loop.loc)
    first_ok = ops.CompareOp("lt", loop.lower, loop.upper, loc=loop.loc)
    prologue.append(first_ok)
    prefetch += [iv_next, next_ok]
    yield_op = body.terminator
    for load in loads:
        before = _prefetched_load(load, body, inside, {iv: loop.lower}, first_ok.result, prologue)
        ahead = _prefetched_load(load, body, inside, {iv: iv_next.result}, next_ok.result, prefetch)
        carried = Value(load.result.type, body, len(body.args), load.result.name)
        body.args.append(carried)
        for op in walk(body):
            op.map_operands(lambda v, old=load.result, new=carried: new if v is old else v)
        body.ops.remove(load)
        loop.inits.append(before.result)
        yield_op.values.append(ahead.result)
        loop.results.append(Value(load.result.type, loop, len(loop.results)))
    parent.ops[where:where] = prologue
    body.ops[0:0] = prefetch
    return len(loads)


def _defined_in(block: Block) -> set:
    out = set(block.args)
    for op in walk(block):
        out.update(op.results)
        for region in op.regions:
            out.update(region.args)
    return out


def _prefetched_load(load: ops.LoadOp, body: Block, inside: set, mapping: dict, in_range: Value,
                     out: list) -> ops.LoadOp:
    """A copy of ``load`` (and of the body ops its operands need) with ``mapping`` applied,
    masked off when ``in_range`` is false; new ops are appended to ``out``."""
    mapping = dict(mapping)
    needed = _slice(load, inside)
    for op in body.ops:
        if op in needed:
            out.append(op.clone_with(mapping))
    shape = load.result.type.shape
    splat = ops.SplatOp(in_range, result_types=[TileType(shape, i1)], loc=load.loc)
    out.append(splat)
    mask = splat.result
    if load.mask is not None:
        both = ops.BinaryOp("and", mapping.get(load.mask, load.mask), mask, loc=load.loc)
        out.append(both)
        mask = both.result
    other: Optional[Value] = mapping.get(load.other, load.other) if load.other is not None else None
    if other is None:
        elem = elem_type(load.result.type)
        zero = ops.ConstantOp(0.0 if elem.is_float else 0, result_types=[load.result.type], loc=load.loc)
        out.append(zero)
        other = zero.result
    new = ops.LoadOp(mapping.get(load.ptr, load.ptr), mask, other, load.volatile,
                     result_types=[load.result.type], loc=load.loc)
    out.append(new)
    return new


def _slice(load: ops.LoadOp, inside: set) -> set:
    """The body ops that compute ``load``'s operands."""
    needed: set = set()
    stack = [v for v in load.operands if v in inside]
    while stack:
        v = stack.pop()
        op = v.owner
        if isinstance(op, Op) and op not in needed:
            needed.add(op)
            stack.extend(x for x in op.operands if x in inside)
    return needed


# ---------------------------------------------------------------------------------------------
# Multi-stage shared-memory pipelines for the operands of matrix-instruction dots
# ---------------------------------------------------------------------------------------------
#: ``buffers(dot, both)``: the layouts of pipeline buffers for ``dot``'s A and B (``both``: both
#: move, each feeding only ``dot``), ``None`` when the dot does not read them from shared memory
BufferLayouts = Callable[[ops.DotOp, bool], Optional[tuple[SharedBufferLayout, SharedBufferLayout]]]


def pipeline_dot_operands(fn: Function, num_stages: int, dot_ok: Callable[[ops.DotOp], bool],
                          shared_limit: int, buffers: Optional[BufferLayouts] = None) -> int:
    """Rewrite each ``for`` loop whose loads feed only matrix-instruction dots into the
    ``async_copy`` pipeline of ``shared_ops`` (``stages`` = the loop's ``num_stages`` or
    ``num_stages``, reduced until its buffers fit ``shared_limit`` bytes); returns how many
    loads moved.  ``dot_ok(dot)``: the dot will read its operands from shared memory.

    A load qualifies when it is at the top of the loop body, reads a 2-D tile of 16-bit (or
    float8, or int8) elements, is used only as an operand of such dots, has no ``other`` or a zero
    one, and its pointer and mask can be computed ``stages - 1`` iterations ahead: from the
    induction variable, values defined outside the loop, and loop-carried pointer tiles
    advanced by a loop-invariant offset (``a_ptrs += BK``).

    ``buffers`` (``dot.DotSelector.operand_buffers``) chooses the buffers' layouts: a target's
    dot strategy may want its own when both operands of a dot move (and feed no other dot);
    the dot then runs on that strategy.  Without it, rows are padded by 16 bytes."""
    buffers = buffers or _padded_rows
    count = 0
    transposed = transposed_loads(fn)
    for op in list(walk(fn.body)):
        if isinstance(op, ops.ForOp):
            stages = op.num_stages if op.num_stages is not None else num_stages
            if stages >= 2:
                # the buffers live across this loop keep their bytes; those of loops before
                # it are drained and give theirs back (``shared.plan_persistent_shared``)
                left = shared_limit - held_across(fn, op)
                count += _pipeline_dots(op, _parent_block(fn.body, op), stages, dot_ok, left,
                                        buffers, transposed)
    return count


def load_transposed(fn: Function) -> int:
    """Rewrite each ``permute`` of a 2-D tile ``load`` that nothing else reads into a load of
    the permuted pointers (and mask and ``other``): the same elements, read along the other
    dimension.  ``tl.trans(tl.load(k_rows))`` feeding a dot then reaches the pipeline as a
    transposed read, which copies into column-major slots, as K read by transposed
    addressing does, instead of passing through registers and the scratch space every
    iteration.  A dialect's load is permuted its own way (``PipelinedLoad.permuted``).
    Returns how many loads changed."""
    uses = Uses(fn)
    count = 0
    for block in [fn.body] + [r for op in walk(fn.body) for r in op.regions]:
        for op in list(block.ops):
            load = op.src.owner if isinstance(op, ops.PermuteOp) else None
            if not isinstance(load, ops.LoadOp) or load not in block.ops or load.volatile or \
                    len(op.order) != 2 or not isinstance(load.ptr.type, TileType) or \
                    uses.only_user(load.result) is not op:
                continue
            new: list[Op] = []

            def permuted(v: Optional[Value]) -> Optional[Value]:
                if v is None:
                    return None
                src = v.owner
                t = v.type
                flipped = TileType(tuple(t.shape[i] for i in op.order), t.elem)
                if isinstance(src, ops.ConstantOp):      # a uniform tile stays one
                    p = ops.ConstantOp(src.value, result_types=[flipped], loc=op.loc)
                elif isinstance(src, ops.SplatOp):
                    p = ops.SplatOp(src.src, result_types=[flipped], loc=op.loc)
                else:
                    p = ops.PermuteOp(v, tuple(op.order), loc=op.loc)
                new.append(p)
                return p.result
            read = _permuted(load, tuple(op.order), permuted(load.ptr), permuted(load.mask),
                             permuted(load.other), op.result.type)
            read.results[0].name = op.result.name or load.result.name
            new.append(read)
            at = block.ops.index(load)
            block.ops[at:at + 1] = new
            block.ops.remove(op)
            for user in walk(fn.body):
                user.map_operands(lambda v, old=op.result, value=read.result: value if v is old else v)
            count += 1
    return count


def stage_invariant_operands(fn: Function, dot_ok: Callable[[ops.DotOp], bool],
                             shared_limit: int, buffers: Optional[BufferLayouts] = None) -> int:
    """Copy each tile loaded before ``for`` loops and used only as an operand of matrix dots
    inside them (attention's ``q``) into a shared buffer of its own, once, before the loop: the
    dots then read it in place every iteration instead of writing it to the scratch space
    each time.  Same conditions on the load as ``pipeline_dot_operands``; returns how many
    loads moved."""
    buffers = buffers or _padded_rows
    count = 0
    transposed = transposed_loads(fn)
    for loop in [op for op in walk(fn.body) if isinstance(op, ops.ForOp)]:
        parent = _parent_block(fn.body, loop)
        where = parent.ops.index(loop)
        uses = Uses(fn)
        # this loop's dots and those of the loops after it in its block: attention's backward
        # reads k in a masked loop, then in an unmasked one
        inside = {x for later in parent.ops[where:] if isinstance(later, ops.ForOp)
                  for x in walk(later.body)}
        for load in parent.ops[:where]:
            users = uses.users(load.result) if isinstance(load, ops.LoadOp) else []
            if not _moves_to_shared(load, users, lambda u: u in inside and dot_ok(u)):
                continue
            t = load.result.type
            dot = users[0]
            layout = _oriented(load, buffers(dot, False)[0 if load.result is dot.a else 1],
                               transposed)
            buffer = SharedBufferType(t.shape, t.elem, 1, layout)
            taken = sum(a.result.type.nbytes for a in walk(fn.body)
                        if isinstance(a, SharedAllocOp))
            if taken + buffer.nbytes > shared_limit:
                continue
            loc = load.loc
            alloc = SharedAllocOp(result_types=[buffer], loc=loc)
            zero = ops.ConstantOp(0, result_types=[i32], loc=loc)
            view = SharedLoadOp(alloc.result, zero.result, loc=loc)
            view.results[0].name = load.result.name
            staged = [alloc, zero, _slot_copy(load, alloc.result, zero.result, load.ptr,
                                              load.mask, lambda v: v, None),
                      AsyncCommitOp(loc=loc), AsyncWaitOp(0, True, loc=loc), view]
            for op in walk(fn.body):
                op.map_operands(lambda v, old=load.result, new=view.result: new if v is old else v)
            at = parent.ops.index(load)
            parent.ops[at:at + 1] = staged
            count += 1
    return count


def dot_operand_loads(fn: Function, dot_ok: Callable[[ops.DotOp], bool]) -> set:
    """The loads of ``fn`` a pipeline could move to shared memory: those whose only users are
    dots ``dot_ok`` accepts (``_moves_to_shared``)."""
    uses = Uses(fn)
    return {op for op in walk(fn.body)
            if isinstance(op, ops.LoadOp) and _moves_to_shared(op, uses.users(op.result), dot_ok)}


def _moves_to_shared(op: Op, users: list, dot_ok: Callable[[ops.DotOp], bool],
                     uses: Optional[Uses] = None) -> bool:
    """Whether ``op`` is a load a dot can read from shared memory instead: a 2-D tile of
    16-bit or 8-bit (float8: ``narrow.py``; int8) elements, masked-off lanes zero, used only
    as ``a`` or ``b`` of dots ``dot_ok`` accepts -- or, given ``uses``, also through
    transposes that only such dots read, as ``b`` (``_read_transposed``), beside at least one
    dot reading it directly."""
    if not isinstance(op, ops.LoadOp) or op.volatile or not isinstance(op.ptr.type, TileType):
        return False
    t = op.result.type
    direct = [u for u in users if isinstance(u, ops.DotOp) and op.result in (u.a, u.b) and
              op.result is not u.acc and dot_ok(u)]
    return len(t.shape) == 2 and slot_element(t.elem) and bool(direct) and \
        (op.other is None or _is_zero(op.other)) and \
        all(u in direct or _read_transposed(u, uses, dot_ok) for u in users)


def _read_transposed(op: Op, uses: Optional[Uses], dot_ok: Callable[[ops.DotOp], bool]) -> bool:
    """Whether ``op`` is a 2-D transpose (``tl.trans``) only dots ``dot_ok`` accepts read, as
    their ``b``: they read it in place, from the slot's transposed view."""
    if uses is None or not isinstance(op, ops.PermuteOp) or tuple(op.order) != (1, 0):
        return False
    readers = uses.users(op.result)
    return bool(readers) and all(isinstance(d, ops.DotOp) and d.b is op.result and
                                 d.a is not op.result and d.acc is not op.result and dot_ok(d)
                                 for d in readers)


def _transposes(load: ops.LoadOp, uses: Uses) -> list:
    """The transposes of ``load``'s tile among its users (``_read_transposed``'s)."""
    return [u for u in uses.users(load.result) if isinstance(u, ops.PermuteOp)]


def _views_fit(load: ops.LoadOp, layout: SharedBufferLayout, uses: Uses,
               buffers: BufferLayouts) -> bool:
    """Whether every transpose of ``load`` can be read from a slot laid out as ``layout``: it
    has a transposed view, of the kind of buffer the dots reading the transpose want for B
    (read along either dimension).  16-bit tiles only: an 8-bit matrix unit reads its
    operands K-major alone, which a transposed view of a K-major slot is not."""
    shape = load.result.type.shape
    view = layout.transposed(shape)
    perms = _transposes(load, uses)
    if perms and load.result.type.elem.nbytes != 2:
        return False
    for perm in perms:
        for dot in uses.users(perm.result):
            wanted = buffers(dot, False)
            kinds = () if wanted is None else \
                (type(wanted[1]), type(wanted[1].along_columns(tuple(reversed(shape)))))
            if view is None or type(view) not in kinds:
                return False
    return True


def _padded_rows(dot: ops.DotOp, both: bool) -> tuple[SharedBufferLayout, SharedBufferLayout]:
    return (PaddedRows(dot.a.type.shape[-1] + PAD_ELEMENTS),
            PaddedRows(dot.b.type.shape[-1] + PAD_ELEMENTS))


def _parent_block(root: Block, target: Op) -> Block:
    if target in root.ops:
        return root
    for op in walk(root):
        for region in op.regions:
            if target in region.ops:
                return region
    raise AssertionError("op not found")


class _Ahead:
    """Clones of body values as they will be ``distance`` iterations later (or at iteration
    ``distance`` from the start, when ``before_loop``)."""

    def __init__(self, loop: ops.ForOp, advancing: dict, inside: set, out: list,
                 distance: int, before_loop: bool) -> None:
        self.loop, self.advancing, self.inside, self.out = loop, advancing, inside, out
        body = loop.body
        iv = body.args[0]
        loc = loop.loc
        self.mapping: dict = {}
        k = self.const(distance, iv.type, loc)
        scaled = self.emit(ops.BinaryOp("mul", k, loop.step, loc=loc))
        base = loop.lower if before_loop else iv
        self.iv = self.emit(ops.BinaryOp("add", base, scaled, loc=loc))
        self.in_range = self.emit(ops.CompareOp("lt", self.iv, loop.upper, loc=loc))
        self.mapping[iv] = self.iv
        for arg, offset in advancing.items():
            start = loop.inits[body.args.index(arg) - 1] if before_loop else arg
            if distance == 0 or offset is None:
                self.mapping[arg] = start
                continue
            offset = self.value(offset)
            kt = self.const(distance, offset.type, loc)
            step = self.emit(ops.BinaryOp("mul", kt, offset, loc=loc))
            self.mapping[arg] = self.emit(ops.AddPtrOp(start, step, loc=loc)
                                          if is_pointer(arg.type) else
                                          ops.BinaryOp("add", start, step, loc=loc))

    def const(self, value: int, t, loc) -> Value:
        return self.emit(ops.ConstantOp(value, result_types=[t], loc=loc))

    def emit(self, op: Op) -> Value:
        self.out.append(op)
        return op.result

    def value(self, v: Value) -> Value:
        """``v`` as seen at the shifted iteration (cloning the body ops it needs)."""
        if v in self.mapping or v not in self.inside:
            return self.mapping.get(v, v)
        needed = _slice_of(v, self.inside)
        for op in self.loop.body.ops:
            if op in needed and op.results[0] not in self.mapping:
                self.out.append(op.clone_with(self.mapping))
        return self.mapping[v]


def _slice_of(v: Value, inside: set) -> set:
    needed: set = set()
    stack = [v]
    while stack:
        x = stack.pop()
        op = x.owner
        if isinstance(op, Op) and x in inside and op not in needed:
            needed.add(op)
            stack.extend(op.operands)
    return needed


def _pipeline_dots(loop: ops.ForOp, parent: Block, stages: int, dot_ok, shared_limit: int,
                   buffers: BufferLayouts, transposed: frozenset = frozenset()) -> int:
    body = loop.body
    # a copy started iterations ahead must not miss a write of the iterations in between
    if body.terminator is None or any(isinstance(op, _SIDE_EFFECTS) for op in walk(body)):
        return 0
    inside = _defined_in(body)
    iv = body.args[0]
    yielded = body.terminator.values
    invariant: set = set()          # body values computed from outside values only
    for op in body.ops:
        if op.has_trait(TRAIT_PURE) and not op.regions and \
                all(v in invariant or v not in inside for v in op.operands):
            invariant.update(op.results)
    # carried values advanced by a loop-invariant step each iteration: pointer tiles
    # (``a_ptrs += BK``) and integers (a block pointer's offsets, ``tl.advance``); a value
    # carried unchanged (the block pointer's base, shape and strides) has no step (``None``)
    advancing: dict = {}
    for arg, y in zip(body.args[1:], yielded):
        step = y.owner

        def steady(v: Value) -> bool:
            return v in invariant or v not in inside
        if y is arg:
            advancing[arg] = None
        elif isinstance(arg.type, TileType) and isinstance(step, ops.AddPtrOp) and \
                step.ptr is arg and steady(step.offset):
            advancing[arg] = step.offset
        elif not isinstance(arg.type, TileType) and isinstance(step, ops.BinaryOp) and \
                step.kind == "add" and is_int(arg.type) and arg in (step.lhs, step.rhs):
            other = step.rhs if step.lhs is arg else step.lhs
            if other is not arg and steady(other):
                advancing[arg] = other
    computable = {iv, *advancing}   # values computable at any iteration
    for op in body.ops:
        if op.has_trait(TRAIT_PURE) and not op.regions and \
                all(v in computable or v in invariant or v not in inside for v in op.operands):
            computable.update(op.results)
    uses = Uses(body)
    loads = []
    for op in body.ops:
        users = uses.users(op.result) if isinstance(op, ops.LoadOp) else []
        if not _moves_to_shared(op, users, lambda u: u in body.ops and dot_ok(u), uses) or \
                op.result in yielded or any(u not in body.ops for u in users):
            continue
        if not all(v in computable or v in invariant or v not in inside
                   for v in op.operands if v is not op.other):
            continue
        loads.append(op)
    if not loads:
        return 0
    layouts = _buffer_layouts(loads, uses, buffers, transposed)
    loads = [ld for ld in loads if _views_fit(ld, layouts[ld], uses, buffers)]
    if not loads:
        return 0
    slots = [SharedBufferType(ld.result.type.shape, ld.result.type.elem, 1, layouts[ld]) for ld in loads]
    # the dots' operands left out still pass through the scratch space after the buffers
    moved = {ld.result for ld in loads} | {t.result for ld in loads for t in _transposes(ld, uses)}
    shared_limit -= max([_scratch_bytes(dot, moved, buffers)
                         for dot in body.ops if isinstance(dot, ops.DotOp)], default=0)
    # a dot whose reads stay in flight keeps a slot busy that long after its iteration: one
    # more slot each, so the copy started ``stages - 1`` iterations ahead never lands on it;
    # where no dot accumulates in place (nothing can stay in flight), or even two stages and
    # those slots do not fit, the dot waits for its reads instead
    wanted = stages
    if not any(_may_stay_in_flight(loop, u, moved) for ld in loads for u in uses.users(ld.result)):
        slots = [SharedBufferType(b.shape, b.elem, b.stages, b.layout.settled()) for b in slots]
    extra = _reads_in_flight(slots)
    while stages > 2 and _footprint(slots, stages + extra) > shared_limit:
        stages -= 1
    if extra and _footprint(slots, stages + extra) > shared_limit:
        slots = [SharedBufferType(b.shape, b.elem, b.stages, b.layout.settled()) for b in slots]
        stages, extra = wanted, 0
        while stages > 2 and _footprint(slots, stages) > shared_limit:
            stages -= 1
    if _footprint(slots, stages + extra) > shared_limit:
        return 0
    count = stages + extra
    slots = [SharedBufferType(b.shape, b.elem, count, b.layout) for b in slots]
    loc = loop.loc

    # before the loop: the buffers, then iterations 0 .. stages-2 in flight
    prologue: list[Op] = []
    allocs = [SharedAllocOp(result_types=[t], loc=loc) for t in slots]
    prologue += allocs
    for s in range(stages - 1):
        ahead = _Ahead(loop, advancing, inside, prologue, s, before_loop=True)
        slot = ahead.const(s, i32, loc)
        for load, alloc in zip(loads, allocs):
            prologue += _copy(load, alloc.result, slot, ahead)
        prologue.append(AsyncCommitOp(loc=loc))

    # in the body: wait for this iteration's slot, start iteration k + stages - 1's copies
    top: list[Op] = [AsyncWaitOp(stages - 2, True, loc=loc)]
    read_slot, write_slot, tail, yields, firsts = _slot_indices(body, top, count, stages, loc)
    ahead = _Ahead(loop, advancing, inside, top, stages - 1, before_loop=False)
    for load, alloc in zip(loads, allocs):
        top += _copy(load, alloc.result, write_slot, ahead)
    top.append(AsyncCommitOp(loc=loc))
    for load, alloc in zip(loads, allocs):
        view = SharedLoadOp(alloc.result, read_slot, loc=load.loc)
        view.results[0].name = load.result.name
        top.append(view)
        for op in walk(body):
            op.map_operands(lambda v, old=load.result, new=view.result: new if v is old else v)
        body.ops.remove(load)
        # a transpose of the tile reads the same slot transposed, in place
        for perm in _transposes(load, uses):
            flipped = SharedLoadOp(alloc.result, read_slot, transposed=True, loc=perm.loc)
            flipped.results[0].name = perm.result.name
            top.append(flipped)
            for op in walk(body):
                op.map_operands(lambda v, old=perm.result, new=flipped.result: new if v is old else v)
            body.ops.remove(perm)
    body.ops[-1:-1] = tail
    body.terminator.values.extend(yields)
    prologue += firsts
    for first in firsts:
        loop.inits.append(first.result)
        loop.results.append(Value(i32, loop, len(loop.results)))
    body.ops[0:0] = top
    where = parent.ops.index(loop)
    parent.ops[where:where] = prologue
    # drain, and let no warp run ahead into code (an enclosing loop's next prologue) that
    # refills the slots while another still reads the last one
    parent.ops.insert(where + len(prologue) + 1, AsyncWaitOp(0, True, loc=loc))
    return len(loads)


def _slot_indices(body: Block, top: list, count: int, stages: int, loc: Any) -> tuple:
    """(the slot this iteration reads, the slot it copies into, the ops that end the body, what
    the body yields for its new arguments, their first values) for ``count`` slots,
    ``stages - 1`` iterations apart; the new body arguments are appended and the ops computing
    the slots go into ``top``.

    With a power-of-two ``count`` both slots are remainders of one carried iteration counter
    (a mask).  With any other, each slot is carried itself, advanced by one and wrapped around:
    a remainder by such a count is a multiply-high chain on the way to every slot address and
    to a matrix unit's operand descriptors (measured on one GPU: a 128x128x64 matmul on four
    warps with five slots 2.5% faster, its persistent form 7%; with four slots the carried
    form was 4-5% slower than the mask)."""
    one = ops.ConstantOp(1, result_types=[i32], loc=loc)
    if count & (count - 1) == 0:
        counter = Value(i32, body, len(body.args), "stage")
        body.args.append(counter)
        n = ops.ConstantOp(count, result_types=[i32], loc=loc)
        later = ops.ConstantOp(stages - 1, result_types=[i32], loc=loc)
        read = ops.BinaryOp("rem", counter, n.result, loc=loc)
        ahead = ops.BinaryOp("add", counter, later.result, loc=loc)
        write = ops.BinaryOp("rem", ahead.result, n.result, loc=loc)
        top += [n, read, later, ahead, write]
        step = ops.BinaryOp("add", counter, one.result, loc=loc)
        return read.result, write.result, [one, step], [step.result], \
            [ops.ConstantOp(0, result_types=[i32], loc=loc)]
    read_slot = Value(i32, body, len(body.args), "slot")
    write_slot = Value(i32, body, len(body.args) + 1, "next_slot")
    body.args += [read_slot, write_slot]
    n = ops.ConstantOp(count, result_types=[i32], loc=loc)
    wrapped = ops.ConstantOp(0, result_types=[i32], loc=loc)
    tail: list[Op] = [one, n, wrapped]
    yields = []
    for slot in (read_slot, write_slot):
        step = ops.BinaryOp("add", slot, one.result, loc=loc)
        last = ops.CompareOp("eq", step.result, n.result, loc=loc)
        tail += [step, last, ops.SelectOp(last.result, wrapped.result, step.result, loc=loc)]
        yields.append(tail[-1].result)
    firsts = [ops.ConstantOp(0, result_types=[i32], loc=loc),
              ops.ConstantOp(stages - 1, result_types=[i32], loc=loc)]
    return read_slot, write_slot, tail, yields, firsts


def accumulates_in_place(loop: ops.ForOp, dot: Op) -> bool:
    """Whether ``loop``'s body carries an accumulator through the dot ``dot`` alone:
    ``dot.acc`` a carried argument only ``dot`` reads, and ``dot``'s result yielded in that
    argument's place and used nowhere else -- so the dot's work may still be running when the
    next iteration starts (a matrix unit kept in flight)."""
    body = loop.body
    if not isinstance(dot, ops.DotOp) or dot not in body.ops or dot.acc not in body.args[1:] \
            or body.terminator is None:
        return False
    if body.terminator.values[body.args.index(dot.acc) - 1] is not dot.result:
        return False
    uses = Uses(body)
    return uses.count(dot.acc) + uses.count(dot.result) == 2


def _may_stay_in_flight(loop: ops.ForOp, dot: Op, moved: set) -> bool:
    """Whether ``dot``'s reads may still run when the next iteration starts: it accumulates
    in place and reads both operands from shared buffers (``moved``: the loop's pipelined
    tiles; or tiles staged before the loop).  An operand computed in the body is read from
    registers or from the scratch space, which the dot must be done with before it returns."""
    if not accumulates_in_place(loop, dot):
        return False
    return all(v in moved or isinstance(v.owner, SharedLoadOp) for v in (dot.a, dot.b))


def _reads_in_flight(slots: list) -> int:
    """The extra slots the buffers' readers need (``SharedBufferLayout.reads_in_flight``)."""
    return max(b.layout.reads_in_flight for b in slots)


def _footprint(slots: list, count: int) -> int:
    """Bytes ``count`` slots of each buffer take, each buffer aligned as its layout says."""
    total = 0
    for b in sorted(slots, key=lambda t: -t.layout.alignment):
        total = -(-total // b.layout.alignment) * b.layout.alignment + b.slot_bytes * count
    return total


def _buffer_layouts(loads: list, uses: Uses, buffers: BufferLayouts,
                    transposed: frozenset = frozenset()) -> dict:
    """The layout of each load's buffer: the one its (first) dot's strategy wants, for both
    operands together when both move and each feeds only that dot; column-major instead of
    core's row-major for the loads in ``transposed`` (read along their first dimension)."""
    by_value = {ld.result: ld for ld in loads}
    out = {}
    for ld in loads:
        users = uses.users(ld.result)
        dot = next(u for u in users if isinstance(u, ops.DotOp))
        a, b = by_value.get(dot.a), by_value.get(dot.b)
        both = len(users) == 1 and a is not None and b is not None and a is not b and \
            uses.count(b.result if ld is a else a.result) == 1
        out[ld] = _oriented(ld, buffers(dot, both)[0 if ld.result is dot.a else 1], transposed)
    return out


def _oriented(load: ops.LoadOp, layout: SharedBufferLayout,
              transposed: frozenset) -> SharedBufferLayout:
    return layout.along_columns(load.result.type.shape) if load in transposed else layout


def transposed_loads(fn: Function) -> frozenset:
    """The 2-D loads of ``fn`` whose addresses run along the first dimension and not the last
    (the axis facts), and the loads of a dialect that say they are read so
    (``PipelinedLoad.reads_transposed``): their tiles are copied into column-major slots."""
    axis = analyse_function(fn)
    out = set()
    for op in walk(fn.body):
        if isinstance(op, PipelinedLoad) and op.reads_transposed():
            out.add(op)
        elif isinstance(op, ops.LoadOp) and isinstance(op.ptr.type, TileType) and \
                len(op.ptr.type.shape) == 2:
            info = axis.get(op.ptr)
            if info is not None and info.contiguity and info.contiguity[-1] == 1 and \
                    info.contiguity[0] >= 8 and \
                    vector_width_of_access(info, axis.get(op.mask) if op.mask else None,
                                           op.result.type.elem.nbytes, dim=0) >= 2:
                out.add(op)
    return frozenset(out)


def _scratch_bytes(dot: ops.DotOp, moved: set, buffers: BufferLayouts) -> int:
    """Shared bytes ``dot``'s operands that stay in registers take in the scratch space
    (with room to align their start as their layout asks)."""
    layouts = buffers(dot, False) or _padded_rows(dot, False)
    staged = [(v, layout) for v, layout in zip((dot.a, dot.b), layouts) if v not in moved]
    return sum(layout.slot_bytes(v.type.shape, elem_type(v.type)) for v, layout in staged) + \
        max([layout.alignment for _, layout in staged if layout.alignment > 16], default=0)


def _copy(load: ops.LoadOp, buffer: Value, slot: Value, ahead: _Ahead) -> list[Op]:
    """The ops of one ``async_copy`` of ``load``'s tile at the shifted iteration."""
    out: list[Op] = []
    ptr = ahead.value(load.ptr)
    shape = load.result.type.shape
    splat = ops.SplatOp(ahead.in_range, result_types=[TileType(shape, i1)], loc=load.loc)
    out.append(splat)
    mask = splat.result
    if load.mask is not None:
        both = ops.BinaryOp("and", ahead.value(load.mask), mask, loc=load.loc)
        out.append(both)
        mask = both.result
    out.append(_slot_copy(load, buffer, slot, ptr, mask, ahead.value, ahead.in_range))
    return out


def _is_zero(v: Value) -> bool:
    op = v.owner
    if isinstance(op, ops.SplatOp):
        return _is_zero(op.src)
    return isinstance(op, ops.ConstantOp) and op.value == 0
