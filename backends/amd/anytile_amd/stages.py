"""The AMD compile stages: core's GPU pipeline (``laid-out ir -> llir``, run with
``AmdTarget``), then AMD's own ``amdgcn -> hsaco``.

* ``amdgcn``: llvmlite's AMDGPU target machine for the architecture (``gfxNNN``; on gfx11
  without LLVM's 16-bit true registers), the module optimised at O3, then the assembly text
  and the relocatable object (``AmdgcnCode``: its text is the assembly, ``asm["amdgcn"]``);
  the object's AMDGPU metadata fills ``metadata``;
* ``hsaco``: the object linked into a loadable code object by ``ld.lld -shared
  --no-undefined`` (``code_object.find_lld``), its metadata read again.  Without ``ld.lld``
  the compile stops at ``amdgcn`` (``metadata["hsaco"]`` says why) and the kernel cannot be
  loaded, as NVIDIA's stops at ``ptx`` without ``ptxas``.

``metadata`` gets, from the code object: ``sgprs``, ``vgprs``, ``agprs``, ``registers`` (the
VGPRs), ``spills`` (SGPR + VGPR spills), ``lds_bytes`` (static LDS; the dynamic LDS a launch
passes is ``shared``), ``scratch_bytes`` and ``wave_size``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from anytile.backend import CompileOptions, Stage, Target
from anytile.codegen.gpu import GpuKernel, gpu_stages
from anytile.errors import BackendError

from .archs import AmdArch, arch_of
from .code_object import CodeObjectError, find_lld, link, read_metadata
from .target import TRIPLE, AmdTarget

__all__ = ["amd_stages", "AmdgcnCode", "record_code_object", "target_machine"]

_LLVM_LOCK = threading.Lock()


@dataclass(eq=False)
class AmdgcnCode:
    """The ``amdgcn`` stage's output: the assembly (its text) and the relocatable object."""

    assembly: str
    object: bytes

    def __str__(self) -> str:
        return self.assembly


@lru_cache(maxsize=None)
def _llvm() -> Any:
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def target_machine(arch: AmdArch) -> Any:
    """llvmlite's target machine for ``arch`` at O3."""
    llvm = _llvm()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=arch.name, features=arch.features, opt=3)


def record_code_object(code: bytes, name: str, arch: AmdArch, metadata: Any) -> None:
    """Fill ``metadata`` from the AMDGPU metadata of ``code`` (an object or a code object)."""
    info = read_metadata(code)
    kernel = info.kernels.get(name)
    if kernel is None:
        raise BackendError(f"the code object for {arch.name} has no kernel '{name}' "
                           f"(it has {sorted(info.kernels)})")
    if kernel.wave_size != arch.wave_size:
        raise BackendError(f"kernel '{name}' was compiled for waves of {kernel.wave_size}, "
                           f"{arch.name} runs {arch.wave_size}")
    metadata["sgprs"] = kernel.sgprs
    metadata["vgprs"] = kernel.vgprs
    metadata["agprs"] = kernel.agprs
    metadata["registers"] = kernel.vgprs
    metadata["spills"] = kernel.sgpr_spills + kernel.vgpr_spills
    metadata["lds_bytes"] = kernel.lds_bytes
    metadata["scratch_bytes"] = kernel.scratch_bytes
    metadata["wave_size"] = kernel.wave_size


_NO_LLD = ("not linked: ld.lld was not found (install lld, e.g. `apt-get install lld-19`, or "
           "set ANYTILE_LLD)")


def amdgcn_stage(arch: AmdArch, linked_next: bool):
    def run(kernel: GpuKernel, metadata: Any) -> AmdgcnCode:
        llvm = _llvm()
        with _LLVM_LOCK:
            tm = target_machine(arch)
            mod = llvm.parse_assembly(str(kernel))
            mod.data_layout = str(tm.target_data)
            mod.verify()
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
            pb.getModulePassManager().run(mod, pb)
            # code generation rewrites the module it runs on: the text comes from a copy
            assembly = tm.emit_assembly(mod.clone())
            obj = tm.emit_object(mod)
        record_code_object(obj, kernel.name, arch, metadata)
        if not linked_next:
            metadata["hsaco"] = _NO_LLD
        return AmdgcnCode(assembly, obj)
    return run


def hsaco_stage(arch: AmdArch, lld: str):
    def run(code: AmdgcnCode, metadata: Any) -> bytes:
        try:
            linked = link(code.object, lld)
            undefined = read_metadata(linked).undefined_symbols
        except CodeObjectError as exc:
            raise BackendError(f"linking the {arch.name} code object failed: {exc}") from None
        if undefined:
            raise BackendError(f"the {arch.name} code object leaves symbols undefined: "
                               f"{', '.join(undefined)}")
        record_code_object(linked, metadata["kernel_name"], arch, metadata)
        return linked
    return run


def amd_stages(target: Target, options: CompileOptions, use_lld: bool = True) -> list[Stage]:
    """``laid-out ir``, ``llir`` (core's, for ``AmdTarget``), ``amdgcn`` and, with ``ld.lld``,
    ``hsaco``."""
    arch = arch_of(target.arch)
    lld = find_lld() if use_lld else None
    stages = gpu_stages(AmdTarget(arch), options) + [Stage("amdgcn", amdgcn_stage(arch, lld is not None))]
    if lld is not None:
        stages.append(Stage("hsaco", hsaco_stage(arch, lld)))
    return stages
