"""The verifier on laid-out IR and on the GPU dialect's shared-memory ops: what the layout
stage produces verifies (see the snapshot tests), and each broken rule is named."""
from __future__ import annotations

import pytest

from anytile.ir.parser import parse_module
from anytile.ir.verifier import verify_module

from gpu_kit import ir
from ir_text_kit import assert_verify_fails as _fails

B1 = "#blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>"
B1V = "#blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>"
B2 = "#blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>"
B2V = "#blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>"


def test_elementwise_operands_may_differ_in_layout():
    """Layouts are not types: a use in another layout is a conversion the lowering makes."""
    verify_module(parse_module(ir(f"""
        kernel @k(%a: ptr<f32>) {{
          %0 = arange {{start = 0, end = 128}} : tile<128xi32, {B1}>
          %1 = arange {{start = 0, end = 128}} : tile<128xi32, {B1V}>
          %2 = binary {{kind = "add"}} (%0, %1) : tile<128xi32, {B1V}>
          %3 = splat (%a) : tile<128xptr<f32>, {B1}>
          %4 = addptr (%3, %2) : tile<128xptr<f32>, {B1}>
          %5 = compare {{pred = "lt"}} (%0, %1) : tile<128xi1, {B1}>
          %6 = load (%4, %5, none) : tile<128xf32, {B1V}>
          store (%4, %6, %5)
        }}
    """)))


def test_every_tile_of_laid_out_ir_has_a_layout():
    _fails(f"""
        kernel @k() {{
          %0 = arange {{start = 0, end = 128}} : tile<128xi32, {B1}>
          %1 = arange {{start = 0, end = 128}} : tile<128xi32>
        }}
    """, "op 'arange'", "%1 : tile<128xi32> has no layout but %0 : tile<128xi32, #blocked<",
        "laid-out IR gives every tile value a layout")


def test_a_layout_fits_its_tiles_rank():
    _fails(f"""
        kernel @k() {{
          %0 = arange {{start = 0, end = 128}} : tile<128xi32, {B2}>
        }}
    """, "has a layout of rank 2 on a tile of rank 1")


def test_reduce_results_share_a_layout_and_loops_pass_theirs_on():
    s0 = f"#slice<dim=1, parent={B2}>"
    s1 = f"#slice<dim=1, parent={B2V}>"
    _fails(f"""
        kernel @k(%a: f32, %b: i32) {{
          %0 = splat (%a) : tile<8x64xf32, {B2}>
          %1 = splat (%b) : tile<8x64xi32, {B2}>
          %2, %3 = reduce {{axis = 1}} ([%0, %1]) : tile<8xf32, {s0}>, tile<8xi32, {s1}> {{
          ^(%x: f32, %i: i32, %y: f32, %j: i32):
            yield ([%x, %i])
          }}
        }}
    """, "reduce results have different layouts")
    _fails(f"""
        kernel @k(%a: f32, %n: i32) {{
          %0 = splat (%a) : tile<8x64xf32, {B2}>
          %1 = for (%n, %n, %n, [%0]) : tile<8x64xf32, {B2}> {{
          ^(%i: i32, %acc: tile<8x64xf32, {B2V}>):
            yield ([%acc])
          }}
        }}
    """, "for results (tile<8x64xf32, #blocked<spt=[1,1]", "should have the layouts of "
        "(tile<8x64xf32, #blocked<spt=[1,4]")


SHARED = "shared<2x32x16xf16, row 24>"


def test_the_shared_memory_dialect_verifies():
    verify_module(parse_module(ir(f"""
        kernel @k(%p: ptr<f16>, %n: i32) {{
          %b = shared_alloc : {SHARED}
          %0 = constant {{value = 0}} : i32
          %1 = splat (%p) : tile<32x16xptr<f16>, {B2V}>
          %2 = splat (%n) : tile<32x16xi32, {B2}>
          %3 = compare {{pred = "lt"}} (%2, %2) : tile<32x16xi1, {B2}>
          async_copy (%b, %0, %1, %3)
          async_commit
          async_wait {{pending = 1}}
          %4 = shared_load (%b, %0) : tile<32x16xf16, #shared<row 24>>
        }}
    """)))


@pytest.mark.parametrize("ops,problem", [
    ("%b = shared_alloc : tile<32x16xf16>", "shared_alloc gives one shared buffer, found "
                                            "(tile<32x16xf16>)"),
    ("%b = shared_alloc : shared<2x32x16xf16, row 8>", "rows of 8 elements cannot hold 16"),
    (f"%b = shared_alloc : {SHARED}\n%s = constant {{value = 0.0}} : f32\n"
     f"%x = shared_load (%b, %s) : tile<32x16xf16>", "slot: expected i32, found f32"),
    (f"%b = shared_alloc : {SHARED}\n%s = constant {{value = 0}} : i32\n"
     f"%x = shared_load (%b, %s) : tile<16x32xf16>",
     "result types (tile<16x32xf16>) should be (tile<32x16xf16>)"),
    (f"%b = shared_alloc : {SHARED}\n%s = constant {{value = 0}} : i32\n"
     f"%q = splat (%p) : tile<16x32xptr<f16>>\nasync_copy (%b, %s, %q, none)",
     "copied pointers: expected tile<32x16xptr<f16>>, found tile<16x32xptr<f16>>"),
    (f"%b = shared_alloc : {SHARED}\n%s = constant {{value = 0}} : i32\n"
     f"%q = splat (%p) : tile<32x16xptr<f16>>\n%m = splat (%s) : tile<32x16xi32>\n"
     f"async_copy (%b, %s, %q, %m)", "mask: expected tile<32x16xi1>, found tile<32x16xi32>"),
    ("%s = constant {value = 0} : i32\n%x = shared_load (%s, %s) : tile<32x16xf16>",
     "buffer must be a shared buffer, found i32"),
    ("async_wait {pending = -1}", "pending must be an int >= 0, found -1"),
])
def test_each_shared_memory_rule(ops, problem):
    body = "\n".join("  " + line for line in ops.splitlines())
    _fails(f"kernel @k(%p: ptr<f16>) {{\n{body}\n}}\n", problem)


def test_a_backends_buffer_layout_checks_its_own_rule():
    """A backend's buffer layout (NVIDIA's warpgroup operand) says what it cannot hold."""
    pytest.importorskip("anytile_nvidia.warpgroup")
    _fails("kernel @k(%p: ptr<f16>) {\n  %b = shared_alloc : shared<2x64x16xf16, swizzle 32 warps 2>\n}\n",
           "needs whole warpgroups (a multiple of 4 warps) and 64-row M-tiles, found 2 warps")
    _fails("kernel @k(%p: ptr<f16>) {\n  %b = shared_alloc : shared<2x64x16xf16, swizzle 64>\n}\n",
           "a 64 x 16 tile is not whole 8-row atoms of 64-byte panels")
