"""What differs between AMD GPU architectures, as one record each (``AmdArch``).

The five named targets are what the backend compiles for anywhere; any other ``gfxNNN`` a
device reports gets a record derived from its generation (wave size, no matrix
instructions known: dots use FMAs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .matrix import CDNA2_INSTRS, CDNA3_INSTRS, CDNA4_INSTRS, RDNA3_INSTRS, RDNA4_INSTRS, AmdMatrixInstr

__all__ = ["AmdArch", "KNOWN_ARCHS", "arch_of"]


@dataclass(frozen=True)
class AmdArch:
    """One architecture: ``name`` (``gfx942``), ``generation`` (9 for GCN/CDNA, 10, 11,
    12 for RDNA), lanes of a wave, LDS bytes one workgroup may use, matrix instructions
    (preferred first) and the LLVM target features the backend sets."""

    name: str
    generation: int
    wave_size: int
    lds_bytes: int
    matrix_instrs: tuple[AmdMatrixInstr, ...] = ()
    features: str = ""

    @property
    def has_row_xmask(self) -> bool:
        """DPP ``row_xmask`` (any xor within 16 lanes in one move): GFX10 and later."""
        return self.generation >= 10

    @property
    def has_permlanex16(self) -> bool:
        """``v_permlanex16_b32`` (exchange between the two 16-lane rows): GFX10 and later."""
        return self.generation >= 10


_KIB = 1024
KNOWN_ARCHS: dict[str, AmdArch] = {a.name: a for a in (
    AmdArch("gfx90a", 9, 64, 64 * _KIB, CDNA2_INSTRS),
    AmdArch("gfx942", 9, 64, 64 * _KIB, CDNA3_INSTRS),
    AmdArch("gfx950", 9, 64, 160 * _KIB, CDNA4_INSTRS),
    # LLVM's 16-bit true registers are turned off: the lowering keeps 16-bit values in
    # 32-bit registers, the form every other architecture uses
    AmdArch("gfx1100", 11, 32, 64 * _KIB, RDNA3_INSTRS, "-real-true16"),
    AmdArch("gfx1201", 12, 32, 64 * _KIB, RDNA4_INSTRS),
)}


def arch_of(name: str) -> AmdArch:
    """The record of ``name`` (``gfx942``; a device's ``gfx942:sramecc+:xnack-`` is cut at the
    first ``:``); ``ValueError`` unless it is a ``gfxNNN`` name."""
    base = name.split(":")[0].strip().lower()
    known = KNOWN_ARCHS.get(base)
    if known is not None:
        return known
    match = re.fullmatch(r"gfx(\d+)[0-9a-f]{2}", base)
    if match is None:
        raise ValueError(f"'{name}' is not an AMD GPU architecture (gfxNNN)")
    generation = int(match.group(1))
    features = "-real-true16" if generation == 11 else ""
    return AmdArch(base, generation, 64 if generation <= 9 else 32, 64 * _KIB, (), features)
