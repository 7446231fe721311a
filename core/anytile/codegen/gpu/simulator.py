"""Run the shared GPU lowering's output on the host CPU, one OS thread per GPU thread.

This is a test instrument, not a backend: it checks the layout math, the reductions, the
shared-memory exchanges, the matrix-instruction placement and the control flow of
``anytile.codegen.gpu`` on machines without a GPU.  ``SimulatedGpuTarget`` answers the
lowering's hooks for the host, at any warp size (32 or 64), with any table of matrix
instructions:

* thread and program ids come from Python callbacks reading per-thread state;
* ``barrier`` is a ``threading.Barrier`` shared by the program's threads;
* ``shuffle_xor``/``shuffle_idx`` go through a scratch array and two barriers (every
  shuffle the lowering emits is executed by all threads of the program, as on the GPU);
* a matrix instruction is executed from its ``MatrixInstr`` record alone: every lane writes
  its A and B elements where the fragment maps say, then computes its accumulator elements
  from its warp's tiles (so a wrong map, or registers placed against it, give wrong results);
* asynchronous copies (when ``async_copy_sizes`` says the target has them) complete at once;
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
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from llvmlite import ir

from ...backend import CompileOptions
from ...gpu_host import SCALAR_CTYPES
from ...ir.nodes import Module
from ...ir.types import PointerType
from ..llvm.types import declare, string_constant
from .compile import lay_out, lower_to_llvm
from .fragments import FragmentLoader, lane_value
from .matrix import TYPE_BITS, FragmentMap, MatrixInstr, geometry
from .target import GpuTarget

__all__ = ["SimulatedGpuTarget", "SimulatedKernel", "simulate_kernel", "lower_for_simulation",
           "add_callback", "shared_memory", "thread_state", "program_barrier", "current_program"]

I32 = ir.IntType(32)
F32 = ir.FloatType()
_SHARED_BYTES = 1 << 18
_MAX_THREADS = 1024
_MATRIX_WORDS = 1 << 16            # scratch words for the matrix tiles of every warp
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
        # page-aligned, as the GPU's shared window is: a layout aligned to its swizzle period
        # is aligned here too
        raw = np.zeros(_SHARED_BYTES + 4096, np.uint8)
        self.shared = raw[(-raw.ctypes.data) % 4096:][:_SHARED_BYTES]
        self.scratch = np.zeros(_MAX_THREADS + _MATRIX_WORDS, np.uint32)


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


def add_callback(name: str, callback: Any) -> None:
    """Make the ctypes function ``callback`` callable from simulated code as ``name`` (a
    target's emulation of an instruction the host lacks); kept alive for the process."""
    _CALLBACKS[name] = callback
    _llvm().add_symbol(name, ctypes.cast(callback, ctypes.c_void_p).value)


def shared_memory() -> np.ndarray:
    """The simulated shared memory (bytes; a program's starts at element 0)."""
    return _STATE.shared


def program_barrier() -> None:
    """Wait for every thread of the running program (an emulation's exchange between
    threads; every thread must call it the same number of times)."""
    _STATE.barrier.wait()


def current_program() -> tuple[int, int, int]:
    """The id of the program being run."""
    return _STATE.program


def thread_state() -> Any:
    """The calling GPU thread's own state (a ``threading.local``: ``tid`` and whatever an
    emulation keeps there)."""
    return _STATE.local


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
    """The hooks of the host simulation (see the module docstring).  ``matrix_instrs``: the
    instruction table to execute (none: dots use FMAs); ``fragment_loaders``: a target's own
    fragment loaders by instruction (written against the hooks here, e.g. with
    ``shuffle_idx``); ``async_copy_sizes``: () runs pipelined copies through registers."""

    name = "the host simulation"
    #: whether the simulated target has a device printf (a subclass may say it has none)
    has_printf = True
    global_address_space = 0
    shared_address_space = 0
    max_threads = _MAX_THREADS
    shared_memory_limit = _SHARED_BYTES // 2

    def __init__(self, warp_size: int = 32, matrix_instrs: Sequence[MatrixInstr] = (),
                 fragment_loaders: Optional[Mapping[MatrixInstr, FragmentLoader]] = None,
                 async_copy_sizes: Sequence[int] = (4, 8, 16)) -> None:
        self.triple = _llvm().get_process_triple()
        self.warp_size = warp_size
        self.matrix_instrs = tuple(matrix_instrs)
        self.loaders = dict(fragment_loaders or {})
        self.async_copy_sizes = tuple(async_copy_sizes)

    def _call(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
        fn = self.declare(b.module, name, ret, [a.type for a in args])
        return b.call(fn, args)

    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._call(b, "anytile_sim_tid", I32, [])

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._call(b, "anytile_sim_pid", I32, [ir.Constant(I32, axis)])

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._call(b, "anytile_sim_npid", I32, [ir.Constant(I32, axis)])

    def printf(self, b: ir.IRBuilder, text: str, args: list) -> None:
        """The host C library's ``printf`` (then ``fflush``), called by each GPU thread."""
        if not self.has_printf:
            raise NotImplementedError("the simulated target has no device printf")
        ptr = ir.PointerType()
        b.call(declare(b.module, "printf", I32, [ptr], var_arg=True),
               [string_constant(b.module, text), *args])
        b.call(declare(b.module, "fflush", I32, [ptr]), [ir.Constant(ptr, None)])

    def barrier(self, b: ir.IRBuilder) -> None:
        self._call(b, "anytile_sim_barrier", ir.VoidType(), [])

    def _exchange(self, b: ir.IRBuilder, value: ir.Value, source) -> ir.Value:
        """Every thread publishes ``value``; returns that of thread ``source(tid)``."""
        scratch = self.scratch(b)
        tid = self.thread_id(b)
        self.barrier(b)
        b.store(value, b.gep(scratch, [tid], source_etype=I32))
        self.barrier(b)
        return b.load(b.gep(scratch, [source(tid)], source_etype=I32), typ=I32)

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        return self._exchange(b, value, lambda tid: b.xor(tid, ir.Constant(I32, lane_mask)))

    def shuffle_idx(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        def source(tid: ir.Value) -> ir.Value:
            return b.add(b.and_(tid, ir.Constant(I32, -self.warp_size)), lane)
        return self._exchange(b, value, source)

    def scratch(self, b: ir.IRBuilder) -> ir.Value:
        scratch = b.module.globals.get("anytile_sim_scratch")
        if scratch is None:
            scratch = ir.GlobalVariable(b.module, ir.ArrayType(I32, 0), "anytile_sim_scratch")
            scratch.linkage = "external"
            scratch.type = ir.PointerType()
        return scratch

    def async_copy(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int,
                   mask: Optional[ir.Value]) -> None:
        """Emulated synchronously: the copy has landed when the hook returns (so the
        pipeline's indexing is checked here, its waits only on a GPU)."""
        t = ir.IntType(8 * nbytes)
        if mask is None:
            b.store(b.load(src, typ=t), dst)
            return
        b.store(ir.Constant(t, 0), dst)
        with b.if_then(mask):
            b.store(b.load(src, typ=t), dst)

    def fragment_loader(self, instr: MatrixInstr) -> Optional[FragmentLoader]:
        return self.loaders.get(instr)

    def emit_matrix(self, b: ir.IRBuilder, instr: MatrixInstr, a: list, bregs: list,
                    acc: list) -> list:
        """``instr`` executed from its maps (see the module docstring)."""
        geo = geometry(instr)
        scratch = self.scratch(b)
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        tid = self.thread_id(b)
        lane = b.and_(tid, k32(instr.lanes - 1))
        size_a, size_b = instr.m * instr.k, instr.k * instr.n
        if _MAX_THREADS // instr.lanes * (size_a + size_b) > _MATRIX_WORDS:
            raise ValueError(f"{instr}: its tiles do not fit the simulator's scratch space")
        tiles = b.add(k32(_MAX_THREADS), b.mul(b.lshr(tid, k32(instr.lanes.bit_length() - 1)),
                                               k32(size_a + size_b)))
        integer = instr.acc_type != "f32"

        def word(index: ir.Value) -> ir.Value:
            return b.gep(scratch, [b.add(tiles, index)], source_etype=I32)

        def where(frag: FragmentMap, e: int, row: int) -> ir.Value:
            x, y = (self._coordinate(b, lane, frag, e, c, instr.lanes) for c in (0, 1))
            return b.add(b.mul(x, k32(row)), y)
        self.barrier(b)
        for regs, pack, frag, type_name, row, offset in (
                (a, instr.a_pack, geo.a, instr.a_type, instr.k, 0),
                (bregs, instr.b_pack, geo.b, instr.b_type, instr.n, size_a)):
            for e in range(len(regs) * pack):
                value = _unpack(b, regs[e // pack], e % pack, type_name)
                b.store(value, word(b.add(k32(offset), where(frag, e, row))))
        self.barrier(b)
        fma = None if integer else self.declare(b.module, "llvm.fma.f32", F32, [F32, F32, F32])
        out = []
        for e, c in enumerate(acc):
            row = self._coordinate(b, lane, geo.acc, e, 0, instr.lanes)
            col = self._coordinate(b, lane, geo.acc, e, 1, instr.lanes)
            for k in range(instr.k):
                x = b.load(word(b.add(b.mul(row, k32(instr.k)), k32(k))), typ=I32)
                y = b.load(word(b.add(k32(size_a + k * instr.n), col)), typ=I32)
                c = b.add(c, b.mul(x, y)) if integer else \
                    b.call(fma, [b.bitcast(x, F32), b.bitcast(y, F32), c])
            out.append(c)
        self.barrier(b)
        return out

    @staticmethod
    def _coordinate(b: ir.IRBuilder, lane: ir.Value, frag: FragmentMap, e: int, coord: int,
                    lanes: int) -> ir.Value:
        part = lane_value(b, lane, lanes, frag.fields(coord))
        base = ir.Constant(I32, frag.base[e][coord])
        return base if part is None else b.add(part, base)

    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        names = _LIBM.get(kind)
        if names is None:
            return None
        name = names[1] if isinstance(x.type, ir.DoubleType) else names[0]
        return self._call(b, name, x.type, [x])

    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        pass


def _unpack(b: ir.IRBuilder, reg: ir.Value, p: int, type_name: str) -> ir.Value:
    """Element ``p`` of a register as a 32-bit word: f32 bits for float formats (16-bit
    floats widened exactly), the sign-extended value for integers."""
    bits = TYPE_BITS[type_name]
    raw = b.lshr(reg, ir.Constant(reg.type, bits * p)) if p else reg
    raw = b.trunc(raw, ir.IntType(bits)) if reg.type.width != bits else raw
    if type_name == "f16":
        return b.bitcast(b.fpext(b.bitcast(raw, ir.HalfType()), F32), I32)
    if type_name == "bf16":
        return b.shl(b.zext(raw, I32), ir.Constant(I32, 16))
    if type_name in ("i8", "u8"):
        return b.sext(raw, I32) if type_name == "i8" else b.zext(raw, I32)
    return raw


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
        self.argtypes = [ctypes.c_void_p if isinstance(t, PointerType) else SCALAR_CTYPES[t.name]
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


def lower_for_simulation(module: Module, num_warps: int, num_stages: int = 3,
                         target: Optional[SimulatedGpuTarget] = None) -> tuple[str, int]:
    """(LLVM IR text for the host simulation, bytes of shared memory) of ``module``'s kernel,
    through the GPU compile pipeline every GPU backend runs."""
    module = copy.deepcopy(module)
    target = target or SimulatedGpuTarget()
    options = CompileOptions(num_warps=num_warps, num_stages=num_stages)
    metadata: dict = {}
    kernel = lower_to_llvm(lay_out(module, target, options, metadata), target, options, metadata)
    return str(kernel), kernel.shared_bytes


def simulate_kernel(module: Module, grid: Sequence[int], args: Sequence[Any], num_warps: int = 4,
                    target: Optional[SimulatedGpuTarget] = None) -> str:
    """Run ``module``'s kernel over ``grid`` with ``args`` (NumPy arrays for pointers, Python
    numbers for scalars; arrays are updated in place) on ``target`` (default: warps of 32, no
    matrix instructions).  Returns the LLVM IR that ran."""
    target = target or SimulatedGpuTarget()
    text, _ = lower_for_simulation(module, num_warps, target=target)
    kernel = module.kernel
    sim = SimulatedKernel(text, kernel.name, [a.type for a in kernel.args], num_warps * target.warp_size)
    sim.run(grid, args)
    return text
