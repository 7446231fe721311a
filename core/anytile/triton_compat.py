"""Run a program written for Triton, unmodified, on any anytile device.

    anytile run --as-triton [--device cpu] prog.py [ARGS ...]        # from the shell

    import anytile.triton_compat
    anytile.triton_compat.install(device="cpu")                      # from Python, before
    import triton                                                    # the program's imports

``install()`` puts an import hook first on ``sys.meta_path`` that serves ``import triton``
and its public submodules from anytile.  Only Triton's public names are served, each by its
anytile counterpart (same behaviour, Triton's spelling):

=================================  ===========================================================
``triton``                         ``jit``, ``autotune``, ``heuristics``, ``Config``, ``cdiv``,
                                   ``next_power_of_2``, ``knobs``, ``TritonError``,
                                   ``CompilationError``, ``OutOfResources``, ``__version__``
``triton.language`` (``tl``)       ``anytile.language``, with ``.extra``, ``.extra.cuda``,
                                   ``.extra.hip``, ``.extra.libdevice``, ``.math``,
                                   ``.random``, ``.core``
``triton.testing``                 ``do_bench``, ``do_bench_cudagraph`` (timed as ``do_bench``),
                                   ``assert_close``, ``perf_report``, ``Benchmark``
``triton.runtime``                 ``driver.active``: ``get_active_torch_device()``,
                                   ``get_current_device()``, ``get_current_target()``,
                                   ``utils.get_device_properties(index)``; ``Autotuner``,
                                   ``Heuristics``, ``Config``, ``JITFunction``, ``KernelInterface``,
                                   ``errors.OutOfResources``
``triton.compiler``                ``compile`` (``at.compile``), ``CompiledKernel``,
                                   ``errors.CompilationError``
``triton.tools.tensor_descriptor`` ``TensorDescriptor`` (``at.TensorDescriptor``)
``triton.tools.experimental_descr  ``create_1d/2d_tma_descriptor``, ``TmaDescKernelParam`` (and
iptor``                            ``driver.active.utils.fill_1d/2d_tma_descriptor``): Triton
                                   3.2-3.3's host-filled descriptors, read at launch as
                                   ``at.TensorDescriptor`` arguments (``runtime/host_descriptors``)
``triton.profiler`` (``.viewer``)  ``start``, ``activate``, ``deactivate``, ``scope``,
                                   ``finalize``, ``viewer.parse``/``print_tree``: proton's
                                   API over anytile's launch hooks (``anytile.proton``)
``triton._C.libtriton``            ``nvidia.cublas.CublasLt`` only (Triton's private cuBLAS
                                   binding, the reference of its tutorials 09 and 10), by
                                   torch's matrix products
=================================  ===========================================================

Anything else (the rest of ``triton.tools`` and ``triton._C``, Triton's internal IR) is not
provided: reading it raises ``AttributeError`` (``ImportError`` for a module) whose message
says that anytile does not provide it.  With ``ANYTILE_TRITON_SOURCE``
set to the ``python`` folder of a Triton checkout, a module the hook does not serve is loaded
from that checkout's file when there is one (its own test helpers, such as
``triton._internal_testing``, which then run on anytile).  The device is ``device=`` (the
``--device`` flag), else ``ANYTILE_DEVICE``, else anytile's default device; torch tensors the
program makes on ``get_active_torch_device()`` live on ``cuda:N`` for NVIDIA and AMD devices
and on the CPU for host devices (cpu, interpreter, OpenCL on the CPU).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["install", "uninstall", "run_path", "device_properties", "GPUTarget",
           "NOT_PROVIDED_HINT"]

NOT_PROVIDED_HINT = "anytile serves Triton's public API only; see anytile.triton_compat"


_SERVED: set[str] = set()   # the module names the hook serves (filled by install)


class _Module(types.ModuleType):
    """A stand-in module: the attributes it was given; any other is not provided."""

    def __init__(self, name: str, attrs: dict[str, Any], package: bool = True) -> None:
        super().__init__(name)
        if package:
            self.__path__: list[str] = []      # submodule imports reach the finder
        self.__dict__.update(attrs)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if f"{self.__name__}.{attr}" in _SERVED:     # triton.testing without importing it
            return importlib.import_module(f"{self.__name__}.{attr}")
        raise AttributeError(f"{self.__name__}.{attr} is not provided by anytile "
                           f"({NOT_PROVIDED_HINT})")


# -- the device and what Triton programs ask of it ---------------------------------------------
@dataclass(frozen=True)
class GPUTarget:
    """``driver.active.get_current_target()``: ``backend`` is ``"cuda"``, ``"hip"`` or
    ``"cpu"`` (every host device, OpenCL included), ``arch`` the compute capability as an int
    (``90``), the gfx name (``"gfx942"``) or the host CPU's name, ``warp_size`` threads per
    warp (1 on host devices: a program is one thread there)."""

    backend: str
    arch: Any
    warp_size: int


def _device() -> Any:
    import anytile as at
    return at.default_device()


def _target_of(dev: Any) -> GPUTarget:
    props = dev.properties
    kind = dev.backend.triton_backend or "cpu"
    if kind == "cuda":
        major, minor = props.get("compute_capability", (0, 0))
        arch: Any = major * 10 + minor
    elif kind == "hip":
        arch = str(props.get("gcn_arch_name", "")).split(":")[0]
    else:
        arch = props.get("cpu_name") or props.get("arch") or dev.backend.name
    return GPUTarget(kind, arch, int(props.get("warp_size", 32 if kind == "cuda" else 1))
                     if kind != "cpu" else 1)


def device_properties(dev: Any = None) -> dict[str, Any]:
    """A device's properties under the names Triton programs read (``multiprocessor_count``,
    ``max_shared_mem``, ``max_num_regs``, ``warpSize``, ``max_threads_per_sm``, ``sm_clock_rate``,
    ``mem_clock_rate``, ``mem_bus_width``), from what its backend reports.  On host devices a
    multiprocessor is a core (an OpenCL compute unit), a warp one thread, shared memory the
    device's local memory (OpenCL) or 0, and the registers per multiprocessor 0: a program
    there keeps its tiles in vector registers and memory, not in a register file it shares."""
    dev = dev if dev is not None else _device()
    p = dev.properties
    gpu = bool(dev.backend.triton_backend)
    units = p.get("multiprocessor_count") or p.get("cores") or p.get("compute_units") or 1
    smem = (p.get("max_shared_memory_per_block_optin") or p.get("max_shared_memory_per_block")
            or p.get("local_mem_size") or 0)
    return {
        "multiprocessor_count": int(units),
        "max_shared_mem": int(smem),
        "max_num_regs": int(p.get("max_registers_per_multiprocessor")
                            or p.get("max_registers_per_block") or 0),
        "warpSize": _target_of(dev).warp_size,
        "max_threads_per_sm": int(p.get("max_threads_per_multiprocessor")
                                  or p.get("max_threads_per_block") or (2048 if gpu else 1)),
        "sm_clock_rate": int(p.get("clock_rate_khz") or 0),
        "mem_clock_rate": int(p.get("memory_clock_rate_khz") or 0),
        "mem_bus_width": int(p.get("memory_bus_width") or 0),
    }


def _torch_device(dev: Any) -> Any:
    import torch
    if dev.backend.triton_backend:
        return torch.device("cuda", dev.index)
    return torch.device("cpu")


def _driver() -> _Module:
    def get_device_properties(index: int = 0) -> dict[str, Any]:
        dev = _device()
        if index not in (None, dev.index):
            import anytile as at
            dev = at.device(f"{dev.backend.device_prefix}:{index}")
        return device_properties(dev)

    from .runtime import host_descriptors as hd

    def fill_1d_tma_descriptor(ptr: int, dim: int, block_dim: int, element_size: int,
                               desc: int) -> None:
        hd.fill_descriptor(ptr, [dim], [block_dim], element_size, desc)

    def fill_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int, block_dim0: int,
                               element_size: int, desc: int) -> None:
        hd.fill_descriptor(ptr, [dim1, dim0], [block_dim1, block_dim0], element_size, desc)

    utils = _Module("triton.runtime.driver.active.utils", {
        "get_device_properties": get_device_properties,
        "fill_1d_tma_descriptor": fill_1d_tma_descriptor,
        "fill_2d_tma_descriptor": fill_2d_tma_descriptor}, package=False)
    active = _Module("triton.runtime.driver.active", {
        "get_active_torch_device": lambda: _torch_device(_device()),
        "get_current_device": lambda: _device().index,
        "set_current_device": _set_current_device,
        "get_current_target": lambda: _target_of(_device()),
        "get_device_interface": _device_interface,
        "utils": utils,
    }, package=False)
    return _Module("triton.runtime.driver", {"active": active}, package=False)


def _once(build: Callable[[], Any]) -> Callable[[], Any]:
    """``build``, called the first time only (one ``triton.knobs`` module for every import)."""
    made: list = []

    def get() -> Any:
        if not made:
            made.append(build())
        return made[0]
    return get


def _set_current_device(index: int) -> None:
    dev = _device()
    os.environ["ANYTILE_DEVICE"] = f"{dev.backend.device_prefix}:{index}"


def _device_interface() -> Any:
    import torch
    return torch.cuda if _device().backend.triton_backend else torch.cpu


class _Ptxas:
    """``knobs.nvidia.ptxas``: the ``ptxas`` the nvidia backend uses (``path``, ``None``
    without one) and its CUDA release (``version``, ``"13.0"``; ``"0.0"`` without one)."""

    @property
    def path(self) -> Optional[str]:
        from .runtime.discovery import discover
        record = discover().get("nvidia")
        found = record.backend.describe().get("ptxas") if record and record.backend else None
        return found if found and os.path.isfile(str(found)) else None

    @property
    def version(self) -> str:
        import re
        import subprocess
        path = self.path
        if path is None:
            return "0.0"
        said = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"release (\d+)\.(\d+)", said)
        return f"{found.group(1)}.{found.group(2)}" if found else "0.0"


class _KnobSet:
    """A group of Triton's knobs that anytile has no use for but programs read or set."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def _knobs() -> _Module:
    """``triton.knobs``: anytile's own ``runtime`` (launch hooks) and ``compilation`` (the
    compile listener) knobs, ``nvidia.ptxas`` (path and version) and the names Triton's test
    helpers read (``base_knobs``, ``propagate_env``); the other vendor groups are empty."""
    import anytile as at
    return _Module("triton.knobs", {
        "runtime": at.knobs.runtime, "compilation": at.knobs.compilation,
        "nvidia": _KnobSet(ptxas=_Ptxas(), dump_nvptx=False, mock_ptx_version=None),
        "amd": _KnobSet(), "cache": _KnobSet(), "build": _KnobSet(),
        "base_knobs": _KnobSet, "propagate_env": False}, package=False)


# -- the modules ----------------------------------------------------------------------------
def _modules() -> dict[str, Callable[[], types.ModuleType]]:
    """Module name -> a function building it (called on first import)."""
    import anytile as at
    import anytile.language as tl
    from anytile import errors, proton, testing
    from anytile.runtime import autotune, jit as jit_mod

    compile_errors = _Module("triton.compiler.errors", {
        "CompilationError": at.CompilationError, "CompileTimeAssertionFailure":
        at.CompilationError}, package=False)
    runtime_errors = _Module("triton.runtime.errors", {
        "OutOfResources": at.CompilationError, "InterpreterError": at.LaunchError,
        "PTXASError": at.CompilationError}, package=False)

    def language() -> types.ModuleType:
        return tl

    def extra(*parts: str) -> Callable[[], types.ModuleType]:
        def build() -> types.ModuleType:
            return importlib.import_module(".".join(("anytile.language", "extra") + parts))
        return build

    runtime = lambda: _Module("triton.runtime", {   # noqa: E731
        "driver": _driver(), "errors": runtime_errors, "Autotuner": autotune.Autotuner,
        "Heuristics": autotune.Heuristics, "Config": at.Config, "JITFunction": at.JITFunction,
        "KernelInterface": autotune.KernelInterface, "OutOfResources": at.CompilationError,
        "autotune": at.autotune, "heuristics": at.heuristics, "jit": at.jit})
    testing_mod = lambda: _Module("triton.testing", {   # noqa: E731
        "do_bench": testing.do_bench, "do_bench_cudagraph": _do_bench_cudagraph,
        "assert_close": testing.assert_close, "perf_report": testing.perf_report,
        "Benchmark": testing.Benchmark, "Mark": testing.Mark}, package=False)
    compiler = lambda: _Module("triton.compiler", {   # noqa: E731
        "compile": at.compile, "CompiledKernel": at.CompiledKernel, "errors": compile_errors,
        "CompilationError": at.CompilationError})

    knobs = _once(_knobs)

    def triton() -> types.ModuleType:
        return _Module("triton", {
            "__version__": f"3.6.0+anytile.{at.__version__}",
            "jit": at.jit, "autotune": at.autotune, "heuristics": at.heuristics,
            "Config": at.Config, "cdiv": at.cdiv, "next_power_of_2": at.next_power_of_2,
            "knobs": knobs(), "TritonError": errors.AnytileError,
            "set_allocator": at.set_allocator,
            "CompilationError": at.CompilationError, "OutOfResources": at.CompilationError,
            "JITFunction": at.JITFunction, "KernelInterface": autotune.KernelInterface,
            "reinterpret": reinterpret, "TensorWrapper": TensorWrapper, "language": tl})

    return {
        "triton": triton, "triton.knobs": knobs, "triton.language": language, "triton.language.core": language,
        "triton.language.math": lambda: tl.math, "triton.language.random": lambda: tl.random,
        "triton.language.extra": extra(), "triton.language.extra.cuda": extra("cuda"),
        "triton.language.extra.libdevice": extra("libdevice"),
        "triton.language.extra.cuda.libdevice": extra("libdevice"),
        "triton.language.extra.hip": extra("hip"),
        "triton.language.extra.hip.libdevice": extra("libdevice"),
        "triton.testing": testing_mod, "triton.runtime": runtime,
        "triton.runtime.driver": lambda: sys.modules["triton.runtime"].driver,
        "triton.runtime.errors": lambda: runtime_errors,
        "triton.runtime.autotuner": lambda: _Module("triton.runtime.autotuner", {
            "Autotuner": autotune.Autotuner, "Heuristics": autotune.Heuristics,
            "Config": at.Config, "autotune": at.autotune, "heuristics": at.heuristics},
            package=False),
        "triton.runtime.jit": lambda: _Module("triton.runtime.jit", {
            "JITFunction": jit_mod.JITFunction, "jit": at.jit,
            "KernelInterface": autotune.KernelInterface, "TensorWrapper": TensorWrapper,
            "reinterpret": reinterpret, "type_canonicalisation_dict": TYPE_CANONICAL},
            package=False),
        "triton.compiler": compiler, "triton.compiler.errors": lambda: compile_errors,
        "triton.tools": lambda: _Module("triton.tools", {}),
        "triton.profiler": lambda: _Module("triton.profiler", {
            name: getattr(proton, name) for name in proton.__all__}),
        "triton.profiler.viewer": lambda: _Module("triton.profiler.viewer", {
            "parse": proton.parse, "print_tree": proton.print_tree}, package=False),
        "triton._C": lambda: _Module("triton._C", {}),
        "triton._C.libtriton": _cublas_module,
        "triton.tools.experimental_descriptor": _experimental_descriptor,
        "triton.tools.tensor_descriptor": lambda: _Module("triton.tools.tensor_descriptor", {
            "TensorDescriptor": at.TensorDescriptor}, package=False),
    }


def _cublas_module() -> types.ModuleType:
    """``triton._C.libtriton`` holding only ``nvidia.cublas.CublasLt``: Triton's private
    binding, which its tutorials 09 and 10 take as the cuBLAS reference; served by torch's own
    matrix products (cuBLAS under torch on NVIDIA GPUs)."""
    class CublasLt:
        def __init__(self, workspace: Any) -> None:
            self.workspace = workspace

        def matmul(self, a: Any, b: Any, c: Any) -> None:
            """``c = a @ b.T`` (``b`` holds the product's right operand transposed)."""
            import torch
            if a.element_size() == 1:       # float8: torch's scaled product, unit scales
                one = torch.ones((), device=a.device, dtype=torch.float32)
                c.copy_(torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=c.dtype))
            else:
                torch.matmul(a, b.T, out=c)

    cublas = types.SimpleNamespace(CublasLt=CublasLt)
    return _Module("triton._C.libtriton", {
        "nvidia": types.SimpleNamespace(cublas=cublas)}, package=False)


def _experimental_descriptor() -> types.ModuleType:
    """Triton 3.2-3.3's ``triton.tools.experimental_descriptor`` (runtime/host_descriptors.py)."""
    from .runtime.host_descriptors import HostFilledDescriptor

    class TmaDescKernelParam(HostFilledDescriptor):
        TMA_DESC_SIZE = 128

    def create_1d_tma_descriptor(ptr: int, dim: int, block_dim: int,
                                 element_size: int) -> TmaDescKernelParam:
        return TmaDescKernelParam(ptr, [dim], [block_dim], element_size)

    def create_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int,
                                 block_dim0: int, element_size: int) -> TmaDescKernelParam:
        return TmaDescKernelParam(ptr, [dim1, dim0], [block_dim1, block_dim0], element_size)

    return _Module("triton.tools.experimental_descriptor", {
        "TmaDescKernelParam": TmaDescKernelParam,
        "create_1d_tma_descriptor": create_1d_tma_descriptor,
        "create_2d_tma_descriptor": create_2d_tma_descriptor}, package=False)


# -- triton.runtime.jit's helpers for viewing memory as another dtype ---------------------------
#: Triton's dtype names -> the short names of its signature strings (``tl.str_to_ty`` reads them)
TYPE_CANONICAL = {
    "bool": "i1", "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv",
    "float8e5": "fp8e5", "float8_e5m2": "fp8e5",
    "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u1": "i1", "u8": "u8",
    "u16": "u16", "u32": "u32", "u64": "u64", "fp16": "fp16", "bf16": "bf16", "fp32": "fp32",
    "fp64": "fp64",
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


def _do_bench_cudagraph(fn: Callable[[], Any], rep: int = 20, grad_to_none: Any = None,
                        quantiles: Any = None, return_mode: str = "mean") -> Any:
    """Triton's CUDA-graph timer, here timed as ``do_bench`` does (no graph capture)."""
    from anytile import testing
    return testing.do_bench(fn, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                            return_mode=return_mode)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``triton`` and its public submodules; any other ``triton.*`` is not provided."""

    def __init__(self) -> None:
        self.builders = _modules()
        _SERVED.update(self.builders)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "triton" and not name.startswith("triton."):
            return None
        if name not in self.builders:
            extra = os.environ.get("ANYTILE_TRITON_SOURCE")
            if extra:                  # a module of the user's Triton checkout, not served
                path = os.path.join(extra, *name.split(".")) + ".py"
                if os.path.isfile(path):
                    return importlib.util.spec_from_file_location(name, path)
            raise ModuleNotFoundError(f"No module named '{name}': anytile does not provide it "
                                      f"({NOT_PROVIDED_HINT})", name=name)
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        return self.builders[spec.name]()

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install(device: Optional[str] = None) -> None:
    """Make ``import triton`` (and its public submodules) give anytile, on ``device`` when
    given (it becomes the default device, as ``ANYTILE_DEVICE`` does).  A real Triton
    already imported in this process is an error: the two cannot share ``sys.modules``."""
    import anytile as at
    if device is not None:
        at.device(device)                 # an unknown or unusable device is said here
        os.environ["ANYTILE_DEVICE"] = device
    loaded = sys.modules.get("triton")
    if loaded is not None and not isinstance(loaded, _Module):
        raise at.AnytileError("the real triton is already imported in this process: install "
                              "the anytile stand-in before the program's first 'import triton'")
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    from .language import objects
    objects.REPR_PREFIX[0] = "triton.language"


def uninstall() -> None:
    """Remove the hook and the stand-in modules it served."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    from .language import objects
    objects.REPR_PREFIX[0] = "tl"
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if isinstance(sys.modules[name], _Module) or name.startswith("triton.language"):
            del sys.modules[name]


def run_path(path: str, argv: Optional[list[str]] = None, device: Optional[str] = None) -> None:
    """Run the file at ``path`` as ``__main__`` (as ``python path argv...`` would) with
    ``import triton`` served by anytile."""
    install(device)
    sys.argv = [path] + list(argv or [])
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    runpy.run_path(path, run_name="__main__")
