"""Global memory: addptr, load, store and the atomics."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..nodes import TRAIT_MEMORY, TRAIT_SIDE_EFFECT, Op, Value
from ..kinds import AtomicKind, MemoryScope, MemorySemantics
from ..rules import check_mask, expect, expect_type, is_int, is_ptr, pointee_type
from ..types import Type, elem_type, shape_of, with_shape
from .arith import PURE_EW

__all__ = ["AddPtrOp", "LoadOp", "check_box", "StoreOp", "AtomicRMWOp", "AtomicCASOp"]


@dataclass(eq=False)
class AddPtrOp(Op):
    """Elementwise ``ptr + offset`` where ``offset`` (an integer of the same shape) counts
    elements of the pointee type."""

    NAME = "addptr"
    OPERANDS = ("ptr", "offset")
    TRAITS = PURE_EW
    ptr: Value
    offset: Value

    def infer_types(self) -> list[Type]:
        return [self.ptr.type]

    def verify(self) -> None:
        pt, ot = self.ptr.type, self.offset.type
        expect(is_ptr(pt), f"addptr base must be a pointer, found {pt}")
        expect(is_int(ot), f"addptr offset must be an integer, found {ot}")
        expect(shape_of(pt) == shape_of(ot), f"addptr shapes differ: {pt} vs {ot}")


def check_box(box: list, array: list, rank: int, elem: Type) -> None:
    """The rules of a load's (or a store's) ``box`` and ``array``: both or neither; one
    coordinate per dimension; the array's base a scalar pointer to ``elem``, then integer
    sizes and strides, one of each per dimension."""
    expect(bool(box) == bool(array), "a box and its array go together")
    if not box:
        return
    expect(len(box) == rank, f"a box of a {rank}-D tile needs {rank} coordinates, found {len(box)}")
    expect(all(is_int(v.type) and not shape_of(v.type) for v in box),
           "box coordinates must be integer scalars")
    expect(len(array) == 2 * rank + 1, f"the array of a {rank}-D box is its base, {rank} sizes "
                                       f"and {rank} strides, found {len(array)} values")
    expect(is_ptr(array[0].type) and not shape_of(array[0].type) and
           elem_type(array[0].type).pointee == elem,
           f"the array's base must be a scalar pointer to {elem}, found {array[0].type}")
    expect(all(is_int(v.type) and not shape_of(v.type) for v in array[1:]),
           "the array's sizes and strides must be integer scalars")


@dataclass(eq=False)
class LoadOp(Op):
    """Read one element per pointer.  Where ``mask`` is 0 nothing is read and the result is
    ``other`` (a value of the result type), or unspecified when ``other`` is absent.  A read
    of an address outside every allocation where the mask is 1 is an error.

    ``box`` and ``array`` (both or neither) are the frontend's record of a block read (a
    block pointer's or a tensor descriptor's): the tile is also the block whose first element
    is at coordinates ``box`` (integer scalars, one per dimension) of the array whose base
    pointer, sizes and strides (in elements) are ``array``, elements outside the array
    reading as ``other``.  ``ptr`` and ``mask`` stay the meaning; a backend may ignore these."""

    NAME = "load"
    OPERANDS = ("ptr", "mask", "other", "box", "array")
    ATTRS = ("volatile",)
    TRAITS = frozenset({TRAIT_MEMORY})
    ptr: Value
    mask: Optional[Value] = None
    other: Optional[Value] = None
    volatile: bool = False      # (a field before ``box``: older code passes it by position)
    box: list = field(default_factory=list)
    array: list = field(default_factory=list)

    @property
    def reads_block(self) -> bool:
        """Whether the frontend recorded this load as a block read (``box`` and ``array``)."""
        return bool(self.box)

    def permuted_block(self, order: Sequence[int]) -> dict:
        """``box`` and ``array`` of this load's tile permuted as ``permute`` does with
        ``order``: the same block of the same array, its dimensions (coordinates, sizes and
        strides) taken in that order; ``{}`` for a load that is no block read."""
        if not self.box:
            return {}
        rank = len(self.box)
        sizes, strides = self.array[1:1 + rank], self.array[1 + rank:]
        return {"box": [self.box[i] for i in order],
                "array": [self.array[0], *(sizes[i] for i in order), *(strides[i] for i in order)]}

    def infer_types(self) -> list[Type]:
        t = self.ptr.type
        return [with_shape(elem_type(t).pointee, shape_of(t))]

    def verify(self) -> None:
        expect(is_ptr(self.ptr.type), f"load needs pointers, found {self.ptr.type}")
        check_mask(self.mask, self.ptr.type)
        if self.other is not None:
            expect_type(self.other.type, pointee_type(self.ptr.type), "load other")
        check_box(self.box, self.array, len(shape_of(self.ptr.type)), elem_type(self.ptr.type).pointee)


@dataclass(eq=False)
class StoreOp(Op):
    """Write ``value`` through ``ptr`` where ``mask`` is 1 (everywhere when absent).  When two
    elements of one store hit one address, one of them wins.

    ``box`` and ``array`` (both or neither), as a load's: the frontend's record of a block
    write (a tensor descriptor's store) -- the tile is the block at coordinates ``box`` of the
    array ``array`` (base, sizes, strides), and exactly its elements inside the array are
    written (``mask`` says no more and no less)."""

    NAME = "store"
    OPERANDS = ("ptr", "value", "mask", "box", "array")
    TRAITS = frozenset({TRAIT_MEMORY, TRAIT_SIDE_EFFECT})
    ptr: Value
    value: Value
    mask: Optional[Value] = None
    box: list = field(default_factory=list)
    array: list = field(default_factory=list)

    def verify(self) -> None:
        expect(is_ptr(self.ptr.type), f"store needs pointers, found {self.ptr.type}")
        expect(not elem_type(self.ptr.type).const, f"store through const {self.ptr.type}")
        expect_type(self.value.type, pointee_type(self.ptr.type), "stored value")
        check_mask(self.mask, self.ptr.type)
        check_box(self.box, self.array, len(shape_of(self.ptr.type)), elem_type(self.ptr.type).pointee)


@dataclass(eq=False)
class AtomicRMWOp(Op):
    """Atomically ``*ptr = kind(*ptr, value)`` per element where ``mask`` is 1; the result is
    the old contents (unspecified where masked off).  kinds: add max min xchg and or xor;
    float add/max/min are allowed.  ``sem``: relaxed | acquire | release | acq_rel;
    ``scope``: gpu | cta | sys."""

    NAME = "atomic_rmw"
    OPERANDS = ("ptr", "value", "mask")
    ATTRS = ("kind", "sem", "scope")
    TRAITS = frozenset({TRAIT_MEMORY, TRAIT_SIDE_EFFECT})
    ENUM_ATTRS = {"kind": AtomicKind, "sem": MemorySemantics, "scope": MemoryScope}
    kind: AtomicKind
    ptr: Value
    value: Value
    mask: Optional[Value] = None
    sem: MemorySemantics = MemorySemantics.ACQ_REL
    scope: MemoryScope = MemoryScope.GPU

    def infer_types(self) -> list[Type]:
        return [self.value.type]

    def verify(self) -> None:
        expect(is_ptr(self.ptr.type), f"atomic needs pointers, found {self.ptr.type}")
        expect_type(self.value.type, pointee_type(self.ptr.type), "atomic value")
        check_mask(self.mask, self.ptr.type)


@dataclass(eq=False)
class AtomicCASOp(Op):
    """Atomically, per element: ``old = *ptr; if old == cmp: *ptr = value``; result ``old``."""

    NAME = "atomic_cas"
    OPERANDS = ("ptr", "cmp", "value")
    ATTRS = ("sem", "scope")
    TRAITS = frozenset({TRAIT_MEMORY, TRAIT_SIDE_EFFECT})
    ENUM_ATTRS = {"sem": MemorySemantics, "scope": MemoryScope}
    ptr: Value
    cmp: Value
    value: Value
    sem: MemorySemantics = MemorySemantics.ACQ_REL
    scope: MemoryScope = MemoryScope.GPU

    def infer_types(self) -> list[Type]:
        return [self.value.type]

    def verify(self) -> None:
        expect(is_ptr(self.ptr.type), f"atomic_cas needs pointers, found {self.ptr.type}")
        expect_type(self.cmp.type, pointee_type(self.ptr.type), "atomic_cas cmp")
        expect_type(self.value.type, pointee_type(self.ptr.type), "atomic_cas value")
