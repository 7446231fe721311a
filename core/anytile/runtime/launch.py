"""``kernel[grid](*args)``: bind arguments, pick the device, specialise, compile (cached), launch.

Specialisation follows Triton: arrays become ``ptr<dtype>``; Python ints ``i32`` when they fit
(else ``i64``, or ``u64`` above 2^63-1); floats ``f32``; bools ``i1``; ``None`` is a constexpr.
Integers and addresses divisible by 16 are marked so (``divisibility``), and integers equal
to 1 become compile-time constants (so unit strides give contiguous accesses), unless listed
in ``do_not_specialize``.  One compiled kernel per (types, divisibility, constexpr values,
options, target, source of the kernel and of every jit function it can reach).

The fast path: ``kernel[grid]`` calls a function generated per kernel (``make_fast_launcher``)
that binds the arguments, reads a few cheap facts of each (an ``Array``'s precomputed key, an
int's range, divisibility and equality to 1, a foreign array's ``Backend.foreign_reader``
key) into one tuple and looks that up in ``fn._fast_cache``.  A hit launches through the
backend's ``Backend.launcher`` with raw values: no ``Array``, ``KernelArg`` or fingerprint is
built.  A miss runs the general path below, which stores an entry when every argument can
be read that way and the device was decided by the arguments (so the key decides it too)."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

import numpy as np

from ..backend import Backend, CompiledKernel, KernelArg, PointerArg
from ..errors import AnytileError, BackendError
from ..ir.types import PointerType, Type, i32, i64, scalar_type, u64
from .arrays import Array, asarray, import_foreign
from .compiler import compile_kernel
from .devices import Device, _device as _device_for, default_device
from .discovery import on_change

__all__ = ["launch", "launch_bound", "make_binder", "make_fast_launcher"]

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
        if type(v) in _PLAIN or v is None or isinstance(v, (np.ndarray, np.number, np.bool_, int, float)):
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
                isinstance(value, (int, float, np.number, np.bool_)):
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

    __slots__ = ("compiled", "loaded", "params", "runner")

    def __init__(self, compiled: CompiledKernel, loaded: Any, params: list) -> None:
        self.compiled = compiled
        self.loaded = loaded
        self.params = params     # (position, IR type, is_pointer) of each runtime parameter
        self.runner: Any = False  # the backend's raw launcher (None: it has none); False: not asked

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
    """The general path: bind ``args``/``kwargs`` to ``fn``'s parameters and launch."""
    bound, options = fn._binder(*args, **kwargs)
    stream = options.pop("stream", None) if options else None
    return launch_bound(fn, bound, options, grid, warmup, stream, None)


def launch_bound(fn: Any, bound: tuple, options: dict, grid: Any, warmup: bool, stream: Any,
                 fast_key: Any) -> Optional[CompiledKernel]:
    """Launch with bound argument values; with a ``fast_key`` (from the generated fast
    launcher) remember the launch under it when the fast path can repeat it."""
    values = list(bound)
    requested = options.pop("device", None) if options else None
    dev = _pick_device(fn, bound, requested)
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
    deps = fn.dependencies_key()
    if fn._fast_deps != deps:      # a called jit function was rebound: fast entries are stale
        fn._fast_cache.clear()
        fn._fast_deps = deps
    # constexpr values by type too: 1, 1.0 and True are equal keys but compile differently
    kinds = tuple(type(fp[1]) for fp in fingerprints if type(fp) is tuple and fp[0] == "constexpr")
    key = (dev.name, tuple(fingerprints), kinds, tuple(sorted(options.items())) if options else (),
           deps)
    plan = fn._launcher_cache.get(key)
    if plan is None:
        plan = fn._launcher_cache[key] = _compile_plan(fn, values, fingerprints, dev, options,
                                                       warmup)
        _launched.add(fn)
    if warmup:
        return plan.compiled
    if plan.loaded is None:
        plan.loaded = dev.backend.load(plan.compiled, dev.info)
    grid3 = _normalise_grid(fn, grid, values, options)
    if grid3[0] and grid3[1] and grid3[2]:
        dev.backend.launch(plan.loaded, grid3, plan.kernel_args(values), dev.info, stream)
    for host, array in writebacks:
        host[...] = array.numpy()
    if fast_key is not None and not writebacks and requested is None:
        _remember_fast(fn, fast_key, plan, bound, values, dev)
    return plan.compiled


# -- the fast path ---------------------------------------------------------------------------------
def _scalar_int(value: Any) -> tuple[int, Any]:
    value = int(value)
    return value, _int_key(value)


def _int_key(value: int) -> Any:
    """The fast key of an int outside i32 (the generated code handles i32 inline)."""
    if value == 1:
        return "c1"
    return (_int_type(value).name, value % 16 == 0)


#: scalar types the generated code does not test inline: type -> (raw value, key)
_SCALARS: dict[type, Callable[[Any], tuple[Any, Any]]] = {
    type(None): lambda v: (None, "None"),
    np.bool_: lambda v: (bool(v), "i1"),
    **{t: _scalar_int for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64, np.intc, np.uintc, np.longlong,
                                np.ulonglong)},
    **{t: (lambda v: (float(v), "f32")) for t in (np.float16, np.float32, np.float64)},
}

#: foreign array type -> the reader of the backend that claims it (``Backend.foreign_reader``)
_readers: dict[type, Callable[[Any], tuple[Any, Any]]] = {}
_reader_owner: dict[type, Backend] = {}
_no_reader: set[type] = set()
_launched: "weakref.WeakSet[Any]" = weakref.WeakSet()   # kernels with cached plans


def _forget_fast_paths() -> None:
    """Discovery changed (a backend registered or refreshed): readers, plans and fast entries
    may hold backend objects of before."""
    _readers.clear()
    _reader_owner.clear()
    _no_reader.clear()
    for fn in list(_launched):
        fn._fast_cache.clear()
        fn._launcher_cache.clear()   # loaded kernels belong to the backend objects of before


on_change(_forget_fast_paths)


def _learn_reader(cls: type) -> None:
    if cls in _readers or cls in _no_reader or cls in _SCALARS:
        return
    for backend in _foreign_claimants():
        try:
            reader = backend.foreign_reader(cls)
        except Exception:  # noqa: BLE001 -- a plugin's bug only costs it the fast path
            reader = None
        if reader is not None:
            _readers[cls] = reader
            _reader_owner[cls] = backend
            return
    _no_reader.add(cls)


def _remember_fast(fn: Any, key: Any, plan: _Plan, bound: tuple, values: list,
                   dev: Device) -> None:
    """Store ``plan`` under the fast ``key`` when a later launch with the same key can go
    straight to the backend's raw launcher."""
    if plan.runner is False:
        plan.runner = dev.backend.launcher(plan.loaded, dev.info)
    if plan.runner is None:
        return
    decided_by_arguments = False
    for index, value in enumerate(bound):
        cls = type(value)
        if index in fn._constexpr_positions or value is None or cls in _SCALARS or \
                cls in (int, float, bool):
            continue
        if cls is Array:
            if value._address is None:
                return
            decided_by_arguments = True
            continue
        _learn_reader(cls)
        seen = values[index]
        if _reader_owner.get(cls) is not dev.backend or type(seen) is not Array or \
                seen._owner is not value or seen._address is None:
            return                       # not imported in place by this device's backend
        decided_by_arguments = True
    if not decided_by_arguments:         # the default device decided: the key does not
        return
    positions = [index for index, _, _ in plan.params]
    run = plan.runner
    if positions != fn._runtime_positions:
        run = _dropping_runner(run, positions, len(fn._runtime_positions),
                               fn._runtime_positions)
    fn._fast_cache[key] = (run, plan.compiled)


def _dropping_runner(run: Callable, keep: list[int], count: int, runtime: list[int]) -> Callable:
    """``run`` behind a function taking every runtime position's value and passing on only
    those the plan kept (ints equal to 1 and ``None`` became constants)."""
    names = [f"v{i}" for i in range(count)]
    kept = [names[runtime.index(i)] for i in keep]
    src = (f"def run(g0, g1, g2, stream, owner, {', '.join(names)}):\n"
           f"    return _run(g0, g1, g2, stream, owner{''.join(', ' + n for n in kept)})\n")
    namespace: dict[str, Any] = {"_run": run}
    exec(compile(src, "<anytile runner>", "exec"), namespace)
    return namespace["run"]


def _constexpr_key(value: Any) -> Any:
    """The fast key of a constexpr that is not an int (typed: ``True`` and ``1`` differ)."""
    return (type(value), getattr(value, "value", value))


def _fast_miss(fn: Any, grid: Any, bound: tuple, options: dict, stream: Any, key: Any) -> Any:
    """A launch the fast path could not serve: ``key`` ``None`` when an argument's type was
    unknown to it (ask the backends for readers of such types, and start again when one was
    found) or when the key cannot be hashed (the general path reports the bad constexpr)."""
    if key is None and "device" not in options:
        learned = False
        for value in bound:
            cls = type(value)
            if cls not in _readers and cls not in _no_reader and cls not in _SCALARS and \
                    _is_array_like(value):
                _learn_reader(cls)
                learned = learned or cls in _readers
        if learned:
            if stream is not None:
                options["stream"] = stream
            return fn._fast(grid, *bound, **options)
    try:
        hash(key)
    except TypeError:             # an unhashable constexpr: the general path says so
        key = None
    try:
        return launch_bound(fn, bound, options, grid, False, stream, key)
    except AnytileError as exc:   # the user's error: show their line, not our internals
        raise exc.with_traceback(None) from None


def _fast_grid(fn: Any, grid: Any, bound: tuple, options: dict) -> tuple[int, int, int]:
    try:
        return _normalise_grid(fn, grid, list(bound), options)
    except AnytileError as exc:
        raise exc.with_traceback(None) from None


def make_fast_launcher(fn: Any) -> Callable[..., Any]:
    """A function ``(grid, *args, **kwargs)`` with the kernel's own parameters that launches
    through ``fn._fast_cache`` (see the module docstring), falling back to ``launch_bound``.
    Python binds the arguments, so binding errors name the kernel; too many positional
    arguments are reported without counting the grid."""
    names = fn.arg_names
    p = "_at_"
    while any(n.startswith(p) for n in names):
        p += "_"
    no_spec = fn.do_not_specialize
    bound = f"({''.join(n + ', ' for n in names)})"
    lines = []
    keys, raws = [], []
    for index, name in enumerate(names):
        if index in fn._constexpr_positions:
            keys.append(f"{name} if type({name}) is int else {p}cx({name})")
            continue
        k, v = f"{p}k{index}", f"{p}v{index}"
        keys.append(k)
        raws.append(v)
        spec = not (name in no_spec or index in no_spec)
        int_key = (f'("c1" if {name} == 1 else "i32" if {name} & 15 else "i32:16")' if spec
                   else '"i32"')
        lines += [
            f"    {p}t = type({name})",
            f"    if {p}t is {p}Array:",
            f"        {k} = {name}.{'_spec_key' if spec else '_nospec_key'}",
            f"        {v} = {name}._address",
            f"        if {p}o is None:",
            f"            {p}o = {name}._owner",
            f"    elif {p}t is int:",
            f"        {v} = {name}",
            f"        {k} = {int_key} if -2147483648 <= {name} <= 2147483647 else {p}int_key({name})",
            f"    elif {p}t is float:",
            f"        {v} = {name}",
            f'        {k} = "f32"',
            f"    elif {p}t is bool:",
            f"        {v} = {name}",
            f'        {k} = "i1"',
            "    else:",
            f"        {p}r = {p}readers.get({p}t)",
            f"        if {p}r is not None:",
            f"            {v}, {k} = {p}r({name})",
            f"            if {p}o is None:",
            f"                {p}o = {name}",
            "        else:",
            f"            {p}r = {p}scalars.get({p}t)",
            f"            if {p}r is None:",
            f"                return {p}miss({p}self, {p}grid, {bound}, {p}options, None, None)",
            f"            {v}, {k} = {p}r({name})",
        ]
    required = len([n for n in names if n not in fn.defaults])
    taken = (f"{len(names)} positional argument{'s' if len(names) != 1 else ''}"
             if required == len(names) else f"from {required} to {len(names)} positional arguments")
    params = ", ".join(f"{n}={p}d[{n!r}]" if n in fn.defaults else n for n in names)
    src = "\n".join([
        f"def {fn.__name__}({p}grid{', ' if names else ''}{params}, *{p}extra, **{p}options):",
        f"    if {p}extra:",
        f"        raise TypeError(f\"{fn.__name__}() takes {taken} but "
        f"{{{len(names)} + len({p}extra)}} were given\")",
        f"    {p}o = None",
        *lines,
        f"    if {p}options:",
        f'        {p}s = {p}options.pop("stream", None)',
        f'        if "device" in {p}options:',
        f"            return {p}miss({p}self, {p}grid, {bound}, {p}options, {p}s, None)",
        f"        {p}ok = tuple({p}options.items())",
        "    else:",
        f"        {p}s = None",
        f"        {p}ok = ()",
        f"    {p}key = ({''.join(k + ', ' for k in keys)}{p}ok)",
        "    try:",
        f"        {p}entry = {p}cache.get({p}key)",
        "    except TypeError:",
        f"        {p}entry = None",
        f"    if {p}entry is None or ({p}self._dep_bindings and not {p}self._deps_current()):",
        f"        return {p}miss({p}self, {p}grid, {bound}, {p}options, {p}s, {p}key)",
        f"    {p}g = {p}grid",
        f"    if type({p}g) is tuple and len({p}g) == 1 and type({p}g[0]) is int and "
        f"0 < {p}g[0] < 2147483648:",
        f"        {p}x, {p}y, {p}z = {p}g[0], 1, 1",
        "    else:",
        f"        {p}x, {p}y, {p}z = {p}normalise_grid({p}self, {p}g, {bound}, {p}options)",
        f"        if not ({p}x and {p}y and {p}z):",
        f"            return {p}entry[1]",
        "    try:",
        f"        {p}entry[0]({p}x, {p}y, {p}z, {p}s, {p}o{''.join(', ' + v for v in raws)})",
        f"    except {p}AnytileError as {p}exc:   # the user's error, not our internals",
        f"        raise {p}exc.with_traceback(None) from None",
        f"    return {p}entry[1]",
        "",
    ])
    namespace: dict[str, Any] = {
        f"{p}d": dict(fn.defaults), f"{p}Array": Array, f"{p}readers": _readers,
        f"{p}scalars": _SCALARS, f"{p}int_key": _int_key, f"{p}cx": _constexpr_key,
        f"{p}miss": _fast_miss, f"{p}normalise_grid": _fast_grid, f"{p}self": fn,
        f"{p}AnytileError": AnytileError,
        f"{p}cache": fn._fast_cache}
    exec(compile(src, f"<fast launcher of {fn.__name__}>", "exec"), namespace)
    return namespace[fn.__name__]
