"""Memory builtins: ``tl.load``, ``tl.store`` and the atomics.

Pointers, masks and values broadcast together; values are converted to the pointee type;
masks must be boolean."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from . import semantic
from .block_pointer import block_pointer, load_block, store_block
from .objects import builtin, dtype_of, tensor, unwrap

__all__ = ["load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg",
           "atomic_and", "atomic_or", "atomic_xor", "atomic_cas"]


# ---------------------------------------------------------------------------------------------
def _pointer(ptr: Any, what: str, b: Builder) -> tensor:
    p = unwrap(ptr)
    if not isinstance(p, tensor) or not isinstance(irt.elem_type(p.type), irt.PointerType):
        desc = repr(p.dtype) if isinstance(p, tensor) else repr(p)
        raise TypeError(f"{what} needs a pointer (or a tile of pointers), got {desc}")
    return p


def _writable(ptr: Any, what: str, b: Builder) -> tensor:
    p = _pointer(ptr, what, b)
    if irt.elem_type(p.type).const:
        raise TypeError(f"{what}: cannot write through a pointer to const memory (a parameter "
                        f"annotated tl.const, or a pointer computed from one)")
    return p


def _mask(mask: Any, shape: Sequence[int], what: str, b: Builder) -> Optional[tensor]:
    m = unwrap(mask)
    if m is None:
        return None
    m = semantic.to_tensor(m, b)
    if not (isinstance(irt.elem_type(m.type), irt.ScalarType) and irt.elem_type(m.type).is_bool):
        raise TypeError(f"the mask of {what} must be boolean (int1), got {m.dtype!r}; "
                        "compare it with something, e.g. `offs < n`")
    return semantic.broadcast_to(m, shape, b)


def _handle(x: Optional[tensor]) -> Any:
    return None if x is None else x.handle


def _value_for(ptr: tensor, value: Any, b: Builder) -> tensor:
    elem = irt.elem_type(ptr.type).pointee
    v = unwrap(value)
    if isinstance(v, tensor):
        v = semantic.cast(v, dtype_of(elem), b)
    else:
        v = semantic.constant(v, elem, b)
    return v


def _broadcast_ptr_mask(ptr: tensor, mask: Any, b: Builder) -> tuple[tensor, Any]:
    m = unwrap(mask)
    if isinstance(m, tensor) and m.shape and m.shape != ptr.shape:
        shape = semantic.broadcast_shapes(ptr.shape, m.shape)
        ptr = semantic.broadcast_to(ptr, shape, b)
    return ptr, m


@builtin
def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (),
         padding_option: Any = "", cache_modifier: Any = "", eviction_policy: Any = "",
         volatile: Any = False, _builder: Builder = None) -> tensor:
    """Read the elements ``pointer`` points to; where ``mask`` is false, ``other``.  On a
    block pointer, ``boundary_check`` names the dimensions to mask and ``padding_option``
    ("zero" or "nan") what masked elements read."""
    if isinstance(unwrap(pointer), block_pointer):
        if unwrap(mask) is not None or unwrap(other) is not None:
            raise ValueError("tl.load of a block pointer takes boundary_check and "
                             "padding_option, not mask and other")
        return load_block(unwrap(pointer), boundary_check, padding_option,
                          bool(unwrap(volatile)), _builder)
    ptr = _pointer(pointer, "tl.load", _builder)
    ptr, m = _broadcast_ptr_mask(ptr, mask, _builder)
    mask_t = _mask(m, ptr.shape, "tl.load", _builder)
    other_t = None
    if unwrap(other) is not None:
        if mask_t is None:
            raise ValueError("tl.load: `other` is given without a `mask`")
        other_t = semantic.broadcast_to(_value_for(ptr, other, _builder), ptr.shape, _builder)
    return tensor(_builder.create(ops.LoadOp, ptr.handle, _handle(mask_t),
                                  _handle(other_t), volatile=bool(unwrap(volatile))).result)


@builtin
def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (),
          cache_modifier: Any = "", eviction_policy: Any = "", _builder: Builder = None) -> None:
    """Write ``value`` (broadcast and converted to the pointee type) where ``mask`` is true
    (on a block pointer: inside the dimensions named in ``boundary_check``)."""
    if isinstance(unwrap(pointer), block_pointer):
        if unwrap(mask) is not None:
            raise ValueError("tl.store to a block pointer takes boundary_check, not mask")
        return store_block(unwrap(pointer), value, boundary_check, _builder)
    ptr = _writable(pointer, "tl.store", _builder)
    v = unwrap(value)
    if isinstance(v, tensor) and v.shape and v.shape != ptr.shape:
        # the value broadcasts to the pointers, never the other way (one address, one value),
        # and keeps its rank, as in Triton (a stray extra dimension is a mistake, not a copy)
        if ptr.shape and len(v.shape) != len(ptr.shape):
            raise ValueError(f"tl.store: cannot broadcast a value of shape {list(v.shape)} to "
                             f"pointers of shape {list(ptr.shape)}: rank mismatch")
        if semantic.broadcast_shapes(ptr.shape, v.shape) != ptr.shape:
            raise ValueError(f"tl.store: a value of shape {list(v.shape)} does not fit "
                             f"{'a scalar pointer' if not ptr.shape else 'pointers of shape '}"
                             f"{list(ptr.shape) if ptr.shape else ''}")
    ptr, m = _broadcast_ptr_mask(ptr, mask, _builder)
    val = semantic.broadcast_to(_value_for(ptr, v, _builder), ptr.shape, _builder)
    mask_t = _mask(m, ptr.shape, "tl.store", _builder)
    _builder.create(ops.StoreOp, ptr.handle, val.handle, _handle(mask_t))


_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
_SCOPES = ("gpu", "cta", "sys")


def _sem_scope(sem: Any, scope: Any) -> tuple[str, str]:
    s = unwrap(sem) or "acq_rel"
    sc = unwrap(scope) or "gpu"
    if s not in _SEMANTICS:
        raise ValueError(f"atomic `sem` must be one of {', '.join(_SEMANTICS)}, got {s!r}")
    if sc not in _SCOPES:
        raise ValueError(f"atomic `scope` must be one of {', '.join(_SCOPES)}, got {sc!r}")
    return s, sc


def _atomic_rmw(kind: str, pointer: Any, val: Any, mask: Any, sem: Any, scope: Any,
                b: Builder) -> tensor:
    what = f"tl.atomic_{kind}"
    ptr = _writable(pointer, what, b)
    elem = irt.elem_type(ptr.type).pointee
    if kind in ("and", "or", "xor") and not elem.is_int:
        raise TypeError(f"{what} needs integer memory, got {dtype_of(elem)!r}")
    v = unwrap(val)
    if isinstance(v, tensor) and v.shape and v.shape != ptr.shape:
        ptr = semantic.broadcast_to(ptr, semantic.broadcast_shapes(ptr.shape, v.shape), b)
    ptr, m = _broadcast_ptr_mask(ptr, mask, b)
    value = semantic.broadcast_to(_value_for(ptr, v, b), ptr.shape, b)
    mask_t = _mask(m, ptr.shape, what, b)
    s, sc = _sem_scope(sem, scope)
    return tensor(b.create(ops.AtomicRMWOp, kind, ptr.handle, value.handle,
                           _handle(mask_t), sem=s, scope=sc).result)


def _make_atomic(kind: str) -> Any:
    @builtin
    def atomic(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None,
               _builder: Builder = None) -> tensor:
        return _atomic_rmw(kind, pointer, val, mask, sem, scope, _builder)

    atomic.__name__ = atomic.__qualname__ = f"atomic_{kind}"
    atomic.__doc__ = (f"Atomically apply `{kind}` with ``val`` to the memory at ``pointer`` "
                      "where ``mask`` is true; returns the old contents.")
    return atomic


atomic_add = _make_atomic("add")
atomic_max = _make_atomic("max")
atomic_min = _make_atomic("min")
atomic_xchg = _make_atomic("xchg")
atomic_and = _make_atomic("and")
atomic_or = _make_atomic("or")
atomic_xor = _make_atomic("xor")


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: Any = None, scope: Any = None,
               _builder: Builder = None) -> tensor:
    """Atomically replace ``*pointer`` by ``val`` where it equals ``cmp``; returns the old value."""
    ptr = _writable(pointer, "tl.atomic_cas", _builder)
    c, v = unwrap(cmp), unwrap(val)
    shape = ptr.shape
    for t in (c, v):
        if isinstance(t, tensor):
            shape = semantic.broadcast_shapes(shape, t.shape)
    ptr = semantic.broadcast_to(ptr, shape, _builder)
    cmp_t = semantic.broadcast_to(_value_for(ptr, c, _builder), shape, _builder)
    val_t = semantic.broadcast_to(_value_for(ptr, v, _builder), shape, _builder)
    s, sc = _sem_scope(sem, scope)
    return tensor(_builder.create(ops.AtomicCASOp, ptr.handle, cmp_t.handle, val_t.handle,
                                  sem=s, scope=sc).result)
