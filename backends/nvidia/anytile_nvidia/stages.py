"""The NVIDIA compile stages: core's GPU pipeline (``laid-out ir -> llir``, run with
``NvidiaTarget``), then NVIDIA's own ``ptx -> cubin``.

* ``ptx``: llvmlite's NVPTX target machine for the ``sm`` (``sm_90a`` when the kernel uses
  the warpgroup MMA), with libdevice linked in when the kernel calls one of its functions
  (found through ``CUDA_HOME``/``CUDA_PATH`` or common paths);
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
from anytile.codegen.gpu import GpuKernel, gpu_stages
from anytile.errors import BackendError

from .target import NvidiaTarget

__all__ = ["nvidia_stages", "find_libdevice", "find_ptxas", "ptx_version_for", "parse_ptxas_report"]

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


def _arch_for(arch: str, metadata: dict) -> str:
    """``sm_90a`` (Hopper's architecture-specific features) for kernels using wgmma."""
    return arch + "a" if metadata.get("wgmma") and not arch.endswith("a") else arch


def ptx_stage(arch: str):
    def run(kernel: GpuKernel, metadata: dict) -> str:
        if "wgmma" in kernel.features:
            metadata["wgmma"] = True     # the ptx and cubin stages target sm_90a
        llvm = _llvm()
        with _LLVM_LOCK:
            tm = _target_machine(_arch_for(arch, metadata))
            mod = llvm.parse_assembly(str(kernel))
            mod.data_layout = str(tm.target_data)
            if any(name.startswith("__nv_") for name in kernel.external_functions):
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
                for fn in mod.functions:
                    if not fn.is_declaration and fn.name != kernel.name:
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
    """``laid-out ir``, ``llir`` (core's, for ``NvidiaTarget``), ``ptx`` and, with ``ptxas``,
    ``cubin``."""
    arch = target.arch
    gpu = NvidiaTarget(arch, warpgroup_mma=bool(options.get("wgmma", True)),
                       tensor_copies=bool(options.get("tma", True)))
    stages = gpu_stages(gpu, options) + [Stage("ptx", ptx_stage(arch))]
    ptxas = find_ptxas() if use_ptxas else None
    if ptxas is not None:
        stages.append(Stage("cubin", cubin_stage(arch, ptxas)))
    return stages
