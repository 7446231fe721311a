"""Values made of several run-time values (tuples, ``tl.make_block_ptr`` block pointers) as
loop-carried variables and ``if`` results: they travel through the IR as their leaves.

A language object takes part by defining ``_flatten() -> list`` (its run-time leaves: tensors
or numbers) and ``_rebuild(leaves) -> object`` (a copy holding new leaves)."""
from __future__ import annotations

from typing import Any, Iterator, Optional

from ..language.objects import tensor, unwrap

_NUMBERS = (bool, int, float)


def flatten(value: Any) -> Optional[list]:
    """The run-time leaves of ``value``, or None when it is not made of run-time values."""
    v = unwrap(value)
    if isinstance(v, tensor) or isinstance(v, _NUMBERS):
        return [v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        out: list = []
        for item in v:
            leaves = flatten(item)
            if leaves is None:
                return None
            out.extend(leaves)
        return out
    if hasattr(v, "_flatten") and hasattr(v, "_rebuild"):
        return list(v._flatten())
    return None


def is_aggregate(value: Any) -> bool:
    """A tuple or block pointer made only of run-time values and numbers."""
    v = unwrap(value)
    if isinstance(v, tensor) or isinstance(v, _NUMBERS):
        return False
    return flatten(v) is not None


def rebuild(template: Any, leaves: Iterator[tensor]) -> Any:
    """A value shaped like ``template`` whose leaves come, in order, from ``leaves``."""
    v = unwrap(template)
    if isinstance(v, tensor) or isinstance(v, _NUMBERS):
        return next(leaves)
    if isinstance(v, tuple):
        return tuple(rebuild(item, leaves) for item in v)
    count = len(v._flatten())
    return v._rebuild([next(leaves) for _ in range(count)])


def same_structure(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` have the same kind of container around the same leaf count."""
    ua, ub = unwrap(a), unwrap(b)
    if isinstance(ua, tuple) and isinstance(ub, tuple):
        return len(ua) == len(ub) and all(same_structure(x, y) for x, y in zip(ua, ub))
    if hasattr(ua, "_flatten") or hasattr(ub, "_flatten"):
        return type(ua) is type(ub) and ua._same_layout(ub)
    leaf_a = isinstance(ua, (tensor,) + _NUMBERS)
    leaf_b = isinstance(ub, (tensor,) + _NUMBERS)
    return leaf_a and leaf_b


def tensor_leaves(value: Any) -> list[tensor]:
    """The run-time tensors inside ``value`` (numbers stay compile-time when passed to calls)."""
    return [x for x in flatten(value) or [] if isinstance(x, tensor)]


def rebuild_tensors(template: Any, tensors: Iterator[tensor]) -> Any:
    """``template`` with its tensor leaves replaced, in order, from ``tensors``."""
    it = iter(tensors)
    return rebuild(template, (next(it) if isinstance(leaf, tensor) else leaf
                              for leaf in flatten(template)))


def structure_key(value: Any) -> Any:
    """A hashable description of ``value`` up to the identity of its tensors: a call made with
    another value of the same key reuses the same specialisation."""
    v = unwrap(value)
    if isinstance(v, tensor):
        return ("tensor", str(v.type))
    if isinstance(v, _NUMBERS):
        return (type(v).__name__, v)
    if isinstance(v, tuple):
        return ("tuple",) + tuple(structure_key(x) for x in v)
    return (type(v).__name__, v._layout_key()) + tuple(structure_key(x) for x in v._flatten())
