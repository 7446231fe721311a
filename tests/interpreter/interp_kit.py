"""Helpers to build small kernels by hand and run them on the interpreter.

``KernelBuilder`` stamps each op with the *caller's* file and line, so launch errors point at
the test line that built the failing op (as they point at user code in real kernels).
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import KernelArg, PointerArg
from anytile.interpreter import InterpreterBackend
from anytile.ir import (AddPtrOp, ArangeOp, BinaryOp, Block, Builder, CastOp, CompareOp,
                        ConstantOp, Function, LoadOp, Loc, Module, ProgramIdOp, SplatOp,
                        StoreOp, UnaryOp, Value, YieldOp)
from anytile.ir.types import PointerType, ScalarType, TileType, Type, from_numpy, i1, i32

BACKEND = InterpreterBackend()
DEVICE = BACKEND.devices()[0]


def caller_loc(depth: int = 2, func: str = "kernel") -> Loc:
    frame = sys._getframe(depth)
    return Loc(frame.f_code.co_filename, frame.f_lineno, 4, func)


class KernelBuilder:
    """A module with one kernel ``name`` taking ``params`` ([(name, type)]); ops go at the
    insertion point of ``self.b`` (a ``Builder``)."""

    def __init__(self, params: Sequence[tuple[str, Type]], name: str = "kernel",
                 is_kernel: bool = True, module: Optional[Module] = None) -> None:
        block = Block.with_args([t for _, t in params], [n for n, _ in params])
        self.fn = Function(name, block, is_kernel=is_kernel)
        self.module = module if module is not None else Module()
        self.module.add(self.fn)
        self.b = Builder(block)
        self.name = name

    def arg(self, name: str) -> Value:
        return next(a for a in self.fn.args if a.name == name)

    def op(self, cls: type, *args: Any, result_types: Optional[list] = None, **kw: Any) -> Any:
        """Create ``cls(*args)`` at the caller's source line; returns the op."""
        return self.b.create(cls, *args, result_types=result_types,
                             loc=kw.pop("loc", None) or caller_loc(2, self.name), **kw)

    # -- shorthands returning values ---------------------------------------------------------
    def const(self, value: Any, t: Type) -> Value:
        return self.op(ConstantOp, value, result_types=[t], loc=caller_loc(2, self.name)).result

    def arange(self, n: int) -> Value:
        return self.op(ArangeOp, 0, n, loc=caller_loc(2, self.name)).result

    def pid(self, axis: int = 0) -> Value:
        return self.op(ProgramIdOp, axis, loc=caller_loc(2, self.name)).result

    def splat(self, v: Value, shape: tuple) -> Value:
        return self.op(SplatOp, v, result_types=[TileType(shape, v.type)],
                       loc=caller_loc(2, self.name)).result

    def binary(self, kind: str, a: Value, b: Value) -> Value:
        return self.op(BinaryOp, kind, a, b, loc=caller_loc(2, self.name)).result

    def compare(self, pred: str, a: Value, b: Value) -> Value:
        return self.op(CompareOp, pred, a, b, loc=caller_loc(2, self.name)).result

    def unary(self, kind: str, a: Value) -> Value:
        return self.op(UnaryOp, kind, a, loc=caller_loc(2, self.name)).result

    def cast(self, a: Value, elem: ScalarType) -> Value:
        t = TileType(a.type.shape, elem) if isinstance(a.type, TileType) else elem
        return self.op(CastOp, a, result_types=[t], loc=caller_loc(2, self.name)).result

    def ptrs(self, base: Value, offsets: Value) -> Value:
        """``base + offsets`` as a pointer tile (splat then addptr)."""
        loc = caller_loc(2, self.name)
        tile = self.op(SplatOp, base, result_types=[TileType(offsets.type.shape, base.type)],
                       loc=loc).result
        return self.op(AddPtrOp, tile, offsets, loc=loc).result

    def load(self, ptr: Value, mask: Optional[Value] = None,
             other: Optional[Value] = None) -> Value:
        return self.op(LoadOp, ptr, mask, other, loc=caller_loc(2, self.name)).result

    def store(self, ptr: Value, value: Value, mask: Optional[Value] = None) -> None:
        self.op(StoreOp, ptr, value, mask, loc=caller_loc(2, self.name))

    def yield_(self, *values: Value) -> None:
        self.op(YieldOp, list(values), loc=caller_loc(2, self.name))


def ptr(t: ScalarType) -> PointerType:
    return PointerType(t)


def run(module: Module, grid: Any, *values: Any) -> None:
    """Launch ``module``'s kernel; NumPy arrays are passed zero-copy, the rest as scalars."""
    executor = BACKEND.load(module, DEVICE)
    params = module.kernel.args
    args, keep = [], []
    for value, param in zip(values, params):
        if isinstance(value, np.ndarray):
            imported = BACKEND.import_array(value, DEVICE)
            assert imported is not None
            keep.append(imported)
            args.append(KernelArg(param.type, PointerArg(imported.buffer, imported.offset)))
        else:
            args.append(KernelArg(param.type, value))
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    BACKEND.launch(executor, grid + (1,) * (3 - len(grid)), args, DEVICE)


def elementwise_module(n: int, in_types: Sequence[ScalarType], out_type: ScalarType,
                       body: Any) -> Module:
    """A kernel ``(in0, in1, ..., out)`` loading ``n`` elements of each input, applying
    ``body(kb, *tiles) -> tile`` and storing the result."""
    params = [(f"in{i}", ptr(t)) for i, t in enumerate(in_types)] + [("out", ptr(out_type))]
    kb = KernelBuilder(params)
    offs = kb.arange(n)
    tiles = [kb.load(kb.ptrs(kb.arg(f"in{i}"), offs)) for i in range(len(in_types))]
    kb.store(kb.ptrs(kb.arg("out"), offs), body(kb, *tiles))
    return kb.module


def run_elementwise(body: Any, inputs: Sequence[np.ndarray], out_dtype: Any) -> np.ndarray:
    """Run ``body`` over 1-D ``inputs`` (of equal, power-of-2 length); returns the output,
    which starts poisoned."""
    n = inputs[0].size
    out = np.full(n, 0x5A, np.uint8).repeat(np.dtype(out_dtype).itemsize).view(out_dtype)
    module = elementwise_module(n, [from_numpy(x.dtype) for x in inputs],
                                from_numpy(out_dtype), body)
    run(module, 1, *inputs, out)
    return out


def run_scalarwise(body: Any, inputs: Sequence[np.ndarray], out_dtype: Any) -> np.ndarray:
    """Like ``run_elementwise`` but on scalars: program ``p`` handles element ``p``."""
    n = inputs[0].size
    out = np.full(n, 0x5A, np.uint8).repeat(np.dtype(out_dtype).itemsize).view(out_dtype)
    params = [(f"in{i}", ptr(from_numpy(x.dtype))) for i, x in enumerate(inputs)]
    kb = KernelBuilder(params + [("out", ptr(from_numpy(out_dtype)))])
    pid = kb.pid(0)
    scalars = [kb.load(kb.op(AddPtrOp, kb.arg(f"in{i}"), pid).result)
               for i in range(len(inputs))]
    kb.store(kb.op(AddPtrOp, kb.arg("out"), pid).result, body(kb, *scalars))
    run(kb.module, n, *inputs, out)
    return out


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


__all__ = ["KernelBuilder", "ptr", "run", "elementwise_module", "run_elementwise",
           "run_scalarwise", "rng",
           "BACKEND", "DEVICE", "caller_loc", "i1", "i32"]
