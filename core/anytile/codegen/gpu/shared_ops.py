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

Each op checks its own rules (``verify``); ``shared<...>`` buffer types and ``#shared<...>``
layouts print as IR text and parse back (importing this module registers them; a backend's
own buffer layouts register their text with ``register_buffer_layout``).
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from llvmlite import ir

from ...ir.nodes import TRAIT_SIDE_EFFECT, Op, Value
from ...ir.rules import check_mask, expect, expect_type
from ...ir.types import (PointerType, ScalarType, TileType, i32, parse_type,
                         register_layout_syntax, register_type_syntax, split_top_level)

__all__ = ["SharedBufferType", "SharedBufferLayout", "PaddedRows", "SharedLayout", "SharedAllocOp",
           "AsyncCopyOp", "AsyncCommitOp", "AsyncWaitOp", "SharedLoadOp", "PAD_ELEMENTS",
           "PaddedColumns",
           "register_buffer_layout", "parse_buffer_layout", "slot_element"]

#: elements of padding per shared-memory row of a 16-bit operand: 16 bytes
PAD_ELEMENTS = 8


def slot_element(elem: ScalarType) -> bool:
    """Whether pipeline slots hold tiles of ``elem``: 16-bit elements, and the 8-bit ones a
    matrix unit may read there (float8, int8)."""
    return elem.nbytes == 2 or elem.is_float8 or elem.name == "i8"


class SharedBufferLayout(abc.ABC):
    """Where element (r, c) of a slot of a shared buffer lives.  Core has ``PaddedRows``; a
    backend adds the layouts its own dot strategies read (frozen dataclasses: layouts are
    compared and hashed)."""

    #: the slots are read in place by a unit outside the threads (a matrix unit reading by
    #: address), which may need the threads' writes fenced for it (the backend's passes see to
    #: that: ``GpuTarget.fence_async_shared``)
    async_readers = False
    #: bytes a slot's start is aligned to (a swizzled layout's pattern repeats every so many
    #: bytes of the shared-memory address, so its slots start on that period)
    alignment = 128
    #: iterations a dot may still be reading a slot after the loop body that issued it moved
    #: on (a matrix unit's reads kept in flight): a pipeline gives its buffers this many
    #: extra slots, so a copy never overwrites one still being read.  A layout that sets it
    #: makes it a dataclass field, which ``settled`` sets to 0
    reads_in_flight = 0

    @abc.abstractmethod
    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        """Bytes of one slot holding a ``shape`` tile of ``elem`` (a multiple of 16)."""

    @abc.abstractmethod
    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        """The address of element ``coord`` (i32 LLVM values) of the slot starting at
        ``slot``, built with the llvmlite builder ``b`` (``storage``: the element's LLVM
        type)."""

    def problem(self, shape: tuple[int, ...], elem: ScalarType) -> Optional[str]:
        """Why a slot of a ``shape`` tile of ``elem`` cannot be laid out so, or ``None``."""
        return None

    def contiguous_dim(self, shape: tuple[int, ...]) -> Optional[int]:
        """The dimension along which neighbouring elements are neighbours in the slot (what
        a vector copy into it may run along), or ``None``."""
        return len(shape) - 1

    def along_columns(self, shape: tuple[int, ...]) -> "SharedBufferLayout":
        """This layout for a ``shape`` tile read from global memory along its first
        dimension (a transposed read): one whose slots keep those runs contiguous, so copies
        stay 16-byte ones, or ``self`` (the copies then go element by element)."""
        return self

    def transposed(self, shape: tuple[int, ...]) -> Optional["SharedBufferLayout"]:
        """The layout of the same bytes read as the transposed tile (a 2-D ``shape`` tile
        seen as ``shape[::-1]``: element (c, r) where this layout keeps (r, c)), or ``None``
        when there is none: what ``tl.trans`` of a slot a dot reads in place is."""
        return None

    def settled(self) -> "SharedBufferLayout":
        """This layout with no reads in flight: its dot waits for its own reads (what a
        pipeline asks for when the extra slots do not fit)."""
        return dataclasses.replace(self, reads_in_flight=0) if self.reads_in_flight else self


#: the first word of a buffer layout's text -> its parser (``register_buffer_layout``)
_BUFFER_LAYOUTS: dict[str, Any] = {}


def register_buffer_layout(word: str, parse: Any) -> None:
    """Make the buffer layouts whose text starts with ``word`` (``row 40``, or a backend's own)
    parse back: ``parse(text)`` returns the layout or raises ``ValueError``."""
    _BUFFER_LAYOUTS[word] = parse


def parse_buffer_layout(text: str) -> SharedBufferLayout:
    """The buffer layout printed as ``text``; ``ValueError`` when no registered layout reads
    it."""
    word = text.strip().split(" ", 1)[0]
    parse = _BUFFER_LAYOUTS.get(word)
    if parse is None:
        raise ValueError(f"unknown shared buffer layout {text!r} (known: "
                         f"{', '.join(sorted(_BUFFER_LAYOUTS))})")
    return parse(text.strip())


def _one_number(text: str, word: str, name: str) -> int:
    """The number of a buffer layout's text ``'word number'`` (``name``: what the error
    calls it); ``ValueError`` when the text is not that."""
    first, _, number = text.partition(" ")
    if first != word or not number.isdigit():
        raise ValueError(f"malformed buffer layout {text!r}: expected '{word} {name}'")
    return int(number)


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

    def problem(self, shape: tuple[int, ...], elem: ScalarType) -> Optional[str]:
        if self.row < shape[-1]:
            return f"rows of {self.row} elements cannot hold {shape[-1]}"
        return None

    def along_columns(self, shape: tuple[int, ...]) -> "SharedBufferLayout":
        return PaddedColumns(shape[0] + PAD_ELEMENTS) if len(shape) == 2 else self

    def transposed(self, shape: tuple[int, ...]) -> Optional["SharedBufferLayout"]:
        return PaddedColumns(self.row) if len(shape) == 2 else None

    def __str__(self) -> str:
        return f"row {self.row}"

    @classmethod
    def parse(cls, text: str) -> "PaddedRows":
        return cls(_one_number(text, "row", "R"))


register_buffer_layout("row", PaddedRows.parse)


@dataclass(frozen=True)
class PaddedColumns(SharedBufferLayout):
    """Column-major (2-D tiles), columns of ``col`` elements (the tile's height plus
    padding): for tiles read from global memory along their first dimension (attention's K,
    read as D x BN), so copies into a slot are 16-byte runs."""

    col: int

    def slot_bytes(self, shape: tuple[int, ...], elem: ScalarType) -> int:
        return (shape[-1] * self.col * elem.nbytes + 15) // 16 * 16

    def emit_address(self, b: Any, slot: Any, coord: tuple, shape: tuple[int, ...],
                     storage: Any) -> Any:
        index = b.add(b.mul(coord[1], ir.Constant(ir.IntType(32), self.col)), coord[0])
        return b.gep(slot, [index], source_etype=storage)

    def problem(self, shape: tuple[int, ...], elem: ScalarType) -> Optional[str]:
        if len(shape) != 2:
            return f"column-major slots hold 2-D tiles, not {len(shape)}-D ones"
        if self.col < shape[0]:
            return f"columns of {self.col} elements cannot hold {shape[0]}"
        return None

    def contiguous_dim(self, shape: tuple[int, ...]) -> Optional[int]:
        return 0

    def transposed(self, shape: tuple[int, ...]) -> Optional["SharedBufferLayout"]:
        return PaddedRows(self.col)

    def __str__(self) -> str:
        return f"col {self.col}"

    @classmethod
    def parse(cls, text: str) -> "PaddedColumns":
        return cls(_one_number(text, "col", "C"))


register_buffer_layout("col", PaddedColumns.parse)


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

    @property
    def alignment(self) -> int:
        return self.layout.alignment

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        return f"shared<{self.stages}x{dims}x{self.elem}, {self.layout}>"

    __repr__ = __str__

    @classmethod
    def parse(cls, text: str) -> "SharedBufferType":
        """The type printed as ``text`` (``shared<3x64x32xf16, row 40>``); ``ValueError``
        when malformed."""
        parts = split_top_level(text[len("shared<"):-1])
        *sizes, elem = parts[0].split("x")
        if len(parts) != 2 or len(sizes) < 2 or not all(n.isdigit() for n in sizes):
            raise ValueError(f"malformed shared buffer type {text!r}: expected "
                             f"shared<STAGESxSHAPExELEM, LAYOUT>")
        element = parse_type(elem)
        if not isinstance(element, ScalarType):
            raise ValueError(f"shared buffer of non-scalar elements in {text!r}")
        return cls(tuple(int(n) for n in sizes[1:]), element, int(sizes[0]),
                   parse_buffer_layout(parts[1]))


@dataclass(frozen=True)
class SharedLayout:
    """The layout of a tile read in place from a shared buffer slot laid out as ``buffer``:
    only a ``dot`` consumes it, straight from shared memory."""

    buffer: SharedBufferLayout

    def __str__(self) -> str:
        return f"#shared<{self.buffer}>"

    @classmethod
    def parse(cls, body: str) -> "SharedLayout":
        return cls(parse_buffer_layout(body))


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
        expect(isinstance(t.layout, SharedBufferLayout),
               f"shared buffer {t}: {t.layout!r} is not a shared buffer layout")
        problem = t.layout.problem(t.shape, t.elem)
        expect(problem is None, f"shared buffer {t}: {problem}")
        expect(t.slot_bytes % t.alignment == 0,
               f"shared buffer {t}: slots of {t.slot_bytes} bytes break the layout's "
               f"{t.alignment}-byte alignment")


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
    ATTRS = ("pending", "barrier")
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    pending: int = 0
    barrier: bool = True

    def verify(self) -> None:
        expect(isinstance(self.pending, int) and not isinstance(self.pending, bool)
               and self.pending >= 0, f"pending must be an int >= 0, found {self.pending!r}")
        expect(isinstance(self.barrier, bool), "barrier must be True or False")


@dataclass(eq=False)
class SharedLoadOp(Op):
    """The tile held in slot ``slot`` of ``buffer`` (result: a ``TileType`` of the buffer's
    shape and element); with ``transposed``, that 2-D tile transposed, read in place from the
    same bytes (``tl.trans`` of a slot: its ``view_layout`` says where each element is)."""

    NAME = "shared_load"
    OPERANDS = ("buffer", "slot")
    ATTRS = ("transposed",)
    buffer: Value
    slot: Value
    transposed: bool = False

    @property
    def view_layout(self) -> SharedBufferLayout:
        """Where the result's elements are in a slot: the buffer's layout, or its transposed
        one."""
        t = self.buffer.type
        if not self.transposed:
            return t.layout
        layout = t.layout.transposed(t.shape)
        assert layout is not None, "verify() admits only buffers with a transposed layout"
        return layout

    def infer_types(self) -> list:
        t = self.buffer.type
        return [TileType(tuple(reversed(t.shape)) if self.transposed else t.shape, t.elem)]

    def verify(self) -> None:
        t = _check_buffer_and_slot(self.buffer, self.slot)
        expect(isinstance(self.transposed, bool), f"transposed must be True or False, found {self.transposed!r}")
        if self.transposed:
            expect(len(t.shape) == 2 and t.layout.transposed(t.shape) is not None,
                   f"shared buffer {t}: its slots cannot be read transposed in place")
