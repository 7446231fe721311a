"""What generated code computes at once: one *chunk* of a tile (``lanes`` consecutive
elements of a work-item), and the text being written.

A ``Chunk`` is the value of a tile over one chunk, in the cheapest form known:

* ``uniform``: one scalar C expression, the same in every lane;
* ``ramp``: a scalar ``base`` and a constant ``step``, lane ``j`` holding ``base + j*step``
  (indices from ``tl.arange``; pointers, whose step counts bytes: step == element size means
  the chunk is contiguous and loads become ``vloadN``);
* ``vector``: a C expression of an OpenCL vector type.

A ``Point`` says which chunk: the indices along each dimension of the shape being evaluated
and the row-major flat index, each a ``Chunk`` of ``i32``; when it is a tile's own chunk
``k`` (its ``natural`` numel and slot), values kept in private arrays are read directly.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from anytile.ir import ScalarType, i32

from .ctypes import literal, scalar_name, vector_literal, vector_name, wrap_int

__all__ = ["Writer", "Chunk", "Point", "uniform", "ramp", "vector"]


class Writer:
    """Lines of C with indentation, and fresh names."""

    def __init__(self, indent: int = 1) -> None:
        self.lines: list[str] = []
        self.depth = indent
        self._count = 0

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def fresh(self, prefix: str = "t") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """``header { ... }`` (``header`` may be empty for a bare scope)."""
        self.line(f"{header} {{" if header else "{")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self.line("}")

    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Chunk:
    """A tile's value over one chunk (see the module docstring)."""

    kind: str                   # "uniform" | "ramp" | "vector"
    expr: str                   # the scalar (uniform), the base (ramp) or the vector
    type: Any                   # the IR element type
    lanes: int
    step: int = 0               # ramp: lane-to-lane increment (bytes for pointers)
    align: int = 1              # uniform/ramp: a power of 2 known to divide the base
    const: Optional[int] = None  # uniform integer whose value is known
    all_true: Optional[str] = None   # i1: a scalar condition that holds iff every lane is 1

    @property
    def is_uniform(self) -> bool:
        return self.kind == "uniform"

    @property
    def is_ramp(self) -> bool:
        return self.kind == "ramp"

    @property
    def ctype(self) -> str:
        """The C type of the chunk as a vector (the scalar type for one lane)."""
        return vector_name(self.type, self.lanes)

    def lane(self, j: str) -> str:
        """Lane ``j`` (a C expression) of a uniform or ramp chunk, as a scalar."""
        if self.kind == "uniform":
            return self.expr
        if self.kind == "ramp":
            return f"(({scalar_name(self.type)})({self.expr} + ({j}) * {self.step_literal()}))"
        raise ValueError("lane() of a vector chunk needs the vector in memory")

    def step_literal(self) -> str:
        return literal(self.step, self.type)

    def as_vector(self) -> str:
        """The chunk as a C expression of its vector type."""
        if self.kind == "vector" or self.lanes == 1:
            return self.expr if self.kind != "ramp" else self.expr
        if self.kind == "uniform":
            return f"(({self.ctype})({self.expr}))"
        offsets = vector_literal([wrap_int(j * self.step, self.type) for j in range(self.lanes)],
                                 self.type)
        return f"((({self.ctype})({self.expr})) + {offsets})"


def uniform(expr: str, t: Any, lanes: int, align: int = 1, const: Optional[int] = None) -> Chunk:
    return Chunk("uniform", expr, t, lanes, align=align, const=const)


def ramp(base: str, step: int, t: Any, lanes: int, align: int = 1) -> Chunk:
    if lanes == 1 or step == 0:
        return uniform(base, t, lanes, align)
    return Chunk("ramp", base, t, lanes, step=step, align=align)


def vector(expr: str, t: Any, lanes: int, all_true: Optional[str] = None) -> Chunk:
    if lanes == 1:
        return uniform(expr, t, lanes)
    return Chunk("vector", expr, t, lanes, all_true=all_true)


@dataclass(eq=False)
class Point:
    """One chunk of a tile of ``shape``: ``flat`` and ``dims`` are ``i32`` chunks, made on
    demand from each other by ``derive`` (the emitter's index arithmetic); ``natural`` is
    ``(numel, k)`` when this is chunk slot ``k`` of a tile of ``numel`` elements in its own
    layout.  ``memo`` caches the chunks of values evaluated here (valid in this scope only);
    ``bound`` gives chunks to values directly (the arguments of a combine region)."""

    lanes: int
    shape: tuple
    flat_chunk: Optional[Chunk] = None
    dim_chunks: Optional[tuple] = None
    natural: Optional[tuple] = None
    memo: dict = field(default_factory=dict)
    bound: dict = field(default_factory=dict)
    derived: dict = field(default_factory=dict)
    index_math: Optional[Callable[["Point"], None]] = None

    def flat(self) -> Chunk:
        if self.flat_chunk is None:
            self.index_math(self)
        return self.flat_chunk

    def dims(self) -> tuple:
        if self.dim_chunks is None:
            self.index_math(self)
        return self.dim_chunks

    def derive(self, key: Any, make: Callable[[], "Point"]) -> "Point":
        """The point ``make()`` returns, once per ``key`` (broadcasts, permutes, ...)."""
        point = self.derived.get(key)
        if point is None:
            point = self.derived[key] = make()
        return point


def scalar_point() -> Point:
    """Where scalar ops are evaluated: one lane, no indices."""
    zero = uniform("0", i32, 1, align=1 << 30, const=0)
    return Point(1, (), zero, (), None)


def is_int_type(t: Any) -> bool:
    return isinstance(t, ScalarType) and t.is_int and not t.is_bool
