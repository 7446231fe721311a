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
from .mma import mma_warps
from .pipeline import pipeline_dot_operands, pipeline_loops
from .target import GpuTarget

__all__ = ["SimulatedGpuTarget", "SimulatedKernel", "simulate_kernel", "lower_for_simulation"]

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
        self.scratch = np.zeros(_MAX_THREADS * 8, np.uint64)


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
        scratch = self.scratch(b)
        tid = self.thread_id(b)
        self.barrier(b)
        b.store(value, b.gep(scratch, [tid], source_etype=I32))
        self.barrier(b)
        other = b.xor(tid, ir.Constant(I32, lane_mask))
        out = b.load(b.gep(scratch, [other], source_etype=I32), typ=I32)
        return out

    def scratch(self, b: ir.IRBuilder) -> ir.Value:
        scratch = b.module.globals.get("anytile_sim_scratch")
        if scratch is None:
            scratch = ir.GlobalVariable(b.module, ir.ArrayType(I32, 0), "anytile_sim_scratch")
            scratch.linkage = "external"
            scratch.type = ir.PointerType()
        return scratch

    has_async_copy = True

    def async_copy(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int,
                   mask: Optional[ir.Value]) -> None:
        """Emulated synchronously: the copy has landed when the hook returns (so the
        pipeline's indexing is checked here, its waits only on the GPU)."""
        t = ir.IntType(8 * nbytes)
        if mask is None:
            b.store(b.load(src, typ=t), dst)
            return
        b.store(ir.Constant(t, 0), dst)
        with b.if_then(mask):
            b.store(b.load(src, typ=t), dst)

    has_mma = True

    def mma_m16n8k16(self, b: ir.IRBuilder, in_type: str, a: list, bfrag: list, c: list) -> list:
        """The warp-wide product emulated from the PTX ISA's fragment tables (see ``_mma``):
        A (row, k) sits in lane 4 * row + k % 8 // 2, register (row >= 8) + 2 * (k >= 8), half
        k % 2; B (k, col) in lane 4 * col + k % 8 // 2, register 4 + (k >= 8), half k % 2."""
        def a_at(k: int, high_row: bool) -> tuple:
            return (k % 8) // 2, high_row + 2 * (k >= 8), k % 2

        def b_at(k: int) -> tuple:
            return (k % 8) // 2, 4 + (k >= 8), k % 2
        return self._mma(b, in_type, a, bfrag, c, 16, a_at, b_at)

    def to_tf32(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """Round to 10 mantissa bits, ties away from zero (``cvt.rna``; finite inputs)."""
        bits = b.bitcast(x, I32)
        return b.and_(b.add(bits, ir.Constant(I32, 0x1000)), ir.Constant(I32, -0x2000))

    def mma_m16n8k8_tf32(self, b: ir.IRBuilder, a: list, bfrag: list, c: list) -> list:
        """Like ``mma_m16n8k16`` from the m16n8k8 tf32 table: A (row, k) sits in lane
        4 * row + k % 4, register (row >= 8) + 2 * (k >= 4); B (k, col) in lane 4 * col + k % 4,
        register 4 + (k >= 4); one element per register."""
        def a_at(k: int, high_row: bool) -> tuple:
            return k % 4, high_row + 2 * (k >= 4), None

        def b_at(k: int) -> tuple:
            return k % 4, 4 + (k >= 4), None
        return self._mma(b, "tf32", a, bfrag, c, 8, a_at, b_at)

    def _mma(self, b: ir.IRBuilder, in_type: str, a: list, bfrag: list, c: list, depth: int,
             a_at, b_at) -> list:
        """Every thread publishes its 6 fragment registers, then computes its 4 outputs (rows
        g and g + 8, columns 2t and 2t + 1 for lane 4g + t) from its warp's.  ``a_at(k,
        high_row)`` / ``b_at(k)``: (lane offset within the row's or column's 4 lanes,
        register, 16-bit half or ``None`` for a 32-bit element) holding that element."""
        scratch = self.scratch(b)
        tid = self.thread_id(b)
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        slot = b.add(k32(_MAX_THREADS), b.mul(tid, k32(8)))
        self.barrier(b)
        for j, v in enumerate(list(a) + list(bfrag)):
            b.store(v, b.gep(scratch, [b.add(slot, k32(j))], source_etype=I32))
        self.barrier(b)
        lane = b.and_(tid, k32(31))
        warp_base = b.sub(tid, lane)
        g, t = b.lshr(lane, k32(2)), b.and_(lane, k32(3))
        f32 = ir.FloatType()

        def element(row_or_col: ir.Value, where: tuple) -> ir.Value:
            offset, reg, half = where
            holder = b.add(b.mul(row_or_col, k32(4)), k32(offset))
            index = b.add(b.add(k32(_MAX_THREADS), b.mul(b.add(warp_base, holder), k32(8))), k32(reg))
            word = b.load(b.gep(scratch, [index], source_etype=I32), typ=I32)
            if half is None:
                return b.bitcast(word, f32)
            bits = b.trunc(b.lshr(word, k32(16 * half)), ir.IntType(16))
            if in_type == "f16":
                return b.fpext(b.bitcast(bits, ir.HalfType()), f32)
            return b.bitcast(b.shl(b.zext(bits, I32), k32(16)), f32)

        fma = self.declare(b.module, "llvm.fma.f32", f32, [f32, f32, f32])
        out = []
        for ci in range(4):
            col = b.add(b.mul(t, k32(2)), k32(ci & 1))
            acc = c[ci]
            for k in range(depth):
                acc = b.call(fma, [element(g, a_at(k, ci >= 2)), element(col, b_at(k)), acc])
            out.append(acc)
        self.barrier(b)
        return out

    def ldmatrix_x4(self, b: ir.IRBuilder, address: ir.Value, trans: bool) -> list:
        """Emulated from the PTX ISA's description: lanes publish their row addresses, then
        each reads its pairs from the rows the table gives it."""
        i64, i16 = ir.IntType(64), ir.IntType(16)
        scratch = self.scratch(b)
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        tid = self.thread_id(b)
        region = 5 * _MAX_THREADS  # in i64 units, past the shuffle and mma areas
        self.barrier(b)
        b.store(b.ptrtoint(address, i64), b.gep(scratch, [b.add(k32(region), tid)], source_etype=i64))
        self.barrier(b)
        lane = b.and_(tid, k32(31))
        warp_base = b.sub(tid, lane)
        g, t = b.lshr(lane, k32(2)), b.and_(lane, k32(3))

        def row_address(matrix: int, row: ir.Value) -> ir.Value:
            slot = b.add(k32(region), b.add(warp_base, b.add(k32(8 * matrix), row)))
            return b.inttoptr(b.load(b.gep(scratch, [slot], source_etype=i64), typ=i64), ir.PointerType())
        out = []
        for m in range(4):
            if not trans:
                out.append(b.load(b.gep(row_address(m, g), [t], source_etype=I32), typ=I32))
                continue
            two_t = b.mul(t, k32(2))
            lo = b.load(b.gep(row_address(m, two_t), [g], source_etype=i16), typ=i16)
            hi = b.load(b.gep(row_address(m, b.add(two_t, k32(1))), [g], source_etype=i16), typ=i16)
            out.append(b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), k32(16))))
        self.barrier(b)
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


class SimulatedKernel:
    """LLVM IR from the lowering (``SimulatedGpuTarget``), jitted for the host, runnable."""

    def __init__(self, llir: str, name: str, param_types: Sequence[Any], threads: int) -> None:
        llvm = _llvm()
        parsed = llvm.parse_assembly(llir)
        # the host's own features (F16C converts half floats without library calls)
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
        parsed.data_layout = str(tm.target_data)
        parsed.verify()
        self.engine = llvm.create_mcjit_compiler(parsed, tm)
        self.engine.finalize_object()
        self.argtypes = [ctypes.c_void_p if isinstance(t, PointerType) else _CTYPES[t.name]
                         for t in param_types]
        self.fn = ctypes.CFUNCTYPE(None, *self.argtypes)(self.engine.get_function_address(name))
        self.threads = threads

    def values(self, args: Sequence[Any]) -> list:
        """ctypes values for ``args``: NumPy arrays or ints for pointers, numbers for scalars."""
        out = []
        for a, t in zip(args, self.argtypes):
            if isinstance(a, np.ndarray):
                out.append(ctypes.c_void_p(a.ctypes.data))
            elif t is ctypes.c_int32 and isinstance(a, (bool, np.bool_)):
                out.append(t(int(a)))
            else:
                out.append(t(a))
        return out

    def run(self, grid: Sequence[int], args: Sequence[Any]) -> None:
        """Run every program of ``grid`` (one after another, each with all its threads)."""
        values = self.values(args)
        grid = tuple(grid) + (1,) * (3 - len(grid))
        failures: list = []
        fn = self.fn

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
                        _STATE.barrier = threading.Barrier(self.threads, timeout=60)
                        workers = [threading.Thread(target=worker, args=(t,)) for t in range(self.threads)]
                        for w in workers:
                            w.start()
                        for w in workers:
                            w.join()
        if failures:
            raise failures[0]


def lower_for_simulation(module: Module, num_warps: int, num_stages: int = 3) -> tuple[str, int]:
    """(LLVM IR text for the host simulation, bytes of shared memory) of ``module``'s kernel."""
    module = copy.deepcopy(module)
    if num_stages > 1:
        pipeline_dot_operands(module.kernel, num_stages, lambda dot: mma_warps(
            dot, num_warps, SimulatedGpuTarget.warp_size) is not None, _SHARED_BYTES // 2)
        pipeline_loops(module.kernel)
    laid = assign_layouts(module, num_warps, SimulatedGpuTarget.warp_size,
                          use_mma=SimulatedGpuTarget.has_mma)
    llmod, shared, _ = lower_kernel(laid, SimulatedGpuTarget())
    if shared > _SHARED_BYTES:
        raise ValueError(f"kernel needs {shared} bytes of shared memory")
    return str(llmod), shared


def simulate_kernel(module: Module, grid: Sequence[int], args: Sequence[Any],
                    num_warps: int = 4) -> str:
    """Run ``module``'s kernel over ``grid`` with ``args`` (NumPy arrays for pointers, Python
    numbers for scalars; arrays are updated in place).  Returns the LLVM IR that ran."""
    text, _ = lower_for_simulation(module, num_warps)
    kernel = module.kernel
    sim = SimulatedKernel(text, kernel.name, [a.type for a in kernel.args],
                          num_warps * SimulatedGpuTarget.warp_size)
    sim.run(grid, args)
    return text
