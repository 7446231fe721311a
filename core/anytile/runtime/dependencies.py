"""What a compiled kernel depends on besides its arguments: its source, the source of every
``@jit`` function it reaches, and the globals and closure variables they all read.

``scan(source)`` walks the kernel and its callees once and returns

* ``key``: a hash of those sources and of the values read (plain values by type and ``repr``,
  anything else by identity), so a rebound ``SCALE = tl.constexpr(3.0)`` gives a new key and a
  new compile, while rebinding a name to an equal value keeps the compiled code;
* ``bindings``: ``(holder, name, object)`` for every name read (a globals dict, a closure cell,
  or a module or class for ``holder.name``), which ``KernelSource.dependencies_current``
  re-reads with one lookup each to tell whether ``key`` still holds;
* ``portable_key``: the same over the values that mean the same in another process (every
  value but a user's function, class or object, which only its identity names), and
  ``portable``: whether that was every value.  The on-disk compile cache (``cache.py``) uses
  it only when ``portable`` (else it is skipped rather than wrong); the autotuner's stored
  choices always (a stale choice is slower, never wrong).

Names the functions bind themselves (parameters, locals), builtins, and library modules
(anytile, NumPy, math) are not followed: they cannot change what a kernel compiles to."""
from __future__ import annotations

import hashlib
import types
from dataclasses import dataclass
from typing import Any, Optional

from ..language.objects import constexpr
from ..language.source import ABSENT, KernelSource

__all__ = ["Dependencies", "scan"]

#: values keyed by identity stay alive here, so that no later object reuses their ``id``
_pinned: dict[int, Any] = {}

_PLAIN = (int, float, complex, str, bool, bytes, type(None))
_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


@dataclass(frozen=True)
class Dependencies:
    """One scan of a kernel (see the module docstring)."""

    key: str
    bindings: tuple[tuple[Any, str, Any], ...]
    portable_key: str
    portable: bool


def is_library(value: Any) -> bool:
    """Whether ``value`` belongs to anytile, NumPy, ml_dtypes or the standard library (by the
    name of its module), whose installed sources fix what it means."""
    module = getattr(value, "__module__", None) or getattr(value, "__name__", "")
    return module.split(".")[0] in ("anytile", "numpy", "math", "builtins", "ml_dtypes", "typing")


def _value_fact(value: Any) -> Optional[str]:
    """``value`` as text that means the same in every process, or ``None`` (a ``repr`` naming
    a user's object by its address is no such text: a later object may take the address)."""
    if isinstance(value, constexpr):
        inner = _value_fact(value.value)
        return None if inner is None else f"constexpr[{inner}]"
    if isinstance(value, (tuple, frozenset)):
        items = [_value_fact(v) for v in value]
        if any(item is None for item in items):
            return None
        ordered = items if type(value) is tuple else sorted(items)
        return f"{type(value).__qualname__}({', '.join(ordered)})"
    if isinstance(value, _CODE):
        return f"{value.__module__}.{value.__qualname__}" if is_library(value) else None
    if isinstance(value, _PLAIN) or is_library(type(value)):
        return f"{type(value).__qualname__}:{value!r}"
    return None


def _identity_fact(value: Any) -> str:
    _pinned.setdefault(id(value), value)
    return f"{type(value).__qualname__}#{id(value)}"


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:          # not assigned yet
        return ABSENT


def _holder(source: KernelSource, name: str) -> tuple[Any, Any]:
    """Where ``name`` is bound for ``source`` (its closure cell, else its globals) and the
    object bound there now."""
    code = source.fn.__code__
    if name in code.co_freevars:
        cell = source.fn.__closure__[code.co_freevars.index(name)]
        return cell, _cell_value(cell)
    return source.globals, source.globals.get(name, ABSENT)


def _local_names(source: KernelSource) -> frozenset[str]:
    code = getattr(source.fn, "__code__", None)
    return frozenset(code.co_varnames) if code is not None else frozenset()


def scan(source: KernelSource) -> Dependencies:
    """The dependencies of the kernel ``source`` (see the module docstring)."""
    sources: dict[int, str] = {}
    facts: set[str] = set()          # every value read
    stable: set[str] = set()         # those another process names alike
    portable = True
    bindings: dict[tuple[int, str], tuple[Any, str, Any]] = {}
    pending = [source]
    while pending:
        current = pending.pop()
        if id(current) in sources:
            continue
        sources[id(current)] = current.source_hash
        local = _local_names(current)
        for root, attr in current.reads():
            if root in local:
                continue
            holder, value = _holder(current, root)
            name = root
            if attr is not None:
                if value is ABSENT or isinstance(value, KernelSource) or is_library(value):
                    continue        # the plain read of ``root`` covers it
                inner = getattr(value, attr, ABSENT)
                if not (isinstance(value, types.ModuleType) or isinstance(inner, KernelSource)
                        or (not isinstance(inner, _CODE) and _value_fact(inner) is not None)):
                    continue        # a user object's method, say: the object's identity decides
                holder, name, value = value, attr, inner
                if isinstance(value, types.ModuleType):
                    portable = False    # ``package.module.X``: not followed further
            elif isinstance(value, types.ModuleType):
                continue
            if value is ABSENT or (id(holder), name) in bindings:
                continue
            bindings[id(holder), name] = (holder, name, value)
            if isinstance(value, KernelSource):
                pending.append(value)
                continue
            fact = _value_fact(value)
            label = f"{current.__qualname__}:{name}="
            if fact is None:
                portable = False
                facts.add(label + _identity_fact(value))
            else:
                facts.add(label + fact)
                stable.add(label + fact)
    return Dependencies(_hash(sources.values(), facts), tuple(bindings.values()),
                        _hash(sources.values(), stable), portable)


def _hash(sources: Any, facts: set[str]) -> str:
    digest = hashlib.sha256()
    for text in sorted(sources):
        digest.update(text.encode())
    for fact in sorted(facts):
        digest.update(b"\n" + fact.encode())
    return digest.hexdigest()
