"""Use lists: which ops read each value, and where each op sits, computed in one walk.

The IR keeps no use lists on its values: ops are plain dataclasses whose operand fields passes
assign directly (``op.lhs = v``, ``map_operands``), and a block's ops are a list passes
rebuild, so a list kept on each value would go stale at the first such assignment.  A pass
asks ``Uses(fn)`` when it starts instead, and, when it keeps one across its own rewrites,
says what it deletes (``forget``) and what it adds or changes (``record``)::

    uses = Uses(fn)
    if uses.only_user(cast.result) is dot: ...       # the dot is the cast's one reader
    for user in uses.users(load.result): ...         # every reader, in walk order
"""
from __future__ import annotations

from typing import Optional, Union

from .nodes import Block, Function, Module, Op, Value

__all__ = ["Uses"]


class Uses:
    """The uses of the values of some IR (blocks, functions or modules, their regions
    included), as they were when computed (see the module docstring)."""

    def __init__(self, *roots: Union[Block, Function, Module]) -> None:
        self._users: dict[Value, list[Op]] = {}
        self._place: dict[Op, tuple[Block, int]] = {}
        for root in roots:
            if isinstance(root, Module):
                for fn in root.functions.values():
                    self._index(fn.body)
            else:
                self._index(root.body if isinstance(root, Function) else root)

    def _index(self, block: Block) -> None:
        users, place = self._users, self._place
        for i, op in enumerate(block.ops):
            place[op] = (block, i)
            for v in op.operands:
                found = users.get(v)
                if found is None:
                    users[v] = [op]
                else:
                    found.append(op)
            for region in op.regions:
                self._index(region)

    # -- asking ------------------------------------------------------------------------------
    def users(self, value: Value) -> list[Op]:
        """The ops reading ``value``, one entry per use (an op reading it twice is there
        twice), parents before the ops of their regions."""
        return list(self._users.get(value, ()))

    def count(self, value: Value) -> int:
        """How many uses ``value`` has."""
        return len(self._users.get(value, ()))

    def only_user(self, value: Value) -> Optional[Op]:
        """The op of ``value``'s one use; ``None`` when it has none or more than one."""
        found = self._users.get(value)
        return found[0] if found is not None and len(found) == 1 else None

    def block_of(self, op: Op) -> Optional[Block]:
        """The block holding ``op`` (``None``: an op that was not in the IR walked)."""
        place = self._place.get(op)
        return place[0] if place is not None else None

    def position(self, op: Op) -> Optional[int]:
        """The index of ``op`` in its block when the uses were computed (``None``: an op
        that was not in the IR walked)."""
        place = self._place.get(op)
        return place[1] if place is not None else None

    # -- keeping up with a pass's own rewrites ---------------------------------------------
    def record(self, op: Op, regions: bool = True) -> None:
        """Count the uses of ``op`` (and of the ops of its regions, unless ``regions`` is
        False): a new op, or one whose operands changed after ``forget``."""
        for v in op.operands:
            self._users.setdefault(v, []).append(op)
        if regions:
            for region in op.regions:
                for inner in region.ops:
                    self.record(inner)

    def forget(self, op: Op, regions: bool = True) -> None:
        """Stop counting the uses of ``op`` (and of the ops of its regions, unless
        ``regions`` is False): it was deleted, or its operands are about to change."""
        for v in op.operands:
            users = self._users.get(v)
            if users is not None:
                for i, user in enumerate(users):
                    if user is op:
                        del users[i]
                        break
        if regions:
            for region in op.regions:
                for inner in region.ops:
                    self.forget(inner)
