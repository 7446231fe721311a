"""CSE merges identical pure ops within scope only; DCE deletes what has no use and no effect."""
from __future__ import annotations

from pass_kit import check


# ---------------------------------------------------------------------------------------------
# CSE
# ---------------------------------------------------------------------------------------------
def test_cse_merges_identical_pure_ops_and_commuted_operands():
    check("cse", """
        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          %0 = binary {kind = "add"} (%x, %y) : i32
          %1 = binary {kind = "add"} (%y, %x) : i32
          %2 = binary {kind = "sub"} (%x, %y) : i32
          %3 = binary {kind = "sub"} (%y, %x) : i32
          %4 = binary {kind = "mul"} (%0, %1) : i32
          %5 = binary {kind = "mul"} (%2, %3) : i32
          %6 = binary {kind = "add"} (%4, %5) : i32
          store (%p, %6, none)
        }
    """, """
        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          %0 = binary {kind = "add"} (%x, %y) : i32
          %1 = binary {kind = "sub"} (%x, %y) : i32
          %2 = binary {kind = "sub"} (%y, %x) : i32
          %3 = binary {kind = "mul"} (%0, %0) : i32
          %4 = binary {kind = "mul"} (%1, %2) : i32
          %5 = binary {kind = "add"} (%3, %4) : i32
          store (%p, %5, none)
        }
    """)


def test_cse_compares_attributes_and_result_types_exactly():
    text = """
        kernel @k(%p: ptr<f32>, %q: ptr<i32>, %x: f32) {
          %0 = constant {value = 0.0} : f32
          %1 = constant {value = -0.0} : f32
          %2 = constant {value = 0} : i32
          %3 = constant {value = 0} : i64
          %4 = binary {kind = "max"} (%x, %0) : f32
          %5 = binary {kind = "max"} (%x, %1) : f32
          %6 = binary {kind = "min"} (%x, %0) : f32
          %7 = cast (%x) : i32
          %8 = cast (%x) : i16
          store (%p, %4, none)
          store (%p, %5, none)
          store (%p, %6, none)
          store (%q, %7, none)
          %9 = cast (%8) : i32
          %10 = cast (%3) : i32
          %11 = binary {kind = "add"} (%9, %10) : i32
          %12 = binary {kind = "add"} (%11, %2) : i32
          store (%q, %12, none)
        }
    """
    check("cse", text, text)


def test_cse_never_merges_loads_or_atomics():
    text = """
        kernel @k(%p: ptr<i32>) {
          %0 = load (%p, none, none) : i32
          %1 = load (%p, none, none) : i32
          %2 = atomic_rmw {kind = "add"} (%p, %0, none) : i32
          %3 = atomic_rmw {kind = "add"} (%p, %0, none) : i32
          %4 = atomic_cas (%p, %0, %1) : i32
          %5 = atomic_cas (%p, %0, %1) : i32
          %6 = binary {kind = "add"} (%2, %3) : i32
          %7 = binary {kind = "add"} (%4, %5) : i32
          %8 = binary {kind = "add"} (%6, %7) : i32
          store (%p, %8, none)
          store (%p, %8, none)
        }
    """
    check("cse", text, text)


def test_cse_reuses_outer_values_inside_regions_but_not_the_reverse():
    check("cse", """
        kernel @k(%p: ptr<i32>, %x: i32, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %a = binary {kind = "mul"} (%x, %x) : i32
          %r = for (%0, %n, %1, [%0]) : i32 {
          ^(%i: i32, %acc: i32):
            %b = binary {kind = "mul"} (%x, %x) : i32
            %c = binary {kind = "add"} (%i, %n) : i32
            %d = binary {kind = "add"} (%n, %i) : i32
            %e = binary {kind = "add"} (%b, %c) : i32
            %f = binary {kind = "add"} (%e, %d) : i32
            %g = binary {kind = "add"} (%acc, %f) : i32
            yield ([%g])
          }
          %c2 = binary {kind = "add"} (%x, %n) : i32
          %h = binary {kind = "add"} (%a, %c2) : i32
          %i2 = binary {kind = "add"} (%h, %r) : i32
          %one = constant {value = 1} : i32
          %j = binary {kind = "add"} (%i2, %one) : i32
          store (%p, %j, none)
        }
    """, """
        kernel @k(%p: ptr<i32>, %x: i32, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %a = binary {kind = "mul"} (%x, %x) : i32
          %r = for (%0, %n, %1, [%0]) : i32 {
          ^(%i: i32, %acc: i32):
            %c = binary {kind = "add"} (%i, %n) : i32
            %e = binary {kind = "add"} (%a, %c) : i32
            %f = binary {kind = "add"} (%e, %c) : i32
            %g = binary {kind = "add"} (%acc, %f) : i32
            yield ([%g])
          }
          %c2 = binary {kind = "add"} (%x, %n) : i32
          %h = binary {kind = "add"} (%a, %c2) : i32
          %i2 = binary {kind = "add"} (%h, %r) : i32
          %j = binary {kind = "add"} (%i2, %1) : i32
          store (%p, %j, none)
        }
    """)


def test_cse_does_not_share_between_sibling_regions():
    text = """
        kernel @k(%p: ptr<i32>, %c: i1, %x: i32) {
          %r = if (%c) : i32 {
            %0 = unary {kind = "neg"} (%x) : i32
            yield ([%0])
          } else_body {
            %1 = unary {kind = "neg"} (%x) : i32
            %2 = unary {kind = "abs"} (%1) : i32
            yield ([%2])
          }
          store (%p, %r, none)
        }
    """
    check("cse", text, text)


# ---------------------------------------------------------------------------------------------
# DCE
# ---------------------------------------------------------------------------------------------
def test_dce_removes_dead_chains_and_keeps_stores():
    check("dce", """
        kernel @k(%p: ptr<f32>, %x: f32) {
          %0 = unary {kind = "exp"} (%x) : f32
          %1 = binary {kind = "mul"} (%0, %0) : f32
          %2 = unary {kind = "neg"} (%1) : f32
          %3 = unary {kind = "sqrt"} (%x) : f32
          store (%p, %3, none)
        }
    """, """
        kernel @k(%p: ptr<f32>, %x: f32) {
          %0 = unary {kind = "sqrt"} (%x) : f32
          store (%p, %0, none)
        }
    """)


def test_dce_keeps_side_effects_and_drops_unused_plain_loads():
    check("dce", """
        kernel @k(%p: ptr<i32>, %c: i1) {
          %0 = load (%p, none, none) : i32
          %1 = load {volatile = True} (%p, none, none) : i32
          %2 = atomic_rmw {kind = "add"} (%p, %1, none) : i32
          %3 = atomic_cas (%p, %1, %1) : i32
          assert {message = "m"} (%c)
          barrier
          %4 = constant {value = 1} : i32
          %5 = binary {kind = "add"} (%4, %4) : i32
        }
    """, """
        kernel @k(%p: ptr<i32>, %c: i1) {
          %0 = load {volatile = True} (%p, none, none) : i32
          %1 = atomic_rmw {kind = "add"} (%p, %0, none) : i32
          %2 = atomic_cas (%p, %0, %0) : i32
          assert {message = "m"} (%c)
          barrier
        }
    """)


def test_dce_removes_effect_free_loops_and_ifs_but_keeps_effectful_ones_and_while():
    check("dce", """
        kernel @k(%p: ptr<i32>, %c: i1, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %dead = for (%0, %n, %1, [%0]) : i32 {
          ^(%i: i32, %a: i32):
            %v = load (%p, none, none) : i32
            %b = binary {kind = "add"} (%a, %v) : i32
            yield ([%b])
          }
          %live = for (%0, %n, %1, [%0]) : i32 {
          ^(%j: i32, %a2: i32):
            %unused = binary {kind = "mul"} (%j, %j) : i32
            store (%p, %a2, none)
            yield ([%a2])
          }
          %qq = arange {start = 0, end = 4} : tile<4xi32>
          %deadif = if (%c) : i32 {
            %s = reduce {axis = 0} ([%qq]) : i32 {
            ^(%l: i32, %r: i32):
              %t = binary {kind = "add"} (%l, %r) : i32
              yield ([%t])
            }
            yield ([%s])
          } else_body {
            yield ([%1])
          }
          %w = while ([%0]) : i32 {
          ^(%x: i32):
            condition (%c, [%x])
          } after {
          ^(%y: i32):
            yield ([%y])
          }
        }
    """, """
        kernel @k(%p: ptr<i32>, %c: i1, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %live = for (%0, %n, %1, [%0]) : i32 {
          ^(%j: i32, %a2: i32):
            store (%p, %a2, none)
            yield ([%a2])
          }
          %w = while ([%0]) : i32 {
          ^(%x: i32):
            condition (%c, [%x])
          } after {
          ^(%y: i32):
            yield ([%y])
          }
        }
    """)


def test_dce_drops_loop_carried_values_nobody_observes():
    check("dce", """
        kernel @k(%p: ptr<i32>, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %used, %dead, %feeds, %kept = for (%0, %n, %1, [%0, %1, %0, %1]) : i32, i32, i32, i32 {
          ^(%i: i32, %a: i32, %b: i32, %c: i32, %d: i32):
            %a2 = binary {kind = "add"} (%a, %i) : i32
            %b2 = binary {kind = "mul"} (%b, %c) : i32
            %c2 = binary {kind = "add"} (%c, %1) : i32
            store (%p, %d, none)
            %d2 = binary {kind = "add"} (%d, %i) : i32
            yield ([%a2, %b2, %c2, %d2])
          }
          store (%p, %used, none)
        }
    """, """
        kernel @k(%p: ptr<i32>, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %used, %kept = for (%0, %n, %1, [%0, %1]) : i32, i32 {
          ^(%i: i32, %a: i32, %d: i32):
            %a2 = binary {kind = "add"} (%a, %i) : i32
            store (%p, %d, none)
            %d2 = binary {kind = "add"} (%d, %i) : i32
            yield ([%a2, %d2])
          }
          store (%p, %used, none)
        }
    """)


def test_dce_keeps_loop_values_that_feed_live_slots():
    text = """
        kernel @k(%p: ptr<i32>, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %x, %unused_but_needed = for (%0, %n, %1, [%0, %1]) : i32, i32 {
          ^(%i: i32, %a: i32, %b: i32):
            %a2 = binary {kind = "add"} (%a, %b) : i32
            %b2 = binary {kind = "mul"} (%b, %i) : i32
            yield ([%a2, %b2])
          }
          store (%p, %x, none)
        }
    """
    check("dce", text, text)


def test_cse_keeps_operand_order_of_float_min_max():
    # min(-0.0, +0.0) and min(+0.0, -0.0) may differ, so they are not the same computation
    check("cse", """
        kernel @k(%p: ptr<f32>, %q: ptr<i32>, %x: f32, %y: f32, %a: i32, %b: i32) {
          %0 = binary {kind = "min"} (%x, %y) : f32
          %1 = binary {kind = "min"} (%y, %x) : f32
          %2 = binary {kind = "max"} (%a, %b) : i32
          %3 = binary {kind = "max"} (%b, %a) : i32
          store (%p, %0, none)
          store (%p, %1, none)
          store (%q, %2, none)
          store (%q, %3, none)
        }
    """, """
        kernel @k(%p: ptr<f32>, %q: ptr<i32>, %x: f32, %y: f32, %a: i32, %b: i32) {
          %0 = binary {kind = "min"} (%x, %y) : f32
          %1 = binary {kind = "min"} (%y, %x) : f32
          %2 = binary {kind = "max"} (%a, %b) : i32
          store (%p, %0, none)
          store (%p, %1, none)
          store (%q, %2, none)
          store (%q, %2, none)
        }
    """)
