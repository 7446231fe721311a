"""IR types -> llvmlite types, and small helpers for scalar-or-vector code.

Every IR scalar type has two LLVM forms:

* its *storage* form, the bits it has in memory: ``i1`` is a byte (NumPy's ``bool``),
  ``bf16`` is an ``i16`` (LLVM's ``bfloat`` needs library calls on many hosts), ``f16`` is
  ``half``, the float8 formats are an ``i8``, the rest are themselves;
* its *compute* form, the value in registers: ``i1`` is ``i1``, ``f16``, ``bf16`` and the
  float8 formats are ``float`` holding a value exactly representable in the narrow type (each
  op rounds once).

Integer signedness is not part of the LLVM type: it chooses the instruction.  Pointers map
to opaque ``ptr`` in the address space a backend's hook returns (0 on the CPU).

Helpers here work on a scalar or on a vector of any width, so a lowering can run the same
code on one element or on a chunk of lanes.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

from llvmlite import ir

from ...ir.types import PointerType, ScalarType

__all__ = ["LLVMTypes", "splat", "vector_width", "const_like", "intrinsic", "type_suffix",
           "I1", "I8", "I16", "I32", "I64", "F16", "F32", "F64"]

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()


class LLVMTypes:
    """The type mapping of one target.  ``address_space_of`` is the hook that says in which
    LLVM address space an IR pointer lives (default: 0, flat host memory)."""

    def __init__(self, address_space_of: Optional[Callable[[PointerType], int]] = None) -> None:
        self.address_space_of = address_space_of or (lambda p: 0)

    def storage(self, t: Union[ScalarType, PointerType]) -> ir.Type:
        """The type of one element of ``t`` in memory."""
        if isinstance(t, PointerType):
            return self.pointer(t)
        if t.is_bool:
            return I8
        if t.is_int:
            return ir.IntType(t.bits)
        if t.is_float8:
            return I8
        return {"f16": F16, "bf16": I16, "f32": F32, "f64": F64}[t.name]

    def compute(self, t: Union[ScalarType, PointerType]) -> ir.Type:
        """The type of a value of ``t`` in registers."""
        if isinstance(t, PointerType):
            return self.pointer(t)
        if t.is_int:
            return ir.IntType(t.bits)
        return F64 if t.name == "f64" else F32

    def pointer(self, t: PointerType) -> ir.Type:
        return ir.PointerType(addrspace=self.address_space_of(t))


def vector_width(value_or_type: Union[ir.Value, ir.Type]) -> int:
    """Number of lanes of a vector value or type; 0 for a scalar."""
    t = value_or_type if isinstance(value_or_type, ir.Type) else value_or_type.type
    return t.count if isinstance(t, ir.VectorType) else 0


def splat(b: ir.IRBuilder, scalar: ir.Value, width: int) -> ir.Value:
    """``scalar`` repeated in ``width`` lanes (``scalar`` itself when ``width`` is 0)."""
    if width == 0:
        return scalar
    if isinstance(scalar, ir.Constant):
        return ir.Constant(ir.VectorType(scalar.type, width), [scalar.constant] * width)
    vt = ir.VectorType(scalar.type, width)
    one = b.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, width), [0] * width))


def const_like(like: Union[ir.Value, ir.Type], value: object) -> ir.Constant:
    """A constant ``value`` of the type of ``like`` (splatted over its lanes if a vector)."""
    t = like if isinstance(like, ir.Type) else like.type
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value).constant] * t.count)
    return ir.Constant(t, value)


def type_suffix(t: ir.Type) -> str:
    """The overload suffix LLVM intrinsics use for ``t`` (``f32``, ``v16f32``, ``i64``)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return f"p{t.addrspace}"
    return {"half": "f16", "float": "f32", "double": "f64", "bfloat": "bf16"}[str(t)]


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type],
            var_arg: bool = False) -> ir.Function:
    """Declare the function ``name`` once in ``module`` (``var_arg``: C varargs, ``printf``)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, list(args), var_arg=var_arg), name)


def string_constant(module: ir.Module, text: str, addrspace: int = 0) -> ir.GlobalVariable:
    """A private NUL-terminated constant string in ``addrspace`` of ``module``."""
    data = bytearray(text.encode() + b"\0")
    g = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(data)),
                          module.get_unique_name("anytile_str"), addrspace=addrspace)
    g.global_constant, g.linkage = True, "private"
    g.initializer = ir.Constant(g.value_type, data)
    return g


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type],
              overloads: Sequence[ir.Type] = ()) -> ir.Function:
    """Declare (once) the function ``name.<suffixes of overloads>`` of the given signature.

    ``intrinsic(m, "llvm.fma", v, [v, v, v], [v])`` declares ``llvm.fma.v8f32``."""
    full = ".".join([name] + [type_suffix(t) for t in overloads])
    existing = module.globals.get(full)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, list(args)), full)
