"""``AmdBackend``: anytile kernels on AMD GPUs (entry point ``amd``, devices ``hip:N``).

Compiling needs only llvmlite (LLVM's AMDGPU target) and, for the loadable ``hsaco``,
``ld.lld``, so ``at.compile(..., target="amd:gfx942")`` works on a machine without a GPU;
running needs the HIP runtime (ROCm), reached through hip-python.  Nothing of this backend
has run on AMD silicon yet: see ``backends/amd/README.md`` for what is verified and how.
"""
from __future__ import annotations

import os
from typing import Any

from anytile.backend import CompiledKernel, CompileOptions, DeviceInfo, Stage, Target
from anytile.errors import BackendError
from anytile.ir import ops_of_version
from anytile.gpu_host import DLPackDevice, DriverBackend

from .archs import KNOWN_ARCHS, arch_of
from .code_object import find_lld
from .driver import LoadedKernel, driver

# ``.stages`` (the GPU lowering, LLVM) is imported when first compiling: discovery and
# launches of already compiled kernels never pay for it

__all__ = ["AmdBackend"]


class AmdBackend(DriverBackend):
    """AMD GPUs through LLVM's AMDGPU target and the HIP runtime (memory, launches and foreign
    ROCm arrays: core's ``DriverBackend``; torch and CuPy on ROCm speak
    ``__cuda_array_interface__``, other producers DLPack device type ROCm)."""

    name = "amd"
    device_prefix = "hip"
    triton_backend = "hip"
    capabilities = frozenset({"fp64", "fp16", "bf16", "fp8", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert", "bounds_check"})
    op_set = 1                       # the IR ops it lowers: no print (no device printf yet)
    disk_cacheable = True   # ``load`` needs only the code object, metadata and signature
    dlpack_device_type = DLPackDevice.ROCM

    def lowered_ops(self) -> frozenset[str]:
        """The first release's ops and ``assume`` (op set 3 without ``print``)."""
        return ops_of_version(1) | {"assume"}

    # -- identity and availability --------------------------------------------------------------
    def device_description(self, props: dict[str, Any]) -> str:
        return f"{props['name']} ({props['arch']})"

    def describe(self) -> dict[str, Any]:
        facts = {"ld.lld": find_lld() or "not found (compiles stop at amdgcn; nothing loads)",
                 "targets": ", ".join(self.targets())}
        version = driver.runtime_version()
        if version:
            facts["hip_runtime"] = version
        return facts

    # -- compilation ---------------------------------------------------------------------------
    def targets(self) -> list[str]:
        archs = list(KNOWN_ARCHS)
        for info in (self.devices() if self._devices is not None else []):
            if info.props["arch"] not in archs:
                archs.append(info.props["arch"])
        return archs

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, device.props["arch"])

    def parse_options(self, **options: Any) -> CompileOptions:
        options.pop("num_ctas", None)  # one workgroup per program
        return super().parse_options(**options)

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        from .stages import amd_stages
        arch_of(target.arch)    # an unknown name fails here, before any work
        return amd_stages(target, options)

    def gpu_driver(self) -> Any:
        return driver

    def cache_facts(self, target: Target) -> str:
        """The tools behind the generated code: llvmlite's version and ``ld.lld``."""
        import llvmlite
        path = find_lld()
        try:
            stat = os.stat(path) if path else None
        except OSError:
            stat = None
        tool = f"{path} {stat.st_size} {stat.st_mtime_ns}" if stat else f"{path}"
        return f"llvmlite {llvmlite.__version__}; {tool}"

    # -- running -------------------------------------------------------------------------------
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> LoadedKernel:
        image = kernel.asm.get("hsaco")
        meta = kernel.metadata
        if image is None:
            raise BackendError(f"kernel '{kernel.name}' has no loadable code object for "
                               f"{kernel.target}: {meta.get('hsaco', 'no hsaco stage ran')}")
        return driver.load(device.index, image, meta["kernel_name"], int(meta.get("shared", 0)),
                           int(meta["threads_per_block"]), kernel.signature, meta.get("asserts"),
                           meta.get("bounds_params"))
