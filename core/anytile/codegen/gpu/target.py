"""The hook table a GPU backend fills in: what differs between NVIDIA and AMD.

The shared lowering (``anytile.codegen.gpu.lowering``) asks a ``GpuTarget`` for thread and
program ids, barriers, warp shuffles, address spaces, math functions and the kernel's
calling convention; everything else (layouts, loads, reductions, control flow) is common.
"""
from __future__ import annotations

import abc
from typing import Optional

from llvmlite import ir

__all__ = ["GpuTarget"]

I32 = ir.IntType(32)


class GpuTarget(abc.ABC):
    """Hooks of one GPU target.  ``triple`` and ``data_layout`` go on the LLVM module."""

    triple: str = ""
    data_layout: str = ""
    warp_size: int = 32
    global_address_space: int = 1
    shared_address_space: int = 3

    @abc.abstractmethod
    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        """The thread's index within its program (x only; programs are 1-D thread blocks)."""

    @abc.abstractmethod
    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """The program's index along grid axis ``axis`` (i32)."""

    @abc.abstractmethod
    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """The grid's size along ``axis`` (i32)."""

    @abc.abstractmethod
    def barrier(self, b: ir.IRBuilder) -> None:
        """All threads of the program wait here; shared memory writes before are visible
        after."""

    @abc.abstractmethod
    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        """The i32 ``value`` of the lane whose id is this lane's id xor ``lane_mask``."""

    @abc.abstractmethod
    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        """``kind(x)`` (exp, log, sin, ...) for a float/double scalar, or ``None`` when the
        target has no function for it."""

    @abc.abstractmethod
    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        """Mark ``fn`` as a kernel entry point launched with ``threads`` threads."""

    #: whether ``mma_m16n8k16`` (fp16/bf16), ``mma_m16n8k8_tf32`` and ``ldmatrix_x4`` are
    #: available (tensor cores); ``dot`` uses FMAs otherwise
    has_mma: bool = False

    def mma_m16n8k16(self, b: ir.IRBuilder, in_type: str, a: list, bfrag: list, c: list) -> list:
        """One warp-wide ``D = A @ B + C`` on a 16x8x16 tile: ``a`` is 4 i32 registers (two
        ``in_type`` values each), ``bfrag`` 2, ``c`` 4 floats; returns the 4 floats of D
        (fragment positions: see ``anytile.codegen.gpu.mma``)."""
        raise NotImplementedError("this target has no mma_m16n8k16")

    def mma_m16n8k8_tf32(self, b: ir.IRBuilder, a: list, bfrag: list, c: list) -> list:
        """One warp-wide ``D = A @ B + C`` on a 16x8x8 tile of tf32 inputs (``a``: 4 i32,
        ``bfrag``: 2 i32, tf32 bit patterns from ``to_tf32``; ``c``: 4 floats)."""
        raise NotImplementedError("this target has no tf32 mma")

    def to_tf32(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """The f32 ``x`` rounded to tf32 (10 mantissa bits, to nearest), as i32 bits."""
        raise NotImplementedError("this target has no tf32")

    def ldmatrix_x4(self, b: ir.IRBuilder, address: ir.Value, trans: bool) -> list:
        """Warp-wide load of four 8x8 matrices of 16-bit elements from shared memory: lane
        ``8q + r`` gives the address of row ``r`` of matrix ``q``; lane ``4g + t`` receives, as
        i32 ``q``, elements (g, 2t) and (g, 2t + 1) of matrix ``q`` ((2t, g) and (2t + 1, g)
        when ``trans``), the smaller column (row) in the low half."""
        raise NotImplementedError("this target has no ldmatrix")

    #: whether ``async_copy`` exists (global -> shared copies that bypass registers)
    has_async_copy: bool = False

    def async_copy(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int,
                   mask: Optional[ir.Value]) -> None:
        """Start copying ``nbytes`` (4, 8 or 16; both addresses aligned to it) from global
        ``src`` to shared ``dst``; where the i1 ``mask`` is 0, write zeros and read nothing."""
        raise NotImplementedError("this target has no asynchronous copies")

    def async_commit(self, b: ir.IRBuilder) -> None:
        """Close the group of copies this thread started since the last commit."""

    def async_wait(self, b: ir.IRBuilder, pending: int) -> None:
        """Wait until at most ``pending`` committed groups of this thread are in flight."""

    #: whether the Hopper warpgroup MMA hooks (``wgmma_*``, ``fence_proxy_async``) exist
    has_wgmma: bool = False

    def wgmma_m64k16(self, b: ir.IRBuilder, in_type: str, n: int, desc_a: ir.Value,
                     desc_b: ir.Value, acc: list) -> list:
        """Start one warpgroup-wide ``D = A @ B + D`` on a 64 x ``n`` x 16 tile, A K-major and
        B N-major in shared memory (64-bit descriptors); ``acc``: the thread's ``n / 2``
        floats.  Results are valid after ``wgmma_commit_and_wait``."""
        raise NotImplementedError("this target has no warpgroup MMA")

    def wgmma_fence(self, b: ir.IRBuilder) -> None:
        """Order register writes before the next warpgroup MMAs."""

    def wgmma_commit_and_wait(self, b: ir.IRBuilder, acc: list) -> list:
        """Close the group of warpgroup MMAs and wait for it; ``acc`` pass through (their
        values are those the MMAs wrote)."""
        raise NotImplementedError("this target has no warpgroup MMA")

    def fence_proxy_async(self, b: ir.IRBuilder) -> None:
        """Make this thread's shared-memory writes visible to the async proxy (the tensor
        cores reading shared memory by descriptor)."""

    def trap(self, b: ir.IRBuilder) -> None:
        fn = b.module.globals.get("llvm.trap") or ir.Function(
            b.module, ir.FunctionType(ir.VoidType(), []), "llvm.trap")
        b.call(fn, [])

    @staticmethod
    def declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
        """Declare ``name`` once in ``module``."""
        existing = module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(module, ir.FunctionType(ret, args), name)
