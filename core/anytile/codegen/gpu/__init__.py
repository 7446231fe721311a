"""GPU lowering shared by GPU backends (NVIDIA today, AMD next).

* ``layouts``    -- distributed layouts (``BlockedLayout``, ``SliceLayout``) and the mapping
  between tile elements and (warp, lane, register);
* ``axis_info``  -- contiguity / divisibility / constancy of integer and address tiles;
* ``assign``     -- the ``laid-out ir`` stage: a layout for every tile value;
* ``lowering``   -- laid-out IR -> LLVM IR for one thread (``lower_kernel``), with
  ``memory``, ``collective`` and ``control`` for loads/stores, cross-thread ops and loops;
* ``target``     -- ``GpuTarget``, the hook table a backend fills in (thread ids, barriers,
  shuffles, address spaces, math functions, kernel marking).
"""
from .layouts import BlockedLayout, SliceLayout, default_blocked
from .assign import LaidOutKernel, assign_layouts
from .target import GpuTarget

__all__ = ["BlockedLayout", "SliceLayout", "default_blocked", "LaidOutKernel", "assign_layouts",
           "GpuTarget"]
