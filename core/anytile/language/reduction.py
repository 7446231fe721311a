"""Reductions and scans: ``tl.sum``, ``tl.max``, ``tl.argmax``, ``tl.reduce``, ``tl.cumsum``...

Each builds a ``reduce`` or ``scan`` op whose ``combine`` region combines two scalars per
input.  Builtin reductions write the region themselves; ``tl.reduce`` and
``tl.associative_scan`` call the user's ``@jit`` combine function there through the
frontend (``_generator``)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from ..ir.nodes import Block
from .source import KernelSource
from . import semantic
from .objects import builtin, dtype, dtype_of, static_int, tensor, tensor_method, unwrap
from .standard import expand_dims, reshape

__all__ = ["sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce", "cumsum", "cumprod",
           "associative_scan"]

Combine = Callable[[list[tensor]], Sequence[tensor]]


def _inputs(input: Any, what: str, b: Builder) -> list[tensor]:
    v = unwrap(input)
    items = list(v) if isinstance(v, (tuple, list)) else [v]
    srcs = [semantic.to_tensor(unwrap(i), b) for i in items]
    shape = srcs[0].shape
    if not shape:
        raise ValueError(f"{what} needs a tile, got a scalar")
    for s in srcs:
        if s.shape != shape:
            raise ValueError(f"{what}: all inputs must have one shape, got {list(shape)} and "
                             f"{list(s.shape)}")
    return srcs


def _axis(axis: Any, rank: int, what: str) -> Optional[int]:
    a = unwrap(axis)
    if a is None:
        return None
    a = static_int(a, "axis", f"{what} needs a static axis")
    if not -rank <= a < rank:
        raise ValueError(f"{what}: invalid axis {a} for a tile of rank {rank} "
                         f"(expected {-rank} <= axis < {rank})")
    return a % rank


def _combine_region(elems: list[irt.ScalarType], combine: Combine, what: str,
                    b: Builder) -> Block:
    region = Block.with_args(elems * 2)
    with b.at_end_of(region):
        results = list(combine([tensor(a) for a in region.args]))
        if len(results) != len(elems):
            raise ValueError(f"the combine function of {what} returned {len(results)} values "
                             f"for {len(elems)} inputs")
        handles = []
        for r, elem in zip(results, elems):
            r = semantic.to_tensor(unwrap(r), b)
            if r.type != elem:
                raise TypeError(f"the combine function of {what} returned {r.dtype!r} "
                                f"{'tile ' + str(list(r.shape)) if r.shape else 'scalar'} for "
                                f"an input of {dtype_of(elem)!r}; it must return scalars of "
                                "the input types")
            handles.append(r.handle)
        b.create(ops.YieldOp, handles)
    return region


def _reduce(srcs: list[tensor], axis: Any, combine: Combine, keep_dims: Any, what: str,
            b: Builder, commutative: bool = False) -> list[tensor]:
    """``ReduceOp`` of ``srcs``; ``commutative``: ``combine`` gives the same values with its
    operands swapped, so backends may combine in any order (else: in index order)."""
    rank = len(srcs[0].shape)
    ax = _axis(axis, rank, what)
    if ax is None:
        srcs = [reshape(s, srcs[0].numel, _builder=b) for s in srcs]
        ax = 0
    elems = [irt.elem_type(s.type) for s in srcs]
    region = _combine_region(elems, combine, what, b)
    commutative = commutative or _is_commutative_region(region)
    op = b.create(ops.ReduceOp, [s.handle for s in srcs], ax, region, commutative=commutative)
    outs = [tensor(r) for r in op.results]
    if unwrap(keep_dims):
        if unwrap(axis) is None:
            outs = [reshape(semantic.broadcast_to(o, (1,), b), *([1] * rank), _builder=b)
                    for o in outs]
        else:
            outs = [expand_dims(o, ax, _builder=b) for o in outs]
    return outs


_COMMUTATIVE_KINDS = frozenset({"add", "mul", "max", "min", "and", "or", "xor"})


def _is_commutative_region(region: Block) -> bool:
    """Whether a combine region is, for each of its n results, one commutative binary op of
    the i-th left and right arguments (``a + b``, ``max(b, a)``...)."""
    *body, end = region.ops
    n = len(region.args) // 2
    if len(body) != n or len(end.operands) != n:
        return False
    for i, (op, out) in enumerate(zip(body, end.operands)):
        pair = {region.args[i], region.args[n + i]}
        if not (isinstance(op, ops.BinaryOp) and op.kind in _COMMUTATIVE_KINDS and
                {op.lhs, op.rhs} == pair and len(pair) == 2 and out is op.result):
            return False
    return True


def _scan(srcs: list[tensor], axis: Any, combine: Combine, reverse: Any, what: str,
          b: Builder) -> list[tensor]:
    ax = _axis(axis, len(srcs[0].shape), what)
    if ax is None:
        raise ValueError(f"{what} needs an axis")
    elems = [irt.elem_type(s.type) for s in srcs]
    region = _combine_region(elems, combine, what, b)
    op = b.create(ops.ScanOp, [s.handle for s in srcs], ax, bool(unwrap(reverse)), region)
    return [tensor(r) for r in op.results]


def _binary_combine(kind: str, b: Builder) -> Combine:
    def combine(args: list[tensor]) -> list[tensor]:
        lhs, rhs = args
        return [tensor(b.create(ops.BinaryOp, kind, lhs.handle, rhs.handle).result)]
    return combine


def _bf16_to_f32(x: tensor, b: Builder) -> tensor:
    """bf16 inputs of max/min/argmax/argmin/cumsum/cumprod are computed (and returned) in
    f32, as Triton does."""
    if irt.elem_type(x.type) == irt.bf16:
        return semantic.cast(x, dtype_of(irt.f32), b)
    return x


def _sum_input(x: tensor, dt: Any, b: Builder) -> tensor:
    target = unwrap(dt)
    if target is None:
        elem = irt.elem_type(x.type)
        if isinstance(elem, irt.PointerType):
            raise TypeError("cannot sum pointers")
        if elem.is_int and elem.bits < 32:
            target = dtype_of(irt.u32 if elem.is_unsigned else irt.i32)
    if target is not None:
        if not isinstance(target, dtype):
            raise TypeError(f"`dtype` must be a dtype, got {target!r}")
        x = semantic.cast(x, target, b)
    return x


@tensor_method
@builtin
def sum(input: Any, axis: Any = None, keep_dims: Any = False, dtype: Any = None,
        _builder: Builder = None) -> tensor:
    """The sum along ``axis`` (all elements when ``None``)."""
    x = _sum_input(_inputs(input, "tl.sum", _builder)[0], dtype, _builder)
    return _reduce([x], axis, _binary_combine("add", _builder), keep_dims, "tl.sum", _builder,
                   commutative=True)[0]


@tensor_method
@builtin
def xor_sum(input: Any, axis: Any = None, keep_dims: Any = False,
            _builder: Builder = None) -> tensor:
    """The bitwise xor of the elements along ``axis``."""
    x = _inputs(input, "tl.xor_sum", _builder)[0]
    if not irt.elem_type(x.type).is_int:
        raise TypeError(f"tl.xor_sum needs integers, got {x.dtype!r}")
    return _reduce([x], axis, _binary_combine("xor", _builder), keep_dims, "tl.xor_sum",
                   _builder)[0]


def _arg_combine(kind: str, tie_break_left: bool, float_values: bool, b: Builder) -> Combine:
    """The (value, index) combine of argmax/argmin: the larger (smaller) value wins, a NaN
    wins over any number, and among equal values (or two NaNs) the smaller index when
    ``tie_break_left``.  That is a total order, so every reduction tree (a loop, SIMD lanes,
    warp shuffles) gives the same answer: the first NaN's index if there is a NaN."""
    better = semantic.greater_than if kind == "max" else semantic.less_than
    and_, or_, not_ = semantic.logical_and, semantic.logical_or, semantic.logical_not

    def combine(args: list[tensor]) -> list[tensor]:
        v1, i1, v2, i2 = args
        take_left = better(v1, v2, b)
        same = semantic.equal(v1, v2, b)
        if float_values:
            nan1, nan2 = semantic.not_equal(v1, v1, b), semantic.not_equal(v2, v2, b)
            take_left = or_(take_left, and_(nan1, not_(nan2, b), b), b)
            same = or_(same, and_(nan1, nan2, b), b)
        if tie_break_left:
            take_left = or_(take_left, and_(same, semantic.less_than(i1, i2, b), b), b)
        return [semantic.where(take_left, v1, v2, b), semantic.where(take_left, i1, i2, b)]
    return combine


def _indices(x: tensor, axis: int, b: Builder) -> tensor:
    n = x.shape[axis]
    idx = tensor(b.create(ops.ArangeOp, 0, n).result)
    shape = [1] * len(x.shape)
    shape[axis] = n
    if len(shape) > 1:
        idx = reshape(idx, *shape, _builder=b)
    return semantic.broadcast_to(idx, x.shape, b)


def _arg_reduce(kind: str, input: Any, axis: Any, tie_break_left: Any, keep_dims: Any,
                what: str, b: Builder) -> tuple[tensor, tensor]:
    x = _inputs(input, what, b)[0]
    if isinstance(irt.elem_type(x.type), irt.PointerType):
        raise TypeError(f"{what} is not defined for pointers")
    x = _bf16_to_f32(x, b)
    if unwrap(axis) is None:
        x = reshape(x, x.numel, _builder=b)
        ax: Any = 0
    else:
        ax = _axis(axis, len(x.shape), what)
    idx = _indices(x, ax, b)
    is_float = irt.elem_type(x.type).is_float
    left = bool(unwrap(tie_break_left))    # ties to the lower index: a total order
    values, indices = _reduce([x, idx], ax, _arg_combine(kind, left, is_float, b), keep_dims,
                              what, b, commutative=left)
    return values, indices


def _min_max(kind: str, input: Any, axis: Any, return_indices: Any, tie_break_left: Any,
             keep_dims: Any, b: Builder) -> Any:
    what = f"tl.{kind}"
    if unwrap(return_indices):
        return _arg_reduce(kind, input, axis, tie_break_left, keep_dims, what, b)
    x = _inputs(input, what, b)[0]
    if isinstance(irt.elem_type(x.type), irt.PointerType):
        raise TypeError(f"{what} is not defined for pointers")
    return _reduce([_widen_narrow(_bf16_to_f32(x, b), b)], axis, _binary_combine(kind, b),
                   keep_dims, what, b)[0]


def _widen_narrow(x: tensor, b: Builder) -> tensor:
    """``tl.max``/``tl.min`` without indices reduce (and return) values narrower than 32
    bits in f32 (floats) or i32 (integers, either signedness), as Triton does."""
    elem = irt.elem_type(x.type)
    if elem.bits >= 32:
        return x
    return semantic.cast(x, dtype_of(irt.f32 if elem.is_float else irt.i32), b)


@tensor_method
@builtin
def max(input: Any, axis: Any = None, return_indices: Any = False,
        return_indices_tie_break_left: Any = True, keep_dims: Any = False,
        _builder: Builder = None) -> Any:
    """The maximum along ``axis`` (and its index when ``return_indices``)."""
    return _min_max("max", input, axis, return_indices, return_indices_tie_break_left,
                    keep_dims, _builder)


@tensor_method
@builtin
def min(input: Any, axis: Any = None, return_indices: Any = False,
        return_indices_tie_break_left: Any = True, keep_dims: Any = False,
        _builder: Builder = None) -> Any:
    """The minimum along ``axis`` (and its index when ``return_indices``)."""
    return _min_max("min", input, axis, return_indices, return_indices_tie_break_left,
                    keep_dims, _builder)


@tensor_method
@builtin
def argmax(input: Any, axis: Any = None, tie_break_left: Any = True, keep_dims: Any = False,
           _builder: Builder = None) -> tensor:
    """The index of the maximum along ``axis`` (the smallest such index on ties; a NaN counts
    as larger than any number, so a tile holding NaNs gives the first NaN's index)."""
    return _arg_reduce("max", input, axis, tie_break_left, keep_dims, "tl.argmax", _builder)[1]


@tensor_method
@builtin
def argmin(input: Any, axis: Any = None, tie_break_left: Any = True, keep_dims: Any = False,
           _builder: Builder = None) -> tensor:
    """The index of the minimum along ``axis`` (the smallest such index on ties; a NaN counts
    as smaller than any number, so a tile holding NaNs gives the first NaN's index)."""
    return _arg_reduce("min", input, axis, tie_break_left, keep_dims, "tl.argmin", _builder)[1]


def _user_combine(combine_fn: Any, generator: Any, what: str) -> Combine:
    fn = unwrap(combine_fn)
    if not isinstance(fn, KernelSource):
        raise TypeError(f"the combine function of {what} must be a @jit function, got {fn!r}")

    def combine(args: list[tensor]) -> list[tensor]:
        result = generator.call_function(fn, args)
        return list(result) if isinstance(result, tuple) else [result]
    return combine


def _single_or_tuple(input: Any, outs: list[tensor]) -> Any:
    return tuple(outs) if isinstance(unwrap(input), (tuple, list)) else outs[0]


@tensor_method
@builtin
def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: Any = False,
           _builder: Builder = None, _generator: Any = None) -> Any:
    """Reduce ``input`` (a tile or a tuple of tiles) along ``axis`` with ``combine_fn``."""
    srcs = _inputs(input, "tl.reduce", _builder)
    outs = _reduce(srcs, axis, _user_combine(combine_fn, _generator, "tl.reduce"), keep_dims,
                   "tl.reduce", _builder)
    return _single_or_tuple(input, outs)


@tensor_method
@builtin
def associative_scan(input: Any, axis: Any, combine_fn: Any, reverse: Any = False,
                     _builder: Builder = None, _generator: Any = None) -> Any:
    """Inclusive scan of ``input`` along ``axis`` with ``combine_fn``."""
    srcs = _inputs(input, "tl.associative_scan", _builder)
    outs = _scan(srcs, axis, _user_combine(combine_fn, _generator, "tl.associative_scan"),
                 reverse, "tl.associative_scan", _builder)
    return _single_or_tuple(input, outs)


@tensor_method
@builtin
def cumsum(input: Any, axis: Any = 0, reverse: Any = False, dtype: Any = None,
           _builder: Builder = None) -> tensor:
    """The inclusive running sum along ``axis`` (of bf16 inputs: in f32, as Triton)."""
    x = _sum_input(_bf16_to_f32(_inputs(input, "tl.cumsum", _builder)[0], _builder), dtype,
                   _builder)
    return _scan([x], axis, _binary_combine("add", _builder), reverse, "tl.cumsum", _builder)[0]


@tensor_method
@builtin
def cumprod(input: Any, axis: Any = 0, reverse: Any = False, _builder: Builder = None) -> tensor:
    """The inclusive running product along ``axis``."""
    x = _bf16_to_f32(_inputs(input, "tl.cumprod", _builder)[0], _builder)
    return _scan([x], axis, _binary_combine("mul", _builder), reverse, "tl.cumprod",
                 _builder)[0]
