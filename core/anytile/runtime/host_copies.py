"""Host arrays on a device that cannot see host memory in place (OpenCL, the simulated GPUs):
the launch's step 3 copies them to the device and step 8 copies the results back.

The kernel must see what a host backend sees: one memory.  So arguments are grouped by the
range of host memory they span (one NumPy array passed twice, overlapping views, a torch CPU
tensor and a NumPy view of it), each group is copied to the device once, as the bytes from its
first to its last, and each argument becomes a view into that copy with its own offset and
strides.  After the launch every writeable argument is copied back once; views of one copy
hold the same bytes, so the order of the write-backs does not change the result."""
from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

from ..backend import HostArrayView
from .arrays import Array, allocate
from .devices import Device

__all__ = ["HostArgument", "Writeback", "copy_host_arguments", "write_back"]


class HostArgument(NamedTuple):
    """A host array waiting to be copied with the others that share its memory: its
    position among the launch's values, its name (``x_ptr``, ``desc.base``), whether it is a
    tensor descriptor's base, and the array seen in place (``backend.host_array_view``)."""

    index: int
    name: str
    in_descriptor: bool
    view: HostArrayView

    @property
    def start(self) -> int:
        return self.view.address

    @property
    def end(self) -> int:
        return self.view.address + self.view.span.size


#: (the host array, as NumPy sees its memory; the device view whose contents go back there)
Writeback = tuple[np.ndarray, Array]


def copy_host_arguments(kernel: str, waiting: list[HostArgument], dev: Device,
                        writebacks: list[Writeback]) -> list[tuple[HostArgument, Array]]:
    """Each of ``waiting`` (arguments of ``kernel``) with its view on ``dev``: one device copy
    per range of host memory they share; the writeable ones are added to ``writebacks``."""
    out: list[tuple[HostArgument, Array]] = []
    group: list[HostArgument] = []
    end = 0
    for arg in sorted(waiting, key=lambda a: a.start):
        if group and arg.start < end:          # overlaps the group's memory: joins it
            group.append(arg)
            end = max(end, arg.end)
            continue
        if group:
            out += _copy_group(kernel, group, end, dev, writebacks)
        group, end = [arg], arg.end
    if group:
        out += _copy_group(kernel, group, end, dev, writebacks)
    return out


def _copy_group(kernel: str, group: list[HostArgument], end: int, dev: Device,
                writebacks: list[Writeback]) -> list[tuple[HostArgument, Array]]:
    start = group[0].start
    if len(group) == 1:
        data = group[0].view.span
    else:   # the members are alive (the launch holds them): their memory can be read as bytes
        data = np.frombuffer((ctypes.c_uint8 * (end - start)).from_address(start), np.uint8)
    names = ", ".join(f"'{arg.name}'" for arg in group)
    what = f"{kernel}: copying argument{'s' if len(group) > 1 else ''} {names} to the device"
    whole = allocate((end - start,), np.uint8, dev, what)
    whole.copy_from(data)
    out = []
    written: set[tuple] = set()
    for arg in group:
        view = arg.view
        seen = Array(whole.buffer, view.shape, view.dtype, dev, view.strides,
                     whole.offset + arg.start - start + view.offset, keep=whole)
        out.append((arg, seen))
        where = (arg.start + view.offset, view.shape, view.strides, view.dtype)
        if view.array.flags.writeable and where not in written:   # once per host array
            written.add(where)
            writebacks.append((view.array, seen))
    return out


def write_back(writebacks: list[Writeback]) -> None:
    """Copy each device view's contents back to its host array (step 8)."""
    for host, array in writebacks:
        host[...] = array.numpy()
