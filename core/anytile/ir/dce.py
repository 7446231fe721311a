"""Dead-code elimination: delete ops whose results nobody uses and that do nothing else.

Deleted when every result is unused:

* pure ops (including ``reduce``/``scan`` with their combine regions);
* non-volatile ``load`` (a read has no effect; like Triton, an unused load is dropped, so a
  would-be out-of-bounds read that is never used is not reported);
* ``for`` and ``if`` whose regions, after their own clean-up, hold no op with an effect.

Kept always: terminators, ops with the ``side_effect`` trait (stores, atomics, calls, asserts,
barriers), volatile loads, and ``while`` (it might not terminate).  Blocks are walked
backwards with the function's use lists (``ir.Uses``), so one walk removes whole dead chains.

A ``for`` also loses its dead loop-carried values: slot ``i`` goes when result ``i`` is unused
after the loop and the body's argument ``i`` only feeds the yields of slots that go too.
"""
from __future__ import annotations

from . import ops as O
from .nodes import TRAIT_PURE, TRAIT_SIDE_EFFECT, TRAIT_TERMINATOR, Block, Function, Module, Op, Value
from .uses import Uses

__all__ = ["dce", "dce_function"]

_EFFECT_FREE_WHEN_CLEAN = frozenset({"load", "for", "if"})


def has_effects(op: Op) -> bool:
    """Whether running ``op`` (or anything in its regions) can be observed besides its
    results."""
    if op.has_trait(TRAIT_SIDE_EFFECT) or op.NAME == "while":
        return True
    if op.NAME == "load" and op.volatile:
        return True
    if not (op.has_trait(TRAIT_PURE) or op.has_trait(TRAIT_TERMINATOR)
            or op.NAME in _EFFECT_FREE_WHEN_CLEAN):
        return True  # an op we know nothing about
    return any(has_effects(inner) for region in op.regions for inner in region.ops)


def _values_used_inside(op: Op, out: set[Value]) -> None:
    out.update(op.operands)
    for region in op.regions:
        for inner in region.ops:
            _values_used_inside(inner, out)


def _live_body_values(body: Block, dead_slots: set[int]) -> set[Value]:
    """Values of a ``for`` body needed by its effects or by the yields of live slots."""
    terminator = body.ops[-1]
    live: set[Value] = {v for i, v in enumerate(terminator.values) if i not in dead_slots}
    for op in reversed(body.ops[:-1]):
        if has_effects(op) or any(r in live for r in op.results):
            _values_used_inside(op, live)
    return live


def _dead_loop_slots(op: O.ForOp, uses: Uses) -> list[int]:
    """The loop-carried slots of ``op`` that nothing observes (see the module docstring)."""
    dead = {i for i, r in enumerate(op.results) if not uses.count(r)}
    while dead:
        live = _live_body_values(op.body, dead)
        still_dead = {i for i in dead if op.body.args[i + 1] not in live}
        if still_dead == dead:
            break
        dead = still_dead
    return sorted(dead)


def _drop_loop_slots(op: O.ForOp, slots: list[int], uses: Uses) -> None:
    """Remove loop-carried ``slots`` from ``op`` in place (other values keep their identity)."""
    terminator = op.body.ops[-1]
    gone = set(slots)
    uses.forget(op, regions=False)
    uses.forget(terminator)
    keep = [i for i in range(len(op.inits)) if i not in gone]
    op.inits = [op.inits[i] for i in keep]
    terminator.values = [terminator.values[i] for i in keep]
    op.results = [op.results[i] for i in keep]
    op.body.args = [op.body.args[0]] + [op.body.args[i + 1] for i in keep]
    for index, value in enumerate(op.results):
        value.index = index
    for index, value in enumerate(op.body.args):
        value.index = index
    uses.record(op, regions=False)
    uses.record(terminator)


class _Dce:
    def __init__(self, uses: Uses) -> None:
        self.uses = uses

    def removable(self, op: Op) -> bool:
        if op.has_trait(TRAIT_TERMINATOR):
            return False
        if any(self.uses.count(r) for r in op.results):
            return False
        return not has_effects(op)

    def block(self, block: Block) -> bool:
        changed = False
        kept: list[Op] = []
        for op in reversed(block.ops):
            if isinstance(op, O.ForOp) and op.body.ops:
                slots = _dead_loop_slots(op, self.uses)
                if slots:
                    _drop_loop_slots(op, slots, self.uses)
                    changed = True
            if not self.removable(op):
                for region in op.regions:  # clean inside first: the op may become removable
                    changed |= self.block(region)
            if self.removable(op):
                self.uses.forget(op)
                changed = True
            else:
                kept.append(op)
        kept.reverse()
        block.ops = kept
        return changed


def dce(module: Module) -> bool:
    """Delete dead ops in every function of ``module``; True if anything was deleted."""
    changed = False
    for fn in module.functions.values():
        changed |= dce_function(fn)
    return changed


def dce_function(fn: Function) -> bool:
    """Delete dead ops in ``fn`` (a rewrite of one function, such as a code generator's, may
    leave some); True if anything was deleted."""
    return _Dce(Uses(fn)).block(fn.body)
