"""Hopper's warpgroup MMA emulated on the host simulator, for tests without a GPU.

``EmulatedWarpgroup`` has the methods of ``warpgroup.WarpgroupInstructions`` and emits calls
to host functions instead of PTX.  Each GPU thread keeps its own queue of issued MMAs, as the
hardware does: ``mma`` records the two descriptors and returns the accumulator unchanged,
``commit`` closes a group, and ``wait(pending)`` retires the oldest groups until
``pending`` are left.  Those reads of shared memory happen at the wait that retires them,
the latest moment the hardware could make them, while the simulator's copies land at once,
the earliest: so a pipeline that refilled a slot an MMA in flight still reads gives wrong
results here.  Each MMA belongs to one lowered dot (its ``site``): its products go into the
registers the next wait of that same dot passes, which may be a later wait than the one
that retired it (two dots in one loop, each waiting for what the other issued).

The descriptors are decoded as the PTX ISA describes them (start address, leading and
stride byte offsets in 16-byte units, the swizzle mode), A K-major and B K- or N-major, each
operand byte's address swizzled as the hardware does (bits 4.. XOR bits 7..).  An A given in
registers is published by every thread at the issue (a barrier of the program: the
instruction is warpgroup-wide) and gathered from its warp's threads at the wait.  The thread's
accumulator elements follow the ``m64nNk16`` accumulator layout (warp ``w`` of the
warpgroup: rows ``16 w + lane / 4`` and ``+ 8``, columns ``8 i + 2 (lane % 4)`` and ``+ 1``).
The shared window's addresses are offsets from the start of the simulated shared memory.
"""
from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np
from llvmlite import ir

from .warpgroup import SWIZZLE_MODES, WarpgroupDot, WarpgroupInstructions

__all__ = ["EmulatedWarpgroup", "simulated_hopper_target"]

I32, I64 = ir.IntType(32), ir.IntType(64)
_WIDTHS = {mode: width for width, mode in SWIZZLE_MODES.items()}
_TYPES = {"f16": 0, "bf16": 1, "f8e4m3": 2, "f8e5m2": 3, "i8": 4}
_ISSUE_T = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, *[ctypes.c_int32] * 5)
_ISSUE_REGS_T = ctypes.CFUNCTYPE(None, *[ctypes.c_uint32] * 4, ctypes.c_uint64, *[ctypes.c_int32] * 5)
_COMMIT_T = ctypes.CFUNCTYPE(None)
_WAIT_T = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                           ctypes.c_int32)
#: (program, thread, issue number) -> the four A registers a thread gave an MMA
_FRAGMENTS: dict = {}


def _queues() -> Any:
    from anytile.codegen.gpu.simulator import thread_state
    state = thread_state()
    if not hasattr(state, "wgmma_open"):
        state.wgmma_open, state.wgmma_groups, state.wgmma_issued = [], [], 0
        state.wgmma_done = {}       # dot site -> products retired by another dot's wait
    return state


def _issue(desc_a: int, desc_b: int, n: int, kind: int, place: int, b_k_major: int,
           site: int) -> None:
    _queues().wgmma_open.append((desc_a, None, desc_b, n, kind, place, b_k_major, site))


def _issue_registers(a0: int, a1: int, a2: int, a3: int, desc_b: int, n: int, kind: int,
                     place: int, b_k_major: int, site: int) -> None:
    from anytile.codegen.gpu.simulator import current_program, program_barrier, thread_state
    state = _queues()
    key = (current_program(), thread_state().tid, state.wgmma_issued)
    _FRAGMENTS[key] = (a0, a1, a2, a3)
    state.wgmma_issued += 1
    program_barrier()              # every thread's fragment is there before any wait reads it
    state.wgmma_open.append((None, key, desc_b, n, kind, place, b_k_major, site))


def _commit() -> None:
    state = _queues()
    state.wgmma_groups.append(state.wgmma_open)
    state.wgmma_open = []


def _wait(site: int, pending: int, address: int, count: int, integer: int) -> None:
    """Retire the oldest groups until ``pending`` are left (their reads of shared memory
    happen now); the products of dot ``site``'s MMAs go into ``acc`` (its registers: floats,
    or 32-bit integers that wrap, with ``integer``), those of another dot's wait until that
    dot's next wait passes its registers."""
    from anytile.codegen.gpu.simulator import thread_state
    state = _queues()
    acc = np.ctypeslib.as_array(((ctypes.c_int32 if integer else ctypes.c_float) * count).from_address(address))
    tid = thread_state().tid
    while len(state.wgmma_groups) > pending:
        for desc_a, key, desc_b, n, kind, place, b_k_major, owner in state.wgmma_groups.pop(0):
            products = _products(tid, desc_a, key, desc_b, n, kind, bool(b_k_major))
            state.wgmma_done.setdefault(owner, []).append((place, products))
    for place, products in state.wgmma_done.pop(site, []):
        window = acc[place:place + len(products)]
        if integer:
            window[:] = (window.astype(np.int64) + products).astype(np.uint32).view(np.int32)
        else:
            window += products


def _decode(desc: int) -> tuple[int, int, int, int]:
    """(start, leading, stride, width) of a matrix descriptor, in bytes."""
    field = lambda shift: (desc >> shift & 0x3FFF) << 4  # noqa: E731
    mode = desc >> 62 & 3
    if mode not in _WIDTHS:
        raise ValueError(f"the emulation reads swizzled operands only, found swizzle mode {mode}")
    return field(0), field(16), field(32), _WIDTHS[mode]


def _elem_bytes(kind: int) -> int:
    return 1 if kind >= _TYPES["f8e4m3"] else 2


def _read(address: np.ndarray, width: int, kind: int) -> np.ndarray:
    """The elements of type ``kind`` at (unswizzled) byte ``address``es, as float64 (int64 for
    int8)."""
    from anytile.codegen.gpu.simulator import shared_memory
    shared = shared_memory()
    swizzled = address ^ (((address >> 7) & (width // 16 - 1)) << 4)
    if kind == _TYPES["i8"]:
        return shared[swizzled].astype(np.uint8).view(np.int8).astype(np.int64)
    if _elem_bytes(kind) == 1:
        fmt = ml_dtypes.float8_e4m3fn if kind == _TYPES["f8e4m3"] else ml_dtypes.float8_e5m2
        return shared[swizzled].astype(np.uint8).view(fmt).astype(np.float64)
    bits = shared[swizzled].astype(np.uint16) | (shared[swizzled + 1].astype(np.uint16) << 8)
    if kind == _TYPES["f16"]:
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _register_a(key: tuple, tid: int, rows: np.ndarray, kind: int) -> np.ndarray:
    """A[rows, 0..K-1] gathered from the registers the threads of ``tid``'s warpgroup gave
    the MMA issued as ``key`` (the ``mma.m16n8k16`` A fragment of each warp's 16 rows, or
    for 8-bit elements the ``m16n8k32`` one: register ``2 (k // 16) + row // 8`` of lane
    ``4 (row % 8) + k % 16 // 4``, byte ``k % 4``)."""
    program, _, issued = key
    first = tid - tid % 128
    if _elem_bytes(kind) == 1:
        out8 = np.empty((len(rows), 32), np.uint8)
        for x, row in enumerate(rows):
            warp, local = divmod(int(row), 16)
            for kk in range(32):
                lane = 4 * (local % 8) + kk % 16 // 4
                word = _FRAGMENTS[(program, first + 32 * warp + lane, issued)][2 * (kk // 16) + local // 8]
                out8[x, kk] = word >> 8 * (kk % 4) & 0xFF
        if kind == _TYPES["i8"]:
            return out8.view(np.int8).astype(np.int64)
        fmt = ml_dtypes.float8_e4m3fn if kind == _TYPES["f8e4m3"] else ml_dtypes.float8_e5m2
        return out8.view(fmt).astype(np.float64)
    k = np.arange(16)
    out = np.empty((len(rows), 16), np.uint16)
    for x, row in enumerate(rows):
        warp, local = divmod(int(row), 16)
        for kk in k:
            lane = 4 * (local % 8) + kk % 8 // 2
            e = (kk & 1) + 2 * (local // 8) + 4 * (kk // 8)
            word = _FRAGMENTS[(program, first + 32 * warp + lane, issued)][e // 2]
            out[x, kk] = word >> 16 * (e % 2) & 0xFFFF
    if kind == _TYPES["f16"]:
        return out.view(np.float16).astype(np.float64)
    return (out.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _products(tid: int, desc_a: Any, key: Any, desc_b: int, n: int, kind: int,
              b_k_major: bool) -> np.ndarray:
    """One ``m64nNkK`` MMA's share of thread ``tid`` (of its warpgroup): its ``n / 2``
    accumulator elements' sums of products, read from shared memory now.  ``kind``: A's
    element type, and B's times 16 (K: 32 bytes of a row, 16 or 32 elements)."""
    kind_a, kind_b = kind & 15, kind >> 4
    size = _elem_bytes(kind_a)
    warp, lane = divmod(tid % 128, 32)
    e = np.arange(n // 2)
    rows = 16 * warp + lane // 4 + 8 * (e >> 1 & 1)
    cols = 8 * (e >> 2) + 2 * (lane % 4) + (e & 1)
    k = np.arange(32 // size)
    if desc_a is None:
        a = _register_a(key, tid, rows, kind_a)
    else:
        start, leading, stride, width = _decode(desc_a)      # A: K-major
        a_bytes = size * k[None, :]
        a = _read(start + rows[:, None] // 8 * stride + rows[:, None] % 8 * width
                  + a_bytes // width * leading + a_bytes % width, width, kind_a)
    start, leading, stride, width = _decode(desc_b)
    if b_k_major:                                           # N rows of K bytes, as A
        k_bytes = size * k[None, :]
        b = _read(start + cols[:, None] // 8 * stride + cols[:, None] % 8 * width
                  + k_bytes // width * leading + k_bytes % width, width, kind_b)
    else:                                                   # K rows of N bytes (16-bit)
        b_bytes = 2 * cols[:, None]
        b = _read(start + b_bytes // width * leading + k[None, :] // 8 * stride
                  + k[None, :] % 8 * width + b_bytes % width, width, kind_b)
    products = (a * b).sum(axis=1)
    return products if kind_a == _TYPES["i8"] else products.astype(np.float32)


class EmulatedWarpgroup(WarpgroupInstructions):
    """The warpgroup MMA's instructions as calls into the emulation (see the module doc)."""

    _registered = False

    def __init__(self) -> None:
        if not EmulatedWarpgroup._registered:
            from anytile.codegen.gpu.simulator import add_callback
            add_callback("anytile_sim_wgmma_issue", _ISSUE_T(_issue))
            add_callback("anytile_sim_wgmma_issue_registers", _ISSUE_REGS_T(_issue_registers))
            add_callback("anytile_sim_wgmma_commit", _COMMIT_T(_commit))
            add_callback("anytile_sim_wgmma_wait", _WAIT_T(_wait))
            EmulatedWarpgroup._registered = True

    @staticmethod
    def _call(b: ir.IRBuilder, name: str, args: list) -> None:
        fn = b.module.globals.get(name)
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(ir.VoidType(), [a.type for a in args]), name)
        b.call(fn, args)

    def descriptor(self, b: ir.IRBuilder, address: ir.Value, leading: int, width: int) -> ir.Value:
        smem = b.module.globals["anytile_smem"]
        offset = b.sub(b.ptrtoint(address, I64), b.ptrtoint(smem, I64))
        start = b.lshr(b.and_(offset, ir.Constant(I64, 0x3FFFF)), ir.Constant(I64, 4))
        fields = ((leading >> 4) << 16) | ((8 * width >> 4) << 32) | (SWIZZLE_MODES[width] << 62)
        return b.or_(start, ir.Constant(I64, fields))

    def fence(self, b: ir.IRBuilder) -> None:
        pass

    def mma(self, b: ir.IRBuilder, in_types: tuple[str, str], n: int, a: Any, desc_b: ir.Value,
            b_k_major: bool, acc: list, place: int, site: int) -> list:
        kind = _TYPES[in_types[0]] | _TYPES[in_types[1]] << 4
        tail = [desc_b] + [ir.Constant(I32, v) for v in (n, kind, place, int(b_k_major), site)]
        if isinstance(a, list):
            self._call(b, "anytile_sim_wgmma_issue_registers", list(a) + tail)
        else:
            self._call(b, "anytile_sim_wgmma_issue", [a] + tail)
        return list(acc)

    def float8_pair(self, b: ir.IRBuilder, elem: Any, lo: ir.Value, hi: ir.Value) -> Any:
        return None          # the simulator converts as the cast does

    def commit(self, b: ir.IRBuilder) -> None:
        self._call(b, "anytile_sim_wgmma_commit", [])

    def wait(self, b: ir.IRBuilder, acc: list, pending: int, site: int) -> list:
        entry = ir.IRBuilder(b.function.entry_basic_block)
        entry.position_at_start(b.function.entry_basic_block)
        kind = acc[0].type
        buf = entry.alloca(ir.ArrayType(kind, len(acc)))
        slots = [b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, i)]) for i in range(len(acc))]
        for v, slot in zip(acc, slots):
            b.store(v, slot)
        self._call(b, "anytile_sim_wgmma_wait", [ir.Constant(I32, site), ir.Constant(I32, pending),
                                                 b.bitcast(buf, ir.IntType(8).as_pointer()),
                                                 ir.Constant(I32, len(acc)),
                                                 ir.Constant(I32, int(isinstance(kind, ir.IntType)))])
        return [b.load(slot, typ=kind) for slot in slots]


def simulated_hopper_target(copies: Any = None) -> Any:
    """The host simulator's NVIDIA target (``simulated.simulated_nvidia_target``) with the
    warpgroup MMA as its first dot strategy, emulated (see the module doc), and the ``nvidia``
    dialect; ``copies``: its copies of whole boxes (``tma_sim.EmulatedTensorCopies``), or
    ``None``."""
    from .passes import nvidia_dialect
    from .simulated import simulated_nvidia_target
    target = simulated_nvidia_target()
    strategy = WarpgroupDot(EmulatedWarpgroup())
    target.dot_strategies = lambda: (strategy,)
    target.dialects = (nvidia_dialect(copies),)
    return target
