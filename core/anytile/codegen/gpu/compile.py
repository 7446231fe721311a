"""The GPU compile pipeline every GPU backend (and the host simulator) runs:
``ir`` -> ``laid-out ir`` -> ``llir``.

* ``laid-out ir`` (``lay_out``): reductions that are not commutative become ordered scans
  (``ordered_reduce.py``); with ``num_stages`` > 1, loads feeding matrix-instruction
  dots go through a multi-stage shared-memory pipeline and other loop loads are prefetched
  in registers (``pipeline.py``); for a target that copies boxes by descriptor, the boxes
  that such operands' pointers read are found first (``pointer_boxes.py``); then the axis analysis and a layout on every tile value
  (``assign.py``), each dot planned by the target's strategies (``dot.py``);
* ``llir`` (``lower_kernel``): one thread's LLVM module (``lowering.py``) with the kernel's
  facts as typed fields (``GpuKernel``): shared memory, threads, asserts, the external
  functions it calls and the features its code needs.

A backend's ``stages()`` is ``gpu_stages(target, options)`` plus its own stages, which take
the ``GpuKernel`` (its text is the LLVM IR: ``asm["llir"]``).  Both stages fill ``metadata``:
``num_warps``, ``threads_per_block``, ``shared``, ``kernel_name``, ``asserts`` and
``bounds_params`` (with debug: checked mode, ``anytile.codegen.bounds_checks``),
``box_maps`` (the descriptors the launcher makes: ``box_copies.BoxMap``),
``pipelined_dot_operands``, ``prefetched_loads``, ``pipelined_shared``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...backend import CompileOptions, Stage
from ...errors import CompilationError
from ...ir.nodes import Module
from ...ir.types import elem_type
from ...ir.verifier import verify_if_enabled
from ..bounds_checks import insert_bounds_checks
from .addresses import split_loop_addresses
from .assign import LaidOutKernel, assign_layouts
from .box_copies import box_map_metadata
from .dot import DotSelector
from .lowering import KernelLowering
from .ordered_reduce import order_reductions
from .narrow import narrow_float8_dots
from .pipeline import (dot_operand_loads, load_transposed, pipeline_dot_operands, pipeline_loops,
                       stage_invariant_operands)
from .pointer_boxes import drop_unused_boxes, find_pointer_boxes
from .shared import plan_persistent_shared
from .target import GpuTarget

__all__ = ["GpuKernel", "gpu_stages", "lay_out", "lower_kernel", "lower_to_llvm"]


@dataclass(eq=False)
class GpuKernel:
    """One kernel's LLVM module for one GPU thread, and the facts about it.

    ``asserts``: ``[message, file, line]`` of each ``device_assert`` (with debug), numbered
    from 1 in the error word the kernel then takes as a hidden last parameter (0: all held);
    ``features``: what its code needs beyond the common hooks, as the dot strategies that
    emitted it recorded (a backend reads its own names there)."""

    module: ir.Module
    name: str
    threads: int
    shared_bytes: int
    asserts: list
    features: frozenset
    #: the descriptors the host makes for each launch (``box_copies.BoxMap``), in the order
    #: of the kernel's last parameters
    box_maps: tuple = ()

    @property
    def external_functions(self) -> list[str]:
        """Names of the functions the module calls but does not define (LLVM intrinsics
        excluded): a math library to link, for instance."""
        return [f.name for f in self.module.functions
                if f.is_declaration and not f.name.startswith("llvm.")]

    def __str__(self) -> str:
        return str(self.module)


def lower_kernel(laid: LaidOutKernel, target: GpuTarget, debug: bool = False,
                 fp_fusion: bool = False) -> GpuKernel:
    """The ``GpuKernel`` of the laid-out kernel ``laid`` on ``target`` (``fp_fusion``:
    ``CompileOptions.enable_fp_fusion``)."""
    lowering = KernelLowering(laid, target, debug, fp_fusion)
    module = lowering.run()
    asserts = [[op.message, op.loc.file, op.loc.line] for op in lowering.asserts]
    return GpuKernel(module, laid.kernel.name, lowering.threads, lowering.shared_bytes, asserts,
                     frozenset(lowering.features), tuple(lowering.box_maps))


def lay_out(module: Module, target: GpuTarget, options: CompileOptions,
            metadata: dict) -> LaidOutKernel:
    """The ``laid-out ir`` stage (see the module docstring); rewrites ``module`` in place."""
    kernel = module.kernel
    warps, warp_size = options.num_warps, target.warp_size
    if warps * warp_size > target.max_threads:
        raise CompilationError(
            f"num_warps={warps} gives {warps * warp_size} threads a program ({warps} warps of "
            f"{warp_size}), more than {target.name} runs in one program ({target.max_threads}): "
            f"use num_warps <= {target.max_threads // warp_size}", kernel.loc)
    if options.debug:
        metadata["bounds_params"] = insert_bounds_checks(kernel)
        verify_if_enabled(module, after="insert_bounds_checks")
    if order_reductions(module):
        verify_if_enabled(module, after="order_reductions")
    dots = DotSelector(target, warps, kernel)
    if options.num_stages > 1:
        if load_transposed(kernel):
            verify_if_enabled(module, after="load_transposed")
        metadata["float8_dots"] = narrow_float8_dots(
            kernel, lambda d, a, b: dots.reads_narrow(d, elem_type(a.type), elem_type(b.type)))
        verify_if_enabled(module, after="narrow_float8_dots")
        metadata["split_addresses"] = split_loop_addresses(kernel)
        verify_if_enabled(module, after="split_loop_addresses")
        smallest = target.box_copies.pointer_box_tile if target.box_copies is not None else 0
        boxes = smallest > 0 and not options.debug
        if boxes:
            large = lambda d: math.prod(d.result.type.shape) >= smallest      # noqa: E731
            operands = dot_operand_loads(kernel, lambda d: large(d) and dots.reads_shared(d))
            metadata["pointer_boxes"] = find_pointer_boxes(kernel, operands.__contains__)
            verify_if_enabled(module, after="find_pointer_boxes")
        metadata["staged_dot_operands"] = stage_invariant_operands(
            kernel, dots.reads_shared, target.shared_memory_limit, dots.operand_buffers)
        verify_if_enabled(module, after="stage_invariant_operands")
        metadata["pipelined_dot_operands"] = pipeline_dot_operands(
            kernel, options.num_stages, dots.reads_shared, target.shared_memory_limit,
            dots.operand_buffers)
        verify_if_enabled(module, after="pipeline_dot_operands")
        if boxes and drop_unused_boxes(kernel):
            verify_if_enabled(module, after="drop_unused_boxes")
        metadata["prefetched_loads"] = pipeline_loops(kernel)
        verify_if_enabled(module, after="pipeline_loops")
    metadata["pipelined_shared"] = plan_persistent_shared(kernel)[1]
    laid = assign_layouts(module, warps, warp_size, dots.plan)
    verify_if_enabled(module, after="assign_layouts")
    metadata["num_warps"] = warps
    metadata["threads_per_block"] = warps * warp_size
    return laid


def lower_to_llvm(laid: LaidOutKernel, target: GpuTarget, options: CompileOptions,
                  metadata: dict) -> GpuKernel:
    """The ``llir`` stage: ``lower_kernel`` and the shared-memory check."""
    kernel = lower_kernel(laid, target, debug=options.debug, fp_fusion=options.enable_fp_fusion)
    limit = target.shared_memory_limit
    if kernel.shared_bytes > limit:
        raise CompilationError(
            f"kernel '{kernel.name}' needs {kernel.shared_bytes} bytes of shared memory, more "
            f"than {target.name} gives one program ({limit}): use smaller blocks or fewer "
            f"num_stages (the pipelined loops took {metadata.get('pipelined_shared', 0)} bytes)",
            laid.kernel.loc)
    metadata["shared"] = kernel.shared_bytes
    if kernel.asserts:
        metadata["asserts"] = kernel.asserts
    if kernel.box_maps:
        metadata["box_maps"] = box_map_metadata(list(kernel.box_maps))
    metadata["kernel_name"] = kernel.name
    return kernel


def gpu_stages(target: GpuTarget, options: CompileOptions) -> list[Stage]:
    """``laid-out ir`` and ``llir`` for ``target``; a backend appends its own stages."""
    def laid_out(module: Any, metadata: dict) -> LaidOutKernel:
        return lay_out(module, target, options, metadata)

    def llir(laid: LaidOutKernel, metadata: dict) -> GpuKernel:
        return lower_to_llvm(laid, target, options, metadata)
    return [Stage("laid-out ir", laid_out), Stage("llir", llir)]
