"""AMDGPU code objects: linking with ``ld.lld`` and reading them back.

``link(object_bytes)`` turns LLVM's relocatable ELF into a loadable code object (``ld.lld
-shared --no-undefined``); ``read_metadata(code_object)`` reads the AMDGPU metadata note (a
MessagePack map, code object v5) and the dynamic symbol table, so the backend reports
registers, spills, LDS bytes and wave size as the hardware will see them, and tests can check
that no symbol is left undefined.  ``ld.lld`` is found through ``ANYTILE_LLD``, then ``ld.lld``
and ``ld.lld-N`` on ``PATH``, then ``/usr/lib/llvm-N/bin`` and ``/opt/rocm/llvm/bin``.
"""
from __future__ import annotations

import glob
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

__all__ = ["find_lld", "link", "read_metadata", "CodeObjectInfo", "KernelInfo",
           "CodeObjectError", "unpack_msgpack"]

_NT_AMDGPU_METADATA = 32
_SHT_NOTE = 7
_SHT_DYNSYM = 11
_SHT_SYMTAB = 2
_SHN_UNDEF = 0


class CodeObjectError(Exception):
    """A code object that cannot be linked or read."""


@lru_cache(maxsize=None)
def find_lld() -> Optional[str]:
    """The ``ld.lld`` executable (see the module docstring), or ``None``."""
    explicit = os.environ.get("ANYTILE_LLD")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ["ld.lld"] + [f"ld.lld-{v}" for v in range(22, 14, -1)]:
        found = shutil.which(name)
        if found:
            return found
    candidates = sorted(glob.glob("/usr/lib/llvm-*/bin/ld.lld"), reverse=True)
    candidates += ["/opt/rocm/llvm/bin/ld.lld"]
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def link(object_bytes: bytes, lld: Optional[str] = None) -> bytes:
    """The loadable code object (``.hsaco``) linked from LLVM's relocatable object."""
    lld = lld or find_lld()
    if lld is None:
        raise CodeObjectError("ld.lld was not found (install lld, e.g. `apt-get install lld-19`, "
                              "or set ANYTILE_LLD)")
    with tempfile.TemporaryDirectory(prefix="anytile-amd-") as tmp:
        src, dst = os.path.join(tmp, "kernel.o"), os.path.join(tmp, "kernel.hsaco")
        with open(src, "wb") as f:
            f.write(object_bytes)
        done = subprocess.run([lld, "-shared", "--no-undefined", "-o", dst, src],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CodeObjectError(f"ld.lld failed: {(done.stderr or done.stdout).strip()}")
        with open(dst, "rb") as f:
            return f.read()


@dataclass(frozen=True)
class KernelInfo:
    """One kernel's facts from the metadata note."""

    name: str
    symbol: str
    sgprs: int
    vgprs: int
    agprs: int
    sgpr_spills: int
    vgpr_spills: int
    lds_bytes: int             # static group-segment (LDS) bytes
    scratch_bytes: int         # private-segment bytes per work-item
    wave_size: int
    max_workgroup_size: int
    kernarg_bytes: int
    uses_dynamic_stack: bool


@dataclass(frozen=True)
class CodeObjectInfo:
    """What a code object says of itself."""

    target: str                            # e.g. ``amdgcn-amd-amdhsa--gfx942``
    version: tuple[int, ...]               # the metadata's ``amdhsa.version``
    kernels: dict[str, KernelInfo]
    undefined_symbols: list[str] = field(default_factory=list)


def read_metadata(data: bytes) -> CodeObjectInfo:
    """Parse an AMDGPU ELF (relocatable or linked): its metadata note and undefined symbols."""
    sections = _elf_sections(data)
    notes = [s for s in sections if s[0] == _SHT_NOTE]
    meta: Optional[dict] = None
    for _, offset, size, _, _ in notes:
        for name, ntype, desc in _notes(data[offset:offset + size]):
            if name == b"AMDGPU" and ntype == _NT_AMDGPU_METADATA:
                meta = unpack_msgpack(desc)
    if not isinstance(meta, dict):
        raise CodeObjectError("no AMDGPU metadata note (code object v4 or later) found")
    kernels = {}
    for k in meta.get("amdhsa.kernels", []):
        info = KernelInfo(
            name=k[".name"], symbol=k.get(".symbol", ""), sgprs=int(k.get(".sgpr_count", 0)),
            vgprs=int(k.get(".vgpr_count", 0)), agprs=int(k.get(".agpr_count", 0)),
            sgpr_spills=int(k.get(".sgpr_spill_count", 0)),
            vgpr_spills=int(k.get(".vgpr_spill_count", 0)),
            lds_bytes=int(k.get(".group_segment_fixed_size", 0)),
            scratch_bytes=int(k.get(".private_segment_fixed_size", 0)),
            wave_size=int(k.get(".wavefront_size", 64)),
            max_workgroup_size=int(k.get(".max_flat_workgroup_size", 0)),
            kernarg_bytes=int(k.get(".kernarg_segment_size", 0)),
            uses_dynamic_stack=bool(k.get(".uses_dynamic_stack", False)))
        kernels[info.name] = info
    undefined = []
    for kind, offset, size, link_index, entsize in sections:
        if kind in (_SHT_DYNSYM, _SHT_SYMTAB) and entsize:
            strtab = sections[link_index]
            undefined += _undefined_symbols(data, offset, size, entsize,
                                            data[strtab[1]:strtab[1] + strtab[2]])
    return CodeObjectInfo(meta.get("amdhsa.target", ""),
                          tuple(meta.get("amdhsa.version", ())), kernels, sorted(set(undefined)))


# -- ELF64 little-endian -------------------------------------------------------------------------
def _elf_sections(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """``(type, offset, size, link, entsize)`` of every section header."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CodeObjectError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        base = shoff + i * shentsize
        _, kind, _, _, offset, size, link_index, _, _, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, base)
        out.append((kind, offset, size, link_index, entsize))
    return out


def _notes(blob: bytes) -> list[tuple[bytes, int, bytes]]:
    out, pos = [], 0
    while pos + 12 <= len(blob):
        namesz, descsz, ntype = struct.unpack_from("<III", blob, pos)
        pos += 12
        name = blob[pos:pos + namesz].rstrip(b"\0")
        pos += (namesz + 3) & ~3
        desc = blob[pos:pos + descsz]
        pos += (descsz + 3) & ~3
        out.append((name, ntype, desc))
    return out


def _undefined_symbols(data: bytes, offset: int, size: int, entsize: int,
                       strtab: bytes) -> list[str]:
    names = []
    for pos in range(offset + entsize, offset + size, entsize):   # entry 0 is the null symbol
        name_index, _, _, shndx = struct.unpack_from("<IBBH", data, pos)
        if shndx == _SHN_UNDEF and name_index:
            names.append(strtab[name_index:strtab.index(b"\0", name_index)].decode())
    return names


# -- MessagePack (the subset the metadata note uses, and the rest of the format) ----------------
def unpack_msgpack(data: bytes) -> Any:
    """Decode one MessagePack value (maps, arrays, strings, binaries, ints, floats, nil, bools;
    extension types are returned as ``(type, bytes)``)."""
    value, end = _unpack(data, 0)
    if end != len(data):
        raise CodeObjectError(f"{len(data) - end} trailing bytes after a MessagePack value")
    return value


_FIXED = {0xC0: None, 0xC2: False, 0xC3: True}
_NUMBERS = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
            0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
_LENGTHS = {0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
            0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"),
            0xDC: (">H", "array"), 0xDD: (">I", "array"), 0xDE: (">H", "map"), 0xDF: (">I", "map")}


def _unpack(data: bytes, pos: int) -> tuple[Any, int]:
    if pos >= len(data):
        raise CodeObjectError("truncated MessagePack value")
    tag = data[pos]
    pos += 1
    if tag <= 0x7F:
        return tag, pos
    if tag >= 0xE0:
        return tag - 0x100, pos
    if 0x80 <= tag <= 0x8F:
        return _container("map", tag & 0x0F, data, pos)
    if 0x90 <= tag <= 0x9F:
        return _container("array", tag & 0x0F, data, pos)
    if 0xA0 <= tag <= 0xBF:
        n = tag & 0x1F
        return data[pos:pos + n].decode("utf-8"), pos + n
    if tag in _FIXED:
        return _FIXED[tag], pos
    if tag in _NUMBERS:
        fmt = _NUMBERS[tag]
        return struct.unpack_from(fmt, data, pos)[0], pos + struct.calcsize(fmt)
    if tag in _LENGTHS:
        fmt, kind = _LENGTHS[tag]
        n = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        if kind == "bin":
            return bytes(data[pos:pos + n]), pos + n
        if kind == "str":
            return data[pos:pos + n].decode("utf-8"), pos + n
        return _container(kind, n, data, pos)
    if 0xD4 <= tag <= 0xD8 or tag in (0xC7, 0xC8, 0xC9):    # extension types
        if tag >= 0xD4:
            n = 1 << (tag - 0xD4)
        else:
            fmt = {0xC7: ">B", 0xC8: ">H", 0xC9: ">I"}[tag]
            n = struct.unpack_from(fmt, data, pos)[0]
            pos += struct.calcsize(fmt)
        ext_type = struct.unpack_from(">b", data, pos)[0]
        return (ext_type, bytes(data[pos + 1:pos + 1 + n])), pos + 1 + n
    raise CodeObjectError(f"unknown MessagePack tag 0x{tag:02x}")


def _container(kind: str, n: int, data: bytes, pos: int) -> tuple[Any, int]:
    if kind == "array":
        items = []
        for _ in range(n):
            item, pos = _unpack(data, pos)
            items.append(item)
        return items, pos
    mapping = {}
    for _ in range(n):
        key, pos = _unpack(data, pos)
        mapping[key], pos = _unpack(data, pos)
    return mapping, pos
