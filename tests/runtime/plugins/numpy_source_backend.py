"""A test plugin written only against the public contract (``anytile.backend`` and
``anytile.ir``): a source-emitting backend that turns straight-line tile IR into a Python
function over NumPy arrays, like an OpenCL-C backend emits C.

It supports only what vector-add-style kernels need (program ids, arange, splat/broadcast,
elementwise arithmetic and comparisons, addptr, masked load/store) and says so clearly for
anything else; that is enough to prove that discovery, compilation stages, memory, loading and
launching work for a backend core has never heard of."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompiledKernel, CompileOptions,
                             DeviceInfo, ImportedArray, KernelArg, Stage, Target)
from anytile.ir import ops
from anytile.ir.types import PointerType, TileType, from_numpy

_BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
           "fdiv": "({a} / {b})", "and": "({a} & {b})", "or": "({a} | {b})",
           "min": "np.minimum({a}, {b})", "max": "np.maximum({a}, {b})"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class NumpySourceBackend(Backend):
    name = "numpy-source"
    device_prefix = "npsrc"
    host_memory = True

    def availability(self) -> Availability:
        return Availability(True)

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("npsrc:0", 0, "Python source over NumPy (test plugin)")]

    def targets(self) -> list[str]:
        return ["python3"]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, "python3")

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        return [Stage("python-src", lambda module, metadata: emit_python(module))]

    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> Any:
        namespace: dict[str, Any] = {"np": np}
        exec(compile(kernel.binary, f"<{kernel.name}>", "exec"), namespace)
        return namespace["kernel"]

    def launch(self, loaded: Any, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        values = [(a.value.buffer.handle, a.value.offset) if isinstance(a.type, PointerType)
                  else a.value for a in args]
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    loaded((x, y, z), *values)

    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        return Buffer(device, nbytes, np.zeros(nbytes, np.uint8))

    def free(self, buffer: Buffer) -> None:
        buffer.handle = None

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        buffer.handle[offset:offset + raw.size] = raw

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        raw = host.reshape(-1).view(np.uint8)
        raw[...] = buffer.handle[offset:offset + raw.size]

    def import_array(self, obj: Any, device: DeviceInfo) -> Any:
        if not (isinstance(obj, np.ndarray) and obj.flags.c_contiguous):
            return None
        raw = obj.reshape(-1).view(np.uint8)
        buffer = Buffer(device, raw.size, raw, owner=obj)
        return ImportedArray(buffer, 0, obj.shape, tuple(s // obj.itemsize for s in obj.strides),
                             from_numpy(obj.dtype))


def emit_python(module: Any) -> str:
    """The kernel as Python source: ``kernel(pid, *args)``; pointers are (bytes, offset)."""
    fn = module.kernel
    names: dict[Any, str] = {}

    def name(value: Any) -> str:
        return names.setdefault(value, f"v{len(names)}")

    params = [name(a) for a in fn.args]
    lines = [f"def kernel(pid, {', '.join(params)}):"]
    for arg in fn.args:  # a pointer is (byte view, element offset) of its pointee type
        if isinstance(arg.type, PointerType):
            dt = arg.type.pointee.np.str
            lines.append(f"    {name(arg)} = ({name(arg)}[0].view(np.dtype('{dt}')), "
                         f"{name(arg)}[1] // {arg.type.pointee.nbytes})")
    for op in fn.body.ops:
        out = name(op.results[0]) if op.results else None
        t = op.results[0].type if op.results else None
        if isinstance(op, ops.ProgramIdOp):
            lines.append(f"    {out} = np.int32(pid[{op.axis}])")
        elif isinstance(op, ops.ConstantOp):
            elem = t.elem if isinstance(t, TileType) else t
            shape = t.shape if isinstance(t, TileType) else ()
            lines.append(f"    {out} = np.full({shape}, {op.value!r}, np.dtype('{elem.np.str}'))")
        elif isinstance(op, ops.ArangeOp):
            lines.append(f"    {out} = np.arange({op.start}, {op.end}, dtype=np.int32)")
        elif isinstance(op, (ops.SplatOp, ops.BroadcastOp)) and isinstance(t.elem, PointerType):
            src = name(op.src)
            lines.append(f"    {out} = ({src}[0], np.broadcast_to({src}[1], {t.shape}))")
        elif isinstance(op, (ops.SplatOp, ops.BroadcastOp)):
            lines.append(f"    {out} = np.broadcast_to({name(op.src)}, {t.shape})")
        elif isinstance(op, ops.BinaryOp) and op.kind in _BINARY:
            expr = _BINARY[op.kind].format(a=name(op.lhs), b=name(op.rhs))
            lines.append(f"    {out} = {expr}")
        elif isinstance(op, ops.CompareOp):
            lines.append(f"    {out} = {name(op.lhs)} {_COMPARE[op.pred]} {name(op.rhs)}")
        elif isinstance(op, ops.AddPtrOp):
            lines.append(f"    {out} = ({name(op.ptr)}[0], {name(op.ptr)}[1] + {name(op.offset)})")
        elif isinstance(op, ops.LoadOp):
            mask = name(op.mask) if op.mask is not None else "True"
            other = name(op.other) if op.other is not None else "0"
            lines.append(f"    _buf, _idx = {name(op.ptr)}; _m = np.broadcast_to({mask}, np.shape(_idx))")
            lines.append(f"    {out} = np.where(_m, _buf[np.where(_m, _idx, 0)], {other})")
        elif isinstance(op, ops.StoreOp):
            mask = name(op.mask) if op.mask is not None else "True"
            lines.append(f"    _buf, _idx = {name(op.ptr)}; _m = np.broadcast_to({mask}, np.shape(_idx))")
            lines.append(f"    _buf[_idx[_m]] = np.broadcast_to({name(op.value)}, np.shape(_idx))[_m]")
        else:
            raise NotImplementedError(f"the numpy-source test backend cannot lower '{op.NAME}'")
    return "\n".join(lines) + "\n"
