"""``CpuBackend``: anytile kernels as SIMD host code (LLVM via llvmlite), run on all cores.

Stages: ``laid-out ir`` (tiles annotated with ``CpuVectorLayout``), ``llir`` (optimised LLVM
IR text), ``asm`` (host assembly text; the object code rides along for ``load``).
Memory is host memory: buffers are NumPy byte arrays, NumPy arrays are used in place.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompileOptions, CompiledKernel,
                             DeviceInfo, ImportedArray, KernelArg, Stage, Target, host_array_view,
                             numpy_view_of)
from anytile.errors import BackendError
from anytile.ir import Module

from . import llvm_host
from .launch import (ClaimingEntryPoint, EntryPoint, LoadedKernel, cpu_count,
                     register_read_only)
from .layout import annotate_layouts
from anytile.codegen.pointers import written_pointer_params

__all__ = ["CpuBackend", "HostAssembly", "OptimizedLLVM"]

ALIGNMENT = 256


class OptimizedLLVM(str):
    """The ``llir`` stage's text; ``module_ref`` saves the next stage a re-parse."""

    module_ref: Any = None
    asserts: list = []


class HostAssembly(str):
    """The ``asm`` stage's text; ``object_code`` is what ``load`` links."""

    object_code: bytes = b""
    asserts: list = []


class CpuBackend(Backend):
    name = "cpu"
    device_prefix = "cpu"
    host_memory = True
    capabilities = frozenset({"fp64", "fp16", "bf16", "fp8", "int64_atomics", "float_atomics",
                              "dot_int8", "device_assert", "device_print", "bounds_check"})
    op_set = 2                       # the IR ops it lowers: print too (anytile.ir.OP_SETS)

    # -- identity --------------------------------------------------------------------------------
    def availability(self) -> Availability:
        try:
            llvm_host.host_target_machine()
        except Exception as exc:  # noqa: BLE001 -- reported, never raised
            return Availability(False, f"LLVM cannot target this host: {exc}")
        return Availability(True)

    @functools.cached_property
    def _device(self) -> DeviceInfo:
        info = llvm_host.host_info()
        cores = cpu_count()
        return DeviceInfo("cpu:0", 0, f"{info.cpu_name}, {cores} cores, {info.vector_bits}-bit SIMD",
                          (("cores", cores), ("cpu_name", info.cpu_name),
                           ("vector_bits", info.vector_bits)))

    def devices(self) -> list[DeviceInfo]:
        return [self._device]

    def describe(self) -> dict[str, Any]:
        info = llvm_host.host_info()
        return {"cpu": info.cpu_name, "features": info.feature_summary,
                "vector_bits": info.vector_bits, "cores": cpu_count(), "triple": info.triple}

    def targets(self) -> list[str]:
        return [llvm_host.host_info().cpu_name] + llvm_host.generic_arches()

    def target_of(self, device: DeviceInfo) -> Target:
        return Target("cpu", llvm_host.host_info().cpu_name)

    # -- compilation -----------------------------------------------------------------------------
    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        try:
            cpu = llvm_host.cpu_target(target.arch)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        lanes = max(4, cpu.vector_bits // 32)

        def laid_out(module: Module, metadata: dict) -> Module:
            metadata["vector_bits"] = cpu.vector_bits
            metadata["vector_lanes"] = lanes
            return annotate_layouts(module, lanes)

        def llir(module: Module, metadata: dict) -> OptimizedLLVM:
            from .lowering.kernel import lower_kernel
            tm = llvm_host.target_machine(cpu)
            lowered = lower_kernel(module, lanes, cpu.triple, str(tm.target_data), options.debug,
                                   bf16_pairs="+avx512bf16" in cpu.features.split(","))
            ref = llvm_host.optimize(lowered.llvm_ir, cpu)
            out = OptimizedLLVM(llvm_host.to_text(ref))
            out.module_ref = ref
            out.asserts = [(c.message, c.loc, c.is_assert, c.access) for c in lowered.asserts]
            metadata["checked"] = options.debug
            metadata["asserts"] = out.asserts
            metadata["stack_bytes"] = lowered.stack_bytes
            metadata["stream_bytes"] = lowered.stream_bytes
            return out

        def asm(text: OptimizedLLVM, metadata: dict) -> HostAssembly:
            ref = getattr(text, "module_ref", None)
            if ref is None:
                ref = llvm_host.parse(str(text))
            else:
                text.module_ref = None   # keep the stage outputs plain, picklable data
            assembly, obj = llvm_host.emit_asm_and_object(ref, cpu)
            out = HostAssembly(assembly)
            out.object_code = obj
            out.asserts = list(getattr(text, "asserts", metadata.get("asserts", [])))
            return out

        return [Stage("laid-out ir", laid_out), Stage("llir", llir), Stage("asm", asm)]

    # -- running ---------------------------------------------------------------------------------
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> LoadedKernel:
        binary = kernel.binary
        obj = getattr(binary, "object_code", b"")
        if not obj:  # e.g. restored from a text cache: rebuild the machine code from llir
            cpu = llvm_host.cpu_target(kernel.target.arch)
            obj = llvm_host.emit_asm_and_object(llvm_host.parse(str(kernel.asm["llir"])), cpu)[1]
        library = llvm_host.JitLibrary(obj)
        entry = EntryPoint(library.address_of("run"))
        arg_names, arg_types = [n for n, _ in kernel.signature], [t for _, t in kernel.signature]
        asserts = kernel.metadata.get("asserts", getattr(binary, "asserts", []))
        return LoadedKernel(kernel.name, library, entry, arg_types, asserts,
                            kernel.metadata.get("stack_bytes", 0), arg_names,
                            written_pointer_params(kernel.module.kernel),
                            kernel.metadata.get("checked", False),
                            ClaimingEntryPoint(library.address_of("run_claiming")),
                            kernel.metadata.get("stream_bytes", 0))

    def launch(self, loaded: LoadedKernel, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        loaded.launch(grid, args)

    def launcher(self, loaded: LoadedKernel, device: DeviceInfo) -> Optional[Any]:
        """The fast path's launcher (``LoadedKernel.raw_launcher``; none in checked mode)."""
        return loaded.raw_launcher()

    # -- memory ----------------------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        raw = np.empty(int(nbytes) + ALIGNMENT, np.uint8)
        start = (-raw.ctypes.data) % ALIGNMENT
        data = raw[start:start + int(nbytes)]
        return Buffer(device, int(nbytes), data, address=data.ctypes.data)

    def free(self, buffer: Buffer) -> None:
        buffer.handle = None
        buffer.freed = True

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        src = numpy_view_of(host)
        self._bytes(buffer, offset, src.size)[...] = src

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        if not host.flags.c_contiguous:
            raise ValueError("copy_to_host needs a C-contiguous destination")
        dst = host.reshape(-1).view(np.uint8)
        dst[...] = self._bytes(buffer, offset, dst.size)

    @staticmethod
    def _bytes(buffer: Buffer, offset: int, n: int) -> np.ndarray:
        if buffer.freed or buffer.handle is None:
            raise BackendError("use of a freed cpu buffer")
        if offset < 0 or offset + n > buffer.nbytes:
            raise ValueError(f"copy of {n} bytes at offset {offset} exceeds the buffer's "
                             f"{buffer.nbytes} bytes")
        return buffer.handle[offset:offset + n]

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """NumPy arrays, buffer-protocol objects and CPU torch tensors, in place (any
        strides that are whole elements).  The span of a read-only array stays read-only:
        the launcher refuses stores into it."""
        view = host_array_view(obj)
        if view is None:
            return None
        buffer = Buffer(device, view.span.size, view.span, address=view.address, owner=obj)
        if not view.span.flags.writeable:
            register_read_only(buffer)
        return ImportedArray(buffer, view.offset, view.shape, view.strides, view.dtype)


