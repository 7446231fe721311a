"""The GPU dialect's shared-memory ops: multi-stage buffers filled by asynchronous copies.

These ops exist only after ``pipeline_dot_operands`` (``pipeline.py``) rewrote a loop whose
loads feed a tensor-core ``dot``; device-independent IR never holds them.  A *buffer* is
``stages`` slots in shared memory, each one ``shape`` tile of ``elem`` stored row-major with
rows padded to ``row`` elements (the padding spreads a warp's ``ldmatrix`` rows over all
banks).  The rewritten loop::

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

from dataclasses import dataclass
from typing import Optional

from ...ir.core import TRAIT_SIDE_EFFECT, Op, Value
from ...ir.types import ScalarType, TileType

__all__ = ["SharedBufferType", "SharedLayout", "SharedAllocOp", "AsyncCopyOp", "AsyncCommitOp",
           "AsyncWaitOp", "SharedLoadOp", "PAD_ELEMENTS"]

#: elements of padding per shared-memory row of a 16-bit operand: 16 bytes
PAD_ELEMENTS = 8


@dataclass(frozen=True)
class SharedBufferType:
    """``stages`` slots of a ``shape`` tile of ``elem`` in shared memory, rows of ``row``
    elements (the tile's last dimension plus padding)."""

    shape: tuple[int, ...]
    elem: ScalarType
    stages: int
    row: int

    @property
    def slot_bytes(self) -> int:
        rows = 1
        for s in self.shape[:-1]:
            rows *= s
        return (rows * self.row * self.elem.nbytes + 15) // 16 * 16

    @property
    def nbytes(self) -> int:
        return self.slot_bytes * self.stages

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        return f"shared<{self.stages}x{dims}x{self.elem}, row {self.row}>"

    __repr__ = __str__


@dataclass(frozen=True)
class SharedLayout:
    """The layout of a tile read in place from a shared buffer slot (row-major, ``row``
    elements per row): only a ``dot`` consumes it, straight from shared memory."""

    row: int

    def __str__(self) -> str:
        return f"#shared<row {self.row}>"


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
    ATTRS = ("pending", "barrier")
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    pending: int = 0
    barrier: bool = True


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
