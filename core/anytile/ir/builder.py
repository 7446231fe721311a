"""``Builder``: creates ops at an insertion point, stamping each with the current location."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence, TypeVar

from .nodes import UNKNOWN_LOC, Block, Loc, Op
from .types import Type, elem_type

OpT = TypeVar("OpT", bound=Op)

__all__ = ["Builder"]


class Builder:
    """Appends ops to ``block`` (the insertion block), tagging each with ``loc``."""

    def __init__(self, block: Optional[Block] = None, loc: Loc = UNKNOWN_LOC) -> None:
        self.block = block if block is not None else Block()
        self.loc = loc
        self.strict = False

    def create(self, cls: type[OpT], *args: Any,
               result_types: Optional[Sequence[Type]] = None, **kwargs: Any) -> OpT:
        """Construct ``cls(*args, **kwargs)`` at the end of the insertion block."""
        op = cls(*args, result_types=result_types, loc=kwargs.pop("loc", self.loc), **kwargs)
        if self.strict and "strict" in getattr(cls, "ATTRS", ()) and "strict" not in kwargs and \
                op.results and getattr(elem_type(op.results[0].type), "is_float", False):
            op.strict = True        # float arithmetic only: integers have nothing to round
        self.block.ops.append(op)
        return op

    @contextmanager
    def at_end_of(self, block: Block) -> Iterator["Builder"]:
        """Temporarily insert into ``block``."""
        saved, self.block = self.block, block
        try:
            yield self
        finally:
            self.block = saved

    @contextmanager
    def strict_arithmetic(self) -> Iterator["Builder"]:
        """Temporarily create ops that have a ``strict`` attribute strict (``BinaryOp``: never
        fused; ``UnaryOp``: no denormal-flushing fast form): arithmetic whose every rounding
        counts, the math library's formulas."""
        saved, self.strict = self.strict, True
        try:
            yield self
        finally:
            self.strict = saved

    @contextmanager
    def at_loc(self, loc: Loc) -> Iterator["Builder"]:
        """Temporarily stamp new ops with ``loc``."""
        saved, self.loc = self.loc, loc
        try:
            yield self
        finally:
            self.loc = saved
