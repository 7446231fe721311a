"""Where a kernel's pointers come from: the pointer parameters each one may be derived from.

Two uses: the launcher refuses a read-only array (a NumPy view of ``bytes``, which host
memory would not protect) for every parameter the kernel may write through
(``written_pointer_params``), and the fusion plan fuses a load into a store only when their
pointers come from different parameters (``pointer_origins``).
"""
from __future__ import annotations

from anytile.ir import AtomicCASOp, AtomicRMWOp, Function, Op, PointerType, StoreOp, Value, \
    elem_type

__all__ = ["written_pointer_params", "pointer_origins", "param_indices"]

# ops whose pointer result is one of their pointer operands, moved or offset
_PASS_THROUGH = frozenset({"addptr", "splat", "broadcast", "expand_dims", "reshape", "permute",
                           "hint", "select", "cast", "bitcast"})


def written_pointer_params(fn: Function) -> list[int]:
    """Indices of ``fn``'s pointer parameters that a store or atomic may write through
    (all of them when a written pointer's origin cannot be traced to parameters)."""
    pointer_params = [i for i, a in enumerate(fn.args) if isinstance(a.type, PointerType)]
    index_of = param_indices(fn)
    written: set[int] = set()
    for op in fn.walk():
        if isinstance(op, (StoreOp, AtomicRMWOp, AtomicCASOp)):
            origins = pointer_origins(op.ptr, index_of)
            if origins is None:
                return pointer_params
            written |= origins
    return sorted(written)


def param_indices(fn: Function) -> dict[int, int]:
    """``id(parameter value) -> its index``, what ``pointer_origins`` looks parameters up in."""
    return {id(a): i for i, a in enumerate(fn.args)}


def pointer_origins(value: Value, index_of: dict[int, int]) -> set[int] | None:
    """The indices of the parameters ``value``'s pointers come from, or None when that is
    not known (pointers loaded from memory, made from integers, or carried through control
    flow)."""
    found: set[int] = set()
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in index_of:
            found.add(index_of[id(v)])
            continue
        owner = v.owner
        if not isinstance(owner, Op) or owner.NAME not in _PASS_THROUGH:
            return None
        sources = [o for o in owner.operands if isinstance(elem_type(o.type), PointerType)]
        if not sources:                      # an integer cast to a pointer
            return None
        stack.extend(sources)
    return found
