"""``MinimalBackend``: the eleven abstract methods of ``anytile.backend.Backend`` and nothing
more.  Nothing is compiled (``stages()`` is empty): ``load`` reads the kernel's IR and
``launch`` evaluates it program by program (``evaluate.py``).  Memory is the host's: a
``Buffer``'s handle is a ``uint8`` NumPy array and its address that array's, so NumPy arrays
are used in place."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompiledKernel, CompileOptions,
                             DeviceInfo, ImportedArray, KernelArg, PointerArg, Stage, Target,
                             host_array_view)
from anytile.ir import Module

from .evaluate import Program, as_value
from .memory import Memory

__all__ = ["MinimalBackend"]

DEVICE = DeviceInfo("minimal:0", 0, "NumPy evaluation of the tile IR (an example backend)")
#: core asks ``alloc`` for memory aligned to at least this many bytes
ALIGNMENT = 256


class MinimalBackend(Backend):
    """Runs kernels by evaluating their IR with NumPy on the host."""

    name = "minimal"
    api_version = 1
    device_prefix = "minimal"
    capabilities = frozenset({"fp64", "fp16", "bf16", "fp8", "int64_atomics", "float_atomics",
                              "dot_int8", "device_assert", "bounds_check"})
    op_set = 1                  # the IR ops it lowers: the first release's (no print)
    host_memory = True

    # -- identity and devices ------------------------------------------------------------------
    def availability(self) -> Availability:
        return Availability(True)

    def devices(self) -> list[DeviceInfo]:
        return [DEVICE]

    def describe(self) -> dict[str, Any]:
        return {"numpy": np.__version__}

    # -- compiling: nothing to do ----------------------------------------------------------------
    def targets(self) -> list[str]:
        return ["numpy"]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, "numpy")

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        return []

    # -- running ------------------------------------------------------------------------------------
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> Module:
        """The kernel's IR.  Every op in it is one the evaluator runs: core compiles for this
        backend only IR of the ops it declares (``op_set``), and refuses the rest."""
        return kernel.module

    def launch(self, loaded: Module, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        spans = {a.value.buffer.address: a.value.buffer.handle for a in args
                 if isinstance(a.value, PointerArg)}
        memory = Memory(spans)
        kernel = loaded.kernel
        values = [as_value(argument(a), p.type) for a, p in zip(args, kernel.args)]
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    Program(loaded, memory, (x, y, z), grid).run(kernel, values)

    # -- memory ---------------------------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        raw = np.empty(nbytes + ALIGNMENT, np.uint8)
        skip = -raw.ctypes.data % ALIGNMENT
        data = raw[skip:skip + nbytes]
        return Buffer(device, nbytes, data, address=data.ctypes.data)

    def free(self, buffer: Buffer) -> None:
        buffer.handle = None
        buffer.freed = True

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        buffer.handle[offset:offset + raw.size] = raw

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        raw = host.reshape(-1).view(np.uint8)
        raw[...] = buffer.handle[offset:offset + raw.size]

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """A host array seen in place: its bytes become the buffer."""
        view = host_array_view(obj)
        if view is None:
            return None
        buffer = Buffer(device, view.span.size, view.span, address=view.address, owner=obj)
        return ImportedArray(buffer, view.offset, view.shape, view.strides, view.dtype)


def argument(arg: KernelArg) -> Any:
    """A launch argument as the evaluator holds it: an address for a pointer."""
    if isinstance(arg.value, PointerArg):
        return arg.value.buffer.address + arg.value.offset
    return arg.value
