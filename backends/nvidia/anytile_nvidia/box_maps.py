"""What the host makes for each launch of a kernel whose copies go by box: a ``BoxMap`` per
descriptor (``CUtensorMap``), from the kernel's parameters.

A planned copy (``tma.TensorCopies.plan``) names the maps it reads through.  The array is
described by kernel parameters (``array_leaves``: a block of a tensor descriptor argument, of
a block pointer over a pointer argument, or the array a pointer load's box reads); the kernel
takes one parameter per map after its own, and the launcher computes them from the launch's
values of those leaves (``metadata["box_maps"]``: ``tma.tensor_map_parameters``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from anytile.ir import ops
from anytile.ir import walk
from anytile.ir.rules import is_int, is_ptr
from anytile.ir.types import elem_type

__all__ = ["BoxMap", "array_leaves", "box_map_metadata"]


@dataclass(frozen=True)
class BoxMap:
    """A descriptor the host makes for each launch: over the array whose base, sizes and
    strides are ``array`` -- each the name of a kernel parameter, or a number -- (elements of
    the IR type ``elem``), boxes of ``box`` elements (outermost
    dimension first) written into shared memory in the ``swizzle``-byte swizzle (0: none);
    elements outside the array read as zeros.  ``interleave`` > 0: the rows of a box are
    written in another order, a target's own (``interleave`` says which to it).
    ``guarded``: the kernel checks before each copy that its box lies inside the array
    (``BoxCopyOp.box_exact``, a box found in pointers), so the host never fails a launch
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
