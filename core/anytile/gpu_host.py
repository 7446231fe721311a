"""Host-side plumbing every GPU backend needs: a documented helper of the plugin contract.

Backends import it beside ``anytile.backend`` (``host_array_view`` is the host-memory
counterpart).  Nothing here names a vendor: a backend says which DLPack device type its
devices are (``DLPackDevice.CUDA``, ``DLPackDevice.ROCM``) and writes the driver call.

* foreign device arrays: ``__cuda_array_interface__`` (v2/v3; CuPy on ROCm speaks it too)
  and DLPack producers, seen in place as an ``ImportedArray`` (``import_device_array``),
  the backend device one lives on (``device_of``), and a few-attribute reader for torch-like
  tensors so launches skip the import (``tensor_reader``);
* streams: the current stream of the framework (torch, cupy) an imported array belongs to
  (``framework_stream``), a stream handle from an int or a framework's stream object
  (``stream_handle``);
* launch arguments: one ctypes slot per parameter (``argument_slots``, ``fill_slots``), and
  ``compile_launcher``: a function generated per kernel that packs a launch header and the
  argument values into one prebuilt block with a single ``struct.pack_into`` and calls the
  driver on the kernel's device (made current for the launch when another is) -- the fast
  path behind ``Backend.launcher``;
* ``LoadedGpuKernel``: what a loaded kernel keeps whatever the driver (its launch shape, its
  argument block shared by the threads launching it, the error word of debug builds), which
  a backend's own loaded kernel extends with its driver's handles;
* ``DriverBackend``: the ``Backend`` methods a GPU backend built on a driver object shares
  (memory, copies, launches, foreign arrays).
"""
from __future__ import annotations

import abc
import ctypes
import enum
import struct
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional, Sequence

import numpy as np

from .backend import Availability, Backend, Buffer, DeviceInfo, ImportedArray, numpy_view_of
from .errors import BackendError, LaunchError, device_assert_error
from .ir.types import PointerType, ScalarType, from_numpy, i32, i64, scalar_type
from .runtime.fast_launch import define

__all__ = ["DLPackDevice", "dlpack_device", "import_device_array", "device_of", "tensor_reader",
           "framework_stream", "stream_handle", "STREAM_GETTERS", "SCALAR_CTYPES", "STRUCT_CODES",
           "RecordParameter",
           "scalar_bits", "argument_slots", "fill_slots", "ArgumentBlock", "compile_launcher",
           "LoadedGpuKernel", "ERROR_WORD", "DriverBackend", "hidden_parameters"]


class DLPackDevice(enum.IntEnum):
    """DLPack's device types (``__dlpack_device__()[0]``)."""

    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    VULKAN = 7
    METAL = 8
    VPI = 9
    ROCM = 10
    ROCM_HOST = 11
    CUDA_MANAGED = 13
    ONEAPI = 14


# -- foreign device arrays ---------------------------------------------------------------------
_TYPESTR = {"f2": "f16", "f4": "f32", "f8": "f64", "i1": "i8", "i2": "i16", "i4": "i32",
            "i8": "i64", "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "b1": "i1"}


def dlpack_device(obj: Any) -> Optional[tuple[int, int]]:
    """``obj.__dlpack_device__()`` as (device type, index), or ``None``."""
    locate = getattr(obj, "__dlpack_device__", None)
    if locate is None:
        return None
    try:
        kind, index = locate()
        return int(kind), int(index)
    except Exception:  # noqa: BLE001 -- a foreign object's protocol failing means "not ours"
        return None


def device_of(obj: Any, devices: Sequence[DeviceInfo], device_type: int) -> Optional[DeviceInfo]:
    """The device of ``devices`` (indexed as the driver counts them) holding the foreign
    array ``obj``, when DLPack says it lives on a ``device_type`` device."""
    located = dlpack_device(obj)
    if located is None or located[0] != device_type:
        return None
    for info in devices:
        if info.index == located[1]:
            return info
    return None


def import_device_array(obj: Any, device: DeviceInfo, device_type: int) -> Optional[ImportedArray]:
    """Zero-copy view of a foreign array on ``device`` (``__cuda_array_interface__`` or a
    DLPack producer of ``device_type``), or ``None``.  Torch-like tensors
    (``__dlpack_device__`` + ``data_ptr``) take the fast path: torch's
    ``__cuda_array_interface__`` costs tens of microseconds a launch."""
    located = dlpack_device(obj)
    if located is not None and hasattr(obj, "data_ptr"):
        if located != (device_type, device.index):
            return None
        return _from_tensor(obj, device)
    try:
        interface = getattr(obj, "__cuda_array_interface__", None)
    except (TypeError, ValueError, RuntimeError):  # torch refuses it for bfloat16
        interface = None
    if interface is not None:
        return _from_array_interface(obj, interface, device)
    if located is not None and hasattr(obj, "__dlpack__"):
        if located != (device_type, device.index):
            return None
        return _from_tensor(obj, device)
    return None


def _from_array_interface(obj: Any, cai: dict, device: DeviceInfo) -> Optional[ImportedArray]:
    name = _TYPESTR.get(cai["typestr"][1:])
    if name is None:
        return None
    dtype = scalar_type(name)
    shape = tuple(int(s) for s in cai["shape"])
    address = int(cai["data"][0])
    itemsize = dtype.nbytes
    strides_bytes = cai.get("strides")
    if strides_bytes is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(s, 1)
        strides = list(reversed(strides))
    else:
        if any(s % itemsize for s in strides_bytes):
            return None
        strides = [int(s) // itemsize for s in strides_bytes]
    return _imported(obj, address, shape, tuple(strides), dtype, device)


def _imported(obj: Any, address: int, shape: tuple[int, ...], strides: tuple[int, ...],
              dtype: ScalarType, device: DeviceInfo) -> ImportedArray:
    """The foreign array ``obj`` whose element 0 is at ``address``, as an ``ImportedArray``
    whose buffer is exactly the bytes its elements occupy (negative strides included):
    checked mode gives a kernel that span as the argument's memory."""
    if all(shape):
        low = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + 1
    else:                                   # no elements: no memory
        low = high = 0
    start = address + low * dtype.nbytes
    buf = Buffer(device, (high - low) * dtype.nbytes, start, start, owner=obj)
    return ImportedArray(buf, -low * dtype.nbytes, shape, strides, dtype)


_FOREIGN_DTYPES: dict[Any, Any] = {}   # a framework's dtype object -> ScalarType (or None)


def _foreign_dtype(framework_dtype: Any) -> Optional[ScalarType]:
    if isinstance(getattr(framework_dtype, "ir", None), ScalarType):   # an anytile tl.dtype
        return framework_dtype.ir
    try:
        return _FOREIGN_DTYPES[framework_dtype]
    except KeyError:
        pass
    except TypeError:  # unhashable dtype object
        return None
    text = str(framework_dtype).replace("torch.", "")
    try:
        found: Any = from_numpy(np.dtype(text))
    except TypeError:
        from .ir.types import bf16, f8e4m3, f8e5m2
        found = {"bfloat16": bf16, "float8_e4m3fn": f8e4m3, "float8_e5m2": f8e5m2}.get(text)
    _FOREIGN_DTYPES[framework_dtype] = found
    return found


def _from_tensor(obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
    """A DLPack producer read through torch-like attributes (``data_ptr``, ``stride``)."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "stride") and hasattr(obj, "dtype"):
        dtype = _foreign_dtype(obj.dtype)
        if dtype is None:
            return None
        shape = tuple(int(s) for s in obj.shape)
        strides = tuple(int(s) for s in obj.stride())
        return _imported(obj, int(obj.data_ptr()), shape, strides, dtype, device)
    return None


def tensor_reader(cls: type) -> Optional[Callable[[Any], tuple[int, tuple]]]:
    """A ``Backend.foreign_reader`` for torch-like tensors (``data_ptr()``, ``get_device()``
    -1 off the GPU, ``dtype``, ``__dlpack_device__``): three cheap reads instead of an
    import per launch; ``None`` for other types."""
    if not all(hasattr(cls, a) for a in ("data_ptr", "get_device", "dtype", "__dlpack_device__")):
        return None

    def read(obj: Any) -> tuple[int, tuple]:
        address = obj.data_ptr()
        return address, (obj.dtype, obj.get_device(), not address & 15)
    return read


# -- streams -----------------------------------------------------------------------------------
#: a framework's tensor type -> function(device index) -> its current raw stream handle
STREAM_GETTERS: dict[type, Any] = {}


def framework_stream(owner: Any, device_index: int) -> int:
    """The current stream on ``device_index`` of the framework ``owner`` (an imported array)
    belongs to; 0 for unknown frameworks.  Never imports a framework the user has not
    (``owner`` exists, so its module is loaded); the getter is cached per type."""
    cls = type(owner)
    getter = STREAM_GETTERS.get(cls)
    if getter is None:
        getter = STREAM_GETTERS[cls] = _stream_getter(cls.__module__.split(".")[0])
    return int(getter(device_index))


def _stream_getter(framework: str) -> Any:
    module = sys.modules.get(framework)
    if framework == "torch" and module is not None:
        raw = getattr(getattr(module, "_C", None), "_cuda_getCurrentRawStream", None)
        if raw is not None:       # torch's GPU streams, CUDA or ROCm alike
            return raw
        return lambda index: module.cuda.current_stream(index).cuda_stream
    if framework == "cupy" and module is not None:
        return lambda index: _cupy_stream(module, index)
    return lambda index: 0


def _cupy_stream(cupy: Any, index: int) -> int:
    """CuPy's current stream on device ``index`` (CuPy keeps one per device)."""
    try:
        return cupy.cuda.get_current_stream(index).ptr
    except TypeError:                   # an old CuPy: the current device's only
        return cupy.cuda.get_current_stream().ptr


def stream_handle(stream: Any) -> int:
    """A stream handle from an int, a torch/cupy stream or a driver stream object."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise BackendError(f"cannot use {stream!r} as a GPU stream (pass an int handle or a "
                           f"torch/cupy stream)") from None


# -- launch arguments --------------------------------------------------------------------------
#: IR scalar type -> the ctypes type of its kernel parameter (f16/bf16 travel as their bits)
SCALAR_CTYPES = {"i1": ctypes.c_int32, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
                 "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u8": ctypes.c_uint8,
                 "u16": ctypes.c_uint16, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
                 "f32": ctypes.c_float, "f64": ctypes.c_double, "f16": ctypes.c_uint16,
                 "bf16": ctypes.c_uint16}
#: ctypes type of a parameter -> its ``struct`` code (16-bit floats have none: general path)
STRUCT_CODES = {ctypes.c_int8: "b", ctypes.c_int16: "h", ctypes.c_int32: "i",
                ctypes.c_int64: "q", ctypes.c_uint8: "B", ctypes.c_uint64: "Q",
                ctypes.c_uint32: "I", ctypes.c_float: "f", ctypes.c_double: "d"}


def scalar_bits(type_name: str, value: Any) -> Any:
    """A Python scalar as its parameter slot holds it (bools as ints, 16-bit floats as bits)."""
    if type_name == "i1":
        return int(bool(value))
    if type_name in ("f16", "bf16"):
        import ml_dtypes
        dt = np.float16 if type_name == "f16" else ml_dtypes.bfloat16
        return int(np.array(value, dtype=dt).view(np.uint16))
    if type_name in ("f32", "f64"):
        return float(value)
    return int(value)


@dataclass(frozen=True)
class RecordParameter:
    """A kernel parameter of ``nbytes`` raw bytes that the launcher computes from other
    arguments (``LoadedGpuKernel.computed``): a descriptor the host makes for each launch."""

    nbytes: int


def argument_slots(signature: Sequence[tuple[str, Any]]) -> tuple[list, list, Any]:
    """(one ctypes scalar (or byte array) per parameter, which are pointers, the array of
    their addresses the driver reads) for a kernel's ``signature``."""
    slots, is_pointer = [], []
    for _, t in signature:
        if isinstance(t, PointerType):
            slots.append(ctypes.c_uint64(0))
            is_pointer.append(True)
        elif isinstance(t, RecordParameter):
            slots.append((ctypes.c_uint8 * t.nbytes)())
            is_pointer.append(False)
        else:
            slots.append(SCALAR_CTYPES[t.name]())
            is_pointer.append(False)
    params = (ctypes.c_void_p * max(1, len(slots)))(*[ctypes.addressof(s) for s in slots])
    return slots, is_pointer, params


def fill_slots(slots: list, is_pointer: list, args: Sequence[Any], error: str) -> Any:
    """Write the launch's ``KernelArg`` values into ``slots``; returns the owner of the first
    imported pointer argument (for its framework's stream).  ``LaunchError(error)`` when an
    argument has no device address or does not fit its slot."""
    owner = None
    try:
        for slot, pointer, arg in zip(slots, is_pointer, args):
            value = arg.value
            if pointer:
                buf = value.buffer
                slot.value = buf.address + value.offset
                if owner is None:
                    owner = buf.owner
            elif type(value) is int:
                slot.value = value
            else:
                slot.value = scalar_bits(arg.type.name, value)
    except TypeError:
        raise LaunchError(error) from None
    return owner


@dataclass
class ArgumentBlock:
    """A prebuilt launch block: a header of ``header_format`` (the driver's launch
    configuration, possibly empty) then each parameter at its C alignment.  ``params`` holds
    the parameters' addresses; ``pack(block, 0, *header, *values)`` writes it all."""

    format: str
    block: Any
    address: int
    params: Any

    @staticmethod
    def build(header_format: str, codes: Sequence[str]) -> "ArgumentBlock":
        fmt = "=" + header_format.lstrip("=")
        size = header_size = struct.calcsize(fmt)
        offsets = []
        for code in codes:
            width = struct.calcsize("=" + code)
            pad = -size % width
            fmt += "x" * pad
            size += pad
            offsets.append(size)
            fmt += code
            size += width
        block = ctypes.create_string_buffer(max(size, header_size + 8))
        base = ctypes.addressof(block)
        params = (ctypes.c_void_p * max(1, len(codes)))(*[base + o for o in offsets])
        return ArgumentBlock(fmt, block, base, params)


def compile_launcher(name: str, count: int, header: str, call: str,
                     namespace: dict[str, Any], device_index: int,
                     computed: Sequence[str] = ()) -> Callable[..., None]:
    """A generated ``run(gx, gy, gz, stream, owner, v0, ...)`` for ``count`` raw argument
    values (``Backend.launcher``'s contract): resolves the stream (given, the owner's
    framework's current stream on ``device_index``, else 0), then under ``namespace["_lock"]``
    packs ``header`` (Python expressions over ``gx, gy, gz, stream``) and the values with
    ``namespace["_pack"]`` into ``namespace["_block"]`` and evaluates ``call`` -- directly when
    ``namespace["_here"]()`` says the kernel's device is current in this thread, else as
    ``namespace["_elsewhere"](lambda: call)``, which makes it current for the call and
    restores the caller's device after.  Without ``_here`` (a driver with one device, where
    the check would cost more than it saves) ``call`` runs directly and only a result equal
    to ``namespace["_no_context"]`` (no device current in this thread) runs it again through
    ``_elsewhere``.  A non-zero result goes to
    ``namespace["_failed"](result, grid)``; a value that does not pack calls
    ``namespace["_bad_argument"]()``.  ``computed``: expressions over ``v0 ...`` (and names
    in ``namespace``) packed after the values, for parameters the launcher computes
    (``LoadedGpuKernel.computed``).  The source is generated once per kernel so a launch
    costs one Python call."""
    names = [f"v{i}" for i in range(count)]
    packed = ", ".join(([header] if header else []) + names + list(computed))
    src = "\n".join([
        f"def run(gx, gy, gz, stream, owner{''.join(', ' + n for n in names)}):",
        "    if stream is None:",
        "        if owner is None:",
        "            stream = 0",
        "        else:",
        "            get = _getters.get(type(owner))",
        "            stream = get(_index) if get is not None else _framework_stream(owner, _index)",
        "    elif type(stream) is not int:",
        "        stream = _stream_handle(stream)",
        # one argument block per kernel: threads take turns (ctypes lets go of the GIL while
        # the driver reads it)
        "    with _lock:",
        "        try:",
        f"            _pack(_block, 0{', ' + packed if packed else ''})",
        "        except (struct.error, TypeError, OverflowError):",
        "            _bad_argument()",
        *(["        if _here():",
            f"            result = {call}",
            "        else:",
            f"            result = _elsewhere(lambda: {call})"] if "_here" in namespace else
          [f"        result = {call}",
           "        if result == _no_context:",
           f"            result = _elsewhere(lambda: {call})"]),
        "        if result:",
        "            _failed(result, (gx, gy, gz))",
        ""])
    scope = dict(namespace)
    scope.update({"_getters": STREAM_GETTERS, "_index": device_index, "struct": struct,
                  "_framework_stream": framework_stream, "_stream_handle": stream_handle})
    return define(src, "run", scope, f"<launcher of {name}>")


#: the hidden last parameter of a debug build with ``device_assert``s: the error word
ERROR_WORD = ("error word", PointerType(i32))


def hidden_parameters(spans: Optional[Sequence[int]], checks: Optional[list]) -> list:
    """The parameters a debug build takes after its own: the ``(lo, size)`` of each pointer
    parameter in ``spans`` (checked mode, ``anytile.codegen.bounds_checks``), then the error
    word when it has ``checks``."""
    spanned = [(f"span {i} {part}", i64) for i in (spans or ()) for part in ("lo", "size")]
    return spanned + ([ERROR_WORD] if checks else [])


def span_arguments(args: Sequence[Any], spans: Sequence[int]) -> list:
    """The ``KernelArg``s giving each pointer argument in ``spans`` its memory: the address
    and size of its buffer (an allocation, or a foreign array's own elements)."""
    from .backend import KernelArg
    out = []
    for i in spans:
        buffer = args[i].value.buffer
        out += [KernelArg(i64, int(buffer.address or 0)), KernelArg(i64, int(buffer.nbytes))]
    return out


@dataclass(eq=False)
class LoadedGpuKernel:
    """A loaded kernel's launch state, the same for every GPU driver: the device it runs on,
    its name, dynamic shared memory and threads a program, the argument block (one ctypes
    slot per parameter and the array of their addresses the driver reads) shared by the
    threads that launch it (hold ``lock``), and for debug builds the ``device_assert``s
    (``checks``: message, file, line) and the device address of their error word."""

    device_index: int
    name: str
    shared_bytes: int
    threads: int
    slots: list = field(default_factory=list)
    is_pointer: list = field(default_factory=list)
    params: Any = None
    params_address: int = 0
    lock: Any = field(default_factory=threading.Lock)
    checks: list = field(default_factory=list)
    error_word: int = 0
    #: checked mode: the pointer parameters whose memory follows the parameters
    spans: list = field(default_factory=list)
    #: the last parameters, computed by the launcher: ``(make, sources)`` each, its bytes
    #: ``make(*raw values of the arguments at the indices sources)`` (``RecordParameter``)
    computed: list = field(default_factory=list)
    #: what the device memory is called in error messages
    memory_name: ClassVar[str] = "GPU memory"

    @classmethod
    def from_signature(cls, signature: Sequence[tuple[str, Any]], **fields: Any) -> Any:
        """An instance with the argument block of ``signature`` (``fields``: the rest)."""
        slots, is_pointer, params = argument_slots(signature)
        return cls(slots=slots, is_pointer=is_pointer, params=params,
                   params_address=ctypes.addressof(params), **fields)

    def attach_checks(self, driver: Any, checks: Optional[list], spans: Optional[list]) -> None:
        """Arm a debug build: ``spans`` (checked mode's pointer parameters, whose memory the
        launch passes after the parameters) and ``checks`` (its ``device_assert``s), reported
        through a zeroed error word allocated here with ``driver`` (``alloc``, ``copy_htod``)
        and passed as the last parameter (``ERROR_WORD``)."""
        self.spans = list(spans or [])
        if not checks:
            return
        address = driver.alloc(self.device_index, 4)
        zero = ctypes.c_int32(0)   # kept alive until the copy returns
        driver.copy_htod(self.device_index, address, ctypes.addressof(zero), 4)
        self.checks = list(checks)
        self.error_word = address
        self.slots[-1].value = address

    @property
    def bad_argument_message(self) -> str:
        return (f"kernel '{self.name}': an argument is not in {self.memory_name} or does not "
                f"fit its parameter type")

    def bad_argument(self) -> None:
        raise LaunchError(self.bad_argument_message)

    def fill(self, args: Sequence[Any], stream: Optional[int]) -> int:
        """Write the launch's ``KernelArg`` values into the argument block (hold ``lock``);
        returns the stream: ``stream``, else the current stream of the framework (torch,
        cupy) owning the first imported array, else 0."""
        if self.spans:
            args = list(args) + span_arguments(args, self.spans)
        owner = fill_slots(self.slots, self.is_pointer, args, self.bad_argument_message)
        for slot, (make, sources) in zip(self.slots[len(self.slots) - len(self.computed):],
                                         self.computed):
            raw = [args[i].value.buffer.address + args[i].value.offset if self.is_pointer[i]
                   else args[i].value for i in sources]
            ctypes.memmove(slot, make(*raw), len(slot))
        if stream is None:
            stream = 0 if owner is None else framework_stream(owner, self.device_index)
        return stream

    def computed_expressions(self, namespace: dict) -> list[str]:
        """``compile_launcher``'s ``computed`` for this kernel, adding its makers to
        ``namespace``."""
        out = []
        for j, (make, sources) in enumerate(self.computed):
            namespace[f"_make{j}"] = make
            out.append(f"_make{j}({', '.join(f'v{i}' for i in sources)})")
        return out

    def raw_codes(self) -> Optional[list[str]]:
        """The ``struct`` code of each parameter for ``compile_launcher``, or ``None`` when
        the raw path does not apply (a debug build, or a parameter without a code)."""
        if self.checks or self.spans:   # debug builds: spans, and an error word to read
            return None
        codes = []
        for pointer, slot in zip(self.is_pointer, self.slots):
            code = "Q" if pointer else f"{len(slot)}s" if isinstance(slot, ctypes.Array) \
                else STRUCT_CODES.get(type(slot))
            if code is None:
                return None
            codes.append(code)
        return codes

    def check_error_word(self, read: Callable[[Any], None], write: Callable[[Any], None]) -> None:
        """After a debug build's launch has finished: ``read(host_word)`` copies the error
        word into a ``c_int32``; a non-zero word is cleared (``write(zero)``) and raised as
        ``DeviceAssertError`` for the assert it numbers."""
        word = ctypes.c_int32(0)
        read(word)
        if word.value:
            write(ctypes.c_int32(0))
            raise device_assert_error(*self.checks[word.value - 1])


class DriverBackend(Backend):
    """What a GPU backend built on a driver object shares: memory, copies, launches and
    foreign arrays.  A subclass sets ``dlpack_device_type`` (its arrays' DLPack device type)
    and returns its driver from ``gpu_driver()``: ``availability_error() -> str | None``,
    ``device_count()``, ``properties(index) -> dict``, ``alloc(index, nbytes) -> address``,
    ``free(index, address)``, ``copy_htod(index, address, host_address, nbytes)``,
    ``copy_dtoh(index, host_address, address, nbytes)``, ``synchronize(index)`` and optionally
    ``copy_dtod(dst_index, dst_address, src_index, src_address, nbytes)``; each call makes
    its device current and the caller's current again after (torch's, say); its
    loaded kernels have ``launch(grid, args, stream)`` and ``raw_launcher()``."""

    host_memory = False
    dlpack_device_type: ClassVar[int] = 0

    def __init__(self) -> None:
        self._devices: Optional[list[DeviceInfo]] = None

    @abc.abstractmethod
    def gpu_driver(self) -> Any:
        """The driver object (see the class docstring)."""

    def availability(self) -> Availability:
        error = self.gpu_driver().availability_error()
        return Availability(False, error) if error else Availability(True)

    def devices(self) -> list[DeviceInfo]:
        """``<device_prefix>:N`` for each device the driver counts (read once)."""
        if self._devices is None:
            drv = self.gpu_driver()
            if drv.availability_error():
                return []
            infos = []
            for index in range(drv.device_count()):
                props = drv.properties(index)
                infos.append(DeviceInfo(f"{self.device_prefix}:{index}", index,
                                        self.device_description(props), tuple(sorted(props.items()))))
            self._devices = infos
        return self._devices

    def device_description(self, props: dict[str, Any]) -> str:
        """What ``anytile backends`` says a device is (its driver's ``properties``)."""
        return str(props["name"])

    def launch(self, loaded: Any, grid: tuple[int, int, int], args: Sequence[Any],
               device: DeviceInfo, stream: Any = None) -> None:
        loaded.launch(grid, args, None if stream is None else stream_handle(stream))

    def launcher(self, loaded: Any, device: DeviceInfo) -> Optional[Callable[..., None]]:
        """The driver's launch through ``ctypes`` (the loaded kernel's ``raw_launcher``)."""
        return loaded.raw_launcher()

    def foreign_reader(self, cls: type) -> Optional[Callable[[Any], tuple[Any, Any]]]:
        """Torch-like tensors (``data_ptr()``, ``get_device()`` -1 off the GPU, ``dtype``,
        ``__dlpack_device__``): three cheap reads instead of an import per launch."""
        return tensor_reader(cls)

    def synchronize(self, device: DeviceInfo) -> None:
        self.gpu_driver().synchronize(device.index)

    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        address = self.gpu_driver().alloc(device.index, nbytes)
        return Buffer(device, nbytes, address, address)

    def free(self, buffer: Buffer) -> None:
        self.gpu_driver().free(buffer.device.index, buffer.address)

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        view = numpy_view_of(host)
        self.gpu_driver().copy_htod(buffer.device.index, buffer.address + offset, view.ctypes.data,
                                    view.nbytes)

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        if not host.flags.c_contiguous:
            raise BackendError("copy_to_host needs a C-contiguous destination")
        view = host.reshape(-1).view(np.uint8)
        self.gpu_driver().copy_dtoh(buffer.device.index, view.ctypes.data, buffer.address + offset,
                                    view.nbytes)

    def copy_between(self, dst: Buffer, dst_offset: int, src: Buffer, src_offset: int,
                     nbytes: int) -> bool:
        """Device-to-device copies through the driver's ``copy_dtod(dst_index, dst_address,
        src_index, src_address, nbytes)`` (peer to peer between two GPUs where they allow it);
        ``False`` for a driver without one."""
        copy = getattr(self.gpu_driver(), "copy_dtod", None)
        if copy is None or dst.address is None or src.address is None:
            return False
        if nbytes:
            copy(dst.device.index, dst.address + dst_offset, src.device.index,
                 src.address + src_offset, nbytes)
        return True

    def device_of_foreign(self, obj: Any) -> Optional[DeviceInfo]:
        """This backend's device holding a GPU tensor of torch, CuPy or any DLPack producer."""
        return device_of(obj, self.devices(), self.dlpack_device_type)

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """Zero-copy view of a device array (``__cuda_array_interface__`` or DLPack of this
        backend's device type; ``import_device_array``)."""
        return import_device_array(obj, device, self.dlpack_device_type)
