"""What code generation needs to know about an OpenCL device, as a target architecture string.

The OpenCL C a kernel becomes depends on a few facts of the device it will run on: whether
its work-items are host threads (a CPU) or SIMD lanes (a GPU), its SIMD width, how wide a
vector to use, how much ``__local`` memory one work-group gets, and which optional extensions
(``cl_khr_fp64``, 64-bit atomics) it has.  ``OpenCLArch`` holds them and prints as the
``Target.arch`` string, so a kernel can be compiled ahead of time for a device that is not
present (``at.compile(..., target="opencl:gpu-s32-v4-l48k-g1024+fp64+a64")``)::

    cpu-s1-v16-l1024k-g4096+fp64+a64+a64x
    ^kind ^SIMD ^vector ^local memory ^largest work-group, then the extensions:
    fp64 = cl_khr_fp64, a64 = cl_khr_int64_base_atomics, a64x = cl_khr_int64_extended_atomics

The layout policy (``work_items``, ``vector``) lives here too: one work-group runs one program;
on a CPU one work-item holds the whole tile in wide vectors (PoCL runs explicit ``float16``
code far faster than many scalar work-items), on a GPU ``num_warps x SIMD width`` work-items
each hold small vectors.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["OpenCLArch", "GENERIC_ARCHES"]

_ARCH = re.compile(r"^(cpu|gpu)-s(\d+)-v(\d+)-l(\d+)k-g(\d+)((?:\+[a-z0-9]+)*)$")
_EXTENSION_FLAGS = ("fp64", "a64", "a64x")


@dataclass(frozen=True)
class OpenCLArch:
    """The device facts code generation depends on (see the module docstring)."""

    kind: str                    # "cpu" or "gpu"
    simd: int                    # work-items that run in lock step (a warp); 1 on CPUs
    vector: int                  # elements per work-item vector (a power of 2, <= 16)
    local_kib: int               # __local memory one work-group may use, KiB
    max_group: int               # the largest work-group
    fp64: bool = False           # cl_khr_fp64
    atomics64: bool = False      # cl_khr_int64_base_atomics (add, xchg, cmpxchg)
    atomics64_ext: bool = False  # cl_khr_int64_extended_atomics (min, max, and, or, xor)

    def __post_init__(self) -> None:
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"OpenCL device kind must be cpu or gpu, got {self.kind!r}")
        if self.vector not in (1, 2, 4, 8, 16):
            raise ValueError(f"vector width must be 1, 2, 4, 8 or 16, got {self.vector}")
        if self.simd < 1 or self.max_group < 1:
            raise ValueError("SIMD width and work-group size must be positive")

    def __str__(self) -> str:
        flags = [f for f, on in zip(_EXTENSION_FLAGS, (self.fp64, self.atomics64, self.atomics64_ext))
                 if on]
        return (f"{self.kind}-s{self.simd}-v{self.vector}-l{self.local_kib}k-g{self.max_group}"
                + "".join("+" + f for f in flags))

    @staticmethod
    def parse(text: str) -> "OpenCLArch":
        """The inverse of ``str``; raises ``ValueError`` naming the expected form."""
        m = _ARCH.match(text.strip())
        if not m:
            raise ValueError(f"OpenCL target {text!r} is not of the form "
                             f"KIND-sSIMD-vVECTOR-lKIBk-gGROUP[+fp64][+a64][+a64x], "
                             f"e.g. {GENERIC_ARCHES[1]}")
        flags = set(m.group(6).split("+")[1:])
        unknown = flags - set(_EXTENSION_FLAGS)
        if unknown:
            raise ValueError(f"OpenCL target {text!r}: unknown flag(s) {sorted(unknown)}; "
                             f"known: {list(_EXTENSION_FLAGS)}")
        return OpenCLArch(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                          int(m.group(5)), "fp64" in flags, "a64" in flags, "a64x" in flags)

    @property
    def local_bytes(self) -> int:
        return self.local_kib * 1024

    def work_items(self, num_warps: int) -> int:
        """Work-items of one program: 1 on a CPU, ``num_warps`` SIMD groups on a GPU."""
        if self.kind == "cpu":
            return 1
        n = 1
        while n * 2 <= min(num_warps * self.simd, self.max_group):
            n *= 2
        return n


GENERIC_ARCHES = (
    "cpu-s1-v16-l64k-g1024+fp64+a64+a64x",    # AVX-512 class CPUs (PoCL)
    "gpu-s32-v4-l48k-g1024+fp64+a64+a64x",    # NVIDIA GPUs
    "gpu-s64-v4-l64k-g256+fp64+a64+a64x",     # AMD GPUs
    "gpu-s16-v4-l64k-g256",                   # small GPUs without fp64 (ARM Mali, Intel iGPUs)
)
