"""What a backend adds to the shared GPU pipeline: a ``GpuDialect``.

Core's GPU pipeline names no vendor.  A backend with ideas of its own (a unit that copies
whole tiles, a fence only its matrix unit needs) keeps them in its package and hands the
pipeline a ``GpuDialect`` through its target (``GpuTarget.dialects``):

* ``ir``: its IR ``Dialect`` (``anytile.ir.dialects``), the op classes its passes create --
  loaded before the pipeline runs, so the verifier accepts them and the IR text parses;
* ``passes``: its passes (``passes.GpuPass``), each placed before or after a named pass of
  ``passes.GPU_PASSES`` (``PassPlacement``);
* ``lowerings``: lowering-table entries for its ops (``op class -> lower(ctx, op)``, as core's
  ``LOWERINGS``).  An op class without an entry lowers as the nearest base class that has
  one: a dialect op refining a core op (a load that says more) needs an entry only where it
  lowers differently;
* ``reserved_shared(kernel)``: shared memory its lowering keeps for itself, which the
  pipelines leave free (evaluated before each pipeline pass);
* ``kernel_extension(target, debug)``: a fresh ``KernelExtension`` for each kernel lowered,
  for what its lowering adds to the kernel as a whole (parameters, persistent shared memory,
  code at the start, launch metadata).

A backend writes, for example::

    TILES = Dialect("vendor", "whole-tile copies")      # with its op classes (@TILES.op)
    COPIES = GpuDialect(ir=TILES, passes=(PassPlacement(GpuPass("find_tiles", run),
                                                        after="split_loop_addresses"),),
                        lowerings={TileCopyOp: lower_tile_copy})
    target.dialects = (COPIES,)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from llvmlite import ir

from ...ir.dialects import Dialect
from ...ir.nodes import Function

if TYPE_CHECKING:
    from .lowering import KernelLowering
    from .passes import GpuPass
    from .target import GpuTarget

__all__ = ["GpuDialect", "PassPlacement", "KernelExtension"]


@dataclass(frozen=True)
class PassPlacement:
    """``pass_`` runs just ``before`` or just ``after`` (exactly one of them) the pass of that
    name in the GPU pass order (core's, or one an earlier dialect placed)."""

    pass_: "GpuPass"
    before: str = ""
    after: str = ""

    def __post_init__(self) -> None:
        if bool(self.before) == bool(self.after):
            raise ValueError(f"pass '{self.pass_.name}': give exactly one of before= and after=")


class KernelExtension:
    """What a dialect's lowering adds to one kernel as a whole; ``KernelLowering.run`` calls
    each hook once, in this order.  Every hook does nothing by default."""

    def parameters(self, ctx: "KernelLowering") -> list[ir.Type]:
        """The types of the parameters this extension adds after the kernel's own (and after
        the error word of ``device_assert``); it sees the whole kernel (``ctx.fn_ir``)."""
        return []

    def declare(self, fn: ir.Function, first: int) -> None:
        """Mark its parameters in the new LLVM function ``fn``: as many as ``parameters``
        gave, from ``fn.args[first]`` on."""

    def shared_bytes(self) -> int:
        """Bytes of shared memory it keeps for the whole kernel, after the pipeline's buffers
        (at most what its dialect's ``reserved_shared`` asked the pipelines to leave)."""
        return 0

    def place_shared(self, address: ir.Value) -> None:
        """Where its ``shared_bytes`` start (an address computed in the entry block)."""

    def start(self, ctx: "KernelLowering") -> None:
        """At the kernel's start, once the parameters are bound, before the body."""

    def buffers_reused(self, ctx: "KernelLowering", b: ir.IRBuilder) -> None:
        """Ordinary reads and writes of the pipeline buffers' place (a layout exchange there)
        end here, before a barrier after which the buffers may be refilled."""

    def metadata(self) -> dict[str, Any]:
        """Facts for the compiled kernel's ``metadata`` (what the launcher needs)."""
        return {}


@dataclass(frozen=True)
class GpuDialect:
    """A backend's contribution to the GPU pipeline (see the module docstring)."""

    ir: Dialect
    passes: tuple[PassPlacement, ...] = ()
    lowerings: Mapping[type, Callable[..., None]] = field(
        default_factory=lambda: MappingProxyType({}))
    reserved_shared: Optional[Callable[[Function], int]] = None
    kernel_extension: Optional[Callable[["GpuTarget", bool], KernelExtension]] = None
