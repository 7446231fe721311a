"""The GPU compile pipeline every GPU backend (and the host simulator) runs:
``ir`` -> ``laid-out ir`` -> ``llir``.

* ``laid-out ir`` (``lay_out``): the passes of ``passes.GPU_PASSES``, with the target's
  dialects' passes placed among them: reductions that are not commutative become ordered
  scans (``ordered_reduce.py``); with ``num_stages`` > 1, loads feeding matrix-instruction
  dots go through a multi-stage shared-memory pipeline and other loop loads are prefetched in
  registers (``pipeline.py``); then the axis analysis and a layout on every tile value
  (``assign.py``), each dot planned by the target's strategies (``dot.py``);
* ``llir`` (``lower_kernel``): one thread's LLVM module (``lowering.py``) with the kernel's
  facts as typed fields (``GpuKernel``): shared memory, threads, asserts, the external
  functions it calls and the features its code needs.

A backend's ``stages()`` is ``gpu_stages(target, options)`` plus its own stages, which take
the ``GpuKernel`` (its text is the LLVM IR: ``asm["llir"]``).  Both stages fill ``metadata``:
``num_warps``, ``threads_per_block``, ``shared``, ``kernel_name``, ``asserts`` and
``bounds_params`` (with debug: checked mode, ``anytile.codegen.bounds_checks``),
``pipelined_dot_operands``, ``prefetched_loads``, ``pipelined_shared``, and what the
dialects' passes and kernel extensions add (``GpuKernel.metadata``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from ...backend import CompileOptions, Stage
from ...errors import CompilationError
from ...ir.nodes import Module
from .assign import LaidOutKernel
from .lowering import KernelLowering
from .passes import LayOut, pass_order, run_passes
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
    #: facts for the compiled kernel's ``metadata`` from the dialects' kernel extensions
    metadata: dict = field(default_factory=dict)

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
    facts: dict = {}
    for ext in lowering.extensions.values():
        facts.update(ext.metadata())
    return GpuKernel(module, laid.kernel.name, lowering.threads, lowering.shared_bytes, asserts,
                     frozenset(lowering.features), facts)


def lay_out(module: Module, target: GpuTarget, options: CompileOptions,
            metadata: dict) -> LaidOutKernel:
    """The ``laid-out ir`` stage: ``passes.pass_order(target)`` run on ``module``, which is
    rewritten in place (the target's dialects loaded first)."""
    kernel = module.kernel
    warps, warp_size = options.num_warps, target.warp_size
    if warps * warp_size > target.max_threads:
        raise CompilationError(
            f"num_warps={warps} gives {warps * warp_size} threads a program ({warps} warps of "
            f"{warp_size}), more than {target.name} runs in one program ({target.max_threads}): "
            f"use num_warps <= {target.max_threads // warp_size}", kernel.loc)
    for dialect in target.dialects:
        dialect.ir.load()
    state = LayOut(module, target, options, metadata)
    run_passes(state, pass_order(target))
    metadata["num_warps"] = warps
    metadata["threads_per_block"] = warps * warp_size
    return state.laid


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
    for key, value in kernel.metadata.items():
        metadata[key] = value
    metadata["kernel_name"] = kernel.name
    return kernel


def gpu_stages(target: GpuTarget, options: CompileOptions) -> list[Stage]:
    """``laid-out ir`` and ``llir`` for ``target``; a backend appends its own stages."""
    def laid_out(module: Any, metadata: dict) -> LaidOutKernel:
        return lay_out(module, target, options, metadata)

    def llir(laid: LaidOutKernel, metadata: dict) -> GpuKernel:
        return lower_to_llvm(laid, target, options, metadata)
    return [Stage("laid-out ir", laid_out), Stage("llir", llir)]
