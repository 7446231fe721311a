"""The NVIDIA compile stages: ``laid-out ir -> llir -> ptx -> cubin``.

* ``laid-out ir``: the shared layout assignment (``anytile.codegen.gpu.assign``);
* ``llir``: the shared GPU lowering with ``NvidiaTarget``'s hooks (LLVM IR text);
* ``ptx``: llvmlite's NVPTX target machine for the ``sm``, with libdevice linked in when a
  math function is called (found through ``CUDA_HOME``/``CUDA_PATH`` or common paths);
* ``cubin``: ``ptxas`` (when present), whose ``-v`` report fills ``metadata`` (registers,
  spills, shared memory).  Without ``ptxas`` the driver compiles the PTX when loading.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from typing import Any, Optional

from anytile.backend import CompileOptions, Stage, Target
from anytile.codegen.gpu import assign_layouts
from anytile.codegen.gpu.lowering import lower_kernel
from anytile.codegen.gpu.mma import mma_warps, wgmma_fits
from anytile.codegen.gpu.pipeline import pipeline_dot_operands, pipeline_loops
from anytile.codegen.gpu.shared import plan_persistent_shared
from anytile.errors import BackendError, CompilationError

from .target import NvidiaTarget

__all__ = ["nvidia_stages", "find_libdevice", "find_ptxas", "ptx_version_for"]

_LLVM_LOCK = threading.Lock()
_CUDA_ROOTS = ("/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda", "/usr/local/cuda-13.0",
               "/usr/local/cuda-12.8", "/usr/local/cuda-12")


def _cuda_roots() -> list[str]:
    env = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    return [r for r in env if r] + list(_CUDA_ROOTS)


@lru_cache(maxsize=None)
def find_libdevice() -> Optional[str]:
    """The path of ``libdevice.10.bc``, or ``None``."""
    explicit = os.environ.get("ANYTILE_LIBDEVICE")
    if explicit and os.path.exists(explicit):
        return explicit
    for root in _cuda_roots():
        path = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
        if os.path.exists(path):
            return path
    return None


@lru_cache(maxsize=None)
def find_ptxas() -> Optional[str]:
    """The ``ptxas`` executable, or ``None``."""
    explicit = os.environ.get("ANYTILE_PTXAS")
    if explicit and os.path.exists(explicit):
        return explicit
    found = shutil.which("ptxas")
    if found:
        return found
    for root in _cuda_roots():
        path = os.path.join(root, "bin", "ptxas")
        if os.path.exists(path):
            return path
    return None


def ptx_version_for(arch: str) -> str:
    """The PTX ISA feature for ``sm_XY``: 8.0 (CUDA 12.0) covers sm_50..sm_90a."""
    number = int(re.sub(r"\D", "", arch) or 0)
    return "+ptx80" if number <= 90 else "+ptx87"


@lru_cache(maxsize=None)
def _llvm() -> Any:
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def _target_machine(arch: str) -> Any:
    llvm = _llvm()
    target = llvm.Target.from_triple(NvidiaTarget.triple)
    return target.create_target_machine(cpu=arch, features=ptx_version_for(arch), opt=3)


#: dynamic shared memory one program may use, per architecture (CUDA programming guide)
_SHARED_LIMITS = {80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024}


def shared_memory_limit(arch: str) -> int:
    """The most shared memory (bytes) a program of ``sm_XY`` may use; 48 KiB if unknown."""
    number = int(re.sub(r"\D", "", arch) or 0)
    return _SHARED_LIMITS.get(number, 227 * 1024 if number > 90 else 48 * 1024)


def _mma_dot(num_warps: int):
    def ok(dot: Any) -> bool:
        return NvidiaTarget.has_mma and mma_warps(dot, num_warps, NvidiaTarget.warp_size) is not None
    return ok


def _wgmma_dot(arch: str, options: CompileOptions):
    """Hopper's warpgroup MMA for dots that fit it, when the ``wgmma=True`` option asks."""
    if not (options.get("wgmma", False) and NvidiaTarget(arch).has_wgmma):
        return None
    num_warps = options.num_warps

    def ok(dot: Any) -> int:
        return num_warps if wgmma_fits(dot, num_warps) else 0
    return ok


def laid_out_stage(options: CompileOptions, arch: str):
    def run(module: Any, metadata: dict) -> Any:
        if options.num_stages > 1:
            metadata["pipelined_dot_operands"] = pipeline_dot_operands(
                module.kernel, options.num_stages, _mma_dot(options.num_warps),
                shared_memory_limit(arch), _wgmma_dot(arch, options))
            metadata["prefetched_loads"] = pipeline_loops(module.kernel)
        metadata["pipelined_shared"] = plan_persistent_shared(module.kernel)[1]
        laid = assign_layouts(module, options.num_warps, NvidiaTarget.warp_size,
                              use_mma=NvidiaTarget.has_mma)
        metadata["num_warps"] = options.num_warps
        metadata["threads_per_block"] = options.num_warps * NvidiaTarget.warp_size
        return laid
    return run


def llir_stage(options: CompileOptions, arch: str):
    def run(laid: Any, metadata: dict) -> str:
        module, shared, checks = lower_kernel(laid, NvidiaTarget(arch), debug=options.debug)
        if "wgmma.mma_async" in str(module):
            metadata["wgmma"] = True     # the ptx and cubin stages target sm_90a
        limit = shared_memory_limit(arch)
        if shared > limit:
            raise CompilationError(
                f"kernel '{laid.kernel.name}' needs {shared} bytes of shared memory, more than "
                f"{arch} gives one program ({limit}): use smaller blocks or fewer num_stages "
                f"(the pipelined loops took {metadata.get('pipelined_shared', 0)} bytes)",
                laid.kernel.loc)
        metadata["shared"] = shared
        if checks:
            metadata["asserts"] = checks
        metadata["kernel_name"] = laid.kernel.name
        return str(module)
    return run


def _arch_for(arch: str, metadata: dict) -> str:
    """``sm_90a`` (Hopper's architecture-specific features) for kernels using wgmma."""
    return arch + "a" if metadata.get("wgmma") and not arch.endswith("a") else arch


def ptx_stage(arch: str):
    def run(llir: str, metadata: dict) -> str:
        llvm = _llvm()
        with _LLVM_LOCK:
            tm = _target_machine(_arch_for(arch, metadata))
            mod = llvm.parse_assembly(llir)
            mod.data_layout = str(tm.target_data)
            if "__nv_" in llir:
                path = find_libdevice()
                if path is None:
                    raise BackendError("this kernel calls math functions, and libdevice.10.bc was "
                                       "not found: set CUDA_HOME (or ANYTILE_LIBDEVICE) to a CUDA "
                                       "toolkit")
                with open(path, "rb") as f:
                    lib = llvm.parse_bitcode(f.read())
                lib.triple = mod.triple
                lib.data_layout = mod.data_layout
                mod.link_in(lib)
                kernel = metadata.get("kernel_name")
                for fn in mod.functions:
                    if not fn.is_declaration and fn.name != kernel:
                        fn.linkage = "internal"
                # drop the hundreds of libdevice functions this kernel does not call before
                # the (much slower) optimisation pipeline sees them
                dce = llvm.create_new_module_pass_manager()
                dce.add_global_dead_code_eliminate_pass()
                dce.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options()))
            mod.verify()
            pto = llvm.create_pipeline_tuning_options(speed_level=3)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
            return tm.emit_assembly(mod)
    return run


_PTXAS_LINE = re.compile(r"Used (\d+) registers")


def cubin_stage(arch: str, ptxas: str):
    def run(ptx: str, metadata: dict) -> bytes:
        with tempfile.TemporaryDirectory(prefix="anytile-ptxas-") as tmp:
            src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
            with open(src, "w") as f:
                f.write(ptx)
            proc = subprocess.run([ptxas, "-v", "-O3", "--gpu-name", _arch_for(arch, metadata), src,
                                   "-o", out],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise BackendError(f"ptxas rejected the generated PTX for {arch}:\n{proc.stderr.strip()}")
            parse_ptxas_report(proc.stderr + proc.stdout, metadata)
            with open(out, "rb") as f:
                return f.read()
    return run


def parse_ptxas_report(text: str, metadata: dict) -> None:
    """Registers, spills and static shared memory from ``ptxas -v`` into ``metadata``."""
    regs = _PTXAS_LINE.search(text)
    if regs:
        metadata["registers"] = int(regs.group(1))
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if spills:
        metadata["spills"] = int(spills.group(1)) + int(spills.group(2))
    smem = re.search(r"(\d+) bytes smem", text)
    if smem:
        metadata["static_shared"] = int(smem.group(1))
    stack = re.search(r"(\d+) bytes stack frame", text)
    if stack:
        metadata["stack_frame"] = int(stack.group(1))


def nvidia_stages(target: Target, options: CompileOptions, use_ptxas: bool = True) -> list[Stage]:
    arch = target.arch
    stages = [Stage("laid-out ir", laid_out_stage(options, arch)), Stage("llir", llir_stage(options, arch)),
              Stage("ptx", ptx_stage(arch))]
    ptxas = find_ptxas() if use_ptxas else None
    if ptxas is not None:
        stages.append(Stage("cubin", cubin_stage(arch, ptxas)))
    return stages
