"""The objects a kernel handles: dtypes, ``constexpr``, ``tensor``, and the ``builtin`` marker.

Builtins (``tl.load``, ``tl.arange``, ``x.sum``...) are plain Python functions decorated with
``@builtin``; they only run inside the frontend, which passes the IR ``Builder`` as the hidden
keyword ``_builder`` (and, to builtins that call user combine functions, the frontend itself
as ``_generator``).  Calling one outside a ``@jit`` function raises a clear error.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, Sequence

from ..ir import types as irt

__all__ = ["dtype", "pointer_type", "const", "constexpr", "tensor", "builtin", "tensor_method",
           "is_builtin", "NotConstexprError", "unwrap", "static_value", "static_int",
           "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "bfloat16", "float32", "float64", "pi32_t", "dtype_of", "static_range", "range"]

_builtin_range = range
#: how a dtype's repr names the language module: ``tl``, or ``triton.language`` while
#: ``anytile.triton_compat`` serves ``import triton`` (Triton's reprs evaluate as Python there)
REPR_PREFIX = ["tl"]


# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------
_IR_BY_NAME: dict[str, Any] = {}      # dtype names -> IR types (tl.dtype("int8"))


class dtype:
    """A scalar element type as users spell it (``tl.float32``); ``ir`` is the IR type.
    ``tl.dtype("int8")`` (a name alone) is the dtype of that name, as in Triton."""

    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP_TYPES = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32",
                "fp64")
    STANDARD_FP_TYPES = ("fp16", "bf16", "fp32", "fp64")
    OTHER_TYPES = ("void",)

    def __init__(self, name: str, ir: Optional[irt.ScalarType] = None) -> None:
        if ir is None:
            if name not in _IR_BY_NAME:
                raise TypeError(f"tl.dtype('{name}'): no dtype has that name (e.g. 'int8', "
                                f"'uint32', 'fp16', 'bf16', 'fp32')")
            ir = _IR_BY_NAME[name]
        _IR_BY_NAME.setdefault(name, ir)
        self.name = name
        self.ir = ir

    # Triton-style queries, usable on constexprs inside kernels (``x.dtype.is_floating()``)
    def is_floating(self) -> bool:
        return self.ir.is_float

    def is_int(self) -> bool:
        return self.ir.is_int

    def is_int_signed(self) -> bool:
        return self.ir.is_signed

    def is_int_unsigned(self) -> bool:
        return self.ir.is_unsigned

    def is_bool(self) -> bool:
        return self.ir.is_bool

    def is_ptr(self) -> bool:
        return False

    def is_block(self) -> bool:
        return False

    @property
    def primitive_bitwidth(self) -> int:
        return self.ir.bits

    @property
    def int_bitwidth(self) -> int:
        return self.ir.bits

    @property
    def fp_mantissa_width(self) -> int:
        return self.ir.fp_mantissa_bits

    @property
    def exponent_bias(self) -> int:
        bits = self.ir.bits - self.ir.fp_mantissa_bits - 1
        return irt.FLOAT8[self.ir.name][0] if self.ir.is_float8 else (1 << (bits - 1)) - 1

    def is_fp8(self) -> bool:
        return self.ir.is_float8

    def is_fp8e4nv(self) -> bool:
        return self.ir.name == "f8e4m3"

    def is_fp8e5(self) -> bool:
        return self.ir.name == "f8e5m2"

    def is_fp8e4b15(self) -> bool:
        return self.ir.name == "f8e4b15"

    @property
    def scalar(self) -> "dtype":
        return self

    def __eq__(self, other: object) -> bool:
        other = unwrap(other)
        return isinstance(other, dtype) and not other.is_ptr() and other.ir == self.ir

    def __hash__(self) -> int:
        return hash(("dtype", self.ir))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{REPR_PREFIX[0]}.{_PUBLIC_NAMES.get(self.name, self.name)}"


class pointer_type(dtype):
    """The type of an address of ``element_ty`` elements (``tl.pointer_type(tl.float16)``);
    ``const=True``: memory the kernel only reads (see ``tl.const``)."""

    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False) -> None:
        element_ty = unwrap(element_ty)
        if not isinstance(element_ty, dtype) or element_ty.is_ptr():
            raise TypeError(f"tl.pointer_type expects a scalar dtype, got {element_ty!r}")
        if unwrap(address_space) != 1:
            raise TypeError(f"tl.pointer_type: only global memory (address_space=1) is "
                            f"addressable, got address_space={unwrap(address_space)!r}")
        self.element_ty = element_ty
        self.const = bool(unwrap(const))
        self.address_space = 1
        self.name = f"pointer<{element_ty.name}{', const' if self.const else ''}>"
        self.ir = element_ty.ir  # the pointee; use ``ir_pointer`` for the pointer type itself

    @property
    def ir_pointer(self) -> irt.PointerType:
        return irt.PointerType(self.element_ty.ir, const=self.const)

    def is_const(self) -> bool:
        return self.const

    def is_ptr(self) -> bool:
        return True

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    @property
    def primitive_bitwidth(self) -> int:
        return 64

    def __eq__(self, other: object) -> bool:
        other = unwrap(other)
        return (isinstance(other, pointer_type) and other.element_ty == self.element_ty
                and other.const == self.const)

    def __hash__(self) -> int:
        return hash(("pointer", self.element_ty.ir, self.const))

    def __repr__(self) -> str:
        const = ", const=True" if self.const else ""
        return f"{REPR_PREFIX[0]}.pointer_type({self.element_ty!r}{const})"


int1 = dtype("int1", irt.i1)
int8 = dtype("int8", irt.i8)
int16 = dtype("int16", irt.i16)
int32 = dtype("int32", irt.i32)
int64 = dtype("int64", irt.i64)
uint8 = dtype("uint8", irt.u8)
uint16 = dtype("uint16", irt.u16)
uint32 = dtype("uint32", irt.u32)
uint64 = dtype("uint64", irt.u64)
float16 = dtype("fp16", irt.f16)
bfloat16 = dtype("bf16", irt.bf16)
float32 = dtype("fp32", irt.f32)
float64 = dtype("fp64", irt.f64)
float8e4nv = dtype("fp8e4nv", irt.f8e4m3)     # OCP e4m3fn: NVIDIA's (and torch's) float8_e4m3fn
float8e5 = dtype("fp8e5", irt.f8e5m2)         # e5m2: torch's float8_e5m2
float8e4b15 = dtype("fp8e4b15", irt.f8e4b15)  # Triton's e4m3 of bias 15 (max 1.75, saturating)

_PUBLIC_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                 "fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "fp8e4b15": "float8e4b15"}
_BY_IR = {d.ir: d for d in (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                            float16, bfloat16, float32, float64, float8e4nv, float8e5,
                            float8e4b15)}


class unsupported_dtype(dtype):
    """A Triton dtype anytile has no IR type for (AMD's fnuz float8 formats).  Kernels may
    name and compare it (``x.dtype == tl.float8e4b8`` is simply false); making values of it
    fails."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ir = None  # type: ignore[assignment]

    @property
    def primitive_bitwidth(self) -> int:
        return 8                           # every unsupported Triton dtype is a float8

    def is_floating(self) -> bool:
        return True

    def is_fp8(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return unwrap(other) is self

    def __hash__(self) -> int:
        return hash(("unsupported", self.name))

    def __repr__(self) -> str:
        return f"{REPR_PREFIX[0]}.{self.name}"


float8e4b8 = unsupported_dtype("float8e4b8")
float8e5b16 = unsupported_dtype("float8e5b16")


def check_supported(dt: dtype) -> dtype:
    """``dt``, or a clear error if anytile cannot make values of it."""
    if isinstance(dt, unsupported_dtype):
        raise TypeError(f"{dt!r} is a Triton dtype that anytile does not support")
    return dt


class block_type:
    """What ``x.type`` is for a tile in a kernel (Triton's ``tl.block_type``)."""

    def __init__(self, element_ty: dtype, shape: tuple[int, ...]) -> None:
        self.element_ty = element_ty
        self.shape = shape
        self.numel = 1
        for d in shape:
            self.numel *= d

    @property
    def scalar(self) -> dtype:
        return self.element_ty

    def is_block(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        other = unwrap(other)
        return isinstance(other, block_type) and (other.element_ty, other.shape) == \
            (self.element_ty, self.shape)

    def __hash__(self) -> int:
        return hash(("block", self.element_ty, self.shape))

    def __repr__(self) -> str:
        return f"<{list(self.shape)}, {self.element_ty!r}>"


def type_of(x: "tensor") -> Any:
    """The Triton-style type of a kernel value: its dtype (a ``pointer_type`` for pointers),
    or a ``block_type`` for tiles."""
    return block_type(x.dtype, x.shape) if x.shape else x.dtype


def dtype_of(ir_type: irt.Type) -> dtype:
    """The user-facing dtype of an IR type's elements."""
    elem = irt.elem_type(ir_type)
    if isinstance(elem, irt.PointerType):
        return pointer_type(_BY_IR[elem.pointee], const=elem.const)
    return _BY_IR[elem]


# ---------------------------------------------------------------------------------------------
# constexpr
# ---------------------------------------------------------------------------------------------
def _static_binary(op: Callable[[Any, Any], Any]) -> Callable:
    def forward(self: "constexpr", other: Any) -> "constexpr":
        return constexpr(op(self.value, unwrap(other)))

    def reverse(self: "constexpr", other: Any) -> "constexpr":
        return constexpr(op(unwrap(other), self.value))

    return forward, reverse


class const:
    """Annotates a pointer parameter whose memory the kernel only reads (``in_ptr: tl.const``):
    storing through it, or through a pointer computed from it, is a compile error, and it does
    not merge with a plain pointer (an ``if`` choosing between the two at run time)."""


class constexpr:
    """A value known at compile time.

    As an annotation (``BLOCK: tl.constexpr``) it marks a kernel parameter whose value is
    part of the specialisation; as a wrapper (``X = tl.constexpr(42)``) it makes a module
    global usable inside kernels.  Arithmetic between constexprs folds with Python semantics."""

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __bool__(self) -> bool:
        return bool(self.value)

    def __index__(self) -> int:
        return self.value.__index__()

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __hash__(self) -> int:
        return hash(self.value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.value(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "value":  # not yet set (unpickling)
            raise AttributeError(name)
        return getattr(self.value, name)

    __add__, __radd__ = _static_binary(lambda a, b: a + b)
    __sub__, __rsub__ = _static_binary(lambda a, b: a - b)
    __mul__, __rmul__ = _static_binary(lambda a, b: a * b)
    __truediv__, __rtruediv__ = _static_binary(lambda a, b: a / b)
    __floordiv__, __rfloordiv__ = _static_binary(lambda a, b: a // b)
    __mod__, __rmod__ = _static_binary(lambda a, b: a % b)
    __pow__, __rpow__ = _static_binary(lambda a, b: a ** b)
    __and__, __rand__ = _static_binary(lambda a, b: a & b)
    __or__, __ror__ = _static_binary(lambda a, b: a | b)
    __xor__, __rxor__ = _static_binary(lambda a, b: a ^ b)
    __lshift__, __rlshift__ = _static_binary(lambda a, b: a << b)
    __rshift__, __rrshift__ = _static_binary(lambda a, b: a >> b)
    __lt__, _ = _static_binary(lambda a, b: a < b)
    __le__, _ = _static_binary(lambda a, b: a <= b)
    __gt__, _ = _static_binary(lambda a, b: a > b)
    __ge__, _ = _static_binary(lambda a, b: a >= b)
    __eq__, _ = _static_binary(lambda a, b: a == b)
    __ne__, _ = _static_binary(lambda a, b: a != b)

    def __neg__(self) -> "constexpr":
        return constexpr(-self.value)

    def __pos__(self) -> "constexpr":
        return constexpr(+self.value)

    def __invert__(self) -> "constexpr":
        return constexpr(~self.value)

    def __getitem__(self, index: Any) -> "constexpr":
        return constexpr(self.value[unwrap(index)])


def unwrap(value: Any) -> Any:
    """The Python value of a constexpr (anything else is returned unchanged)."""
    return value.value if isinstance(value, constexpr) else value


class NotConstexprError(TypeError):
    """A builtin needed a compile-time value for parameter ``param``; the frontend names the
    user's expression in the final message."""

    def __init__(self, param: str, reason: str) -> None:
        self.param = param
        self.reason = reason
        super().__init__(f"`{param}` must be a tl.constexpr because {reason}")


def static_value(value: Any, param: str, reason: str) -> Any:
    """``value`` unwrapped, or ``NotConstexprError`` if it is only known at run time."""
    if isinstance(value, tensor):
        raise NotConstexprError(param, reason)
    return unwrap(value)


def static_int(value: Any, param: str, reason: str) -> int:
    """A compile-time integer argument of a builtin."""
    v = static_value(value, param, reason)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"`{param}` must be an integer, got {v!r}")
    return v


# ---------------------------------------------------------------------------------------------
# builtins
# ---------------------------------------------------------------------------------------------
def builtin(fn: Callable) -> Callable:
    """Mark ``fn`` as a builtin: it runs inside the frontend and receives ``_builder``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_builder") is None:
            raise RuntimeError(f"tl.{fn.__name__} can only be called inside a @jit function")
        return fn(*args, **kwargs)

    wrapper.__anytile_builtin__ = True  # type: ignore[attr-defined]
    wrapper.__signature__ = _hidden_keyword_only(inspect.signature(fn))  # type: ignore[attr-defined]
    return wrapper


_HIDDEN = ("_builder", "_generator")


def _hidden_keyword_only(sig: inspect.Signature) -> inspect.Signature:
    """``sig`` with the hidden parameters made keyword-only, so a surplus positional
    argument is reported as such instead of filling ``_builder``."""
    params = [p for p in sig.parameters.values() if p.name not in _HIDDEN]
    hidden = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
              for p in sig.parameters.values() if p.name in _HIDDEN]
    return sig.replace(parameters=params + hidden)


def is_builtin(fn: Any) -> bool:
    return bool(getattr(fn, "__anytile_builtin__", False))


def tensor_method(fn: Callable) -> Callable:
    """Also expose the builtin ``fn(x, ...)`` as the method ``x.fn(...)``."""
    setattr(tensor, fn.__name__, fn)
    return fn


# ---------------------------------------------------------------------------------------------
# tensor
# ---------------------------------------------------------------------------------------------
def _operator(name: str, reverse: bool = False) -> Callable:
    @builtin
    def method(self: "tensor", other: Any, _builder: Any = None) -> "tensor":
        from . import semantic
        impl = getattr(semantic, name)
        return impl(other, self, _builder) if reverse else impl(self, other, _builder)

    method.__name__ = name
    return method


def _unary_operator(name: str) -> Callable:
    @builtin
    def method(self: "tensor", _builder: Any = None) -> "tensor":
        from . import semantic
        return getattr(semantic, name)(self, _builder)

    method.__name__ = name
    return method


class tensor:
    """A value computed by the kernel: a scalar (``shape == ()``) or a tile, wrapping the IR
    ``Value`` that holds it.  Operators and methods build IR; they run only inside the
    frontend."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    @property
    def type(self) -> irt.Type:
        return self.handle.type

    @property
    def dtype(self) -> dtype:
        return dtype_of(self.handle.type)

    @property
    def shape(self) -> tuple[int, ...]:
        return irt.shape_of(self.handle.type)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"tensor<{self.handle.type}>"

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a tensor is only known when the kernel runs; "
                        "use it in an `if` statement (scalars) or tl.where (tiles)")

    def __iter__(self) -> Any:
        raise TypeError("tensors cannot be iterated over inside a kernel")

    __add__ = _operator("add")
    __radd__ = _operator("add", reverse=True)
    __sub__ = _operator("sub")
    __rsub__ = _operator("sub", reverse=True)
    __mul__ = _operator("mul")
    __rmul__ = _operator("mul", reverse=True)
    __truediv__ = _operator("truediv")
    __rtruediv__ = _operator("truediv", reverse=True)
    __floordiv__ = _operator("floordiv")
    __rfloordiv__ = _operator("floordiv", reverse=True)
    __mod__ = _operator("mod")
    __rmod__ = _operator("mod", reverse=True)
    __pow__ = _operator("pow")
    __rpow__ = _operator("pow", reverse=True)
    __and__ = _operator("and_")
    __rand__ = _operator("and_", reverse=True)
    __or__ = _operator("or_")
    __ror__ = _operator("or_", reverse=True)
    __xor__ = _operator("xor_")
    __rxor__ = _operator("xor_", reverse=True)
    __lshift__ = _operator("shl")
    __rlshift__ = _operator("shl", reverse=True)
    __rshift__ = _operator("shr")
    __rrshift__ = _operator("shr", reverse=True)
    __lt__ = _operator("less_than")
    __le__ = _operator("less_equal")
    __gt__ = _operator("greater_than")
    __ge__ = _operator("greater_equal")
    __eq__ = _operator("equal")  # type: ignore[assignment]
    __ne__ = _operator("not_equal")  # type: ignore[assignment]
    logical_and = _operator("logical_and")
    logical_or = _operator("logical_or")
    __neg__ = _unary_operator("neg")
    __pos__ = _unary_operator("pos")
    __invert__ = _unary_operator("invert")
    logical_not = _unary_operator("logical_not")
    __hash__ = object.__hash__

    @builtin
    def __getitem__(self, index: Any, _builder: Any = None) -> "tensor":
        from . import semantic
        return semantic.index(self, index, _builder)

    @builtin
    def to(self, dtype: Any, fp_downcast_rounding: Optional[str] = None,
           bitcast: bool = False, _builder: Any = None) -> "tensor":
        """This tensor converted to ``dtype`` (or reinterpreted, with ``bitcast=True``)."""
        from . import semantic
        target = unwrap(dtype)
        if unwrap(bitcast):
            return semantic.bitcast(self, target, _builder)
        return semantic.cast(self, target, _builder)


# ---------------------------------------------------------------------------------------------
# loop iterators (the frontend reads their fields; they build no IR themselves)
# ---------------------------------------------------------------------------------------------
class range:
    """``for i in tl.range(start, end, step, num_stages=...)``: a loop run at run time."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None, num_stages: Any = None,
                 loop_unroll_factor: Any = None, disallow_acc_multi_buffer: Any = False,
                 flatten: Any = False, warp_specialize: Any = False) -> None:
        if arg2 is None:
            self.start, self.end = constexpr(0), arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = constexpr(1) if step is None else step
        self.num_stages = unwrap(num_stages)
        self.loop_unroll_factor = unwrap(loop_unroll_factor)


class static_range:
    """``for i in tl.static_range(start, end, step)``: a loop unrolled at compile time."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None) -> None:
        for param, value in (("arg1", arg1), ("arg2", arg2), ("step", step)):
            v = unwrap(value)
            if isinstance(v, tensor) or (v is not None and (isinstance(v, bool)
                                                            or not isinstance(v, int))):
                raise NotConstexprError(param, "tl.static_range is unrolled at compile time")
        first, second, step_v = unwrap(arg1), unwrap(arg2), unwrap(step)
        self.start, self.end = (0, first) if second is None else (first, second)
        self.step = 1 if step_v is None else step_v
        if self.step == 0:
            raise ValueError("tl.static_range step must not be zero")

    def __iter__(self) -> Any:
        return iter(_builtin_range(self.start, self.end, self.step))


def shape_list(shape: Any, param: str = "shape") -> tuple[int, ...]:
    """A static shape given as an int, a constexpr or a sequence of them."""
    shape = unwrap(shape)
    if isinstance(shape, (int, tensor)):
        return (static_int(shape, param, "tile shapes must be known at compile time"),)
    if not isinstance(shape, Sequence):
        raise TypeError(f"`{param}` must be a list of integers, got {shape!r}")
    # ``param[i]`` lets the frontend name the offending element of the user's list
    return tuple(static_int(d, f"{param}[{i}]", "tile shapes must be known at compile time")
                 for i, d in enumerate(shape))


pi32_t = pointer_type(int32)      # Triton's alias of a pointer to int32
