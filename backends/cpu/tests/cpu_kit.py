"""Helpers for the cpu backend's tests: build kernels by hand, compile them through the
backend's stages, run them on the cpu backend and on the reference interpreter."""
from __future__ import annotations

import copy
import sys
from typing import Any, Callable, Optional, Sequence

import numpy as np

from anytile.backend import CompiledKernel, CompileOptions, KernelArg, PointerArg
from anytile.ir import (AddPtrOp, ArangeOp, BinaryOp, Block, Builder, CastOp, CompareOp,
                        ConstantOp, ForOp, Function, LoadOp, Loc, Module, ProgramIdOp,
                        ReduceOp, ScanOp, SplatOp, StoreOp, UnaryOp, Value, YieldOp)
from anytile.ir.types import PointerType, ScalarType, TileType, Type, from_numpy
from anytile_cpu.backend import CpuBackend

CPU = CpuBackend()
CPU_DEVICE = CPU.devices()[0]


def _loc() -> Loc:
    frame = sys._getframe(2)
    return Loc(frame.f_code.co_filename, frame.f_lineno, 4, "kernel")


class KernelBuilder:
    """One kernel taking ``params`` ([(name, type)]); ops are appended at ``self.b``."""

    def __init__(self, params: Sequence[tuple[str, Type]], name: str = "kernel") -> None:
        block = Block.with_args([t for _, t in params], [n for n, _ in params])
        self.fn = Function(name, block, is_kernel=True)
        self.module = Module()
        self.module.add(self.fn)
        self.b = Builder(block)

    def arg(self, name: str) -> Value:
        return next(a for a in self.fn.args if a.name == name)

    def op(self, cls: type, *args: Any, result_types: Optional[list] = None, **kw: Any) -> Any:
        return self.b.create(cls, *args, result_types=result_types, loc=_loc(), **kw)

    def v(self, cls: type, *args: Any, result_types: Optional[list] = None, **kw: Any) -> Value:
        return self.b.create(cls, *args, result_types=result_types, loc=_loc(), **kw).result

    def const(self, value: Any, t: Type) -> Value:
        return self.v(ConstantOp, value, result_types=[t])

    def arange(self, n: int, start: int = 0) -> Value:
        return self.v(ArangeOp, start, start + n)

    def pid(self, axis: int = 0) -> Value:
        return self.v(ProgramIdOp, axis)

    def splat(self, v: Value, shape: tuple) -> Value:
        return self.v(SplatOp, v, result_types=[TileType(shape, v.type)])

    def binary(self, kind: str, a: Value, b: Value) -> Value:
        return self.v(BinaryOp, kind, a, b)

    def compare(self, pred: str, a: Value, b: Value) -> Value:
        return self.v(CompareOp, pred, a, b)

    def unary(self, kind: str, a: Value) -> Value:
        return self.v(UnaryOp, kind, a)

    def cast(self, a: Value, elem: ScalarType) -> Value:
        t = TileType(a.type.shape, elem) if isinstance(a.type, TileType) else elem
        return self.v(CastOp, a, result_types=[t])

    def ptrs(self, base: Value, offsets: Value) -> Value:
        tile = self.v(SplatOp, base, result_types=[TileType(offsets.type.shape, base.type)])
        return self.v(AddPtrOp, tile, offsets)

    def load(self, ptr: Value, mask: Optional[Value] = None, other: Optional[Value] = None) -> Value:
        return self.v(LoadOp, ptr, mask, other)

    def store(self, ptr: Value, value: Value, mask: Optional[Value] = None) -> None:
        self.op(StoreOp, ptr, value, mask)

    def region(self, arg_types: Sequence[Type], body: Callable[..., Sequence[Value]]) -> Block:
        """A block with ``arg_types`` arguments whose ops ``body(*args)`` builds; it ends with
        ``yield`` of what ``body`` returns."""
        block = Block.with_args(list(arg_types))
        with self.b.at_end_of(block):
            values = body(*block.args)
            self.op(YieldOp, list(values))
        return block

    def reduce(self, srcs: Sequence[Value], axis: int, combine: Callable[..., Sequence[Value]],
               scan: bool = False, reverse: bool = False) -> list[Value]:
        elems = [s.type.elem for s in srcs]
        region = self.region(elems + elems, combine)
        if scan:
            return self.op(ScanOp, list(srcs), axis, reverse, region).results
        return self.op(ReduceOp, list(srcs), axis, region).results

    def for_(self, lower: Value, upper: Value, step: Value, inits: Sequence[Value],
             body: Callable[..., Sequence[Value]]) -> list[Value]:
        region = self.region([lower.type] + [v.type for v in inits], body)
        return self.op(ForOp, lower, upper, step, list(inits), region).results

    def offsets_2d(self, rows: int, cols: int, row_stride: Value) -> Value:
        """``r[:, None] * row_stride + c[None, :]`` as an i32 tile."""
        from anytile.ir import BroadcastOp, ExpandDimsOp
        from anytile.ir.types import i32
        r = self.v(ExpandDimsOp, self.arange(rows), 1)
        c = self.v(ExpandDimsOp, self.arange(cols), 0)
        shape = TileType((rows, cols), i32)
        r = self.binary("mul", self.v(BroadcastOp, r, result_types=[shape]),
                        self.splat(row_stride, (rows, cols)))
        return self.binary("add", r, self.v(BroadcastOp, c, result_types=[shape]))


def ptr(t: ScalarType) -> PointerType:
    return PointerType(t)


def compile_module(module: Module, backend: Any = CPU,
                   options: Optional[CompileOptions] = None) -> CompiledKernel:
    """Run ``backend``'s stages on (a copy of) ``module``, as the runtime's driver does."""
    from anytile.ir.printer import print_module
    options = options or CompileOptions()
    target = backend.target_of(backend.devices()[0])
    out: Any = copy.deepcopy(module)
    asm: dict[str, Any] = {"ir": print_module(module)}
    metadata: dict[str, Any] = {}
    for stage in backend.stages(target, options):
        out = stage.run(out, metadata)
        asm[stage.name] = out if isinstance(out, (str, bytes)) else str(out)
    signature = [(a.name, a.type) for a in module.kernel.args]
    return CompiledKernel(module.kernel_name, target, options, signature, {}, asm, metadata,
                          module, binary=out)


def launch(backend: Any, loaded: Any, grid: Any, params: Sequence[Value], values: Sequence[Any]):
    device = backend.devices()[0]
    args, keep = [], []
    for value, param in zip(values, params):
        if isinstance(value, np.ndarray):
            imported = backend.import_array(value, device)
            assert imported is not None
            keep.append(imported)
            args.append(KernelArg(param.type, PointerArg(imported.buffer, imported.offset)))
        else:
            args.append(KernelArg(param.type, value))
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    backend.launch(loaded, grid + (1,) * (3 - len(grid)), args, device)


def run_cpu(module: Module, grid: Any, *values: Any) -> CompiledKernel:
    """Compile ``module`` for the cpu backend and launch it; arrays are used in place."""
    compiled = compile_module(module)
    launch(CPU, CPU.load(compiled, CPU_DEVICE), grid, module.kernel.args, values)
    return compiled


def run_interpreter(module: Module, grid: Any, *values: Any) -> None:
    from anytile.interpreter import InterpreterBackend
    backend = InterpreterBackend()
    launch(backend, backend.load(copy.deepcopy(module), backend.devices()[0]), grid,
           module.kernel.args, values)


def run_both(module: Module, grid: Any, *values: Any) -> tuple[list, list]:
    """Run on the cpu backend and on the interpreter, each on its own copy of the arrays;
    returns (cpu arrays, interpreter arrays)."""
    mine = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
    ref = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
    run_cpu(module, grid, *mine)
    run_interpreter(module, grid, *ref)
    return mine, ref


def poisoned(shape: Any, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return np.full(shape, np.nan, dtype)
    if dtype.kind == "b":
        return np.full(shape, True)
    info = np.iinfo(dtype)
    return np.full(shape, info.min + 7 if dtype.kind == "i" else info.max - 7, dtype)


def elementwise_module(n: int, in_types: Sequence[ScalarType], out_type: ScalarType,
                       body: Callable[..., Value], masked_n: Optional[int] = None) -> Module:
    """Kernel ``(in0, .., out, n)``: load tiles of ``n`` elements (masked by ``n`` when
    ``masked_n``), apply ``body(kb, *tiles)``, store."""
    from anytile.ir.types import i32
    params = [(f"in{i}", ptr(t)) for i, t in enumerate(in_types)] + [("out", ptr(out_type)),
                                                                      ("n", i32)]
    kb = KernelBuilder(params)
    offs = kb.arange(n)
    mask = kb.compare("lt", offs, kb.splat(kb.arg("n"), (n,))) if masked_n is not None else None
    tiles = [kb.load(kb.ptrs(kb.arg(f"in{i}"), offs), mask) for i in range(len(in_types))]
    kb.store(kb.ptrs(kb.arg("out"), offs), body(kb, *tiles), mask)
    return kb.module


def multi_output_module(n: int, in_types: Sequence[ScalarType],
                        outputs: Sequence[tuple[ScalarType, Callable[..., Value]]]) -> Module:
    """Kernel ``(in0, .., out0, .., n)``: masked loads of ``n`` of ``n``-element tiles, then
    output ``j`` = ``outputs[j][1](kb, *tiles)`` stored as ``outputs[j][0]``."""
    from anytile.ir.types import i32
    params = [(f"in{i}", ptr(t)) for i, t in enumerate(in_types)]
    params += [(f"out{j}", ptr(t)) for j, (t, _) in enumerate(outputs)] + [("n", i32)]
    kb = KernelBuilder(params)
    offs = kb.arange(n)
    mask = kb.compare("lt", offs, kb.splat(kb.arg("n"), (n,)))
    tiles = [kb.load(kb.ptrs(kb.arg(f"in{i}"), offs), mask) for i in range(len(in_types))]
    for j, (_, body) in enumerate(outputs):
        kb.store(kb.ptrs(kb.arg(f"out{j}"), offs), body(kb, *tiles), mask)
    return kb.module


def grid_module(block: int, in_types: Sequence[ScalarType],
                outputs: Sequence[tuple[ScalarType, Callable[..., Value]]]) -> Module:
    """Like ``multi_output_module`` but program ``p`` handles elements
    ``[p*block, (p+1)*block)`` of ``n``: launch it on ``cdiv(n, block)`` programs."""
    from anytile.ir.types import i32
    params = [(f"in{i}", ptr(t)) for i, t in enumerate(in_types)]
    params += [(f"out{j}", ptr(t)) for j, (t, _) in enumerate(outputs)] + [("n", i32)]
    kb = KernelBuilder(params)
    base = kb.binary("mul", kb.pid(0), kb.const(block, i32))
    offs = kb.binary("add", kb.splat(base, (block,)), kb.arange(block))
    mask = kb.compare("lt", offs, kb.splat(kb.arg("n"), (block,)))
    tiles = [kb.load(kb.ptrs(kb.arg(f"in{i}"), offs), mask) for i in range(len(in_types))]
    for j, (_, body) in enumerate(outputs):
        kb.store(kb.ptrs(kb.arg(f"out{j}"), offs), body(kb, *tiles), mask)
    return kb.module


__all__ = ["KernelBuilder", "multi_output_module", "grid_module", "ptr", "compile_module", "run_cpu", "run_interpreter", "run_both",
           "poisoned", "elementwise_module", "CPU", "CPU_DEVICE", "from_numpy"]
