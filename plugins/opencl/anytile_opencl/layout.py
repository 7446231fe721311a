"""How a tile's elements spread over one work-group (stage ``laid-out ir``).

One work-group runs one program with ``T`` work-items.  A tile of ``n`` elements, taken in
row-major order, is cut into *chunks* of ``v = min(V, n)`` consecutive elements (one OpenCL
vector, ``floatV``).  Chunk ``c`` belongs to work-item ``c % owners`` (``owners = min(T,
n / v)``), which keeps it in slot ``c / owners`` of a private array of ``chunks`` vectors: at
each step ``k`` the owners touch ``owners * v`` consecutive elements, so GPU loads coalesce
and a CPU's single work-item (``T = 1``) holds the whole tile in order.  Work-items past
``owners`` hold copies of the owners' chunks (``lid % owners``) and skip side effects.

The layout depends only on the element count, so a tile and its ``reshape``/``expand_dims``
share their layout and their storage; ``broadcast``, ``permute``, reductions, scans and
``dot`` move elements between work-items through ``__local`` memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from anytile.ir import Block, Function, Module, TileType, Value, walk
from anytile.ir import clone_block

from .target import OpenCLArch

__all__ = ["BlockedLayout", "LayoutPolicy", "layout_policy", "annotate_layouts"]


@dataclass(frozen=True)
class BlockedLayout:
    """``owners`` work-items x ``chunks`` slots x ``vector`` lanes (see the module docstring);
    ``work_items`` is the work-group's size."""

    vector: int
    owners: int
    chunks: int
    work_items: int

    @property
    def replicated(self) -> bool:
        """Whether some work-items hold copies rather than chunks of their own."""
        return self.owners < self.work_items

    def __str__(self) -> str:
        return f"#ocl.blocked<{self.owners}x{self.chunks}x{self.vector}>"


@dataclass(frozen=True)
class LayoutPolicy:
    """The work-group size ``work_items`` and vector width ``vector`` of one kernel."""

    work_items: int
    vector: int

    def layout(self, numel: int) -> BlockedLayout:
        v = min(self.vector, numel)
        owners = min(self.work_items, numel // v)
        return BlockedLayout(v, owners, numel // (v * owners), self.work_items)


def layout_policy(arch: OpenCLArch, num_warps: int) -> LayoutPolicy:
    """One work-item with wide vectors on CPUs; ``num_warps`` SIMD groups with ``V``-wide
    vectors on GPUs."""
    return LayoutPolicy(arch.work_items(num_warps), arch.vector)


def annotate_layouts(module: Module, policy: LayoutPolicy) -> Module:
    """A copy of ``module`` whose every tile type carries its ``BlockedLayout``."""
    out = Module(kernel_name=module.kernel_name, attrs=dict(module.attrs))
    for fn in module.functions.values():
        body = clone_block(fn.body, {})
        for value in _values(body):
            t = value.type
            if isinstance(t, TileType):
                value.type = TileType(t.shape, t.elem, policy.layout(t.numel))
        out.add(Function(fn.name, body, list(fn.result_types), [dict(a) for a in fn.arg_attrs],
                         fn.loc, fn.is_kernel))
    return out


def _values(block: Block) -> Iterator[Value]:
    """Every value a block defines: its arguments, its ops' results, and theirs in regions."""
    yield from block.args
    for op in walk(block):
        yield from op.results
        for region in op.regions:
            yield from region.args
