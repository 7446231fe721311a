"""Which pointer parameters of a kernel a pointer value is derived from (``PointerRoots``).

A pointer (or a tile of them) derives from a parameter through offsets (``addptr``), splats,
broadcasts, reshapes, permutations, hints, pointer casts, selects between pointers and the
values loops and ``if`` carry; anything else (a pointer loaded from memory, an integer made a
pointer, a call's result) makes its origin unknown.  The software pipeliner asks this to tell
a loop's loads from its stores: different parameters are taken not to overlap.
"""
from __future__ import annotations

from typing import Optional

from ...ir import ops
from ...ir.nodes import Block, Function, Value, walk
from ...ir.rules import is_ptr

__all__ = ["PointerRoots"]

#: ops whose pointer results point where their pointer operands do (offsets aside)
_DERIVED = (ops.AddPtrOp, ops.SplatOp, ops.BroadcastOp, ops.ExpandDimsOp, ops.ReshapeOp,
            ops.PermuteOp, ops.HintOp, ops.CastOp, ops.BitcastOp, ops.SelectOp)


class PointerRoots:
    """The origins of ``fn``'s pointer values: ``of(v)`` is the set of ``fn``'s parameters
    that ``v``'s pointers may derive from, or ``None`` when some may come from elsewhere."""

    def __init__(self, fn: Function) -> None:
        self.params = set(fn.body.args)
        #: a value carried by control flow -> the values it may take
        self.sources: dict[Value, list[Value]] = {}
        for op in walk(fn.body):
            if isinstance(op, ops.ForOp) and op.body.terminator is not None:
                yielded = op.body.terminator.values
                for arg, result, init, y in zip(op.body.args[1:], op.results, op.inits, yielded):
                    self.sources[arg] = self.sources[result] = [init, y]
            elif isinstance(op, ops.IfOp):
                ends = [b.terminator.values for b in (op.then_body, op.else_body)
                        if b.terminator is not None]
                for i, r in enumerate(op.results):
                    self.sources[r] = [values[i] for values in ends]
            elif isinstance(op, ops.WhileOp) and isinstance(op.before.terminator, ops.ConditionOp) \
                    and op.after.terminator is not None:
                passed = op.before.terminator.values
                for arg, init, y in zip(op.before.args, op.inits, op.after.terminator.values):
                    self.sources[arg] = [init, y]
                for arg, r, v in zip(op.after.args, op.results, passed):
                    self.sources[arg] = self.sources[r] = [v]
        self._memo: dict[Value, Optional[frozenset]] = {}

    def of(self, v: Value) -> Optional[frozenset]:
        """The parameters ``v``'s pointers derive from; ``None``: unknown."""
        if v not in self._memo:
            self._memo[v] = self._trace(v)
        return self._memo[v]

    def _trace(self, v: Value) -> Optional[frozenset]:
        roots: set = set()
        seen: set = set()
        stack = [v]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            if x in self.params:
                roots.add(x)
                continue
            if x in self.sources:
                stack.extend(self.sources[x])
                continue
            owner = x.owner
            if isinstance(owner, Block) or not isinstance(owner, _DERIVED):
                return None
            pointers = [u for u in owner.operands if is_ptr(u.type)]
            if not pointers or isinstance(owner, ops.SelectOp) and len(pointers) != 2:
                return None         # an integer made a pointer
            stack.extend(pointers)
        return frozenset(roots)
