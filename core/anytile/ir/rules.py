"""Helpers for the rules ops check about themselves (``Op.verify``).

A rule raises ``VerifyError`` with a plain message; the verifier adds the function, the op,
its location and its text.  Types are compared *modulo layout* (``same_type``): a backend's
layout stage puts layouts on tile types, and an op's type rules hold whatever the layouts.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .nodes import Block, Value
from .types import PointerType, ScalarType, TileType, Type, elem_type, i1, shape_of, with_shape

__all__ = ["VerifyError", "expect", "same_type", "same_types", "expect_type", "fmt_types",
           "is_scalar", "is_int", "is_float", "is_ptr", "bool_like", "bit_width",
           "pointee_type", "check_mask", "check_block_args", "check_terminator",
           "check_results", "layout_of", "check_same_layouts"]


class VerifyError(Exception):
    """An op breaks one of its rules (raised by ``Op.verify``)."""


def expect(ok: bool, message: str) -> None:
    if not ok:
        raise VerifyError(message)


def same_type(a: Any, b: Any) -> bool:
    """``a == b`` ignoring the layouts of tile types."""
    if isinstance(a, TileType) and isinstance(b, TileType):
        return a.shape == b.shape and a.elem == b.elem
    return a == b


def same_types(found: Sequence[Any], expected: Sequence[Any]) -> bool:
    return len(found) == len(expected) and all(map(same_type, found, expected))


def expect_type(found: Type, expected: Type, what: str) -> None:
    expect(same_type(found, expected), f"{what}: expected {expected}, found {found}")


def fmt_types(types: Sequence[Any]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def layout_of(t: Any) -> Any:
    return t.layout if isinstance(t, TileType) else None


# -- small type predicates -------------------------------------------------------------------
def is_scalar(t: Type) -> bool:
    return isinstance(t, ScalarType)


def is_int(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_int


def is_float(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_float


def is_ptr(t: Type) -> bool:
    return isinstance(elem_type(t), PointerType)


def bool_like(t: Type) -> Type:
    """``i1`` of ``t``'s shape."""
    return with_shape(i1, shape_of(t))


def bit_width(e: Any) -> int:
    return 64 if isinstance(e, PointerType) else e.bits


def pointee_type(ptr_type: Type) -> Type:
    """What a load through ``ptr_type`` gives: its pointee, of its shape."""
    return with_shape(elem_type(ptr_type).pointee, shape_of(ptr_type))


def check_mask(mask: Optional[Value], ptr_type: Type) -> None:
    if mask is not None:
        expect_type(mask.type, bool_like(ptr_type), "mask")


# -- regions ---------------------------------------------------------------------------------
def check_block_args(block: Block, types: list, what: str) -> None:
    found = [a.type for a in block.args]
    expect(same_types(found, types), f"{what} arguments {fmt_types(found)} should be "
                                     f"{fmt_types(types)}")


def check_terminator(block: Block, name: str, types: list, what: str) -> None:
    last = block.ops[-1] if block.ops else None
    expect(last is not None and last.NAME == name,
           f"{what} must end with '{name}', found "
           f"{repr(last.NAME) if last is not None else 'an empty block'}")
    found = [v.type for v in last.values]
    expect(same_types(found, types), f"{what} {name}s {fmt_types(found)}, expected "
                                     f"{fmt_types(types)}")


def check_results(results: list[Value], types: list) -> None:
    found = [r.type for r in results]
    expect(same_types(found, types), f"result types {fmt_types(found)} should be "
                                     f"{fmt_types(types)}")


def check_same_layouts(found: Sequence[Any], expected: Sequence[Any], what: str) -> None:
    """Laid-out tiles of ``found`` have the layouts of the matching ``expected`` types."""
    ok = all(layout_of(f) is None or layout_of(e) is None or layout_of(f) == layout_of(e)
             for f, e in zip(found, expected))
    expect(ok, f"{what} {fmt_types(found)} should have the layouts of {fmt_types(expected)}")
