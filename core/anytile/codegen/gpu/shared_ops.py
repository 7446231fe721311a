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

Each op checks its own rules (``verify``); ``shared<...>`` buffer types and ``#shared<...>``
layouts print as IR text and parse back (importing this module registers them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...ir.core import TRAIT_SIDE_EFFECT, Op, Value
from ...ir.rules import check_mask, expect, expect_type
from ...ir.types import (PointerType, ScalarType, TileType, i32, parse_type,
                         register_layout_syntax, register_type_syntax, split_top_level)

__all__ = ["SharedBufferType", "SharedLayout", "wgmma_row", "WGMMA_B_GROUP", "SharedAllocOp", "AsyncCopyOp", "AsyncCommitOp",
           "AsyncWaitOp", "SharedLoadOp", "PAD_ELEMENTS", "BUFFER_KINDS"]

#: elements of padding per shared-memory row of a 16-bit operand: 16 bytes
PAD_ELEMENTS = 8
#: bytes between the 8 x 8 core matrices of neighbouring N-groups of a "wgmma-b" buffer
WGMMA_B_GROUP = 144
#: the element placements a buffer may have (``SharedBufferType.kind``)
BUFFER_KINDS = ("rows", "wgmma-a", "wgmma-b")


@dataclass(frozen=True)
class SharedBufferType:
    """``stages`` slots of a ``shape`` tile of ``elem`` in shared memory.

    ``kind`` says where element (r, c) of a slot lives:

    * ``"rows"``: row-major, rows of ``row`` elements (the tile's width plus padding), read
      by ``ldmatrix``;
    * ``"wgmma-a"``: the K-major canonical layout of Hopper's warpgroup MMA for an ``M x K``
      operand, without swizzling: 8 x 8 core matrices of 128 bytes, the K-chunks of one
      8-row group side by side (leading byte offset 128), row groups ``16 K`` bytes apart;
      rows are permuted so that warpgroup row ``16 w + 8 h + g`` holds the accumulator
      layout's row of warp ``w``, repetition ``h``, lane row ``g`` (``wgmma_row``);
    * ``"wgmma-b"``: the MN-major canonical layout for a ``K x N`` operand: 8 x 8 core
      matrices (8 N-elements a 16-byte row, 8 K-rows), N-groups ``WGMMA_B_GROUP`` = 144 bytes
      apart (the stride byte offset: 16 bytes of padding, so a warp's copies of one K-row's
      chunks spread over all banks), K-groups ``144 N / 8`` bytes apart.
    """

    shape: tuple[int, ...]
    elem: ScalarType
    stages: int
    row: int
    kind: str = "rows"
    warps: int = 0          # "wgmma-a": the program's warps (all along M)

    @property
    def slot_bytes(self) -> int:
        rows = 1
        for s in self.shape[:-1]:
            rows *= s
        width = self.row if self.kind == "rows" else self.shape[-1]
        if self.kind == "wgmma-b":
            return rows // 8 * (self.shape[-1] // 8) * WGMMA_B_GROUP
        return (rows * width * self.elem.nbytes + 15) // 16 * 16

    @property
    def nbytes(self) -> int:
        return self.slot_bytes * self.stages

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        where = f"row {self.row}" if self.kind == "rows" else \
            f"{self.kind}, row {self.row}, warps {self.warps}"
        return f"shared<{self.stages}x{dims}x{self.elem}, {where}>"

    __repr__ = __str__

    @classmethod
    def parse(cls, text: str) -> "SharedBufferType":
        """The type printed as ``text`` (``shared<3x64x32xf16, row 40>``); ``ValueError``
        when malformed."""
        head, *where = split_top_level(text[len("shared<"):-1])
        *sizes, elem = head.split("x")
        if len(where) == 1:        # "row R"
            kind, extras = "rows", where
        else:                      # "KIND, row R, warps W"
            kind, extras = (where[0], where[1:]) if where else ("", [])
        fields = dict(w.partition(" ")[::2] for w in extras)
        wanted = {"row"} if kind == "rows" else {"row", "warps"}
        if len(sizes) < 2 or not all(n.isdigit() for n in sizes) or kind not in BUFFER_KINDS \
                or set(fields) != wanted or not all(v.isdigit() for v in fields.values()):
            raise ValueError(f"malformed shared buffer type {text!r}: expected "
                             f"shared<STAGESxSHAPExELEM, row R> or "
                             f"shared<STAGESxSHAPExELEM, KIND, row R, warps W>")
        element = parse_type(elem)
        if not isinstance(element, ScalarType):
            raise ValueError(f"shared buffer of non-scalar elements in {text!r}")
        return cls(tuple(int(n) for n in sizes[1:]), element, int(sizes[0]), int(fields["row"]),
                   kind, int(fields.get("warps", "0")))


def wgmma_row(m: int, warps: int) -> int:
    """The shared-memory row of accumulator row ``m`` in a ``"wgmma-a"`` buffer (see
    ``SharedBufferType``): the accumulator layout puts row ``m`` in repetition ``m // (8 W)``,
    warp ``m % (8 W) // 8``, lane row ``m % 8``; warpgroup ``G`` of M-tile ``i`` (two
    repetitions) reads rows ``64 (i G_count + G) .. + 64`` in its own order."""
    groups = warps // 4
    rep, rest = divmod(m, 8 * warps)
    warp, g = divmod(rest, 8)
    tile, half = divmod(rep, 2)
    group, w = divmod(warp, 4)
    return (tile * groups + group) * 64 + 16 * w + 8 * half + g


@dataclass(frozen=True)
class SharedLayout:
    """The layout of a tile read in place from a shared buffer slot (row-major, ``row``
    elements per row): only a ``dot`` consumes it, straight from shared memory."""

    row: int

    def __str__(self) -> str:
        return f"#shared<row {self.row}>"

    @classmethod
    def parse(cls, body: str) -> "SharedLayout":
        word, _, row = body.partition(" ")
        if word != "row" or not row.isdigit():
            raise ValueError(f"malformed #shared<{body}>: expected #shared<row R>")
        return cls(int(row))


register_type_syntax("shared", SharedBufferType.parse)
register_layout_syntax("shared", SharedLayout.parse)


def _check_buffer_and_slot(buffer: Value, slot: Value) -> SharedBufferType:
    t = buffer.type
    expect(isinstance(t, SharedBufferType), f"buffer must be a shared buffer, found {t}")
    expect_type(slot.type, i32, "slot")
    return t


@dataclass(eq=False)
class SharedAllocOp(Op):
    """A shared-memory buffer of the (explicit) result type ``SharedBufferType``; its place
    in shared memory is fixed for the whole kernel."""

    NAME = "shared_alloc"
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    EXPLICIT_RESULTS = True

    def infer_types(self) -> list:
        raise TypeError("shared_alloc needs an explicit result type")

    def verify(self) -> None:
        types = [r.type for r in self.results]
        expect(len(types) == 1 and isinstance(types[0], SharedBufferType),
               f"shared_alloc gives one shared buffer, found ({', '.join(map(str, types))})")
        t = types[0]
        expect(t.stages >= 1 and len(t.shape) >= 1 and min(t.shape) >= 1,
               f"shared buffer {t} needs at least one slot of a non-empty shape")
        expect(t.kind in BUFFER_KINDS, f"unknown shared buffer kind {t.kind!r}")
        expect(t.row >= t.shape[-1], f"shared buffer {t}: rows of {t.row} elements cannot hold "
                                     f"{t.shape[-1]}")
        expect(t.kind != "wgmma-a" or t.warps >= 4 and t.warps % 4 == 0,
               f"shared buffer {t} needs the program's warps, whole warpgroups")


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

    def verify(self) -> None:
        t = _check_buffer_and_slot(self.buffer, self.slot)
        expect_type(self.ptr.type, TileType(t.shape, PointerType(t.elem)), "copied pointers")
        check_mask(self.mask, self.ptr.type)


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
    proxy_fence: bool = False   # the copies are next read by the tensor cores' async proxy

    def verify(self) -> None:
        expect(isinstance(self.pending, int) and not isinstance(self.pending, bool)
               and self.pending >= 0, f"pending must be an int >= 0, found {self.pending!r}")
        expect(isinstance(self.barrier, bool) and isinstance(self.proxy_fence, bool),
               "barrier and proxy_fence must be True or False")


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

    def verify(self) -> None:
        _check_buffer_and_slot(self.buffer, self.slot)
