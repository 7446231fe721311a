"""``triton.reinterpret``: an array's memory read by kernels as another element type of the
same size, and Triton's dtype spellings (``triton.runtime.jit``)."""
from __future__ import annotations

from typing import Any

__all__ = ["TYPE_CANONICAL", "TensorWrapper", "reinterpret"]


#: Triton's dtype names -> the short names of its signature strings (``tl.str_to_ty`` reads them)
TYPE_CANONICAL = {
    "bool": "i1", "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv",
    "float8e5": "fp8e5", "float8_e5m2": "fp8e5", "float8e4b15": "fp8e4b15",
    "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u1": "i1", "u8": "u8",
    "u16": "u16", "u32": "u32", "u64": "u64", "fp16": "fp16", "bf16": "bf16", "fp32": "fp32",
    "fp64": "fp64", "fp8e4nv": "fp8e4nv", "fp8e5": "fp8e5", "fp8e4b15": "fp8e4b15",
}


class TensorWrapper:
    """An array (``base``: torch, NumPy, anytile) whose memory kernels read as ``dtype``, an
    element type of the same size (``triton.reinterpret``): a kernel receives a pointer to
    ``dtype``; ``.base`` is the array itself."""

    def __init__(self, base: Any, dtype: Any) -> None:
        import numpy as np
        import anytile.language as tl
        if not isinstance(dtype, tl.dtype) or isinstance(dtype, tl.pointer_type):
            raise TypeError(f"reinterpret: expected an element dtype such as tl.uint32, got "
                            f"{dtype!r}")
        size = getattr(base, "element_size", None)
        size = size() if callable(size) else getattr(base, "itemsize", None)
        if size is not None and size * 8 != dtype.primitive_bitwidth:
            raise ValueError(f"reinterpret: {dtype!r} has {dtype.primitive_bitwidth} bits, the "
                             f"array's elements {size * 8}")
        if dtype.ir is None:
            raise TypeError(f"reinterpret: {dtype!r} is a Triton dtype anytile does not support")
        self.base, self.dtype = base, dtype
        self._np = np.dtype(dtype.ir.np)

    data = property(lambda self: self.base)
    device = property(lambda self: self.base.device)
    shape = property(lambda self: self.base.shape)

    def data_ptr(self) -> int:
        return self.base.data_ptr()

    def stride(self, *dim: int) -> Any:
        return self.base.stride(*dim)

    def numel(self) -> int:
        return self.base.numel()

    def element_size(self) -> int:
        return self.dtype.primitive_bitwidth // 8

    def cpu(self) -> "TensorWrapper":
        return TensorWrapper(self.base.cpu(), self.dtype)

    def copy_(self, other: Any) -> "TensorWrapper":
        self.base.copy_(other.base if isinstance(other, TensorWrapper) else other)
        return self

    def clone(self) -> "TensorWrapper":
        return TensorWrapper(self.base.clone(), self.dtype)

    def to(self, device: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.to(device), self.dtype)

    def _retyped(self, interface: dict) -> dict:
        out = dict(interface)
        out["typestr"] = self._np.str
        out.pop("descr", None)
        return out

    @property
    def __array_interface__(self) -> dict:
        import numpy as np
        base = self.base
        if hasattr(base, "detach"):                  # a torch CPU tensor: NumPy's view of it
            base = base.detach().numpy()
        self._host = np.asarray(base)                # kept alive while the interface is used
        return self._retyped(self._host.__array_interface__)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """The host memory as a NumPy array of ``dtype`` (a view: kernels write through it)."""
        import numpy as np
        base = self.base.detach().numpy() if hasattr(self.base, "detach") else self.base
        view = np.asarray(base).view(self._np)
        return view if dtype is None else view.astype(dtype)

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._retyped(self.base.__cuda_array_interface__)

    def __dlpack_device__(self) -> Any:
        return self.base.__dlpack_device__()

    def __repr__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base!r})"


def reinterpret(tensor: Any, dtype: Any) -> Any:
    """``tensor``'s memory read as ``dtype`` by kernels (Triton's ``triton.reinterpret``); the
    array itself when it already has that dtype."""
    base = tensor.base if isinstance(tensor, TensorWrapper) else tensor
    return base if dtype == _dtype_of(base) else TensorWrapper(base, dtype)


def _dtype_of(array: Any) -> Any:
    import anytile.language as tl
    name = str(getattr(array, "dtype", "")).replace("torch.", "")
    return getattr(tl, name, None) if name in TYPE_CANONICAL else None


