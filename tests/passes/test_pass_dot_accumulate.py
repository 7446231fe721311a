"""``acc + dot(a, b)`` becomes ``dot(a, b, acc)`` (as Triton compiles ``acc += tl.dot(a, b)``),
and only where that is safe: the dot's accumulator a constant zero, its result used once,
in the add's block."""
from __future__ import annotations

import pytest

from anytile.ir.printer import print_module

from pass_kit import check, run_passes

PASSES = ["dot-accumulate", "dce"]

BEFORE = """
kernel @k(%p: tile<16x16xptr<f32>>, %a: tile<16x16xf16>, %b: tile<16x16xf16>, %acc: tile<16x16xf32>) {
  %z = constant {value = 0.0} : tile<16x16xf32>
  %d = dot (%a, %b, %z) : tile<16x16xf32>
  %s = binary {kind = "add"} (%ORDER) : tile<16x16xf32>
  store (%p, %s, none)
}
"""
AFTER = """
kernel @k(%p: tile<16x16xptr<f32>>, %a: tile<16x16xf16>, %b: tile<16x16xf16>, %acc: tile<16x16xf32>) {
  %s = dot (%a, %b, %acc) : tile<16x16xf32>
  store (%p, %s, none)
}
"""


@pytest.mark.parametrize("order", ["%acc, %d", "%d, %acc"])
def test_the_accumulator_goes_into_the_dot(order):
    check(PASSES, BEFORE.replace("%ORDER", order), AFTER)


@pytest.mark.parametrize("change", [
    ("constant {value = 0.0}", "constant {value = 1.0}"),              # a non-zero start
    ("store (%p, %s, none)", "store (%p, %s, none)\n  store (%p, %d, none)"),  # a second use
])
def test_left_alone_where_not_safe(change):
    before = BEFORE.replace("%ORDER", "%acc, %d").replace(*change)
    module = run_passes(PASSES, before)
    assert "binary" in print_module(module)


def test_a_dot_outside_the_loop_is_not_moved_in():
    before = """
    kernel @k(%p: tile<16x16xptr<f32>>, %a: tile<16x16xf16>, %b: tile<16x16xf16>, %n: i32) {
      %z = constant {value = 0.0} : tile<16x16xf32>
      %d = dot (%a, %b, %z) : tile<16x16xf32>
      %lo = constant {value = 0} : i32
      %one = constant {value = 1} : i32
      %r = for (%lo, %n, %one, [%z]) : tile<16x16xf32> {
      ^(%i: i32, %acc: tile<16x16xf32>):
        %s = binary {kind = "add"} (%acc, %d) : tile<16x16xf32>
        yield ([%s])
      }
      store (%p, %r, none)
    }
    """
    module = run_passes(PASSES, before)
    assert "binary" in print_module(module)
