"""Tensor descriptors: ``tl.make_tensor_descriptor`` and ``desc.load`` / ``desc.store``.

A descriptor describes a strided N-D array (``base``, ``shape``, ``strides``, the last stride
1) and the ``block_shape`` its loads and stores move.  ``desc.load(offsets)`` reads the block
whose first element is at ``offsets``, elements outside the array reading as the padding (zero,
or NaN with ``padding_option="nan"``); ``desc.store(offsets, value)`` writes the block's
elements that fall inside the array.  This is Triton's meaning; where Triton maps descriptors
onto Hopper's TMA unit, anytile expands them into the same masked tile loads and stores a
block pointer with every dimension bounds-checked becomes, on every device."""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from ..ir import types as irt
from ..ir.builder import Builder
from . import semantic
from .block_pointer import _int_values, block_pointer, load_block, store_block
from .objects import builtin, int32, int64, shape_list, tensor, unwrap
from .standard import check_tile_shape

__all__ = ["tensor_descriptor", "make_tensor_descriptor", "load_tensor_descriptor",
           "store_tensor_descriptor", "DescriptorParam", "leaf_names", "descriptor_from_leaves"]


class tensor_descriptor:
    """What ``tl.make_tensor_descriptor`` returns; ``base``, ``shape`` and ``strides`` are
    run-time values, ``block_shape`` and ``padding`` compile-time ones."""

    def __init__(self, base: tensor, shape: tuple, strides: tuple, block_shape: tuple[int, ...],
                 padding: str) -> None:
        self.base = base
        self.shape = shape
        self.strides = strides
        self.block_shape = block_shape
        self.padding = padding

    @property
    def dtype(self) -> Any:
        return self.base.dtype.element_ty

    def __repr__(self) -> str:
        return f"tensor_descriptor<{self.dtype!r}, block {list(self.block_shape)}>"

    # the frontend carries a descriptor through control flow as its run-time leaves (a last
    # stride known to be 1, as a kernel argument's is, stays a Python int)
    def _flatten(self) -> list:
        return [self.base, *self.shape, *(s for s in self.strides if isinstance(s, tensor))]

    def _rebuild(self, leaves: Sequence[tensor]) -> "tensor_descriptor":
        rank = len(self.block_shape)
        rest = iter(leaves[1 + rank:])
        strides = tuple(next(rest) if isinstance(s, tensor) else s for s in self.strides)
        return tensor_descriptor(leaves[0], tuple(leaves[1:1 + rank]), strides,
                                 self.block_shape, self.padding)

    def _same_layout(self, other: "tensor_descriptor") -> bool:
        return self._layout_key() == other._layout_key()

    def _layout_key(self) -> tuple:
        return (self.block_shape, self.padding,
                tuple(isinstance(s, tensor) for s in self.strides))

    def _block(self, offsets: Any, what: str, b: Builder) -> block_pointer:
        rank = len(self.block_shape)
        v = unwrap(offsets)
        items = list(v) if isinstance(v, (tuple, list)) else [v]
        if len(items) != rank:
            raise ValueError(f"{what}: {len(items)} offsets for a descriptor of rank {rank}")
        offs = _int_values(items, rank, "offsets", int32, b)
        return block_pointer(self.base, self.shape, self.strides, offs, self.block_shape,
                             tuple(range(rank - 1, -1, -1)))

    @builtin
    def load(self, offsets: Any, _builder: Builder = None) -> tensor:
        """The ``block_shape`` block at ``offsets``; outside the array, the padding."""
        bp = self._block(offsets, "desc.load", _builder)
        return load_block(bp, tuple(range(len(self.block_shape))), self.padding, False, _builder)

    @builtin
    def store(self, offsets: Any, value: Any, _builder: Builder = None) -> None:
        """Write ``value`` (the block's shape, or broadcast to it) at ``offsets``; elements
        outside the array are not written."""
        bp = self._block(offsets, "desc.store", _builder)
        store_block(bp, value, tuple(range(len(self.block_shape))), _builder)


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: Any = "zero",
                           _builder: Builder = None) -> tensor_descriptor:
    """A descriptor of the ``shape`` array with ``strides`` (in elements, the last one 1)
    starting at the scalar pointer ``base``, moving ``block_shape`` blocks."""
    b = _builder
    ptr = unwrap(base)
    if not isinstance(ptr, tensor) or ptr.shape or \
            not isinstance(irt.elem_type(ptr.type), irt.PointerType):
        raise TypeError("tl.make_tensor_descriptor: `base` must be a scalar pointer")
    blocks = shape_list(block_shape, "block_shape")
    check_tile_shape(blocks)
    rank = len(blocks)
    padding = unwrap(padding_option) or "zero"
    if padding not in ("zero", "nan"):
        raise ValueError(f"tl.make_tensor_descriptor: padding_option must be 'zero' or 'nan', "
                         f"got {padding!r}")
    row_bytes = blocks[-1] * irt.elem_type(ptr.type).pointee.nbytes
    if row_bytes < 16:
        # Triton's rule (a TMA transfer moves at least 16 bytes a row), kept on every
        # device so that a kernel written here runs under Triton too
        raise ValueError(f"tl.make_tensor_descriptor: Descriptor block shape must have at least "
                         f"16 bytes in the last dimension, got {blocks[-1]} elements of "
                         f"{irt.elem_type(ptr.type).pointee.nbytes} bytes ({row_bytes} bytes) "
                         f"in block_shape {blocks}")
    strides_t = _int_values(strides, rank, "strides", int64, b)
    last = unwrap(unwrap(strides)[-1]) if isinstance(unwrap(strides), (tuple, list)) else None
    if isinstance(last, int) and last != 1:
        raise ValueError(f"tl.make_tensor_descriptor: the last stride must be 1, got {last}")
    return tensor_descriptor(ptr, _int_values(shape, rank, "shape", int64, b), strides_t,
                             blocks, padding)


def _descriptor(desc: Any, what: str) -> tensor_descriptor:
    d = unwrap(desc)
    if not isinstance(d, tensor_descriptor):
        raise TypeError(f"{what} needs a tensor descriptor (tl.make_tensor_descriptor), "
                        f"got {d!r}")
    return d


@builtin
def load_tensor_descriptor(desc: Any, offsets: Any, _builder: Builder = None) -> tensor:
    """``desc.load(offsets)``."""
    return _descriptor(desc, "tl.load_tensor_descriptor").load(offsets, _builder=_builder)


@builtin
def store_tensor_descriptor(desc: Any, offsets: Any, value: Any,
                            _builder: Builder = None) -> None:
    """``desc.store(offsets, value)``."""
    _descriptor(desc, "tl.store_tensor_descriptor").store(offsets, value, _builder=_builder)


# -- descriptors passed as kernel arguments (at.TensorDescriptor) --------------------------------
class DescriptorParam(NamedTuple):
    """What a descriptor argument specialises; the kernel is given, in place of the
    parameter, a ``tensor_descriptor`` rebuilt from the leaves passed after its parameters."""

    pointer_type: str          # the base's IR pointer type, as text
    block_shape: tuple
    padding: str

    @property
    def rank(self) -> int:
        return len(self.block_shape)


def leaf_names(name: str, rank: int) -> list[str]:
    """The IR parameter names of a descriptor parameter's leaves, in launch order: the base,
    the shape, the strides but the last (which is 1)."""
    return ([f"{name}_at_base"] + [f"{name}_at_shape{d}" for d in range(rank)]
            + [f"{name}_at_stride{d}" for d in range(rank - 1)])


def descriptor_from_leaves(leaves: Sequence[tensor], block_shape: tuple,
                           padding: str) -> tensor_descriptor:
    """The ``tensor_descriptor`` a kernel parameter holds, from its leaves' IR values."""
    rank = len(block_shape)
    base, shape, strides = leaves[0], tuple(leaves[1:1 + rank]), tuple(leaves[1 + rank:])
    return tensor_descriptor(base, shape, strides + (1,), tuple(block_shape), padding)


# -- the experimental TMA descriptors of Triton 3.2-3.3 -------------------------------------------
#: What Triton's kernels test for (``hasattr(tl, "nv_tma_desc_type")``) before they take
#: descriptors filled on the host (``triton.tools.experimental_descriptor``); in anytile such
#: an argument arrives as a ``tensor_descriptor`` over the raw element bits.
nv_tma_desc_type = "nv_tma_desc"


def _typed(desc: Any, dtype: Any, what: str, b: Builder) -> tensor_descriptor:
    d = _descriptor(desc, what)
    from .objects import dtype as dtype_class, pointer_type
    want = unwrap(dtype)
    if not isinstance(want, dtype_class):
        raise TypeError(f"{what}: dtype must be a tl dtype, got {want!r}")
    have = irt.elem_type(d.base.type).pointee
    if have.nbytes != want.ir.nbytes:
        raise TypeError(f"{what}: the descriptor holds {have.nbytes}-byte elements, "
                        f"{want!r} has {want.ir.nbytes}")
    base = semantic.cast(d.base, pointer_type(want), b)
    return tensor_descriptor(base, d.shape, d.strides, d.block_shape, d.padding)


@builtin
def _experimental_descriptor_load(desc: Any, offsets: Any, shape: Any, dtype: Any,
                                  _builder: Builder = None) -> tensor:
    """Triton 3.2-3.3's ``tl._experimental_descriptor_load(desc, offsets, shape, dtype)``:
    the ``shape`` block at ``offsets`` of a host-filled descriptor, read as ``dtype``."""
    d = _typed(desc, dtype, "tl._experimental_descriptor_load", _builder)
    blocks = tuple(shape_list(shape, "shape"))
    if blocks != tuple(d.block_shape):
        raise ValueError(f"tl._experimental_descriptor_load: shape {list(blocks)} differs from "
                         f"the descriptor's block {list(d.block_shape)}")
    return d.load(offsets, _builder=_builder)


@builtin
def _experimental_descriptor_store(desc: Any, value: Any, offsets: Any,
                                   _builder: Builder = None) -> None:
    """Triton 3.2-3.3's ``tl._experimental_descriptor_store(desc, value, offsets)``."""
    v = semantic.to_tensor(value, _builder)
    d = _typed(desc, v.dtype, "tl._experimental_descriptor_store", _builder)
    d.store(offsets, v, _builder=_builder)
