"""Which tiles are computed where they are used, and which are kept in private arrays.

* *cheap* tiles are recomputed at every use: constants, splats, aranges, shape ops of cheap
  tiles, and integer, pointer and boolean elementwise ops of cheap tiles (index and mask
  arithmetic), so ``ptr + pid * BLOCK + arange`` stays a ramp and loads stay vector loads;
* *views* (``expand_dims``, ``reshape``, hints) of other tiles share their storage: a tile's
  layout depends only on its element count;
* *fused* tiles (elementwise ops and loads with one use, in the same block, by an op that
  reads each element once) are computed inside their user's loop over chunks;
* everything else is *stored*: each work-item keeps its chunks in a private array.

A load is fused only when nothing that writes memory runs between it and the op its chunk is
finally computed in, and that op does not write memory the load may read (a store through a
pointer from the same kernel argument): a tile op reads every element before writing any.
"""
from __future__ import annotations

from typing import Optional

from anytile.ir import (AddPtrOp, ArangeOp, AtomicCASOp, AtomicRMWOp, BinaryOp, BitcastOp, Block,
                        BroadcastOp, CallOp, CastOp, CompareOp, ConditionOp, ConstantOp,
                        ExpandDimsOp, FmaOp, ForOp, Function, HintOp, IfOp, LoadOp, Op,
                        PermuteOp, PointerType, ReshapeOp, ScalarType, SelectOp, SplatOp,
                        StoreOp, TileType, UMulHiOp, UnaryOp, Uses, Value, WhileOp, YieldOp,
                        elem_type)
from anytile.ir import Trait

__all__ = ["Plan", "ELEMENTWISE", "VIEWS", "CHEAP", "FUSED", "VIEW", "STORED"]

ELEMENTWISE = (BinaryOp, UnaryOp, CompareOp, SelectOp, CastOp, BitcastOp, FmaOp, UMulHiOp,
               AddPtrOp)
VIEWS = (ExpandDimsOp, ReshapeOp, HintOp)
_SHAPE = (BroadcastOp, PermuteOp) + VIEWS
#: users that need their operand stored (control flow) or may run code with side effects
_CONTROL = (YieldOp, ConditionOp, ForOp, IfOp, WhileOp, CallOp)
_POINTER_PASS = (AddPtrOp, SplatOp, BroadcastOp, ExpandDimsOp, ReshapeOp, PermuteOp, HintOp,
                 SelectOp, BitcastOp, CastOp)

#: shape ops that read their source at other indices: it must be stored (with one
#: work-item they read its array in place; with several, through scratch memory)
_REMAPS = (BroadcastOp, PermuteOp)

CHEAP, FUSED, VIEW, STORED = "cheap", "fused", "view", "stored"


class Plan:
    """``kind(op)``: how ``op``'s tile result is kept (``CHEAP``, ``FUSED``, ``VIEW`` or
    ``STORED``)."""

    def __init__(self, fn: Function, work_items: int) -> None:
        self.work_items = work_items
        self.uses = Uses(fn)
        self._trace_pointers(fn)
        self.kinds: dict[int, str] = {}
        self._classify(fn.body)

    def kind(self, op: Op) -> str:
        return self.kinds.get(id(op), STORED)

    def is_lazy(self, op: Op) -> bool:
        return self.kind(op) in (CHEAP, FUSED, VIEW)

    # -- analysis --------------------------------------------------------------------------
    def _classify(self, block: Block) -> None:
        for op in block.ops:
            for region in op.regions:
                self._classify(region)
            if len(op.results) != 1 or not isinstance(op.result.type, TileType):
                continue
            if self._is_cheap(op):
                self.kinds[id(op)] = CHEAP
            elif isinstance(op, VIEWS) or (isinstance(op, _REMAPS) and self.work_items == 1):
                self.kinds[id(op)] = VIEW
        for op in reversed(block.ops):    # users first: fusing looks at what its user is
            if id(op) not in self.kinds and len(op.results) == 1 and \
                    isinstance(op.result.type, TileType) and self._can_fuse(op):
                self.kinds[id(op)] = FUSED

    def _tile_operands_cheap(self, op: Op) -> bool:
        return all(self.kinds.get(id(v.owner)) == CHEAP for v in op.operands
                   if isinstance(v.type, TileType))

    def _is_cheap(self, op: Op) -> bool:
        if isinstance(op, (ConstantOp, SplatOp, ArangeOp)):
            return True
        if isinstance(op, _SHAPE):
            return self._tile_operands_cheap(op)
        if isinstance(op, ELEMENTWISE) and not isinstance(op, FmaOp):
            elem = op.result.type.elem
            return not (isinstance(elem, ScalarType) and elem.is_float) and \
                self._tile_operands_cheap(op)
        return False

    def final_user(self, value: Value) -> Optional[Op]:
        """The op that computes ``value``'s chunks when it is fused: its single user, seen
        through views and other fused single-use tiles; ``None`` if there is no such op."""
        user = self.uses.only_user(value)
        if user is None:
            return None
        if isinstance(user, VIEWS) or self.kinds.get(id(user)) == FUSED:
            return self.final_user(user.result)
        return user

    def _can_fuse(self, op: Op) -> bool:
        if not isinstance(op, ELEMENTWISE + (LoadOp,)):
            return False
        final = self.final_user(op.result)
        if final is None or isinstance(final, _CONTROL + _REMAPS) or \
                self.uses.block_of(final) is not self.uses.block_of(op):
            return False
        return not isinstance(op, LoadOp) or self._load_may_move(op, final)

    def _load_may_move(self, load: LoadOp, final: Op) -> bool:
        """Whether ``load`` may be computed in ``final`` (see the module docstring)."""
        block = self.uses.block_of(load)
        start, end = self.uses.position(load), self.uses.position(final)
        for between in block.ops[start + 1:end]:
            if Trait.SIDE_EFFECT in between.TRAITS or isinstance(between, _CONTROL) or (
                    Trait.MEMORY in between.TRAITS and not isinstance(between, LoadOp)):
                return False
        if isinstance(final, (StoreOp, AtomicRMWOp, AtomicCASOp)):
            mine, theirs = self.origins(load.ptr), self.origins(final.ptr)
            return mine is not None and theirs is not None and not mine & theirs
        return True

    def origins(self, value: Value) -> Optional[frozenset]:
        """The kernel parameters ``value``'s pointers are derived from (``None``: unknown,
        e.g. carried through a loop or made from an integer)."""
        return self._origins.get(value)

    def _trace_pointers(self, fn: Function) -> None:
        """Parameters reach pointers forward: through offsets, shape ops and selects."""
        self._origins: dict[Value, Optional[frozenset]] = {
            a: frozenset({i}) for i, a in enumerate(fn.args) if isinstance(a.type, PointerType)}
        for op in fn.walk():
            for r in op.results:
                if not isinstance(elem_type(r.type), PointerType):
                    continue
                sources = [self._origins.get(o) for o in op.operands
                           if isinstance(elem_type(o.type), PointerType)]
                known = isinstance(op, _POINTER_PASS) and sources and None not in sources
                self._origins[r] = frozenset().union(*sources) if known else None
