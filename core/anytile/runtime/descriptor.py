"""``at.TensorDescriptor``: a strided N-D array and the block shape a kernel moves, passed to a
kernel as one argument (Triton's ``triton.tools.tensor_descriptor.TensorDescriptor``).

Inside the kernel the parameter is a ``tl.tensor_descriptor`` (``desc.load(offsets)``,
``desc.store(offsets, value)``), as if the kernel had called ``tl.make_tensor_descriptor``.
At launch the argument travels as its leaves, after the kernel's own parameters: the base
address, the shape (``i64``) and the strides (``i64``) but the last, which must be 1; the
element type, block shape and padding specialise the compiled code."""
from __future__ import annotations

import operator
from typing import Any, Sequence

from ..errors import LaunchArgumentError, LaunchValueError
from ..language.tensor_descriptor import DescriptorParam, leaf_names  # noqa: F401

__all__ = ["TensorDescriptor", "DescriptorParam", "leaf_names"]


class TensorDescriptor:
    """``TensorDescriptor(base, shape, strides, block_shape, padding="zero")``: ``base`` is an
    array (anytile, NumPy, torch, ...) holding the ``shape`` array with ``strides`` in
    elements (the last 1); ``block_shape`` is what each ``desc.load``/``desc.store`` moves;
    ``padding`` ("zero" or "nan") what a load reads outside the array."""

    def __init__(self, base: Any, shape: Sequence[int], strides: Sequence[int],
                 block_shape: Sequence[int], padding: str = "zero") -> None:
        self.base = base
        self.shape = [_int(s, "shape") for s in shape]
        self.strides = [_int(s, "strides") for s in strides]
        self.block_shape = [_int(s, "block_shape") for s in block_shape]
        self.padding = padding
        rank = len(self.shape)
        if not 1 <= rank <= 5 or len(self.strides) != rank or len(self.block_shape) != rank:
            raise LaunchArgumentError(
                f"TensorDescriptor: shape {self.shape}, strides {self.strides} and block_shape "
                f"{self.block_shape} must have one entry per dimension (1 to 5)")
        if self.strides[-1] != 1:
            raise LaunchValueError(f"TensorDescriptor: the last stride must be 1, got strides "
                                   f"{self.strides}")
        if any(s < 0 for s in self.shape) or any(b < 1 or b & (b - 1) for b in self.block_shape):
            raise LaunchValueError(f"TensorDescriptor: the shape {self.shape} must be "
                                   f"non-negative and the block_shape {self.block_shape} powers "
                                   f"of 2")
        if padding not in ("zero", "nan"):
            raise LaunchValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', got "
                                   f"{padding!r}")

    @classmethod
    def from_tensor(cls, tensor: Any, block_shape: Sequence[int],
                    padding: str = "zero") -> "TensorDescriptor":
        """A descriptor of the whole of ``tensor`` (its own shape and strides)."""
        strides = tensor.stride() if callable(getattr(tensor, "stride", None)) else \
            [s // tensor.itemsize for s in tensor.strides]
        return cls(tensor, list(tensor.shape), list(strides), block_shape, padding)

    def on(self, base: Any) -> "TensorDescriptor":
        """The same descriptor over ``base`` (the launch's ``Array`` for a foreign base)."""
        moved = object.__new__(TensorDescriptor)
        moved.__dict__.update(self.__dict__, base=base)
        return moved

    def __repr__(self) -> str:
        return (f"TensorDescriptor(shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}, padding={self.padding!r})")


def _int(value: Any, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise LaunchArgumentError(f"TensorDescriptor: {what} must hold ints, got "
                                  f"{value!r}") from None
