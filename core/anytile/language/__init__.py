"""anytile's kernel language, imported as ``tl`` (``import anytile.language as tl``).

It follows Triton's ``triton.language``: dtypes, ``tl.constexpr``, tensors with operators, and
builtins (``tl.program_id``, ``tl.arange``, ``tl.load``, ``tl.dot``, ``tl.sum``...) that only
run inside ``@jit`` functions, where the frontend turns them into tile IR."""
from . import extra, math  # noqa: F401  (tl.math.exp, tl.extra.cuda.libdevice)
from .block_pointer import advance, make_block_ptr  # noqa: F401
from .objects import (bfloat16, block_type, const, constexpr, dtype, float8e4b8, float8e4b15,  # noqa: F401
                   float8e4nv, float8e5, float8e5b16, float16, float32, float64, int1, int8,
                   int16, int32, int64, pi32_t, pointer_type, range, static_range, tensor, uint8,
                   uint16, uint32, uint64)
from .kinds import (base_type, base_value, constexpr_type, tensor_descriptor_base,  # noqa: F401
                    tuple, tuple_type)
from .library import (assume, cat, dot_scaled, flip, gather, histogram, interleave,  # noqa: F401
                      join, softmax, sort, split, swizzle2d, topk)
from .math import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,  # noqa: F401
                   rsqrt, sigmoid, sin, sqrt, sqrt_rn, tanh, umulhi)
from .memory import (atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min,  # noqa: F401
                     atomic_or, atomic_xchg, atomic_xor, load, store)
from .random import (pair_uniform_to_normal, philox, rand, rand4x, randint,  # noqa: F401
                     randint4x, randn, randn4x, uint_to_uniform_float)
from .reduction import (argmax, argmin, associative_scan, cumprod, cumsum, max, min,  # noqa: F401
                        reduce, sum, xor_sum)
from .tensor_descriptor import (load_tensor_descriptor, make_tensor_descriptor,  # noqa: F401
                                store_tensor_descriptor, tensor_descriptor, nv_tma_desc_type,
                                _experimental_descriptor_load, _experimental_descriptor_store)
from .standard import (PropagateNan, arange, broadcast, broadcast_to, cast, cdiv,  # noqa: F401
                       clamp, debug_barrier, device_assert, device_print, dot, expand_dims,
                       full, full_like, max_constancy, max_contiguous, maximum, minimum,
                       multiple_of,
                       num_programs, permute, program_id, ravel, reshape, static_assert,
                       static_print, trans, view, where, zeros, zeros_like)

__all__ = [
    "const", "constexpr", "constexpr_type", "tuple", "tuple_type", "base_value", "base_type",
    "tensor_descriptor_base", "dtype", "pointer_type", "tensor", "range", "static_range", "math", "extra",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "block_type",
    "float8e5", "float8e4nv", "float8e4b8", "float8e5b16", "float8e4b15",
    "program_id", "num_programs", "arange", "full", "zeros", "zeros_like", "full_like", "cast",
    "reshape", "ravel", "view", "PropagateNan", "expand_dims", "broadcast_to", "broadcast", "permute", "trans",
    "where", "minimum", "maximum", "clamp", "load", "store", "dot", "cdiv",
    "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas", "atomic_and",
    "atomic_or", "atomic_xor", "multiple_of", "max_contiguous", "max_constancy",
    "static_assert", "static_print", "device_assert", "device_print", "debug_barrier",
    "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh", "erf",
    "floor", "ceil", "abs", "fma", "sigmoid", "umulhi", "fdiv", "div_rn",
    "sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce", "cumsum", "cumprod",
    "associative_scan",
    "make_block_ptr", "advance", "make_tensor_descriptor", "tensor_descriptor",
    "load_tensor_descriptor", "store_tensor_descriptor", "softmax", "swizzle2d", "join", "split", "interleave", "dot_scaled", "sort",
    "topk", "flip", "histogram", "assume", "gather", "cat", "pi32_t", "nv_tma_desc_type",
    "randint", "randint4x", "rand", "rand4x", "randn", "randn4x", "philox",
    "uint_to_uniform_float", "pair_uniform_to_normal", "str_to_ty",
]

_SHORT_NAMES = {"i1": "int1", "u1": "int1", "i8": "int8", "i16": "int16", "i32": "int32",
                "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
                "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                "fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "fp8e4b15": "float8e4b15",
                "fp8e4b8": "float8e4b8", "fp8e5b16": "float8e5b16"}


def str_to_ty(name: str, c: object = None) -> dtype:
    """The dtype a signature string names: ``"fp32"`` -> ``tl.float32``, ``"*fp16"`` -> a
    pointer to ``tl.float16`` (Triton's helper of the same name; ``c`` is unused)."""
    if name.startswith("*"):
        return pointer_type(str_to_ty(name[1:]))
    long = _SHORT_NAMES.get(name, name)
    found = globals().get(long)
    if not isinstance(found, dtype):
        raise ValueError(f"str_to_ty: '{name}' names no dtype (use e.g. fp32, i32, *fp16)")
    return found


# Triton builtins anytile does not provide yet: named so a ported kernel gets a plain answer
_NOT_YET_SUPPORTED = frozenset({
    "inline_asm_elementwise", "map_elementwise",
})


def __getattr__(name: str):
    if name in _NOT_YET_SUPPORTED:
        raise AttributeError(f"tl.{name} is a Triton builtin that anytile does not support yet")
    raise AttributeError(f"module 'anytile.language' has no attribute '{name}'")
