"""The builtins that create, combine, reshape and move tiles (``tl.arange``, ``tl.load``...)."""
from __future__ import annotations

import enum
from typing import Any, Sequence

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from . import semantic
from .objects import (NotConstexprError, builtin, check_supported, constexpr, dtype, dtype_of,
                   float32, shape_list, static_int, static_value, tensor, tensor_method, unwrap)

_MAX_NUMEL = 1 << 20


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def check_tile_shape(shape: Sequence[int]) -> None:
    """Tile dimensions must be powers of two (as in Triton)."""
    numel = 1
    for i, d in enumerate(shape):
        if not _is_pow2(d):
            raise ValueError(f"tile dimension {i} is {d}, which is not a power of 2; tile "
                             "shapes must be powers of 2 (use a larger block and a mask)")
        numel *= d
    if numel > _MAX_NUMEL:
        raise ValueError(f"a tile of {numel} elements is too large (at most {_MAX_NUMEL})")


def _dtype_arg(value: Any, param: str = "dtype") -> dtype:
    v = unwrap(value)
    if isinstance(v, tensor):
        raise NotConstexprError(param, "dtypes must be known at compile time")
    if not isinstance(v, dtype):
        raise TypeError(f"`{param}` must be a dtype such as tl.float32, got {v!r}")
    return check_supported(v)


# ---------------------------------------------------------------------------------------------
# program ids and creation
# ---------------------------------------------------------------------------------------------
def _axis_arg(axis: Any, what: str) -> int:
    a = static_int(axis, "axis", f"{what} needs a static grid axis")
    if a not in (0, 1, 2):
        raise ValueError(f"{what} axis must be 0, 1, or 2 but got {a}")
    return a


@builtin
def program_id(axis: Any, _builder: Builder = None) -> tensor:
    """The index of this program along grid axis ``axis`` (0, 1 or 2)."""
    return tensor(_builder.create(ops.ProgramIdOp, _axis_arg(axis, "tl.program_id")).result)


@builtin
def num_programs(axis: Any, _builder: Builder = None) -> tensor:
    """The number of programs along grid axis ``axis``."""
    return tensor(_builder.create(ops.NumProgramsOp, _axis_arg(axis, "tl.num_programs")).result)


@builtin
def arange(start: Any, end: Any, _builder: Builder = None) -> tensor:
    """``[start, ..., end - 1]`` as an int32 tile; ``end - start`` must be a power of 2."""
    lo = static_int(start, "start", "tl.arange needs a static size")
    hi = static_int(end, "end", "tl.arange needs a static size")
    if hi <= lo:
        raise ValueError(f"tl.arange({lo}, {hi}): end must be greater than start")
    if not _is_pow2(hi - lo):
        raise ValueError(f"tl.arange({lo}, {hi}) has {hi - lo} elements, which is not a power "
                         "of 2; round the size up to a power of 2 and mask the extra lanes")
    return tensor(_builder.create(ops.ArangeOp, lo, hi).result)


@builtin
def full(shape: Any, value: Any, dtype: Any, _builder: Builder = None) -> tensor:
    """A tile of ``shape`` filled with ``value`` (a number or a scalar tensor)."""
    dims = shape_list(shape)
    check_tile_shape(dims)
    dt = _dtype_arg(dtype)
    v = unwrap(value)
    if isinstance(v, tensor):
        if v.shape:
            raise ValueError("tl.full needs a scalar value")
        return semantic.broadcast_to(semantic.cast(v, dt, _builder), dims, _builder)
    return semantic.constant(v, dt.ir, _builder, dims)


@builtin
def zeros(shape: Any, dtype: Any, _builder: Builder = None) -> tensor:
    """A tile of ``shape`` filled with zeros of ``dtype``."""
    return full(shape, 0, dtype, _builder=_builder)


@builtin
def zeros_like(input: Any, _builder: Builder = None) -> tensor:
    """Zeros with the shape and dtype of ``input``."""
    x = semantic.to_tensor(input, _builder)
    return full(x.shape, 0, x.dtype, _builder=_builder)


@builtin
def full_like(input: Any, value: Any, _builder: Builder = None) -> tensor:
    x = semantic.to_tensor(input, _builder)
    return full(x.shape, value, x.dtype, _builder=_builder)


@tensor_method
@builtin
def cast(input: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: Any = False,
         _builder: Builder = None) -> tensor:
    """``input`` converted to ``dtype`` (``bitcast=True`` reinterprets the bits)."""
    if unwrap(bitcast):
        return semantic.bitcast(input, _dtype_arg(dtype), _builder)
    return semantic.cast(input, _dtype_arg(dtype), _builder)


# ---------------------------------------------------------------------------------------------
# shape manipulation
# ---------------------------------------------------------------------------------------------
def _varargs_shape(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        return shape_list(shape[0])
    return shape_list(list(shape))


@tensor_method
@builtin
def reshape(input: Any, *shape: Any, can_reorder: Any = False, _builder: Builder = None) -> tensor:
    """The elements of ``input`` in row-major order, viewed with ``shape``."""
    x = semantic.to_tensor(input, _builder)
    dims = _varargs_shape(shape)
    check_tile_shape(dims)
    numel = 1
    for d in dims:
        numel *= d
    if numel != x.numel:
        raise ValueError(f"cannot reshape a tile of shape {list(x.shape)} ({x.numel} elements) "
                         f"to {list(dims)} ({numel} elements)")
    if dims == x.shape:
        return x
    return tensor(_builder.create(ops.ReshapeOp, x.handle,
                                  result_types=[irt.with_shape(irt.elem_type(x.type), dims)]).result)


@tensor_method
@builtin
def view(input: Any, *shape: Any, _builder: Builder = None) -> tensor:
    """Like ``reshape`` (the element order may be kept)."""
    return reshape(input, *shape, _builder=_builder)


def _normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{what}: invalid axis {axis} for a tile of rank {rank} "
                         f"(expected {-rank} <= axis < {rank})")
    return axis % rank


@tensor_method
@builtin
def ravel(input: Any, _builder: Builder = None) -> tensor:
    """The elements of ``input`` as a 1-D tile (row-major)."""
    x = semantic.to_tensor(input, _builder)
    return reshape(x, x.numel, _builder=_builder)


@tensor_method
@builtin
def expand_dims(input: Any, axis: Any, _builder: Builder = None) -> tensor:
    """``input`` with new dimensions of size 1 at ``axis`` (an int or a sequence)."""
    x = semantic.to_tensor(input, _builder)
    axes_v = unwrap(axis)
    axes = [static_int(a, "axis", "axes must be static") for a in
            (axes_v if isinstance(axes_v, (tuple, list)) else [axes_v])]
    new_rank = len(x.shape) + len(axes)
    normalized = [_normalize_axis(a, new_rank, "tl.expand_dims") for a in axes]
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"tl.expand_dims: duplicate axes, normalized axes = {normalized}")
    for a in sorted(normalized):
        x = tensor(_builder.create(ops.ExpandDimsOp, x.handle, a).result)
    return x


@tensor_method
@builtin
def broadcast_to(input: Any, *shape: Any, _builder: Builder = None) -> tensor:
    """``input`` broadcast to ``shape``."""
    dims = _varargs_shape(shape)
    check_tile_shape(dims)
    return semantic.broadcast_to(semantic.to_tensor(input, _builder), dims, _builder)


@builtin
def broadcast(input: Any, other: Any, _builder: Builder = None) -> tuple:
    """Both tiles broadcast to their common shape."""
    x, y = semantic.to_tensor(input, _builder), semantic.to_tensor(other, _builder)
    return tuple(semantic.broadcast_all(_builder, x, y))


@tensor_method
@builtin
def permute(input: Any, *dims: Any, _builder: Builder = None) -> tensor:
    """``input`` with dimensions reordered: result dim ``i`` is input dim ``dims[i]``."""
    x = semantic.to_tensor(input, _builder)
    order = _varargs_shape(dims)
    if sorted(order) != list(range(len(x.shape))):
        raise ValueError(f"permute order {list(order)} is not a permutation of the "
                         f"{len(x.shape)} dimensions of a tile of shape {list(x.shape)}")
    if list(order) == sorted(order):
        return x
    return tensor(_builder.create(ops.PermuteOp, x.handle, tuple(order)).result)


@tensor_method
@builtin
def trans(input: Any, *dims: Any, _builder: Builder = None) -> tensor:
    """The transpose of a 2-D tile, or ``permute(input, *dims)``."""
    x = semantic.to_tensor(input, _builder)
    if not dims:
        if len(x.shape) != 2:
            raise ValueError(f"tl.trans without dims needs a 2-D tile, got shape {list(x.shape)}")
        dims = (1, 0)
    return permute(x, *dims, _builder=_builder)


# ---------------------------------------------------------------------------------------------
# elementwise selections
# ---------------------------------------------------------------------------------------------
@builtin
def where(condition: Any, x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``x`` where ``condition`` is true, else ``y`` (broadcast together)."""
    return semantic.where(condition, x, y, _builder)


class PropagateNan(enum.Enum):
    """Whether ``tl.minimum``/``tl.maximum`` return NaN when an operand is NaN (``ALL``) or
    the other operand (``NONE``, the default)."""

    NONE = 0x0000
    ALL = 0xFFFF


def _min_max(kind: str, x: Any, y: Any, propagate_nan: Any, b: Builder) -> tensor:
    impl = semantic.minimum if kind == "min" else semantic.maximum
    result = impl(x, y, b)
    if unwrap(propagate_nan) in (None, PropagateNan.NONE) or not irt.elem_type(result.type).is_float:
        return result
    if unwrap(propagate_nan) is not PropagateNan.ALL:
        raise ValueError(f"propagate_nan must be a tl.PropagateNan, got {unwrap(propagate_nan)!r}")
    xs, ys = semantic.promote_pair(x, y, b, op=f"tl.{kind}imum")
    result = semantic.where(semantic.not_equal(ys, ys, b), ys, result, b)
    return semantic.where(semantic.not_equal(xs, xs, b), xs, result, b)


@builtin
def minimum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE,
            _builder: Builder = None) -> tensor:
    """Elementwise minimum (a NaN operand yields the other one unless
    ``propagate_nan=tl.PropagateNan.ALL``)."""
    return _min_max("min", x, y, propagate_nan, _builder)


@builtin
def maximum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE,
            _builder: Builder = None) -> tensor:
    """Elementwise maximum (a NaN operand yields the other one unless
    ``propagate_nan=tl.PropagateNan.ALL``)."""
    return _min_max("max", x, y, propagate_nan, _builder)


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = PropagateNan.NONE,
          _builder: Builder = None) -> tensor:
    """``x`` limited to ``[min, max]``."""
    return _min_max("min", _min_max("max", x, min, propagate_nan, _builder), max,
                    propagate_nan, _builder)


# ---------------------------------------------------------------------------------------------
# dot
# ---------------------------------------------------------------------------------------------
_PRECISIONS = ("tf32", "tf32x3", "bf16x3", "bf16x6", "ieee")


@builtin
def dot(input: Any, other: Any, acc: Any = None, input_precision: Any = None,
        allow_tf32: Any = None, max_num_imprecise_acc: Any = None, out_dtype: Any = float32,
        _builder: Builder = None) -> tensor:
    """The matrix product ``input @ other`` (plus ``acc``), summed in ``out_dtype``; 3-D
    tiles ``(B, M, K) @ (B, K, N)`` are ``B`` products, one per batch."""
    a, b_ = semantic.to_tensor(input, _builder), semantic.to_tensor(other, _builder)
    if len(a.shape) == 3 and len(b_.shape) == 3:
        return _batched_dot(a, b_, acc, input_precision, allow_tf32, out_dtype, _builder)
    if len(a.shape) != 2 or len(b_.shape) != 2:
        raise ValueError(f"tl.dot needs 2-D tiles (or 3-D: batches of them), got shapes "
                         f"{list(a.shape)} and {list(b_.shape)}")
    (m, k), (k2, n) = a.shape, b_.shape
    if k != k2:
        raise ValueError(f"shape mismatch in tl.dot: {list(a.shape)} @ {list(b_.shape)} "
                         f"(the inner dimensions K differ: {k} vs {k2})")
    if min(m, n, k) < 16:
        raise ValueError(f"tl.dot needs every dimension >= 16, got M={m}, N={n}, K={k}")
    at, bt = irt.elem_type(a.type), irt.elem_type(b_.type)
    if isinstance(at, irt.ScalarType) and isinstance(bt, irt.ScalarType) and \
            (at.is_float8 or bt.is_float8) and at.is_float and bt.is_float:
        # float8 products are exact in f16 (and in the f32 accumulator): upcast, as Triton
        # does where the hardware has no float8 matrix instruction
        a, b_ = (semantic.cast(x, dtype_of(irt.f16), _builder) if irt.elem_type(x.type).is_float8
                 else x for x in (a, b_))
        at, bt = irt.elem_type(a.type), irt.elem_type(b_.type)
    if at != bt:
        raise TypeError(f"tl.dot operands must have one dtype, got {a.dtype!r} and {b_.dtype!r}")
    if isinstance(at, irt.PointerType) or at not in (irt.i8, irt.f16, irt.bf16, irt.f32, irt.f64):
        raise TypeError(f"tl.dot supports int8, float16, bfloat16, float32 and float64 "
                        f"inputs, got {a.dtype!r}")
    if at == irt.i8:
        out = irt.i32
    elif at == irt.f64:
        out = irt.f64
    else:
        out = _dtype_arg(out_dtype, "out_dtype").ir
        if out not in (irt.f32, irt.f16, irt.bf16) or (out != irt.f32 and out != at):
            raise TypeError(f"tl.dot out_dtype {dtype_of(out)!r} is not allowed for "
                            f"{a.dtype!r} inputs (use tl.float32)")
    precision = unwrap(input_precision)
    if precision is None:
        precision = "ieee" if unwrap(allow_tf32) is False else "tf32"
    if precision not in _PRECISIONS:
        raise ValueError(f"tl.dot input_precision must be one of {', '.join(_PRECISIONS)}, "
                         f"got {precision!r}")
    if at != irt.f32:
        precision = "ieee"
    c = unwrap(acc)
    if c is None:
        c = semantic.constant(0, out, _builder, (m, n))
    else:
        c = semantic.to_tensor(c, _builder)
        if c.shape != (m, n):
            raise ValueError(f"shape mismatch in tl.dot: the accumulator has shape "
                             f"{list(c.shape)}, expected {[m, n]}")
        acc_elem = irt.elem_type(c.type)
        allowed = (irt.i32,) if at == irt.i8 else (irt.f32, irt.f16, irt.bf16, irt.f64)
        if acc_elem not in allowed:
            raise TypeError(f"tl.dot accumulator of {c.dtype!r} does not fit {a.dtype!r} inputs")
    return tensor(_builder.create(ops.DotOp, a.handle, b_.handle, c.handle,
                                  input_precision=precision).result)


def _batched_dot(a: tensor, b_: tensor, acc: Any, input_precision: Any, allow_tf32: Any,
                 out_dtype: Any, bld: Builder) -> tensor:
    """``(B, M, K) @ (B, K, N)``: batch ``i`` is taken out of each operand exactly (a sum
    over the batch axis of a tile that is zero outside batch ``i``), multiplied by the 2-D
    ``tl.dot`` and put in place; ``B`` is static, so the loop unrolls."""
    from .reduction import sum as tile_sum
    if a.shape[0] != b_.shape[0]:
        raise ValueError(f"shape mismatch in tl.dot: batches of {a.shape[0]} and {b_.shape[0]} "
                         f"({list(a.shape)} @ {list(b_.shape)})")
    batches = a.shape[0]
    batch = tensor(bld.create(ops.ArangeOp, 0, batches).result)
    c = unwrap(acc)
    c3 = None if c is None else semantic.to_tensor(c, bld)

    def take(x: tensor, i: int) -> tensor:
        mine = semantic.equal(reshape(batch, batches, 1, 1, _builder=bld), i, bld)
        only = semantic.where(semantic.broadcast_to(mine, x.shape, bld), x,
                              semantic.constant(0, irt.elem_type(x.type), bld, x.shape), bld)
        return semantic.cast(tile_sum(only, axis=0, _builder=bld), x.dtype, bld)

    out = None
    for i in range(batches):
        d = dot(take(a, i), take(b_, i), None if c3 is None else take(c3, i),
                input_precision=input_precision, allow_tf32=allow_tf32, out_dtype=out_dtype,
                _builder=bld)
        d3 = reshape(d, 1, *d.shape, _builder=bld)
        if out is None:
            out = semantic.broadcast_to(d3, (batches,) + tuple(d.shape), bld)
        else:
            here = semantic.equal(reshape(batch, batches, 1, 1, _builder=bld), i, bld)
            out = semantic.where(semantic.broadcast_to(here, out.shape, bld),
                                 semantic.broadcast_to(d3, out.shape, bld), out, bld)
    return out


# ---------------------------------------------------------------------------------------------
# hints, assertions, debugging
# ---------------------------------------------------------------------------------------------
def _hint_values(values: Any, x: tensor, what: str) -> tuple:
    v = unwrap(values)
    items = list(v) if isinstance(v, (tuple, list)) else [v]
    vals = tuple(static_int(i, "values", f"{what} needs static values") for i in items)
    if len(vals) != max(1, len(x.shape)):
        raise ValueError(f"{what} needs {max(1, len(x.shape))} values for a tile of shape "
                         f"{list(x.shape)}, got {len(vals)}")
    return vals


@builtin
def multiple_of(input: Any, values: Any, _builder: Builder = None) -> tensor:
    """Promise that every element of ``input`` is a multiple of ``values``."""
    x = semantic.to_tensor(input, _builder)
    vals = _hint_values(values, x, "tl.multiple_of")
    return tensor(_builder.create(ops.HintOp, x.handle, multiple_of=vals).result)


@builtin
def max_contiguous(input: Any, values: Any, _builder: Builder = None) -> tensor:
    """Promise that runs of ``values`` consecutive elements of ``input`` are consecutive."""
    x = semantic.to_tensor(input, _builder)
    vals = _hint_values(values, x, "tl.max_contiguous")
    return tensor(_builder.create(ops.HintOp, x.handle, max_contiguous=vals).result)


@builtin
def max_constancy(input: Any, values: Any, _builder: Builder = None) -> tensor:
    """Accepted for compatibility; anytile records no constancy facts."""
    x = semantic.to_tensor(input, _builder)
    _hint_values(values, x, "tl.max_constancy")
    return x


@builtin
def static_assert(cond: Any, msg: Any = "", _builder: Builder = None) -> None:
    """Fail compilation when the compile-time ``cond`` is false."""
    c = static_value(cond, "cond", "tl.static_assert is checked at compile time")
    if not c:
        text = unwrap(msg)
        raise AssertionError(f"static_assert failed{': ' + str(text) if text else ''}")


@builtin
def static_print(*values: Any, sep: Any = " ", end: Any = "\n", _builder: Builder = None) -> None:
    """Print compile-time values while compiling."""
    print(*(unwrap(v) for v in values), sep=unwrap(sep), end=unwrap(end))


@builtin
def device_print(prefix: Any, *args: Any, hex: Any = False, _builder: Builder = None) -> None:
    """Print ``prefix`` and each element of each argument when the kernel runs: one line per
    element, ``pid (X, Y, Z) idx (I, J) PREFIX VALUE`` (see ``ir.PrintOp``); with several
    arguments, ``PREFIX`` names each as ``(operand K)``.  ``hex=True`` prints integers and
    the bits of floats in hexadecimal."""
    text = unwrap(prefix)
    if not isinstance(text, str):
        raise TypeError(f"tl.device_print: the prefix must be a string, got {text!r}")
    as_hex = bool(unwrap(hex))
    for k, arg in enumerate(args):
        value = semantic.to_tensor(unwrap(arg), _builder)
        label = f"{text} (operand {k})" if len(args) > 1 else text
        _builder.create(ops.PrintOp, value.handle, label.strip(), as_hex)


@builtin
def device_assert(cond: Any, msg: Any = "", mask: Any = None, _builder: Builder = None) -> None:
    """Stop the launch with ``msg`` where ``cond`` is false when the kernel runs."""
    c = unwrap(cond)
    text = str(unwrap(msg))
    if not isinstance(c, tensor):
        c = bool(c)
    c = semantic.to_bool(c, _builder)
    if unwrap(mask) is not None:
        c = semantic.logical_or(c, semantic.logical_not(mask, _builder), _builder)
    _builder.create(ops.AssertOp, c.handle, text)


@builtin
def debug_barrier(_builder: Builder = None) -> None:
    """Complete every memory operation issued so far before any later one starts."""
    _builder.create(ops.BarrierOp)


@builtin
def cdiv(x: Any, div: Any, _builder: Builder = None) -> Any:
    """``ceil(x / div)`` for positive integers (folded when both are compile-time)."""
    xv, dv = unwrap(x), unwrap(div)
    if not isinstance(xv, tensor) and not isinstance(dv, tensor):
        return constexpr((xv + dv - 1) // dv)
    return semantic.floordiv(semantic.sub(semantic.add(xv, dv, _builder), 1, _builder), dv,
                             _builder)


__all__ = ["program_id", "num_programs", "arange", "full", "zeros", "zeros_like", "full_like",
           "cast", "reshape", "view", "ravel", "expand_dims", "broadcast_to", "broadcast",
           "permute", "trans", "where", "PropagateNan", "minimum", "maximum", "clamp", "dot",
           "multiple_of", "max_contiguous", "max_constancy", "static_assert", "static_print",
           "device_assert", "debug_barrier", "cdiv", "check_tile_shape"]
