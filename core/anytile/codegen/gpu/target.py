"""``GpuTarget``: what a GPU backend supplies to the shared lowering -- a few hooks and tables.

Hooks emit the instructions every GPU has under different names: thread and program ids,
the program-wide barrier, cross-lane exchange (``shuffle_xor``, ``shuffle_idx``), math
functions, atomics and the kernel's calling convention.  Tables describe the rest as data:
``warp_size`` (32 or 64), thread and shared-memory limits, address spaces, the matrix
instructions (``matrix_instrs``: ``MatrixInstr`` records, with one emit hook), and which
asynchronous global-to-shared copy sizes exist (none: pipelined copies go through registers).

Whatever only one vendor has joins through three optional extension points:
``fragment_loader`` (a faster way to read matrix fragments from shared memory),
``dot_strategies`` (a whole other way to lower ``dot``, with its own shared-memory layouts)
and ``dialects`` (the backend's own ops, passes and lowerings: ``dialects.GpuDialect``).
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Optional, Sequence

from llvmlite import ir

from ..llvm.types import declare
from .matrix import MatrixInstr

if TYPE_CHECKING:
    from .dialects import GpuDialect
    from .dot import DotStrategy
    from .fragments import FragmentLoader

__all__ = ["GpuTarget"]

I32 = ir.IntType(32)


class GpuTarget(abc.ABC):
    """Hooks and tables of one GPU target.  ``triple`` and ``data_layout`` go on the LLVM
    module; ``name`` is what error messages call the target (its architecture)."""

    name: str = "gpu"
    triple: str = ""
    data_layout: str = ""
    #: lanes of a warp (wave): 32 or 64
    warp_size: int
    #: threads one program may have
    max_threads: int = 1024
    #: bytes of shared memory one program may use
    shared_memory_limit: int = 48 * 1024
    #: LLVM address spaces of global and shared memory (IR pointers are global)
    global_address_space: int = 1
    shared_address_space: int = 3
    #: the instructions LLVM's ``minnum``/``maxnum`` become already order -0 below +0
    #: (IEEE 754-2019's minimumNumber/maximumNumber): the lowering then leaves out the select
    #: that makes LLVM's either-zero answer exact
    min_max_order_zeros: bool = False

    # -- ids and synchronisation ---------------------------------------------------------------
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
        """All threads of the program wait here; shared-memory writes before are visible
        after (the barrier includes the fence)."""

    # -- cross-lane exchange -------------------------------------------------------------------
    @abc.abstractmethod
    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        """The i32 ``value`` of the lane whose id is this lane's id xor ``lane_mask``
        (``lane_mask`` < ``warp_size``; every lane of the warp executes it)."""

    @abc.abstractmethod
    def shuffle_idx(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        """The i32 ``value`` of lane ``lane`` (an i32 below ``warp_size``) of this warp."""

    def warp_uniform(self, b: ir.IRBuilder, value: ir.Value) -> ir.Value:
        """The i32 ``value``, the same in every lane of the warp (the warp's index), in a form
        the target's compiler knows to be so: it may then keep it, and what is computed from
        it alone (a matrix unit's operand descriptors), in the warp's scalar registers.  The
        default returns ``value``."""
        return value

    # -- math and kernel -----------------------------------------------------------------------
    @abc.abstractmethod
    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        """``kind(x)`` (exp, log, sin, ...) for a float/double scalar, or ``None`` when the
        target has no function for it."""

    def relaxed_math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        """A faster ``kind(x)`` for a math op that is not ``strict`` (``UnaryOp.strict``): as
        accurate as ``math`` except that single-precision denormal results may be flushed to
        zero; ``None`` (the default) where ``math``'s form serves."""
        return None

    @abc.abstractmethod
    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        """Mark ``fn`` as a kernel entry point launched with ``threads`` threads."""

    def printf(self, b: ir.IRBuilder, text: str, args: list) -> None:
        """Write one line with C ``printf`` semantics: ``text`` the format, ``args`` its i32,
        i64 and double arguments (``tl.device_print``).  A target without a device
        ``printf`` leaves this as it is: ``tl.device_print`` is then a compile error."""
        raise NotImplementedError("this GPU target has no device printf")

    def trap(self, b: ir.IRBuilder) -> None:
        b.call(self.declare(b.module, "llvm.trap", ir.VoidType(), []), [])

    # -- atomics -------------------------------------------------------------------------------
    #: Triton's atomic scopes (``scope=``: "cta", "gpu", "sys") -> LLVM sync scope names
    #: ("": the whole system, LLVM's default)
    sync_scopes: dict[str, str] = {"cta": "", "gpu": "", "sys": ""}

    def scoped(self, ordering: str, scope: str) -> str:
        """``ordering`` at ``scope``, as llvmlite's atomic instructions take it."""
        name = self.sync_scopes.get(scope, "")
        return f'syncscope("{name}") {ordering}' if name else ordering

    def atomic_rmw(self, b: ir.IRBuilder, kind: str, ptr: ir.Value, value: ir.Value,
                   ordering: str, scope: str = "gpu") -> ir.Value:
        """``atomicrmw kind`` (LLVM's names: add, fadd, max, umax, ...) of global ``ptr`` with
        ``ordering`` at ``scope``; returns the old value."""
        return b.atomic_rmw(kind, ptr, value, self.scoped(ordering, scope))

    def atomic_cas(self, b: ir.IRBuilder, ptr: ir.Value, cmp: ir.Value, value: ir.Value,
                   ordering: str, failure: str, scope: str = "gpu") -> ir.Value:
        """Compare-and-swap of global ``ptr``; returns the old value."""
        return b.extract_value(b.cmpxchg(ptr, cmp, value, self.scoped(ordering, scope),
                                         failure), 0)

    # -- matrix instructions -------------------------------------------------------------------
    #: the target's matrix instructions, preferred first (empty: ``dot`` uses FMAs)
    matrix_instrs: Sequence[MatrixInstr] = ()

    def emit_matrix(self, b: ir.IRBuilder, instr: MatrixInstr, a: list, bregs: list,
                    acc: list) -> list:
        """One ``instr``: ``acc + A @ B`` for this lane.  ``a``/``bregs`` are the lane's
        registers (integers of ``pack`` x element bits, element ``r * pack + p`` in bits
        ``p * bits ..``), ``acc`` its accumulator elements (compute type); returns the new
        accumulator elements, in ``acc_elem`` order."""
        raise NotImplementedError(f"target {self.name} emits no matrix instructions")

    def matrix_operand(self, b: ir.IRBuilder, type_name: str, x: ir.Value) -> ir.Value:
        """The f32 ``x`` as an operand element of format ``type_name`` when that is not an IR
        type: ``"tf32"`` is rounded to 10 mantissa bits, to nearest with ties away from zero
        (finite inputs), as i32 bits."""
        if type_name != "tf32":
            raise NotImplementedError(f"matrix operand format {type_name}")
        bits = b.bitcast(x, I32)
        return b.and_(b.add(bits, ir.Constant(I32, 0x1000)), ir.Constant(I32, -0x2000))

    def fragment_loader(self, instr: MatrixInstr) -> Optional["FragmentLoader"]:
        """A target-specific way to read ``instr``'s A and B fragments from shared memory, or
        ``None``: core reads them element by element as the fragment maps say."""
        return None

    def dot_strategies(self) -> Sequence["DotStrategy"]:
        """Target-specific ways to lower ``dot``, tried before core's (matrix instructions
        from ``matrix_instrs``, then FMAs)."""
        return ()

    #: the backend's own ops, passes and lowerings, put into the pipeline by name
    #: (``dialects.GpuDialect``)
    dialects: Sequence["GpuDialect"] = ()

    # -- asynchronous copies -------------------------------------------------------------------
    #: byte sizes of the asynchronous global -> shared copies the target has (empty: none;
    #: pipelined copies are then loads and shared-memory stores)
    async_copy_sizes: Sequence[int] = ()

    def async_copy(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int,
                   mask: Optional[ir.Value]) -> None:
        """Start copying ``nbytes`` (one of ``async_copy_sizes``; both addresses aligned to
        it) from global ``src`` to shared ``dst``; where the i1 ``mask`` is 0, write zeros and
        read nothing."""
        raise NotImplementedError(f"target {self.name} has no asynchronous copies")

    def async_commit(self, b: ir.IRBuilder) -> None:
        """Close the group of copies this thread started since the last commit."""

    def async_wait(self, b: ir.IRBuilder, pending: int) -> None:
        """Wait until at most ``pending`` committed groups of this thread are in flight."""

    def fence_async_shared(self, b: ir.IRBuilder) -> None:
        """Make this thread's shared-memory writes visible to units that read shared memory
        on their own (a matrix unit reading operands by address); before the barrier that
        hands a pipeline slot to them."""

    @staticmethod
    def declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
        """Declare ``name`` once in ``module``."""
        return declare(module, name, ret, args)
