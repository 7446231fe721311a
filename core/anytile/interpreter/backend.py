"""``InterpreterBackend``: the ``interpreter`` backend, which runs tile IR with NumPy.

It compiles nothing (``stages()`` is empty): ``load`` compiles the kernel's IR ``Module``
into closures and ``launch`` runs them program by program, checking every memory access.

Memory is a virtual address space (see ``memory.py``).  ``import_array`` registers a NumPy
array (or anything with ``__array_interface__``, the buffer protocol, or a CPU torch tensor)
in place, zero-copy: the kernel reads and writes the array's own memory.  The registration
lives as long as the returned ``Buffer`` object: a ``weakref.finalize`` on the buffer queues
its release when the last reference goes, and the next allocation or launch drops it, so
launching with temporary arrays never leaks registrations (``free`` on an imported buffer
unregisters it at once).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import ml_dtypes
import numpy as np

from ..backend import (CAPABILITIES, Availability, Backend, Buffer, CompiledKernel,
                       CompileOptions, DeviceInfo, ImportedArray, KernelArg, Stage, Target,
                       host_array_view, numpy_view_of)
from ..ir.nodes import Module
from ..ir.opsets import LATEST_OP_SET
from .memory import VirtualMemory

if TYPE_CHECKING:   # the executor is imported when a kernel is first loaded
    from .executor import ModuleExecutor

_DEVICE = DeviceInfo("interpreter:0", 0, "NumPy reference interpreter")
_POISON = 0xFF   # fresh memory reads as NaN for floats and -1 for integers


class InterpreterBackend(Backend):
    """The NumPy reference interpreter: the executable definition of the IR's meaning."""

    name = "interpreter"
    device_prefix = "interpreter"
    capabilities = frozenset(CAPABILITIES)
    op_set = LATEST_OP_SET           # the definition of every op core makes
    host_memory = True

    def __init__(self) -> None:
        self.memory = VirtualMemory()

    # -- identity ----------------------------------------------------------------------------
    def availability(self) -> Availability:
        return Availability(True)

    def devices(self) -> list[DeviceInfo]:
        return [_DEVICE]

    def describe(self) -> dict[str, Any]:
        return {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}

    # -- compilation -------------------------------------------------------------------------
    def targets(self) -> list[str]:
        return ["reference"]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target("interpreter", "reference")

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        return []

    # -- running -----------------------------------------------------------------------------
    def load(self, kernel: Union[CompiledKernel, Module], device: DeviceInfo) -> ModuleExecutor:
        """Compile ``kernel.module`` (or a bare ``Module``) into an executor."""
        module = kernel if isinstance(kernel, Module) else kernel.module
        from .executor import ModuleExecutor
        return ModuleExecutor(module, self.memory)

    def launch(self, loaded: ModuleExecutor, grid: tuple[int, int, int],
               args: Sequence[KernelArg], device: DeviceInfo, stream: Any = None) -> None:
        loaded.launch(grid, args)

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        data = np.full(int(nbytes), _POISON, np.uint8)
        alloc = self.memory.register(data)
        return Buffer(device, int(nbytes), data, address=alloc.base)

    def free(self, buffer: Buffer) -> None:
        self.memory.unregister(buffer.address)
        buffer.freed = True

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        src = numpy_view_of(host)
        self._span(buffer, offset, src.size)[...] = src

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        if not host.flags.c_contiguous or not host.flags.writeable:
            raise ValueError("copy_to_host needs a writeable C-contiguous array")
        dst = host.reshape(-1).view(np.uint8)
        dst[...] = self._span(buffer, offset, dst.size)

    def _span(self, buffer: Buffer, offset: int, nbytes: int) -> np.ndarray:
        if buffer.freed or self.memory.allocation_at(buffer.address) is None:
            raise ValueError("the buffer has been freed")
        if offset < 0 or offset + nbytes > buffer.nbytes:
            raise ValueError(f"copy of {nbytes} bytes at offset {offset} does not fit the "
                             f"{buffer.nbytes}-byte buffer")
        return buffer.handle[offset:offset + nbytes]

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """See ``obj`` in place (see the module docstring); ``None`` when it cannot."""
        view = host_array_view(obj)
        if view is None:
            return None
        alloc = self.memory.register(view.span, imported=True)
        buffer = Buffer(device, alloc.nbytes, view.span, address=alloc.base, owner=obj)
        weakref.finalize(buffer, self.memory.release_later, alloc)
        return ImportedArray(buffer, view.offset, view.shape, view.strides, view.dtype)
