"""``kernel[grid](*args)``: bind arguments, pick the device, specialise, compile (cached), launch.

Specialisation follows Triton: arrays become ``ptr<dtype>``; Python ints ``i32`` when they fit
(else ``i64``, or ``u64`` above 2^63-1); floats ``f32``; bools ``i1``; ``None`` is a constexpr.
Integers and addresses divisible by 16 are marked so (``divisibility``) unless listed in
``do_not_specialize``.  One compiled kernel per (types, divisibility, constexpr values,
options, target, source of the kernel and of every jit function it can reach)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..backend import CompiledKernel, KernelArg, PointerArg
from ..errors import AnytileError, BackendError
from ..ir.types import PointerType, Type, f32, i1, i32, i64, u64
from .arrays import Array, asarray, import_foreign
from .compiler import compile_kernel
from .devices import Device, default_device

__all__ = ["launch"]

_RESERVED_OPTIONS = ("num_warps", "num_stages", "num_ctas", "debug", "stream", "device")
_INT32 = (-2**31, 2**31 - 1)
_INT64 = (-2**63, 2**63 - 1)


def _int_type(value: int) -> Type:
    if _INT32[0] <= value <= _INT32[1]:
        return i32
    if _INT64[0] <= value <= _INT64[1]:
        return i64
    if 0 <= value < 2**64:
        return u64
    raise AnytileError(f"integer argument {value} does not fit in 64 bits")


def _bind(fn: Any, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
    """(parameter values by name, launch options)."""
    names = fn.arg_names
    if len(args) > len(names):
        raise TypeError(f"{fn.__name__}() takes {len(names)} arguments but {len(args)} were given")
    bound = dict(zip(names, args))
    options: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in names:
            if key in bound:
                raise TypeError(f"{fn.__name__}() got multiple values for argument '{key}'")
            bound[key] = value
        else:
            options[key] = value
    for name in names:
        if name not in bound:
            if name in fn.defaults:
                bound[name] = fn.defaults[name]
            else:
                raise TypeError(f"{fn.__name__}() missing a value for parameter '{name}'")
    return bound, options


def _pick_device(fn: Any, bound: dict[str, Any], requested: Any) -> Device:
    devices = {v.device for v in bound.values() if isinstance(v, Array)}
    if requested is not None:
        from .devices import device as get_device
        dev = get_device(requested)
        if devices - {dev}:
            raise BackendError(f"{fn.__name__}: device={dev} was asked for, but array arguments "
                               f"live on {', '.join(sorted(map(str, devices)))}")
        return dev
    if len(devices) > 1:
        detail = ", ".join(f"'{k}' on {v.device}" for k, v in bound.items() if isinstance(v, Array))
        raise BackendError(f"{fn.__name__}: array arguments live on different devices ({detail}); "
                           f"move them to one device with at.asarray(x, device=...)")
    return devices.pop() if devices else default_device()


def _is_array_like(value: Any) -> bool:
    return isinstance(value, np.ndarray) or hasattr(value, "__array_interface__") or \
        hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__")


def _fingerprint(fn: Any, name: str, value: Any, no_spec: bool) -> Any:
    """What the compiled code depends on for one argument (cheap: runs on every launch)."""
    cls = type(value)
    if cls is Array:
        if no_spec:
            return (value._dtype, False)
        address = value.data_ptr()
        return (value._dtype, (address if address is not None else value.offset) % 16 == 0)
    if cls is bool or cls is np.bool_:
        return i1
    if cls is int or isinstance(value, (int, np.integer)):
        value = int(value)
        return (_int_type(value), not no_spec and value % 16 == 0)
    if cls is float or isinstance(value, (float, np.floating)):
        return f32
    raise TypeError(f"{fn.__name__}: argument '{name}' is a {cls.__name__}; kernel "
                    f"arguments are arrays, ints, floats, bools or constexprs")


def _to_arrays(fn: Any, bound: dict[str, Any], dev: Device) -> list[tuple[np.ndarray, Array]]:
    """Replace foreign array arguments (NumPy, torch, ...) by ``Array`` views or copies on
    ``dev``; returns the (host, device copy) pairs whose results must be copied back."""
    writebacks: list[tuple[np.ndarray, Array]] = []
    for name in fn.arg_names:
        value = bound[name]
        if type(value) is Array or name in fn.constexpr_names or value is None:
            continue
        if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            continue
        if not _is_array_like(value):
            raise TypeError(f"{fn.__name__}: argument '{name}' is a {type(value).__name__}; "
                            f"kernel arguments are arrays, ints, floats, bools or constexprs")
        seen = import_foreign(value, dev)
        if seen is None:
            seen = asarray(np.asarray(value), device=dev)
            if isinstance(value, np.ndarray) and value.flags.writeable:
                writebacks.append((value, seen))  # a copy went to the device: bring results back
        bound[name] = seen
    return writebacks


def _constexpr_value(fn: Any, name: str, value: Any) -> Any:
    value = getattr(value, "value", value)  # tl.constexpr(x) passed by the user
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{fn.__name__}: constexpr '{name}' must be hashable (an int, float, "
                        f"bool, str, dtype or tuple), got {type(value).__name__}") from None
    return value


class _Plan:
    """A compiled, loaded kernel and how to turn bound arguments into its ``KernelArg``s."""

    __slots__ = ("compiled", "loaded", "params")

    def __init__(self, compiled: CompiledKernel, loaded: Any, params: list) -> None:
        self.compiled = compiled
        self.loaded = loaded
        self.params = params     # (name, IR type, is_pointer) of each runtime parameter

    def kernel_args(self, bound: dict[str, Any]) -> list[KernelArg]:
        out = []
        for name, t, is_pointer in self.params:
            v = bound[name]
            out.append(KernelArg(t, PointerArg(v._buffer, v._offset) if is_pointer else v))
        return out


def _compile_plan(fn: Any, bound: dict[str, Any], fingerprints: dict[str, Any], dev: Device,
                  options: dict[str, Any], warmup: bool) -> _Plan:
    arg_types: dict[str, Type] = {}
    arg_attrs: dict[str, dict] = {}
    constexprs: dict[str, Any] = {}
    params = []
    for name in fn.arg_names:
        fp = fingerprints[name]
        if not isinstance(fp, tuple):           # a float or a bool
            t: Type = fp
        elif fp[0] == "constexpr":
            constexprs[name] = fp[1]
            continue
        else:                                   # (type, divisible by 16) of an array or an int
            t = PointerType(fp[0]) if isinstance(bound[name], Array) else fp[0]
            if fp[1]:
                arg_attrs[name] = {"divisibility": 16}
        arg_types[name] = t
        params.append((name, t, isinstance(t, PointerType)))
    backend = dev.backend
    compile_opts = backend.parse_options(**options)
    compiled = compile_kernel(fn, backend, backend.target_of(dev.info), compile_opts, arg_types,
                              constexprs, arg_attrs)
    loaded = None if warmup else backend.load(compiled, dev.info)
    return _Plan(compiled, loaded, params)


def _normalise_grid(fn: Any, grid: Any, bound: dict[str, Any],
                    options: dict[str, Any]) -> tuple[int, int, int]:
    if type(grid) is tuple and len(grid) == 3 and all(type(g) is int and 0 <= g < 2**31 for g in grid):
        return grid
    if callable(grid):
        grid = grid({**bound, **options})
    if isinstance(grid, (int, np.integer)):
        grid = (grid,)
    try:
        dims = [int(g) for g in grid]
    except TypeError:
        raise TypeError(f"{fn.__name__}: the grid must be 1 to 3 ints or a callable returning "
                        f"them, got {grid!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise ValueError(f"{fn.__name__}: the grid must be 1 to 3 non-negative ints, got {tuple(dims)}")
    dims += [1] * (3 - len(dims))
    if any(d >= 2**31 for d in dims):
        raise ValueError(f"{fn.__name__}: grid {tuple(dims)} is too large")
    return dims[0], dims[1], dims[2]


def launch(fn: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool) -> Optional[CompiledKernel]:
    bound, options = _bind(fn, args, kwargs)
    stream = options.pop("stream", None)
    dev = _pick_device(fn, bound, options.pop("device", None))
    writebacks = _to_arrays(fn, bound, dev)
    no_spec = fn.do_not_specialize
    fingerprints: dict[str, Any] = {}
    for index, name in enumerate(fn.arg_names):
        value = bound[name]
        if name in fn.constexpr_names or value is None:
            fingerprints[name] = ("constexpr", _constexpr_value(fn, name, value))
        else:
            fingerprints[name] = _fingerprint(fn, name, value,
                                              bool(no_spec) and (name in no_spec or index in no_spec))
    key = (dev.name, tuple(fingerprints.values()),
           tuple(sorted(options.items())) if options else (), fn.dependencies_key())
    plan = fn._launcher_cache.get(key)
    if plan is None:
        plan = fn._launcher_cache[key] = _compile_plan(fn, bound, fingerprints, dev, options,
                                                       warmup)
    if warmup:
        return plan.compiled
    if plan.loaded is None:
        plan.loaded = dev.backend.load(plan.compiled, dev.info)
    grid3 = _normalise_grid(fn, grid, bound, options)
    if grid3[0] and grid3[1] and grid3[2]:
        dev.backend.launch(plan.loaded, grid3, plan.kernel_args(bound), dev.info, stream)
    for host, array in writebacks:
        host[...] = array.numpy()
    return plan.compiled
