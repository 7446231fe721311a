"""NVIDIA's answers to the shared GPU lowering's hooks (``anytile.codegen.gpu.GpuTarget``):
PTX special registers, ``bar.sync``, ``shfl.sync.bfly`` and libdevice's math functions."""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from anytile.codegen.gpu import GpuTarget

__all__ = ["NvidiaTarget", "LIBDEVICE_FUNCTIONS"]

I32 = ir.IntType(32)

#: IR unary kind -> (libdevice function for float, for double)
LIBDEVICE_FUNCTIONS = {
    "exp": ("__nv_expf", "__nv_exp"), "exp2": ("__nv_exp2f", "__nv_exp2"),
    "log": ("__nv_logf", "__nv_log"), "log2": ("__nv_log2f", "__nv_log2"),
    "sin": ("__nv_sinf", "__nv_sin"), "cos": ("__nv_cosf", "__nv_cos"),
    "erf": ("__nv_erff", "__nv_erf"), "tanh": ("__nv_tanhf", "__nv_tanh"),
}


class NvidiaTarget(GpuTarget):
    """nvptx64-nvidia-cuda; math through libdevice (linked in by the ``ptx`` stage)."""

    triple = "nvptx64-nvidia-cuda"
    data_layout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
    warp_size = 32

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

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        fn = self.declare(b.module, "llvm.nvvm.shfl.sync.bfly.i32", I32, [I32, I32, I32, I32])
        return b.call(fn, [ir.Constant(I32, -1), value, ir.Constant(I32, lane_mask),
                           ir.Constant(I32, 0x1F)])

    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        names = LIBDEVICE_FUNCTIONS.get(kind)
        if names is None or isinstance(x.type, ir.VectorType):
            return None
        name = names[1] if isinstance(x.type, ir.DoubleType) else names[0]
        return b.call(self.declare(b.module, name, x.type, [x.type]), [x])

    has_mma = True  # every supported target (sm_80+) has mma.sync.m16n8k16

    def mma_m16n8k16(self, b: ir.IRBuilder, in_type: str, a: list, bfrag: list, c: list) -> list:
        f32 = ir.FloatType()
        ptx_type = {"f16": "f16", "bf16": "bf16"}[in_type]
        asm = (f"mma.sync.aligned.m16n8k16.row.col.f32.{ptx_type}.{ptx_type}.f32 "
               "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
        fty = ir.FunctionType(ir.LiteralStructType([f32] * 4), [I32] * 6 + [f32] * 4)
        call = b.asm(fty, asm, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", list(a) + list(bfrag) + list(c),
                     side_effect=False)
        return [b.extract_value(call, i) for i in range(4)]

    def mma_m16n8k8_tf32(self, b: ir.IRBuilder, a: list, bfrag: list, c: list) -> list:
        f32 = ir.FloatType()
        asm = ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
        fty = ir.FunctionType(ir.LiteralStructType([f32] * 4), [I32] * 6 + [f32] * 4)
        call = b.asm(fty, asm, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", list(a) + list(bfrag) + list(c),
                     side_effect=False)
        return [b.extract_value(call, i) for i in range(4)]

    def to_tf32(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        fty = ir.FunctionType(I32, [ir.FloatType()])
        return b.asm(fty, "cvt.rna.tf32.f32 $0, $1;", "=r,f", [x], side_effect=False)

    def ldmatrix_x4(self, b: ir.IRBuilder, address: ir.Value, trans: bool) -> list:
        i64 = ir.IntType(64)
        shape = ".trans" if trans else ""
        asm = f"ldmatrix.sync.aligned.m8n8.x4{shape}.shared.b16 {{$0, $1, $2, $3}}, [$4];"
        fty = ir.FunctionType(ir.LiteralStructType([I32] * 4), [i64])
        call = b.asm(fty, asm, "=r,=r,=r,=r,l", [b.ptrtoint(address, i64)], side_effect=True)
        return [b.extract_value(call, i) for i in range(4)]

    def __init__(self, arch: str = "sm_80") -> None:
        self.arch = arch

    @property
    def has_wgmma(self) -> bool:  # Hopper's warpgroup MMA (compiled for sm_90a)
        return self.arch in ("sm_90", "sm_90a")

    def wgmma_m64k16(self, b: ir.IRBuilder, in_type: str, n: int, desc_a: ir.Value,
                     desc_b: ir.Value, acc: list) -> list:
        f32 = ir.FloatType()
        count = n // 2
        regs = ", ".join(f"${i}" for i in range(count))
        # scale-d is a predicate: always accumulate; A K-major (0), B N-major (1)
        asm = ("{ .reg .pred p; setp.ne.b32 p, $" + str(count + 2) + ", 0; "
               f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{in_type}.{in_type} "
               f"{{{regs}}}, ${count}, ${count + 1}, p, 1, 1, 0, 1; }}")
        constraint = ",".join(["=f"] * count + ["l", "l", "r"] + [str(i) for i in range(count)])
        fty = ir.FunctionType(ir.LiteralStructType([f32] * count), [ir.IntType(64)] * 2 + [I32] + [f32] * count)
        call = b.asm(fty, asm, constraint, [desc_a, desc_b, ir.Constant(I32, 1)] + list(acc), side_effect=True)
        return [b.extract_value(call, i) for i in range(count)]

    def wgmma_fence(self, b: ir.IRBuilder) -> None:
        b.asm(ir.FunctionType(ir.VoidType(), []), "wgmma.fence.sync.aligned;", "~{memory}", [],
              side_effect=True)

    def wgmma_commit_and_wait(self, b: ir.IRBuilder, acc: list) -> list:
        f32 = ir.FloatType()
        count = len(acc)
        asm = "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;"
        constraint = ",".join(["=f"] * count + [str(i) for i in range(count)] + ["~{memory}"])
        fty = ir.FunctionType(ir.LiteralStructType([f32] * count), [f32] * count)
        call = b.asm(fty, asm, constraint, list(acc), side_effect=True)
        return [b.extract_value(call, i) for i in range(count)]

    def fence_proxy_async(self, b: ir.IRBuilder) -> None:
        b.asm(ir.FunctionType(ir.VoidType(), []), "fence.proxy.async.shared::cta;", "~{memory}", [],
              side_effect=True)

    has_async_copy = True  # cp.async (sm_80+)

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

    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        # the exact block size lets ptxas budget registers (Triton's maxntid)
        m = fn.module
        m.add_named_metadata("nvvm.annotations",
                             [fn, ir.MetaDataString(m, "maxntidx"), ir.Constant(I32, threads)])
