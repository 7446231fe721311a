"""The ``nvidia`` dialect: the ops NVIDIA's passes put into the GPU pipeline's IR.

Hopper's tensor memory accelerator copies a rectangular box of an array in one instruction
(``tma.py``).  These ops refine core's so that the pipelines and the lowering, which handle the
core op, handle them too, and carry what the copy unit needs besides:

* ``nvidia.box_load`` -- a ``load`` that is also the box at coordinates ``box`` of the array
  ``array`` (base pointer, sizes, strides), perhaps read transposed (``box_order``), perhaps
  only where ``box_exact`` holds (a box found in pointers: ``passes/pointer_boxes.py``);
* ``nvidia.box_copy`` -- the pipelines' ``async_copy`` of such a load into a slot, the box
  facts kept, and ``when`` (a copy issued past the loop's end is skipped outright);
* ``nvidia.box_store`` -- a ``store`` that writes the box of its array (a descriptor's store);
* ``nvidia.async_commit``, ``nvidia.async_wait`` -- the pipelines' commit and wait where the
  kernel copies boxes (the groups then complete on the copy unit's barriers too), the wait
  also fencing the slots for the warpgroup MMA, which reads them through the async proxy
  (``proxy_fence``).

Each op checks its own rules (``verify``); they print and parse as every op does once the
dialect is loaded (``NVIDIA.load()``: the NVIDIA target's pipeline loads it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from anytile.codegen.gpu.pipeline import PipelinedLoad
from anytile.codegen.gpu.shared_ops import AsyncCommitOp, AsyncCopyOp, AsyncWaitOp
from anytile.ir import ops
from anytile.ir.dialects import Dialect
from anytile.ir.ops.memory import check_box as check_core_box
from anytile.ir import Value
from anytile.ir.rules import expect, expect_type
from anytile.ir.types import Type, elem_type, i1, shape_of

__all__ = ["NVIDIA", "BoxLoadOp", "BoxCopyOp", "BoxStoreOp", "BoxCommitOp", "FencedWaitOp",
           "check_box", "refine"]

NVIDIA = Dialect("nvidia", "NVIDIA's copies of whole boxes (TMA) and the async-proxy fence")


def check_box(box: list, array: list, rank: int, elem: Type, box_exact: list = ()) -> None:
    """The rules of a ``box`` and its ``array``: both or neither; one integer scalar
    coordinate per dimension; the array its base (a scalar pointer to ``elem``), then integer
    sizes and strides, one of each per dimension; ``box_exact`` at most one ``i1`` scalar,
    and only with a box."""
    expect(len(box_exact) <= 1, "a box has at most one 'box_exact'")
    expect(not box_exact or bool(box), "'box_exact' needs a box")
    for v in box_exact:
        expect_type(v.type, i1, "box_exact")
    check_core_box(box, array, rank, elem)


@NVIDIA.op
@dataclass(eq=False)
class BoxLoadOp(ops.LoadOp, PipelinedLoad):
    """A ``load`` (same operands, same meaning) that is also the box whose first element is at
    coordinates ``box`` (integer scalars, one per dimension) of the array whose base pointer,
    sizes and strides (in elements) are ``array``, elements outside the array reading as
    ``other`` -- or, with ``box_order``, that box with its dimensions reordered as ``permute``
    does (the tile's dimension ``i`` is the box's ``box_order[i]``).  ``box_exact`` (none, or
    one ``i1`` scalar): where false, the box need not be the tile, which is then read by
    ``ptr`` and ``mask`` (a box found in pointers)."""

    NAME = "nvidia.box_load"
    OPERANDS = ("ptr", "mask", "other", "box", "array", "box_exact")
    ATTRS = ("volatile", "box_order")
    box: list = field(default_factory=list)
    array: list = field(default_factory=list)
    box_order: tuple = ()
    box_exact: list = field(default_factory=list)

    def verify(self) -> None:
        super().verify()
        expect(bool(self.box), "a box load needs a box")
        check_box(self.box, self.array, len(shape_of(self.ptr.type)),
                  elem_type(self.ptr.type).pointee, self.box_exact)
        expect(not self.box_order or sorted(self.box_order) == list(range(len(self.box))),
               f"box_order {self.box_order} is not a permutation of the box's dimensions")

    # -- how the pipelines rewrite it (``PipelinedLoad``) ----------------------------------------
    def reads_transposed(self) -> bool:
        return tuple(self.box_order) == (1, 0)

    def permuted(self, order: tuple, ptr: Value, mask: Optional[Value], other: Optional[Value],
                 result_type: Type) -> ops.LoadOp:
        inner = self.box_order or tuple(range(len(order)))
        return BoxLoadOp(ptr, mask, other, self.volatile, box=list(self.box), array=list(self.array),
                         box_order=tuple(inner[i] for i in order), box_exact=list(self.box_exact),
                         result_types=[result_type], loc=self.loc)

    def slot_copy(self, buffer: Value, slot: Value, ptr: Value, mask: Optional[Value],
                  value: Callable[[Value], Value], when: Optional[Value]) -> AsyncCopyOp:
        # (the operands mapped in the order the copy lists them: the clones they need come out
        # in that order)
        box = [value(c) for c in self.box]
        return BoxCopyOp(buffer, slot, ptr, mask, box=box, when=[when] if when is not None else [],
                         array=[value(v) for v in self.array], box_order=self.box_order,
                         box_exact=[value(v) for v in self.box_exact], loc=self.loc)


@NVIDIA.op
@dataclass(eq=False)
class BoxCopyOp(AsyncCopyOp):
    """An ``async_copy`` (same operands, same meaning) of the tile that is the box ``box`` of
    the array ``array`` (``box_order``, ``box_exact``: as a ``nvidia.box_load``'s), which the
    copy unit may copy whole.  ``when`` (none, or one ``i1`` scalar): where false, nothing need
    be copied at all (the mask is then 0 everywhere, and the slot, which is never read, may
    keep what it held)."""

    NAME = "nvidia.box_copy"
    OPERANDS = ("buffer", "slot", "ptr", "mask", "box", "when", "array", "box_exact")
    ATTRS = ("box_order",)
    box: list = field(default_factory=list)
    when: list = field(default_factory=list)
    array: list = field(default_factory=list)
    box_order: tuple = ()
    box_exact: list = field(default_factory=list)

    def verify(self) -> None:
        super().verify()
        t = self.buffer.type
        expect(bool(self.box), "a box copy needs a box")
        expect(len(self.when) <= 1, "a copy has at most one 'when'")
        for v in self.when:
            expect_type(v.type, i1, "when")
        check_box(self.box, self.array, len(t.shape), t.elem, self.box_exact)


@NVIDIA.op
@dataclass(eq=False)
class BoxStoreOp(ops.StoreOp):
    """A ``store`` (same operands, same meaning) of the tile that is the box ``box`` of the
    array ``array`` (base, sizes, strides), exactly its elements inside the array written
    (``mask`` says no more and no less): the copy unit may write it whole."""

    NAME = "nvidia.box_store"
    OPERANDS = ("ptr", "value", "mask", "box", "array")
    box: list = field(default_factory=list)
    array: list = field(default_factory=list)

    def verify(self) -> None:
        super().verify()
        expect(bool(self.box), "a box store needs a box")
        check_box(self.box, self.array, len(shape_of(self.ptr.type)),
                  elem_type(self.ptr.type).pointee)


@NVIDIA.op
@dataclass(eq=False)
class BoxCommitOp(AsyncCommitOp):
    """An ``async_commit`` in a kernel that copies boxes: the group also closes on the copy
    unit's barrier ring when the kernel's copies go by box (``tma.TensorCopies.commit``)."""

    NAME = "nvidia.async_commit"


@NVIDIA.op
@dataclass(eq=False)
class FencedWaitOp(AsyncWaitOp):
    """An ``async_wait`` that also waits for the groups' box copies (where the kernel's copies
    go by box) and, with ``proxy_fence``, then fences this thread's shared-memory writes
    for the async proxy (``fence.proxy.async``): the slots are next read in place by the
    warpgroup MMA (``SharedBufferLayout.async_readers``)."""

    NAME = "nvidia.async_wait"
    ATTRS = ("pending", "barrier", "proxy_fence")
    proxy_fence: bool = False

    def verify(self) -> None:
        super().verify()
        expect(isinstance(self.proxy_fence, bool), "proxy_fence must be True or False")


def refine(op: Any, cls: type, **fields: Any) -> Any:
    """Make ``op`` a ``cls`` (a refinement of its class, or the core class it refines) with
    ``fields`` set, in place: it stays the same object with the same results, so its uses and
    whatever an earlier pass remembered about it (the loads' directions) still hold.  Fields
    ``cls`` adds and ``fields`` leaves out take their defaults; fields it lacks go."""
    keep = {f.name for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(type(op)):
        if f.name not in keep:
            delattr(op, f.name)
    for f in dataclasses.fields(cls):
        if f.name not in fields and not hasattr(op, f.name):
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            setattr(op, f.name, default)
    op.__class__ = cls
    for name, value in fields.items():
        setattr(op, name, value)
    return op
