"""Runs a compiled module over a launch grid, one program at a time.

Programs run sequentially in row-major grid order with axis 0 fastest: ``(0,0,0), (1,0,0),
..., (0,1,0), ...`` (z outermost, x innermost).  Kernels must not depend on this order;
atomics are correct under any order.  Every op runs under ``np.errstate(all="ignore")``;
any exception an op raises becomes a ``LaunchError`` naming the op's file:line and the
program, never a NumPy traceback.
"""
from __future__ import annotations

import linecache
import threading
from typing import Any, Callable, Optional, Sequence, TypeVar

import numpy as np

from ..backend import KernelArg, PointerArg
from ..errors import DeviceAssertError, LaunchError, OutOfBoundsError
from ..ir.nodes import Loc, Module, Op
from ..ir.ops import AtomicCASOp, AtomicRMWOp
from ..ir.types import PointerType, ScalarType
from .arith import UnsupportedOp, round_f64_to
from .steps import CompiledBlock, CompiledFunction, FunctionCompiler
from .memory import AccessViolation, VirtualMemory

T = TypeVar("T")



def _access_name(op: Op) -> str:
    """How errors name a memory op: load, store, atomic add, atomic cas, ..."""
    if isinstance(op, AtomicRMWOp):
        return f"atomic {op.kind}"
    return "atomic cas" if isinstance(op, AtomicCASOp) else op.NAME


class ProgramState:
    """What program-dependent ops read: this program's ids and the grid, as ``i32``."""

    __slots__ = ("pid", "grid")

    def __init__(self) -> None:
        self.pid: tuple = (np.int32(0),) * 3
        self.grid: tuple = (np.int32(1),) * 3


def source_line(loc: Optional[Loc]) -> Optional[str]:
    if loc is None or loc.line <= 0:
        return None
    return linecache.getline(loc.file, loc.line) or None


class ModuleExecutor:
    """One loaded module: its functions compiled to steps, and the memory they access.
    Launches of one executor are serialised by a lock (steps read shared program state)."""

    def __init__(self, module: Module, memory: VirtualMemory) -> None:
        self.module = module
        self.memory = memory
        self.state = ProgramState()
        self.lock = threading.Lock()
        self._functions: dict[str, CompiledFunction] = {}
        if module.kernel_name not in module.functions:
            raise LaunchError(f"module has no kernel function '{module.kernel_name}'")
        self.kernel_fn = module.kernel
        with np.errstate(all="ignore"):           # constants may overflow to inf, as the IR says
            self.kernel = self.function(module.kernel_name)

    # -- compilation -------------------------------------------------------------------------
    def function(self, name: str) -> CompiledFunction:
        """The compiled function ``name`` (compiled on first use; recursion-safe)."""
        compiled = self._functions.get(name)
        if compiled is None:
            fn = self.module.functions.get(name)
            if fn is None:
                raise UnsupportedOp(f"call to '{name}', which is not a function of the module")
            compiled = self._functions[name] = CompiledFunction(name)
            FunctionCompiler(self, fn).compile_into(compiled)
        return compiled

    def compiling(self, op: Op, build: Callable[[], T]) -> T:
        """Run ``build`` for ``op``, turning a refusal into a ``LaunchError`` at its line."""
        try:
            return build()
        except LaunchError:
            raise
        except (UnsupportedOp, TypeError, ValueError, KeyError) as exc:
            raise LaunchError(f"the interpreter cannot run op '{op.NAME}': {exc}", op.loc,
                              source_line(op.loc)) from None

    # -- running -----------------------------------------------------------------------------
    def run_block(self, block: CompiledBlock, frame: list) -> list:
        """Run ``block``'s steps in ``frame``; return its terminator's values."""
        for op, step in block.steps:
            try:
                step(frame)
            except LaunchError:
                raise
            except AccessViolation as exc:
                raise self._access_error(op, exc) from None
            except RecursionError:
                raise self.error(op, "calls nest too deeply",
                                 "recursion without an end?") from None
            except Exception as exc:
                raise self.error(op, f"the interpreter failed running '{op.NAME}'",
                                 f"{type(exc).__name__}: {exc}") from None
        return [frame[s] for s in block.result_slots]

    def call(self, fn: CompiledFunction, args: Sequence[Any]) -> list:
        assert fn.body is not None
        frame: list = [None] * fn.num_slots
        for s, value in zip(fn.body.arg_slots, args):
            frame[s] = value
        return self.run_block(fn.body, frame)

    def launch(self, grid: Sequence[int], args: Sequence[KernelArg]) -> None:
        """Run every program of ``grid`` with the runtime ``args``."""
        gx, gy, gz = _check_grid(grid)
        with self.lock, np.errstate(all="ignore"):
            values = self.bind_args(args)
            state, kernel = self.state, self.kernel
            state.grid = (np.int32(gx), np.int32(gy), np.int32(gz))
            for z in range(gz):
                for y in range(gy):
                    for x in range(gx):
                        state.pid = (np.int32(x), np.int32(y), np.int32(z))
                        self.call(kernel, values)

    def bind_args(self, args: Sequence[KernelArg]) -> list:
        """Runtime arguments as the NumPy values of the kernel's parameter types."""
        params = self.kernel_fn.args
        if len(args) != len(params):
            raise LaunchError(f"kernel '{self.kernel_fn.name}' takes {len(params)} runtime "
                              f"argument(s), got {len(args)}", self.kernel_fn.loc)
        return [self._bind(arg, p.type, p.name or f"#{i}")
                for i, (arg, p) in enumerate(zip(args, params))]

    def _bind(self, arg: KernelArg, t: Any, name: str) -> Any:
        value = arg.value
        if isinstance(t, PointerType):
            if isinstance(value, PointerArg):
                value = value.address
            if not isinstance(value, (int, np.integer)):
                raise LaunchError(f"argument '{name}' is a pointer but got {arg.value!r}")
            return np.int64(value)
        if not isinstance(t, ScalarType):
            raise LaunchError(f"argument '{name}' has type {t}, which a launch cannot pass")
        if isinstance(value, np.generic):
            value = value.item()
        if t.is_bool:
            return np.bool_(bool(value))
        if t.is_float:
            return round_f64_to(np.float64(value), t)
        if not isinstance(value, (int, bool)):
            raise LaunchError(f"argument '{name}' has type {t} but got {value!r}")
        unsigned = np.dtype(f"u{t.np.itemsize}")
        return np.array(int(value) % (1 << t.bits), unsigned).view(t.np)[()]

    # -- errors ------------------------------------------------------------------------------
    def _pid_text(self) -> str:
        return "(" + ", ".join(str(int(p)) for p in self.state.pid) + ")"

    def error(self, op: Op, what: str, detail: str = "", cls: type = LaunchError) -> LaunchError:
        """A launch error at ``op``'s source line: "``what`` in program (x, y, z): ``detail``"."""
        message = f"{what} in program {self._pid_text()}" + (f": {detail}" if detail else "")
        return cls(message, op.loc, source_line(op.loc))

    def _access_error(self, op: Op, exc: AccessViolation) -> LaunchError:
        name = _access_name(op)
        if exc.kind == "bounds":
            return self.error(op, f"out-of-bounds {name}", exc.detail, OutOfBoundsError)
        if exc.kind == "alignment":
            return self.error(op, f"misaligned {name}", exc.detail)
        return self.error(op, f"{name} failed", exc.detail)

    def assert_failure(self, op: Any, cond: Any) -> DeviceAssertError:
        where = ""
        if np.ndim(cond):
            lane = tuple(int(i) for i in np.argwhere(np.logical_not(cond))[0])
            where = f" (first failing lane {lane})"
        return self.error(op, "device_assert failed", f"{op.message or 'assertion failed'}{where}",
                          DeviceAssertError)


def _check_grid(grid: Sequence[int]) -> tuple[int, int, int]:
    dims = tuple(int(g) for g in grid) + (1,) * (3 - len(tuple(grid)))
    if len(dims) != 3 or any(g < 0 for g in dims) or any(g >= 2**31 for g in dims):
        raise LaunchError(f"grid must be up to 3 non-negative sizes below 2^31, got {tuple(grid)}")
    return dims  # type: ignore[return-value]
