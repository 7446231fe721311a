"""How a kernel's arguments specialise its compiled code: the one rule every path follows.

Each argument is described by an ``ArgSpec`` (what the compiled code depends on), as Triton does:

* an array -> ``ptr<dtype>``, marked ``divisible_by_16`` when its address is;
* a Python int -> ``i32`` when it fits (else ``i64``, or ``u64`` above 2^63-1), marked
  ``divisible_by_16`` when it is; an int equal to 1 becomes the constant 1 (unit strides
  then give contiguous accesses);
* a float -> ``f32``; a bool -> ``i1``;
* an ``at.TensorDescriptor`` -> its element type, block shape and padding, its base marked
  ``divisible_by_16`` when it is, and each size and row stride when it is (in elements);
* a ``tl.constexpr`` parameter, or any argument given ``None`` -> its value, compiled in
  (``1``, ``1.0`` and ``True`` are different values here).

Parameters named in ``do_not_specialize`` keep their type but never get ``divisible_by_16``
nor become constants.  The general launch path (``launch.py``) computes ``ArgSpec``s with
``Signature.specialise``; ``at.compile`` builds them from signature strings with
``Signature.from_text``; the generated fast path (``fast_launch.py``) computes a cheaper key
with the inline code of ``Signature.fast_key_lines``, which ``tests/runtime/test_specialize.py``
checks against ``specialise``: equal fast keys must mean equal ``ArgSpec``s.
"""
from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from ..errors import AnytileError, CompilationError, LaunchArgumentError, LaunchOverflowError
from ..ir.types import PointerType, ScalarType, Type, f32, i1, i32, i64, parse_type, scalar_type, u64
from ..language.source import KernelSource
from .arrays import Array
from .descriptor import DescriptorParam, TensorDescriptor, leaf_names

__all__ = ["ArgKind", "ArgSpec", "Param", "Signature", "Specialization", "int_type",
           "parse_signature_type"]

_I32 = (-2**31, 2**31 - 1)
_I64 = (-2**63, 2**63 - 1)


class ArgKind(str, enum.Enum):
    POINTER = "pointer"        # an array, passed as the address of element 0
    SCALAR = "scalar"          # an int, float or bool passed at run time
    CONSTEXPR = "constexpr"    # a value compiled into the code
    DESCRIPTOR = "descriptor"  # an at.TensorDescriptor: its leaves are passed at run time


class ArgSpec(NamedTuple):
    """What the compiled code depends on for one argument (see the module docstring).  A
    named tuple of strings and plain values: the general launch path hashes a tuple of them
    per launch, so the IR type is kept as its text (``type`` parses it, once per text)."""

    kind: ArgKind
    type_text: Optional[str] = None      # POINTER, SCALAR: the parameter's IR type, as text
    divisible_by_16: bool = False        # POINTER, SCALAR: the address or value is
    value: Any = None                    # CONSTEXPR: the value
    value_type: Optional[type] = None    # CONSTEXPR: its type (1, 1.0 and True differ)

    @property
    def type(self) -> Type:
        """The IR type of a runtime parameter."""
        return _parsed_type(self.type_text)

    @staticmethod
    def runtime(t: Type, divisible_by_16: bool = False) -> "ArgSpec":
        kind = ArgKind.POINTER if isinstance(t, PointerType) else ArgKind.SCALAR
        return ArgSpec(kind, str(t), divisible_by_16)

    @staticmethod
    def constexpr(value: Any) -> "ArgSpec":
        return ArgSpec(ArgKind.CONSTEXPR, value=value, value_type=type(value))


@functools.lru_cache(maxsize=None)
def _parsed_type(text: str) -> Type:
    return parse_type(text)


# the specs of scalars, built once (launches reuse these very objects)
_ONE = ArgSpec.constexpr(1)
_BOOL = ArgSpec.runtime(i1)
_FLOAT = ArgSpec.runtime(f32)
_INTS = {(t.name, div): ArgSpec.runtime(t, div) for t in (i32, i64, u64) for div in (False, True)}
_POINTERS: dict[tuple[str, bool], ArgSpec] = {}   # (Array._pointer_key, aligned) -> spec


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel."""

    name: str
    index: int
    is_constexpr: bool      # annotated ``tl.constexpr``
    specialize: bool        # not in ``do_not_specialize``
    is_const: bool = False  # annotated ``tl.const``: a pointer only read through


@dataclass(frozen=True)
class Specialization:
    """What the frontend and the backends compile for: the runtime parameters' IR types and
    attributes, the constexpr values, and where each runtime parameter sits in the call."""

    arg_types: Mapping[str, Type]
    constexprs: Mapping[str, Any]
    arg_attrs: Mapping[str, dict]
    runtime: tuple[tuple[int, Type, bool], ...]    # (position, IR type, is a pointer)


def int_type(value: int) -> Type:
    """The IR type of a Python int argument."""
    if _I32[0] <= value <= _I32[1]:
        return i32
    if _I64[0] <= value <= _I64[1]:
        return i64
    if 0 <= value < 2**64:
        return u64
    raise AnytileError(f"integer argument {value} does not fit in 64 bits")


# Triton's spellings of scalar types, accepted beside anytile's own (f32, i32, ...)
_TRITON_NAMES = {"fp16": "f16", "fp32": "f32", "fp64": "f64", "bf16": "bf16", "i1": "i1",
                 "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u1": "i1", "u8": "u8",
                 "u16": "u16", "u32": "u32", "u64": "u64", "int1": "i1", "bool": "i1",
                 "fp8e4nv": "f8e4m3", "fp8e5": "f8e5m2", "float8e4nv": "f8e4m3",
                 "float8e5": "f8e5m2", "fp8e4b15": "f8e4b15", "float8e4b15": "f8e4b15"}


def parse_signature_type(text: str) -> Type:
    """``"*fp32"`` -> ``ptr<f32>``; ``"i32"``/``"int32"``/``"f32"``/``"fp16"`` -> scalars."""
    t = text.strip()
    if t.startswith("*"):
        inner = parse_signature_type(t[1:])
        if not isinstance(inner, ScalarType):
            raise ValueError(f"'{text}': a pointer must point to a scalar type")
        return PointerType(inner)
    name = _TRITON_NAMES.get(t, t)
    for long, short in (("float", "f"), ("bfloat", "bf"), ("uint", "u"), ("int", "i")):
        if name.startswith(long) and name[len(long):].isdigit():
            name = short + name[len(long):]
            break
    try:
        return scalar_type(name)
    except KeyError:
        raise ValueError(f"unknown type '{text}' in signature (use e.g. *fp32, i32, fp16, bf16)") from None


_TENSORDESC = re.compile(r"^tensordesc<\s*([A-Za-z0-9_]+)\s*\[([0-9,\s]+)\]\s*>(:16)?$")


def _descriptor_spec(name: str, text: str) -> "ArgSpec":
    """The ``ArgSpec`` of ``at.compile``'s ``"tensordesc<fp16[64, 64]>"`` (Triton's text for a
    descriptor argument): the element type and block shape; the base is taken as 16-byte
    aligned and the row strides as multiples of 16 elements (so rows start 16-byte aligned,
    as a descriptor the GPU's copy unit reads must), and the sizes as anything
    (``...>:16``: as multiples of 16)."""
    m = _TENSORDESC.match(text.strip())
    if m is None:
        raise CompilationError(f"'{name}': malformed descriptor type {text!r} (expected e.g. "
                               f"'tensordesc<fp16[64, 64]>' or 'tensordesc<fp16[64, 64]>:16')")
    elem = parse_signature_type(m.group(1))
    blocks = tuple(int(n) for n in m.group(2).split(",") if n.strip())
    sizes = m.group(3) is not None
    return ArgSpec(ArgKind.DESCRIPTOR, str(PointerType(elem)), True,
                   (blocks, "zero", (sizes,) * len(blocks) + (True,) * (len(blocks) - 1)))


def constexpr_value(kernel: str, name: str, value: Any) -> Any:
    """A constexpr argument's value (``tl.constexpr(x)`` unwrapped); it must be hashable."""
    value = getattr(value, "value", value)
    try:
        hash(value)
    except TypeError:
        raise LaunchArgumentError(f"{kernel}: constexpr '{name}' must be hashable (an int, "
                                  f"float, bool, str, dtype or tuple), got "
                                  f"{type(value).__name__}") from None
    return value


class Signature:
    """The parameters of one kernel and how each argument specialises it."""

    def __init__(self, source: KernelSource, do_not_specialize: Sequence[Any] = ()) -> None:
        self.kernel = source.__name__
        no_spec = set(do_not_specialize)
        const_names = getattr(source, "const_names", ())
        self.params = tuple(Param(n, i, n in source.constexpr_names,
                                  not (n in no_spec or i in no_spec), n in const_names)
                            for i, n in enumerate(source.arg_names))
        self.constexpr_positions = frozenset(p.index for p in self.params if p.is_constexpr)
        self.runtime_positions = tuple(p.index for p in self.params if not p.is_constexpr)
        self._defaults = dict(source.defaults)

    # -- the general rule ----------------------------------------------------------------------
    def spec_of(self, param: Param, value: Any) -> ArgSpec:
        """The ``ArgSpec`` of ``value`` (an ``Array``, a scalar or a constexpr) for ``param``."""
        if param.is_constexpr or value is None:
            return ArgSpec.constexpr(constexpr_value(self.kernel, param.name, value))
        cls = type(value)
        if cls is Array:
            key = (value._pointer_key, value._aligned and param.specialize)
            spec = _POINTERS.get(key)
            if spec is None:
                spec = _POINTERS[key] = ArgSpec.runtime(PointerType(value.element_type), key[1])
            return spec
        if cls is bool or cls is np.bool_:
            return _BOOL
        if cls is int or isinstance(value, (int, np.integer)):
            value = int(value)
            if value == 1 and param.specialize:
                return _ONE
            try:
                t = int_type(value)
            except AnytileError:
                raise LaunchOverflowError(f"{self.kernel}: argument '{param.name}' is {value}, "
                                          f"which does not fit in 64 bits") from None
            return _INTS[t.name, param.specialize and value % 16 == 0]
        if cls is float or isinstance(value, (float, np.floating)):
            return _FLOAT
        if cls is TensorDescriptor and type(value.base) is Array:
            # sizes and strides divisible by 16 are specialised as kernel ints are: rows then
            # start 16-byte aligned and bounds masks hold in runs of 16 (vector access, and
            # copies of whole boxes by descriptor)
            return ArgSpec(ArgKind.DESCRIPTOR, str(PointerType(value.base.element_type)),
                           value.base._aligned and param.specialize,
                           (tuple(value.block_shape), value.padding,
                            tuple(param.specialize and int(s) % 16 == 0
                                  for s in value.shape + value.strides[:-1])))
        raise LaunchArgumentError(f"{self.kernel}: argument '{param.name}' is a {cls.__name__}; "
                                  f"kernel arguments are arrays, ints, floats, bools or constexprs")

    def specialise(self, values: Sequence[Any]) -> tuple[ArgSpec, ...]:
        """One ``ArgSpec`` per parameter for bound argument values (arrays already imported
        as ``Array``s)."""
        specs = []
        for param, value in zip(self.params, values):
            cls = type(value)
            if cls is Array and not param.is_constexpr:          # the common cases, inline
                spec = _POINTERS.get((value._pointer_key, value._aligned and param.specialize))
            elif cls is int and not param.is_constexpr and -2**31 <= value < 2**31 and \
                    (value != 1 or not param.specialize):
                spec = _INTS["i32", param.specialize and value % 16 == 0]
            else:
                spec = None
            specs.append(spec if spec is not None else self.spec_of(param, value))
        return tuple(specs)

    def from_text(self, signature: Mapping[str, str], constexprs: Mapping[str, Any]) -> tuple[ArgSpec, ...]:
        """``ArgSpec``s from ``at.compile``'s strings: ``{"x_ptr": "*fp32", "n": "i32:16"}``
        (``:16`` declares divisibility by 16) and constexpr values (defaults fill in)."""
        unknown = sorted((set(signature) | set(constexprs)) - {p.name for p in self.params})
        if unknown:
            raise CompilationError(f"'{self.kernel}' has no parameter(s) {unknown}")
        specs = []
        for p in self.params:
            if p.name in constexprs:
                specs.append(ArgSpec.constexpr(constexpr_value(self.kernel, p.name, constexprs[p.name])))
            elif p.is_constexpr:
                if p.name not in self._defaults:
                    raise CompilationError(f"constexpr parameter '{p.name}' of '{self.kernel}' "
                                           f"needs a value in constexprs=")
                specs.append(ArgSpec.constexpr(self._defaults[p.name]))
            elif p.name not in signature:
                raise CompilationError(f"parameter '{p.name}' of '{self.kernel}' has no type in "
                                       f"signature= (give e.g. '*fp32' or 'i32')")
            elif str(signature[p.name]).strip().startswith("tensordesc<"):
                specs.append(_descriptor_spec(p.name, str(signature[p.name])))
            else:
                text, _, divisibility = str(signature[p.name]).partition(":")
                t = parse_signature_type(text)
                if divisibility and int(divisibility) % 16:
                    raise CompilationError(f"'{p.name}': only ':16' divisibility is specialised, "
                                           f"got ':{divisibility}'")
                specs.append(ArgSpec.runtime(t, bool(divisibility)))
        return tuple(specs)

    def compile_inputs(self, specs: Sequence[ArgSpec]) -> Specialization:
        """What the compiler takes, from one ``ArgSpec`` per parameter."""
        arg_types: dict[str, Type] = {}
        arg_attrs: dict[str, dict] = {}
        constexprs: dict[str, Any] = {}
        runtime = []
        leaves: list[tuple[str, Type, bool]] = []    # descriptors' leaves, after the params
        for p, spec in zip(self.params, specs):
            if spec.kind is ArgKind.CONSTEXPR:
                constexprs[p.name] = spec.value
                continue
            if spec.kind is ArgKind.DESCRIPTOR:
                block_shape, padding, divisible16 = spec.value
                param = constexprs[p.name] = DescriptorParam(spec.type_text, block_shape, padding)
                names = leaf_names(p.name, param.rank)
                if spec.divisible_by_16:
                    arg_attrs[names[0]] = {"divisibility": 16}
                for name, divisible in zip(names[1:], divisible16):
                    if divisible:
                        arg_attrs[name] = {"divisibility": 16}
                leaves += [(names[0], spec.type, True)] + [(n, i64, False) for n in names[1:]]
                continue
            t = spec.type
            if p.is_const and isinstance(t, PointerType):
                t = PointerType(t.pointee, t.address_space, const=True)
            arg_types[p.name] = t
            if spec.divisible_by_16:
                arg_attrs[p.name] = {"divisibility": 16}
            runtime.append((p.index, t, spec.kind is ArgKind.POINTER))
        for position, (name, t, is_pointer) in enumerate(leaves, start=len(self.params)):
            arg_types[name] = t
            runtime.append((position, t, is_pointer))
        return Specialization(arg_types, constexprs, arg_attrs, tuple(runtime))

    def descriptor_leaves(self, values: Sequence[Any]) -> list[Any]:
        """The run-time values of the descriptor arguments' leaves, in the order
        ``compile_inputs`` gave their positions (after the kernel's own parameters)."""
        out: list[Any] = []
        for p, value in zip(self.params, values):
            if type(value) is TensorDescriptor and not p.is_constexpr:
                out += [value.base, *value.shape, *value.strides[:-1]]
        return out

    # -- the fast path's inline version of the same rule ---------------------------------------
    def fast_key_lines(self, names: Sequence[str], p: str, on_unknown: str) -> list[str]:
        """Python lines computing, for each runtime parameter ``i``, ``{p}k{i}`` (a key that
        determines its ``ArgSpec`` on this device) and ``{p}v{i}`` (its raw launch value), and
        ``{p}o`` (the first foreign array, whose framework may choose the stream).  ``names``
        are the variables holding the arguments.  An argument type without an inline rule
        runs the statements ``on_unknown`` (the general path then decides).  Must agree with
        ``spec_of``; names starting with ``p`` come from ``fast_launch``'s namespace."""
        lines = [f"    {p}o = None"]
        for param in self.params:
            if param.is_constexpr:
                continue
            name, i = names[param.index], param.index
            k, v = f"{p}k{i}", f"{p}v{i}"
            spec = param.specialize
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
                f"        {k} = {int_key} if -2147483648 <= {name} <= 2147483647 else "
                f"{p}int_key({name}, {spec})",
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
                *(f"                {line}" for line in on_unknown.splitlines()),
                f"            {v}, {k} = {p}r({name}, {spec})",
            ]
        return lines

    def constexpr_key(self, name: str, p: str) -> str:
        """The fast key expression of a constexpr argument held in ``name``."""
        return f"{name} if type({name}) is int else {p}cx({name})"


def fast_int_key(value: int, specialize: bool) -> Any:
    """The fast key of an int outside ``i32`` (the inline code handles ``i32``)."""
    if value == 1 and specialize:
        return "c1"
    if not -2**63 <= value < 2**64:
        return None         # no plan has this key: the general path reports the argument
    return (int_type(value).name, specialize and value % 16 == 0)


def fast_constexpr_key(value: Any) -> Any:
    """The fast key of a constexpr that is not an int (typed: ``True`` and ``1`` differ)."""
    return (type(value), getattr(value, "value", value))


def _scalar_int(value: Any, specialize: bool) -> tuple[int, Any]:
    value = int(value)
    if -2**31 <= value < 2**31 and not (value == 1 and specialize):
        return value, "i32:16" if specialize and value % 16 == 0 else "i32"
    return value, fast_int_key(value, specialize)


#: scalar types the inline code does not test: type -> reader(value, specialize) -> (raw, key)
FAST_SCALARS: dict[type, Any] = {
    type(None): lambda v, s: (None, "None"),
    np.bool_: lambda v, s: (bool(v), "i1"),
    **{t: _scalar_int for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64, np.intc, np.uintc, np.longlong,
                                np.ulonglong)},
    **{t: (lambda v, s: (float(v), "f32")) for t in (np.float16, np.float32, np.float64)},
}
