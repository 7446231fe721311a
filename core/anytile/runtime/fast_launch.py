"""The fast path of ``kernel[grid](*args)``, and every piece of Python the runtime writes at
run time (``define`` is the one place it is compiled).

Why generated: a launch is a call with the kernel's own parameters.  A function written for
each kernel binds them with Python's own rules and messages (``add() missing 1 required
positional argument: 'n'``) and reads each argument's key inline; a generic function would
build dicts and loop over parameters, which costs more than the rest of a repeated launch.
Four functions are written, each for one kernel:

* ``make_fast_launcher``: ``kernel[grid](*args)``.  It reads a few cheap facts of each
  argument into one key (``Signature.fast_key_lines``: an ``Array``'s precomputed key, an
  int's range, divisibility and equality to 1, a NumPy array's ``HOST_READERS`` key, a
  foreign array's ``Backend.foreign_reader`` key) and looks it up in ``fn._fast_cache``.
  A hit checks that no global the kernel read was rebound (``binding_probe``) and calls the
  backend's raw ``Backend.launcher``: no ``Array``, ``KernelArg`` or ``ArgSpec`` is built.
  A miss goes to the general path (``launch.launch_bound``) and then ``remember``s the launch
  when every argument can be read this way and was seen in place, and the arguments decided
  the device (so that the key decides it too) or, for NumPy arrays alone, the default device
  did (the entry then holds while it stays the default).  Its one ``except`` re-raises
  anytile's errors through ``errors.for_the_user``, as every entry point does;
* ``make_binder``: the general path's step 1 (``JITFunction.run``, ``warmup``);
* ``_dropping_runner``: a raw launcher behind the values the plan kept (ints equal to 1 and
  ``None`` are compiled in);
* ``binding_probe``: whether a name the kernel read at compile time was rebound.
"""
from __future__ import annotations

import ctypes
import functools
import types
from typing import Any, Callable, Optional

import numpy as np

from ..errors import AnytileError, for_the_user
from ..language.source import ABSENT
from .arrays import Array, foreign_claimants, is_array_like
from .devices import default_device
from .discovery import on_change
from .launch import LaunchPlan, launch_bound, normalise_grid
from .specialize import FAST_SCALARS, fast_constexpr_key, fast_int_key

__all__ = ["make_fast_launcher", "make_binder", "make_key_function", "binding_probe", "define"]


def define(src: str, name: str, namespace: dict[str, Any], filename: str) -> Callable[..., Any]:
    """Compile the generated ``src`` (its tracebacks say ``filename``) with the names its code
    uses in ``namespace``, and return its function ``name``."""
    exec(compile(src, filename, "exec"), namespace)
    return namespace[name]


# -- the binder: the general path's step 1 -------------------------------------------------------
def make_binder(fn: Any) -> Callable[..., tuple[tuple, dict]]:
    """A function with the kernel's own parameters (and defaults) returning ``(values in
    parameter order, launch options)``: Python binds, fast, and its errors name the kernel."""
    names = fn.arg_names
    params = ", ".join(f"{n}=_d[{n!r}]" if n in fn.defaults else n for n in names)
    src = (f"def {fn.__name__}({params}{', ' if names else ''}**options):\n"
           f"    return ({''.join(n + ', ' for n in names)}), options\n")
    return define(src, fn.__name__, {"_d": dict(fn.defaults)}, f"<binder of {fn.__name__}>")


# -- the launcher --------------------------------------------------------------------------------
def _prefix(names: list[str]) -> str:
    """A prefix no parameter name starts with, for the generated code's own names."""
    p = "_at_"
    while any(n.startswith(p) for n in names):
        p += "_"
    return p


def _namespace(fn: Any, p: str) -> dict[str, Any]:
    """The names the launcher and the key function use, each behind the prefix ``p``."""
    return {f"{p}d": dict(fn.defaults), f"{p}Array": Array, f"{p}readers": _readers,
            f"{p}scalars": FAST_SCALARS, f"{p}int_key": fast_int_key,
            f"{p}cx": fast_constexpr_key, f"{p}miss": _miss, f"{p}grid_of": normalise_grid,
            f"{p}self": fn, f"{p}AnytileError": AnytileError, f"{p}for_the_user": for_the_user,
            f"{p}cache": fn._fast_cache}


def _key_expression(fn: Any, p: str) -> str:
    sig = fn.launch_signature
    parts = [sig.constexpr_key(param.name, p) if param.is_constexpr else f"{p}k{param.index}"
             for param in sig.params]
    return f"({''.join(k + ', ' for k in parts)}{p}ok)"


def make_fast_launcher(fn: Any) -> Callable[..., Any]:
    """A function ``(grid, *args, **kwargs)`` with the kernel's own parameters that launches
    through ``fn._fast_cache`` (see the module docstring), falling back to ``launch_bound``.
    Too many positional arguments are reported without counting the grid."""
    names = fn.arg_names
    p = _prefix(names)
    bound = f"({''.join(n + ', ' for n in names)})"
    required = len([n for n in names if n not in fn.defaults])
    taken = (f"{len(names)} positional argument{'s' if len(names) != 1 else ''}"
             if required == len(names) else f"from {required} to {len(names)} positional arguments")
    params = ", ".join(f"{n}={p}d[{n!r}]" if n in fn.defaults else n for n in names)
    raws = [f"{p}v{i}" for i in fn.launch_signature.runtime_positions]

    def miss(stream: str, key: str) -> str:
        return f"return {p}miss({p}self, {p}grid, {bound}, {p}options, {stream}, {key})"
    body = [
        *fn.launch_signature.fast_key_lines(names, p, miss("None", "None")),
        f"    if {p}options:",
        f'        {p}s = {p}options.pop("stream", None)',
        f'        if "device" in {p}options:',
        f"            {miss(f'{p}s', 'None')}",
        f"        {p}ok = tuple({p}options.items())",
        "    else:",
        f"        {p}s = None",
        f"        {p}ok = ()",
        f"    {p}key = {_key_expression(fn, p)}",
        "    try:",
        f"        {p}entry = {p}cache.get({p}key)",
        "    except TypeError:",
        f"        {p}entry = None",
        f"    if {p}entry is None or ({p}entry[2] is not None and "
        f"{p}entry[2]() is not {p}entry[3]):",
        f"        {miss(f'{p}s', f'{p}key')}",
        # the common grid, (n,), inline; everything else through the one rule
        f"    {p}g = {p}grid",
        f"    if type({p}g) is tuple and len({p}g) == 1 and type({p}g[0]) is int and "
        f"0 < {p}g[0] < 2147483648:",
        f"        {p}x, {p}y, {p}z = {p}g[0], 1, 1",
        "    else:",
        f"        {p}x, {p}y, {p}z = {p}grid_of({p}self, {p}g, {bound}, {p}options)",
        f"        if not ({p}x and {p}y and {p}z):",
        f"            return {p}entry[1]",
        f"    {p}entry[0]({p}x, {p}y, {p}z, {p}s, {p}o{''.join(', ' + v for v in raws)})",
        f"    return {p}entry[1]",
    ]
    src = "\n".join([
        f"def {fn.__name__}({p}grid{', ' if names else ''}{params}, *{p}extra, **{p}options):",
        f"    if {p}extra:",
        f"        raise TypeError(f\"{fn.__name__}() takes {taken} but "
        f"{{{len(names)} + len({p}extra)}} were given\")",
        "    try:",
        *("    " + line for line in body),
        f"    except {p}AnytileError as {p}exc:   # the user's error: their line, not ours",
        f"        raise {p}for_the_user({p}exc) from None",
        "",
    ])
    return define(src, fn.__name__, _namespace(fn, p), f"<fast launcher of {fn.__name__}>")


def make_key_function(fn: Any) -> Callable[..., Any]:
    """The fast launcher's key computation alone, from the same generated lines:
    ``key_of(*args, **options)`` returns the key the launcher would look up, or ``None``
    where it would go to the general path unconditionally (``JITFunction.warmup`` reads the
    cache with it)."""
    names = fn.arg_names
    p = _prefix(names)
    params = ", ".join(f"{n}={p}d[{n!r}]" if n in fn.defaults else n for n in names)
    src = "\n".join([
        f"def key_of({params}{', ' if names else ''}**{p}options):",
        *fn.launch_signature.fast_key_lines(names, p, "return None"),
        f'    {p}options.pop("stream", None)',
        f"    {p}ok = tuple({p}options.items())",
        f"    return {_key_expression(fn, p)}",
        "",
    ])
    return define(src, "key_of", _namespace(fn, p), f"<fast key of {fn.__name__}>")


# -- a miss: the general path, then what the fast path learns from it ----------------------------
def _miss(fn: Any, grid: Any, bound: tuple, options: dict, stream: Any, key: Any) -> Any:
    """A launch the fast path could not serve: ``key`` is ``None`` when an argument's type
    was unknown to it (ask the backends for readers of such types, and start again when one
    was found) or when the key cannot be hashed (the general path reports the bad value)."""
    if key is None and "device" not in options:
        learned = False
        for value in bound:
            cls = type(value)
            if cls not in _readers and cls not in _no_reader and cls not in FAST_SCALARS and \
                    is_array_like(value):
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
    done = launch_bound(fn, bound, options, grid, False, stream)
    if key is not None and done.repeatable:
        remember(fn, key, done.plan, bound, done.values, done.device)
    return done.plan.compiled


def remember(fn: Any, key: Any, plan: LaunchPlan, bound: tuple, values: list, dev: Any) -> None:
    """Store ``plan`` under the fast ``key`` when a later launch with the same key can go
    straight to the backend's raw launcher: every array argument was seen in place, and the
    arguments decided the device (an ``Array`` or a claimed foreign array), or else the
    default device did and the entry holds only while it stays the default."""
    if plan.runner is False:
        plan.runner = dev.backend.launcher(plan.loaded, dev.info)
    if plan.runner is None:
        return
    constexprs = fn.launch_signature.constexpr_positions
    decided_by_arguments = False
    host_arrays = False
    for index, value in enumerate(bound):
        cls = type(value)
        if index in constexprs or value is None or cls in FAST_SCALARS or cls in (int, float, bool):
            continue
        if cls is Array:
            if value._address is None:
                return
            decided_by_arguments = True
            continue
        seen = values[index]
        host_reader = HOST_READERS.get(cls)
        if host_reader is not None:
            # host memory used in place by a host backend: its address is all a launch needs
            if not dev.backend.host_memory or type(seen) is not Array or \
                    seen._address is None or seen._address != host_reader(value)[0]:
                return
            host_arrays = True
            continue
        _learn_reader(cls)
        if _reader_owner.get(cls) is not dev.backend or type(seen) is not Array or \
                seen._owner is not value or seen._address is None:
            return                       # not imported in place by this device's backend
        decided_by_arguments = True
    if decided_by_arguments:
        probe, current = fn._probe or (None, None)
    elif host_arrays:                    # NumPy alone: the default device decided
        probe, current = _default_device_probe(dev, fn._probe)
    else:                                # no array: the key says nothing of the device
        return
    runtime = fn.launch_signature.runtime_positions
    kept = [index for index, _, _ in plan.runtime]
    run = plan.runner
    if kept != list(runtime):
        run = _dropping_runner(run, kept, runtime)
    fn._fast_cache[key] = (run, plan.compiled, probe, current)


def _default_device_probe(dev: Any, bindings: Optional[tuple[Callable[[], Any], Any]]
                          ) -> tuple[Callable[[], Any], Any]:
    """``(probe, current)`` for an entry that holds while ``dev`` is the default device and
    ``bindings`` (the kernel's ``binding_probe``) holds."""
    if bindings is None:
        return default_device, dev
    src = "def stale():\n    return _default() is not _dev or _probe() is not _current\n"
    namespace = {"_default": default_device, "_dev": dev, "_probe": bindings[0],
                 "_current": bindings[1]}
    return define(src, "stale", namespace, "<anytile default device check>"), False


def _dropping_runner(run: Callable, kept: list[int], runtime: tuple[int, ...]) -> Callable:
    """``run`` behind a function taking every runtime position's value and passing on only
    those the plan kept (ints equal to 1 and ``None`` became constants)."""
    names = [f"v{i}" for i in range(len(runtime))]
    passed = [names[runtime.index(i)] for i in kept]
    src = (f"def run(g0, g1, g2, stream, owner, {', '.join(names)}):\n"
           f"    return _run(g0, g1, g2, stream, owner{''.join(', ' + n for n in passed)})\n")
    return define(src, "run", {"_run": run}, "<anytile runner>")


def _numpy_reader() -> Callable[[np.ndarray], tuple[int, tuple]]:
    """The fast path's reader of NumPy arrays: ``(address of element 0, key)``, the key
    holding what a host backend's import depends on (dtype, contiguity, writeability,
    alignment).  The address is read from the array object, where NumPy's C layout keeps
    it right after the object header (``__array_interface__`` builds a dict and costs ten
    times more); where that layout does not hold, through ``__array_interface__``."""
    field = ctypes.c_void_p.from_address
    offset = object.__basicsize__

    def read(a: np.ndarray) -> tuple[int, tuple]:
        address = field(id(a) + offset).value or 0
        flags = a.flags
        return address, (a.dtype, flags.c_contiguous, flags.writeable, not address & 15)

    def read_interface(a: np.ndarray) -> tuple[int, tuple]:
        address = a.__array_interface__["data"][0]
        flags = a.flags
        return address, (a.dtype, flags.c_contiguous, flags.writeable, not address & 15)

    samples = [np.arange(7.0), np.arange(40, dtype=np.int8)[3:], np.ones((3, 5), np.float32).T]
    if all(read(a)[0] == a.__array_interface__["data"][0] for a in samples):
        return read
    return read_interface


#: host array type -> its reader, whatever the device (no backend claims host memory)
HOST_READERS: dict[type, Callable[[Any], tuple[int, Any]]] = {np.ndarray: _numpy_reader()}
#: array type -> its reader: the host readers, and the reader of the backend that claims a
#: foreign array type (``Backend.foreign_reader``)
_readers: dict[type, Callable[[Any], tuple[Any, Any]]] = dict(HOST_READERS)
_reader_owner: dict[type, Any] = {}
_no_reader: set[type] = set()


def _learn_reader(cls: type) -> None:
    if cls in _readers or cls in _no_reader or cls in FAST_SCALARS:
        return
    for backend in foreign_claimants():
        try:
            reader = backend.foreign_reader(cls)
        except Exception:  # noqa: BLE001 -- a plugin's bug only costs it the fast path
            reader = None
        if reader is not None:
            _readers[cls] = reader
            _reader_owner[cls] = backend
            return
    _no_reader.add(cls)


def _forget_readers() -> None:
    """Discovery changed (a backend registered or refreshed): readers may belong to backend
    objects of before (``launch`` drops the plans and fast entries)."""
    _readers.clear()
    _readers.update(HOST_READERS)
    _reader_owner.clear()
    _no_reader.clear()


on_change(_forget_readers)


# -- the dependency check ------------------------------------------------------------------------
Binding = tuple[Any, str, Any]     # (holder, name, object)


def binding_probe(bindings: tuple[Binding, ...]) -> Optional[tuple[Callable[[], Any], Any]]:
    """``(probe, current)``: every one of ``bindings`` (``dependencies.scan``'s ``(holder,
    name, object)``) still holds its object while ``probe() is current``; the fast path asks
    before every launch, so one global in a dict is probed by its ``dict.get`` alone (no
    Python frame), others by a generated function of one lookup each.  ``None``: nothing to
    probe."""
    if not bindings:
        return None
    if len(bindings) == 1 and type(bindings[0][0]) is dict:
        holder, name, value = bindings[0]
        return functools.partial(holder.get, name, ABSENT), value
    namespace: dict[str, Any] = {"ABSENT": ABSENT}
    tests = []
    for i, (holder, name, value) in enumerate(bindings):
        namespace[f"h{i}"], namespace[f"v{i}"] = holder, value
        if type(holder) is dict:
            tests.append(f"h{i}.get({name!r}, ABSENT) is not v{i}")
        elif type(holder) is types.CellType:
            tests.append(f"h{i}.cell_contents is not v{i}")
        else:
            tests.append(f"getattr(h{i}, {name!r}, ABSENT) is not v{i}")
    src = ("def stale():\n    try:\n        return " + " or ".join(tests) +
           "\n    except ValueError:    # a closure cell emptied\n        return True\n")
    return define(src, "stale", namespace, "<anytile dependency check>"), False
