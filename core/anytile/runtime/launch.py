"""The general path of ``kernel[grid](*args, **kwargs)``, in named steps:

1. ``bind``            Python binds the arguments to the kernel's parameters (``make_binder``);
2. ``pick_device``     the device the array arguments live on (or ``device=``, or the default);
3. ``import_arrays``   foreign arrays (NumPy, torch, ...) become ``Array`` views or copies;
4. ``specialise``      one ``ArgSpec`` per argument (``specialize.Signature``);
5. ``plan_for``        compile (``compile.compile_kernel``) and load, cached per specialisation;
6. ``normalise_grid``  the grid as three ints;
7. ``Backend.launch``  with one ``KernelArg`` per runtime parameter;
8. copies made in step 3 are written back.

Most launches never come here: the generated fast path (``fast_launch.py``) serves a launch
whose arguments it has seen before straight from the backend's raw launcher, and comes here
(``launch_bound``) on a miss, which then teaches it the new key."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

import numpy as np

from ..backend import CompiledKernel, KernelArg, PointerArg
from ..errors import AnytileError, BackendError, LaunchArgumentError, LaunchValueError
from .arrays import Array, asarray, import_foreign
from .compile import CompileRequest, compile_kernel
from .descriptor import TensorDescriptor
from .host_descriptors import is_host_filled, read_descriptor
from .devices import Device, _device as _device_for, default_device
from .hooks import LaunchInfo, call_launch_hook, launch_hooks_set
from .specialize import ArgSpec, Specialization

__all__ = ["launch", "launch_bound", "make_binder", "pick_device", "device_of_foreign_array", "import_arrays", "plan_for",
           "normalise_grid", "LaunchPlan", "is_array_like"]


def make_binder(fn: Any) -> Callable[..., tuple[tuple, dict]]:
    """Step 1: a function with the kernel's own parameters (and defaults) returning ``(values
    in parameter order, launch options)``: Python binds, fast, and its errors name the kernel
    (``add_kernel() missing 1 required positional argument``)."""
    names = fn.arg_names
    params = ", ".join(f"{n}=_d[{n!r}]" if n in fn.defaults else n for n in names)
    src = (f"def {fn.__name__}({params}{', ' if names else ''}**options):\n"
           f"    return ({''.join(n + ', ' for n in names)}), options\n")
    namespace: dict[str, Any] = {"_d": dict(fn.defaults)}
    exec(compile(src, f"<binder of {fn.__name__}>", "exec"), namespace)
    return namespace[fn.__name__]


# -- step 2 --------------------------------------------------------------------------------------
def pick_device(fn: Any, values: tuple, requested: Any) -> Device:
    """The one device every array argument lives on (``Array``s, and foreign arrays a
    non-host backend claims: a torch tensor on ``cuda:1`` lives on ``cuda:1``), else the
    default device; ``requested`` (the launch's ``device=``) must agree with the arrays.
    Host arrays (NumPy) live nowhere in particular: they are copied to the device."""
    dev: Optional[Device] = None
    mixed = False
    for v in values:
        if type(v) is TensorDescriptor:           # a descriptor lives where its base does
            v = v.base
        if type(v) is Array and v.device is not dev:
            if dev is not None and v.device != dev:
                mixed = True
            dev = v.device
    if foreign_claimants():
        for v in values:
            found = device_of_foreign_array(v.base if type(v) is TensorDescriptor else v)
            if found is not None:
                mixed = mixed or (dev is not None and found != dev)
                dev = found if dev is None else dev
    if mixed:
        detail = ", ".join(f"'{name}' on {where}" for name, where in _array_devices(fn, values))
        raise BackendError(f"{fn.__name__}: array arguments live on different devices "
                           f"({detail}); a kernel runs on one device: move them to one with "
                           f"at.asarray(x, device=...) (or the framework's own copy, "
                           f"tensor.to(...))")
    if requested is not None:
        from .devices import device as get_device
        wanted = get_device(requested)
        if dev is not None and dev != wanted:
            raise BackendError(f"{fn.__name__}: device={wanted} was asked for, but array "
                               f"arguments live on {dev}")
        return wanted
    return dev if dev is not None else default_device()


def _array_devices(fn: Any, values: tuple) -> list[tuple[str, Device]]:
    """(argument name, device) of each array argument that lives on a device."""
    found = []
    for name, v in zip(fn.arg_names, values):
        if type(v) is TensorDescriptor:
            name, v = f"{name}.base", v.base
        where = v.device if type(v) is Array else device_of_foreign_array(v)
        if where is not None:
            found.append((name, where))
    return found


def device_of_foreign_array(v: Any) -> Optional[Device]:
    """The device a non-host backend claims for the foreign array ``v`` (a torch CUDA tensor
    goes to ``cuda:N``), or ``None``."""
    if type(v) in _PLAIN or v is None or isinstance(v, (np.ndarray, np.number, np.bool_, int, float)):
        return None
    if not is_array_like(v):
        return None
    for backend in foreign_claimants():
        info = backend.device_of_foreign(v)
        if info is not None:
            return _device_for(backend, info)
    return None


_claimants: tuple = (-1, ())


def foreign_claimants() -> tuple:
    """Usable backends whose memory is not the host's (cached per discovery generation)."""
    global _claimants
    from .discovery import discover, generation
    if _claimants[0] != generation():
        found = tuple(r.backend for _, r in sorted(discover().items())
                      if r.backend is not None and not r.backend.host_memory
                      and r.availability.usable)
        _claimants = (generation(), found)
    return _claimants[1]


def is_array_like(value: Any) -> bool:
    """Whether ``value`` is some framework's array (looked up on the type: on a torch tensor,
    reading ``__cuda_array_interface__`` builds the whole interface)."""
    cls = type(value)
    return cls is np.ndarray or hasattr(cls, "__array_interface__") or \
        hasattr(cls, "__cuda_array_interface__") or hasattr(cls, "__dlpack__") or \
        hasattr(cls, "__array__")


# -- step 3 --------------------------------------------------------------------------------------
_PLAIN = frozenset({Array, int, float, bool})


def import_arrays(fn: Any, bound: tuple, dev: Device) -> tuple[list, list[tuple[np.ndarray, Array]]]:
    """The argument values with foreign arrays replaced by ``Array`` views (or copies) on
    ``dev`` (a ``TensorDescriptor``'s base too), and the (host array, device copy) pairs whose
    results must be copied back."""
    values = list(bound)
    writebacks: list[tuple[np.ndarray, Array]] = []
    for index, value in enumerate(values):
        if type(value) in _PLAIN or index in fn.launch_signature.constexpr_positions or \
                value is None or isinstance(value, (int, float, np.number, np.bool_)):
            continue
        name = fn.arg_names[index]
        if type(value) is TensorDescriptor:
            base = value.base if type(value.base) is Array else \
                _import_array(fn, f"{name}.base", value.base, dev, writebacks)
            values[index] = value.on(base)
            continue
        values[index] = _import_array(fn, name, value, dev, writebacks)
    return values, writebacks


def _import_array(fn: Any, name: str, value: Any, dev: Device,
                  writebacks: list[tuple[np.ndarray, Array]]) -> Array:
    if not is_array_like(value):
        raise LaunchArgumentError(f"{fn.__name__}: argument '{name}' is a "
                                  f"{type(value).__name__}; kernel arguments are arrays, "
                                  f"ints, floats, bools, tensor descriptors or constexprs")
    if isinstance(value, np.ndarray) and value.size > 1 and not value.flags.c_contiguous:
        raise LaunchArgumentError(
            f"{fn.__name__}: argument '{name}' is a non-contiguous NumPy array (shape "
            f"{value.shape}, strides {value.strides} bytes): a kernel receives only the "
            f"address of its first element, so reading it as contiguous would touch memory "
            f"outside the view.  Pass np.ascontiguousarray({name}) (and copy results back), "
            f"or at.asarray({name}) for a kernel that takes its strides ({name}.stride(i))")
    try:
        seen = import_foreign(value, dev)
        copied = seen is None
        if copied:
            seen = asarray(np.asarray(value), device=dev)
    except AnytileError:
        raise
    except (TypeError, ValueError) as exc:      # a dtype anytile lacks, a ragged list...
        raise LaunchArgumentError(f"{fn.__name__}: argument '{name}' cannot be passed to a "
                                  f"kernel: {exc}") from None
    if copied and isinstance(value, np.ndarray) and value.flags.writeable:
        writebacks.append((value, seen))  # a copy went to the device: bring results back
    return seen


# -- step 5 --------------------------------------------------------------------------------------
class LaunchPlan:
    """A compiled, loaded kernel and how argument values become its ``KernelArg``s."""

    __slots__ = ("compiled", "loaded", "runtime", "runner", "leaves")

    def __init__(self, compiled: CompiledKernel, loaded: Any, spec: Specialization,
                 n_params: int) -> None:
        self.compiled = compiled
        self.loaded = loaded               # None until loaded (a warm-up only compiles)
        self.runtime = spec.runtime        # (position, IR type, is a pointer) per parameter
        # tensor descriptors' leaves follow the parameters (positions past them)
        self.leaves = any(position >= n_params for position, _, _ in spec.runtime)
        self.runner: Any = False           # the backend's raw launcher; None: it has none

    def kernel_args(self, values: list) -> list[KernelArg]:
        return [KernelArg(t, PointerArg(values[i]._buffer, values[i]._offset) if is_pointer
                          else values[i]) for i, t, is_pointer in self.runtime]


def plan_for(fn: Any, dev: Device, specs: tuple[ArgSpec, ...], options: dict[str, Any],
             warmup: bool) -> LaunchPlan:
    """Step 5: the plan for these ``ArgSpec``s on ``dev``, compiled and loaded once."""
    deps = fn.dependencies_key()
    key = (dev.name, specs, tuple(sorted(options.items())) if options else (), deps)
    plan = fn._plans.get(key)
    if plan is None:
        backend = dev.backend
        spec = fn.launch_signature.compile_inputs(specs)
        request = CompileRequest(fn, backend, backend.target_of(dev.info),
                                 backend.parse_options(**{"debug": fn.debug, **options}), spec)
        compiled = compile_kernel(request)
        compiled.launch = _relauncher(fn, options)
        plan = fn._plans[key] = LaunchPlan(compiled, None, spec, len(fn.arg_names))
        _planned.add(fn)
    if plan.loaded is None and not warmup:
        plan.loaded = dev.backend.load(plan.compiled, dev.info)
    return plan


def _relauncher(fn: Any, options: dict[str, Any]) -> Any:
    """What ``CompiledKernel.launch`` does for a kernel compiled by a launch: launch ``fn``
    again with the options it was compiled with (later ones win)."""
    kept = dict(options)
    return lambda grid, args, kwargs: fn.run(*args, grid=grid, **{**kept, **kwargs})


# -- step 6 --------------------------------------------------------------------------------------
def normalise_grid(fn: Any, grid: Any, values: Any, options: dict[str, Any]) -> tuple[int, int, int]:
    """Step 6: ``grid`` (1-3 ints, or a callable of the meta dict: arguments by name and the
    launch options) as ``(x, y, z)``.  The fast path inlines only its first test."""
    if type(grid) is tuple and all(type(g) is int and 0 <= g < 2**31 for g in grid):
        if len(grid) == 1:
            return (grid[0], 1, 1)
        if len(grid) == 3:
            return grid
    what = "the grid"
    if callable(grid):
        what = "the grid callable's result"
        grid = grid({**dict(zip(fn.arg_names, values)), **options})
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, (bool, np.bool_)):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)):
        raise LaunchArgumentError(f"{fn.__name__}: {what} must be 1 to 3 ints (or a callable "
                                  f"returning them), got {grid!r}")
    if not 1 <= len(grid) <= 3:
        raise LaunchValueError(f"{fn.__name__}: {what} must be 1 to 3 non-negative ints, got "
                               f"{len(grid)} of them: {tuple(grid)!r}")
    for axis, g in enumerate(grid):
        if not isinstance(g, (int, np.integer)) or isinstance(g, (bool, np.bool_)):
            raise LaunchArgumentError(f"{fn.__name__}: {what} must be 1 to 3 ints, but axis "
                                      f"{axis} is {g!r} ({type(g).__name__}); use at.cdiv for "
                                      f"a rounded-up count")
    dims = [int(g) for g in grid]
    if any(d < 0 for d in dims):
        raise LaunchValueError(f"{fn.__name__}: {what} must be 1 to 3 non-negative ints, got "
                               f"{tuple(dims)}")
    dims += [1] * (3 - len(dims))
    if any(d >= 2**31 for d in dims):
        raise LaunchValueError(f"{fn.__name__}: grid {tuple(dims)} is too large (each axis must "
                               f"be below 2**31)")
    return dims[0], dims[1], dims[2]


# -- the whole path ------------------------------------------------------------------------------
def launch(fn: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool) -> Optional[CompiledKernel]:
    """``kernel[grid](*args, **kwargs)`` by the general path (``warmup``: compile only)."""
    bound, options = fn._binder(*args, **kwargs)
    stream = options.pop("stream", None) if options else None
    return launch_bound(fn, bound, options, grid, warmup, stream, None)


def launch_bound(fn: Any, bound: tuple, options: dict, grid: Any, warmup: bool, stream: Any,
                 fast_key: Any) -> Optional[CompiledKernel]:
    """Steps 2-8 for bound argument values; with a ``fast_key`` (a miss of the fast path),
    teach the fast path this launch when it can repeat it."""
    requested = options.pop("device", None) if options else None
    if options and "extern_libs" in options:
        _extern_libs(fn, options.pop("extern_libs"))
    dev = pick_device(fn, bound, requested)
    if any(is_host_filled(v) for v in bound):
        # Triton 3.2-3.3's host-filled descriptors: the grid callable may fill them, so it
        # runs first and they are read after it (runtime/host_descriptors.py)
        grid = normalise_grid(fn, grid, bound, options)
        bound = tuple(read_descriptor(v, dev) if is_host_filled(v) else v for v in bound)
        fast_key = None
    values, writebacks = import_arrays(fn, bound, dev)
    specs = fn.launch_signature.specialise(values)
    plan = plan_for(fn, dev, specs, options, warmup)
    if warmup:
        return plan.compiled
    if plan.leaves:
        values += fn.launch_signature.descriptor_leaves(values)   # passed after the params
    grid3 = normalise_grid(fn, grid, values, options)
    hooked = launch_hooks_set()
    if hooked:
        info = LaunchInfo(fn, plan.compiled, dev, grid3, stream, dict(zip(fn.arg_names, bound)))
        call_launch_hook("enter", info)
    if grid3[0] and grid3[1] and grid3[2]:
        dev.backend.launch(plan.loaded, grid3, plan.kernel_args(values), dev.info, stream)
    if hooked:
        call_launch_hook("exit", info)
    for host, array in writebacks:
        host[...] = array.numpy()
    if fast_key is not None and not writebacks and requested is None and not hooked:
        from .fast_launch import remember
        remember(fn, fast_key, plan, bound, values, dev)
    return plan.compiled


def _extern_libs(fn: Any, libs: Any) -> None:
    """Triton's ``extern_libs={"libdevice": path}`` launch option: checked, then not used --
    every backend brings its own math library (``tl.extra.libdevice`` maps onto it)."""
    if libs is not None and not (isinstance(libs, dict) and
                                 all(isinstance(k, str) for k in libs)):
        raise LaunchArgumentError(f"{fn.__name__}: extern_libs must be a dict of library name "
                                  f"to path, got {libs!r}")


_planned: "weakref.WeakSet[Any]" = weakref.WeakSet()   # kernels with cached plans


def forget_plans() -> None:
    """Drop every kernel's plans and fast entries (discovery changed: loaded kernels belong
    to the backend objects of before)."""
    for fn in list(_planned):
        fn._fast_cache.clear()
        fn._plans.clear()


def forget_fast_entries() -> None:
    """Drop every kernel's fast-path entries (launch hooks were set: launches must take the
    general path, which calls them)."""
    for fn in list(_planned):
        fn._fast_cache.clear()

