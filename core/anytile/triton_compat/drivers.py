"""What Triton programs ask of the device: ``GPUTarget``, ``device_properties`` under Triton's
names, and the drivers of ``triton.runtime.driver`` and ``triton.backends.driver`` (one a
device family: NVIDIA, AMD, and the host devices)."""
from __future__ import annotations

import abc
import dataclasses
import functools
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import BackendError
from .standin import StandInModule

__all__ = ["GPUTarget", "arch_name", "device_properties", "host_registers", "core_cache_bytes",
           "host_kernel_view", "default_device", "target_of", "family_of",
           "family_device", "TRITON_BACKEND_NAMES", "DriverBase", "GPUDriver", "CudaDriver",
           "HIPDriver", "CPUDriver", "DRIVERS", "DriverConfig"]


@dataclass(frozen=True)
class GPUTarget:
    """``driver.active.get_current_target()``: ``backend`` is ``"cuda"``, ``"hip"`` or
    ``"cpu"`` (every host device, OpenCL included), ``arch`` the compute capability as an int
    (``90``), the gfx name (``"gfx942"``) or the host CPU's name, ``warp_size`` threads per
    warp (1 on host devices: a program is one thread there)."""

    backend: str
    arch: Any
    warp_size: int


def default_device() -> Any:
    import anytile as at
    return at.default_device()


def target_of(dev: Any) -> GPUTarget:
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


def arch_name(target: GPUTarget) -> str:
    """The architecture of ``target`` as anytile's backends name it (``at.compile``'s
    ``"backend:arch"``): ``sm_90`` for cuda 90, the gfx name for hip (``target_of`` reversed)."""
    return f"sm_{target.arch}" if target.backend == "cuda" else str(target.arch)


def device_properties(dev: Any = None) -> dict[str, Any]:
    """A device's properties under the names Triton programs read (``multiprocessor_count``,
    ``max_shared_mem``, ``max_num_regs``, ``warpSize``, ``max_threads_per_sm``, ``sm_clock_rate``,
    ``mem_clock_rate``, ``mem_bus_width``), from what its backend reports.  On host devices a
    multiprocessor is a core (an OpenCL compute unit) running one program at a time, a warp
    one thread, shared memory the device's local memory (OpenCL) or the core's L2 cache, and
    the registers the 32-bit lanes of the core's vector registers (``host_registers``); a
    host kernel's Triton metadata gives each program all of both (``host_kernel_view``)."""
    dev = dev if dev is not None else default_device()
    p = dev.properties
    gpu = bool(dev.backend.triton_backend)
    units = p.get("multiprocessor_count") or p.get("cores") or p.get("compute_units") or 1
    smem = (p.get("max_shared_memory_per_block_optin") or p.get("max_shared_memory_per_block")
            or p.get("local_mem_size") or (0 if gpu else core_cache_bytes()))
    regs = (p.get("max_registers_per_multiprocessor") or p.get("max_registers_per_block")
            or (0 if gpu else host_registers(dev)))
    return {
        "multiprocessor_count": int(units),
        "max_shared_mem": int(smem),
        "max_num_regs": int(regs),
        "warpSize": target_of(dev).warp_size,
        "max_threads_per_sm": int(p.get("max_threads_per_multiprocessor")
                                  or p.get("max_threads_per_block") or (2048 if gpu else 1)),
        "sm_clock_rate": int(p.get("clock_rate_khz") or 0),
        "mem_clock_rate": int(p.get("memory_clock_rate_khz") or 0),
        "mem_bus_width": int(p.get("memory_bus_width") or 0),
    }


def host_registers(dev: Any) -> int:
    """The 32-bit lanes of one host core's vector registers: its architectural vector
    registers (16 on x86-64 below AVX-512, else 32) times their width (the device's
    ``vector_bits``; 128, the x86-64 and Arm baseline, where it does not say)."""
    bits = int(dev.properties.get("vector_bits") or 128)
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
    return (16 if x86 and bits < 512 else 32) * bits // 32


#: one core's L2 cache where the system does not say (Linux: sysfs)
CORE_CACHE_FALLBACK = 256 * 1024


@functools.lru_cache(maxsize=None)
def core_cache_bytes() -> int:
    """The host's per-core L2 cache in bytes (``CORE_CACHE_FALLBACK`` where unknown)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            text = f.read().strip().upper()
    except OSError:
        return CORE_CACHE_FALLBACK
    scale = {"K": 1024, "M": 1024 ** 2}.get(text[-1:], 1)
    digits = text.rstrip("KM")
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else CORE_CACHE_FALLBACK


def host_kernel_view(compiled: Any, dev: Any) -> Any:
    """``compiled`` (a kernel compiled for ``dev``) as Triton programs read it: on a host
    device, where a core runs one program at a time, the program holds all of the core's
    registers (``n_regs``: ``max_num_regs`` over its ``warpSize * num_warps`` threads) and
    its shared memory (``metadata.shared``: ``max_shared_mem``), so Triton's occupancy
    formulas give one program per core; GPU kernels are returned as they are."""
    if dev.backend.triton_backend:
        return compiled
    props = device_properties(dev)
    threads = props["warpSize"] * max(1, int(compiled.metadata.num_warps))
    metadata = dataclasses.replace(compiled.metadata, shared=props["max_shared_mem"],
                                   registers=max(1, props["max_num_regs"] // threads))
    return dataclasses.replace(compiled, metadata=metadata)


def _torch_device(dev: Any) -> Any:
    import torch
    if dev.backend.triton_backend:
        return torch.device("cuda", dev.index)
    return torch.device("cpu")


# -- drivers: Triton's view of a family of devices (triton.backends, triton.runtime.driver) -----
#: the Triton backend name of each device family (a device's ``backend.triton_backend``, or
#: ``"cpu"`` for every host device: cpu, the interpreter, OpenCL on the CPU)
TRITON_BACKEND_NAMES = {"cuda": "nvidia", "hip": "amd", "cpu": "cpu"}


def family_of(dev: Any) -> str:
    return dev.backend.triton_backend or "cpu"


def family_device(family: str) -> Any:
    """The device a family's driver speaks for: the default device when it is of that
    family, else the family's first usable device."""
    import anytile as at
    dev = default_device()
    if family_of(dev) == family:
        return dev
    for candidate in at.devices():
        if family_of(candidate) == family:
            return candidate
    raise at.AnytileError(f"no usable {TRITON_BACKEND_NAMES[family]} device here "
                          f"(`anytile backends` says why)")


_SAID: set = set()


def _say_why_the_chosen_device_is_missing() -> str:
    """When the device chosen for this process (``ANYTILE_DEVICE``, which ``anytile run
    --device`` hands to every child: torch's compile workers, a multiprocessing pool) has no
    usable backend here, say why on stderr, once (a program learns only that no driver is
    active).  Returns the Triton family of that device's backend ("" when none is loaded or
    the device is usable)."""
    from ..runtime.discovery import list_backends
    chosen = os.environ.get("ANYTILE_DEVICE", "")
    prefix = chosen.partition(":")[0]
    if not prefix:
        return ""
    reasons, family = [], ""
    for record in list_backends():
        backend = record.backend
        if backend is None:
            reasons.append(f"{record.name}: {record.error}")
        elif backend.device_prefix == prefix and not record.availability.usable:
            reasons.append(f"{record.name}: {record.availability.reason}")
            family = backend.triton_backend or "cpu"
        elif backend.device_prefix == prefix:
            return ""                               # it is there: another family was asked
    if prefix not in _SAID:
        _SAID.add(prefix)
        sys.stderr.write(f"anytile: the chosen device {chosen} is not usable in this process "
                         f"(pid {os.getpid()}): {'; '.join(reasons) or 'no backend has it'}\n")
    return family


class _DriverUtils:
    """``driver.active.utils``: device properties under Triton's names, and Triton 3.2-3.3's
    host-filled TMA descriptors (``runtime/host_descriptors``)."""

    def __init__(self, family: str) -> None:
        self._family = family

    def get_device_properties(self, index: int = 0) -> dict[str, Any]:
        dev = family_device(self._family)
        if index not in (None, dev.index):
            import anytile as at
            dev = at.device(f"{dev.backend.device_prefix}:{index}")
        return device_properties(dev)

    @staticmethod
    def fill_1d_tma_descriptor(ptr: int, dim: int, block_dim: int, element_size: int,
                               desc: int) -> None:
        from ..runtime import host_descriptors as hd
        hd.fill_descriptor(ptr, [dim], [block_dim], element_size, desc)

    @staticmethod
    def fill_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int, block_dim0: int,
                               element_size: int, desc: int) -> None:
        from ..runtime import host_descriptors as hd
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
        """A device of the family is usable here, or the device chosen for this process
        (``ANYTILE_DEVICE``) is of the family though this process cannot run kernels on it:
        torch's compile workers, forked after CUDA was initialised, compile for a target
        their parent gives them and never launch (``get_current_target`` then says why no
        device answers)."""
        import anytile as at
        if any(family_of(d) == cls.family for d in at.devices()):
            return True
        return _say_why_the_chosen_device_is_missing() == cls.family

    def get_current_target(self) -> "GPUTarget":
        return target_of(family_device(self.family))

    def get_active_torch_device(self) -> Any:
        return _torch_device(family_device(self.family))

    def get_current_device(self) -> int:
        return family_device(self.family).index

    def set_current_device(self, index: int) -> None:
        """Make device ``index`` of the family the default device (``ANYTILE_DEVICE``)."""
        os.environ["ANYTILE_DEVICE"] = f"{family_device(self.family).backend.device_prefix}:{index}"

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


DRIVERS: dict[str, type[_FamilyDriver]] = {"cuda": CudaDriver, "hip": HIPDriver,
                                            "cpu": CPUDriver}


class DriverConfig(StandInModule):
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
            self._made[family] = DRIVERS[family]()
        return self._made[family]

    @property
    def default(self) -> DriverBase:
        try:
            return self._of(family_of(default_device()))
        except BackendError:
            # the chosen device is unusable in this process (a compile worker forked after
            # CUDA was initialised): its family's driver still answers what needs no device
            family = _say_why_the_chosen_device_is_missing()
            if not family:
                raise
            return self._of(family)

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

