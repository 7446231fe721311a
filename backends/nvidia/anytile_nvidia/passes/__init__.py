"""NVIDIA's passes in the GPU pipeline, and the ``GpuDialect`` that puts them there.

``nvidia_dialect(copies)`` is what every NVIDIA target hands core's pipeline
(``GpuTarget.dialects``): the ``nvidia`` IR dialect (``dialect.py``), its lowerings, the shared
memory the copy unit's tracking takes kept free wherever a load is a box load
(``box_lowering.reserved_shared``: with the copies off too, so that ``tma=False`` builds the
same pipelines), and by name among core's passes (``anytile.codegen.gpu.passes``):

* ``box_loads`` after ``order_reductions`` (the blocks of descriptors and block pointers);
* where the copy unit copies boxes (``copies``: a ``tma.TensorCopies``), ``find_pointer_boxes``
  after ``split_loop_addresses`` and ``drop_unused_boxes`` after ``pipeline_dot_operands``,
  and ``box_lowering.BoxCopyKernel`` for each kernel;
* ``fence_waits`` just before ``pipeline_loops`` (the warpgroup MMA reads its slots through
  the async proxy; the copy unit's groups are tracked by the commits and waits).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from anytile.codegen.gpu.dialects import GpuDialect, PassPlacement
from anytile.codegen.gpu.passes import GpuPass, LayOut
from anytile.codegen.gpu.pipeline import dot_operand_loads

from ..box_lowering import LOWERINGS, BoxCopyKernel, reserved_shared
from ..dialect import NVIDIA
from .boxes import box_loads, fence_waits
from .pointer_boxes import ROWS, drop_unused_boxes, find_pointer_boxes

__all__ = ["nvidia_dialect", "box_loads", "fence_waits", "find_pointer_boxes", "drop_unused_boxes",
           "ROWS"]


def nvidia_dialect(copies: Optional[Any] = None) -> GpuDialect:
    """The ``GpuDialect`` of an NVIDIA target (module docstring); ``copies``: the target's
    copies of whole boxes, or ``None``."""
    loads = PassPlacement(GpuPass("box_loads", lambda s: box_loads(s.kernel)), after="order_reductions")
    fences = PassPlacement(GpuPass("fence_waits", lambda s: fence_waits(s.kernel),
                                   lambda s: s.pipelined), before="pipeline_loops")
    if copies is None:
        return GpuDialect(NVIDIA, (loads, fences), LOWERINGS, reserved_shared)

    def pointer_boxes_wanted(state: LayOut) -> bool:
        return state.pipelined and not state.options.debug and copies.pointer_box_tile > 0

    def pointer_boxes(state: LayOut) -> int:
        dots = state.dots
        large = lambda d: math.prod(d.result.type.shape) >= copies.pointer_box_tile  # noqa: E731
        operands = dot_operand_loads(state.kernel, lambda d: large(d) and dots.reads_shared(d))
        return find_pointer_boxes(state.kernel, operands.__contains__)

    passes = (
        loads,
        PassPlacement(GpuPass("find_pointer_boxes", pointer_boxes, pointer_boxes_wanted,
                              "pointer_boxes"), after="split_loop_addresses"),
        PassPlacement(GpuPass("drop_unused_boxes", lambda s: drop_unused_boxes(s.kernel),
                              pointer_boxes_wanted), after="pipeline_dot_operands"),
        fences)
    return GpuDialect(NVIDIA, passes, LOWERINGS, reserved_shared,
                      lambda target, debug: BoxCopyKernel(copies, debug))
