"""Triton's abstract value and type classes, so that ``isinstance`` in a kernel answers as it
does under Triton: ``tl.base_value`` (every kernel value), ``tl.base_type`` (every type),
``tl.tuple`` and ``tl.tuple_type``, ``tl.constexpr_type`` (what ``.type`` of a compile-time
value is) and ``tl.tensor_descriptor_base``.

anytile's kernel values are its own classes and plain Python tuples; these classes hold no
state of their own but name those classes as their (virtual) subclasses."""
from __future__ import annotations

import abc
import builtins
from typing import Any, Iterable, Sequence

from . import semantic
from .block_pointer import block_pointer
from .objects import block_type, constexpr, dtype, dtype_of, tensor, type_of, unwrap
from .tensor_descriptor import tensor_descriptor

__all__ = ["base_value", "base_type", "constexpr_type", "tuple", "tuple_type",
           "tensor_descriptor_base", "type_of_value"]


class base_value(abc.ABC):
    """Any value a kernel handles: tensors, constexprs, tuples, block pointers, descriptors."""


class base_type(abc.ABC):
    """Any type of a kernel value: dtypes, ``block_type``, ``constexpr_type``, ``tuple_type``."""


class tensor_descriptor_base(abc.ABC):
    """Every tensor descriptor (``tl.make_tensor_descriptor``, or a descriptor argument)."""


class tuple(abc.ABC):
    """A kernel's tuple.  Tuples in kernels are Python tuples: ``isinstance(x, tl.tuple)``
    tests for one, and ``tl.tuple(values)`` builds one."""

    def __new__(cls, args: Iterable[Any] = (), type: Any = None) -> Any:  # noqa: A002
        return builtins.tuple(args)


class constexpr_type:
    """The type of a compile-time value (``.type`` of a constexpr), as in Triton.  For a
    number, its other attributes are those of the number's natural dtype (``.scalar``,
    ``.is_int()``), since a number also acts as a scalar of that dtype."""

    def __init__(self, value: Any) -> None:
        self.value = unwrap(value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, constexpr_type) and self.value == other.value

    def __hash__(self) -> int:
        return hash(("constexpr_type", self.value))

    def __repr__(self) -> str:
        return f"constexpr_type[{self.value}]"

    def __getattr__(self, name: str) -> Any:
        if name == "value" or not isinstance(self.value, (bool, int, float)):
            raise AttributeError(f"'constexpr_type' object has no attribute '{name}'")
        return getattr(dtype_of(semantic.literal_type(self.value)), name)


class tuple_type:
    """The type of a tuple in a kernel: the types of its items (``.types``)."""

    def __init__(self, types: Sequence[Any]) -> None:
        self.types = list(types)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, tuple_type) and self.types == other.types

    def __hash__(self) -> int:
        return hash(("tuple_type", builtins.tuple(self.types)))

    def __getitem__(self, index: int) -> Any:
        return self.types[index]

    def __len__(self) -> int:
        return len(self.types)

    def __repr__(self) -> str:
        return f"({', '.join(repr(t) for t in self.types)})"


def type_of_value(value: Any) -> Any:
    """What ``value.type`` is inside a kernel, as in Triton: a tile's ``block_type``, a
    scalar's dtype, ``tuple_type`` of a tuple, ``constexpr_type`` of a compile-time value;
    None for values that have no such type (descriptors, block pointers)."""
    if isinstance(value, tensor):
        return type_of(value)
    v = unwrap(value)
    if isinstance(v, builtins.tuple):
        return tuple_type([type_of_value(item) for item in v])
    if isinstance(v, (bool, int, float, builtins.str, type(None), dtype)):
        return constexpr_type(v)
    return None


for _cls in (tensor, constexpr, builtins.tuple, block_pointer, tensor_descriptor):
    base_value.register(_cls)
for _cls in (dtype, block_type, constexpr_type, tuple_type):
    base_type.register(_cls)
tuple.register(builtins.tuple)
tensor_descriptor_base.register(tensor_descriptor)
del _cls
