"""Which tile values are lazy (fused into their consumer's loop) and which get a buffer.

* *cheap* values are recomputed at every use: constants, splat, arange, broadcast,
  expand_dims, permute, hint, and integer/pointer/boolean elementwise ops (index and mask
  math) whose tile operands are all cheap.
* *fused-once* values are evaluated exactly once, inside their single consumer's loop:
  elementwise ops and loads with one use, in the same block, consumed by an op that visits
  each element once (not broadcast, reshape or dot).  A load is only fused when no store,
  atomic, barrier or control-flow op lies between it and its consumer.
* everything else is materialised into a stack buffer where it is defined.

A tile op must behave as if it read every element before writing any.  Fusing a load into
the loop of a store breaks that when the two overlap at different offsets (``x[i+1] = x[i]``),
so a load is not fused into a store or atomic whose pointer may come from the same kernel
argument (or from a pointer whose origin is not visible, like a loop-carried pointer tile).
Remaining deviation (documented in the README): two *different* pointer arguments that
overlap in memory at shifted offsets.
"""
from __future__ import annotations

from anytile.ir import (AddPtrOp, ArangeOp, AtomicCASOp, AtomicRMWOp, BinaryOp, BitcastOp,
                        Block, BroadcastOp, CastOp, CompareOp, ConstantOp, DotOp, ExpandDimsOp,
                        FmaOp, ForOp, Function, HintOp, LoadOp, Op, PermuteOp, ReshapeOp, ScalarType,
                        SelectOp, SplatOp, StoreOp, TileType, UMulHiOp, UnaryOp, Uses, Value,
                        YieldOp)
from anytile.ir.nodes import TRAIT_CONTROL, TRAIT_MEMORY, TRAIT_SIDE_EFFECT

from anytile.codegen.pointers import param_indices, pointer_origins

__all__ = ["FusionPlan"]

SHAPE_OPS = (ConstantOp, SplatOp, ArangeOp, BroadcastOp, ExpandDimsOp, PermuteOp, HintOp)
ELEMENTWISE_OPS = (BinaryOp, UnaryOp, CompareOp, SelectOp, CastOp, BitcastOp, FmaOp, UMulHiOp,
                   AddPtrOp)
NEEDS_BUFFER_CONSUMERS = (BroadcastOp, ReshapeOp, DotOp)


class FusionPlan:
    """``is_lazy(op)``: whether ``op``'s tile result is evaluated at its uses."""

    def __init__(self, fn: Function) -> None:
        self._param_index = param_indices(fn)
        self.uses = Uses(fn)
        self.cheap: set[int] = set()
        self.fused_once: set[int] = set()
        # id(dot) -> (add, x) for ``x + dot(a, b, 0)``: the dot accumulates onto x directly
        self.dot_accumulates: dict[int, tuple[Op, Value]] = {}
        # dots whose accumulator is a loop-carried tile they alone read, yielded back to the
        # same slot: they write the slot in place (no result buffer, no copy at the yield)
        self.dot_in_place: set[int] = set()
        self._for_bodies = {id(op.body) for op in fn.walk() if isinstance(op, ForOp)}
        self._classify(fn.body)

    def is_lazy(self, op: Op) -> bool:
        return id(op) in self.cheap or id(op) in self.fused_once

    def _classify(self, block: Block) -> None:
        for op in block.ops:
            for region in op.regions:
                self._classify(region)
            if isinstance(op, DotOp):
                self._match_accumulating_dot(op, block)
                self._match_in_place_dot(op, block)
            if len(op.results) != 1 or not isinstance(op.result.type, TileType):
                continue
            if self._is_cheap(op):
                self.cheap.add(id(op))
            elif self._can_fuse_once(op):
                self.fused_once.add(id(op))

    def _is_cheap(self, op: Op) -> bool:
        if not self._operands_settled(op):
            return False
        if isinstance(op, SHAPE_OPS):
            return True
        if isinstance(op, ELEMENTWISE_OPS):
            elem = op.result.type.elem
            return not (isinstance(elem, ScalarType) and elem.is_float)
        return False

    def _operands_settled(self, op: Op) -> bool:
        """All tile operands are cheap or materialised (never fused-once values)."""
        for v in op.operands:
            if isinstance(v.type, TileType) and isinstance(v.owner, Op) and \
                    id(v.owner) in self.fused_once:
                return False
        return True

    def _can_fuse_once(self, op: Op) -> bool:
        if not isinstance(op, ELEMENTWISE_OPS + (LoadOp,)):
            return False
        user = self.uses.only_user(op.result)
        if user is None:
            return False
        if isinstance(user, NEEDS_BUFFER_CONSUMERS) or id(user) in self.cheap:
            return False
        block = self.uses.block_of(op)
        if self.uses.block_of(user) is not block:
            return False
        if isinstance(op, LoadOp):
            if not self._store_cannot_alias(op):
                return False
            start, end = self.uses.position(op), self.uses.position(user)
            for between in block.ops[start + 1:end]:
                if between.TRAITS & {TRAIT_SIDE_EFFECT, TRAIT_CONTROL} or (
                        TRAIT_MEMORY in between.TRAITS and not isinstance(between, LoadOp)):
                    return False
        return True

    def _store_cannot_alias(self, load: LoadOp) -> bool:
        """Whether the op that would run ``load`` in its loop writes memory that cannot be
        the load's (different pointer arguments), following single-use elementwise users."""
        op: Op = load
        while True:
            user = self.uses.only_user(op.results[0]) if op.results else None
            if user is None:
                return True
            if isinstance(user, (StoreOp, AtomicRMWOp, AtomicCASOp)):
                mine = pointer_origins(load.ptr, self._param_index)
                theirs = pointer_origins(user.ptr, self._param_index)
                return mine is not None and theirs is not None and not mine & theirs
            if not isinstance(user, ELEMENTWISE_OPS):
                return True
            op = user

    def _match_accumulating_dot(self, dot: DotOp, block: Block) -> None:
        """``add(x, dot(a, b, zeros))`` (how ``acc += tl.dot(a, b)`` arrives) is computed as
        ``dot(a, b, x)``: no zero tile, no extra pass, accumulators start from x."""
        zero = dot.acc.owner
        if not (isinstance(zero, ConstantOp) and zero.value == 0):
            return
        add = self.uses.only_user(dot.result)
        if not isinstance(add, BinaryOp) or add.kind != "add":
            return
        if self.uses.block_of(add) is not block or add.lhs is add.rhs:
            return
        x = add.rhs if add.lhs is dot.result else add.lhs
        owner = x.owner
        defined_before = not isinstance(owner, Op) or (
            self.uses.block_of(owner) is not block or
            self.uses.position(owner) < self.uses.position(dot))
        if defined_before and x.type == dot.result.type:
            self.dot_accumulates[id(dot)] = (add, x)

    def _match_in_place_dot(self, dot: DotOp, block: Block) -> None:
        folded = self.dot_accumulates.get(id(dot))
        consumer, acc, result = (folded[0], folded[1], folded[0].result) if folded else \
            (dot, dot.acc, dot.result)
        term = block.ops[-1] if block.ops else None
        if id(block) not in self._for_bodies or not isinstance(term, YieldOp):
            return
        if acc.owner is not block or self.uses.only_user(acc) is not consumer:
            return
        slot = block.args.index(acc) - 1          # body args are (iv, *carried)
        if slot >= 0 and len(term.values) > slot and term.values[slot] is result and \
                sum(v is result for v in term.values) == 1 and \
                self.uses.only_user(result) is term:
            self.dot_in_place.add(id(dot))
