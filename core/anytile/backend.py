"""The plugin contract between anytile's core and its backends (API version 1).

A backend is a class deriving from ``Backend``, published by any distribution under the
``anytile.backends`` entry-point group::

    [project.entry-points."anytile.backends"]
    mybackend = "my_package.backend:MyBackend"

Core discovers it with stevedore, instantiates it with no arguments, and never imports a
backend by name.  A backend imports only this module, ``anytile.ir``, ``anytile.errors`` and
the documented helpers (``anytile.codegen``; ``anytile.gpu_host`` for GPU backends: foreign
device arrays, streams, argument blocks and the fast launcher); everything else in core is
private.  Helpers are additions within API version 1: a backend that does not use them is
unaffected.

What core does, and what it asks of a backend:

1. The frontend compiles the user's kernel to device-independent tile IR and runs the
   generic passes; the result is stage ``ir`` (text in ``CompiledKernel.asm["ir"]``).
2. ``Backend.stages(target, options)`` returns ordered, named stages.  Each takes the previous
   stage's output (first the IR ``Module``) and the kernel's ``KernelMetadata`` (which it
   fills in: what ``load`` and ``launch`` will need) and returns its own output; its text or
   bytes are kept in ``asm[stage.name]``.
   Typical lists: ``laid-out ir -> llir -> ptx -> cubin`` (LLVM-to-GPU),
   ``laid-out ir -> llir -> asm`` (LLVM-to-host), ``opencl-c`` (source-emitting).
3. ``Backend.load`` turns the compiled kernel into something launchable on a device;
   ``Backend.launch`` runs it over a grid with the runtime arguments.
4. Device memory is ``Buffer`` objects made by ``alloc`` or ``import_array``.
5. Optional, for speed (added within version 1; the defaults keep the general path):
   ``launcher`` (launch with raw values, no ``KernelArg`` per launch), ``foreign_reader``
   (read a foreign tensor's address and key without ``import_array`` per launch), and
   ``disk_cacheable`` with ``cache_facts`` (compiled kernels kept in the on-disk cache).
6. Optional, for backends whose devices differ (added within version 1):
   ``device_capabilities(device)``, the capabilities of one device (OpenCL devices with and
   without ``cl_khr_fp64``); the default is ``capabilities``.  The conformance suite reads
   it, so a device is certified for exactly what it has.
7. The IR ops a backend lowers (added within version 1): ``op_set``, the version of the IR's
   op set it was written for (``anytile.ir.OP_SETS``; 1 when not set, the ops of the first
   release), or ``lowered_ops()`` for another list.  Core hands a backend only IR whose every
   op it declares (``check_lowered_ops``, at the one place a compile calls ``stages``) and
   refuses any other kernel with a ``CompilationError`` naming the op, the backend and the
   kernel's line: IR made after a plugin was written never reaches it unannounced.

Incompatible changes to this module bump ``API_VERSION``; core refuses (and reports) a
backend whose ``api_version`` it does not support, without breaking the others.
"""
from __future__ import annotations

import abc
import dataclasses
import functools
import importlib.metadata
import linecache
import numbers
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, NamedTuple, Optional, Sequence

import ml_dtypes
import numpy as np

from .errors import BackendError, CompilationError, LaunchArgumentError, LaunchValueError
from .ir.nodes import Module, Op
from .ir.opsets import (DROPPABLE_OPS, drop_ops, first_op_outside, ops_of_version, spelling_of,
                         version_with)
from .ir.types import ScalarType, Type, from_numpy

__all__ = ["API_VERSION", "SUPPORTED_API_VERSIONS", "Target", "CompileOptions", "DeviceInfo",
           "Buffer", "PointerArg", "KernelArg", "ImportedArray", "Stage", "KernelMetadata",
           "CompiledKernel",
           "Availability", "Backend", "DeviceTimer", "CAPABILITIES", "HostArrayView",
           "host_array_view", "numpy_view_of", "debug_default", "TUNING_HINTS"]

API_VERSION = 1
SUPPORTED_API_VERSIONS = frozenset({1})

#: Optional features a backend may declare in ``Backend.capabilities``; the conformance suite
#: skips (with this reason) a case needing one that is not declared.
CAPABILITIES = {
    "fp64": "64-bit floating point arithmetic and memory",
    "fp16": "16-bit IEEE floats in memory and arithmetic",
    "bf16": "bfloat16 in memory and arithmetic",
    "fp8": "the float8 formats f8e4m3 (OCP e4m3fn) and f8e5m2 in memory, casts, bitcasts and "
           "tl.dot / tl.dot_scaled operands (added within version 1: a backend that does not "
           "declare it is not asked for them by the conformance suite)",
    "int64_atomics": "atomics on 64-bit integers",
    "float_atomics": "atomic add/min/max on floats",
    "dot_int8": "tl.dot on int8 inputs with int32 accumulation",
    "device_assert": "tl.device_assert stops the launch with an error",
    "device_print": "tl.device_print writes its lines (ir.PrintOp) to the standard output",
    "bounds_check": "out-of-bounds loads, stores and atomics raise OutOfBoundsError naming the "
                    "kernel's line, at least when launched with debug=True (a backend may check "
                    "always, as the interpreter does)",
}


def debug_default() -> bool:
    """Whether launches and compiles that do not say ``debug=`` (nor ``@jit(debug=...)``) get
    ``debug=True``: the ``ANYTILE_DEBUG`` environment variable set to anything but 0, read
    when a kernel is compiled (set it before the first launch)."""
    return os.environ.get("ANYTILE_DEBUG", "") not in ("", "0")


def fp_fusion_default() -> bool:
    """Whether launches and compiles that do not say ``enable_fp_fusion=`` may contract a
    float multiply and add into one fused multiply-add: yes (Triton's default), unless the
    ``ANYTILE_DEFAULT_FP_FUSION`` environment variable is 0 -- or, where that is unset, Triton's
    ``TRITON_DEFAULT_FP_FUSION`` (a Triton program sets it to switch fusion off)."""
    value = os.environ.get("ANYTILE_DEFAULT_FP_FUSION")
    if value is None:
        value = os.environ.get("TRITON_DEFAULT_FP_FUSION", "1")
    return value != "0"


@dataclass(frozen=True)
class Target:
    """What code is generated for: ``backend`` name and architecture, e.g. ``nvidia:sm_90``."""

    backend: str
    arch: str

    def __str__(self) -> str:
        return f"{self.backend}:{self.arch}"

    @staticmethod
    def parse(text: str) -> "Target":
        backend, sep, arch = text.partition(":")
        if not sep or not backend or not arch:
            raise ValueError(f"target {text!r} is not of the form BACKEND:ARCH (e.g. nvidia:sm_90)")
        return Target(backend, arch)


@dataclass(frozen=True)
class CompileOptions:
    """Options that change generated code; part of the compile cache key.

    ``debug``: ``tl.device_assert`` is checked and, on backends whose checks are opt-in
    (cpu), so are memory accesses (``bounds_check``).  ``extra`` holds backend-specific
    options as sorted ``(key, value)`` pairs.  ``enable_fp_fusion`` (Triton's option): a
    backend may compute a float ``a * b + c`` of the kernel's own arithmetic as one fused
    multiply-add, rounded once; with False every multiply and add is rounded on its own, as
    the reference interpreter computes them.  A backend is free not to fuse (cpu and OpenCL
    never do; the GPU code generator does, on NVIDIA and AMD)."""

    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    debug: bool = False
    extra: tuple = ()
    enable_fp_fusion: bool = True

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.extra).get(key, default)


@dataclass(frozen=True)
class DeviceInfo:
    """One device of a backend: ``name`` is what users type (``cuda:0``)."""

    name: str
    index: int
    description: str = ""
    properties: tuple = ()     # sorted (key, value) pairs: multiprocessor_count, warp_size, ...

    @property
    def props(self) -> dict[str, Any]:
        return dict(self.properties)


@dataclass(eq=False)
class Buffer:
    """A span of device memory owned by one backend.

    ``handle`` is the backend's own (a device address, an OpenCL buffer, a NumPy array);
    ``address`` is the flat device address when the backend has one; ``owner`` keeps an
    imported foreign object (a NumPy array, a torch tensor) alive."""

    device: DeviceInfo
    nbytes: int
    handle: Any
    address: Optional[int] = None
    owner: Any = None
    freed: bool = False


class PointerArg(NamedTuple):
    """A pointer argument: ``offset`` bytes into ``buffer``.  (A named tuple: launches build
    these on the hot path.)"""

    buffer: Buffer
    offset: int = 0

    @property
    def address(self) -> Optional[int]:
        return None if self.buffer.address is None else self.buffer.address + self.offset


class KernelArg(NamedTuple):
    """One runtime argument of a launch: its IR type and its value (a ``PointerArg`` for
    pointers, a Python ``int``/``float``/``bool`` for scalars)."""

    type: Type
    value: Any


class ImportedArray(NamedTuple):
    """A foreign array (NumPy, torch, cupy, ...) seen zero-copy as device memory.  (A named
    tuple: launches with foreign arrays build one per argument.)"""

    buffer: Buffer
    offset: int                    # bytes from the buffer's start to element 0
    shape: tuple[int, ...]
    strides: tuple[int, ...]       # in elements
    dtype: ScalarType


@dataclass(eq=False)
class KernelMetadata:
    """Facts about one compiled kernel, carried from its compile to its load and launch.

    Core fills ``name`` to ``num_stages`` and the timings; a backend's stages fill what its
    ``load`` and ``launch`` need and what users read (registers, spills); facts of its own go
    in ``extra``.  Every value is plain JSON data (the on-disk cache stores it).  Item access
    (``meta["shared"]``, ``meta.get(...)``, ``meta[k] = v``) reaches fields and ``extra``
    alike, so a backend may keep facts by name without declaring them."""

    name: str = ""
    target: str = ""
    num_warps: int = 4
    num_stages: int = 3
    kernel_name: str = ""          # the entry point's symbol in the binary
    threads_per_block: int = 0     # GPU threads of one program (0 where programs are not blocks)
    shared: int = 0                # bytes of dynamic shared memory one program needs
    registers: Optional[int] = None
    spills: Optional[int] = None
    asserts: list = field(default_factory=list)   # one entry per tl.device_assert, in id order
    compile_time_s: float = 0.0
    stage_times_s: dict = field(default_factory=dict)
    cache_hit_s: Optional[float] = None
    extra: dict = field(default_factory=dict)

    def _is_field(self, key: str) -> bool:
        return key != "extra" and key in _METADATA_FIELDS

    def __getitem__(self, key: str) -> Any:
        if self._is_field(key):
            return getattr(self, key)
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if self._is_field(key):
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __contains__(self, key: str) -> bool:
        return self._is_field(key) or key in self.extra

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def to_json(self) -> dict[str, Any]:
        """The facts as one JSON-ready dict (``extra``'s entries beside the fields)."""
        out = {name: getattr(self, name) for name in _METADATA_ORDER if name != "extra"}
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "KernelMetadata":
        """The inverse of ``to_json``."""
        meta = cls()
        for key, value in data.items():
            meta[key] = value
        return meta


_METADATA_ORDER = tuple(f.name for f in dataclasses.fields(KernelMetadata))
_METADATA_FIELDS = frozenset(_METADATA_ORDER)


#: Triton's launch and config options that tune performance for one vendor's hardware and
#: change no result: a backend that does not accept one (``extra_option_names``) ignores it
TUNING_HINTS = frozenset({
    "waves_per_eu", "matrix_instr_nonkdim", "kpack", "instruction_sched_variant",   # AMD
    "schedule_hint", "maxnreg", "launch_pdl",                                          # NVIDIA
})


@dataclass(frozen=True)
class Stage:
    """A named step of a backend's compile: ``run(previous_output, metadata) -> output``."""

    name: str
    run: Callable[[Any, KernelMetadata], Any]


@dataclass(eq=False)
class CompiledKernel:
    """A kernel compiled for one target: every stage's text or bytes in ``asm``, facts
    (registers, shared memory, launch configuration, ...) in ``metadata``."""

    name: str
    target: Target
    options: CompileOptions
    signature: list[tuple[str, Type]]        # the runtime parameters, constexprs removed
    constexprs: dict[str, Any]
    asm: dict[str, Any]
    metadata: KernelMetadata
    module: Module                            # device-independent IR after the generic passes
    binary: Any = None                        # the last stage's output (``module`` if none)
    #: set by the runtime for a kernel compiled by a launch or ``warmup``: ``launch(grid,
    #: args, kwargs)`` runs it again (``compiled[grid](*args)``, as Triton's handle does)
    launch: Optional[Callable[[Any, tuple, dict], Any]] = field(default=None, repr=False)

    @property
    def n_regs(self) -> Optional[int]:
        """Registers per thread, where the backend reports them (Triton's name)."""
        return self.metadata.registers

    @property
    def n_spills(self) -> Optional[int]:
        """Registers spilled per thread, where the backend reports them (Triton's name)."""
        return self.metadata.spills

    def _init_handles(self) -> None:
        """Triton's step that loads the binary before ``n_regs`` is read: here the backend
        reports registers and spills at compile time, and a kernel is loaded on its first
        launch, so there is nothing to do."""

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        """``compiled[grid](*args)``: launch with the arguments the kernel takes (its
        constexprs too, as with the ``@jit`` kernel), on the options it was compiled with."""
        if self.launch is None:
            raise BackendError(f"'{self.name}' was compiled ahead of time (at.compile): launch "
                               f"the @jit kernel instead")
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run kernels here, and why not when it cannot."""

    usable: bool
    reason: str = ""


class Backend(abc.ABC):
    """The base class of every backend.  Subclasses set the class attributes and implement
    the abstract methods; the defaults of the others are fine for most backends."""

    #: the entry-point name, also the ``Target.backend`` it compiles for
    name: ClassVar[str] = ""
    #: the version of this contract the backend was written for
    api_version: ClassVar[int] = API_VERSION
    #: what device names start with (``cuda`` gives ``cuda:0``)
    device_prefix: ClassVar[str] = ""
    #: optional features this backend supports (keys of ``CAPABILITIES``)
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: the version of the IR's op set this backend lowers (``anytile.ir.OP_SETS``; 1, the
    #: first release's ops, for a backend written before op sets had versions)
    op_set: ClassVar[int] = 1
    #: True for backends whose memory is the host's (NumPy arrays are used in place)
    host_memory: ClassVar[bool] = False
    #: what Triton programs see as ``get_current_target().backend`` on this backend's devices
    #: ("cuda", "hip"); a GPU backend whose devices torch reaches as ``cuda:N`` sets it; ""
    #: (the default) reads as "cpu", with torch tensors on the CPU (``anytile.triton_compat``)
    triton_backend: ClassVar[str] = ""

    # -- identity and availability --------------------------------------------------------------
    def version(self) -> str:
        """The version of the distribution that ships this backend."""
        module = type(self).__module__.split(".")[0]
        for dist, pkgs in _packages_distributions().items():
            if module in pkgs:
                try:
                    return importlib.metadata.version(dist)
                except importlib.metadata.PackageNotFoundError:
                    break
        return "unknown"

    @abc.abstractmethod
    def availability(self) -> Availability:
        """Whether kernels can run here (a driver and a device are present), and why not."""

    @abc.abstractmethod
    def devices(self) -> list[DeviceInfo]:
        """The devices usable now (empty when unavailable)."""

    def describe(self) -> dict[str, Any]:
        """Extra facts for ``anytile backends`` (CPU name, vector width, driver version...)."""
        return {}

    def lowered_ops(self) -> frozenset[str]:
        """The names of the IR ops this backend lowers: core compiles for it only kernels
        whose IR (after core's passes) holds no other op.  By default the ops of
        ``op_set``, and ``print`` for a backend of op set 1 that declares ``device_print``
        (which said so before op sets had versions); override it to lower fewer, or to
        name your own (added within version 1)."""
        ops = ops_of_version(self.op_set)
        if "device_print" in self.capabilities:
            ops = ops | {"print"}
        return ops

    def device_capabilities(self, device: DeviceInfo) -> frozenset[str]:
        """The optional features (keys of ``CAPABILITIES``) that work on ``device``: the
        class's ``capabilities`` unless a backend's devices differ (added within version 1)."""
        return frozenset(self.capabilities)

    # -- compilation ---------------------------------------------------------------------------
    @abc.abstractmethod
    def targets(self) -> list[str]:
        """Architectures this backend can compile for without a device (``["sm_80", ...]``)."""

    def supports_target(self, arch: str) -> bool:
        """Whether ``arch`` is one this backend compiles for (``at.compile`` asks); by default
        one of ``targets()``.  A backend whose architectures are descriptions with
        parameters (OpenCL's) accepts every well-formed one."""
        return arch in self.targets()

    @abc.abstractmethod
    def target_of(self, device: DeviceInfo) -> Target:
        """The target to compile for to run on ``device``."""

    def parse_options(self, **options: Any) -> CompileOptions:
        """Launch keyword options -> ``CompileOptions``.  Unknown keys raise
        ``LaunchArgumentError`` unless the backend accepts them (override
        ``extra_option_names``) or they are one of ``TUNING_HINTS`` (another vendor's
        performance hint, which a backend that does not accept it ignores, as Triton's
        backends do, so that one config list serves every device); bad values
        ``LaunchValueError``.  ``debug`` missing or
        ``None`` is ``debug_default()`` (``ANYTILE_DEBUG``), ``enable_fp_fusion`` missing or
        ``None`` is ``fp_fusion_default()`` (``ANYTILE_DEFAULT_FP_FUSION``)."""
        known = {f.name for f in dataclasses.fields(CompileOptions)} - {"extra"}
        base = {k: v for k, v in options.items() if k in known}
        base["debug"] = debug_default() if base.get("debug") is None else bool(base["debug"])
        fusion = base.get("enable_fp_fusion")
        if fusion is None:
            base["enable_fp_fusion"] = fp_fusion_default()
        elif not isinstance(fusion, (numbers.Integral, np.bool_)) or fusion not in (0, 1):
            raise LaunchValueError(f"option enable_fp_fusion={fusion!r}: expected True or False")
        else:
            base["enable_fp_fusion"] = bool(fusion)
        accepted = set(self.extra_option_names())
        extra = {k: v for k, v in options.items() if k not in known and
                 (k in accepted or k not in TUNING_HINTS)}    # another vendor's hint: ignored
        unknown = set(extra) - accepted
        if unknown:
            raise LaunchArgumentError(
                f"backend '{self.name}' has no option(s) {sorted(unknown)}; "
                f"known: {sorted(known | set(self.extra_option_names()))}")
        for name in ("num_warps", "num_stages", "num_ctas"):
            value = base.get(name)
            if value is not None and (type(value) is not int or value < 1):
                raise LaunchValueError(f"option {name}={value!r}: expected a positive int")
        nw = base.get("num_warps", 4)
        if nw & (nw - 1):
            raise LaunchValueError(f"option num_warps={nw!r}: expected a power of 2 (1, 2, 4, 8...)")
        if base.get("num_ctas", 1) != 1:
            raise LaunchValueError(f"option num_ctas={base['num_ctas']!r}: thread-block clusters "
                                   f"are not supported; use num_ctas=1")
        return CompileOptions(**base, extra=tuple(sorted(extra.items())))

    def extra_option_names(self) -> Sequence[str]:
        """Backend-specific launch options this backend accepts."""
        return ()

    @abc.abstractmethod
    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        """The ordered compile stages after ``ir`` (may be empty for an IR interpreter)."""

    # -- running -------------------------------------------------------------------------------
    @abc.abstractmethod
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> Any:
        """Make ``kernel`` launchable on ``device``; the result is passed to ``launch``."""

    @abc.abstractmethod
    def launch(self, loaded: Any, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        """Run the loaded kernel over ``grid`` programs with ``args`` (one per runtime
        parameter, in signature order).  Errors found while running raise ``LaunchError``."""

    def synchronize(self, device: DeviceInfo) -> None:
        """Wait until all work queued on ``device`` is done."""

    # -- memory --------------------------------------------------------------------------------
    @abc.abstractmethod
    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        """``nbytes`` of uninitialised device memory, aligned to at least 256 bytes."""

    @abc.abstractmethod
    def free(self, buffer: Buffer) -> None:
        """Release memory made by ``alloc`` (never called for imported buffers)."""

    @abc.abstractmethod
    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        """Copy the C-contiguous ``host`` array's bytes to ``buffer`` at byte ``offset``."""

    @abc.abstractmethod
    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        """Fill the C-contiguous ``host`` array from ``buffer`` at byte ``offset``."""

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """See a foreign array in place, or return ``None`` when this backend cannot
        (``host_array_view`` does the work for host-memory backends; GPU backends read
        ``__cuda_array_interface__``, DLPack, ...).  Runs on every launch that passes a
        foreign array: keep it cheap."""
        return None

    def device_of_foreign(self, obj: Any) -> Optional[DeviceInfo]:
        """The device of this backend on which the foreign array ``obj`` (a torch or cupy
        GPU tensor, say) lives, or ``None``.  A launch whose arrays are all foreign runs
        there; host-memory backends need not override it."""
        return None

    # -- optional fast paths (added to version 1; a backend that leaves them alone keeps the
    # -- general path above, so older plugins work unchanged) ---------------------------------
    #: True when ``load`` needs only ``asm`` (text or bytes), ``metadata`` (JSON values) and
    #: ``signature``: compiled kernels may then be kept in the on-disk compile cache
    disk_cacheable: ClassVar[bool] = False

    def cache_facts(self, target: Target) -> str:
        """What, besides anytile's and this backend's source, the compiled code depends on
        (tool versions: ``ptxas``, LLVM); part of the on-disk cache key."""
        return ""

    def foreign_reader(self, cls: type) -> Optional[Callable[[Any], tuple[Any, Any]]]:
        """For launches without per-launch imports: a function reading an instance of the
        foreign array type ``cls`` (a torch tensor class, say) as ``(address, key)``, or
        ``None`` (the default: every launch goes through ``import_array``).

        ``address`` is the device address of element 0; ``key`` is hashable and equal for two
        objects only when ``device_of_foreign`` and ``import_array`` would treat them alike
        (same dtype, same device, both importable in place or both not) and their addresses
        are alike modulo 16.  Runs on every launch: keep it to a few attribute reads."""
        return None

    def timer(self, device: DeviceInfo) -> "DeviceTimer":
        """A timer of the work queued on ``device`` (``anytile.testing.do_bench``, the
        profiler, autotuning).  The default reads the host clock around ``synchronize``; a
        backend with device events returns its own ``DeviceTimer`` (added within version 1)."""
        return DeviceTimer(self, device)

    def launcher(self, loaded: Any, device: DeviceInfo) -> Optional[Callable[..., None]]:
        """For cheap launches: a function ``run(grid_x, grid_y, grid_z, stream, owner,
        *values)`` that launches ``loaded`` like ``launch`` does, with one raw value per
        runtime parameter in signature order (the ``int`` device address of element 0 for a
        pointer; a Python ``int``/``float``/``bool`` for a scalar), or ``None`` (the default:
        core calls ``launch``).  ``stream`` is as for ``launch``; when it is ``None``,
        ``owner`` is the foreign array (if any) the first pointer argument was imported
        from, so the backend may pick that framework's current stream."""
        return None

    def copy_between(self, dst: Buffer, dst_offset: int, src: Buffer, src_offset: int,
                     nbytes: int) -> bool:
        """Copy ``nbytes`` from ``src`` at byte ``src_offset`` to ``dst`` at ``dst_offset``,
        both buffers of this backend, possibly on two of its devices, after the work queued
        on both; ``False`` (the default) when this backend cannot, and core copies through
        the host (added within version 1)."""
        return False


def check_lowered_ops(backend: Backend, module: Module, kernel: str) -> None:
    """Raise ``CompilationError`` at the first op of ``module`` (the IR of the kernel named
    ``kernel``) that ``backend`` does not lower (``Backend.lowered_ops``): the message names
    the op as the user wrote it, the backend and what it lowers, and points at the op's
    line.  Ops that only state facts (``DROPPABLE_OPS``: ``assume``) that the backend does not
    lower are removed from ``module`` instead.  A backend whose declaration cannot be read is
    a ``BackendError``."""
    try:
        lowered = frozenset(backend.lowered_ops())
    except Exception as exc:  # noqa: BLE001 -- a plugin's mistake, reported as its own
        raise BackendError(f"backend '{backend.name}' does not say which IR ops it lowers: "
                           f"{type(exc).__name__}: {exc} (op_set must be an op set version, "
                           f"lowered_ops() a set of op names)") from None
    if DROPPABLE_OPS - lowered:
        drop_ops(module, DROPPABLE_OPS - lowered)
    op = first_op_outside(module, lowered)
    if op is not None:
        raise _unlowered(backend, op, kernel)


def _unlowered(backend: Backend, op: Op, kernel: str) -> CompilationError:
    """The error for ``op``, which ``backend`` does not lower, in the kernel ``kernel``."""
    spelled = spelling_of(op.NAME)
    what = spelled if spelled else f"the IR op '{op.NAME}'"
    version = backend.op_set
    if type(backend).lowered_ops is not Backend.lowered_ops:
        declared = "its lowered_ops() leave it out"
    else:
        declared = f"it lowers the ops of op set {version}"
        since = version_with(op.NAME)
        if since is not None and isinstance(version, int) and since > version:
            declared += f"; '{op.NAME}' arrived in op set {since}"
    message = (f"{what} is not supported on backend '{backend.name}': kernel '{kernel}' needs "
               f"the IR op '{op.NAME}', which the backend does not lower ({declared}).  Run "
               f"the kernel on a backend that lowers it (the interpreter lowers every op), or "
               f"remove it for this one")
    if not op.loc.line:
        return CompilationError(message)
    return CompilationError(message, op.loc, linecache.getline(op.loc.file, op.loc.line) or None)


class DeviceTimer:
    """Times the work queued on one device between ``start()`` and ``stop()``;
    ``elapsed_ms()`` waits for that work.  This default waits for the device at both ends and
    reads the host's clock (right for host devices; on a GPU it also counts the launch)."""

    def __init__(self, backend: "Backend", device: DeviceInfo) -> None:
        self._backend, self._device = backend, device
        self._began = self._ended = 0.0

    def start(self) -> None:
        self._backend.synchronize(self._device)
        self._began = time.perf_counter()

    def stop(self) -> None:
        self._backend.synchronize(self._device)
        self._ended = time.perf_counter()

    def elapsed_ms(self) -> float:
        return (self._ended - self._began) * 1e3


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    # scanning every installed distribution takes seconds on a big environment: once only
    inverted: dict[str, list[str]] = {}
    for pkg, dists in importlib.metadata.packages_distributions().items():
        for d in dists:
            inverted.setdefault(d, []).append(pkg)
    return inverted


def numpy_view_of(host: np.ndarray) -> np.ndarray:
    """``host`` as a flat C-contiguous ``uint8`` view (helper for ``copy_*`` methods)."""
    return np.ascontiguousarray(host).reshape(-1).view(np.uint8)



# -- helpers for host-memory backends -----------------------------------------------------------
@dataclass(frozen=True)
class HostArrayView:
    """A host array (NumPy, buffer protocol, CPU torch tensor) seen in place.

    ``span`` is a ``uint8`` view of every byte the array's elements occupy (negative strides
    included) and is writeable only when the array is; ``offset`` is the byte position of
    element 0 in ``span``; ``strides`` are in elements."""

    array: np.ndarray
    span: np.ndarray
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: ScalarType

    @property
    def address(self) -> int:
        """The host address of ``span[0]``."""
        return int(self.span.__array_interface__["data"][0])


def host_array_view(obj: Any) -> Optional[HostArrayView]:
    """``obj`` seen zero-copy as host memory, or ``None`` when that would need a copy (a
    device tensor, a dtype anytile lacks, strides that are not whole elements).  Host-memory
    backends build their ``import_array`` on this."""
    arr = _host_numpy(obj)
    if arr is None:
        return None
    try:
        dtype = from_numpy(arr.dtype)
    except TypeError:
        return None
    item = arr.itemsize
    if any(s % item for s in arr.strides):
        return None
    if arr.size == 0:
        span, offset = np.zeros(0, np.uint8), 0
    else:
        low = sum(min(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides)) + item
        start = arr.__array_interface__["data"][0]
        span = np.asarray(_RawBytes(arr, start + low, high - low, not arr.flags.writeable))
        offset = -low
    return HostArrayView(arr, span, offset, tuple(arr.shape),
                         tuple(s // item for s in arr.strides), dtype)


class _RawBytes:
    """Exposes ``nbytes`` bytes at ``address`` to NumPy, keeping ``owner`` alive."""

    def __init__(self, owner: Any, address: int, nbytes: int, readonly: bool) -> None:
        self.owner = owner
        self.__array_interface__ = {"data": (address, readonly), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}


def _host_numpy(obj: Any) -> Optional[np.ndarray]:
    """``obj`` as a NumPy array over the same memory, or ``None`` if that needs a copy."""
    if isinstance(obj, np.ndarray):
        return obj
    if isinstance(obj, np.generic):
        return None
    if type(obj).__module__.startswith("torch"):
        return _torch_host_numpy(obj)
    if hasattr(obj, "__array_interface__"):
        try:
            arr = np.asarray(obj)
        except (TypeError, ValueError):   # a typestr NumPy cannot read back ("<f1": float8)
            arr = None
        if (arr is None or arr.dtype.kind == "V") and hasattr(obj, "__array__"):
            arr = obj.__array__()         # the object's own view (ml_dtypes' float8, bf16)
        return arr if isinstance(arr, np.ndarray) else None
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        return None


_TORCH_BITS = {"torch.bfloat16": ("int16", ml_dtypes.bfloat16),
               "torch.float8_e4m3fn": ("uint8", ml_dtypes.float8_e4m3fn),
               "torch.float8_e5m2": ("uint8", ml_dtypes.float8_e5m2)}


def _torch_host_numpy(tensor: Any) -> Optional[np.ndarray]:
    try:
        if tensor.device.type != "cpu":
            return None
        tensor = tensor.detach()
        bits = _TORCH_BITS.get(str(tensor.dtype))
        if bits is not None:        # NumPy has no bf16 or float8: reinterpret the bits
            import torch
            width, dtype = bits
            return tensor.view(getattr(torch, width)).numpy().view(dtype)
        return tensor.numpy()
    except (AttributeError, TypeError, RuntimeError):
        return None
