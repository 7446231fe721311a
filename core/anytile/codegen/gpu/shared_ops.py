"""The GPU dialect's shared-memory ops: multi-stage buffers filled by asynchronous copies.

These ops exist only after ``pipeline_dot_operands`` (``pipeline.py``) rewrote a loop whose
loads feed a matrix-instruction ``dot``; device-independent IR never holds them.  A *buffer*
is ``stages`` slots in shared memory, each one ``shape`` tile of ``elem`` placed as its
``SharedBufferLayout`` says (``PaddedRows``: row-major, rows padded so a warp's fragment reads
spread over the banks).  The rewritten loop::

    buf = shared_alloc {shape, elem, stages}
    async_copy(buf, slot s, ptr(iteration s), mask & s < trip)   for s < stages - 1
    async_commit                                                   (one group per stage)
    for ...:
        async_wait {pending = stages - 2, barrier}   # iteration k's slot has landed
        async_copy(buf, (k + stages - 1) % stages, ptr(k + stages - 1), ...)
        async_commit
        a = shared_load(buf, k % stages)             # read by the dot straight from the slot
        acc = dot(a, ..., acc)
    async_wait {pending = 0, barrier}

Masked-off elements of a copy are written as zeros and read nothing from global memory.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Optional

from llvmlite import ir

from ...ir.core import TRAIT_SIDE_EFFECT, Op, Value
from ...ir.types import ScalarType, TileType

__all__ = ["SharedBufferType", "SharedBufferLayout", "PaddedRows", "SharedLayout", "SharedAllocOp",
           "AsyncCopyOp", "AsyncCommitOp", "AsyncWaitOp", "SharedLoadOp", "PAD_ELEMENTS"]

#: elements of padding per shared-memory row of a 16-bit operand: 16 bytes
PAD_ELEMENTS = 8


class SharedBufferLayout(abc.ABC):
    """Where element (r, c) of a slot of a shared buffer lives.  Core has ``PaddedRows``; a
    backend adds the layouts its own dot strategies read (frozen dataclasses: layouts are
    compared and hashed)."""

    #: the slots are read in place by a unit outside the threads (a matrix unit reading by
    #: address): waiting for their copies adds the target's ``fence_async_shared``
    async_readers = False

    @abc.abstractmethod
    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        """Bytes of one slot holding a ``shape`` tile of ``elem`` (a multiple of 16)."""

    @abc.abstractmethod
    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        """The address of element ``coord`` (i32 LLVM values) of the slot starting at
        ``slot``, built with the llvmlite builder ``b`` (``storage``: the element's LLVM
        type)."""


@dataclass(frozen=True)
class PaddedRows(SharedBufferLayout):
    """Row-major, rows of ``row`` elements (the tile's width plus padding)."""

    row: int

    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        rows = 1
        for s in shape[:-1]:
            rows *= s
        return (rows * self.row * elem.nbytes + 15) // 16 * 16

    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        index = coord[-1]
        if len(coord) == 2:
            index = b.add(b.mul(coord[0], ir.Constant(ir.IntType(32), self.row)), coord[1])
        return b.gep(slot, [index], source_etype=storage)

    def __str__(self) -> str:
        return f"row {self.row}"


@dataclass(frozen=True)
class SharedBufferType:
    """``stages`` slots of a ``shape`` tile of ``elem`` in shared memory, each laid out as
    ``layout`` says (``PaddedRows`` or a layout a backend's dot strategy reads)."""

    shape: tuple[int, ...]
    elem: ScalarType
    stages: int
    layout: SharedBufferLayout

    @property
    def slot_bytes(self) -> int:
        return self.layout.slot_bytes(self.shape, self.elem)

    @property
    def nbytes(self) -> int:
        return self.slot_bytes * self.stages

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        return f"shared<{self.stages}x{dims}x{self.elem}, {self.layout}>"

    __repr__ = __str__


@dataclass(frozen=True)
class SharedLayout:
    """The layout of a tile read in place from a shared buffer slot laid out as ``buffer``:
    only a ``dot`` consumes it, straight from shared memory."""

    buffer: SharedBufferLayout

    def __str__(self) -> str:
        return f"#shared<{self.buffer}>"


@dataclass(eq=False)
class SharedAllocOp(Op):
    """A shared-memory buffer of the (explicit) result type ``SharedBufferType``; its place
    in shared memory is fixed for the whole kernel."""

    NAME = "shared_alloc"
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})

    def infer_types(self) -> list:
        raise TypeError("shared_alloc needs an explicit result type")


@dataclass(eq=False)
class AsyncCopyOp(Op):
    """Start copying the tile at ``ptr`` into slot ``slot`` (an ``i32`` scalar) of
    ``buffer``; where ``mask`` is 0 the slot gets zeros and global memory is not read."""

    NAME = "async_copy"
    OPERANDS = ("buffer", "slot", "ptr", "mask")
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    buffer: Value
    slot: Value
    ptr: Value
    mask: Optional[Value] = None


@dataclass(eq=False)
class AsyncCommitOp(Op):
    """Close the group of copies this thread started since the last commit."""

    NAME = "async_commit"
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})


@dataclass(eq=False)
class AsyncWaitOp(Op):
    """Wait until at most ``pending`` of this thread's committed groups are still in flight;
    with ``barrier``, then wait for every thread of the program (so every thread's copies
    have landed, and every thread is done with what it read before)."""

    NAME = "async_wait"
    ATTRS = ("pending", "barrier", "proxy_fence")
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    pending: int = 0
    barrier: bool = True
    proxy_fence: bool = False   # the slots are next read by ``async_readers`` (layouts)


@dataclass(eq=False)
class SharedLoadOp(Op):
    """The tile held in slot ``slot`` of ``buffer`` (result: a ``TileType`` of the buffer's
    shape and element)."""

    NAME = "shared_load"
    OPERANDS = ("buffer", "slot")
    buffer: Value
    slot: Value

    def infer_types(self) -> list:
        t = self.buffer.type
        return [TileType(t.shape, t.elem)]
