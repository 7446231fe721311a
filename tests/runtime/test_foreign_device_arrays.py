"""Foreign GPU arrays seen in place (``gpu_host.import_device_array``): the buffer of an
imported array is exactly the memory its elements occupy, whichever protocol it came through
(a torch-like tensor's ``data_ptr``/``stride``, or ``__cuda_array_interface__``), because
checked mode gives a kernel that span as the argument's memory (``span_arguments``).  No GPU
is needed: nothing here reads the memory, so host addresses stand in for device ones."""
import numpy as np
import pytest

from anytile.backend import DeviceInfo, KernelArg, PointerArg
from anytile.gpu_host import DLPackDevice, import_device_array, span_arguments
from anytile.ir.types import PointerType, f32

GPU = DeviceInfo("gpu:0", 0, "a device no test touches")


class TorchLikeTensor:
    """What a torch CUDA tensor offers the import: DLPack's device, ``data_ptr()``,
    ``stride()`` (in elements), ``shape``, ``dtype`` and ``__cuda_array_interface__``."""

    def __init__(self, view: np.ndarray) -> None:
        self._view = view
        self.shape = view.shape
        self.dtype = view.dtype

    def __dlpack_device__(self):
        return (int(DLPackDevice.CUDA), 0)

    def data_ptr(self) -> int:
        return self._view.__array_interface__["data"][0]

    def stride(self):
        return tuple(s // self._view.itemsize for s in self._view.strides)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {**self._view.__array_interface__, "version": 3}


class CudaArrayInterfaceOnly:
    """An array offering ``__cuda_array_interface__`` alone (CuPy, Numba)."""

    def __init__(self, view: np.ndarray) -> None:
        self.__cuda_array_interface__ = {**view.__array_interface__, "version": 3}


BASE = np.zeros(4 * 6 * 5, np.float32)
VIEWS = {
    "contiguous": BASE[:24].reshape(4, 6),
    "transposed": BASE[:24].reshape(4, 6).T,
    "every other row": BASE[:24].reshape(4, 6)[::2],
    "a column": BASE[:24].reshape(4, 6)[:, 3],
    "a scalar": BASE[7:8].reshape(()),
    "3-d, offset": BASE.reshape(4, 6, 5)[1:, 2:, 1:4],
    "empty": BASE[:0],
}


def _element_bytes(view: np.ndarray) -> tuple[int, int]:
    """(first, end) addresses of the bytes ``view``'s elements occupy."""
    if view.size == 0:
        return 0, 0
    start = view.__array_interface__["data"][0]
    offsets = [start + sum(i * s for i, s in zip(index, view.strides))
               for index in np.ndindex(view.shape)]
    return min(offsets), max(offsets) + view.itemsize


@pytest.mark.parametrize("name", VIEWS)
@pytest.mark.parametrize("protocol", [TorchLikeTensor, CudaArrayInterfaceOnly])
def test_an_imported_arrays_span_is_its_elements_memory(protocol, name):
    view = VIEWS[name]
    imported = import_device_array(protocol(view), GPU, DLPackDevice.CUDA)
    assert imported is not None and imported.shape == view.shape
    assert imported.strides == tuple(s // view.itemsize for s in view.strides)
    element0 = view.__array_interface__["data"][0]
    assert imported.buffer.address + imported.offset == element0
    arg = KernelArg(PointerType(f32), PointerArg(imported.buffer, imported.offset))
    lo, size = (a.value for a in span_arguments([arg], [0]))
    first, end = _element_bytes(view)
    if view.size:
        assert (lo, lo + size) == (first, end)
    else:
        assert size == 0


def test_negative_strides_of_an_array_interface_are_spanned_backwards():
    view = BASE[:24].reshape(4, 6)[::-1, ::-2]
    imported = import_device_array(CudaArrayInterfaceOnly(view), GPU, DLPackDevice.CUDA)
    assert imported.strides == (-6, -2)
    first, end = _element_bytes(view)
    assert imported.buffer.address == first and imported.buffer.nbytes == end - first
    assert imported.buffer.address + imported.offset == view.__array_interface__["data"][0]
