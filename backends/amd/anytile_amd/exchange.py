"""Cross-lane exchange on AMD GPUs: ``shuffle_xor`` and ``shuffle_idx`` built from the
architecture's lane-permuting instructions ("leaves").

``CrossLane`` chooses the leaves per architecture (an intrinsic an architecture lacks aborts
LLVM, so the choice is made here, in Python):

* xor within a row of 16 lanes: DPP.  ``quad_perm`` for xor 1-3 everywhere; on GFX10+ one
  ``row_xmask``; on GFX9 ``row_ror:8`` (xor 8), ``row_half_mirror`` (xor 7) or
  ``row_mirror`` (xor 15), followed by a ``quad_perm`` for the low bits;
* xor 16: ``v_permlanex16`` (the rows swap, lane for lane) on GFX10+; xor 16 and 32 on
  GFX9: ``ds_bpermute`` (the LDS crossbar, no LDS memory used);
* a lane given by a constant: ``v_readlane`` (a scalar broadcast); any other lane:
  ``ds_bpermute``.

Wider xors are the composition of the pieces (``v[l ^ a ^ b]`` is two exchanges).  The
leaves are methods: ``AmdTarget`` emits the intrinsics, the host simulation
(``simulated.py``) executes their semantics, so this choice and its composition run in the
tests exactly as they are emitted for the GPU.
"""
from __future__ import annotations

import abc

from llvmlite import ir

from .archs import AmdArch

__all__ = ["CrossLane", "QUAD_PERM", "ROW_ROR", "ROW_MIRROR", "ROW_HALF_MIRROR", "ROW_XMASK",
           "PERMLANE_IDENTITY", "dpp_source_lane", "xor_plan"]

I32 = ir.IntType(32)

#: DPP control codes (the ``dpp_ctrl`` operand): quad_perm is 0x00-0xFF (two bits a lane)
QUAD_PERM = 0x000
ROW_ROR = 0x120          # + 1..15
ROW_MIRROR = 0x140
ROW_HALF_MIRROR = 0x141
ROW_XMASK = 0x160        # + 0..15 (GFX10+)
#: ``v_permlanex16`` selects giving lane i of a row the lane i of the other row
PERMLANE_IDENTITY = (0x76543210, 0xFEDCBA98)


def _quad_xor(mask: int) -> int:
    """The ``quad_perm`` control giving lane ``i`` of a quad its lane ``i ^ mask``."""
    return QUAD_PERM | sum((i ^ mask) << (2 * i) for i in range(4))


def xor_plan(arch: AmdArch, mask: int) -> list[tuple[str, int]]:
    """The leaves (``("dpp", ctrl)``, ``("permlanex16", 0)``, ``("bpermute", xor)``) whose
    composition gives every lane the value of lane ``lane ^ mask``."""
    if not 0 < mask < arch.wave_size:
        raise ValueError(f"xor mask {mask} is not within a wave of {arch.wave_size}")
    plan: list[tuple[str, int]] = []
    row, high = mask & 15, mask & ~15
    if row:
        low = row & 3
        if row >= 4 and arch.has_row_xmask:
            plan.append(("dpp", ROW_XMASK + row))
            low = 0
        elif row & 12 == 12:
            plan.append(("dpp", ROW_MIRROR))
            low ^= 3
        elif row & 4:
            plan.append(("dpp", ROW_HALF_MIRROR))
            low ^= 3
        elif row & 8:
            plan.append(("dpp", ROW_ROR + 8))
        if low:
            plan.append(("dpp", _quad_xor(low)))
    if high == 16 and arch.has_permlanex16:
        plan.append(("permlanex16", 0))
    elif high:
        plan.append(("bpermute", high))
    return plan


def dpp_source_lane(ctrl: int, lane: int) -> int:
    """The lane whose value DPP control ``ctrl`` moves to ``lane`` (the controls ``xor_plan``
    uses; what the simulation executes and the tests check against the ISA's words)."""
    row_start, i = lane & ~15, lane & 15
    if ctrl <= 0xFF:
        return (lane & ~3) | (ctrl >> (2 * (lane & 3)) & 3)
    if ROW_ROR < ctrl <= ROW_ROR + 15:
        return row_start | ((i - (ctrl - ROW_ROR)) & 15)
    if ctrl == ROW_MIRROR:
        return row_start | (15 - i)
    if ctrl == ROW_HALF_MIRROR:
        return (lane & ~7) | (7 - (lane & 7))
    if ROW_XMASK <= ctrl <= ROW_XMASK + 15:
        return row_start | (i ^ (ctrl - ROW_XMASK))
    raise ValueError(f"DPP control 0x{ctrl:x} is not one the backend emits")


class CrossLane(abc.ABC):
    """``shuffle_xor`` and ``shuffle_idx`` from the leaves (see the module docstring).  A
    subclass sets ``arch`` and implements the four leaves on i32 values."""

    arch: AmdArch

    @abc.abstractmethod
    def dpp(self, b: ir.IRBuilder, value: ir.Value, ctrl: int) -> ir.Value:
        """DPP move with control ``ctrl`` (all rows and banks enabled)."""

    @abc.abstractmethod
    def bpermute(self, b: ir.IRBuilder, value: ir.Value, address: ir.Value) -> ir.Value:
        """``ds_bpermute``: the value of lane ``address / 4`` (modulo the wave)."""

    @abc.abstractmethod
    def permlanex16(self, b: ir.IRBuilder, value: ir.Value) -> ir.Value:
        """``v_permlanex16`` with identity selects: lane ``i`` of one 16-lane row gets lane
        ``i`` of the other row."""

    @abc.abstractmethod
    def readlane(self, b: ir.IRBuilder, value: ir.Value, lane: int) -> ir.Value:
        """``v_readlane``: the value of lane ``lane`` in every lane."""

    @abc.abstractmethod
    def lane_id(self, b: ir.IRBuilder) -> ir.Value:
        """This lane's index within its wave (i32)."""

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
        for leaf, arg in xor_plan(self.arch, lane_mask):
            if leaf == "dpp":
                value = self.dpp(b, value, arg)
            elif leaf == "permlanex16":
                value = self.permlanex16(b, value)
            else:
                source = b.xor(self.lane_id(b), ir.Constant(I32, arg))
                value = self.bpermute(b, value, b.shl(source, ir.Constant(I32, 2)))
        return value

    def shuffle_idx(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        if isinstance(lane, ir.Constant):
            return self.readlane(b, value, int(lane.constant))
        return self.bpermute(b, value, b.shl(lane, ir.Constant(I32, 2)))
