"""Which tile values are lazy (fused into their consumer's loop) and which get a buffer.

* *cheap* values are recomputed at every use: constants, splat, arange, broadcast,
  expand_dims, permute, hint, and integer/pointer/boolean elementwise ops (index and mask
  math) whose tile operands are all cheap.
* *fused-once* values are evaluated exactly once, inside their single consumer's loop:
  elementwise ops and loads with one use, in the same block, consumed by an op that visits
  each element once (not broadcast, reshape or dot).  A load is only fused when no store,
  atomic, barrier or control-flow op lies between it and its consumer.
* everything else is materialised into a stack buffer where it is defined.

Known deviation (documented in the README): a fused load and a store that writes an
overlapping range *at a different offset* within one tile may see each other's chunks.
"""
from __future__ import annotations

from collections import defaultdict

from anytile.ir import (AddPtrOp, ArangeOp, BinaryOp, BitcastOp, Block, BroadcastOp,
                        CastOp, CompareOp, ConstantOp, DotOp, ExpandDimsOp, FmaOp, Function,
                        HintOp, LoadOp, Op, PermuteOp, ReshapeOp, SelectOp, SplatOp, TileType,
                        UMulHiOp, UnaryOp, Value, ScalarType)
from anytile.ir.core import TRAIT_CONTROL, TRAIT_MEMORY, TRAIT_SIDE_EFFECT

__all__ = ["FusionPlan"]

SHAPE_OPS = (ConstantOp, SplatOp, ArangeOp, BroadcastOp, ExpandDimsOp, PermuteOp, HintOp)
ELEMENTWISE_OPS = (BinaryOp, UnaryOp, CompareOp, SelectOp, CastOp, BitcastOp, FmaOp, UMulHiOp,
                   AddPtrOp)
NEEDS_BUFFER_CONSUMERS = (BroadcastOp, ReshapeOp, DotOp)


class FusionPlan:
    """``is_lazy(op)``: whether ``op``'s tile result is evaluated at its uses."""

    def __init__(self, fn: Function) -> None:
        self.uses: dict[Value, list[Op]] = defaultdict(list)
        self.block_of: dict[int, Block] = {}
        self._index_in_block: dict[int, int] = {}
        self._collect(fn.body)
        self.cheap: set[int] = set()
        self.fused_once: set[int] = set()
        self._classify(fn.body)

    def is_lazy(self, op: Op) -> bool:
        return id(op) in self.cheap or id(op) in self.fused_once

    def _collect(self, block: Block) -> None:
        for i, op in enumerate(block.ops):
            self.block_of[id(op)] = block
            self._index_in_block[id(op)] = i
            for v in op.operands:
                self.uses[v].append(op)
            for region in op.regions:
                self._collect(region)

    def _classify(self, block: Block) -> None:
        for op in block.ops:
            for region in op.regions:
                self._classify(region)
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
        users = self.uses.get(op.result, [])
        if len(users) != 1:
            return False
        user = users[0]
        if isinstance(user, NEEDS_BUFFER_CONSUMERS) or id(user) in self.cheap:
            return False
        block = self.block_of[id(op)]
        if self.block_of.get(id(user)) is not block:
            return False
        if isinstance(op, LoadOp):
            start, end = self._index_in_block[id(op)], self._index_in_block[id(user)]
            for between in block.ops[start + 1:end]:
                if between.TRAITS & {TRAIT_SIDE_EFFECT, TRAIT_CONTROL} or (
                        TRAIT_MEMORY in between.TRAITS and not isinstance(between, LoadOp)):
                    return False
        return True
