"""Functions of Triton's standard library that are compositions of other builtins:
``tl.softmax``, ``tl.swizzle2d``, ``tl.join``, ``tl.split``, ``tl.interleave``, ``tl.sort``,
``tl.flip``, ``tl.histogram`` and ``tl.gather`` (plus the hint ``tl.assume``)."""
from __future__ import annotations

from typing import Any

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from ..ir.nodes import Block
from . import semantic
from .objects import builtin, dtype_of, int32, static_int, tensor, tensor_method, unwrap
from .math import fdiv
from .reduction import max as _max
from .reduction import sum as _sum
from .standard import expand_dims, permute, reshape

__all__ = ["softmax", "swizzle2d", "join", "split", "interleave", "dot_scaled", "cat", "item", "sort", "topk", "flip",
           "histogram", "assume", "gather"]


@tensor_method
@builtin
def softmax(x: Any, dim: Any = None, keep_dims: Any = False, ieee_rounding: Any = False,
            _builder: Builder = None) -> tensor:
    """``exp(x - max(x)) / sum(exp(x - max(x)))`` along ``dim`` (0 when ``None``)."""
    b = _builder
    axis = 0 if unwrap(dim) is None else dim
    z = semantic.sub(x, _max(x, axis, keep_dims=keep_dims, _builder=b), b)
    num = tensor(b.create(ops.UnaryOp, "exp", z.handle).result)
    den = _sum(num, axis, keep_dims=keep_dims, _builder=b)
    return fdiv(num, den, ieee_rounding, _builder=b)


@builtin
def swizzle2d(i: Any, j: Any, size_i: Any, size_j: Any, size_g: Any,
              _builder: Builder = None) -> tuple:
    """Map row-major ``(i, j)`` in a ``size_i x size_j`` grid to column-major order within
    groups of ``size_g`` rows (the grouped ordering of Triton's matmul tutorial)."""
    b = _builder
    ij = semantic.add(semantic.mul(i, size_j, b), j, b)
    size_gj = semantic.mul(size_g, size_j, b)
    off_i = semantic.mul(semantic.floordiv(ij, size_gj, b), size_g, b)
    # the last group may have fewer rows
    rows = semantic.minimum(semantic.sub(size_i, off_i, b), size_g, b)
    ij = semantic.mod(ij, size_gj, b)
    return semantic.add(off_i, semantic.mod(ij, rows, b), b), semantic.floordiv(ij, rows, b)


@builtin
def join(a: Any, b: Any, _builder: Builder = None) -> tensor:
    """``a`` and ``b`` (broadcast together) stacked along a new minor dimension of size 2."""
    bld = _builder
    x, y = semantic.broadcast_all(bld, *semantic.promote_pair_or_pointers(a, b, bld, "tl.join"))
    rank = len(x.shape)
    x, y = expand_dims(x, rank, _builder=bld), expand_dims(y, rank, _builder=bld)
    shape = x.shape[:-1] + (2,)
    which = tensor(bld.create(ops.ArangeOp, 0, 2).result)
    if rank:
        which = reshape(which, *([1] * rank + [2]), _builder=bld)
    first = semantic.equal(which, 0, bld)
    return semantic.where(semantic.broadcast_to(first, shape, bld),
                          semantic.broadcast_to(x, shape, bld),
                          semantic.broadcast_to(y, shape, bld), bld)


def _pick(x: tensor, take_last: bool, b: Builder, axis: int = -1) -> tensor:
    """Element 0 (or the last) along ``axis``, bit for bit: its bit pattern is the only
    non-zero term of an integer sum along ``axis`` (a sum's order does not matter, so every
    backend's reduction gives it, whatever order it combines in)."""
    axis %= len(x.shape)
    elem = irt.elem_type(x.type)
    width = max(elem.bits, 8)
    as_int = semantic.cast(x, dtype_of(irt.i8), b) if elem.bits == 1 else \
        semantic.bitcast(x, dtype_of(_SIGNED_INTS[width]), b)
    wanted = semantic.equal(_axis_index(x.shape, axis, b), x.shape[axis] - 1 if take_last else 0,
                            b)
    only = semantic.where(wanted, as_int, 0, b)
    picked = semantic.cast(_sum(only, axis, _builder=b), as_int.dtype, b)
    if elem.bits == 1:
        return semantic.cast(picked, x.dtype, b)
    return semantic.bitcast(picked, x.dtype, b)


def _halves(y: tensor, axis: int, b: Builder) -> tuple[tensor, tensor]:
    """The two entries of the size-2 ``axis`` of ``y``, each broadcast back to ``y``'s shape."""
    def back(v: tensor) -> tensor:
        return semantic.broadcast_to(expand_dims(v, axis, _builder=b), y.shape, b)
    return back(_pick(y, False, b, axis)), back(_pick(y, True, b, axis))


def _axis_index(shape: tuple, axis: int, b: Builder) -> tensor:
    """A tile of ``shape`` holding each element's index along ``axis``."""
    idx = tensor(b.create(ops.ArangeOp, 0, shape[axis]).result)
    for i in range(len(shape)):    # r[None, :], as a kernel would write it: GPU layouts then
        if i != axis:              # match the tile it meets, where a reshape needs a copy
            idx = tensor(b.create(ops.ExpandDimsOp, idx.handle, i).result)
    return semantic.broadcast_to(idx, shape, b)


def _log2_dim(n: int, what: str) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{what} needs a power-of-2 dimension, got {n}")
    return n.bit_length() - 1


@tensor_method
@builtin
def split(a: Any, _builder: Builder = None) -> tuple:
    """The two halves of ``a``'s minor dimension, which must have size 2 (inverse of join)."""
    x = semantic.to_tensor(a, _builder)
    if not x.shape or x.shape[-1] != 2:
        raise ValueError(f"tl.split needs a tile whose last dimension is 2, got shape "
                         f"{list(x.shape)}")
    return _pick(x, False, _builder), _pick(x, True, _builder)


_SIGNED_INTS = {8: irt.i8, 16: irt.i16, 32: irt.i32, 64: irt.i64}


def _minor_dim(x: tensor, dim: Any, what: str) -> int:
    d = unwrap(dim)
    rank = len(x.shape)
    d = rank - 1 if d is None else int(d) % rank
    if d != rank - 1:
        raise ValueError(f"{what} supports only the last dimension (dim={rank - 1}), got {d}")
    return d


def _sorts_after(left: tensor, right: tensor, b: Builder) -> tensor:
    """``left > right`` in the order of ``tl.sort``: NaN above every number (as NumPy's
    ``np.sort``), NaNs equal to each other, so that the network sees a total order."""
    after = semantic.greater_than(left, right, b)
    if not irt.elem_type(left.type).is_float:
        return after
    nan_over_number = semantic.and_(semantic.not_equal(left, left, b),
                                    semantic.equal(right, right, b), b)
    return semantic.or_(after, nan_over_number, b)


def _compare_and_swap(x: tensor, flip: Any, i: int, n_dims: int, b: Builder) -> tensor:
    """One bitonic step: elements 2**(n_dims-i-1) apart are ordered (reversed where ``flip``)."""
    n_outer = x.numel >> n_dims
    shape = (n_outer * 2 ** i, 2, 2 ** (n_dims - i - 1))
    left, right = (reshape(h, *x.shape, _builder=b)
                   for h in _halves(reshape(x, *shape, _builder=b), 1, b))
    cond = semantic.not_equal(_sorts_after(left, right, b), flip, b)
    # swap by xor of the bit patterns, so every value (NaN, -0.0) moves unchanged
    width = irt.elem_type(x.type).bits
    if width == 1:
        return semantic.where(cond, semantic.xor_(semantic.xor_(x, left, b), right, b), x, b)
    bits = dtype_of(_SIGNED_INTS[width])
    ix, il, ir = (semantic.bitcast(v, bits, b) for v in (x, left, right))
    swapped = semantic.xor_(ix, semantic.where(cond, semantic.xor_(il, ir, b), 0, b), b)
    return semantic.bitcast(swapped, x.dtype, b)


@tensor_method
@builtin
def sort(x: Any, dim: Any = None, descending: Any = False, _builder: Builder = None) -> tensor:
    """``x`` sorted along its last dimension (a bitonic network, as in Triton).  NaN sorts
    as in NumPy's ``np.sort``: after every number in ascending order, before every number
    with ``descending=True``; -0.0 and +0.0 are equal (either may come first)."""
    b = _builder
    t = semantic.to_tensor(x, b)
    d = _minor_dim(t, dim, "tl.sort")
    n_dims = _log2_dim(t.shape[d], "tl.sort")
    desc = 1 if unwrap(descending) else 0
    for stage in range(1, n_dims + 1):
        if stage < n_dims:  # alternate directions so the halves form bitonic sequences
            shape = (t.numel >> n_dims) * 2 ** (n_dims - 1 - stage), 2, 2 ** stage
            flip: Any = reshape(_axis_index(shape, 1, b), *t.shape, _builder=b)
        else:
            flip = desc
        for i in range(stage):
            t = _compare_and_swap(t, flip, i + (n_dims - stage), n_dims, b)
    return t


@tensor_method
@builtin
def topk(x: Any, k: Any, dim: Any = None, _builder: Builder = None) -> tensor:
    """The ``k`` largest elements along the last dimension, largest first; NaN counts as
    larger than every number (the order of ``tl.sort(..., descending=True)``)."""
    b = _builder
    t = semantic.to_tensor(x, b)
    d = _minor_dim(t, dim, "tl.topk")
    n = t.shape[d]
    kk = static_int(k, "k", "tl.topk's k is a tile size")
    _log2_dim(kk, "tl.topk's k")
    if kk > n:
        raise ValueError(f"tl.topk: k={kk} is larger than the dimension ({n})")
    ordered = sort(t, d, True, _builder=b)
    if kk == n:
        return ordered
    # the first k of each row: the first chunk of k along a split of the last dimension
    chunks = reshape(ordered, *(t.shape[:-1] + (n // kk, kk)), _builder=b)
    return _pick(chunks, False, b, len(t.shape) - 1)


@tensor_method
@builtin
def flip(x: Any, dim: Any = None, _builder: Builder = None) -> tensor:
    """``x`` reversed along ``dim`` (the last dimension by default)."""
    b = _builder
    t = semantic.to_tensor(x, b)
    d = unwrap(dim)
    rank = len(t.shape)
    d = rank - 1 if d is None else int(d) % rank
    k = _log2_dim(t.shape[d], "tl.flip")
    # split dim d into k axes of size 2; reversing it reverses each of them
    split_shape = t.shape[:d] + (2,) * k + t.shape[d + 1:]
    y = reshape(t, *split_shape, _builder=b) if split_shape != t.shape else t
    for axis in range(d, d + k):
        first, last = _halves(y, axis, b)
        at_first = semantic.equal(_axis_index(y.shape, axis, b), 0, b)
        y = semantic.where(at_first, last, first, b)
    return reshape(y, *t.shape, _builder=b)


@builtin
def interleave(a: Any, b: Any, _builder: Builder = None) -> tensor:
    """``a`` and ``b`` interleaved along their last dimension: ``[a0, b0, a1, b1, ...]``."""
    c = join(a, b, _builder=_builder)
    if len(c.shape) == 1:
        return c
    return reshape(c, *(c.shape[:-2] + (2 * c.shape[-2],)), _builder=_builder)


@builtin
def cat(input: Any, other: Any, can_reorder: Any = False, _builder: Builder = None) -> tensor:
    """``input`` and ``other`` (one shape) concatenated along dimension 0, in order (Triton
    allows a reordered result with ``can_reorder``; an in-order one is always right)."""
    b = _builder
    x, y = semantic.to_tensor(input, b), semantic.to_tensor(other, b)
    if not x.shape or x.shape != y.shape:
        raise ValueError(f"tl.cat needs two tiles of one shape, got {list(x.shape)} and "
                         f"{list(y.shape)}")
    rank = len(x.shape)
    stacked = permute(join(x, y, _builder=b), rank, *range(rank), _builder=b)
    return reshape(stacked, 2 * x.shape[0], *x.shape[1:], _builder=b)


@tensor_method
@builtin
def item(input: Any, _builder: Builder = None) -> tensor:
    """The one element of a one-element tile, as a scalar."""
    x = semantic.to_tensor(input, _builder)
    if not x.shape:
        return x
    if x.numel != 1:
        raise ValueError(f"item() needs a tile of one element, got shape {list(x.shape)}")
    return _pick(reshape(x, 1, _builder=_builder), False, _builder, axis=0)


@tensor_method
@builtin
def histogram(input: Any, num_bins: Any, mask: Any = None, _builder: Builder = None) -> tensor:
    """int32 counts of the values ``0 .. num_bins - 1`` in the 1-D integer tile ``input``
    (where ``mask`` is true); other values are not counted."""
    b = _builder
    x = semantic.to_tensor(input, b)
    elem = irt.elem_type(x.type)
    if len(x.shape) != 1 or not isinstance(elem, irt.ScalarType) or not elem.is_int:
        raise TypeError(f"tl.histogram needs a 1-D integer tile, got {x.dtype!r} of shape "
                        f"{list(x.shape)}")
    bins = static_int(num_bins, "num_bins", "the histogram's size is its tile shape")
    _log2_dim(bins, "tl.histogram")
    n = x.shape[0]
    hit = semantic.equal(semantic.broadcast_to(expand_dims(x, 1, _builder=b), (n, bins), b),
                         _axis_index((n, bins), 1, b), b)
    if unwrap(mask) is not None:
        m = semantic.broadcast_to(semantic.to_tensor(unwrap(mask), b), (n,), b)
        hit = semantic.logical_and(hit, semantic.broadcast_to(expand_dims(m, 1, _builder=b),
                                                              (n, bins), b), b)
    return _sum(semantic.cast(hit, int32, b), 0, _builder=b)


@builtin
def assume(cond: Any, _builder: Builder = None) -> None:
    """A promise that ``cond`` holds, which a compiler may optimise with (a false promise is
    undefined behaviour, as in Triton): an ``assume`` op, which the GPU backends read
    (``x >= 0`` of an integer: ``x`` is never negative) and the others drop."""
    c = unwrap(cond)
    if isinstance(c, tensor):
        _builder.create(ops.AssumeOp, semantic.to_bool(c, _builder).handle)


def _first_flagged(values: tensor, flags: tensor, b: Builder) -> tensor:
    """Along the last axis, the value whose flag is set (exactly, any dtype)."""
    elem, flag = irt.elem_type(values.type), irt.elem_type(flags.type)
    region = Block.with_args([elem, flag, elem, flag])
    with b.at_end_of(region):
        v1, f1, v2, f2 = (tensor(a) for a in region.args)
        b.create(ops.YieldOp, [semantic.where(f1, v1, v2, b).handle,
                               semantic.or_(f1, f2, b).handle])
    # with one flag set, every combining order ends with the flagged value
    op = b.create(ops.ReduceOp, [values.handle, flags.handle], len(values.shape) - 1, region,
                  commutative=True)
    return tensor(op.results[0])


@builtin
def gather(src: Any, index: Any, axis: Any, _builder: Builder = None) -> tensor:
    """``out[..., i, ...] = src[..., index[..., i, ...], ...]`` along ``axis``; ``index`` has
    ``src``'s shape except along ``axis``.  Indices outside ``src`` give unspecified values."""
    b = _builder
    x, idx = semantic.to_tensor(src, b), semantic.to_tensor(index, b)
    rank = len(x.shape)
    ielem = irt.elem_type(idx.type)
    if len(idx.shape) != rank or not rank or not isinstance(ielem, irt.ScalarType) \
            or not ielem.is_int:
        raise TypeError(f"tl.gather needs an integer index of src's rank {rank}, got "
                        f"{idx.dtype!r} of shape {list(idx.shape)}")
    a = static_int(axis, "axis", "tl.gather needs a static axis") % rank
    if any(idx.shape[d] != x.shape[d] for d in range(rank) if d != a):
        raise ValueError(f"tl.gather: index shape {list(idx.shape)} must match src shape "
                         f"{list(x.shape)} except along axis {a}")
    n = x.shape[a]
    full = idx.shape + (n,)
    # src with `axis` moved last and a new axis for the index's positions: [..., 1, ..., n]
    order = [d for d in range(rank) if d != a] + [a]
    moved = permute(x, *order, _builder=b)
    values = semantic.broadcast_to(expand_dims(moved, a, _builder=b), full, b)
    wanted = semantic.broadcast_to(expand_dims(idx, rank, _builder=b), full, b)
    flags = semantic.equal(wanted, semantic.cast(_axis_index(full, rank, b), dtype_of(ielem), b), b)
    return _first_flagged(values, flags, b)


# -- microscaling dots -------------------------------------------------------------------------
_MX_FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")


def _e2m1_values(nibbles: tensor, b: Builder) -> tensor:
    """fp4 (e2m1) codes in the low 4 bits of ``nibbles`` as f32: 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    from .objects import float32, uint32
    n = semantic.cast(nibbles, uint32, b)
    e = semantic.and_(semantic.shr(n, 1, b), 3, b)
    m = semantic.cast(semantic.and_(n, 1, b), float32, b)
    scale = semantic.bitcast(semantic.shl(semantic.add(e, 125, b), 23, b), float32, b)  # 2^(e-2)
    normal = semantic.mul(semantic.add(m, 2.0, b), scale, b)
    value = semantic.where(semantic.equal(e, 0, b), semantic.mul(m, 0.5, b), normal, b)
    negative = semantic.not_equal(semantic.and_(n, 8, b), 0, b)
    return semantic.where(negative, semantic.neg(value, b), value, b)


def _mx_operand(x: Any, scale: Any, fmt: str, k_axis: int, side: str, work: Any,
                b: Builder) -> tensor:
    """One operand of ``tl.dot_scaled`` as exact values of dtype ``work`` (bf16 or f32), K
    along ``k_axis``: decoded
    (fp4 codes two to a byte along K, low nibble first; float8 codes as bytes) and multiplied
    by its e8m0 scales, one byte per 32 elements along K (2^(s-127); 255 is NaN)."""
    from .objects import float8e4nv, float8e5, float32, uint32, uint8
    from .standard import expand_dims, reshape, trans
    t = semantic.to_tensor(x, b)
    if len(t.shape) != 2:
        raise ValueError(f"tl.dot_scaled: {side} must be a 2-D tile, got shape {list(t.shape)}")
    if fmt in ("bf16", "fp16"):
        want = {"bf16": irt.bf16, "fp16": irt.f16}[fmt]
        if irt.elem_type(t.type) != want:
            raise TypeError(f"tl.dot_scaled: {side} is {t.dtype!r}, but its format says {fmt}")
        v = semantic.cast(t, work, b)
    else:
        if irt.elem_type(t.type) not in (irt.u8, irt.i8) and not (
                fmt != "e2m1" and irt.elem_type(t.type).is_float8):
            raise TypeError(f"tl.dot_scaled: {side} in format {fmt} holds its codes in uint8, "
                            f"got {t.dtype!r}")
        if irt.elem_type(t.type) == irt.i8:
            t = semantic.bitcast(t, uint8, b)
        if fmt == "e2m1":         # (bf16 halves what the interleave moves through memory)
            low = semantic.cast(_e2m1_values(semantic.and_(t, 15, b), b), work, b)
            high = semantic.cast(_e2m1_values(semantic.shr(t, 4, b), b), work, b)
            if k_axis == 1:
                v = interleave(low, high, _builder=b)
            else:
                v = trans(interleave(trans(low, _builder=b), trans(high, _builder=b), _builder=b),
                          _builder=b)
        else:
            f8 = float8e4nv if fmt == "e4m3" else float8e5
            if not irt.elem_type(t.type).is_float8:
                t = semantic.bitcast(t, f8, b)
            v = semantic.cast(t, work, b)
    s = unwrap(scale)
    if s is None:
        return v
    s = semantic.to_tensor(s, b)
    k = v.shape[k_axis]
    rows = v.shape[1 - k_axis]
    if tuple(s.shape) != (rows, k // 32):
        raise ValueError(f"tl.dot_scaled: {side}'s scale must have shape {[rows, k // 32]} (one "
                         f"byte per 32 elements along K), got {list(s.shape)}")
    bits = semantic.shl(semantic.cast(s, uint32, b), 23, b)
    factor = semantic.where(semantic.equal(semantic.cast(s, uint32, b), 255, b), float("nan"),
                            semantic.bitcast(bits, float32, b), b)
    factor = semantic.cast(factor, work, b)          # a power of 2 (or NaN): exact
    full = semantic.broadcast_to(expand_dims(factor, 2, _builder=b), (rows, k // 32, 32), b)
    full = reshape(full, rows, k, _builder=b)
    if k_axis == 0:
        full = trans(full, _builder=b)
    return semantic.mul(v, full, b)


@builtin
def dot_scaled(lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any,
               rhs_format: Any, acc: Any = None, fast_math: Any = False, lhs_k_pack: Any = True,
               rhs_k_pack: Any = True, out_dtype: Any = None, _builder: Builder = None) -> tensor:
    """``lhs @ rhs`` of microscaling operands (OCP MX): each an fp4 (``"e2m1"``, two codes a
    byte along K), float8 (``"e4m3"``, ``"e5m2"``, codes as bytes) or ``"bf16"``/``"fp16"``
    tile, with optional e8m0 scales (``uint8``, ``[M, K/32]`` for ``lhs``, ``[N, K/32]`` for
    ``rhs``: element k is multiplied by 2^(s-127)).  The operands are decoded exactly and
    multiplied as ``tl.dot`` does (bf16 tensor-core inputs when both fit bf16 exactly, else
    exact f32 products), summed in f32 (plus ``acc``)."""
    from .objects import bfloat16
    from .standard import dot
    b = _builder
    formats = [str(unwrap(f)) for f in (lhs_format, rhs_format)]
    for side, fmt in zip(("lhs", "rhs"), formats):
        if fmt not in _MX_FORMATS:
            raise ValueError(f"tl.dot_scaled: {side}_format must be one of "
                             f"{', '.join(_MX_FORMATS)}, got {fmt!r}")
    if not (unwrap(lhs_k_pack) and unwrap(rhs_k_pack)):
        raise ValueError("tl.dot_scaled: fp4 packed along M or N (k_pack=False) is not supported")
    from .objects import float32
    # e2m1, float8 and bf16 values times 2^k are bf16 values; an fp16 side needs f32
    work = float32 if "fp16" in formats else bfloat16
    a = _mx_operand(lhs, lhs_scale, formats[0], 1, "lhs", work, b)
    w = _mx_operand(rhs, rhs_scale, formats[1], 0, "rhs", work, b)
    if work == bfloat16:
        return dot(a, w, acc, _builder=b)
    return dot(a, w, acc, input_precision="ieee", _builder=b)
