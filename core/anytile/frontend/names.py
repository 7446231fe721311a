"""Name resolution for kernels: which globals a kernel may read, what Python builtins mean
inside one, and which names a block of statements assigns."""
from __future__ import annotations

import ast
import builtins
import types
from typing import Any, Iterable

from ..language import objects as lc
from ..language.objects import constexpr, tensor, unwrap
from ..language.source import KernelSource, is_constexpr_annotation

_STATIC_TYPES = (bool, int, float, str, type(None))


def wrap_static(value: Any) -> Any:
    """Python numbers, strings and None become constexprs; tuples are wrapped element-wise."""
    if isinstance(value, _STATIC_TYPES):
        return constexpr(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(wrap_static(v) for v in value)
    if isinstance(value, list):
        return tuple(wrap_static(v) for v in value)
    return value


def _is_language_object(value: Any) -> bool:
    module = getattr(value, "__module__", "") or ""
    return module.startswith("anytile.language") or isinstance(value, lc.dtype)


def resolve_global(name: str, fn: KernelSource) -> Any:
    """The value of global ``name`` as seen from ``fn``, or an error if kernels may not use it."""
    g = fn.globals
    closure = fn.closure_vars()
    if name in closure:
        value, annotation = closure[name], None
    elif name in g:
        value, annotation = g[name], g.get("__annotations__", {}).get(name)
    elif hasattr(builtins, name):
        return getattr(builtins, name)
    else:
        raise NameError(f"name `{name}` is not defined")
    if isinstance(value, (constexpr, KernelSource, types.ModuleType)) or _is_language_object(value):
        return value
    if annotation is not None and is_constexpr_annotation(annotation):
        return constexpr(value)
    if isinstance(value, type) or callable(value):
        return value
    if hasattr(type(value), "__array_interface__") or hasattr(value, "__array__") or \
            hasattr(type(value), "__dlpack__"):
        raise NameError(
            f"global `{name}` is an array ({type(value).__name__} of shape "
            f"{getattr(value, 'shape', '?')}): a kernel cannot read host arrays from its globals. "
            f"Pass it as an argument (`kernel[grid](..., {name}, ...)` gives the kernel a "
            f"pointer), or for a few constants use a tl.constexpr tuple "
            f"(`{name} = tl.constexpr((1, 2, 3))`)")
    try:
        hash(value)
        advice = (f"Define it as `{name} = tl.constexpr({value!r})` or "
                  f"`{name}: tl.constexpr = {value!r}`, or pass it as an argument")
    except TypeError:      # a constexpr must be hashable: only an argument works
        advice = "Pass it as an argument, or use a tl.constexpr of an int, float, str or tuple"
    raise NameError(
        f"global `{name}` ({type(value).__name__} {value!r}) cannot be used inside a @jit "
        f"function: only tl.constexpr globals are allowed. {advice}")


# ---------------------------------------------------------------------------------------------
# Python builtins inside kernels
# ---------------------------------------------------------------------------------------------
_STATIC_BUILTINS = {builtins.len, builtins.int, builtins.float, builtins.bool, builtins.str,
                    builtins.isinstance, builtins.abs, builtins.tuple, builtins.list,
                    builtins.round, builtins.getattr, builtins.hasattr, builtins.type,
                    builtins.zip, builtins.enumerate, builtins.sorted, builtins.any, builtins.all}


def is_static_builtin(fn: Any) -> bool:
    """Python builtins that kernels may call on compile-time values."""
    try:
        return fn in _STATIC_BUILTINS
    except TypeError:
        return False


def call_static(fn: Any, args: list, kwargs: dict, display: str) -> Any:
    """Call a plain Python callable with compile-time arguments; the result is a constexpr."""
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, tensor):
            raise TypeError(host_function_message(fn, display))
    result = fn(*[_deep_unwrap(a) for a in args],
                **{k: _deep_unwrap(v) for k, v in kwargs.items()})
    return wrap_static(result)


# what a kernel writes for the host libraries' functions (tl.extra.libdevice where tl has none)
_LIBDEVICE = "tl.extra.libdevice."
TL_EQUIVALENTS: dict[str, str] = {
    **{n: f"tl.{n}" for n in ("exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "tanh", "erf",
                              "floor", "ceil", "abs", "fma", "maximum", "minimum", "where",
                              "sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod",
                              "sort", "dot", "reshape", "ravel", "expand_dims", "broadcast_to",
                              "flip", "zeros", "zeros_like", "full", "full_like", "arange")},
    "absolute": "tl.abs", "fabs": "tl.abs", "fmax": "tl.maximum", "fmin": "tl.minimum",
    "amax": "tl.max", "amin": "tl.min", "clip": "tl.clamp", "matmul": "tl.dot",
    "transpose": "tl.trans", "concatenate": "tl.cat",
    **{n: _LIBDEVICE + n for n in ("log10", "log1p", "expm1", "tan", "sinh", "cosh", "asin",
                                   "acos", "atan", "atan2", "asinh", "acosh", "atanh", "cbrt",
                                   "hypot", "copysign", "signbit", "fmod", "ldexp", "trunc",
                                   "rint", "pow", "isnan", "isinf", "erfc", "lgamma",
                                   "nextafter")},
    **{f"arc{n}": _LIBDEVICE + n for n in ("sin", "cos", "tan", "sinh", "cosh", "tanh")},
    "arctan2": _LIBDEVICE + "atan2", "power": _LIBDEVICE + "pow", "gamma": _LIBDEVICE + "tgamma",
    "round": _LIBDEVICE + "rint", "around": _LIBDEVICE + "rint",   # both round half to even
    **{n: f"x.to(tl.{n})" for n in ("float16", "bfloat16", "float32", "float64", "int8", "int16",
                                    "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
    "float": "x.to(tl.float32)", "int": "x.to(tl.int32)",
}
_HOST_LIBRARIES = {"numpy": "a NumPy function", "math": "a function of Python's math module",
                   "builtins": "a Python builtin", "torch": "a torch function"}


def host_function_message(fn: Any, display: str) -> str:
    """Why ``fn`` (named ``display`` in the kernel) cannot take a tensor, and what to write:
    the ``tl`` equivalent of a NumPy, math, builtin or torch function, else ``@jit``."""
    module = (getattr(fn, "__module__", None) or "").split(".")[0]
    what = _HOST_LIBRARIES.get(module)
    if what is None:
        return (f"`{display}` is a plain Python function, so it only takes compile-time "
                f"values, but it was given a tensor; decorate it with @jit to call it with "
                f"tensors")
    head = (f"`{display}` is {what}: it runs while the kernel compiles and only takes "
            f"compile-time values, but it was given a tensor")
    instead = TL_EQUIVALENTS.get(getattr(fn, "__name__", ""))
    if instead is not None:
        return f"{head}; in a kernel use `{instead}` instead"
    return (f"{head}; anytile.language has no function of that name: compute it with tl "
            f"operations (a @jit function can hold them)")


def _deep_unwrap(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_deep_unwrap(v) for v in value)
    return unwrap(value)


# ---------------------------------------------------------------------------------------------
# assigned names
# ---------------------------------------------------------------------------------------------
class _AssignedNames(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store) and node.id not in self.names:
            self.names.append(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        pass  # nested definitions are rejected elsewhere

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass


def assigned_names(stmts: Iterable[ast.stmt]) -> list[str]:
    """Names stored to anywhere in ``stmts`` (in first-assignment order)."""
    finder = _AssignedNames()
    for s in stmts:
        finder.visit(s)
    return finder.names
