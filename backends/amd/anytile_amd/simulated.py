"""``amdsim64`` and ``amdsim32``: the AMD backend's lowering run on the host CPU.

The GPU compile pipeline runs as for AMD, at waves of 64 with gfx942's tables (MFMA) and at
waves of 32 with gfx1100's (WMMA), and with the AMD hooks that are not hardware: the choice
and composition of cross-lane moves (``exchange.py``: DPP, ``v_permlanex16``,
``ds_bpermute``, ``v_readlane``) and the math library (``math.py``).  The moves themselves
are executed here from their definitions, lane by lane, on the simulator's generic lane
exchange; MFMA and WMMA run from their fragment maps (core's simulator); ids, barriers and
atomics are the simulator's.  So the conformance suite checks the AMD lowering on a
machine without an AMD GPU::

    ANYTILE_GPU_SIMULATOR=1 anytile conformance --device amdsim64:0
    ANYTILE_GPU_SIMULATOR=1 anytile conformance --device amdsim32:0

Opt-in, as ``gpusim`` is (core's ``SimulatedBackend``).
"""
from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir

from anytile.codegen.gpu.simulated_backend import SimulatedBackend

from .archs import KNOWN_ARCHS, AmdArch
from .backend import AmdBackend
from .exchange import PERMLANE_IDENTITY, ROW_HALF_MIRROR, ROW_MIRROR, ROW_ROR, ROW_XMASK

__all__ = ["SimulatedWave64Backend", "SimulatedWave32Backend", "simulated_amd_target"]

I32 = ir.IntType(32)


def simulated_amd_target(arch: "AmdArch | str") -> Any:
    """The host simulator's target with ``arch``'s wave size, matrix instructions, cross-lane
    choices (their moves executed lane by lane) and math library."""
    from anytile.codegen.gpu.simulator import SimulatedGpuTarget

    from .exchange import CrossLane
    from .math import MathLibrary

    class SimulatedAmdTarget(CrossLane, SimulatedGpuTarget):
        has_printf = False      # as the AMD target: no device printf yet
        name = "AMD GPUs (simulated)"

        def __init__(self, arch: AmdArch) -> None:
            SimulatedGpuTarget.__init__(self, arch.wave_size, arch.matrix_instrs,
                                        async_copy_sizes=())
            self.arch = arch
            self.math_library = MathLibrary()

        def _from_lane(self, b: ir.IRBuilder, value: ir.Value,
                       source: Callable[[ir.Value], ir.Value]) -> ir.Value:
            """Every lane gets ``value`` of lane ``source(lane)`` of its wave."""
            return SimulatedGpuTarget.shuffle_idx(self, b, value, source(self.lane_id(b)))

        def lane_id(self, b: ir.IRBuilder) -> ir.Value:
            return b.and_(self.thread_id(b), ir.Constant(I32, self.warp_size - 1))

        def dpp(self, b: ir.IRBuilder, value: ir.Value, ctrl: int) -> ir.Value:
            return self._from_lane(b, value, lambda lane: dpp_source(b, ctrl, lane))

        def bpermute(self, b: ir.IRBuilder, value: ir.Value, address: ir.Value) -> ir.Value:
            mask = ir.Constant(I32, self.warp_size - 1)
            return self._from_lane(b, value, lambda lane: b.and_(b.lshr(address, ir.Constant(I32, 2)), mask))

        def permlanex16(self, b: ir.IRBuilder, value: ir.Value) -> ir.Value:
            return self._from_lane(b, value, lambda lane: permlanex16_source(b, lane))

        def readlane(self, b: ir.IRBuilder, value: ir.Value, lane: int) -> ir.Value:
            return self._from_lane(b, value, lambda _: ir.Constant(I32, lane))

        def math(self, b: ir.IRBuilder, kind: str, x: ir.Value) -> Any:
            return self.math_library.emit(b, kind, x)

    return SimulatedAmdTarget(arch if isinstance(arch, AmdArch) else KNOWN_ARCHS[arch])


def dpp_source(b: ir.IRBuilder, ctrl: int, lane: ir.Value) -> ir.Value:
    """The lane DPP control ``ctrl`` reads for ``lane`` (an i32), as the ISA defines the
    controls the backend emits (``exchange.dpp_source_lane`` is the same in Python)."""
    k = lambda v: ir.Constant(I32, v)  # noqa: E731
    row_start, i = b.and_(lane, k(~15)), b.and_(lane, k(15))
    if ctrl <= 0xFF:       # quad_perm: two bits of ctrl per lane of the quad
        pick = b.and_(b.lshr(k(ctrl), b.shl(b.and_(lane, k(3)), k(1))), k(3))
        return b.or_(b.and_(lane, k(~3)), pick)
    if ROW_ROR < ctrl <= ROW_ROR + 15:
        return b.or_(row_start, b.and_(b.sub(i, k(ctrl - ROW_ROR)), k(15)))
    if ctrl == ROW_MIRROR:
        return b.or_(row_start, b.sub(k(15), i))
    if ctrl == ROW_HALF_MIRROR:
        return b.or_(b.and_(lane, k(~7)), b.sub(k(7), b.and_(lane, k(7))))
    if ROW_XMASK <= ctrl <= ROW_XMASK + 15:
        return b.or_(row_start, b.xor(i, k(ctrl - ROW_XMASK)))
    raise ValueError(f"DPP control 0x{ctrl:x} is not one the backend emits")


def permlanex16_source(b: ir.IRBuilder, lane: ir.Value) -> ir.Value:
    """``v_permlanex16`` with the identity selects: lane ``i`` of a 16-lane row reads lane
    ``sel[i]`` of the other row, ``sel`` four bits a lane (``PERMLANE_IDENTITY``)."""
    k = lambda v: ir.Constant(I32, v)  # noqa: E731
    lo, hi = PERMLANE_IDENTITY
    i = b.and_(lane, k(15))
    word = b.select(b.icmp_unsigned("<", i, k(8)), k(lo), k(hi - (1 << 32)))
    sel = b.and_(b.lshr(word, b.shl(b.and_(i, k(7)), k(2))), k(15))
    other_row = b.xor(b.and_(lane, k(~15)), k(16))
    return b.or_(other_row, sel)


class _SimulatedAmd(SimulatedBackend):
    capabilities = frozenset({"fp64", "fp16", "bf16", "fp8", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert", "bounds_check"})
    op_set = 1                       # the IR ops it lowers: no print (no device printf yet)
    arch = "gfx942"
    lowered_ops = AmdBackend.lowered_ops    # the same ops as the real devices'

    def simulated_target(self) -> Any:
        return simulated_amd_target(self.arch)


class SimulatedWave64Backend(_SimulatedAmd):
    """The AMD lowering at waves of 64 (gfx942's MFMA table), on the host."""

    name = device_prefix = "amdsim64"
    arch = "gfx942"
    warp_size = 64
    description = "AMD lowering (gfx942, wave64) simulated on the host"


class SimulatedWave32Backend(_SimulatedAmd):
    """The AMD lowering at waves of 32 (gfx1100's WMMA table), on the host."""

    name = device_prefix = "amdsim32"
    arch = "gfx1100"
    warp_size = 32
    description = "AMD lowering (gfx1100, wave32) simulated on the host"
