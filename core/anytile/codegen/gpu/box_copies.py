"""Copies of whole boxes by descriptor: the extension point of a target whose copy unit moves a
pipelined tile in a few instructions, reading a descriptor of the array the host made before
the launch (a tensor copy unit).

A pipelined ``async_copy`` that says which box of which descriptor parameter it copies
(``AsyncCopyOp.box``: the load read a block of an ``at.TensorDescriptor`` argument) may go
this way when the target's ``GpuTarget.box_copies`` plans it (``BoxCopies.plan``): the tile's
buffer layout is one the copy unit writes, the array's rows are aligned as it needs.  Each
planned copy names a ``BoxMap``: what the host encodes into a descriptor for each launch from
the argument's base, shape and strides.  The kernel takes one parameter per map after its own
(``BoxCopies.parameter_type``), and the launcher computes them (``metadata["box_maps"]``).

The copies complete on their own, not per thread, so the pipeline's groups are tracked by
the target (``commit``, ``wait``) beside its per-thread asynchronous copies; ``async_wait``
keeps its meaning: at most ``pending`` committed groups are still in flight.  Copies that
were not planned keep the per-thread path, in the same groups.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from .shared_ops import AsyncCopyOp

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["BoxMap", "BoxCopies", "box_map_metadata"]


@dataclass(frozen=True)
class BoxMap:
    """A descriptor the host makes for each launch: over the array of descriptor parameter
    ``descriptor`` (elements of the IR type ``elem``), boxes of ``box`` elements (outermost
    dimension first) written into shared memory in the ``swizzle``-byte swizzle (0: none);
    elements outside the array read as zeros.  ``interleave`` > 0: the rows of a box are
    written in another order, a target's own (``interleave`` says which to it)."""

    descriptor: str
    elem: str
    box: tuple[int, ...]
    swizzle: int
    interleave: int = 0

    def as_metadata(self) -> list:
        return [self.descriptor, self.elem, list(self.box), self.swizzle, self.interleave]

    @staticmethod
    def from_metadata(entry: Any) -> "BoxMap":
        descriptor, elem, box, swizzle, interleave = entry
        return BoxMap(str(descriptor), str(elem), tuple(int(n) for n in box), int(swizzle),
                      int(interleave))


def box_map_metadata(maps: list) -> list:
    return [m.as_metadata() for m in maps]


class BoxCopies(abc.ABC):
    """A target's copies of boxes by descriptor (see the module docstring)."""

    #: bytes of persistent shared memory the completion tracking takes (at ``ctx.box_state``)
    shared_bytes: int = 0

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
