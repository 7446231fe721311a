"""The CPU layout of tiles (stage ``laid-out ir``).

``CpuVectorLayout(lanes)``: a tile is row-major; its innermost dimension is processed in
chunks of ``lanes`` consecutive elements (one SIMD register of 32-bit lanes: 16 with
AVX-512, 8 with AVX2, 4 with SSE/NEON).  Whether a tile then lives in registers (fused into
its consumer's loop) or in a stack buffer is decided during lowering (``lowering.plan``).
The layout prints as ``#cpu.vector<8>`` and parses back (importing this module registers it).
"""
from __future__ import annotations

from dataclasses import dataclass

from anytile.ir import Block, Function, Module, TileType, Value
from anytile.ir.nodes import clone_block
from anytile.ir.types import register_layout_syntax
from anytile.ir.verifier import verify_if_enabled

__all__ = ["CpuVectorLayout", "annotate_layouts"]


@dataclass(frozen=True)
class CpuVectorLayout:
    """Row-major tile, innermost dimension in chunks of ``lanes`` elements."""

    lanes: int

    def __str__(self) -> str:
        return f"#cpu.vector<{self.lanes}>"

    @classmethod
    def parse(cls, body: str) -> "CpuVectorLayout":
        if not body.strip().isdigit() or int(body) < 1:
            raise ValueError(f"malformed #cpu.vector<{body}>: expected #cpu.vector<LANES>")
        return cls(int(body))


register_layout_syntax("cpu.vector", CpuVectorLayout.parse)


def annotate_layouts(module: Module, lanes: int) -> Module:
    """A copy of ``module`` whose every tile type carries ``CpuVectorLayout(lanes)``."""
    layout = CpuVectorLayout(lanes)
    out = Module(kernel_name=module.kernel_name, attrs=dict(module.attrs))
    for fn in module.functions.values():
        body = clone_block(fn.body, {})
        _retype_block(body, layout)
        out.functions[fn.name] = Function(fn.name, body, list(fn.result_types),
                                          [dict(a) for a in fn.arg_attrs], fn.loc, fn.is_kernel)
    verify_if_enabled(out, after="the cpu layout annotation")
    return out


def _retype(v: Value, layout: CpuVectorLayout) -> None:
    if isinstance(v.type, TileType):
        v.type = TileType(v.type.shape, v.type.elem, layout)


def _retype_block(block: Block, layout: CpuVectorLayout) -> None:
    for a in block.args:
        _retype(a, layout)
    for op in block.ops:
        for r in op.results:
            _retype(r, layout)
        for region in op.regions:
            _retype_block(region, layout)
