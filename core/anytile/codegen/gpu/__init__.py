"""GPU code generation shared by every GPU backend: vendor-neutral, driven by a target's
hooks and tables (``GpuTarget``).

* ``compile``    -- the GPU compile pipeline (``gpu_stages``: ``laid-out ir`` -> ``llir``,
  whose output is a ``GpuKernel``: an LLVM module with typed facts);
* ``layouts``    -- distributed layouts (``BlockedLayout``, ``SliceLayout``) and the mapping
  between tile elements and (warp, lane, register);
* ``axis_info``  -- contiguity / divisibility / constancy of integer and address tiles;
* ``passes``     -- the ``laid-out ir`` stage's passes in order, as data (``GPU_PASSES``);
* ``dialects``   -- what a backend adds to the pipeline (``GpuDialect``): its IR dialect,
  passes placed by name, lowering-table entries, a per-kernel ``KernelExtension``;
* ``pipeline``   -- software pipelining of loop loads (shared-memory stages for dot operands,
  register prefetch for the rest), with the small shared-memory dialect of ``shared_ops``;
* ``assign``     -- the ``laid-out ir`` stage's layouts: one for every tile value;
* ``lowering``   -- laid-out IR -> LLVM IR for one thread: a small context and a table of
  ``lower_<op>`` functions (``tile_ops``, ``memory``, ``collective``, ``dot``, ``control``,
  ``shared``), with ``registers`` and ``scratch`` for where registers sit and the
  shared-memory scratch space;
* ``matrix``     -- ``MatrixInstr``: a matrix instruction as data (shape, types, lanes and
  fragment maps), and what core derives from it;
* ``dot``        -- dot strategies: matrix instructions placed from the tables, FMA loops,
  and the extension point for a target's own; ``fragments`` reads an instruction's operand
  fragments from shared memory;
* ``target``     -- ``GpuTarget``, the hooks and tables a backend fills in;
* ``simulator``  -- the lowering run on the host CPU (tests, the ``gpusim`` device).
"""
from .assign import LaidOutKernel, assign_layouts
from .compile import GpuKernel, gpu_stages, lay_out, lower_kernel, lower_to_llvm
from .dialects import GpuDialect, KernelExtension, PassPlacement
from .dot import (DotPlan, DotSelector, DotStrategy, MatrixDotPlan, acc_layout, acc_slots,
                  register_table)
from .fragments import FragmentLoader, OperandSource
from .layouts import BlockedLayout, SliceLayout, default_blocked
from .matrix import MatrixInstr, check_instr, geometry
from .passes import GPU_PASSES, GpuPass, pass_order
from .shared_ops import PaddedRows, SharedBufferLayout
from .target import GpuTarget

__all__ = ["BlockedLayout", "SliceLayout", "default_blocked", "LaidOutKernel", "assign_layouts",
           "GpuTarget", "GpuKernel", "gpu_stages", "lay_out", "lower_kernel", "lower_to_llvm",
           "MatrixInstr", "check_instr", "geometry", "DotPlan", "DotSelector", "DotStrategy",
           "FragmentLoader", "MatrixDotPlan", "OperandSource", "acc_layout", "acc_slots", "register_table",
           "PaddedRows", "SharedBufferLayout", "GpuDialect", "KernelExtension", "PassPlacement",
           "GPU_PASSES", "GpuPass", "pass_order"]
