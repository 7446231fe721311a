"""``tl.device_print`` for LLVM backends: the C ``printf`` format of one ``ir.PrintOp`` line
and its arguments (program ids and coordinates as ``int``/``long long``, the value as
``double``, ``long long`` or ``unsigned long long``), so every backend that reaches a
``printf`` writes the same text as the interpreter."""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir.types import PointerType, ScalarType, f32
from .types import F64, I64

__all__ = ["print_format", "print_argument"]


def print_format(elem: Any, prefix: str, rank: int, as_hex: bool, long: str = "ll") -> str:
    """The format of one line (``long``: the length modifier of 64-bit integers)."""
    fmt = "pid (%d, %d, %d) "
    if rank:
        fmt += "idx (" + ", ".join(["%d"] * rank) + ") "
    if prefix:
        fmt += prefix.replace("%", "%%") + " "
    if isinstance(elem, PointerType) or as_hex:
        fmt += f"0x%{long}x"
    elif elem.is_float:
        fmt += "%.17g" if elem.bits == 64 else "%.9g"
    else:
        fmt += f"%{long}d" if elem.is_signed else f"%{long}u"
    return fmt + "\n"


def print_argument(b: ir.IRBuilder, ew: Any, elem: Any, v: ir.Value, as_hex: bool) -> ir.Value:
    """``v`` (in the lowering's compute representation, ``ew`` its elementwise helper) as the
    argument ``print_format`` expects."""
    if isinstance(elem, PointerType):
        return b.ptrtoint(v, I64)
    assert isinstance(elem, ScalarType)
    if elem.is_float:
        if as_hex:
            raw = ew.to_storage(elem, v) if elem.bits < 32 else v   # f16, bf16, float8: bits
            if not isinstance(raw.type, ir.IntType):
                raw = b.bitcast(raw, ir.IntType(elem.bits))
            return b.zext(raw, I64) if elem.bits < 64 else raw
        if elem.bits == 16 and v.type != ir.FloatType():
            v = ew.cast(elem, f32, v)
        return v if v.type == F64 else b.fpext(v, F64)
    if v.type.width == 64:
        return v
    return b.sext(v, I64) if elem.is_signed and not as_hex else b.zext(v, I64)
