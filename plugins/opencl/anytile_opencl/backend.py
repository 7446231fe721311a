"""``OpenCLBackend``: anytile kernels as OpenCL C 1.2, on every OpenCL device.

Written only against anytile's public contract (``anytile.backend``, ``anytile.ir``,
``anytile.errors``); ``tests/test_public_contract.py`` checks its imports.

Stages: ``laid-out ir`` (every tile typed with its ``BlockedLayout``: how its elements spread
over the work-items of one work-group and their vectors) and ``opencl-c`` (the kernel's
source).  ``load`` builds the source for the device and adds what the driver reports to the
kernel's metadata (``work_group_size``, ``local_mem_bytes``, ``private_mem_bytes``).
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompileOptions, CompiledKernel,
                             DeviceInfo, KernelArg, Stage, Target, numpy_view_of)
from anytile.errors import BackendError
from anytile.ir import Module

from . import driver, waits
from .target import GENERIC_ARCHES, OpenCLArch

__all__ = ["OpenCLBackend"]


class OpenCLBackend(Backend):
    name = "opencl"
    device_prefix = "opencl"
    #: what every OpenCL device gets (f16/bf16 are computed in f32 and stored as 16 bits,
    #: float atomics are compare-and-swap loops); fp64 and int64_atomics come per device
    capabilities = frozenset({"fp16", "bf16", "fp8", "float_atomics", "dot_int8", "device_assert",
                              "device_print", "bounds_check"})
    op_set = 2                       # the IR ops it lowers: print too (anytile.ir.OP_SETS)
    disk_cacheable = True

    # -- identity --------------------------------------------------------------------------------
    def availability(self) -> Availability:
        if driver.discover_devices():
            return Availability(True)
        return Availability(False, driver.discovery_error())

    def devices(self) -> list[DeviceInfo]:
        return [r.info for r in driver.discover_devices()]

    def device_capabilities(self, device: DeviceInfo) -> frozenset[str]:
        arch = self._record(device).arch
        extra = {"fp64"} if arch.fp64 else set()
        if arch.atomics64:
            extra.add("int64_atomics")
        return self.capabilities | extra

    def describe(self) -> dict[str, Any]:
        import pyopencl as cl
        records = driver.discover_devices()
        platforms = sorted({f"{r.platform_name} ({r.cl_device.platform.version.strip()})"
                            for r in records})
        return {"pyopencl": cl.VERSION_TEXT, "platforms": "; ".join(platforms),
                "drivers": "; ".join(f"{r.info.name}={r.cl_device.driver_version.strip()}"
                                     for r in records)}

    def _record(self, device: DeviceInfo) -> driver.DeviceRecord:
        for record in driver.discover_devices():
            if record.info.name == device.name:
                return record
        raise BackendError(f"no OpenCL device {device.name} here")

    # -- compilation -----------------------------------------------------------------------------
    def targets(self) -> list[str]:
        present = [str(r.arch) for r in driver.discover_devices()]
        return list(dict.fromkeys(present + list(GENERIC_ARCHES)))

    def supports_target(self, arch: str) -> bool:
        """Any well-formed architecture description (``OpenCLArch``), present or not."""
        try:
            OpenCLArch.parse(arch)
        except ValueError:
            return False
        return True

    def target_of(self, device: DeviceInfo) -> Target:
        """The device's own architecture, or ``$ANYTILE_OPENCL_ARCH`` (to run another
        device's code path, e.g. a GPU's many work-items on PoCL)."""
        forced = os.environ.get("ANYTILE_OPENCL_ARCH")
        if forced:
            try:
                return Target(self.name, str(OpenCLArch.parse(forced)))
            except ValueError as exc:
                raise BackendError(f"ANYTILE_OPENCL_ARCH: {exc}") from None
        return Target(self.name, str(self._record(device).arch))

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        try:
            arch = OpenCLArch.parse(target.arch)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        from anytile.codegen.bounds_checks import insert_bounds_checks

        from .codegen.kernel import emit_kernel
        from .layout import annotate_layouts, layout_policy

        policy = layout_policy(arch, options.num_warps)

        def laid_out(module: Module, metadata: Any) -> Module:
            metadata["threads_per_block"] = policy.work_items
            metadata["vector"] = policy.vector
            if options.debug:          # checked mode: every access tested (bounds_check)
                metadata["bounds_params"] = insert_bounds_checks(module.kernel)
            return annotate_layouts(module, policy)

        def opencl_c(module: Module, metadata: Any) -> str:
            kernel = emit_kernel(module, arch, policy, debug=options.debug,
                                 spans=metadata.get("bounds_params") or ())
            metadata["kernel_name"] = kernel.name
            metadata["shared"] = kernel.scratch_bytes
            metadata["asserts"] = kernel.checks
            metadata["check_facts"] = kernel.check_facts
            metadata["written_params"] = kernel.written
            metadata["private_bytes"] = kernel.private_bytes
            metadata["largest_private"] = kernel.largest_private
            return kernel.source

        return [Stage("laid-out ir", laid_out), Stage("opencl-c", opencl_c)]

    # -- running ---------------------------------------------------------------------------------
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> driver.LoadedKernel:
        record = self._record(device)
        meta = kernel.metadata
        driver.check_private_memory(record, int(meta["threads_per_block"]),
                                    meta.get("private_bytes") or 0, meta.get("largest_private"))
        program = driver.build_program(record, str(kernel.asm["opencl-c"]))
        loaded = driver.LoadedKernel(record, program, meta["kernel_name"], kernel.signature,
                                     int(meta["threads_per_block"]), meta.get("asserts") or [],
                                     meta.get("written_params") or [],
                                     meta.get("bounds_params") or [],
                                     meta.get("check_facts") or [])
        for key, value in loaded.driver_facts.items():
            meta[key] = value
        return loaded

    def launch(self, loaded: driver.LoadedKernel, grid: tuple[int, int, int],
               args: Sequence[KernelArg], device: DeviceInfo, stream: Any = None) -> None:
        loaded.launch(grid, args)

    def synchronize(self, device: DeviceInfo) -> None:
        """Wait for the device's queue; Ctrl-C interrupts the wait (``waits``)."""
        record = self._record(device)
        waits.settle(record)
        record.queue.finish()

    # -- memory ----------------------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        import pyopencl as cl
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        record = self._record(device)
        handle = cl.Buffer(record.context, cl.mem_flags.READ_WRITE, size=max(int(nbytes), 1))
        return Buffer(device, int(nbytes), handle)

    def free(self, buffer: Buffer) -> None:
        if buffer.handle is not None:
            driver.release(buffer.handle)
        buffer.handle = None
        buffer.freed = True

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        import pyopencl as cl
        src = numpy_view_of(host)
        self._check_span(buffer, offset, src.size)
        if src.size:
            record = self._record(buffer.device)
            waits.settle(record)
            cl.enqueue_copy(record.queue, buffer.handle, src, dst_offset=offset,
                            is_blocking=True)

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        import pyopencl as cl
        if not host.flags.c_contiguous:
            raise ValueError("copy_to_host needs a C-contiguous destination")
        dst = host.reshape(-1).view(np.uint8)
        self._check_span(buffer, offset, dst.size)
        if dst.size:
            record = self._record(buffer.device)
            waits.settle(record)
            cl.enqueue_copy(record.queue, dst, buffer.handle, src_offset=offset,
                            is_blocking=True)

    @staticmethod
    def _check_span(buffer: Buffer, offset: int, n: int) -> None:
        if buffer.freed or buffer.handle is None:
            raise BackendError("use of a freed OpenCL buffer")
        if offset < 0 or offset + n > buffer.nbytes:
            raise ValueError(f"copy of {n} bytes at offset {offset} exceeds the buffer's "
                             f"{buffer.nbytes} bytes")

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[Any]:
        """Host arrays are copied (OpenCL memory is the device's, even on PoCL)."""
        return None
