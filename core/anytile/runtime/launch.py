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


class _Specialised:
    """The result of looking at the arguments once: types, attrs, constexprs, launch args."""

    __slots__ = ("key", "arg_types", "arg_attrs", "constexprs", "kernel_args", "writebacks")

    def __init__(self) -> None:
        self.arg_types: dict[str, Type] = {}
        self.arg_attrs: dict[str, dict] = {}
        self.constexprs: dict[str, Any] = {}
        self.kernel_args: list[KernelArg] = []
        self.writebacks: list[tuple[np.ndarray, Array]] = []


def _specialise(fn: Any, bound: dict[str, Any], dev: Device) -> _Specialised:
    spec = _Specialised()
    key: list[Any] = []
    no_spec = set(fn.do_not_specialize)
    for index, name in enumerate(fn.arg_names):
        value = bound[name]
        if name in fn.constexpr_names or value is None:
            value = getattr(value, "value", value)  # tl.constexpr(x) passed by the user
            spec.constexprs[name] = value
            key.append(("c", name, _hashable(value, fn, name)))
            continue
        if isinstance(value, (bool, np.bool_)):
            t: Type = i1
            launch_value: Any = bool(value)
        elif isinstance(value, (int, np.integer)):
            value = int(value)
            t = _int_type(value)
            launch_value = value
            if name not in no_spec and index not in no_spec and value % 16 == 0:
                spec.arg_attrs[name] = {"divisibility": 16}
        elif isinstance(value, (float, np.floating)):
            t, launch_value = f32, float(value)
        else:
            array = _as_device_array(fn, name, value, dev, spec)
            t = PointerType(array.element_type)
            launch_value = PointerArg(array.buffer, array.offset)
            address = array.data_ptr()
            aligned = address % 16 == 0 if address is not None else array.offset % 16 == 0
            if aligned and name not in no_spec:
                spec.arg_attrs[name] = {"divisibility": 16}
        spec.arg_types[name] = t
        spec.kernel_args.append(KernelArg(t, launch_value))
        key.append((name, t, name in spec.arg_attrs))
    spec.key = tuple(key)
    return spec


def _hashable(value: Any, fn: Any, name: str) -> Any:
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{fn.__name__}: constexpr '{name}' must be hashable (an int, float, "
                        f"bool, str, dtype or tuple), got {type(value).__name__}") from None
    return (type(value).__name__, value)


def _as_device_array(fn: Any, name: str, value: Any, dev: Device, spec: _Specialised) -> Array:
    if isinstance(value, Array):
        return value
    if not _is_array_like(value):
        raise TypeError(f"{fn.__name__}: argument '{name}' is a {type(value).__name__}; kernel "
                        f"arguments are arrays, ints, floats, bools or constexprs")
    seen = import_foreign(value, dev)
    if seen is not None:
        return seen
    host = np.asarray(value)
    array = asarray(host, device=dev)
    if isinstance(value, np.ndarray) and value.flags.writeable:
        spec.writebacks.append((value, array))  # a copy went to the device: bring results back
    return array


def _normalise_grid(fn: Any, grid: Any, meta: dict[str, Any]) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(meta)
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
    backend = dev.backend
    spec = _specialise(fn, bound, dev)
    opts_key = tuple(sorted(options.items()))
    cache_key = (dev.name, spec.key, opts_key, fn.dependencies_key())
    entry = fn._launcher_cache.get(cache_key)
    if entry is None:
        compile_opts = backend.parse_options(**options)
        target = backend.target_of(dev.info)
        compiled = compile_kernel(fn, backend, target, compile_opts, spec.arg_types,
                                  spec.constexprs, spec.arg_attrs)
        loaded = None if warmup else backend.load(compiled, dev.info)
        entry = fn._launcher_cache[cache_key] = [compiled, loaded]
    compiled, loaded = entry
    if warmup:
        return compiled
    if loaded is None:
        loaded = entry[1] = backend.load(compiled, dev.info)
    meta = {**bound, **options}
    grid3 = _normalise_grid(fn, grid, meta)
    if grid3[0] * grid3[1] * grid3[2] == 0:
        return compiled
    backend.launch(loaded, grid3, spec.kernel_args, dev.info, stream)
    for host, array in spec.writebacks:
        host[...] = array.numpy()
    return compiled
