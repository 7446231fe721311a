"""The interpreter's memory: a flat virtual address space with checked accesses.

Every allocation (made by ``alloc`` or registered by ``import_array``) gets a virtual base
address ``>= 2**32``, aligned to 256 bytes, followed by a gap of at least 1 MiB before the
next one, and addresses are never reused: an access a little past the end of an allocation,
or into a freed one, lands in no live allocation and is reported.  Pointers are ``int64``
virtual addresses; loads and stores translate whole tiles of them at once (a binary search
over the sorted bases) and check every lane the mask leaves on.

When several lanes of one store hit one address, the last lane in row-major order wins
(NumPy's fancy assignment writes in index order).
"""
from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import describe_lane, describe_place
from ..ir.types import ScalarType

FIRST_BASE = 1 << 32
ALIGNMENT = 256
GAP = 1 << 20
FREED_REMEMBERED = 4096          # freed spans kept for error messages (oldest dropped)
_I64 = np.dtype(np.int64)
_U8 = np.dtype(np.uint8)


class AccessViolation(Exception):
    """A checked access failed; the executor adds the op, its location and the program.
    ``kind`` is 'bounds', 'alignment' or 'readonly'."""

    def __init__(self, detail: str, kind: str = "bounds") -> None:
        super().__init__(detail)
        self.detail = detail
        self.kind = kind


@dataclass(eq=False)
class Allocation:
    """One registered span: ``data`` is a ``uint8`` array over its bytes."""

    base: int
    nbytes: int
    data: np.ndarray
    imported: bool = False
    live: bool = True
    _typed: dict = field(default_factory=dict, repr=False)

    def typed(self, dtype: np.dtype) -> np.ndarray:
        """The whole elements of this span viewed as ``dtype`` (cached)."""
        view = self._typed.get(dtype)
        if view is None:
            usable = self.nbytes - self.nbytes % dtype.itemsize
            view = self.data[:usable].view(dtype)
            self._typed[dtype] = view
        return view


# A lane group of one access: (flat lane indices or ALL_LANES, allocation, element indices).
Group = tuple[Any, Allocation, np.ndarray]
ALL_LANES = slice(None)
_SHIFTS = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}


def lane_indices(lanes: Any, count: int) -> np.ndarray:
    """``lanes`` of a ``Group`` as an index array."""
    return np.arange(count) if lanes is ALL_LANES else lanes


def check_writeable(groups: list[Group], what: str) -> None:
    """Refuse, before writing anything, an access that would write read-only memory."""
    for _, alloc, _ in groups:
        if not alloc.data.flags.writeable:
            raise AccessViolation(f"{what} into read-only memory (an imported read-only "
                                  "array)", "readonly")


class AccessSite:
    """Per-op memory of the allocation the op touched last (most accesses hit it again)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: Optional[Allocation] = None


def memory_dtype(elem: ScalarType) -> np.dtype:
    """How ``elem`` is laid out in memory (``i1`` as one byte holding 0 or 1)."""
    return _U8 if elem.is_bool else elem.np


class VirtualMemory:
    """The address space of one interpreter backend."""

    def __init__(self) -> None:
        self._live: dict[int, Allocation] = {}   # insertion order == address order
        self._freed: list[tuple[int, int]] = []  # (base, nbytes), sorted, for messages only
        self._next_base = FIRST_BASE
        self._lock = threading.Lock()
        self._table: Optional[tuple[np.ndarray, np.ndarray, list[Optional[Allocation]]]] = None
        self._pending_release: list[int] = []    # filled by finalizers, drained under the lock

    # -- registration ------------------------------------------------------------------------
    def register(self, data: np.ndarray, imported: bool = False) -> Allocation:
        """Give the ``uint8`` array ``data`` a fresh virtual address range."""
        with self._lock:
            self._drain_releases()
            base = self._next_base
            nbytes = int(data.nbytes)
            self._next_base = -(-(base + nbytes + GAP) // ALIGNMENT) * ALIGNMENT
            alloc = Allocation(base, nbytes, data, imported)
            self._live[base] = alloc
            self._table = None
            return alloc

    def unregister(self, base: Optional[int]) -> None:
        """Forget the allocation at ``base`` (later accesses to it are out of bounds);
        unknown bases are ignored, so this may run twice (``free`` and a finalizer)."""
        with self._lock:
            self._unregister_locked(base)

    def release_later(self, alloc: Allocation) -> None:
        """``unregister`` for finalizers: the garbage collector may call them at any point,
        even inside one of this object's locked sections, so they only mark and queue."""
        alloc.live = False
        self._pending_release.append(alloc.base)

    def _drain_releases(self) -> None:
        while self._pending_release:
            self._unregister_locked(self._pending_release.pop())

    def _unregister_locked(self, base: Optional[int]) -> None:
        alloc = self._live.pop(base, None) if base is not None else None
        if alloc is not None:
            bisect.insort(self._freed, (alloc.base, alloc.nbytes))
            if len(self._freed) > FREED_REMEMBERED:
                del self._freed[0]
            self._table = None
            alloc.live = False

    def allocation_at(self, base: Optional[int]) -> Optional[Allocation]:
        return self._live.get(base) if base is not None else None

    @property
    def live_count(self) -> int:
        """How many allocations are registered (after processing queued releases)."""
        with self._lock:
            self._drain_releases()
            return len(self._live)

    def _current_table(self) -> tuple[np.ndarray, np.ndarray, list[Optional[Allocation]]]:
        table = self._table
        if table is None or self._pending_release:
            with self._lock:
                self._drain_releases()
                allocs: list[Optional[Allocation]] = [None]  # a 0-byte sentinel at address 0
                allocs.extend(self._live.values())
                bases = np.array([0] + [a.base for a in allocs[1:]], _I64)
                sizes = np.array([0] + [a.nbytes for a in allocs[1:]], _I64)
                table = self._table = (bases, sizes, allocs)
        return table

    # -- translation -------------------------------------------------------------------------
    def resolve(self, ptrs: Any, mask: Any, elem_size: int, site: AccessSite) -> list[Group]:
        """Translate the addresses of the lanes where ``mask`` is on (all when ``None``),
        checking that each lies wholly inside one live allocation and is aligned.  Lane
        indices are flat row-major indices, or ``ALL_LANES`` when every lane is active.
        ``site`` remembers the allocation this op hit last, to skip the search next time."""
        addrs = np.asarray(ptrs, _I64).reshape(-1)
        lanes: Any = ALL_LANES
        if mask is not None:
            flat_mask = np.asarray(mask)
            if flat_mask.shape != np.shape(ptrs):
                flat_mask = np.broadcast_to(flat_mask, np.shape(ptrs))
            flat_mask = flat_mask.reshape(-1)
            if not flat_mask.all():
                lanes = np.flatnonzero(flat_mask)
                addrs = addrs[lanes]
        if addrs.size == 0:
            return []
        last = site.last
        if last is not None and last.live:
            rel = addrs - last.base
            if rel.min() >= 0 and rel.max() <= last.nbytes - elem_size and not (
                    elem_size > 1 and (rel & (elem_size - 1)).any()):
                return [(lanes, last, rel >> _SHIFTS[elem_size])]
        return self._resolve_slow(ptrs, lanes, addrs, elem_size, site)

    def _resolve_slow(self, ptrs: Any, lanes: Any, addrs: np.ndarray, elem_size: int,
                      site: AccessSite) -> list[Group]:
        bases, sizes, allocs = self._current_table()
        idx = np.searchsorted(bases, addrs, side="right") - 1
        safe_idx = np.maximum(idx, 0)
        rel = addrs - bases[safe_idx]
        inside = (idx >= 0) & (rel <= sizes[safe_idx] - elem_size)
        if not inside.all():
            raise self._violation(ptrs, lanes, addrs, ~inside, elem_size, "bounds")
        misaligned = (addrs % elem_size) != 0
        if misaligned.any():
            raise self._violation(ptrs, lanes, addrs, misaligned, elem_size, "alignment")
        elems = rel // elem_size
        first = idx[0]
        if (idx == first).all():
            site.last = allocs[first]
            return [(lanes, allocs[first], elems)]
        lane_array = lane_indices(lanes, addrs.size)
        groups: list[Group] = []
        for a in np.unique(idx):
            sel = idx == a
            groups.append((lane_array[sel], allocs[a], elems[sel]))
        return groups

    def gather(self, ptrs: Any, mask: Any, elem: ScalarType, site: AccessSite) -> Any:
        """One element per pointer; masked-off lanes read as 0."""
        dtype = memory_dtype(elem)
        shape = np.shape(ptrs)
        groups = self.resolve(ptrs, mask, dtype.itemsize, site)
        if len(groups) == 1 and groups[0][0] is ALL_LANES:
            out = groups[0][1].typed(dtype)[groups[0][2]]
        else:
            out = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype)
            for lanes, alloc, elems in groups:
                out[lanes] = alloc.typed(dtype)[elems]
        if elem.is_bool:
            out = out != 0
        out = out.reshape(shape)
        return out[()] if out.ndim == 0 else out

    def scatter(self, ptrs: Any, values: Any, mask: Any, elem: ScalarType,
                site: AccessSite) -> None:
        """Write ``values`` through ``ptrs`` where ``mask`` is on; the last lane wins."""
        dtype = memory_dtype(elem)
        groups = self.resolve(ptrs, mask, dtype.itemsize, site)
        if not groups:
            return
        shape = np.shape(ptrs)
        values = np.asarray(values)
        if values.shape != shape:
            values = np.broadcast_to(values, shape)
        flat = values.reshape(-1).astype(dtype, copy=False)
        check_writeable(groups, "store")
        for lanes, alloc, elems in groups:
            alloc.typed(dtype)[elems] = flat[lanes]

    # -- messages ----------------------------------------------------------------------------
    def _violation(self, ptrs: Any, lanes: np.ndarray, addrs: np.ndarray, bad: np.ndarray,
                   elem_size: int, kind: str) -> AccessViolation:
        lanes = lane_indices(lanes, addrs.size)
        first = int(np.flatnonzero(bad)[0])
        addr = int(addrs[first])
        if kind == "alignment":
            what = f"address {addr:#x} is not a multiple of the {elem_size}-byte element size"
        else:
            what = f"address {addr:#x} is {self.describe_address(addr, elem_size)}"
        shape = np.shape(ptrs)
        if shape:
            lane = tuple(int(i) for i in np.unravel_index(int(lanes[first]), shape))
            problem = "misaligned" if kind == "alignment" else "out of bounds"
            what += (f" ({describe_lane(lane, shape)}; "
                     f"{int(bad.sum())} of {lanes.size} active lanes are {problem})")
        return AccessViolation(what, kind)

    def describe_address(self, addr: int, elem_size: int) -> str:
        """Where ``addr`` lies relative to the nearest allocation (live or freed)."""
        if addr == 0:
            return "the null pointer"
        with self._lock:
            spans = [(a.base, a.nbytes, "") for a in self._live.values()]
            spans += [(base, nbytes, "freed ") for base, nbytes in self._freed]
        if not spans:
            return "outside every allocation (none exists)"

        def distance(span: tuple[int, int, str]) -> int:
            base, nbytes, _ = span
            return base - addr if addr < base else max(0, addr - (base + max(nbytes, 1) - 1))

        base, nbytes, adjective = min(spans, key=distance)
        return describe_place(addr, base, nbytes, elem_size, adjective)

