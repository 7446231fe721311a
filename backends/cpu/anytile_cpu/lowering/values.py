"""How tile values exist in generated code: buffers, lazy expressions, chunks and points.

A tile is either *materialised* -- a ``TileBuffer``: a row-major stack array of its elements
in compute form (``i1`` as a byte) -- or *lazy*: the op that defines it, evaluated on demand
inside the loop of the op that consumes it (this is how chains of elementwise ops, loads
and broadcasts fuse into one loop and keep intermediates in registers).

Loops walk a tile's shape one ``Point`` at a time: a scalar index per dimension, where at
most one dimension is a *ramp* covering ``width`` consecutive indices (the SIMD lanes).
Evaluating a value at a point gives a ``Chunk``: one value for all lanes (``uniform``), a
contiguous ``ramp`` (lane k = base + k; integers and pointers only: it is what turns
``ptr + arange`` into one vector load), or a general ``vector``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from llvmlite import ir

from anytile.ir import Op, PointerType, ScalarType

__all__ = ["TileBuffer", "Lazy", "TileRef", "Index", "Point", "Chunk", "row_major_strides"]


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


@dataclass(frozen=True)
class TileBuffer:
    """A materialised tile: ``ptr`` to ``prod(shape)`` elements, row-major."""

    ptr: ir.Value
    shape: tuple[int, ...]
    elem: Union[ScalarType, PointerType]

    @property
    def strides(self) -> tuple[int, ...]:
        return row_major_strides(self.shape)


@dataclass(frozen=True)
class Lazy:
    """A tile computed where it is used: ``op``'s result ``index``."""

    op: Op
    index: int = 0


TileRef = Union[TileBuffer, Lazy]


@dataclass(frozen=True)
class Index:
    """The index along one dimension: ``base`` (i64), plus the lane number when ``ramp``."""

    base: ir.Value
    ramp: bool = False


@dataclass(frozen=True)
class Point:
    """A position in a tile: one ``Index`` per dimension; ``width`` lanes (0: one element)."""

    indices: tuple[Index, ...]
    width: int

    @property
    def key(self) -> tuple:
        return tuple((id(i.base), i.ramp) for i in self.indices) + (self.width,)

    @property
    def ramp_dim(self) -> Optional[int]:
        for d, i in enumerate(self.indices):
            if i.ramp:
                return d
        return None


@dataclass(frozen=True)
class Chunk:
    """A value at a point: ``kind`` is 'uniform', 'ramp' or 'vector'."""

    kind: str
    value: ir.Value

    @staticmethod
    def uniform(v: ir.Value) -> "Chunk":
        return Chunk("uniform", v)

    @staticmethod
    def vector(v: ir.Value) -> "Chunk":
        return Chunk("vector", v)

    @staticmethod
    def ramp(base: ir.Value) -> "Chunk":
        return Chunk("ramp", base)
