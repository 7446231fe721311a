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
"""
from __future__ import annotations

from typing import Optional

from ...ir import ops
from ...ir.core import TRAIT_PURE, Block, Function, Op, Value, walk
from ...ir.types import TileType, elem_type, i1

__all__ = ["pipeline_loops"]

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
