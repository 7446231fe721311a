"""The text form of the tile IR (read back by ``anytile.ir.parser``).

The printer is generic: it writes every op from its class's ``NAME``, ``OPERANDS``, ``ATTRS``
and ``REGIONS``, so a new op needs no change here.  One op per line::

    kernel @add(%x: ptr<f32> {divisibility = 16}, %n: i32) {
      %pid = program_id {axis = 0} : i32
      %1 = binary {kind = "mul"} (%pid, %0) : i32
      %2 = load (%ptrs, %mask, none) : tile<256xf32>
      %acc_out = for (%lb, %ub, %st, [%acc0]) : f32 {
      ^(%i: i32, %acc: f32):
        yield ([%next])
      }
      %r = if (%c) : f32 {
        yield ([%a])
      } else_body {
        yield ([%b])
      }
      store (%p, %v, none)
    }

* operands, one entry per ``OPERANDS`` field: ``%v``, ``none`` for an absent optional,
  ``[%a, %b]`` for a list field (left out when it is the last of several, empty and has a default);
* attributes ``{k = v}`` as Python-like literals (ints, exact floats including ``inf``,
  ``-inf``, ``nan``, ``-0.0``; double-quoted strings; ``True``/``False``/``None``; tuples,
  lists, dicts; types as ``!f32``); an attribute equal to its dataclass default is omitted;
* result types after ``:``; regions after the header, the first one unnamed and each further
  one introduced by its field name (``} else_body {``); block arguments on a ``^(...):`` line;
* ``loc("file":line:col)`` (``loc("file":line:col in "func")``) with ``locs=True``;
* function names after ``@``, quoted (``@"a.<locals>.f"``) when not made of ``[A-Za-z0-9_.$]``.

Value names come from ``Value.name`` hints made unique per function (``%x``, ``%x_1``), else
numbers (a hint made only of digits counts as no hint, so numbering never collides).
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Iterable

from .nodes import UNKNOWN_LOC, Block, Function, Loc, Module, Op, Value
from .types import PointerType, ScalarType, TileType

__all__ = ["print_module", "print_function", "print_op", "op_header", "format_attr_value",
           "format_attr_dict", "format_loc", "format_symbol", "ValueNamer"]

_INDENT = "  "
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.]")


class ValueNamer:
    """Assigns every value of a function a unique printed name (``x``, ``x_1``, ``0``...)."""

    def __init__(self) -> None:
        self._names: dict[Value, str] = {}
        self._used: set[str] = set()
        self._counter = 0

    @staticmethod
    def for_function(fn: Function) -> "ValueNamer":
        """A namer that has named ``fn``'s values in print order."""
        namer = ValueNamer()
        namer.name_block(fn.body)
        return namer

    def name_block(self, block: Block) -> None:
        for arg in block.args:
            self.assign(arg)
        for op in block.ops:
            for res in op.results:
                self.assign(res)
            for region in op.regions:
                self.name_block(region)

    def assign(self, value: Value) -> str:
        if value in self._names:
            return self._names[value]
        hint = _NAME_UNSAFE.sub("_", value.name or "")
        if hint and not hint.isdigit():  # digit-only names are the numbering's own
            name, k = hint, 0
            while name in self._used:
                k += 1
                name = f"{hint}_{k}"
        else:
            while str(self._counter) in self._used:
                self._counter += 1
            name = str(self._counter)
        self._used.add(name)
        self._names[value] = name
        return name

    def __call__(self, value: Value) -> str:
        """``%name`` of ``value``; a value never defined in this function prints as
        ``%<undefined:...>`` so broken IR can still be shown in error messages."""
        name = self._names.get(value)
        if name is None:
            return f"%<undefined {value.name or hex(id(value))}>"
        return "%" + name


def _format_float(x: float) -> str:
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)  # repr round-trips every finite double exactly, -0.0 included


def format_attr_value(value: Any) -> str:
    """The text of one attribute value (the parser's ``parse_attr_value`` reads it back)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        inner = ", ".join(format_attr_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_attr_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return format_attr_dict(value)
    if isinstance(value, (ScalarType, PointerType, TileType)):
        return "!" + str(value)
    if hasattr(value, "item") and callable(value.item):  # NumPy scalars
        return format_attr_value(value.item())
    raise TypeError(f"attribute value {value!r} of type {type(value).__name__} has no text form")


def format_attr_dict(attrs: dict[str, Any]) -> str:
    items = (f"{k if _is_bare_key(k) else json.dumps(k)} = {format_attr_value(v)}"
             for k, v in attrs.items())
    return "{" + ", ".join(items) + "}"


def _is_bare_key(key: Any) -> bool:
    if not isinstance(key, str):
        raise TypeError(f"attribute key {key!r} is not a string")
    return key.isidentifier() and key not in ("True", "False", "None")


_BARE_SYMBOL = re.compile(r"[A-Za-z0-9_.$]+")


def format_symbol(name: str) -> str:
    """A function name as written after ``@``: bare when simple, else a quoted string."""
    return name if _BARE_SYMBOL.fullmatch(name) else json.dumps(name)


def format_loc(loc: Loc) -> str:
    text = f"loc({json.dumps(loc.file)}:{loc.line}:{loc.col}"
    if loc.func:
        text += f" in {json.dumps(loc.func)}"
    return text + ")"


def _is_default(op: Op, name: str, value: Any) -> bool:
    """Whether attribute ``name`` holds its dataclass default (then it need not be printed)."""
    f = op.__dataclass_fields__.get(name)
    if f is None:
        return False
    if f.default is dataclasses.MISSING:
        if f.default_factory is dataclasses.MISSING:
            return False
        default = f.default_factory()
    else:
        default = f.default
    return type(value) is type(default) and value == default


def _operand_text(value: Any, names: ValueNamer) -> str:
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(names(v) for v in value) + "]"
    return names(value)


def op_header(op: Op, names: ValueNamer, locs: bool = False) -> str:
    """The first line of ``op`` without indentation and without its regions."""
    parts: list[str] = []
    if op.results:
        parts.append(", ".join(names(r) for r in op.results) + " =")
    parts.append(op.NAME)
    attrs = {k: v for k, v in op.attrs.items() if not _is_default(op, k, v)}
    if attrs:
        parts.append(format_attr_dict(attrs))
    if op.OPERANDS:
        fields = list(op.OPERANDS)
        while len(fields) > 1 and isinstance(getattr(op, fields[-1]), list) and \
                _is_default(op, fields[-1], getattr(op, fields[-1])):
            fields.pop()     # an empty trailing list with a default (a load's ``box``)
        groups = [_operand_text(getattr(op, f), names) for f in fields]
        parts.append("(" + ", ".join(groups) + ")")
    text = " ".join(parts)
    if op.results:
        text += " : " + ", ".join(str(r.type) for r in op.results)
    if locs and op.loc != UNKNOWN_LOC:
        text += " " + format_loc(op.loc)
    return text


def _print_op(op: Op, names: ValueNamer, indent: str, locs: bool, out: list[str]) -> None:
    header = indent + op_header(op, names, locs)
    if not op.REGIONS:
        out.append(header)
        return
    for i, field_name in enumerate(op.REGIONS):
        if i == 0:
            out.append(header + " {")
        else:
            out.append(f"{indent}}} {field_name} {{")
        _print_block(getattr(op, field_name), names, indent, locs, out)
    out.append(indent + "}")


def _print_block(block: Block, names: ValueNamer, indent: str, locs: bool,
                 out: list[str]) -> None:
    """Block arguments at ``indent``, ops one level deeper."""
    if block.args:
        args = ", ".join(f"{names(a)}: {a.type}" for a in block.args)
        out.append(f"{indent}^({args}):")
    for op in block.ops:
        _print_op(op, names, indent + _INDENT, locs, out)


def print_op(op: Op, names: ValueNamer | None = None, locs: bool = False) -> str:
    """``op`` with its regions; values not named by ``names`` print as undefined."""
    if names is None:
        names = ValueNamer()
        for r in op.results:
            names.assign(r)
        for region in op.regions:
            names.name_block(region)
    out: list[str] = []
    _print_op(op, names, "", locs, out)
    return "\n".join(out)


def _type_list(types: Iterable[Any]) -> str:
    types = list(types)
    if len(types) == 1:
        return str(types[0])
    return "(" + ", ".join(str(t) for t in types) + ")"


def print_function(fn: Function, locs: bool = False, names: ValueNamer | None = None) -> str:
    """The text of one function: ``kernel @name(...) {`` or ``func @name(...) -> T {``."""
    names = names or ValueNamer.for_function(fn)
    params = []
    for i, arg in enumerate(fn.args):
        text = f"{names(arg)}: {arg.type}"
        attrs = fn.arg_attrs[i] if i < len(fn.arg_attrs) else {}
        if attrs:
            text += " " + format_attr_dict(attrs)
        params.append(text)
    keyword = "kernel" if fn.is_kernel else "func"
    head = f"{keyword} @{format_symbol(fn.name)}({', '.join(params)})"
    if fn.result_types:
        head += " -> " + _type_list(fn.result_types)
    if locs and fn.loc != UNKNOWN_LOC:
        head += " " + format_loc(fn.loc)
    out = [head + " {"]
    for op in fn.body.ops:
        _print_op(op, names, _INDENT, locs, out)
    out.append("}")
    return "\n".join(out)


def print_module(module: Module, locs: bool = False) -> str:
    """The text of ``module``; ``parse_module`` reads it back to an identical module."""
    chunks = []
    if module.attrs:
        chunks.append("module attributes " + format_attr_dict(module.attrs))
    chunks.extend(print_function(fn, locs) for fn in module.functions.values())
    return "\n\n".join(chunks) + "\n"
