"""Block pointers: ``tl.make_block_ptr``, ``tl.advance``, and ``tl.load``/``tl.store`` on them.

A block pointer names a ``block_shape`` window at ``offsets`` into a strided N-D array.  It is
a compile-time record around run-time values (the base address and the offsets), so it can be
carried through loops (``ptr = tl.advance(ptr, (0, BLOCK_K))``); loads and stores on it expand
into an ordinary tile of pointers, masked on the dimensions named in ``boundary_check``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from . import semantic
from .objects import builtin, dtype_of, int32, int64, shape_list, static_value, tensor, unwrap
from .standard import check_tile_shape, expand_dims

__all__ = ["block_pointer", "make_block_ptr", "advance", "load_block", "store_block"]


class block_pointer:
    """What ``tl.make_block_ptr`` returns; ``base`` and ``offsets`` are run-time values."""

    def __init__(self, base: tensor, shape: tuple, strides: tuple, offsets: tuple,
                 block_shape: tuple[int, ...], order: tuple[int, ...]) -> None:
        self.base = base
        self.shape = shape
        self.strides = strides
        self.offsets = offsets
        self.block_shape = block_shape
        self.order = order

    @property
    def dtype(self) -> Any:
        return self.base.dtype

    def __repr__(self) -> str:
        return f"block_pointer<{self.base.dtype!r}, block {list(self.block_shape)}>"

    # the frontend carries a block pointer through control flow as its run-time leaves
    def _flatten(self) -> list:
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def _rebuild(self, leaves: Sequence[tensor]) -> "block_pointer":
        rank = len(self.block_shape)
        return block_pointer(leaves[0], tuple(leaves[1:1 + rank]),
                             tuple(leaves[1 + rank:1 + 2 * rank]), tuple(leaves[1 + 2 * rank:]),
                             self.block_shape, self.order)

    def _same_layout(self, other: "block_pointer") -> bool:
        return self._layout_key() == other._layout_key()

    def _layout_key(self) -> tuple:
        return (self.block_shape, self.order)


def _int_values(values: Any, rank: Optional[int], what: str, ty: Any, b: Builder) -> tuple:
    v = unwrap(values)
    items = list(v) if isinstance(v, (tuple, list)) else [v]
    if rank is not None and len(items) != rank:
        raise ValueError(f"tl.make_block_ptr: `{what}` has {len(items)} entries for a block of "
                         f"rank {rank}")
    out = []
    for item in items:
        t = semantic.to_tensor(unwrap(item), b)
        elem = irt.elem_type(t.type)
        if t.shape or not isinstance(elem, irt.ScalarType) or not elem.is_int or elem.is_bool:
            raise TypeError(f"tl.make_block_ptr: `{what}` must hold scalar integers, got "
                            f"{'a tile' if t.shape else repr(t.dtype)}")
        out.append(semantic.cast(t, ty, b))
    return tuple(out)


@builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                   order: Any, _builder: Builder = None) -> block_pointer:
    """A pointer to the ``block_shape`` block at ``offsets`` of the ``shape`` array with
    ``strides`` (in elements) starting at ``base``; ``order`` is a layout hint."""
    b = _builder
    ptr = unwrap(base)
    if not isinstance(ptr, tensor) or ptr.shape or \
            not isinstance(irt.elem_type(ptr.type), irt.PointerType):
        raise TypeError("tl.make_block_ptr: `base` must be a scalar pointer")
    blocks = shape_list(block_shape, "block_shape")
    check_tile_shape(blocks)
    rank = len(blocks)
    order_v = tuple(int(unwrap(o)) for o in static_value(order, "order", "it is a layout"))
    if sorted(order_v) != list(range(rank)):
        raise ValueError(f"tl.make_block_ptr: `order` {list(order_v)} is not a permutation of "
                         f"the {rank} dimensions")
    return block_pointer(ptr, _int_values(shape, rank, "shape", int64, b),
                         _int_values(strides, rank, "strides", int64, b),
                         _int_values(offsets, rank, "offsets", int32, b), blocks, order_v)


@builtin
def advance(base: Any, offsets: Any, _builder: Builder = None) -> block_pointer:
    """``base`` moved by ``offsets`` (one per dimension, in elements)."""
    bp = unwrap(base)
    if not isinstance(bp, block_pointer):
        raise TypeError(f"tl.advance needs a block pointer from tl.make_block_ptr, got {bp!r}")
    deltas = _int_values(offsets, len(bp.block_shape), "offsets", int32, _builder)
    moved = tuple(semantic.add(o, d, _builder) for o, d in zip(bp.offsets, deltas))
    return block_pointer(bp.base, bp.shape, bp.strides, moved, bp.block_shape, bp.order)


def _checked_dims(bp: block_pointer, boundary_check: Any) -> list[int]:
    v = unwrap(boundary_check)
    dims = [int(unwrap(d)) for d in (v if isinstance(v, (tuple, list)) else [v])] \
        if v is not None else []
    for d in dims:
        if not 0 <= d < len(bp.block_shape):
            raise ValueError(f"boundary_check dimension {d} is out of range for a block of rank "
                             f"{len(bp.block_shape)}")
    return dims


def _pointers_and_mask(bp: block_pointer, boundary_check: Any,
                       b: Builder) -> tuple[tensor, Optional[tensor]]:
    rank = len(bp.block_shape)
    checked = _checked_dims(bp, boundary_check)
    ptr = bp.base
    mask = None
    for d, size in enumerate(bp.block_shape):
        idx = tensor(b.create(ops.ArangeOp, 0, size).result)
        idx = semantic.add(semantic.cast(idx, int64, b), semantic.cast(bp.offsets[d], int64, b), b)
        if rank > 1:    # expand_dims, as ``idx[:, None]`` writes it: its layout follows the tile's
            idx = expand_dims(idx, [i for i in range(rank) if i != d], _builder=b)
        ptr = semantic.add(ptr, semantic.mul(idx, bp.strides[d], b), b)
        if d in checked:
            inside = semantic.logical_and(semantic.greater_equal(idx, 0, b),
                                          semantic.less_than(idx, bp.shape[d], b), b)
            mask = inside if mask is None else semantic.logical_and(mask, inside, b)
    ptr = semantic.broadcast_to(ptr, bp.block_shape, b)
    if mask is not None:
        mask = semantic.broadcast_to(mask, bp.block_shape, b)
    return ptr, mask


_PADDINGS = ("", "zero", "nan")


def load_block(bp: block_pointer, boundary_check: Any, padding_option: Any, volatile: bool,
               b: Builder) -> tensor:
    """``tl.load`` of a block pointer.  A block whose ``order`` runs innermost last, read with
    zero padding, also says which box of which array it is (``LoadOp.box`` and ``array``), for
    devices that copy boxes by descriptor; elements past a dimension that is not
    bounds-checked may then read as zeros, which Triton leaves unspecified."""
    padding = unwrap(padding_option) or ""
    if padding not in _PADDINGS:
        raise ValueError(f"padding_option must be one of 'zero', 'nan' or '', got {padding!r}")
    elem = irt.elem_type(bp.base.type).pointee
    if padding == "nan" and not elem.is_float:
        raise TypeError(f"padding_option='nan' needs floating-point data, got {bp.dtype!r}")
    ptr, mask = _pointers_and_mask(bp, boundary_check, b)
    other = None
    if mask is not None:
        # no padding_option reads zeros, as Triton's lowering does (its tutorials rely on it)
        other = semantic.constant(float("nan") if padding == "nan" else 0, elem, b,
                                  bp.block_shape)
    rank = len(bp.block_shape)
    boxed = padding != "nan" and not volatile and tuple(bp.order) == tuple(range(rank - 1, -1, -1))
    extra = {"box": [unwrap(o).handle for o in bp.offsets],
             "array": [semantic.to_tensor(unwrap(v), b).handle
                       for v in (bp.base, *bp.shape, *bp.strides)]} if boxed else {}
    return tensor(b.create(ops.LoadOp, ptr.handle, None if mask is None else mask.handle,
                           None if other is None else other.handle, volatile=volatile,
                           **extra).result)


def store_block(bp: block_pointer, value: Any, boundary_check: Any, b: Builder) -> None:
    """``tl.store`` to a block pointer (``value`` has the block's shape, or broadcasts to it)."""
    elem = irt.elem_type(bp.base.type).pointee
    v = semantic.to_tensor(unwrap(value), b)
    if v.shape and semantic.broadcast_shapes(v.shape, bp.block_shape) != tuple(bp.block_shape):
        raise ValueError(f"tl.store: a value of shape {list(v.shape)} does not fit the block "
                         f"{list(bp.block_shape)}")
    v = semantic.broadcast_to(semantic.cast(v, dtype_of(elem), b), bp.block_shape, b)
    ptr, mask = _pointers_and_mask(bp, boundary_check, b)
    # every dimension bounds-checked (a descriptor's store): exactly the box's elements inside
    # the array are written, so the store also says which box it is (``StoreOp.box``)
    rank = len(bp.block_shape)
    boxed = tuple(bp.order) == tuple(range(rank - 1, -1, -1)) and \
        sorted(set(_checked_dims(bp, boundary_check))) == list(range(rank))
    extra = {"box": [unwrap(o).handle for o in bp.offsets],
             "array": [semantic.to_tensor(unwrap(v_), b).handle
                       for v_ in (bp.base, *bp.shape, *bp.strides)]} if boxed else {}
    b.create(ops.StoreOp, ptr.handle, v.handle, None if mask is None else mask.handle, **extra)
