"""Distributed layouts: which thread of a program holds which element of a tile.

A program runs as ``num_warps`` warps of ``warp_size`` lanes.  A layout says, for a tile of a
given shape, which elements each thread holds in its registers:

* ``BlockedLayout(size_per_thread, threads_per_warp, warps_per_cta, order)`` -- each thread
  holds ``size_per_thread[d]`` consecutive elements along dimension ``d``; lanes and then
  warps are laid out next to each other, fastest along ``order[0]``.  The block a whole
  program covers, ``size_per_thread * threads_per_warp * warps_per_cta``, repeats over a
  larger tile; over a smaller one it wraps around, so several threads (or several registers
  of one thread) hold the same element ("replication").
* ``SliceLayout(parent, dim)`` -- the layout of a reduction's result: the parent's
  registers with dimension ``dim`` squeezed out; every thread that held a piece of a
  reduced row holds the whole result.

Registers of a thread are numbered row-major over per-dimension register indices
``j[d] in range(registers_along(d))``; the coordinate of register ``j`` along ``d`` is
``(base(d, j[d]) + thread_offset(d)) mod shape[d]`` (``coordinates``).  All sizes are powers
of two, so "mod" is a mask.  These functions are pure Python (no LLVM): the lowering emits the
thread-dependent part once and adds the constant part per register.

Both layouts print as IR text (``#blocked<spt=[1,4], tpw=[8,4], wpc=[4,1], order=[1,0]>``,
``#slice<dim=1, parent=#blocked<...>>``) and parse back: importing this module registers
them with the IR's parser.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Union

from ...ir.types import parse_layout, register_layout_syntax, split_top_level

__all__ = ["BlockedLayout", "SliceLayout", "Layout", "default_blocked", "register_count",
           "register_indices", "dim_registers", "element_owners", "is_pow2"]


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class BlockedLayout:
    """Elements split in blocks: per thread, then per lane, then per warp (see module doc)."""

    KEPT_BY_BROADCAST = True        # the same layout fits any shape
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]          # dimensions from fastest-varying to slowest

    def __post_init__(self) -> None:
        r = len(self.order)
        assert len(self.size_per_thread) == len(self.threads_per_warp) == len(self.warps_per_cta) == r
        assert sorted(self.order) == list(range(r)), self.order

    @property
    def rank(self) -> int:
        return len(self.order)

    @property
    def warp_size(self) -> int:
        return math.prod(self.threads_per_warp)

    @property
    def num_warps(self) -> int:
        return math.prod(self.warps_per_cta)

    def cta_tile(self, d: int) -> int:
        """How many consecutive elements along ``d`` one repetition of the layout covers."""
        return self.size_per_thread[d] * self.threads_per_warp[d] * self.warps_per_cta[d]

    def lane_stride(self, d: int) -> int:
        """How far apart (in lane ids) two lanes neighbouring along ``d`` are."""
        stride = 1
        for o in self.order:
            if o == d:
                return stride
            stride *= self.threads_per_warp[o]
        raise AssertionError(d)

    def warp_stride(self, d: int) -> int:
        stride = 1
        for o in self.order:
            if o == d:
                return stride
            stride *= self.warps_per_cta[o]
        raise AssertionError(d)

    def lane_coord(self, lane: int, d: int) -> int:
        return (lane // self.lane_stride(d)) % self.threads_per_warp[d]

    def warp_coord(self, warp: int, d: int) -> int:
        return (warp // self.warp_stride(d)) % self.warps_per_cta[d]

    def thread_offset(self, lane: int, warp: int, d: int) -> int:
        """Offset along ``d`` of the first element the thread holds, before wrapping."""
        spt, tpw = self.size_per_thread[d], self.threads_per_warp[d]
        return self.lane_coord(lane, d) * spt + self.warp_coord(warp, d) * spt * tpw

    def registers_along(self, shape: tuple[int, ...], d: int) -> int:
        return self.size_per_thread[d] * max(1, shape[d] // self.cta_tile(d))

    def base(self, shape: tuple[int, ...], d: int, j: int) -> int:
        """The thread-independent part of register ``j``'s coordinate along ``d``."""
        spt = self.size_per_thread[d]
        return (j // spt) * self.cta_tile(d) + j % spt

    def distinct_lanes(self, shape: tuple[int, ...], d: int) -> int:
        """How many lanes along ``d`` hold different elements (the rest are replicas)."""
        return min(self.threads_per_warp[d], max(1, shape[d] // self.size_per_thread[d]))

    def distinct_warps(self, shape: tuple[int, ...], d: int) -> int:
        per_warp = self.size_per_thread[d] * self.threads_per_warp[d]
        return min(self.warps_per_cta[d], max(1, shape[d] // per_warp))

    def permuted(self, perm: tuple[int, ...]) -> "BlockedLayout":
        """The layout of ``permute(x, perm)`` when ``x`` has this layout (no data moves)."""
        inverse = {p: i for i, p in enumerate(perm)}
        return BlockedLayout(tuple(self.size_per_thread[p] for p in perm),
                             tuple(self.threads_per_warp[p] for p in perm),
                             tuple(self.warps_per_cta[p] for p in perm),
                             tuple(inverse[o] for o in self.order))

    def __str__(self) -> str:
        def t(x: tuple) -> str:
            return "[" + ",".join(map(str, x)) + "]"
        return (f"#blocked<spt={t(self.size_per_thread)}, tpw={t(self.threads_per_warp)}, "
                f"wpc={t(self.warps_per_cta)}, order={t(self.order)}>")

    @classmethod
    def parse(cls, body: str) -> "BlockedLayout":
        """The layout whose text is ``#blocked<body>``; ``ValueError`` when malformed."""
        p = _layout_params(body, ("spt", "tpw", "wpc", "order"), "#blocked")
        spt, tpw, wpc, order = (_int_list(p[k], k) for k in ("spt", "tpw", "wpc", "order"))
        if not len(spt) == len(tpw) == len(wpc) == len(order) or \
                sorted(order) != list(range(len(order))) or min(spt + tpw + wpc, default=1) < 1:
            raise ValueError(f"inconsistent #blocked<{body}>: spt, tpw and wpc need one "
                             f"positive size per dimension and order a permutation of them")
        return cls(spt, tpw, wpc, order)


@dataclass(frozen=True)
class SliceLayout:
    """``parent`` with dimension ``dim`` removed: the layout of a reduction along ``dim``."""

    KEPT_BY_BROADCAST = True
    parent: "Layout"
    dim: int

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    @property
    def warp_size(self) -> int:
        return self.parent.warp_size

    def parent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape[:self.dim] + (1,) + shape[self.dim:]

    def __str__(self) -> str:
        return f"#slice<dim={self.dim}, parent={self.parent}>"

    @classmethod
    def parse(cls, body: str) -> "SliceLayout":
        """The layout whose text is ``#slice<body>``; ``ValueError`` when malformed."""
        p = _layout_params(body, ("dim", "parent"), "#slice")
        parent = parse_layout(p["parent"])
        dim = int(p["dim"])
        if not 0 <= dim < getattr(parent, "rank", 0):
            raise ValueError(f"#slice<{body}>: dim {dim} is not a dimension of its parent")
        return cls(parent, dim)


Layout = Union[BlockedLayout, SliceLayout]


def _layout_params(body: str, keys: tuple[str, ...], what: str) -> dict[str, str]:
    """``k1=v1, k2=v2`` -> ``{k1: v1, ...}``, exactly ``keys`` in that order."""
    pairs = [part.partition("=") for part in split_top_level(body)]
    if [k.strip() for k, eq, _ in pairs if eq] != list(keys) or len(pairs) != len(keys):
        raise ValueError(f"malformed {what}<{body}>: expected "
                         f"{', '.join(k + '=...' for k in keys)}")
    return {k.strip(): v.strip() for k, _, v in pairs}


def _int_list(text: str, what: str) -> tuple[int, ...]:
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"{what} must be a list like [1,4], found {text!r}")
    inner = text[1:-1].strip()
    return tuple(int(x) for x in inner.split(",")) if inner else ()


register_layout_syntax("blocked", BlockedLayout.parse)
register_layout_syntax("slice", SliceLayout.parse)


def default_blocked(shape: tuple[int, ...], num_warps: int, warp_size: int,
                    vector: int = 1, order: tuple[int, ...] = ()) -> BlockedLayout:
    """A layout spreading ``shape`` over the program: ``vector`` consecutive elements per
    thread along the fastest dimension, lanes then warps filled fastest-dimension first.
    Lanes or warps left over once the tile is covered replicate it."""
    rank = len(shape)
    order = order or tuple(reversed(range(rank)))
    spt = [1] * rank
    spt[order[0]] = max(1, min(vector, shape[order[0]]))
    tpw = [1] * rank
    lanes = warp_size
    for d in order:
        take = min(lanes, max(1, shape[d] // spt[d]))
        tpw[d] = take
        lanes //= take
    tpw[order[-1]] *= lanes
    wpc = [1] * rank
    warps = num_warps
    for d in order:
        take = min(warps, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d] = take
        warps //= take
    wpc[order[-1]] *= warps
    return BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), tuple(order))


def blocked_of(layout: Layout, shape: tuple[int, ...]) -> tuple[BlockedLayout, tuple[int, ...], tuple[int, ...]]:
    """(the blocked layout at the root of ``layout``, the shape in its rank, the dimensions
    of that shape the tile really has, in order)."""
    dims = list(range(len(shape)))
    while isinstance(layout, SliceLayout):
        shape = layout.parent_shape(shape)
        dims = [d if d < layout.dim else d + 1 for d in dims]
        layout = layout.parent
    return layout, shape, tuple(dims)


def dim_registers(layout: Layout, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Registers per thread along each dimension of the tile."""
    root, root_shape, dims = blocked_of(layout, shape)
    return tuple(root.registers_along(root_shape, d) for d in dims)


def register_count(layout: Layout, shape: tuple[int, ...]) -> int:
    return math.prod(dim_registers(layout, shape))


def register_indices(layout: Layout, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Per-dimension register indices of every register, in register order."""
    return list(itertools.product(*(range(n) for n in dim_registers(layout, shape))))


def coordinates(layout: Layout, shape: tuple[int, ...], lane: int, warp: int) -> list[tuple[int, ...]]:
    """The element coordinates of each register of thread (``lane``, ``warp``): the pure
    Python model of what the lowering computes (used by tests and by ``element_owners``)."""
    root, root_shape, dims = blocked_of(layout, shape)
    out = []
    for j in register_indices(layout, shape):
        coord = []
        for jd, d in zip(j, dims):
            full = root.base(root_shape, d, jd) + root.thread_offset(lane, warp, d)
            coord.append(full % root_shape[d])
        out.append(tuple(coord))
    return out


def element_owners(layout: Layout, shape: tuple[int, ...]) -> dict[tuple[int, ...], list]:
    """Every element -> the (warp, lane, register) triples holding it (tests, debugging)."""
    root, _, _ = blocked_of(layout, shape)
    owners: dict[tuple[int, ...], list] = {}
    for warp in range(root.num_warps):
        for lane in range(root.warp_size):
            for r, c in enumerate(coordinates(layout, shape, lane, warp)):
                owners.setdefault(c, []).append((warp, lane, r))
    return owners
