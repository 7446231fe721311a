"""AMD's hooks and tables for the shared GPU lowering (``anytile.codegen.gpu.GpuTarget``).

* ids: ``llvm.amdgcn.workitem.id.x`` and ``workgroup.id.{x,y,z}``; the grid's size from the
  HSA dispatch packet (``grid_size`` in work-items / ``workgroup_size``);
* the barrier: ``s_barrier`` between workgroup-scope release and acquire fences;
* cross-lane exchange: DPP, ``v_permlanex16``, ``ds_bpermute`` and ``v_readlane``, chosen
  per architecture (``exchange.py``);
* math: ``math.py`` (f32 in f32, f64 in f64; no device library needed);
* atomics at the scope asked for (``scope=``: workgroup, agent (the default), system),
  marked ``!amdgpu.no.fine.grained.memory`` (and, for f32 adds,
  ``!amdgpu.ignore.denormal.mode``) so LLVM emits the native float atomics instead of
  compare-and-swap loops: anytile's memory comes from ``hipMalloc`` (coarse-grained);
* kernels: ``amdgpu_kernel`` with ``amdgpu-flat-work-group-size`` set to the exact
  workgroup size, code object v5;
* matrix instructions: the architecture's MFMA or WMMA table (``matrix.py``).
"""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from anytile.codegen.gpu import GpuTarget, MatrixInstr

from .archs import AmdArch, arch_of
from .exchange import PERMLANE_IDENTITY, CrossLane
from .math import MathLibrary
from .matrix import AmdMatrixInstr, emit_matrix

__all__ = ["AmdTarget", "KernelAttributes", "TRIPLE"]

I1, I16, I32 = ir.IntType(1), ir.IntType(16), ir.IntType(32)
TRIPLE = "amdgcn-amd-amdhsa"
#: byte offsets in the HSA kernel dispatch packet (hsa_kernel_dispatch_packet_t)
_WORKGROUP_SIZE_X, _GRID_SIZE_X = 4, 12


class KernelAttributes(ir.FunctionAttributes):
    """Function attributes with LLVM's string attributes (``"key"="value"``) beside the
    enumerated ones llvmlite knows."""

    def __init__(self, strings: dict[str, str]) -> None:
        super().__init__()
        self.strings = dict(strings)

    def _to_list(self, ret_type: ir.Type) -> list:
        return super()._to_list(ret_type) + [f'"{k}"="{v}"' for k, v in self.strings.items()]


class AmdTarget(CrossLane, GpuTarget):
    """``amdgcn-amd-amdhsa`` for one architecture (``gfx942``, an ``AmdArch``)."""

    triple = TRIPLE
    max_threads = 1024
    global_address_space = 1
    shared_address_space = 3

    def __init__(self, arch: "AmdArch | str") -> None:
        self.arch = arch if isinstance(arch, AmdArch) else arch_of(arch)
        self.name = self.arch.name
        self.warp_size = self.arch.wave_size
        self.shared_memory_limit = self.arch.lds_bytes
        self.matrix_instrs = self.arch.matrix_instrs
        self.math_library = MathLibrary()

    def _intrinsic(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
        return b.call(self.declare(b.module, name, ret, [a.type for a in args]), args)

    # -- ids and synchronisation ---------------------------------------------------------------
    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._intrinsic(b, "llvm.amdgcn.workitem.id.x", I32, [])

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._intrinsic(b, "llvm.amdgcn.workgroup.id." + "xyz"[axis], I32, [])

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        packet = self._intrinsic(b, "llvm.amdgcn.dispatch.ptr", ir.PointerType(addrspace=4), [])
        i8 = ir.IntType(8)
        grid = b.load(b.gep(packet, [ir.Constant(I32, _GRID_SIZE_X + 4 * axis)], source_etype=i8),
                      typ=I32)
        size = b.load(b.gep(packet, [ir.Constant(I32, _WORKGROUP_SIZE_X + 2 * axis)],
                            source_etype=i8), typ=I16)
        return b.udiv(grid, b.zext(size, I32))

    def barrier(self, b: ir.IRBuilder) -> None:
        b.fence("release", "workgroup")
        b.call(self.declare(b.module, "llvm.amdgcn.s.barrier", ir.VoidType(), []), [])
        b.fence("acquire", "workgroup")

    # -- cross-lane leaves (exchange.py chooses among them) ------------------------------------
    def lane_id(self, b: ir.IRBuilder) -> ir.Value:
        return b.and_(self.thread_id(b), ir.Constant(I32, self.warp_size - 1))

    def dpp(self, b: ir.IRBuilder, value: ir.Value, ctrl: int) -> ir.Value:
        args = [ir.Constant(I32, ir.Undefined), value, ir.Constant(I32, ctrl), ir.Constant(I32, 0xF),
                ir.Constant(I32, 0xF), ir.Constant(I1, 0)]
        return self._intrinsic(b, "llvm.amdgcn.update.dpp.i32", I32, args)

    def bpermute(self, b: ir.IRBuilder, value: ir.Value, address: ir.Value) -> ir.Value:
        return self._intrinsic(b, "llvm.amdgcn.ds.bpermute", I32, [address, value])

    def permlanex16(self, b: ir.IRBuilder, value: ir.Value) -> ir.Value:
        if not self.arch.has_permlanex16:
            raise AssertionError(f"{self.name} has no v_permlanex16")
        lo, hi = PERMLANE_IDENTITY
        args = [ir.Constant(I32, ir.Undefined), value, ir.Constant(I32, lo),
                ir.Constant(I32, hi - (1 << 32)), ir.Constant(I1, 0), ir.Constant(I1, 0)]
        return self._intrinsic(b, "llvm.amdgcn.permlanex16.i32", I32, args)

    def readlane(self, b: ir.IRBuilder, value: ir.Value, lane: int) -> ir.Value:
        return self._intrinsic(b, "llvm.amdgcn.readlane.i32", I32, [value, ir.Constant(I32, lane)])

    # -- math and kernel -----------------------------------------------------------------------
    def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Optional[ir.Value]:
        return self.math_library.emit(b, kind, x)

    def declare_kernel(self, fn: ir.Function, threads: int) -> None:
        fn.calling_convention = "amdgpu_kernel"
        attrs = KernelAttributes({"amdgpu-flat-work-group-size": f"{threads},{threads}",
                                  "uniform-work-group-size": "true"})
        attrs.add("nounwind")
        fn.attributes = attrs
        module = fn.module
        if "llvm.module.flags" not in module.namedmetadata:
            # code object v5: what ROCm 6 loads, and what the metadata reader expects
            module.add_named_metadata("llvm.module.flags", [
                ir.Constant(I32, 1), ir.MetaDataString(module, "amdhsa_code_object_version"),
                ir.Constant(I32, 500)])

    # -- atomics -------------------------------------------------------------------------------
    def _mark(self, b: ir.IRBuilder, instr: ir.Instruction, float_add: bool) -> ir.Instruction:
        empty = b.module.add_metadata([])
        instr.set_metadata("amdgpu.no.fine.grained.memory", empty)
        if float_add:
            instr.set_metadata("amdgpu.ignore.denormal.mode", empty)
        return instr

    sync_scopes = {"cta": "workgroup", "gpu": "agent", "sys": ""}

    def atomic_rmw(self, b: ir.IRBuilder, kind: str, ptr: ir.Value, value: ir.Value,
                   ordering: str, scope: str = "gpu") -> ir.Value:
        instr = b.atomic_rmw(kind, ptr, value, self.scoped(ordering, scope))
        return self._mark(b, instr, kind == "fadd" and isinstance(value.type, ir.FloatType))

    def atomic_cas(self, b: ir.IRBuilder, ptr: ir.Value, cmp: ir.Value, value: ir.Value,
                   ordering: str, failure: str, scope: str = "gpu") -> ir.Value:
        pair = b.cmpxchg(ptr, cmp, value, self.scoped(ordering, scope), failure)
        self._mark(b, pair, False)
        return b.extract_value(pair, 0)

    # -- matrix instructions -------------------------------------------------------------------
    def emit_matrix(self, b: ir.IRBuilder, instr: MatrixInstr, a: list, bregs: list,
                    acc: list) -> list:
        assert isinstance(instr, AmdMatrixInstr)
        return emit_matrix(b, instr, a, bregs, acc)
