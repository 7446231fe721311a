"""How the language's operations become IR: type promotion, broadcasting and checks.

The rules are Triton's:

* a Python number next to a tensor takes the tensor's dtype unless it is of a higher kind
  (bool < integer < float): ``f16 * 2.0 -> f16``, ``i8 + 1 -> i8``, ``i32 + 1.5 -> f32``;
* otherwise float64 wins, then float32, then float16 (``f16 + bf16 -> f32``), then bfloat16;
  ``/`` and ``%`` on 16-bit floats compute in float32;
* integers follow C's usual conversions (wider wins; unsigned wins at equal width);
* ``/`` on integers gives float32; ``//`` and ``%`` truncate toward zero like C;
* shapes broadcast like NumPy (missing leading dimensions, then dimensions of size 1).

Every function takes tensors or Python values and the ``Builder`` ``b`` and returns a tensor.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from .objects import check_supported, dtype, dtype_of, pointer_type, tensor, unwrap

Number = (bool, int, float)


# ---------------------------------------------------------------------------------------------
# constants and conversions to tensors
# ---------------------------------------------------------------------------------------------
def literal_type(value: Any) -> irt.ScalarType:
    """The dtype a Python number has on its own (Triton's rules)."""
    if isinstance(value, bool):
        return irt.i1
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return irt.i32
        if 2**31 <= value < 2**32:
            return irt.u32
        if -2**63 <= value < 2**63:
            return irt.i64
        if 2**63 <= value < 2**64:
            return irt.u64
        raise ValueError(f"integer literal {value} does not fit in 64 bits")
    if isinstance(value, float):
        return irt.f32
    raise TypeError(f"{value!r} is not a number")


def _check_fits(value: Any, ty: irt.ScalarType) -> None:
    if ty.is_int and not ty.is_bool and isinstance(value, int) and not isinstance(value, bool):
        lo, hi = (0, 2**ty.bits - 1) if ty.is_unsigned else (-2**(ty.bits - 1), 2**(ty.bits - 1) - 1)
        if not lo <= value <= hi:
            raise ValueError(f"the literal {value} is out of range for {dtype_of(ty)!r}")


def constant(value: Any, ty: irt.ScalarType, b: Builder, shape: Sequence[int] = ()) -> tensor:
    """A scalar (or tile of ``shape``) with every element equal to the Python ``value``."""
    value = unwrap(value)
    if ty.is_float:
        value = float(value)
    elif ty.is_bool:
        value = 1 if value else 0
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"cannot convert {value} to {dtype_of(ty)!r}")
        value = int(value)
    else:
        value = int(value)
        _check_fits(value, ty)
    return tensor(b.create(ops.ConstantOp, value, result_types=[irt.with_shape(ty, tuple(shape))]).result)


def to_tensor(value: Any, b: Builder) -> tensor:
    """A tensor for ``value``; Python numbers become scalar constants of their literal type."""
    value = unwrap(value)
    if isinstance(value, tensor):
        return value
    if isinstance(value, Number):
        return constant(value, literal_type(value), b)
    raise TypeError(f"expected a tensor or a number, got {_describe(value)}")


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, tensor):
        return f"a tensor of {value.dtype!r}"
    return f"{type(value).__name__} {value!r}"


def _elem(x: tensor) -> irt.ElemType:
    return irt.elem_type(x.type)


def _scalar(x: tensor) -> irt.ScalarType:
    """The element type of ``x``, which must not be a pointer."""
    e = _elem(x)
    assert isinstance(e, irt.ScalarType)
    return e


def _name(t: irt.ElemType) -> str:
    return repr(dtype_of(t))


def cast(x: Any, target: Any, b: Builder) -> tensor:
    """``x`` converted to dtype ``target`` (value conversion)."""
    x = to_tensor(x, b)
    target = unwrap(target)
    if not isinstance(target, dtype):
        raise TypeError(f"expected a dtype such as tl.float32, got {_describe(target)}")
    check_supported(target)
    src = _elem(x)
    if isinstance(target, pointer_type):
        dst_ptr = target.ir_pointer
        if src == dst_ptr:
            return x
        if isinstance(src, irt.PointerType) or src.name in ("i64", "u64"):
            # a pointer retyped, or a 64-bit address made a pointer (Triton's int_to_ptr)
            return tensor(b.create(ops.BitcastOp, x.handle,
                                   result_types=[irt.with_shape(dst_ptr, x.shape)]).result)
        raise TypeError(f"cannot cast {_name(src)} to a pointer: only 64-bit integers "
                        f"(tl.int64, tl.uint64) hold addresses")
    if isinstance(src, irt.PointerType):
        if not (isinstance(target.ir, irt.ScalarType) and target.ir.is_int
                and not target.ir.is_bool):
            raise TypeError(f"cannot cast a pointer ({_name(src)}) to {target!r}: a pointer "
                            f"becomes an integer (its address), e.g. tl.int64")
        address = tensor(b.create(ops.BitcastOp, x.handle,
                                  result_types=[irt.with_shape(irt.i64, x.shape)]).result)
        return address if target.ir == irt.i64 else cast(address, target, b)
    if src == target.ir:
        return x
    return tensor(b.create(ops.CastOp, x.handle,
                           result_types=[irt.with_shape(target.ir, x.shape)]).result)


def bitcast(x: Any, target: Any, b: Builder) -> tensor:
    """``x``'s bits reinterpreted as ``target`` (same bit width)."""
    x = to_tensor(x, b)
    target = unwrap(target)
    if not isinstance(target, dtype):
        raise TypeError(f"expected a dtype such as tl.float32, got {_describe(target)}")
    check_supported(target)
    src = _elem(x)
    dst = target.ir_pointer if isinstance(target, pointer_type) else target.ir
    if src == dst:
        return x
    src_bits = 64 if isinstance(src, irt.PointerType) else src.bits
    if src_bits != target.primitive_bitwidth:
        raise TypeError(f"bitcast needs types of one bit width: {_name(src)} has {src_bits} "
                        f"bits, {target!r} has {target.primitive_bitwidth}")
    return tensor(b.create(ops.BitcastOp, x.handle,
                           result_types=[irt.with_shape(dst, x.shape)]).result)


# ---------------------------------------------------------------------------------------------
# broadcasting
# ---------------------------------------------------------------------------------------------
def _fmt(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def broadcast_shapes(a: Sequence[int], b_: Sequence[int]) -> tuple[int, ...]:
    """The NumPy broadcast of two shapes, or a ``ValueError`` naming the clash."""
    rank = max(len(a), len(b_))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b_)) + tuple(b_)
    out = []
    for axis, (x, y) in enumerate(zip(pa, pb)):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shape mismatch: cannot broadcast tiles of shapes {_fmt(a)} and "
                             f"{_fmt(b_)} (dimension {axis}: {x} vs {y})")
        out.append(max(x, y))
    return tuple(out)


def broadcast_to(x: tensor, shape: Sequence[int], b: Builder) -> tensor:
    """``x`` splatted or broadcast to ``shape``."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if not x.shape:
        return tensor(b.create(ops.SplatOp, x.handle,
                               result_types=[irt.TileType(shape, _elem(x))]).result)
    if broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"shape mismatch: cannot broadcast a tile of shape {_fmt(x.shape)} "
                         f"to {_fmt(shape)}")
    while len(x.shape) < len(shape):
        x = tensor(b.create(ops.ExpandDimsOp, x.handle, 0).result)
    if x.shape == shape:
        return x
    return tensor(b.create(ops.BroadcastOp, x.handle,
                           result_types=[irt.TileType(shape, _elem(x))]).result)


def broadcast_all(b: Builder, *xs: tensor) -> list[tensor]:
    shape: tuple[int, ...] = ()
    for x in xs:
        shape = broadcast_shapes(shape, x.shape)
    return [broadcast_to(x, shape, b) for x in xs]


# ---------------------------------------------------------------------------------------------
# type promotion
# ---------------------------------------------------------------------------------------------
def _kind_rank(t: irt.ScalarType) -> int:
    return 0 if t.is_bool else (1 if t.is_int else 2)


def integer_promote(a: irt.ScalarType, b_: irt.ScalarType) -> irt.ScalarType:
    """C's usual arithmetic conversions between two integer types."""
    if a.is_unsigned == b_.is_unsigned:
        return a if a.bits > b_.bits else b_
    unsigned, signed = (a, b_) if a.is_unsigned else (b_, a)
    return unsigned if unsigned.bits >= signed.bits else signed


def computation_type(a: irt.ScalarType, a_is_literal: bool, b_: irt.ScalarType,
                     b_is_literal: bool, div_or_mod: bool) -> irt.ScalarType:
    """The type both operands of an arithmetic op are converted to (Triton's table)."""
    if a.is_float8 or b_.is_float8:
        raise TypeError(f"arithmetic and comparisons on float8 values ({_name(a)}, {_name(b_)}) "
                        f"are not supported: convert them first, x.to(tl.float16) or "
                        f"x.to(tl.float32)")
    if a_is_literal != b_is_literal:
        lit, ten = (a, b_) if a_is_literal else (b_, a)
        if _kind_rank(lit) <= _kind_rank(ten):
            if div_or_mod and ten in (irt.f16, irt.bf16):
                return irt.f32
            return ten
    if irt.f64 in (a, b_):
        return irt.f64
    if irt.f32 in (a, b_):
        return irt.f32
    if irt.f16 in (a, b_):
        return irt.f32 if div_or_mod or irt.bf16 in (a, b_) else irt.f16
    if irt.bf16 in (a, b_):
        return irt.f32 if div_or_mod else irt.bf16
    if div_or_mod and a.is_unsigned != b_.is_unsigned and not (a.is_bool or b_.is_bool):
        raise TypeError(f"Cannot use /, // or % with {_name(a)} and {_name(b_)} because they "
                        "have different signedness; cast them to the same signedness")
    return integer_promote(a, b_)


def _operand(x: Any, b: Builder) -> tuple[Any, bool]:
    x = unwrap(x)
    if isinstance(x, tensor):
        return x, False
    if isinstance(x, Number):
        return x, True
    raise TypeError(f"expected a tensor or a number, got {_describe(x)}")


def _materialize(x: Any, is_literal: bool, ty: irt.ScalarType, b: Builder) -> tensor:
    return constant(x, ty, b) if is_literal else cast(x, dtype_of(ty), b)


def promote_pair(x: Any, y: Any, b: Builder, *, div_or_mod: bool = False,
                 op: str = "") -> tuple[tensor, tensor]:
    """Both operands converted to their computation type and broadcast to one shape."""
    x, x_lit = _operand(x, b)
    y, y_lit = _operand(y, b)
    xt = literal_type(x) if x_lit else _elem(x)
    yt = literal_type(y) if y_lit else _elem(y)
    if isinstance(xt, irt.PointerType) or isinstance(yt, irt.PointerType):
        raise TypeError(f"`{op}` is not defined for pointers ({_name(xt)}, {_name(yt)})")
    ty = computation_type(xt, x_lit, yt, y_lit, div_or_mod)
    xs = _materialize(x, x_lit, ty, b)
    ys = _materialize(y, y_lit, ty, b)
    xs, ys = broadcast_all(b, xs, ys)
    return xs, ys


def promote_pair_or_pointers(x: Any, y: Any, b: Builder, op: str) -> tuple[tensor, tensor]:
    """Like ``promote_pair`` (without broadcasting), but two pointers of one type pass."""
    ux, uy = unwrap(x), unwrap(y)
    if _is_ptr(ux) or _is_ptr(uy):
        xs, ys = to_tensor(ux, b), to_tensor(uy, b)
        if _elem(xs) != _elem(ys):
            raise TypeError(f"{op}: operands of different types ({_name(_elem(xs))}, "
                            f"{_name(_elem(ys))})")
        return xs, ys
    return promote_pair(ux, uy, b, op=op)


def _binary(kind: str, x: tensor, y: tensor, b: Builder) -> tensor:
    return tensor(b.create(ops.BinaryOp, kind, x.handle, y.handle).result)


def _is_ptr(x: Any) -> bool:
    return isinstance(x, tensor) and isinstance(_elem(x), irt.PointerType)


def _offset(ptr: tensor, offset: Any, b: Builder, negate: bool = False) -> tensor:
    off = to_tensor(offset, b)
    oty = _elem(off)
    if isinstance(oty, irt.PointerType) or not oty.is_int:
        raise TypeError(f"a pointer can only be offset by an integer, not {_name(oty)}")
    if negate:
        off = neg(off, b)
    ptr, off = broadcast_all(b, ptr, off)
    return tensor(b.create(ops.AddPtrOp, ptr.handle, off.handle).result)


# ---------------------------------------------------------------------------------------------
# arithmetic
# ---------------------------------------------------------------------------------------------
def add(x: Any, y: Any, b: Builder) -> tensor:
    x, y = unwrap(x), unwrap(y)
    if _is_ptr(y) and _is_ptr(x):
        raise TypeError("cannot add two pointers")
    if _is_ptr(y):
        x, y = y, x
    if _is_ptr(x):
        return _offset(x, y, b)
    return _binary("add", *promote_pair(x, y, b, op="+"), b)


def sub(x: Any, y: Any, b: Builder) -> tensor:
    x, y = unwrap(x), unwrap(y)
    if _is_ptr(x) and not _is_ptr(y):
        return _offset(x, y, b, negate=True)
    if _is_ptr(y):
        raise TypeError("cannot subtract a pointer")
    return _binary("sub", *promote_pair(x, y, b, op="-"), b)


def mul(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("mul", *promote_pair(x, y, b, op="*"), b)


def truediv(x: Any, y: Any, b: Builder) -> tensor:
    """``/``: float division; integers are converted to float32 first."""
    xs, ys = promote_pair(x, y, b, div_or_mod=True, op="/")
    if _scalar(xs).is_int:
        xs, ys = cast(xs, dtype_of(irt.f32), b), cast(ys, dtype_of(irt.f32), b)
    return _binary("fdiv", xs, ys, b)


def floordiv(x: Any, y: Any, b: Builder) -> tensor:
    """``//``: integer division truncating toward zero (C), integers only."""
    xs, ys = promote_pair(x, y, b, div_or_mod=True, op="//")
    if not _scalar(xs).is_int:
        raise TypeError(f"`//` needs integer operands, got {_name(_elem(xs))}; use `/` for "
                        "floats (and tl.floor to round)")
    return _binary("div", xs, ys, b)


def mod(x: Any, y: Any, b: Builder) -> tensor:
    """``%``: C remainder (sign of the dividend) for integers, fmod for floats."""
    return _binary("rem", *promote_pair(x, y, b, div_or_mod=True, op="%"), b)


def pow(x: Any, y: Any, b: Builder) -> tensor:
    """``x ** n`` for a compile-time integer ``n >= 0``, as repeated multiplication."""
    n = unwrap(y)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TypeError("`**` inside kernels needs a non-negative constexpr integer exponent; "
                        "use tl.exp2/tl.log2 for other powers")
    x = to_tensor(x, b)
    result = constant(1, _scalar(x), b, x.shape)
    base = x
    while n:
        if n & 1:
            result = _binary("mul", result, base, b)
        n >>= 1
        if n:
            base = _binary("mul", base, base, b)
    return result


def _bitwise_pair(x: Any, y: Any, b: Builder, op: str) -> tuple[tensor, tensor]:
    xs, ys = promote_pair(x, y, b, op=op)
    if not _scalar(xs).is_int:
        raise TypeError(f"invalid operands of type {_describe(unwrap(x))} and "
                        f"{_describe(unwrap(y))} for bitwise `{op}`: it needs integer or "
                        f"boolean operands")
    return xs, ys


def and_(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("and", *_bitwise_pair(x, y, b, "&"), b)


def or_(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("or", *_bitwise_pair(x, y, b, "|"), b)


def xor_(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("xor", *_bitwise_pair(x, y, b, "^"), b)


def shl(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("shl", *_bitwise_pair(x, y, b, "<<"), b)


def shr(x: Any, y: Any, b: Builder) -> tensor:
    """``x >> y``: arithmetic when ``x`` itself is signed, logical otherwise, whatever type
    the two promote to (as Triton: int8 -8 >> uint16 1 is 65532)."""
    left = _scalar(to_tensor(x, b))
    xs, ys = _bitwise_pair(x, y, b, ">>")
    promoted = _scalar(xs)
    if left.is_signed and promoted.is_unsigned:
        signed = irt.scalar_type("i" + promoted.name[1:])
        shifted = _binary("shr", _bitcast_to(xs, signed, b), _bitcast_to(ys, signed, b), b)
        return _bitcast_to(shifted, promoted, b)
    return _binary("shr", xs, ys, b)


def _bitcast_to(x: tensor, elem: irt.ScalarType, b: Builder) -> tensor:
    return tensor(b.create(ops.BitcastOp, x.handle,
                           result_types=[irt.with_shape(elem, irt.shape_of(x.type))]).result)


def minimum(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("min", *promote_pair(x, y, b, op="minimum"), b)


def maximum(x: Any, y: Any, b: Builder) -> tensor:
    return _binary("max", *promote_pair(x, y, b, op="maximum"), b)


def neg(x: Any, b: Builder) -> tensor:
    x = to_tensor(x, b)
    if _is_ptr(x):
        raise TypeError("cannot negate a pointer")
    return tensor(b.create(ops.UnaryOp, "neg", x.handle).result)


def pos(x: Any, b: Builder) -> tensor:
    return to_tensor(x, b)


def invert(x: Any, b: Builder) -> tensor:
    """``~x``: bitwise not of an integer (logical not of a boolean)."""
    x = to_tensor(x, b)
    if _is_ptr(x) or not _scalar(x).is_int:
        raise TypeError(f"`~` needs an integer or boolean operand, got {_describe(x)}")
    return tensor(b.create(ops.UnaryOp, "not", x.handle).result)


# ---------------------------------------------------------------------------------------------
# comparisons and logic
# ---------------------------------------------------------------------------------------------
def _compare(pred: str, x: Any, y: Any, b: Builder) -> tensor:
    x, y = unwrap(x), unwrap(y)
    if _is_ptr(x) or _is_ptr(y):
        return _compare_pointers(pred, x, y, b)
    xs, ys = promote_pair(x, y, b, op=_PRED_SYMBOL[pred])
    return tensor(b.create(ops.CompareOp, pred, xs.handle, ys.handle).result)


_PRED_SYMBOL = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _compare_pointers(pred: str, x: Any, y: Any, b: Builder) -> tensor:
    """Pointers compare as addresses (Triton allows ``ptrs < end_ptr``); both sides must
    point to one element type."""
    if not (_is_ptr(x) and _is_ptr(y)):
        raise TypeError(f"`{_PRED_SYMBOL[pred]}` compares a pointer only with another pointer, "
                        f"got {_describe(x)} and {_describe(y)}")
    if _elem(x) != _elem(y):
        raise TypeError(f"`{_PRED_SYMBOL[pred]}` compares pointers to one element type, got "
                        f"{_name(_elem(x))} and {_name(_elem(y))}")
    xs, ys = broadcast_all(b, x, y)
    return tensor(b.create(ops.CompareOp, pred, xs.handle, ys.handle).result)


def less_than(x: Any, y: Any, b: Builder) -> tensor:
    return _compare("lt", x, y, b)


def less_equal(x: Any, y: Any, b: Builder) -> tensor:
    return _compare("le", x, y, b)


def greater_than(x: Any, y: Any, b: Builder) -> tensor:
    return _compare("gt", x, y, b)


def greater_equal(x: Any, y: Any, b: Builder) -> tensor:
    return _compare("ge", x, y, b)


def equal(x: Any, y: Any, b: Builder) -> tensor:
    return _compare("eq", x, y, b)


def not_equal(x: Any, y: Any, b: Builder) -> tensor:
    return _compare("ne", x, y, b)


def to_bool(x: Any, b: Builder) -> tensor:
    """``x != 0`` as ``int1`` (``x`` itself when already boolean)."""
    x = to_tensor(x, b)
    if _is_ptr(x):
        raise TypeError("a pointer cannot be used as a condition")
    if _scalar(x).is_bool:
        return x
    return _compare("ne", x, 0, b)


def logical_and(x: Any, y: Any, b: Builder) -> tensor:
    xs, ys = broadcast_all(b, to_bool(x, b), to_bool(y, b))
    return _binary("and", xs, ys, b)


def logical_or(x: Any, y: Any, b: Builder) -> tensor:
    xs, ys = broadcast_all(b, to_bool(x, b), to_bool(y, b))
    return _binary("or", xs, ys, b)


def logical_not(x: Any, b: Builder) -> tensor:
    return tensor(b.create(ops.UnaryOp, "not", to_bool(x, b).handle).result)


def where(cond: Any, x: Any, y: Any, b: Builder) -> tensor:
    """``cond ? x : y`` elementwise, with ``x`` and ``y`` promoted as for arithmetic."""
    c = to_bool(cond, b)
    ux, uy = unwrap(x), unwrap(y)
    if _is_ptr(ux) or _is_ptr(uy):
        xs, ys = to_tensor(ux, b), to_tensor(uy, b)
        if _elem(xs) != _elem(ys):
            raise TypeError(f"tl.where: pointer operands of different types "
                            f"({_name(_elem(xs))}, {_name(_elem(ys))})")
    else:
        xs, ys = promote_pair(ux, uy, b, op="tl.where")
    c, xs, ys = broadcast_all(b, c, xs, ys)
    return tensor(b.create(ops.SelectOp, c.handle, xs.handle, ys.handle).result)


# ---------------------------------------------------------------------------------------------
# indexing: x[:, None]
# ---------------------------------------------------------------------------------------------
def index(x: tensor, idx: Any, b: Builder) -> tensor:
    """``x[...]`` with full slices ``:`` (keep a dimension) and ``None`` (insert one)."""
    idx = unwrap(idx)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    items = [unwrap(i) for i in items]
    for item in items:
        if isinstance(item, slice) and (item.start, item.stop, item.step) != (None, None, None):
            raise ValueError(f"unsupported tensor index {item.start}:{item.stop}"
                             f"{'' if item.step is None else ':' + str(item.step)}: only full "
                             f"slices `:` are supported when indexing tiles")
        if item is not None and not isinstance(item, slice):
            raise TypeError(f"unsupported tensor index: tiles can only be indexed with `:` and "
                            f"None, got {_describe(item)}")
    kept = sum(1 for i in items if isinstance(i, slice))
    if kept > len(x.shape) + sum(1 for i in items if i is None):
        raise ValueError(f"unsupported tensor index: {kept} `:` entries for a tile of rank "
                         f"{len(x.shape)}")
    out = x                   # as Triton: None inserts a dimension, `:` keeps one
    for axis, item in enumerate(items):
        if item is None:
            out = tensor(b.create(ops.ExpandDimsOp, out.handle, axis).result)
    return out
