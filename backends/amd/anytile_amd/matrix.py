"""AMD's matrix instructions as data: MFMA (CDNA, wave64) and WMMA (RDNA3/RDNA4, wave32).

Each instruction is one ``AmdMatrixInstr``: core's ``MatrixInstr`` (shape, types, lanes and
fragment maps, from which core places registers) plus the LLVM intrinsic that runs it and
the vector types of its operands.  The maps are AMD's published register layouts (the
"AMD Matrix Instruction Calculator"; ``tests/test_matrix_tables.py`` checks entries taken from
it), for lane ``l`` and element ``e`` of a lane's fragment (``A[row][k]``, ``B[k][col]``,
``D[row][col]``):

* MFMA ``S x S x K`` (S = 32 or 16) with ``E`` operand elements a lane: A is
  (``l % S``, ``E * (l // S) + e``), B the transpose; the accumulator holds column ``l % S``
  and, for S = 32, rows ``8 (i // 4) + 4 (l // 32) + i % 4``, for S = 16 rows
  ``4 (l // 16) + i``;
* WMMA on gfx11: A is (``l % 16``, ``e``) for all 16 k (lanes 16-31 repeat lanes 0-15), B the
  transpose; the accumulator (``2 i + l // 16``, ``l % 16``);
* WMMA on gfx12: no repetition; 16-bit A is (``l % 16``, ``e % 4 + 8 (e // 4) + 4 (l // 16)``),
  8-bit A (``l % 16``, ``e + 8 (l // 16)``), B the transposes; the accumulator
  (``i + 8 (l // 16)``, ``l % 16``).

A register packs ``pack`` consecutive elements of a fragment (the first in the low bits);
packs are chosen so a register is one LDS read where the elements are consecutive in memory.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from anytile.codegen.gpu import MatrixInstr
from anytile.codegen.gpu.matrix import TYPE_BITS

__all__ = ["AmdMatrixInstr", "CDNA2_INSTRS", "CDNA3_INSTRS", "CDNA4_INSTRS", "RDNA3_INSTRS",
           "RDNA4_INSTRS", "emit_matrix"]

I1, I16, I32, I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32 = ir.HalfType(), ir.FloatType()


@dataclass(frozen=True)
class AmdMatrixInstr(MatrixInstr):
    """A ``MatrixInstr`` with what emitting it needs: the LLVM ``intrinsic``, the LLVM
    element type and count of its A/B operand (``operand``: ``"half"``, ``"i16"``,
    ``"float"``, ``"i32"``, ``"i64"``; ``operand_count`` 1 for a scalar) and whether it is a
    WMMA taking signedness flags (``signed_flags``: 8-bit WMMA)."""

    intrinsic: str = ""
    operand: str = "half"
    operand_count: int = 1
    signed_flags: bool = False

    @property
    def kind(self) -> str:
        return "wmma" if ".wmma." in self.intrinsic else "mfma"


# -- fragment maps -----------------------------------------------------------------------------
def _mfma_maps(size: int, per_lane: int) -> tuple:
    """A, B and accumulator maps of a wave64 MFMA with ``size x size`` tiles and ``per_lane``
    A (and B) elements a lane."""
    def a(lane: int, e: int) -> tuple[int, int]:
        return lane % size, per_lane * (lane // size) + e

    def b(lane: int, e: int) -> tuple[int, int]:
        return per_lane * (lane // size) + e, lane % size

    def acc32(lane: int, i: int) -> tuple[int, int]:
        return 8 * (i // 4) + 4 * (lane // 32) + i % 4, lane % 32

    def acc16(lane: int, i: int) -> tuple[int, int]:
        return 4 * (lane // 16) + i, lane % 16
    return a, b, acc32 if size == 32 else acc16


def _wmma11_a(lane: int, e: int) -> tuple[int, int]:
    return lane % 16, e


def _wmma11_b(lane: int, e: int) -> tuple[int, int]:
    return e, lane % 16


def _wmma11_acc(lane: int, i: int) -> tuple[int, int]:
    return 2 * i + lane // 16, lane % 16


def _wmma12_a16(lane: int, e: int) -> tuple[int, int]:
    return lane % 16, e % 4 + 8 * (e // 4) + 4 * (lane // 16)


def _wmma12_b16(lane: int, e: int) -> tuple[int, int]:
    return e % 4 + 8 * (e // 4) + 4 * (lane // 16), lane % 16


def _wmma12_a8(lane: int, e: int) -> tuple[int, int]:
    return lane % 16, e + 8 * (lane // 16)


def _wmma12_b8(lane: int, e: int) -> tuple[int, int]:
    return e + 8 * (lane // 16), lane % 16


def _wmma12_acc(lane: int, i: int) -> tuple[int, int]:
    return i + 8 * (lane // 16), lane % 16


# -- the records -------------------------------------------------------------------------------
def _mfma(name: str, intrinsic: str, size: int, k: int, in_type: str, acc_type: str,
          operand: str, pack: int) -> AmdMatrixInstr:
    per_lane = size * k // 64
    a, b, acc = _mfma_maps(size, per_lane)
    return AmdMatrixInstr(name, size, size, k, in_type, in_type, acc_type, 64, a, b, acc,
                          a_pack=pack, b_pack=pack, intrinsic=intrinsic, operand=operand,
                          operand_count=per_lane if operand in ("half", "i16", "float") else 1)


def _wmma(name: str, intrinsic: str, in_type: str, acc_type: str, operand: str, count: int,
          pack: int, maps: tuple, replicas: int) -> AmdMatrixInstr:
    a, b, acc = maps
    return AmdMatrixInstr(name, 16, 16, 16, in_type, in_type, acc_type, 32, a, b, acc,
                          a_pack=pack, b_pack=pack, a_replicas=replicas, b_replicas=replicas,
                          intrinsic=intrinsic, operand=operand, operand_count=count,
                          signed_flags=in_type == "i8")


_M = "llvm.amdgcn.mfma."
#: gfx90a (CDNA2); 32x32 tiles first: taken when the dot's shape allows, 16x16 otherwise
CDNA2_INSTRS = (
    _mfma("v_mfma_f32_32x32x8f16", _M + "f32.32x32x8f16", 32, 8, "f16", "f32", "half", 4),
    _mfma("v_mfma_f32_16x16x16f16", _M + "f32.16x16x16f16", 16, 16, "f16", "f32", "half", 4),
    _mfma("v_mfma_f32_32x32x8bf16_1k", _M + "f32.32x32x8bf16.1k", 32, 8, "bf16", "f32", "i16", 4),
    _mfma("v_mfma_f32_16x16x16bf16_1k", _M + "f32.16x16x16bf16.1k", 16, 16, "bf16", "f32", "i16", 4),
    _mfma("v_mfma_f32_32x32x2f32", _M + "f32.32x32x2f32", 32, 2, "f32", "f32", "float", 1),
    _mfma("v_mfma_f32_16x16x4f32", _M + "f32.16x16x4f32", 16, 4, "f32", "f32", "float", 1),
    _mfma("v_mfma_i32_32x32x8i8", _M + "i32.32x32x8i8", 32, 8, "i8", "i32", "i32", 4),
    _mfma("v_mfma_i32_16x16x16i8", _M + "i32.16x16x16i8", 16, 16, "i8", "i32", "i32", 4),
)
_CDNA3_COMMON = (
    _mfma("v_mfma_f32_32x32x8_f16", _M + "f32.32x32x8f16", 32, 8, "f16", "f32", "half", 4),
    _mfma("v_mfma_f32_16x16x16_f16", _M + "f32.16x16x16f16", 16, 16, "f16", "f32", "half", 4),
    _mfma("v_mfma_f32_32x32x8_bf16", _M + "f32.32x32x8bf16.1k", 32, 8, "bf16", "f32", "i16", 4),
    _mfma("v_mfma_f32_16x16x16_bf16", _M + "f32.16x16x16bf16.1k", 16, 16, "bf16", "f32", "i16", 4),
    _mfma("v_mfma_f32_32x32x2_f32", _M + "f32.32x32x2f32", 32, 2, "f32", "f32", "float", 1),
    _mfma("v_mfma_f32_16x16x4_f32", _M + "f32.16x16x4f32", 16, 4, "f32", "f32", "float", 1),
    _mfma("v_mfma_i32_32x32x16_i8", _M + "i32.32x32x16.i8", 32, 16, "i8", "i32", "i64", 8),
    _mfma("v_mfma_i32_16x16x32_i8", _M + "i32.16x16x32.i8", 16, 32, "i8", "i32", "i64", 8),
)
#: gfx942 (CDNA3): xf32 (f32 rounded to 10 mantissa bits, Triton's tf32) before exact f32
CDNA3_INSTRS = (
    _mfma("v_mfma_f32_32x32x4_xf32", _M + "f32.32x32x4.xf32", 32, 4, "tf32", "f32", "float", 2),
    _mfma("v_mfma_f32_16x16x8_xf32", _M + "f32.16x16x8.xf32", 16, 8, "tf32", "f32", "float", 2),
) + _CDNA3_COMMON
#: gfx950 (CDNA4) runs CDNA3's instructions but xf32 (its own wider ones are not used yet)
CDNA4_INSTRS = _CDNA3_COMMON

_W = "llvm.amdgcn.wmma."
_W11 = (_wmma11_a, _wmma11_b, _wmma11_acc)
#: gfx1100 (RDNA3), wave32
RDNA3_INSTRS = (
    _wmma("v_wmma_f32_16x16x16_f16", _W + "f32.16x16x16.f16", "f16", "f32", "half", 16, 8, _W11, 2),
    _wmma("v_wmma_f32_16x16x16_bf16", _W + "f32.16x16x16.bf16", "bf16", "f32", "i16", 16, 8, _W11, 2),
    _wmma("v_wmma_i32_16x16x16_iu8", _W + "i32.16x16x16.iu8", "i8", "i32", "i32", 4, 16, _W11, 2),
)
_W12_16 = (_wmma12_a16, _wmma12_b16, _wmma12_acc)
#: gfx1201 (RDNA4), wave32
RDNA4_INSTRS = (
    _wmma("v_wmma_f32_16x16x16_f16", _W + "f32.16x16x16.f16", "f16", "f32", "half", 8, 4, _W12_16, 1),
    _wmma("v_wmma_f32_16x16x16_bf16", _W + "f32.16x16x16.bf16", "bf16", "f32", "i16", 8, 4, _W12_16, 1),
    _wmma("v_wmma_i32_16x16x16_iu8", _W + "i32.16x16x16.iu8", "i8", "i32", "i32", 2, 8,
          (_wmma12_a8, _wmma12_b8, _wmma12_acc), 1),
)

_ELEMENT_TYPES = {"half": F16, "i16": I16, "float": F32, "i32": I32, "i64": I64}


def _operand(b: ir.IRBuilder, instr: AmdMatrixInstr, regs: list, pack: int, type_name: str) -> ir.Value:
    """A lane's registers of one operand as the intrinsic's operand type."""
    bits = TYPE_BITS[type_name] * pack
    whole = regs[0]
    if len(regs) > 1:
        wide = ir.IntType(bits * len(regs))
        whole = b.zext(regs[0], wide)
        for r, reg in enumerate(regs[1:], 1):
            whole = b.or_(whole, b.shl(b.zext(reg, wide), ir.Constant(wide, bits * r)))
    elem = _ELEMENT_TYPES[instr.operand]
    target = elem if instr.operand_count == 1 else ir.VectorType(elem, instr.operand_count)
    return whole if whole.type == target else b.bitcast(whole, target)


def emit_matrix(b: ir.IRBuilder, instr: AmdMatrixInstr, a: list, bregs: list, acc: list) -> list:
    """One MFMA or WMMA: ``acc + A @ B`` for this lane (see ``GpuTarget.emit_matrix``)."""
    acc_elem = F32 if instr.acc_type == "f32" else I32
    acc_type = ir.VectorType(acc_elem, len(acc))
    vec = ir.Constant(acc_type, ir.Undefined)
    for i, v in enumerate(acc):
        vec = b.insert_element(vec, v, ir.Constant(I32, i))
    x = _operand(b, instr, a, instr.a_pack, instr.a_type)
    y = _operand(b, instr, bregs, instr.b_pack, instr.b_type)
    if instr.kind == "mfma":
        zero = ir.Constant(I32, 0)       # cbsz, abid, blgp: no broadcast between blocks
        args = [x, y, vec, zero, zero, zero]
    elif instr.signed_flags:
        yes = ir.Constant(I1, 1)         # both operands signed; no clamping
        args = [yes, x, yes, y, vec, ir.Constant(I1, 0)]
    else:
        args = [x, y, vec]
    module = b.module
    fn = module.globals.get(instr.intrinsic)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(acc_type, [v.type for v in args]), instr.intrinsic)
    out = b.call(fn, args)
    return [b.extract_element(out, ir.Constant(I32, i)) for i in range(len(acc))]
