"""``kernel[grid](*args)``: bind arguments, pick the device, specialise, compile (cached), launch.

Specialisation follows Triton: arrays become ``ptr<dtype>``; Python ints ``i32`` when they fit
(else ``i64``, or ``u64`` above 2^63-1); floats ``f32``; bools ``i1``; ``None`` is a constexpr.
Integers and addresses divisible by 16 are marked so (``divisibility``), and integers equal
to 1 become compile-time constants (so unit strides give contiguous accesses), unless listed
in ``do_not_specialize``.  One compiled kernel per (types, divisibility, constexpr values,
options, target, source of the kernel and of every jit function it can reach)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..backend import CompiledKernel, KernelArg, PointerArg
from ..errors import AnytileError, BackendError
from ..ir.types import PointerType, Type, i32, i64, scalar_type, u64
from .arrays import Array, asarray, import_foreign
from .compiler import compile_kernel
from .devices import Device, _device as _device_for, default_device

__all__ = ["launch"]

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


def make_binder(fn: Any) -> Any:
    """A function with the kernel's own parameters (and defaults) that returns
    ``(values in parameter order, launch options)``: Python binds the arguments, fast, and
    its errors name the kernel (``add_kernel() missing 1 required positional argument``)."""
    names = fn.arg_names
    params = ", ".join(f"{n}=_d[{n!r}]" if n in fn.defaults else n for n in names)
    src = (f"def {fn.__name__}({params}{', ' if names else ''}**options):\n"
           f"    return ({''.join(n + ', ' for n in names)}), options\n")
    namespace: dict[str, Any] = {"_d": dict(fn.defaults)}
    exec(compile(src, f"<binder of {fn.__name__}>", "exec"), namespace)
    return namespace[fn.__name__]


def _pick_device(fn: Any, values: tuple, requested: Any) -> Device:
    dev: Optional[Device] = None
    for v in values:
        if type(v) is Array and v.device is not dev:
            if dev is not None and v.device != dev:
                detail = ", ".join(f"'{k}' on {a.device}" for k, a in zip(fn.arg_names, values)
                                   if type(a) is Array)
                raise BackendError(f"{fn.__name__}: array arguments live on different devices "
                                   f"({detail}); move them to one device with "
                                   f"at.asarray(x, device=...)")
            dev = v.device
    if requested is not None:
        from .devices import device as get_device
        wanted = get_device(requested)
        if dev is not None and dev != wanted:
            raise BackendError(f"{fn.__name__}: device={wanted} was asked for, but array "
                               f"arguments live on {dev}")
        return wanted
    if dev is None:
        dev = _device_of_foreign(values)
    return dev if dev is not None else default_device()


def _device_of_foreign(values: tuple) -> Optional[Device]:
    """The device a non-host backend claims for the first foreign array argument (a torch
    CUDA tensor goes to ``cuda:N``), or ``None``."""
    for v in values:
        if type(v) in _PLAIN or v is None or isinstance(v, (np.ndarray, np.number, int, float)):
            continue
        if not _is_array_like(v):
            continue
        for backend in _foreign_claimants():
            info = backend.device_of_foreign(v)
            if info is not None:
                return _device_for(backend, info)
        return None
    return None


_claimants: tuple = (-1, ())


def _foreign_claimants() -> tuple:
    """Usable backends whose memory is not the host's (cached per discovery generation)."""
    global _claimants
    from .discovery import discover, generation
    if _claimants[0] != generation():
        found = tuple(r.backend for _, r in sorted(discover().items())
                      if r.backend is not None and not r.backend.host_memory
                      and r.availability.usable)
        _claimants = (generation(), found)
    return _claimants[1]


def _is_array_like(value: Any) -> bool:
    # look on the type: on a torch tensor, reading __cuda_array_interface__ builds the whole
    # interface (tens of microseconds)
    cls = type(value)
    return cls is np.ndarray or hasattr(cls, "__array_interface__") or \
        hasattr(cls, "__cuda_array_interface__") or hasattr(cls, "__dlpack__") or \
        hasattr(cls, "__array__")


def _fingerprint(fn: Any, name: str, value: Any, no_spec: bool) -> Any:
    """What the compiled code depends on for one argument, as strings and bools (cheap to
    hash: this runs on every launch).  Arrays: ``("*f32", aligned)``; ints: ``("i32",
    divisible by 16)``; floats ``"f32"``; bools ``"i1"``."""
    cls = type(value)
    if cls is Array:
        if no_spec:
            return (value._pointer_key, False)
        address = value._buffer.address
        return (value._pointer_key,
                ((address if address is not None else 0) + value._offset) % 16 == 0)
    if cls is bool or cls is np.bool_:
        return "i1"
    if cls is int or isinstance(value, (int, np.integer)):
        value = int(value)
        if value == 1 and not no_spec:   # as Triton: a unit stride becomes a constant
            return ("constexpr", 1)
        return (_int_type(value).name, not no_spec and value % 16 == 0)
    if cls is float or isinstance(value, (float, np.floating)):
        return "f32"
    raise TypeError(f"{fn.__name__}: argument '{name}' is a {cls.__name__}; kernel "
                    f"arguments are arrays, ints, floats, bools or constexprs")


def _to_arrays(fn: Any, values: list, dev: Device) -> list[tuple[np.ndarray, Array]]:
    """Replace foreign array arguments (NumPy, torch, ...) by ``Array`` views or copies on
    ``dev``; returns the (host, device copy) pairs whose results must be copied back."""
    writebacks: list[tuple[np.ndarray, Array]] = []
    for index, value in enumerate(values):
        if type(value) in _PLAIN or index in fn._constexpr_positions or value is None or \
                isinstance(value, (int, float, np.number)):
            continue
        name = fn.arg_names[index]
        if not _is_array_like(value):
            raise TypeError(f"{fn.__name__}: argument '{name}' is a {type(value).__name__}; "
                            f"kernel arguments are arrays, ints, floats, bools or constexprs")
        seen = import_foreign(value, dev)
        if seen is None:
            seen = asarray(np.asarray(value), device=dev)
            if isinstance(value, np.ndarray) and value.flags.writeable:
                writebacks.append((value, seen))  # a copy went to the device: bring results back
        values[index] = seen
    return writebacks


_PLAIN = frozenset({Array, int, float, bool})


def _constexpr_value(fn: Any, name: str, value: Any) -> Any:
    value = getattr(value, "value", value)  # tl.constexpr(x) passed by the user
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{fn.__name__}: constexpr '{name}' must be hashable (an int, float, "
                        f"bool, str, dtype or tuple), got {type(value).__name__}") from None
    return value


class _Plan:
    """A compiled, loaded kernel and how to turn argument values into its ``KernelArg``s."""

    __slots__ = ("compiled", "loaded", "params")

    def __init__(self, compiled: CompiledKernel, loaded: Any, params: list) -> None:
        self.compiled = compiled
        self.loaded = loaded
        self.params = params     # (position, IR type, is_pointer) of each runtime parameter

    def kernel_args(self, values: list) -> list[KernelArg]:
        return [KernelArg(t, PointerArg(values[i]._buffer, values[i]._offset) if is_pointer
                          else values[i]) for i, t, is_pointer in self.params]


def _compile_plan(fn: Any, values: list, fingerprints: list, dev: Device,
                  options: dict[str, Any], warmup: bool) -> _Plan:
    arg_types: dict[str, Type] = {}
    arg_attrs: dict[str, dict] = {}
    constexprs: dict[str, Any] = {}
    params = []
    for index, (name, fp) in enumerate(zip(fn.arg_names, fingerprints)):
        if not isinstance(fp, tuple):           # a float or a bool
            t: Type = scalar_type(fp)
        elif fp[0] == "constexpr":
            constexprs[name] = fp[1]
            continue
        else:                                   # (type, divisible by 16) of an array or an int
            t = PointerType(values[index].element_type) if type(values[index]) is Array \
                else scalar_type(fp[0])
            if fp[1]:
                arg_attrs[name] = {"divisibility": 16}
        arg_types[name] = t
        params.append((index, t, isinstance(t, PointerType)))
    backend = dev.backend
    compile_opts = backend.parse_options(**options)
    compiled = compile_kernel(fn, backend, backend.target_of(dev.info), compile_opts, arg_types,
                              constexprs, arg_attrs)
    loaded = None if warmup else backend.load(compiled, dev.info)
    return _Plan(compiled, loaded, params)


def _normalise_grid(fn: Any, grid: Any, values: list,
                    options: dict[str, Any]) -> tuple[int, int, int]:
    if type(grid) is tuple and all(type(g) is int and 0 <= g < 2**31 for g in grid):
        if len(grid) == 1:
            return (grid[0], 1, 1)
        if len(grid) == 3:
            return grid
    if callable(grid):
        grid = grid({**dict(zip(fn.arg_names, values)), **options})
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
    bound, options = fn._binder(*args, **kwargs)
    values = list(bound)
    stream = options.pop("stream", None) if options else None
    dev = _pick_device(fn, bound, options.pop("device", None) if options else None)
    writebacks = _to_arrays(fn, values, dev)
    no_spec = fn.do_not_specialize
    constexpr_positions = fn._constexpr_positions
    fingerprints = []
    for index, value in enumerate(values):
        if index in constexpr_positions or value is None:
            fingerprints.append(("constexpr", _constexpr_value(fn, fn.arg_names[index], value)))
        else:
            fingerprints.append(_fingerprint(fn, fn.arg_names[index], value, bool(no_spec) and (
                fn.arg_names[index] in no_spec or index in no_spec)))
    key = (dev.name, tuple(fingerprints),
           tuple(sorted(options.items())) if options else (), fn.dependencies_key())
    plan = fn._launcher_cache.get(key)
    if plan is None:
        plan = fn._launcher_cache[key] = _compile_plan(fn, values, fingerprints, dev, options,
                                                       warmup)
    if warmup:
        return plan.compiled
    if plan.loaded is None:
        plan.loaded = dev.backend.load(plan.compiled, dev.info)
    grid3 = _normalise_grid(fn, grid, values, options)
    if grid3[0] and grid3[1] and grid3[2]:
        dev.backend.launch(plan.loaded, grid3, plan.kernel_args(values), dev.info, stream)
    for host, array in writebacks:
        host[...] = array.numpy()
    return plan.compiled
