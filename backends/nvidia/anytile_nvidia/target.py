"""NVIDIA's hooks and tables for the shared GPU lowering (``anytile.codegen.gpu.GpuTarget``):
PTX special registers, ``bar.sync``, ``shfl.sync``, libdevice's math functions, ``mma.sync``
as matrix-instruction data with ``ldmatrix`` as its fragment loader, ``cp.async`` copies,
and on sm_90 Hopper's warpgroup MMA as a dot strategy (``warpgroup.py``) with the tensor
memory accelerator copying its operands by descriptor (``tma.py``), both joined to core's
pipeline by the ``nvidia`` dialect (``passes.nvidia_dialect``)."""
from __future__ import annotations

import re
from typing import Optional, Sequence

from llvmlite import ir

from anytile.codegen.gpu import DotStrategy, FragmentLoader, GpuTarget, MatrixInstr
from anytile.codegen.llvm.types import string_constant

from .matrix import MATRIX_INSTRS, MMA_BF16, MMA_F16, LdmatrixFragments, emit_mma, ldmatrix_x4
from .passes import nvidia_dialect

__all__ = ["NvidiaTarget", "LIBDEVICE_FUNCTIONS", "shared_memory_limit"]

I32 = ir.IntType(32)

#: IR unary kind -> (libdevice function for float, for double)
LIBDEVICE_FUNCTIONS = {
    "exp": ("__nv_expf", "__nv_exp"), "exp2": ("__nv_exp2f", "__nv_exp2"),
    "log": ("__nv_logf", "__nv_log"), "log2": ("__nv_log2f", "__nv_log2"),
    "sin": ("__nv_sinf", "__nv_sin"), "cos": ("__nv_cosf", "__nv_cos"),
    "erf": ("__nv_erff", "__nv_erf"), "tanh": ("__nv_tanhf", "__nv_tanh"),
}

#: dynamic shared memory one program may use, per architecture (CUDA programming guide)
_SHARED_LIMITS = {80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024}


def shared_memory_limit(arch: str) -> int:
    """The most shared memory (bytes) a program of ``sm_XY`` may use; 48 KiB if unknown."""
    number = int(re.sub(r"\D", "", arch) or 0)
    return _SHARED_LIMITS.get(number, 227 * 1024 if number > 90 else 48 * 1024)


class NvidiaTarget(GpuTarget):
    """nvptx64-nvidia-cuda for ``arch`` (``sm_80``...); math through libdevice (linked in by
    the ``ptx`` stage).  ``warpgroup_mma``: pipelined fp16/bf16 dots on sm_90 run as
    ``wgmma`` (the ``wgmma`` option, on by default); ``tensor_copies``: with it, their
    operands go by the tensor memory accelerator where they can (the ``tma`` option)."""

    triple = "nvptx64-nvidia-cuda"
    data_layout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
    warp_size = 32
    max_threads = 1024
    matrix_instrs = MATRIX_INSTRS
    async_copy_sizes = (4, 8, 16)      # cp.async (sm_80+)
    min_max_order_zeros = True         # PTX min/max: -0.0 < +0.0

    def __init__(self, arch: str = "sm_80", warpgroup_mma: bool = False,
                 tensor_copies: bool = False) -> None:
        self.arch = self.name = arch
        self.shared_memory_limit = shared_memory_limit(arch)
        self.warpgroup_mma = warpgroup_mma and arch in ("sm_90", "sm_90a")
        #: the copies of whole boxes (``tma.TensorCopies``), or ``None``
        self.tensor_copies = None
        if self.warpgroup_mma and tensor_copies:
            from .tma import TensorCopies
            self.tensor_copies = TensorCopies()
        self.dialects = (nvidia_dialect(self.tensor_copies),)
        self._ldmatrix = LdmatrixFragments(ldmatrix_x4)

    def _sreg(self, b: ir.IRBuilder, name: str) -> ir.Value:
        fn = self.declare(b.module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
        return b.call(fn, [])

    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._sreg(b, "tid.x")

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._sreg(b, "ctaid." + "xyz"[axis])

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._sreg(b, "nctaid." + "xyz"[axis])

    def barrier(self, b: ir.IRBuilder) -> None:
        b.call(self.declare(b.module, "llvm.nvvm.barrier0", ir.VoidType(), []), [])

    def printf(self, b: ir.IRBuilder, text: str, args: list) -> None:
        """CUDA's ``vprintf(format, arguments)``: the arguments packed in a local buffer,
        each at its natural alignment; the lines reach the host's standard output when the
        launch completes (the device's printf buffer holds 1 MiB by default)."""
        generic = ir.PointerType()
        fmt = b.addrspacecast(string_constant(b.module, text, addrspace=1), generic)
        packed = ir.LiteralStructType([a.type for a in args])
        entry = ir.IRBuilder(b.function.entry_basic_block)    # one buffer, not one per loop trip
        entry.position_at_start(b.function.entry_basic_block)
        buf = entry.alloca(packed)
        for i, a in enumerate(args):
            b.store(a, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
        vprintf = self.declare(b.module, "vprintf", I32, [generic, generic])
        b.call(vprintf, [fmt, buf])

    def _shuffle(self, b: ir.IRBuilder, kind: str, value: ir.Value, lane: ir.Value) -> ir.Value:
        fn = self.declare(b.module, f"llvm.nvvm.shfl.sync.{kind}.i32", I32, [I32, I32, I32, I32])
        return b.call(fn, [ir.Constant(I32, -1), value, lane, ir.Constant(I32, 0x1F)])

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        return self._shuffle(b, "bfly", value, ir.Constant(I32, lane_mask))

    def shuffle_idx(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        return self._shuffle(b, "idx", value, lane)

    def warp_uniform(self, b: ir.IRBuilder, value: ir.Value) -> ir.Value:
        # lane 0's copy: ptxas knows a shuffle from a constant lane gives every lane one
        # value, and keeps it (and the warpgroup MMA descriptors built from it) in uniform
        # registers instead of moving each descriptor over (R2UR) before its MMA
        return self.shuffle_idx(b, value, ir.Constant(I32, 0))

    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        names = LIBDEVICE_FUNCTIONS.get(kind)
        if names is None or isinstance(x.type, ir.VectorType):
            return None
        name = names[1] if isinstance(x.type, ir.DoubleType) else names[0]
        return b.call(self.declare(b.module, name, x.type, [x.type]), [x])

    def relaxed_math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        """f32 ``exp2``: the special-function unit's ``ex2.approx.ftz.f32`` (at most 2 ulp),
        results below 2^-126 flushed to zero as Triton's ``exp2`` flushes them (OpenCL's full
        profile allows single-precision denormals to be flushed).  libdevice's ``__nv_exp2f``
        is the same instruction without the flush, which costs a compare and two multiplies
        around each call: an attention kernel's softmax makes one call an element.  The math
        library's formulas (``strict``) keep ``__nv_exp2f``: ``ldexp`` builds subnormal powers
        of two with it."""
        if kind == "exp2" and isinstance(x.type, ir.FloatType):
            return b.call(self.declare(b.module, "llvm.nvvm.ex2.approx.ftz.f", x.type, [x.type]), [x])
        return None

    # -- atomics -------------------------------------------------------------------------------
    sync_scopes = {"cta": "block", "gpu": "device", "sys": ""}

    def atomic_rmw(self, b: ir.IRBuilder, kind: str, ptr: ir.Value, value: ir.Value,
                   ordering: str, scope: str = "gpu") -> ir.Value:
        """NVPTX drops an ``atomicrmw``'s ordering (it emits a relaxed ``atom``), so the
        ordering is made of fences at the scope asked for around a relaxed atomic:
        ``fence.acq_rel.gpu`` before a release, after an acquire (``fence.sc`` before a
        sequentially consistent one).  A spin lock's release then publishes the stores made
        under the lock, as Triton's kernels expect."""
        where = self.sync_scopes.get(scope, "") or None
        if ordering in ("release", "acq_rel", "seq_cst"):
            b.fence("seq_cst" if ordering == "seq_cst" else "release", where)
        old = b.atomic_rmw(kind, ptr, value, self.scoped("monotonic", scope))
        if ordering in ("acquire", "acq_rel", "seq_cst"):
            b.fence("acquire", where)
        return old

    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        # the exact block size lets ptxas budget registers (Triton's maxntid)
        m = fn.module
        m.add_named_metadata("nvvm.annotations",
                             [fn, ir.MetaDataString(m, "maxntidx"), ir.Constant(I32, threads)])

    # -- matrix instructions -------------------------------------------------------------------
    def emit_matrix(self, b: ir.IRBuilder, instr: MatrixInstr, a: list, bregs: list,
                    acc: list) -> list:
        return emit_mma(b, instr, a, bregs, acc)

    def matrix_operand(self, b: ir.IRBuilder, type_name: str, x: ir.Value) -> ir.Value:
        if type_name != "tf32":
            return super().matrix_operand(b, type_name, x)
        fty = ir.FunctionType(I32, [ir.FloatType()])
        return b.asm(fty, "cvt.rna.tf32.f32 $0, $1;", "=r,f", [x], side_effect=False)

    def fragment_loader(self, instr: MatrixInstr) -> Optional[FragmentLoader]:
        return self._ldmatrix if instr in (MMA_F16, MMA_BF16) else None

    def dot_strategies(self) -> Sequence[DotStrategy]:
        if not self.warpgroup_mma:
            return ()
        from .warpgroup import WarpgroupDot
        return (WarpgroupDot(),)

    # -- asynchronous copies -------------------------------------------------------------------
    def async_copy(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int,
                   mask: Optional[ir.Value]) -> None:
        # 16-byte copies skip L1 (.cg), as operands of a tile loop are read once per program
        kind = "cg" if nbytes == 16 else "ca"
        name = f"llvm.nvvm.cp.async.{kind}.shared.global.{nbytes}"
        shared = ir.PointerType(addrspace=self.shared_address_space)
        glob = ir.PointerType(addrspace=self.global_address_space)
        if mask is None:
            b.call(self.declare(b.module, name, ir.VoidType(), [shared, glob]), [dst, src])
            return
        # src-size 0 where masked off: zeros land in shared memory, nothing is read
        size = b.select(mask, ir.Constant(I32, nbytes), ir.Constant(I32, 0))
        b.call(self.declare(b.module, name + ".s", ir.VoidType(), [shared, glob, I32]), [dst, src, size])

    def async_commit(self, b: ir.IRBuilder) -> None:
        b.call(self.declare(b.module, "llvm.nvvm.cp.async.commit.group", ir.VoidType(), []), [])

    def async_wait(self, b: ir.IRBuilder, pending: int) -> None:
        b.call(self.declare(b.module, "llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32]),
               [ir.Constant(I32, pending)])

    def fence_async_shared(self, b: ir.IRBuilder) -> None:
        """``fence.proxy.async``: the warpgroup MMA reads its operands through the async proxy."""
        b.asm(ir.FunctionType(ir.VoidType(), []), "fence.proxy.async.shared::cta;", "~{memory}", [],
              side_effect=True)
