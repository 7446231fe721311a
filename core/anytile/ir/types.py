"""Types of anytile's tile IR.

Every IR value has one of three types:

* ``ScalarType``  -- one number: ``i1 i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64`` and the
  8-bit floats ``f8e4m3`` (OCP e4m3fn: bias 7, no infinities, NaN = S.1111.111, max 448),
  ``f8e5m2`` (IEEE-style: bias 15, infinities, max 57344) and ``f8e4b15`` (Triton's
  float8e4b15: e4m3fn's layout with bias 15, so max 1.75; conversions to it saturate);
* ``PointerType`` -- one address of global memory holding elements of a scalar type;
* ``TileType``    -- a statically shaped block of scalars or pointers, optionally annotated
  with a backend layout (only after a backend's layout stage; the device-independent IR
  never carries one).

Types are immutable and hashable; compare them with ``==``.  Their text form is the one the
printer writes and the parser reads: ``f32``, ``ptr<f16>``, ``tile<64x32xf32>``,
``tile<128xptr<i8>>``, and with a layout ``tile<128xf32, #blocked<...>>``.

Code generators extend the text form without the IR knowing them: a layout class registers
how its text ``#name<...>`` parses (``register_layout_syntax``), a dialect's own types (the GPU
dialect's ``shared<...>`` buffers) how theirs does (``register_type_syntax``), when their
module is imported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Union

import ml_dtypes
import numpy as np

__all__ = [
    "ScalarType", "PointerType", "TileType", "Type", "ElemType",
    "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
    "f8e4m3", "f8e5m2", "f8e4b15", "FLOAT8", "FLOAT8_SATURATING", "float8_codes",
    "float8_values", "round_to_type", "stored_as_code", "numpy_storage", "SCALAR_TYPES",
    "scalar_type", "from_numpy", "elem_type", "shape_of", "with_shape",
    "parse_type", "parse_layout", "register_type_syntax", "register_layout_syntax",
    "split_top_level",
]


@dataclass(frozen=True)
class ScalarType:
    """A scalar element type: ``kind`` is 'int', 'uint' or 'float' (``i1`` is kind 'int')."""

    name: str
    kind: str
    bits: int

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int" and self.bits != 1

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_bool(self) -> bool:
        return self.bits == 1

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype that stores this type (``i1`` is stored as ``bool``)."""
        return _NUMPY[self.name]

    @property
    def fp_mantissa_bits(self) -> int:
        return {"f8e4m3": 3, "f8e5m2": 2, "f8e4b15": 3, "f16": 10, "bf16": 7, "f32": 23,
                "f64": 52}[self.name]

    @property
    def is_float8(self) -> bool:
        return self.name in FLOAT8

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


@dataclass(frozen=True)
class PointerType:
    """An address of global memory whose elements are ``pointee``; ``const`` ones (a kernel
    parameter annotated ``tl.const``) are only read through: no store or atomic takes them,
    and they do not merge with plain pointers."""

    pointee: ScalarType
    address_space: int = 1
    const: bool = False

    @property
    def nbytes(self) -> int:
        return 8

    def __str__(self) -> str:
        return f"ptr<{self.pointee}, const>" if self.const else f"ptr<{self.pointee}>"

    __repr__ = __str__


ElemType = Union[ScalarType, PointerType]


@dataclass(frozen=True)
class TileType:
    """A block of ``shape`` elements of ``elem``.

    ``layout`` is ``None`` in device-independent IR; a backend's layout stage may set it to
    any hashable object whose ``__str__`` is ``#name<...>`` and whose class registered that
    name with ``register_layout_syntax`` (so the text parses back).  A layout with a ``rank``
    attribute fits only tiles of that rank (the verifier checks it); one whose class sets
    ``KEPT_BY_BROADCAST`` fits any shape, so ``broadcast`` may keep it."""

    shape: tuple[int, ...]
    elem: ElemType
    layout: Any = field(default=None, compare=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        lay = f", {self.layout}" if self.layout is not None else ""
        return f"tile<{dims}x{self.elem}{lay}>"

    __repr__ = __str__


Type = Union[ScalarType, PointerType, TileType]

i1 = ScalarType("i1", "int", 1)
i8 = ScalarType("i8", "int", 8)
i16 = ScalarType("i16", "int", 16)
i32 = ScalarType("i32", "int", 32)
i64 = ScalarType("i64", "int", 64)
u8 = ScalarType("u8", "uint", 8)
u16 = ScalarType("u16", "uint", 16)
u32 = ScalarType("u32", "uint", 32)
u64 = ScalarType("u64", "uint", 64)
f16 = ScalarType("f16", "float", 16)
bf16 = ScalarType("bf16", "float", 16)
f32 = ScalarType("f32", "float", 32)
f64 = ScalarType("f64", "float", 64)
f8e4m3 = ScalarType("f8e4m3", "float", 8)
f8e5m2 = ScalarType("f8e5m2", "float", 8)
f8e4b15 = ScalarType("f8e4b15", "float", 8)

#: the 8-bit floats: (exponent bias, smallest normal exponent, largest finite value, has inf)
FLOAT8: dict[str, tuple[int, int, float, bool]] = {
    "f8e4m3": (7, -6, 448.0, False), "f8e5m2": (15, -14, 57344.0, True),
    "f8e4b15": (15, -14, 1.75, False)}

#: float8 formats whose conversions saturate: a value past the largest finite one (infinities
#: too) becomes that one, as Triton's float8e4b15 conversions do; NaN stays NaN
FLOAT8_SATURATING = frozenset({"f8e4b15"})

SCALAR_TYPES: dict[str, ScalarType] = {
    t.name: t for t in (i1, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3,
                        f8e5m2, f8e4b15)
}

_NUMPY: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    # no NumPy float has this format: a record of the one-byte code, which kernels only move
    # and convert (float8_codes, float8_values), so NumPy never reads it as a number
    "f8e4b15": np.dtype([("f8e4b15", np.uint8)]),
}
_FROM_NUMPY = {v: SCALAR_TYPES[k] for k, v in _NUMPY.items()}


def scalar_type(name: str) -> ScalarType:
    """The scalar type called ``name`` (``'f32'``); raises ``KeyError`` for unknown names."""
    return SCALAR_TYPES[name]


def from_numpy(dtype: Any) -> ScalarType:
    """The scalar type stored by NumPy dtype ``dtype``; raises ``TypeError`` if none."""
    try:
        return _FROM_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"NumPy dtype {dtype!r} has no anytile equivalent") from None


def float8_codes(values: Any, t: ScalarType) -> np.ndarray:
    """The codes (``uint8``) of float8 format ``t`` nearest to ``values`` (floats), ties to the
    even code; past the largest finite value: that value (``FLOAT8_SATURATING``), else
    infinity, else NaN.  A NaN keeps its sign bit."""
    bias, emin, largest, has_inf = FLOAT8[t.name]
    m = t.fp_mantissa_bits
    x = np.asarray(values, np.float64)
    a = np.abs(x)
    finite = np.isfinite(a)
    safe = np.where(finite, a, 0.0)
    exp = np.maximum(np.frexp(safe)[1] - 1, emin)   # the binade's exponent, subnormals' at least
    quantum = np.ldexp(1.0, exp - m)
    r = np.round(safe / quantum) * quantum           # exact division; np.round ties to even
    over = (r > largest) | ~finite
    past = largest if t.name in FLOAT8_SATURATING else (np.inf if has_inf else np.nan)
    r = np.where(np.isnan(x), np.nan, np.where(over, past, r))
    ok = np.isfinite(r)
    v = np.where(ok, r, 0.0)
    e = np.maximum(np.frexp(v)[1] - 1, emin)
    normal = v >= 2.0 ** emin
    fraction = np.where(normal, v / np.ldexp(1.0, e) - 1.0, v / 2.0 ** emin)
    code = np.where(normal, (e + bias) << m, 0) + np.rint(fraction * 2 ** m).astype(np.int64)
    code = np.where(np.isinf(r), 0x7C, np.where(np.isnan(r), 0x7E if has_inf else 0x7F, code))
    return (code | (np.signbit(x) << 7)).astype(np.uint8)


def float8_values(codes: Any, t: ScalarType) -> np.ndarray:
    """The values (``float32``, exact) of float8 format ``t``'s ``codes`` (``uint8``, or
    ``t``'s NumPy storage)."""
    bias, emin, _, has_inf = FLOAT8[t.name]
    m = t.fp_mantissa_bits
    c = np.asarray(codes).view(np.uint8).astype(np.int64)
    e, mant = (c >> m) & ((1 << (7 - m)) - 1), c & ((1 << m) - 1)
    v = np.where(e == 0, np.ldexp(mant.astype(np.float64), emin - m),
                 np.ldexp(1.0 + mant / 2.0 ** m, e - bias))
    if has_inf:
        top = (1 << (7 - m)) - 1
        v = np.where(e == top, np.where(mant == 0, np.inf, np.nan), v)
    else:
        v = np.where((c & 0x7F) == 0x7F, np.nan, v)
    return np.where(c & 0x80, -v, v).astype(np.float32)


def stored_as_code(t: Any) -> bool:
    """Whether NumPy holds type ``t`` as its code in a record (a float8 format NumPy lacks)."""
    return isinstance(t, ScalarType) and t.np.names is not None


def numpy_storage(values: Any, t: ScalarType) -> np.ndarray:
    """``values`` (array-like) as NumPy holds type ``t``: ``np.asarray(values, t.np)``, except
    that numbers become the rounded codes of a float8 format NumPy lacks (``f8e4b15``), which
    NumPy would put in its record's byte unrounded."""
    if not stored_as_code(t):
        return np.asarray(values, dtype=t.np)
    arr = np.asarray(values)
    return arr if arr.dtype == t.np else np.asarray(float8_codes(arr, t)).view(t.np)


def round_to_type(value: float, t: ScalarType) -> float:
    """``value`` rounded to the nearest value of float type ``t`` (ties to even), as a Python
    float: what a constant of type ``t`` holds."""
    if stored_as_code(t):
        return float(float8_values(float8_codes(value, t), t)[()])
    return float(np.array(float(value), np.float64).astype(t.np))


def elem_type(t: Type) -> ElemType:
    """The element type of a tile, or the type itself for scalars and pointers."""
    return t.elem if isinstance(t, TileType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    """The shape of a tile type; ``()`` for scalars and pointers."""
    return t.shape if isinstance(t, TileType) else ()


def with_shape(elem: ElemType, shape: tuple[int, ...]) -> Type:
    """``elem`` itself when ``shape`` is ``()``, else a tile of that shape."""
    return TileType(tuple(shape), elem) if shape else elem


_TYPE_SYNTAX: dict[str, Callable[[str], Any]] = {}
_LAYOUT_SYNTAX: dict[str, Callable[[str], Any]] = {}


def register_type_syntax(keyword: str, parse: Callable[[str], Any]) -> None:
    """Make ``parse_type`` read types written ``keyword<...>`` with ``parse(text)`` (given the
    whole text; raises ``ValueError`` when malformed).  For dialects' own types."""
    if keyword in ("ptr", "tile") or keyword in SCALAR_TYPES:
        raise ValueError(f"'{keyword}' is a type of the IR itself")
    _TYPE_SYNTAX[keyword] = parse


def register_layout_syntax(name: str, parse: Callable[[str], Any]) -> None:
    """Make layouts written ``#name<body>`` parse with ``parse(body)`` (which raises
    ``ValueError`` when malformed; ``parse_layout`` reads nested layouts)."""
    _LAYOUT_SYNTAX[name] = parse


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """``text`` split at the ``sep`` characters outside ``<>``, ``[]`` and ``()``, stripped."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<[(":
            depth += 1
        elif c in ">])":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def parse_layout(text: str) -> Any:
    """Parse the text of a layout, ``#name<body>``, with the parser registered for ``name``."""
    text = text.strip()
    name, lt, body = text.partition("<")
    if not (name.startswith("#") and lt and body.endswith(">")):
        raise ValueError(f"malformed layout {text!r}: expected #name<...>")
    parse = _LAYOUT_SYNTAX.get(name[1:])
    if parse is None:
        known = ", ".join("#" + n for n in sorted(_LAYOUT_SYNTAX)) or "none registered"
        raise ValueError(f"unknown layout {name} (known: {known}; a layout's module registers "
                         f"it when imported)")
    return parse(body[:-1])


def parse_type(text: str) -> Type:
    """Parse the text form of a type (the inverse of ``str``), layouts and registered
    dialect types included."""
    text = text.strip()
    if text in SCALAR_TYPES:
        return SCALAR_TYPES[text]
    if text.startswith("ptr<") and text.endswith(">"):
        body, const = text[4:-1], False
        if body.endswith(", const"):
            body, const = body[:-len(", const")], True
        inner = parse_type(body)
        if not isinstance(inner, ScalarType):
            raise ValueError(f"pointer to non-scalar type in {text!r}")
        return PointerType(inner, const=const)
    if text.startswith("tile<") and text.endswith(">"):
        body, *rest = split_top_level(text[5:-1])
        dims: list[int] = []
        while True:
            head, sep, tail = body.partition("x")
            if sep and head.isdigit():
                dims.append(int(head))
                body = tail
            else:
                break
        elem = parse_type(body)
        if isinstance(elem, TileType) or not dims or len(rest) > 1:
            raise ValueError(f"malformed tile type {text!r}")
        return TileType(tuple(dims), elem, parse_layout(rest[0]) if rest else None)
    keyword = text.partition("<")[0]
    if keyword in _TYPE_SYNTAX and text.endswith(">"):
        return _TYPE_SYNTAX[keyword](text)
    raise ValueError(f"unknown type {text!r}")
