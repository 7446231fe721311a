"""``sum(x[:, :, None] * y[None, :, :], axis=1)`` becomes ``dot(x, y)`` (as in Triton), and
only where that is safe: f32, a sum over the middle axis, the product used once, every
dimension at least 16."""
from __future__ import annotations

import pytest

from anytile.ir.printer import print_module

from pass_kit import check, run_passes

PASSES = ["broadcast-dot", "dot-accumulate", "dce"]

BEFORE = """
kernel @k(%p: tile<32x16xptr<f32>>, %x: tile<32x64xf32>, %y: tile<64x16xf32>, %acc: tile<32x16xf32>) {
  %0 = expand_dims {axis = 2} (%x) : tile<32x64x1xf32>
  %1 = broadcast (%0) : tile<32x64x16xf32>
  %2 = expand_dims {axis = 0} (%y) : tile<1x64x16xf32>
  %3 = broadcast (%2) : tile<32x64x16xf32>
  %4 = binary {kind = "mul"} (%ORDER) : tile<32x64x16xf32>
  %5 = reduce {axis = 1, commutative = True} ([%4]) : tile<32x16xf32> {
  ^(%a: f32, %b: f32):
    %6 = binary {kind = "add"} (%a, %b) : f32
    yield ([%6])
  }
  %s = binary {kind = "add"} (%5, %acc) : tile<32x16xf32>
  store (%p, %s, none)
}
"""
AFTER = """
kernel @k(%p: tile<32x16xptr<f32>>, %x: tile<32x64xf32>, %y: tile<64x16xf32>, %acc: tile<32x16xf32>) {
  %s = dot (%x, %y, %acc) : tile<32x16xf32>
  store (%p, %s, none)
}
"""


@pytest.mark.parametrize("order", ["%1, %3", "%3, %1"])
def test_a_summed_broadcast_product_is_a_dot(order):
    check(PASSES, BEFORE.replace("%ORDER", order), AFTER)


@pytest.mark.parametrize("change", [
    ('%6 = binary {kind = "add"}', '%6 = binary {kind = "max"}'),       # not a sum
    ("store (%p, %s, none)", "store (%p, %s, none)\n  %7 = reduce {axis = 0, commutative = True} ([%4]) : tile<64x16xf32> {\n  ^(%c: f32, %d: f32):\n    %8 = binary {kind = \"add\"} (%c, %d) : f32\n    yield ([%8])\n  }\n  %9 = reduce {axis = 0, commutative = True} ([%7]) : tile<16xf32> {\n  ^(%e: f32, %f: f32):\n    %10 = binary {kind = \"add\"} (%e, %f) : f32\n    yield ([%10])\n  }"),  # the products used again
])
def test_left_alone_where_not_safe(change):
    module = run_passes(PASSES, BEFORE.replace("%ORDER", "%1, %3").replace(*change))
    text = print_module(module)
    assert "mul" in text and "dot" not in text


def test_small_or_narrow_products_are_left_alone():
    small = BEFORE.replace("%ORDER", "%1, %3").replace("32x64x1x", "32x8x1x") \
        .replace("32x64x16x", "32x8x16x").replace("1x64x16x", "1x8x16x") \
        .replace("tile<32x64xf32>", "tile<32x8xf32>").replace("tile<64x16xf32>", "tile<8x16xf32>")
    assert "dot" not in print_module(run_passes(PASSES, small))
