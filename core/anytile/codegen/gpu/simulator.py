"""Run the shared GPU lowering's output on the host CPU, one OS thread per GPU thread.

This is a test instrument, not a backend: it checks the layout math, the reductions, the
shared-memory exchanges and the control flow of ``anytile.codegen.gpu`` on machines without
a GPU.  ``SimulatedGpuTarget`` answers the lowering's hooks for the host:

* thread and program ids come from Python callbacks reading per-thread state;
* ``barrier`` is a ``threading.Barrier`` shared by the program's threads;
* ``shuffle_xor`` goes through a scratch array and two barriers (every shuffle the lowering
  emits is executed by all threads of the program, as on the GPU);
* shared memory is one process-wide buffer (one program runs at a time);
* math functions are the C library's.

Programs of a grid run one after another; the threads of a program run concurrently (the
GIL is released while LLVM code runs, and taken back only in the callbacks).
"""
from __future__ import annotations

import copy
import ctypes
import threading
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np
from llvmlite import ir

from ...ir.core import Module
from ...ir.types import PointerType
from .assign import assign_layouts
from .lowering import lower_kernel
from .target import GpuTarget

__all__ = ["SimulatedGpuTarget", "simulate_kernel"]

I32 = ir.IntType(32)
_SHARED_BYTES = 1 << 18
_MAX_THREADS = 1024
_LIBM = {"exp": ("expf", "exp"), "exp2": ("exp2f", "exp2"), "log": ("logf", "log"),
         "log2": ("log2f", "log2"), "sin": ("sinf", "sin"), "cos": ("cosf", "cos"),
         "erf": ("erff", "erf"), "tanh": ("tanhf", "tanh")}


class _State:
    """What the callbacks read: the running program and each thread's id."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.program = (0, 0, 0)
        self.grid = (1, 1, 1)
        self.barrier: Optional[threading.Barrier] = None
        self.lock = threading.Lock()
        self.shared = np.zeros(_SHARED_BYTES, np.uint8)
        self.scratch = np.zeros(_MAX_THREADS * 2, np.uint64)


_STATE = _State()

_TID_T = ctypes.CFUNCTYPE(ctypes.c_int32)
_AXIS_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)
_VOID_T = ctypes.CFUNCTYPE(None)


def _tid() -> int:
    return _STATE.local.tid


def _pid(axis: int) -> int:
    return _STATE.program[axis]


def _npid(axis: int) -> int:
    return _STATE.grid[axis]


def _barrier() -> None:
    _STATE.barrier.wait()


_CALLBACKS = {"anytile_sim_tid": _TID_T(_tid), "anytile_sim_pid": _AXIS_T(_pid),
              "anytile_sim_npid": _AXIS_T(_npid), "anytile_sim_barrier": _VOID_T(_barrier)}


@lru_cache(maxsize=None)
def _llvm() -> Any:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for name, cb in _CALLBACKS.items():
        llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)
    llvm.add_symbol("anytile_smem", _STATE.shared.ctypes.data)
    llvm.add_symbol("anytile_sim_scratch", _STATE.scratch.ctypes.data)
    return llvm


class SimulatedGpuTarget(GpuTarget):
    """The hooks of the host simulation (see the module docstring)."""

    warp_size = 32
    global_address_space = 0
    shared_address_space = 0

    def __init__(self) -> None:
        self.triple = _llvm().get_process_triple()

    def _call(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
        fn = self.declare(b.module, name, ret, [a.type for a in args])
        return b.call(fn, args)

    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._call(b, "anytile_sim_tid", I32, [])

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._call(b, "anytile_sim_pid", I32, [ir.Constant(I32, axis)])

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._call(b, "anytile_sim_npid", I32, [ir.Constant(I32, axis)])

    def barrier(self, b: ir.IRBuilder) -> None:
        self._call(b, "anytile_sim_barrier", ir.VoidType(), [])

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        scratch = b.module.globals.get("anytile_sim_scratch")
        if scratch is None:
            scratch = ir.GlobalVariable(b.module, ir.ArrayType(I32, 0), "anytile_sim_scratch")
            scratch.linkage = "external"
            scratch.type = ir.PointerType()
        tid = self.thread_id(b)
        self.barrier(b)
        b.store(value, b.gep(scratch, [tid], source_etype=I32))
        self.barrier(b)
        other = b.xor(tid, ir.Constant(I32, lane_mask))
        out = b.load(b.gep(scratch, [other], source_etype=I32), typ=I32)
        return out

    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        names = _LIBM.get(kind)
        if names is None:
            return None
        name = names[1] if isinstance(x.type, ir.DoubleType) else names[0]
        return self._call(b, name, x.type, [x])

    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        pass


_CTYPES = {"i1": ctypes.c_int32, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
           "i64": ctypes.c_int64, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
           "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "f32": ctypes.c_float,
           "f64": ctypes.c_double, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16}


def compile_simulated(module: Module, num_warps: int) -> tuple[str, Any, list, int]:
    """(LLVM IR text, the jitted engine, the ctypes parameter types, threads)."""
    llvm = _llvm()
    laid = assign_layouts(copy.deepcopy(module), num_warps, SimulatedGpuTarget.warp_size)
    llmod, shared = lower_kernel(laid, SimulatedGpuTarget())
    if shared > _SHARED_BYTES:
        raise ValueError(f"kernel needs {shared} bytes of shared memory")
    text = str(llmod)
    parsed = llvm.parse_assembly(text)
    # the host's own features (F16C converts half floats without library calls)
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    parsed.data_layout = str(tm.target_data)
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, tm)
    engine.finalize_object()
    kernel = laid.kernel
    argtypes = [ctypes.c_void_p if isinstance(a.type, PointerType) else _CTYPES[a.type.name]
                for a in kernel.args]
    return text, engine, argtypes, num_warps * SimulatedGpuTarget.warp_size


def simulate_kernel(module: Module, grid: Sequence[int], args: Sequence[Any],
                    num_warps: int = 4) -> str:
    """Run ``module``'s kernel over ``grid`` with ``args`` (NumPy arrays for pointers, Python
    numbers for scalars; arrays are updated in place).  Returns the LLVM IR that ran."""
    text, engine, argtypes, threads = compile_simulated(module, num_warps)
    name = module.kernel.name
    fn = ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))
    values = []
    for a, t in zip(args, argtypes):
        if isinstance(a, np.ndarray):
            values.append(ctypes.c_void_p(a.ctypes.data))
        elif t is ctypes.c_int32 and isinstance(a, (bool, np.bool_)):
            values.append(t(int(a)))
        else:
            values.append(t(a))
    grid = tuple(grid) + (1,) * (3 - len(grid))
    failures: list = []

    def worker(tid: int) -> None:
        _STATE.local.tid = tid
        try:
            fn(*values)
        except Exception as exc:  # pragma: no cover - reported below
            failures.append(exc)

    with _STATE.lock:
        _STATE.grid = grid
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    _STATE.program = (x, y, z)
                    _STATE.barrier = threading.Barrier(threads, timeout=60)
                    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
                    for w in workers:
                        w.start()
                    for w in workers:
                        w.join()
    if failures:
        raise failures[0]
    _ = engine  # keep the code alive until every thread is done
    return text
