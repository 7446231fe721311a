"""``at.Array``: an n-d array in a device's memory, and the functions that make one."""
from __future__ import annotations

import math
import operator
import weakref
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..backend import Buffer, ImportedArray
from ..errors import AnytileError
from ..ir.types import ScalarType, from_numpy, numpy_storage, stored_as_code
from .devices import Device, _device as device_for, device as get_device
from .discovery import discover, generation

__all__ = ["Array", "asarray", "allocate", "empty", "zeros", "full", "empty_like", "zeros_like",
           "to_scalar_type", "import_foreign", "is_array_like", "device_of_foreign_array",
           "foreign_claimants"]

ShapeLike = Union[int, Sequence[int]]


def to_scalar_type(dtype: Any) -> ScalarType:
    """A NumPy dtype (or its name), a ``tl`` dtype or an IR scalar type -> IR scalar type."""
    if isinstance(dtype, ScalarType):
        return dtype
    ir_type = getattr(dtype, "ir", None)            # tl.float32 and friends
    if isinstance(ir_type, ScalarType):
        return ir_type
    try:
        return from_numpy(np.dtype(dtype))
    except TypeError:
        raise TypeError(f"{dtype!r} is not a dtype anytile supports (use a NumPy dtype such as "
                        f"np.float32 or a tl dtype such as tl.bfloat16)") from None


#: the most bytes one array may span: its offsets must fit a signed 64-bit integer
MAX_ARRAY_BYTES = 2**63 - 1


def _normalize_shape(shape: ShapeLike, dtype: ScalarType, what: str) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints whose array of ``dtype`` fits in
    ``MAX_ARRAY_BYTES``; ``what`` (``"at.empty"``...) names the call in errors."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        out = tuple(operator.index(s) for s in dims)
    except TypeError:
        raise TypeError(f"{what}: the shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None
    if any(s < 0 for s in out):
        raise ValueError(f"{what}: negative dimension in shape {out}")
    count = math.prod(out)
    if count * dtype.nbytes > MAX_ARRAY_BYTES:
        raise ValueError(f"{what}: shape {out} of {dtype.np} is {count} elements "
                         f"({count * dtype.nbytes} bytes); an array spans at most 2**63 - 1 bytes")
    return out


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


class Array:
    """An array living in ``device``'s memory.

    ``strides`` are in elements (``stride(i)`` as in torch; ``.strides`` in bytes as in NumPy).
    Arrays made by ``empty``/``asarray`` own their memory and free it when collected; a view
    of another array's memory names that array as ``keep`` (kept alive with the view)."""

    def __init__(self, buffer: Buffer, shape: tuple[int, ...], dtype: ScalarType,
                 device: Device, strides: Optional[tuple[int, ...]] = None, offset: int = 0,
                 owns: bool = False, keep: Optional["Array"] = None) -> None:
        self._buffer = buffer
        self._keep = keep
        self.shape = shape
        self._dtype = dtype
        self.device = device
        self._strides = strides if strides is not None else _contiguous_strides(shape)
        self._offset = offset
        self._pointer_key = "*" + dtype.name   # what a launch's cache key records for it
        base = buffer.address
        # facts the launch fast path reads (an Array's buffer and offset never change)
        self._address = None if base is None else base + offset
        self._owner = buffer.owner
        self._aligned = ((base or 0) + offset) % 16 == 0
        self._nospec_key = device.info.name + self._pointer_key
        self._spec_key = self._nospec_key + (":16" if self._aligned else "")
        if owns:
            weakref.finalize(self, _free, device.backend, buffer)

    # -- properties (NumPy/torch names) ------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self._dtype.np

    @property
    def element_type(self) -> ScalarType:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self._dtype.nbytes

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(s * self.itemsize for s in self._strides)

    def stride(self, dim: Optional[int] = None) -> Any:
        return self._strides if dim is None else self._strides[dim]

    def numel(self) -> int:
        return self.size

    @property
    def buffer(self) -> Buffer:
        return self._buffer

    @property
    def offset(self) -> int:
        """Bytes from the buffer's start to element 0."""
        return self._offset

    def data_ptr(self) -> Optional[int]:
        """The device address of element 0 (``None`` for backends without flat addresses)."""
        base = self._buffer.address
        return None if base is None else base + self._offset

    @property
    def is_contiguous(self) -> bool:
        return self._strides == _contiguous_strides(self.shape)

    # -- copies ----------------------------------------------------------------------------------
    def _span(self) -> tuple[int, int]:
        """(first, last+1) element offsets touched by this view, relative to element 0."""
        if self.size == 0:
            return 0, 0
        lo = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self._strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self._strides))
        return lo, hi + 1

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the contents (waits for queued work on the device)."""
        self.device.backend.synchronize(self.device.info)
        if self.is_contiguous:
            out = np.empty(self.shape, dtype=self.dtype)
            if self.size:
                self.device.backend.copy_to_host(self._buffer, self._offset, out)
            return out
        lo, hi = self._span()
        flat = np.empty(hi - lo, dtype=self.dtype)
        if flat.size:
            self.device.backend.copy_to_host(self._buffer, self._offset + lo * self.itemsize, flat)
        # as_strided rebuilds the array from its interface, whose typestr NumPy cannot read
        # back for ml_dtypes' types ("<f1"): stride over integers of the same size
        raw = flat.view(np.dtype(f"u{self.itemsize}"))
        view = np.lib.stride_tricks.as_strided(
            raw[-lo:] if lo else raw, shape=self.shape, strides=self.strides)
        return view.copy().view(self.dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def copy_from(self, host: Any) -> "Array":
        """Overwrite the contents with ``host`` (a NumPy array or array-like of this shape)."""
        data = np.require(numpy_storage(host, self._dtype), requirements="C")  # keeps 0-d
        if data.shape != self.shape:
            raise ValueError(f"cannot copy an array of shape {data.shape} into one of shape {self.shape}")
        if not self.is_contiguous:
            raise ValueError("copy_from needs a contiguous destination")
        if data.size:
            self.device.backend.copy_to_device(self._buffer, self._offset, data)
        return self

    def to(self, device: Any) -> "Array":
        """This array on ``device`` (itself when it is there already): copied device to
        device where the backend can (two GPUs: peer to peer where they allow it), through
        the host otherwise."""
        return asarray(self, device=device)

    def __repr__(self) -> str:
        return f"anytile.Array(shape={self.shape}, dtype={self._dtype}, device='{self.device}')"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]


def _free(backend: Any, buffer: Buffer) -> None:
    if not buffer.freed:
        buffer.freed = True
        try:
            backend.free(buffer)
        except Exception:
            pass  # freeing at interpreter exit must never raise


def _resolve_device(device: Any) -> Device:
    return get_device(device)


def empty(shape: ShapeLike, dtype: Any = np.float32, device: Any = None) -> Array:
    """An uninitialised array on ``device`` (default: the default device)."""
    return allocate(shape, dtype, device, "at.empty")


def allocate(shape: ShapeLike, dtype: Any, device: Any, what: str) -> Array:
    """An uninitialised array made for ``what`` (``"at.empty"``, a launch's copy of an
    argument), which its errors name."""
    dev = _resolve_device(device)
    st = to_scalar_type(dtype)
    shape_t = _normalize_shape(shape, st, what)
    nbytes = max(1, math.prod(shape_t) * st.nbytes)
    try:
        buf = dev.backend.alloc(dev.info, nbytes)
    except AnytileError:
        raise
    except Exception as exc:    # each backend fails in its own words (MemoryError, OpenCL's)
        raise MemoryError(f"{what}: {dev} could not allocate {nbytes} bytes for shape {shape_t} "
                          f"of {st.np}: {type(exc).__name__}: {exc}") from None
    return Array(buf, shape_t, st, dev, owns=True)


def full(shape: ShapeLike, value: Any, dtype: Any = np.float32, device: Any = None) -> Array:
    """An array of ``shape`` holding ``value`` everywhere."""
    out = allocate(shape, dtype, device, "at.full")
    coded = stored_as_code(out.element_type)    # a float8 format NumPy lacks: copy_from rounds
    return out.copy_from(np.full(out.shape, value, dtype=None if coded else out.dtype))


def zeros(shape: ShapeLike, dtype: Any = np.float32, device: Any = None) -> Array:
    """An array of ``shape`` holding zeros."""
    out = allocate(shape, dtype, device, "at.zeros")
    return out.copy_from(np.zeros(out.shape, dtype=out.dtype))


def _like(a: Any, dtype: Any, device: Any, what: str) -> Array:
    dev = device if device is not None else (a.device if isinstance(a, Array) else None)
    return allocate(tuple(a.shape), dtype if dtype is not None else a.dtype, dev, what)


def empty_like(a: Any, dtype: Any = None, device: Any = None) -> Array:
    """An uninitialised array with ``a``'s shape, dtype and device (each may be overridden)."""
    return _like(a, dtype, device, "at.empty_like")


def zeros_like(a: Any, dtype: Any = None, device: Any = None) -> Array:
    """Zeros with ``a``'s shape, dtype and device (each may be overridden)."""
    out = _like(a, dtype, device, "at.zeros_like")
    return out.copy_from(np.zeros(out.shape, dtype=out.dtype))


def import_foreign(obj: Any, dev: Device) -> Optional[Array]:
    """``obj`` seen in place on ``dev`` through the backend's ``import_array``, or ``None``."""
    imported: Optional[ImportedArray] = dev.backend.import_array(obj, dev.info)
    if imported is None:
        return None
    return Array(imported.buffer, tuple(imported.shape), imported.dtype, dev,
                 tuple(imported.strides), imported.offset)


def asarray(obj: Any, dtype: Any = None, device: Any = None) -> Array:
    """``obj`` (an ``Array``, a NumPy array, anything NumPy or the backend understands) as an
    ``Array`` on ``device``.  No copy is made when the memory can be used in place (host
    backends and NumPy arrays of the right dtype; GPU backends and CUDA arrays)."""
    dev = _resolve_device(device if device is not None else
                          (obj.device if isinstance(obj, Array) else None))
    want = to_scalar_type(dtype) if dtype is not None else None
    if isinstance(obj, Array):
        if obj.device == dev and (want is None or want == obj.element_type):
            return obj
        if want is None or want == obj.element_type:
            moved = _copy_across(obj, dev)
            if moved is not None:
                return moved
        obj = obj.numpy()
    if want is None or _foreign_dtype_matches(obj, want):
        seen = import_foreign(obj, dev)
        if seen is not None:
            return seen
        moved = _foreign_across(obj, dev)       # a torch tensor on another GPU, say
        if moved is not None:
            return moved
    host = np.asarray(obj)
    if want is not None:
        host = numpy_storage(host, want)
    to_scalar_type(host.dtype)  # a clear error for object/complex/str arrays
    out = allocate(host.shape, host.dtype, dev, "at.asarray")
    return out.copy_from(host)


def _copy_across(a: Array, dev: Device) -> Optional[Array]:
    """A copy of ``a`` on ``dev`` made by its backend device to device (``copy_between``:
    peer to peer between two GPUs where they allow it), or ``None`` when it cannot."""
    if a.device.backend is not dev.backend or not a.is_contiguous:
        return None
    out = empty(a.shape, a._dtype, dev)
    if dev.backend.copy_between(out._buffer, 0, a._buffer, a._offset, a.nbytes):
        return out
    return None


def _foreign_across(obj: Any, dev: Device) -> Optional[Array]:
    """A foreign array living on another device of ``dev``'s backend, copied to ``dev``."""
    where = device_of_foreign_array(obj)
    if where is None or where == dev or where.backend is not dev.backend:
        return None
    seen = import_foreign(obj, where)
    return None if seen is None else _copy_across(seen, dev)


def _foreign_dtype_matches(obj: Any, want: ScalarType) -> bool:
    dtype = getattr(obj, "dtype", None)
    try:
        return dtype is not None and to_scalar_type(dtype) == want
    except TypeError:
        return False


# -- other frameworks' arrays --------------------------------------------------------------------
def is_array_like(value: Any) -> bool:
    """Whether ``value`` is some framework's array (looked up on the type: on a torch tensor,
    reading ``__cuda_array_interface__`` builds the whole interface)."""
    cls = type(value)
    return cls is np.ndarray or hasattr(cls, "__array_interface__") or \
        hasattr(cls, "__cuda_array_interface__") or hasattr(cls, "__dlpack__") or \
        hasattr(cls, "__array__")


_NOT_FOREIGN = frozenset({Array, int, float, bool})


def device_of_foreign_array(v: Any) -> Optional[Device]:
    """The device a non-host backend claims for the foreign array ``v`` (a torch CUDA tensor
    goes to ``cuda:N``), or ``None``."""
    if type(v) in _NOT_FOREIGN or v is None or \
            isinstance(v, (np.ndarray, np.number, np.bool_, int, float)):
        return None
    if not is_array_like(v):
        return None
    for backend in foreign_claimants():
        info = backend.device_of_foreign(v)
        if info is not None:
            return device_for(backend, info)
    return None


_claimants: tuple = (-1, ())


def foreign_claimants() -> tuple:
    """Usable backends whose memory is not the host's (cached per discovery generation)."""
    global _claimants
    if _claimants[0] != generation():
        found = tuple(r.backend for _, r in sorted(discover().items())
                      if r.backend is not None and not r.backend.host_memory
                      and r.availability.usable)
        _claimants = (generation(), found)
    return _claimants[1]
