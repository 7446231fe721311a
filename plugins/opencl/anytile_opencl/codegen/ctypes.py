"""IR types as OpenCL C types, and constants as OpenCL C literals.

Register types: ``i1`` is a ``char`` holding 0 or 1; ``f16`` and ``bf16`` are their bits in a
``ushort``, the float8 formats their bits in a ``uchar`` (computed in ``float``, rounded once
per op; OpenCL C 1.2 without ``cl_khr_fp16`` has no half arithmetic); pointers are global
addresses in a ``ulong``.  Memory holds ``i1`` as one byte and narrow floats as their bits.
"""
from __future__ import annotations

import math
from typing import Any

from anytile.ir import PointerType, ScalarType, float8_codes, stored_as_code

__all__ = ["scalar_name", "vector_name", "unsigned_name", "signed_name", "memory_name",
           "literal", "vector_literal", "is_narrow_float", "size_of", "wrap_int"]

_SCALAR = {"i1": "char", "i8": "char", "i16": "short", "i32": "int", "i64": "long",
           "u8": "uchar", "u16": "ushort", "u32": "uint", "u64": "ulong",
           "f16": "ushort", "bf16": "ushort", "f32": "float", "f64": "double",
           "f8e4m3": "uchar", "f8e5m2": "uchar", "f8e4b15": "uchar"}
_UNSIGNED = {8: "uchar", 16: "ushort", 32: "uint", 64: "ulong"}
_SIGNED = {8: "char", 16: "short", 32: "int", 64: "long"}


def is_narrow_float(t: Any) -> bool:
    """A float narrower than ``float`` (``f16``, ``bf16``, float8): kept as bits, computed in
    ``float``."""
    return isinstance(t, ScalarType) and t.is_float and t.bits < 32


def _bits(t: Any) -> int:
    return 64 if isinstance(t, PointerType) else max(8, t.bits)


def size_of(t: Any) -> int:
    """Bytes one element of ``t`` takes in memory."""
    return _bits(t) // 8


def scalar_name(t: Any) -> str:
    """The C type of one register value of IR type ``t``."""
    return "ulong" if isinstance(t, PointerType) else _SCALAR[t.name]


def vector_name(t: Any, lanes: int) -> str:
    """``scalar_name(t)`` with ``lanes`` components (the scalar type itself for one lane)."""
    base = scalar_name(t)
    return base if lanes == 1 else f"{base}{lanes}"


def unsigned_name(t: Any, lanes: int = 1) -> str:
    """The unsigned integer type as wide as ``t`` (its bits, for wrapping arithmetic)."""
    base = _UNSIGNED[_bits(t)]
    return base if lanes == 1 else f"{base}{lanes}"


def signed_name(t: Any, lanes: int = 1) -> str:
    """The signed integer type as wide as ``t`` (select masks, relational results)."""
    base = _SIGNED[_bits(t)]
    return base if lanes == 1 else f"{base}{lanes}"


def memory_name(t: Any) -> str:
    """The C type of one element of ``t`` in global memory."""
    if isinstance(t, PointerType):
        return "ulong"
    return "uchar" if t.name == "i1" else scalar_name(t)


def wrap_int(value: int, t: Any) -> int:
    """``value`` wrapped into the range of integer type ``t`` (two's complement)."""
    bits = _bits(t)
    value &= (1 << bits) - 1
    if isinstance(t, ScalarType) and t.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _int_literal(value: int, t: Any) -> str:
    value = wrap_int(int(value), t)
    name = scalar_name(t)
    if name in ("long", "ulong"):
        if value == -(1 << 63):
            return "(-9223372036854775807L - 1L)"
        return f"{value}UL" if name == "ulong" else f"{value}L"
    if name == "int" and value == -(1 << 31):
        return "(-2147483647 - 1)"
    if name == "uint":
        return f"{value}u"
    return f"(({name}){value})" if name != "int" else str(value)


def _float_bits(value: float, t: ScalarType) -> int:
    import numpy as np
    if stored_as_code(t):              # a float8 format NumPy lacks (e4b15): the IR's rounding
        return int(float8_codes(value, t))
    with np.errstate(over="ignore", invalid="ignore"):
        return int(np.array(value, t.np).view(np.uint8 if t.bits == 8 else np.uint16)[()])


def literal(value: Any, t: Any) -> str:
    """The OpenCL C literal of ``value`` as IR type ``t`` (floats exactly, in hex)."""
    if isinstance(t, PointerType) or t.is_int:
        if isinstance(t, ScalarType) and t.is_bool:
            return f"((char){1 if value else 0})"
        return _int_literal(int(value), t)
    if is_narrow_float(t):
        return f"(({scalar_name(t)}){_float_bits(float(value), t)})"
    value = float(value)
    suffix = "f" if t.bits == 32 else ""
    cast = "float" if t.bits == 32 else "double"
    if math.isnan(value):
        return f"(({cast})NAN)"
    if math.isinf(value):
        return f"(({cast}){'-' if value < 0 else ''}INFINITY)"
    if t.bits == 32:
        import numpy as np
        value = float(np.float32(value))
    return f"({value.hex()}{suffix})" if value != 0 or math.copysign(1, value) > 0 else \
        f"(-0.0{suffix})"


def vector_literal(values: list[int], t: Any) -> str:
    """A vector of integer constants, ``(int4)(0, 1, 2, 3)``."""
    if len(values) == 1:
        return literal(values[0], t)
    return f"(({vector_name(t, len(values))})({', '.join(_int_literal(v, t) for v in values)}))"
