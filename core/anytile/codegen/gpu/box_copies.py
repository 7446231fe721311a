"""Copies of whole boxes by descriptor: the extension point of a target whose copy unit moves a
pipelined tile in a few instructions, reading a descriptor of the array the host made before
the launch (a tensor copy unit).

A pipelined ``async_copy`` that says which box of which array it copies (``AsyncCopyOp.box``
and ``array``: the load read a block of a tensor descriptor or a block pointer, or its
pointers read a box, ``pointer_boxes.py``) may go this
way when the target's ``GpuTarget.box_copies`` plans it (``BoxCopies.plan``): the array is
described by kernel parameters (``array_leaves``), the tile's buffer layout is one the copy
unit writes, the array's rows are aligned as it needs.  Each planned copy names a ``BoxMap``:
what the host encodes into a descriptor for each launch from those parameters.  The kernel takes one parameter per map after its own
(``BoxCopies.parameter_type``), and the launcher computes them (``metadata["box_maps"]``).

The copies complete on their own, not per thread, so the pipeline's groups are tracked by
the target (``commit``, ``wait``) beside its per-thread asynchronous copies; ``async_wait``
keeps its meaning: at most ``pending`` committed groups are still in flight.  Copies that
were not planned keep the per-thread path, in the same groups.

A ``store`` that says which box it writes (``StoreOp.box``: a descriptor's store) may go the
same way (``plan_store``, ``store``): the target writes the tile from registers into the
scratch space and its copy unit writes the box to global memory from there.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from llvmlite import ir

from ...ir import ops
from ...ir.nodes import walk
from ...ir.rules import is_int, is_ptr
from ...ir.types import elem_type
from .shared_ops import AsyncCopyOp

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["BoxMap", "BoxCopies", "box_map_metadata", "array_leaves"]


@dataclass(frozen=True)
class BoxMap:
    """A descriptor the host makes for each launch: over the array whose base, sizes and
    strides are ``array`` -- each the name of a kernel parameter, or a number -- (elements of
    the IR type ``elem``), boxes of ``box`` elements (outermost
    dimension first) written into shared memory in the ``swizzle``-byte swizzle (0: none);
    elements outside the array read as zeros.  ``interleave`` > 0: the rows of a box are
    written in another order, a target's own (``interleave`` says which to it).
    ``guarded``: the kernel checks before each copy that its box lies inside the array
    (``AsyncCopyOp.box_exact``, a box found in pointers), so the host never fails a launch
    over the map: one it cannot make is replaced by one that no copy the checks pass
    reads."""

    array: tuple
    elem: str
    box: tuple[int, ...]
    swizzle: int
    interleave: int = 0
    guarded: bool = False

    @property
    def name(self) -> str:
        """What error messages call the array: its descriptor argument, or its base."""
        base = str(self.array[0])
        return f"descriptor argument '{base[:-len('_at_base')]}'" if base.endswith("_at_base") \
            else f"the array at '{base}'"

    def as_metadata(self) -> list:
        return [list(self.array), self.elem, list(self.box), self.swizzle, self.interleave] + \
            ([True] if self.guarded else [])

    @staticmethod
    def from_metadata(entry: Any) -> "BoxMap":
        array, elem, box, swizzle, interleave, *guarded = entry
        return BoxMap(tuple(array), str(elem), tuple(int(n) for n in box), int(swizzle),
                      int(interleave), bool(guarded and guarded[0]))


def array_leaves(values: list, kernel: Any) -> Optional[tuple]:
    """The kernel parameters (names) or numbers that the IR ``values`` of a box's array are,
    seen through integer widenings, pointers recast to elements of the same size (Triton
    3.2's byte-typed descriptors) and loop-carried values every iteration passes on
    unchanged; ``None`` when one is anything else (the host could not make a descriptor)."""
    parents = {id(r): op for op in walk(kernel.body) for r in op.regions}
    params = {id(a) for a in kernel.args}
    out = []
    for v in values:
        while True:
            owner = v.owner
            if id(v) in params:
                out.append(v.name)
                break
            if isinstance(owner, ops.ConstantOp) and isinstance(owner.value, int) and \
                    not isinstance(owner.value, bool):
                out.append(owner.value)
                break
            if isinstance(owner, ops.CastOp) and is_int(owner.src.type) and is_int(v.type) and \
                    elem_type(owner.src.type).bits <= elem_type(v.type).bits:
                v = owner.src
                continue
            if isinstance(owner, ops.BitcastOp) and is_ptr(owner.src.type) and is_ptr(v.type) and \
                    elem_type(owner.src.type).pointee.nbytes == elem_type(v.type).pointee.nbytes:
                v = owner.src       # the same address read as other elements of one size
                continue
            loop = parents.get(id(owner))
            if isinstance(loop, ops.ForOp) and v in loop.body.args[1:] and \
                    loop.body.terminator.values[loop.body.args.index(v) - 1] is v:
                v = loop.inits[loop.body.args.index(v) - 1]
                continue
            return None
    return tuple(out)


def box_map_metadata(maps: list) -> list:
    return [m.as_metadata() for m in maps]


class BoxCopies(abc.ABC):
    """A target's copies of boxes by descriptor (see the module docstring)."""

    #: bytes of persistent shared memory the completion tracking takes (at ``ctx.box_state``)
    shared_bytes: int = 0
    #: the fewest elements (M x N) a dot's result must have for its operands read through
    #: plain pointers to be copied as the boxes they read (``pointer_boxes.py``); 0: never.
    #: Each copy then runs run-time checks, with the per-thread copy beside it, which pay
    #: only where each step's work is large enough
    pointer_box_tile: int = 0

    @abc.abstractmethod
    def plan(self, op: AsyncCopyOp, kernel: Any) -> tuple[BoxMap, ...]:
        """The maps ``op`` (a copy with a ``box``) would copy through, or ``()`` (the copy
        then takes the per-thread path).  ``kernel``: the IR function (its parameters'
        ``divisibility`` facts say how the array's base and rows are aligned)."""

    @abc.abstractmethod
    def parameter_type(self) -> ir.Type:
        """The LLVM type of a map's kernel parameter."""

    def declare(self, fn: ir.Function, index: int) -> None:
        """Mark parameter ``index`` of the kernel ``fn`` as a map's."""

    @abc.abstractmethod
    def start(self, ctx: "KernelLowering") -> None:
        """At the kernel's start, before any copy (every thread runs it)."""

    @abc.abstractmethod
    def copy(self, ctx: "KernelLowering", op: AsyncCopyOp, maps: list, slot: ir.Value) -> None:
        """Start ``op``'s copy into the slot at ``slot`` through the maps ``plan`` gave it
        (``maps``: ``(BoxMap, its kernel parameter)`` each), unless its ``when`` is false."""

    @abc.abstractmethod
    def commit(self, ctx: "KernelLowering") -> None:
        """Close the current group (every ``async_commit`` of a kernel with maps)."""

    @abc.abstractmethod
    def wait(self, ctx: "KernelLowering", pending: int) -> None:
        """Wait until at most ``pending`` committed groups are in flight."""

    def plan_store(self, op: ops.StoreOp, kernel: Any) -> tuple[BoxMap, ...]:
        """The maps the store ``op`` (a store with a ``box``) would write through, or ``()``
        (the store then takes the per-thread path)."""
        return ()

    def store(self, ctx: "KernelLowering", op: ops.StoreOp, maps: list, value: Any) -> bool:
        """Write ``value`` (``op``'s tile in registers, a ``Regs``) through the maps
        ``plan_store`` gave it (the elements outside the array are not written), or return
        ``False`` and write nothing (the store then takes the per-thread path)."""
        raise NotImplementedError(f"{type(self).__name__} plans no stores")
