"""Where a kernel's pointers come from: the pointer parameters each one may be derived from
(shared by backends).

Three uses: the launcher refuses a read-only array (a NumPy view of ``bytes``, which host
memory would not protect) for every parameter the kernel may write through
(``written_pointer_params``), the fusion plan fuses a load into a store only when their
pointers come from different parameters (``pointer_origins``), and checked mode tests each
access against the spans of the arguments its pointer comes from (``pointer_origins`` with
``carried_sources``, which follows pointers carried through loops and ``if``s).
"""
from __future__ import annotations

from typing import Optional

from anytile.ir import AtomicCASOp, AtomicRMWOp, ForOp, Function, IfOp, Op, PointerType, \
    StoreOp, Value, WhileOp, elem_type

__all__ = ["written_pointer_params", "pointer_origins", "param_indices", "carried_sources"]

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


def carried_sources(fn: Function) -> dict[int, list[Value]]:
    """``id(value) -> the values it may take`` for what control flow carries: the carried
    arguments of ``for``/``while`` regions and the results of ``for``/``if``/``while``."""
    sources: dict[int, list[Value]] = {}

    def add(targets: list[Value], *lists: list[Value]) -> None:
        for i, t in enumerate(targets):
            sources.setdefault(id(t), []).extend(vals[i] for vals in lists if i < len(vals))

    def ends(block) -> list[Value]:
        term = block.terminator
        return list(term.values) if term is not None else []

    for op in fn.walk():
        if isinstance(op, ForOp):
            add(op.body.args[1:], op.inits, ends(op.body))
            add(op.results, op.inits, ends(op.body))
        elif isinstance(op, IfOp):
            add(op.results, ends(op.then_body), ends(op.else_body))
        elif isinstance(op, WhileOp):
            add(op.before.args, op.inits, ends(op.after))
            add(op.after.args, ends(op.before))
            add(op.results, ends(op.before))
    return sources


def pointer_origins(value: Value, index_of: dict[int, int],
                    carried: Optional[dict[int, list[Value]]] = None) -> set[int] | None:
    """The indices of the parameters ``value``'s pointers come from, or None when that is
    not known (pointers loaded from memory or made from integers; carried through control
    flow unless ``carried`` (``carried_sources``) says what the carried values are)."""
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
        if carried is not None and id(v) in carried:
            stack.extend(carried[id(v)])
            continue
        owner = v.owner
        if not isinstance(owner, Op) or owner.NAME not in _PASS_THROUGH:
            return None
        sources = [o for o in owner.operands if isinstance(elem_type(o.type), PointerType)]
        if not sources:                      # an integer cast to a pointer
            return None
        stack.extend(sources)
    return found
