"""The tensor memory accelerator's copies emulated on the host simulator, for tests without a
GPU.

``EmulatedTensorCopies`` is ``tma.TensorCopies`` with its instructions replaced by calls into
this module; the rest (which lane issues which box, where it lands in the slot, the barrier
ring, its phases and the waits) is the code the GPU runs.  The map parameters are plain
pointers to records ``host_map`` writes (the array's base, shape and row stride, the box,
element size and swizzle) instead of ``CUtensorMap``s.

Each barrier counts its completed phases.  A copy reads global memory when it is issued, and
its bytes count towards the barrier's current phase; they are written into shared memory only
when a thread's ``try_wait`` first sees that phase completed -- the latest moment the
hardware could land them, while everything else in the simulator happens at once -- so a
wait on the wrong barrier or phase, or a read of a slot before its wait, reads stale data.
A phase completes, as on the hardware, once thread 0 has arrived and the bytes copied
equal the bytes announced (``expect_tx``), in whatever order the simulated threads (which
run freely, not in lockstep) did those.  Box elements outside the array land as zeros; the
swizzle is applied to the shared address as the hardware does (bits 4.. XOR bits 7..).  A
wait that sees no progress for ``STALL_SECONDS`` gives up and records the stall in
``stalls`` (a hardware hang; a callback cannot raise into the simulated code).

A box store reads shared memory and writes the array when its thread waits for its reads
(``store_wait_read``), the latest moment the hardware could read: a tile overwritten before
that wait is caught.  Elements outside the array are not written.
"""
from __future__ import annotations

import ctypes
import struct
import threading
import time

import numpy as np
from llvmlite import ir

from anytile.ir.types import scalar_type

from .box_maps import BoxMap
from .tma import TensorCopies, map_geometry

__all__ = ["EmulatedTensorCopies", "host_map"]

I32, I64 = ir.IntType(32), ir.IntType(64)
#: base, rank, element bytes, swizzle bytes, dimensions[5], byte strides[4] (of dimensions
#: 1..), box[5]: innermost first, as ``tma.map_geometry`` gives them
_RECORD = struct.Struct("<QIII5Q4Q5I")
_V_I = ctypes.CFUNCTYPE(None, ctypes.c_int32)
_V_II = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32)
_COPY_T = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_uint64, *[ctypes.c_int32] * 5,
                           ctypes.c_int32)
_WAIT_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
_STORE_T = ctypes.CFUNCTYPE(None, ctypes.c_uint64, *[ctypes.c_int32] * 5, ctypes.c_int32)
_V = ctypes.CFUNCTYPE(None)
_LOCK = threading.RLock()


def host_map(box_map: BoxMap, base: int, rows: int, cols: int, row_stride: int) -> ctypes.Array:
    """The emulation's record of ``box_map`` over an array (a buffer to pass by address)."""
    elem = scalar_type(box_map.elem).nbytes
    dims, strides, box = map_geometry(box_map, rows, cols, row_stride, elem)
    n = len(dims)
    data = _RECORD.pack(base, n, elem, box_map.swizzle, *(dims + [1] * (5 - n)),
                        *(strides + [0] * (4 - len(strides))), *(box + [1] * (5 - n)))
    return (ctypes.c_uint8 * 128).from_buffer_copy(data.ljust(128, b"\0"))


STALL_SECONDS = 20.0
#: (program, barrier, parity) of each wait that gave up
stalls: list = []
#: the coordinates (innermost first) of every box copied, for tests to see which copies
#: went by box
copied: list = []


class _Barrier:
    def __init__(self) -> None:
        self.phase = 0            # completed phases
        self.arrived = False      # thread 0 arrived in the current phase
        self.expected = 0         # bytes announced for the current phase
        self.copied = 0           # bytes copied in the current phase
        self.open: list = []      # (shared offset, bytes) of the current phase
        self.landing: list = []   # of completed phases, not yet written

    def settle(self) -> None:
        """Complete the current phase if it is done (the caller holds ``_LOCK``)."""
        if self.arrived and self.copied == self.expected:
            self.landing += self.open
            self.open, self.arrived, self.expected, self.copied = [], False, 0, 0
            self.phase += 1


def _barriers() -> dict:
    from anytile.codegen.gpu.simulator import current_program
    program = current_program()
    with _LOCK:
        state = _barriers.__dict__.setdefault("state", {})
        if state.get("program") != program:
            state.clear()
            state["program"] = program
            state["barriers"] = {}
        return state["barriers"]


def _init(bar: int) -> None:
    _barriers()[bar] = _Barrier()


def _expect(bar: int, nbytes: int) -> None:
    with _LOCK:
        _barriers()[bar].expected += nbytes


def _box(record: int, coords: tuple, shared_at: int) -> tuple:
    """(element bytes, innermost box dimension, which elements of the box lie inside the
    array, their global addresses, the swizzled shared-memory offsets of the box's bytes
    from ``shared_at``) of the box at ``coords`` of the map ``record``; elements are
    listed innermost dimension fastest."""
    fields = _RECORD.unpack(ctypes.string_at(record, _RECORD.size))
    base, rank, elem, swizzle = fields[:4]
    dims, strides, box = fields[4:9], (elem,) + fields[9:13], fields[13:18]
    index = np.indices(box[:rank][::-1]).reshape(rank, -1)[::-1]
    where = index + np.array(coords[:rank])[:, None]
    inside = np.all((where >= 0) & (where < np.array(dims[:rank])[:, None]), axis=0)
    address = base + (where * np.array(strides[:rank])[:, None]).sum(axis=0)
    offsets = shared_at + np.arange(index.shape[1] * elem)
    if swizzle:
        offsets = offsets ^ (((offsets >> 7) & (swizzle // 16 - 1)) << 4)
    return elem, box[0], inside, address, offsets


def _copy(dst: int, record: int, c0: int, c1: int, c2: int, c3: int, c4: int, bar: int) -> None:
    elem, width, inside, address, offsets = _box(record, (c0, c1, c2, c3, c4), dst)
    copied.append((c0, c1, c2, c3, c4))
    data = np.zeros((len(inside), elem), np.uint8)
    for run in range(len(inside) // width):    # runs of the innermost dimension: a read each
        ks = np.nonzero(inside[run * width:(run + 1) * width])[0]
        if len(ks):
            first = run * width + ks[0]
            raw = ctypes.string_at(int(address[first]), len(ks) * elem)
            data[first:first + len(ks)] = np.frombuffer(raw, np.uint8).reshape(-1, elem)
    with _LOCK:
        barrier = _barriers()[bar]
        barrier.open.append((offsets, data.ravel()))
        barrier.copied += data.size
        barrier.settle()


def _store(record: int, c0: int, c1: int, c2: int, c3: int, c4: int, src: int) -> None:
    """A box store: kept until this thread waits for its reads (``_store_wait``), the latest
    moment the copy unit could read the shared memory it writes from."""
    from anytile.codegen.gpu.simulator import thread_state
    state = thread_state()
    if not hasattr(state, "tma_stores"):
        state.tma_stores = []
    state.tma_stores.append((record, (c0, c1, c2, c3, c4), src))


def _store_wait() -> None:
    """This thread's box stores read shared memory and write the elements inside the array."""
    from anytile.codegen.gpu.simulator import shared_memory, thread_state
    state = thread_state()
    shared = shared_memory()
    for record, coords, src in getattr(state, "tma_stores", []):
        elem, _, inside, address, offsets = _box(record, coords, src)
        data = shared[offsets].reshape(-1, elem)
        for k in np.nonzero(inside)[0]:
            ctypes.memmove(int(address[k]), data[k].tobytes(), elem)
    state.tma_stores = []


def _arrive(bar: int) -> None:
    with _LOCK:
        barrier = _barriers()[bar]
        barrier.arrived = True
        barrier.settle()


def _try_wait(bar: int, parity: int) -> int:
    from anytile.codegen.gpu.simulator import current_program, shared_memory, thread_state
    with _LOCK:
        barrier = _barriers()[bar]
        if barrier.phase & 1 != parity:        # the phase of that parity has completed
            shared = shared_memory()
            for offsets, data in barrier.landing:
                shared[offsets] = data
            barrier.landing = []
            thread_state().tma_since = None
            return 1
    state = thread_state()
    since = getattr(state, "tma_since", None)
    if since is None:
        state.tma_since = time.monotonic()
    elif time.monotonic() - since > STALL_SECONDS:
        stalls.append((current_program(), bar, parity))
        state.tma_since = None
        return 1
    time.sleep(0)                              # let the others run
    return 0


class EmulatedTensorCopies(TensorCopies):
    """``TensorCopies`` whose instructions call into the emulation (see the module doc)."""

    _registered = False

    def __init__(self) -> None:
        if not EmulatedTensorCopies._registered:
            from anytile.codegen.gpu.simulator import add_callback
            for name, kind, fn in (("init", _V_I, _init), ("expect", _V_II, _expect),
                                   ("copy", _COPY_T, _copy), ("arrive", _V_I, _arrive),
                                   ("try_wait", _WAIT_T, _try_wait), ("store", _STORE_T, _store),
                                   ("store_wait", _V, _store_wait)):
                add_callback(f"anytile_sim_tma_{name}", kind(fn))
            EmulatedTensorCopies._registered = True

    @staticmethod
    def _call(b: ir.IRBuilder, name: str, args: list, ret: ir.Type = ir.VoidType()) -> ir.Value:
        full = f"anytile_sim_tma_{name}"
        fn = b.module.globals.get(full)
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), full)
        return b.call(fn, args)

    def parameter_type(self) -> ir.Type:
        return ir.PointerType()

    def declare(self, fn: ir.Function, index: int) -> None:
        pass

    @staticmethod
    def shared_address(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
        smem = b.module.globals["anytile_smem"]
        return b.trunc(b.sub(b.ptrtoint(ptr, I64), b.ptrtoint(smem, I64)), I32)

    @staticmethod
    def map_address(b: ir.IRBuilder, param: ir.Value) -> ir.Value:
        return b.ptrtoint(param, I64)

    def init_barrier(self, b: ir.IRBuilder, bar: ir.Value) -> None:
        self._call(b, "init", [bar])

    def fence_init(self, b: ir.IRBuilder) -> None:
        pass

    def expect_bytes(self, b: ir.IRBuilder, bar: ir.Value, nbytes: ir.Value) -> None:
        self._call(b, "expect", [bar, nbytes])

    def copy_box(self, b: ir.IRBuilder, dst: ir.Value, tmap: ir.Value, coords: list,
                 bar: ir.Value) -> None:
        padded = list(coords) + [ir.Constant(I32, 0)] * (5 - len(coords))
        self._call(b, "copy", [dst, tmap, *padded, bar])

    def store_box(self, b: ir.IRBuilder, tmap: ir.Value, coords: list, src: ir.Value) -> None:
        padded = list(coords) + [ir.Constant(I32, 0)] * (5 - len(coords))
        self._call(b, "store", [tmap, *padded, src])

    def store_commit(self, b: ir.IRBuilder) -> None:
        pass

    def store_wait_read(self, b: ir.IRBuilder) -> None:
        self._call(b, "store_wait", [])

    def arrive(self, b: ir.IRBuilder, bar: ir.Value) -> None:
        self._call(b, "arrive", [bar])

    def try_wait(self, b: ir.IRBuilder, bar: ir.Value, parity: ir.Value) -> ir.Value:
        return self._call(b, "try_wait", [bar, parity], I32)
