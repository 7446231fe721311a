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
``triton.runtime``                 ``driver`` (``active``, ``default``, ``set_active``,
                                   ``reset_active``); ``driver.active``:
                                   ``get_active_torch_device()``,
                                   ``get_current_device()``, ``get_current_target()``,
                                   ``utils.get_device_properties(index)``; ``Autotuner``,
                                   ``Heuristics``, ``Config``, ``JITFunction``, ``KernelInterface``,
                                   ``errors.OutOfResources``
``triton.compiler``                ``compile(ASTSource(fn, signature, constexprs, attrs),
                                   target, options)``, ``CompiledKernel`` (``run``, Triton's
                                   launcher), ``make_backend``, ``compiler.triton_key``,
                                   ``errors.CompilationError``
``triton.backends``                ``backends`` (``nvidia``/``amd`` where anytile has that
                                   backend installed, ``cpu`` always: host devices), each
                                   ``Backend(compiler, driver)``; ``compiler.GPUTarget``,
                                   ``BaseBackend``; ``driver.DriverBase``, ``GPUDriver``: what
                                   torch's inductor reads (``torch.compile``, ``torch._dynamo``)
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
and on the CPU for host devices (cpu, interpreter, OpenCL on the CPU).  ``install()`` also
makes the Python interpreters the program starts (``multiprocessing`` spawn and forkserver
workers, torch's compile workers) serve ``import triton`` the same way.
"""
from __future__ import annotations

import abc
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

TRITON_VERSION = "3.6.0"   # the Triton release whose API is served

NOT_PROVIDED_HINT = "anytile serves Triton's public API only; see anytile.triton_compat"


_SERVED: set[str] = set()   # the module names the hook serves (filled by install)


class _Module(types.ModuleType):
    """A stand-in module: the attributes it was given; any other is not provided."""

    def __init__(self, name: str, attrs: dict[str, Any]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # `from m import x` asks the finder for m.x: it says why not
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


# -- drivers: Triton's view of a family of devices (triton.backends, triton.runtime.driver) -----
#: the Triton backend name of each device family (a device's ``backend.triton_backend``, or
#: ``"cpu"`` for every host device: cpu, the interpreter, OpenCL on the CPU)
TRITON_BACKEND_NAMES = {"cuda": "nvidia", "hip": "amd", "cpu": "cpu"}


def _family(dev: Any) -> str:
    return dev.backend.triton_backend or "cpu"


def _family_device(family: str) -> Any:
    """The device a family's driver speaks for: the default device when it is of that
    family, else the family's first usable device."""
    import anytile as at
    dev = _device()
    if _family(dev) == family:
        return dev
    for candidate in at.devices():
        if _family(candidate) == family:
            return candidate
    raise at.AnytileError(f"no usable {TRITON_BACKEND_NAMES[family]} device here "
                          f"(`anytile backends` says why)")


class _DriverUtils:
    """``driver.active.utils``: device properties under Triton's names, and Triton 3.2-3.3's
    host-filled TMA descriptors (``runtime/host_descriptors``)."""

    def __init__(self, family: str) -> None:
        self._family = family

    def get_device_properties(self, index: int = 0) -> dict[str, Any]:
        dev = _family_device(self._family)
        if index not in (None, dev.index):
            import anytile as at
            dev = at.device(f"{dev.backend.device_prefix}:{index}")
        return device_properties(dev)

    @staticmethod
    def fill_1d_tma_descriptor(ptr: int, dim: int, block_dim: int, element_size: int,
                               desc: int) -> None:
        from .runtime import host_descriptors as hd
        hd.fill_descriptor(ptr, [dim], [block_dim], element_size, desc)

    @staticmethod
    def fill_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int, block_dim0: int,
                               element_size: int, desc: int) -> None:
        from .runtime import host_descriptors as hd
        hd.fill_descriptor(ptr, [dim1, dim0], [block_dim1, block_dim0], element_size, desc)


class DriverBase(abc.ABC):
    """Triton's base class of a device driver (``triton.backends.driver.DriverBase``)."""

    @classmethod
    @abc.abstractmethod
    def is_active(cls) -> bool:
        """Whether a device this driver speaks for is usable here."""

    @abc.abstractmethod
    def get_current_target(self) -> "GPUTarget":
        """What code is compiled for."""

    @abc.abstractmethod
    def get_active_torch_device(self) -> Any:
        """The torch device whose tensors kernels read."""

    @abc.abstractmethod
    def get_benchmarker(self) -> Callable[..., Any]:
        """The timer ``triton.testing`` uses."""


class GPUDriver(DriverBase, abc.ABC):
    """Triton's base class of a GPU driver (``triton.backends.driver.GPUDriver``)."""


class _FamilyDriver(GPUDriver):
    """anytile's driver for one device family: it answers for the family's device (the
    default device when it is of the family), read at each call."""

    family = "cpu"

    def __init__(self) -> None:
        self.utils = _DriverUtils(self.family)

    @classmethod
    def is_active(cls) -> bool:
        import anytile as at
        return any(_family(d) == cls.family for d in at.devices())

    def get_current_target(self) -> "GPUTarget":
        return _target_of(_family_device(self.family))

    def get_active_torch_device(self) -> Any:
        return _torch_device(_family_device(self.family))

    def get_current_device(self) -> int:
        return _family_device(self.family).index

    def set_current_device(self, index: int) -> None:
        """Make device ``index`` of the family the default device (``ANYTILE_DEVICE``)."""
        os.environ["ANYTILE_DEVICE"] = f"{_family_device(self.family).backend.device_prefix}:{index}"

    def get_device_interface(self) -> Any:
        import torch
        return torch.cpu if self.family == "cpu" else torch.cuda

    def get_benchmarker(self) -> Callable[..., Any]:
        from anytile import testing
        return testing.do_bench


class CudaDriver(_FamilyDriver):
    """The driver of NVIDIA devices."""
    family = "cuda"


class HIPDriver(_FamilyDriver):
    """The driver of AMD devices."""
    family = "hip"


class CPUDriver(_FamilyDriver):
    """The driver of host devices (cpu, the interpreter, OpenCL on the CPU): the default
    device when it is one, else ``cpu``."""
    family = "cpu"


_DRIVERS: dict[str, type[_FamilyDriver]] = {"cuda": CudaDriver, "hip": HIPDriver,
                                            "cpu": CPUDriver}


class _DriverConfig(_Module):
    """``triton.runtime.driver`` (also its attribute ``driver``): ``active`` is the driver of
    the default device's family unless ``set_active`` chose another; ``default`` that
    family's driver."""

    def __init__(self) -> None:
        super().__init__("triton.runtime.driver", {})
        self._made: dict[str, _FamilyDriver] = {}
        self._active: Optional[DriverBase] = None
        self.driver = self

    def _of(self, family: str) -> _FamilyDriver:
        if family not in self._made:
            self._made[family] = _DRIVERS[family]()
        return self._made[family]

    @property
    def default(self) -> DriverBase:
        return self._of(_family(_device()))

    @property
    def active(self) -> DriverBase:
        return self._active if self._active is not None else self.default

    def set_active(self, driver: DriverBase) -> None:
        if not isinstance(driver, DriverBase):
            raise TypeError(f"set_active takes a driver (triton.backends.driver.DriverBase), "
                            f"got {driver!r}")
        self._active = driver

    def reset_active(self) -> None:
        self._active = None


def _once(build: Callable[[], Any]) -> Callable[[], Any]:
    """``build``, called the first time only (one ``triton.knobs`` module for every import)."""
    made: list = []

    def get() -> Any:
        if not made:
            made.append(build())
        return made[0]
    return get


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
        "amd": _KnobSet(), "build": _KnobSet(), "cache": _KnobSet(dir=_cache_dir()),
        "base_knobs": _KnobSet, "propagate_env": False})


def _cache_dir() -> Optional[str]:
    """anytile's on-disk kernel cache folder (``None`` when the cache is off)."""
    from .runtime.cache import cache_dir
    found = cache_dir()
    return str(found) if found is not None else None


# -- compiling as torch's inductor does: ASTSource, triton.compile, CompiledKernel ---------------
@dataclass(frozen=True)
class KernelParam:
    """One parameter as Triton's ``JITFunction.params`` lists it."""

    num: int
    name: str
    is_constexpr: bool
    is_const: bool
    do_not_specialize: bool
    do_not_specialize_on_alignment: bool


def _jit_class() -> type:
    """Triton's ``JITFunction``: anytile's, with the attributes Triton's spells out
    (``params``, ``cache_key``) that torch's inductor reads."""
    import anytile as at

    class JITFunction(at.JITFunction):
        __doc__ = at.JITFunction.__doc__

        def __init__(self, fn: Callable, **options: Any) -> None:
            super().__init__(fn, **options)
            if self.repr is None:            # Triton's default: the function's name
                self.repr = lambda _: fn.__name__
            self.__globals__ = self.globals
            self.used_global_vals: dict = {}

        def __reduce__(self) -> tuple:
            # pickled to another process (torch's compile workers): rebuilt there from the
            # file that defines it
            return (_jit_from_file, (self.file, self.__module__, self.__name__, self.src))

        @property
        def params(self) -> list[KernelParam]:
            return [KernelParam(p.index, p.name, p.is_constexpr, p.is_const, not p.specialize,
                                not p.specialize) for p in self.launch_signature.params]

        @property
        def cache_key(self) -> str:
            """A hash of the source and of every ``@jit`` function it reaches."""
            return self.dependencies_key()

    JITFunction.__module__ = "triton.runtime.jit"
    return JITFunction


def _jit_from_file(path: str, module_name: str, name: str, src: str) -> Any:
    """The ``@jit`` function ``name`` of the Python file at ``path``, as a pickled one is
    rebuilt: from its module when this process has it loaded (``__main__`` too), else by
    running the file as a new module; the attribute ``name``, or what it wraps (``.fn`` of an
    autotuner or heuristics), whose source must still be ``src``."""
    import anytile as at
    import hashlib
    module = next((m for m in (sys.modules.get(module_name), sys.modules.get("__main__"))
                   if m is not None and _same_file(getattr(m, "__file__", None), path)), None)
    if module is None:
        key = hashlib.sha256(f"{path}:{name}".encode()).hexdigest()[:16]
        spec = importlib.util.spec_from_file_location(f"anytile_triton_rebuilt_{key}", path)
        if spec is None or spec.loader is None or not os.path.isfile(path):
            raise at.AnytileError(f"cannot rebuild the kernel '{name}' in this process: its "
                                  f"file {path} is gone")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    found = getattr(module, name, None)
    while found is not None and not isinstance(found, at.JITFunction):
        found = getattr(found, "fn", None)
    if found is None or found.src != src:
        raise at.AnytileError(f"cannot rebuild the kernel '{name}' in this process: {path} "
                              f"no longer defines it as it was")
    return found


def _same_file(a: Optional[str], b: str) -> bool:
    return a is not None and os.path.abspath(a) == os.path.abspath(b)


class ASTSource:
    """What one ``triton.compile`` compiles: the ``@jit`` function ``fn``, its ``signature``
    (parameter name -> ``"*fp32"``, ``"i32"``... or ``"constexpr"``), the constexpr values
    (keyed by name or by ``(index,)``) and the attributes (``{(index,): [["tt.divisibility",
    16]]}``)."""

    def __init__(self, fn: Any, signature: dict, constexprs: Optional[dict] = None,
                 attrs: Optional[dict] = None) -> None:
        import anytile as at
        if not isinstance(fn, at.JITFunction):
            raise TypeError(f"ASTSource takes a @triton.jit function, got {fn!r}")
        if any(not isinstance(k, str) for k in signature):
            raise TypeError("ASTSource: the signature's keys must be parameter names")
        self.fn, self.name, self.signature = fn, fn.__name__, dict(signature)
        self.constants: dict[tuple, Any] = {}
        for key, value in (constexprs or {}).items():
            self.constants[(fn.arg_names.index(key),) if isinstance(key, str) else key] = value
        self.attrs = dict(attrs or {})

    def hash(self) -> str:
        import hashlib
        key = (f"{self.fn.dependencies_key()}-{sorted(self.signature.items())}-"
               f"{sorted(self.constants.items(), key=repr)}-{sorted(self.attrs.items(), key=repr)}")
        return hashlib.sha256(key.encode()).hexdigest()

    def spec_text(self) -> tuple[dict[str, str], dict[str, Any]]:
        """``at.compile``'s signature strings (``":16"`` where ``tt.divisibility`` is 16) and
        constexpr values by name."""
        names = self.fn.arg_names
        constexprs = {names[k[0]]: v for k, v in self.constants.items() if len(k) == 1}
        divisible = {names[k[0]] for k, props in self.attrs.items()
                     if len(k) == 1 and ["tt.divisibility", 16] in [list(p) for p in props]}
        signature = {}
        for name, text in self.signature.items():
            if text == "constexpr":
                if name not in constexprs:
                    raise TypeError(f"ASTSource of '{self.name}': '{name}' is a constexpr "
                                    f"without a value")
                continue
            signature[name] = f"{text}:16" if name in divisible else str(text)
        return signature, constexprs


#: Triton options whose value is what anytile always does (any other value is not provided)
_FIXED_OPTIONS = {"sanitize_overflow": False, "launch_cooperative_grid": False,
                  "enable_reflect_ftz": False}


def _launch_options(options: dict) -> dict:
    """Triton's compile options as anytile's launch options."""
    out = {}
    for key, value in (options or {}).items():
        if key in _FIXED_OPTIONS:
            if bool(value) != _FIXED_OPTIONS[key]:
                raise NotImplementedError(_not_provided(f"the compile option {key}={value!r}"))
        else:
            out[key] = value
    return out


def _not_provided(what: str) -> str:
    return f"{what} is not provided by anytile ({NOT_PROVIDED_HINT})"


class CompiledKernel:
    """What ``triton.compile(ASTSource(...))`` returns: a kernel compiled for one device.
    ``run(grid_x, grid_y, grid_z, stream, function, metadata, launch_metadata, enter_hook,
    exit_hook, *args)`` launches it with every argument of the kernel (its constexprs too, as
    Triton's launcher takes them); ``kernel[grid](*args)`` does the same.  ``metadata``
    (``shared``, ``num_warps``...), ``asm``, ``n_regs``, ``n_spills`` and ``hash`` are the
    compile's.  It pickles without its handles; ``_init_handles()`` makes them again."""

    def __init__(self, src: ASTSource, device: Any, options: dict, compiled: Any) -> None:
        import hashlib
        self.src, self.name, self.device = src, compiled.name, device.name
        self.options = options
        self.asm, self.metadata = dict(compiled.asm), compiled.metadata
        self.n_regs, self.n_spills = compiled.n_regs, compiled.n_spills
        self.hash = hashlib.sha256(f"{src.hash()}-{device.name}-{sorted(options.items())}"
                                   .encode()).hexdigest()
        self._init_handles()

    def _init_handles(self) -> None:
        """``run`` and ``function`` (the kernel is loaded by its first launch)."""
        self.function = self.name
        self.run = self._run

    def _run(self, grid_x: int, grid_y: int, grid_z: int, stream: Any, function: Any,
             metadata: Any, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
             *args: Any) -> None:
        # the launch hooks are anytile's knobs, which the launch itself calls; the launch
        # specialises on the arguments again (the compile's attributes may be coarser)
        options = self.options if _device().name == self.device else \
            {**self.options, "device": self.device}
        self.src.fn[(grid_x, grid_y, grid_z)](*args, **options)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        return lambda *args, stream=None: self._run(*grid, stream, self.function, None, None,
                                                     None, None, *args)

    def launch_metadata(self, grid: Any, stream: Any, *args: Any) -> None:
        """Triton's precomputed hook data: anytile's launch hooks get theirs from the launch."""
        return None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("run", "function")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._init_handles()


def triton_compile(src: Any, target: Optional["GPUTarget"] = None,
                   options: Optional[dict] = None) -> CompiledKernel:
    """``triton.compile(ASTSource(fn, signature, constexprs, attrs), target, options)``:
    compile for the device of ``target``'s family (the active driver's when omitted).
    Triton's IR (a path or text) is not accepted: anytile compiles Python kernels."""
    import anytile as at
    from .runtime.launch import plan_for
    if not isinstance(src, ASTSource):
        if isinstance(src, (str, os.PathLike)):
            raise NotImplementedError(_not_provided(f"triton.compile of Triton IR ({src!s})"))
        raise TypeError(f"triton.compile takes a triton.compiler.ASTSource, got {src!r}")
    family = target.backend if target is not None else _family(_device())
    if family not in _DRIVERS:
        raise at.AnytileError(f"triton.compile: no anytile device family for target {target}")
    dev = _family_device(family)
    launch = _launch_options(options or {})
    signature, constexprs = src.spec_text()
    specs = src.fn.launch_signature.from_text(signature, constexprs)
    compiled = plan_for(src.fn, dev, specs, launch, warmup=True).compiled
    return CompiledKernel(src, dev, launch, compiled)


class BaseBackend(abc.ABC):
    """Triton's base class of a compiler backend (``triton.backends.compiler``), with the
    part of its interface that does not read Triton's IR: anytile's backends compile Python
    kernels through their own stages (``anytile.backend``)."""

    def __init__(self, target: GPUTarget) -> None:
        self.target = target

    @staticmethod
    @abc.abstractmethod
    def supports_target(target: GPUTarget) -> bool:
        """Whether this backend compiles for ``target``."""

    @abc.abstractmethod
    def hash(self) -> str:
        """What identifies the code this backend generates (part of cache keys)."""

    @abc.abstractmethod
    def parse_options(self, options: dict) -> Any:
        """Compile options (a dict) -> the backend's options object."""


class _FamilyBackend(BaseBackend):
    """``make_backend(target)``: anytile's backend of the family's device."""

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend in _DRIVERS

    def _device(self) -> Any:
        return _family_device(self.target.backend)

    def hash(self) -> str:
        import anytile as at
        dev = self._device()
        return f"anytile-{at.__version__}-{dev.backend.target_of(dev.info)}"

    def parse_options(self, options: dict) -> Any:
        """anytile's ``CompileOptions`` (``num_warps``, ``num_stages``, ``debug``...)."""
        return self._device().backend.parse_options(**_launch_options(options))


def make_backend(target: GPUTarget) -> BaseBackend:
    """The compiler backend for ``target`` (``triton.compiler.compiler.make_backend``)."""
    if not _FamilyBackend.supports_target(target):
        raise NotImplementedError(_not_provided(f"a compiler backend for target {target}"))
    return _FamilyBackend(target)


@dataclass(frozen=True)
class Backend:
    """One entry of ``triton.backends.backends``: the compiler and driver classes."""

    compiler: type
    driver: type


def _backends() -> dict[str, Backend]:
    """``triton.backends.backends``: Triton's name for each family anytile has a backend
    installed for (``nvidia``, ``amd``), and ``cpu`` (host devices; the interpreter is
    always there)."""
    from .runtime.discovery import discover
    families = {"cpu"}
    for record in discover().values():
        if record.backend is not None:
            families.add(record.backend.triton_backend or "cpu")
    return {TRITON_BACKEND_NAMES[f]: Backend(_FamilyBackend, _DRIVERS[f])
            for f in ("cuda", "hip", "cpu") if f in families}


def triton_key() -> str:
    """What identifies this compiler build (Triton's version and anytile's sources)."""
    import anytile as at
    from .runtime.cache import _source_fingerprint
    return f"{TRITON_VERSION}-anytile-{at.__version__}-" \
           f"{_source_fingerprint(os.path.dirname(os.path.abspath(at.__file__)))}"


# -- the modules ----------------------------------------------------------------------------
def _modules() -> dict[str, Callable[[], types.ModuleType]]:
    """Module name -> a function building it (called on first import)."""
    import anytile as at
    import anytile.language as tl
    from anytile import errors, proton, testing
    from anytile.runtime import autotune

    compile_errors = _Module("triton.compiler.errors", {
        "CompilationError": at.CompilationError, "CompileTimeAssertionFailure":
        at.CompilationError})
    runtime_errors = _Module("triton.runtime.errors", {
        "OutOfResources": at.CompilationError, "InterpreterError": at.LaunchError,
        "PTXASError": at.CompilationError})
    jit_function = _once(_jit_class)

    def jit(fn: Optional[Callable] = None, **options: Any) -> Any:
        """``@triton.jit``: an anytile kernel, with Triton's ``JITFunction`` attributes."""
        if fn is None:
            return lambda f: jit_function()(f, **options)
        return jit_function()(fn, **options)

    def language() -> types.ModuleType:
        return tl

    def extra(*parts: str) -> Callable[[], types.ModuleType]:
        def build() -> types.ModuleType:
            return importlib.import_module(".".join(("anytile.language", "extra") + parts))
        return build

    driver = _once(_DriverConfig)
    backend_compiler = _once(lambda: _Module("triton.backends.compiler", {
        "GPUTarget": GPUTarget, "BaseBackend": BaseBackend}))
    backend_driver = _once(lambda: _Module("triton.backends.driver", {
        "DriverBase": DriverBase, "GPUDriver": GPUDriver}))
    compiler_compiler = _once(lambda: _Module("triton.compiler.compiler", {
        "ASTSource": ASTSource, "CompiledKernel": CompiledKernel, "compile": triton_compile,
        "make_backend": make_backend, "triton_key": triton_key, "GPUTarget": GPUTarget}))
    runtime = lambda: _Module("triton.runtime", {   # noqa: E731
        "driver": driver(), "errors": runtime_errors, "Autotuner": autotune.Autotuner,
        "Heuristics": autotune.Heuristics, "Config": at.Config, "JITFunction": jit_function(),
        "KernelInterface": autotune.KernelInterface, "OutOfResources": at.CompilationError,
        "autotune": at.autotune, "heuristics": at.heuristics, "jit": jit})
    testing_mod = lambda: _Module("triton.testing", {   # noqa: E731
        "do_bench": testing.do_bench, "do_bench_cudagraph": _do_bench_cudagraph,
        "assert_close": testing.assert_close, "perf_report": testing.perf_report,
        "Benchmark": testing.Benchmark, "Mark": testing.Mark})
    compiler = lambda: _Module("triton.compiler", {   # noqa: E731
        "compile": triton_compile, "ASTSource": ASTSource, "CompiledKernel": CompiledKernel,
        "make_backend": make_backend, "errors": compile_errors,
        "compiler": compiler_compiler(), "CompilationError": at.CompilationError})

    knobs = _once(_knobs)

    def triton() -> types.ModuleType:
        return _Module("triton", {
            "__version__": f"{TRITON_VERSION}+anytile.{at.__version__}",
            "jit": jit, "autotune": at.autotune, "heuristics": at.heuristics,
            "Config": at.Config, "cdiv": at.cdiv, "next_power_of_2": at.next_power_of_2,
            "knobs": knobs(), "TritonError": errors.AnytileError,
            "set_allocator": at.set_allocator, "compile": triton_compile,
            "CompilationError": at.CompilationError, "OutOfResources": at.CompilationError,
            "JITFunction": jit_function(), "KernelInterface": autotune.KernelInterface,
            "reinterpret": reinterpret, "TensorWrapper": TensorWrapper, "language": tl})

    return {
        "triton": triton, "triton.knobs": knobs, "triton.language": language,
        "triton.language.core": language,
        "triton.language.math": lambda: tl.math, "triton.language.random": lambda: tl.random,
        "triton.language.extra": extra(), "triton.language.extra.cuda": extra("cuda"),
        "triton.language.extra.libdevice": extra("libdevice"),
        "triton.language.extra.cuda.libdevice": extra("libdevice"),
        "triton.language.extra.hip": extra("hip"),
        "triton.language.extra.hip.libdevice": extra("libdevice"),
        "triton.testing": testing_mod, "triton.runtime": runtime,
        "triton.runtime.driver": driver,
        "triton.runtime.errors": lambda: runtime_errors,
        "triton.runtime.autotuner": lambda: _Module("triton.runtime.autotuner", {
            "Autotuner": autotune.Autotuner, "Heuristics": autotune.Heuristics,
            "Config": at.Config, "autotune": at.autotune, "heuristics": at.heuristics,
            "OutOfResources": at.CompilationError, "PTXASError": at.CompilationError}),
        "triton.runtime.jit": lambda: _Module("triton.runtime.jit", {
            "JITFunction": jit_function(), "jit": jit,
            "KernelInterface": autotune.KernelInterface, "TensorWrapper": TensorWrapper,
            "reinterpret": reinterpret, "type_canonicalisation_dict": TYPE_CANONICAL}),
        "triton.runtime.cache": lambda: _Module("triton.runtime.cache", {
            "triton_key": triton_key, "knobs": knobs()}),
        "triton.backends": lambda: _Module("triton.backends", {
            "backends": _backends(), "Backend": Backend, "BaseBackend": BaseBackend,
            "DriverBase": DriverBase, "compiler": backend_compiler(),
            "driver": backend_driver()}),
        "triton.backends.compiler": backend_compiler, "triton.backends.driver": backend_driver,
        "triton.compiler": compiler, "triton.compiler.errors": lambda: compile_errors,
        "triton.compiler.compiler": compiler_compiler,
        "triton.tools": lambda: _Module("triton.tools", {}),
        "triton.profiler": lambda: _Module("triton.profiler", {
            name: getattr(proton, name) for name in proton.__all__}),
        "triton.profiler.viewer": lambda: _Module("triton.profiler.viewer", {
            "parse": proton.parse, "print_tree": proton.print_tree}),
        "triton._C": lambda: _Module("triton._C", {}),
        "triton._C.libtriton": _cublas_module,
        "triton.tools.experimental_descriptor": _experimental_descriptor,
        "triton.tools.tensor_descriptor": lambda: _Module("triton.tools.tensor_descriptor", {
            "TensorDescriptor": at.TensorDescriptor}),
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
        "nvidia": types.SimpleNamespace(cublas=cublas)})


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
        "create_2d_tma_descriptor": create_2d_tma_descriptor})


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


#: what to do instead, for the parts of Triton a program may reach for that anytile leaves out
_INSTEAD = {
    "triton._C": "they are Triton's C++ internals (its MLIR IR, passes and drivers): a program "
                 "that builds or reads Triton IR needs the real Triton; anytile's own IR of a "
                 "kernel is anytile.compile(kernel, target, signature).asm['ir']",
}


def _module_not_provided(name: str) -> str:
    """Why ``import name`` fails: an ``ImportError`` rather than ``ModuleNotFoundError``,
    so that ``from pkg import name`` keeps this message instead of Python's bare one."""
    instead = next((why for prefix, why in _INSTEAD.items()
                    if name == prefix or name.startswith(prefix + ".")), None)
    if instead is not None:
        return f"No module named '{name}': anytile does not provide it; {instead}"
    return f"No module named '{name}': anytile does not provide it ({NOT_PROVIDED_HINT})"


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
            raise ImportError(_module_not_provided(name), name=name)
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        return self.builders[spec.name]()

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__.name == "triton.language":   # as Triton's package does on import
            importlib.import_module("triton.language.core")


# -- child interpreters: spawn and forkserver workers, subprocesses ------------------------------
#: set (to "1") by ``install``: a Python started by this process serves ``import triton`` too
CHILD_ENV = "ANYTILE_AS_TRITON"

#: the ``sitecustomize`` that ``install`` puts first on ``PYTHONPATH`` for child interpreters
#: (Python runs it at startup): with ``ANYTILE_AS_TRITON`` set, the first ``import triton``
#: installs anytile's (anytile is imported only then); any other ``sitecustomize`` on the path
#: still runs after it
_STARTUP_SOURCE = '''\
"""Written by anytile.triton_compat.install: with ANYTILE_AS_TRITON set, the first
`import triton` in this interpreter installs anytile's triton, as in the process that
started it."""
import importlib.machinery
import importlib.util
import os
import sys


class _AnytileTritonOnFirstImport:
    def find_spec(self, name, path=None, target=None):
        if name != "triton" and not name.startswith("triton."):
            return None
        sys.meta_path.remove(self)
        try:
            from anytile.triton_compat import install
        except ImportError:          # a Python without anytile: its own triton, or none
            return None
        install()
        return sys.meta_path[0].find_spec(name, path, target)


def _next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get("ANYTILE_AS_TRITON") and "triton" not in sys.modules:
    sys.meta_path.insert(0, _AnytileTritonOnFirstImport())
_next_sitecustomize()
'''


def _startup_folder() -> str:
    """The folder holding the child interpreters' ``sitecustomize`` (written when missing or
    out of date): under anytile's cache folder, else a private temporary folder."""
    import tempfile
    from .runtime.cache import cache_dir
    base = cache_dir()
    folder = str(base / "triton-startup") if base is not None else \
        tempfile.mkdtemp(prefix="anytile-triton-startup-")
    path = os.path.join(folder, "sitecustomize.py")
    try:
        with open(path) as f:
            if f.read() == _STARTUP_SOURCE:
                return folder
    except OSError:
        pass
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_STARTUP_SOURCE)
        os.replace(tmp, path)                # whole, never half-written, for a racing child
    except BaseException:
        os.unlink(tmp)
        raise
    return folder


def _children_too() -> None:
    """Child Python interpreters (``multiprocessing`` spawn and forkserver workers, torch's
    compile workers, subprocesses) serve ``import triton`` as this one does."""
    os.environ[CHILD_ENV] = "1"
    folder = _startup_folder()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder] + paths)
    if folder not in sys.path:       # for launchers that pass on sys.path (torch's workers)
        sys.path.insert(1 if sys.path else 0, folder)   # the script's folder stays first


def _children_no_more() -> None:
    os.environ.pop(CHILD_ENV, None)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    kept = [p for p in paths if not os.path.isfile(os.path.join(p, "sitecustomize.py"))
            or not _is_startup_file(os.path.join(p, "sitecustomize.py"))]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if not _is_startup_file(os.path.join(p, "sitecustomize.py"))]


def _is_startup_file(path: str) -> bool:
    try:
        with open(path) as f:
            return f.read() == _STARTUP_SOURCE
    except OSError:
        return False


def install(device: Optional[str] = None) -> None:
    """Make ``import triton`` (and its public submodules) give anytile, on ``device`` when
    given (it becomes the default device, as ``ANYTILE_DEVICE`` does), in this process and in
    the Python interpreters it starts (``ANYTILE_AS_TRITON`` and a ``sitecustomize`` first on
    ``PYTHONPATH``: ``multiprocessing`` spawn and forkserver workers, subprocesses).  A real
    Triton already imported in this process is an error: the two cannot share ``sys.modules``."""
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
    _children_too()
    from .language import objects
    objects.REPR_PREFIX[0] = "triton.language"


def uninstall() -> None:
    """Remove the hook and the stand-in modules it served (child interpreters started from
    now on import their own ``triton``, if any)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    _children_no_more()
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
