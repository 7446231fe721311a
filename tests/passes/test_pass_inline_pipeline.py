"""The inliner makes the kernel self-contained; the default pipeline runs every pass."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from anytile.errors import CompilationError
from anytile.ir.nodes import Loc
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.types import i64
from anytile.ir.verifier import (IRVerificationError, verification_enabled, verify_if_enabled,
                                 verify_module)
from anytile.passes import PASSES, run_default_pipeline, run_pass

from pass_kit import check, ir


def test_inline_nested_calls_with_multiple_results():
    check("inline", """
        func @square(%a: f32) -> f32 {
          %0 = binary {kind = "mul"} (%a, %a) : f32
          return ([%0])
        }

        func @both(%a: f32, %n: i32) -> (f32, i32) {
          %s = call {callee = "square"} ([%a]) : f32
          %t = call {callee = "square"} ([%s]) : f32
          %m = unary {kind = "neg"} (%n) : i32
          return ([%t, %m])
        }

        func @unused(%a: f32) -> f32 {
          return ([%a])
        }

        kernel @k(%p: ptr<f32>, %q: ptr<i32>, %x: f32, %n: i32) {
          %a, %b = call {callee = "both"} ([%x, %n]) : f32, i32
          store (%p, %a, none)
          store (%q, %b, none)
          %c, %d = call {callee = "both"} ([%a, %b]) : f32, i32
          store (%p, %c, none)
          store (%q, %d, none)
        }
    """, """
        kernel @k(%p: ptr<f32>, %q: ptr<i32>, %x: f32, %n: i32) {
          %s = binary {kind = "mul"} (%x, %x) : f32
          %t = binary {kind = "mul"} (%s, %s) : f32
          %m = unary {kind = "neg"} (%n) : i32
          store (%p, %t, none)
          store (%q, %m, none)
          %s_1 = binary {kind = "mul"} (%t, %t) : f32
          %t_1 = binary {kind = "mul"} (%s_1, %s_1) : f32
          %m_1 = unary {kind = "neg"} (%m) : i32
          store (%p, %t_1, none)
          store (%q, %m_1, none)
        }
    """)


def test_inline_inside_regions_and_callee_with_regions():
    check("inline", """
        func @sum_to(%n: i32, %init: f32) -> f32 {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %r = for (%0, %n, %1, [%init]) : f32 {
          ^(%i: i32, %acc: f32):
            %f = cast (%i) : f32
            %s = binary {kind = "add"} (%acc, %f) : f32
            yield ([%s])
          }
          return ([%r])
        }

        func @store_twice(%p: ptr<f32>, %v: f32) {
          store (%p, %v, none)
          store (%p, %v, none)
          return ([])
        }

        kernel @k(%p: ptr<f32>, %c: i1, %n: i32, %x: f32) {
          %y = if (%c) : f32 {
            %s = call {callee = "sum_to"} ([%n, %x]) : f32
            yield ([%s])
          } else_body {
            yield ([%x])
          }
          call {callee = "store_twice"} ([%p, %y])
        }
    """, """
        kernel @k(%p: ptr<f32>, %c: i1, %n: i32, %x: f32) {
          %y = if (%c) : f32 {
            %0 = constant {value = 0} : i32
            %1 = constant {value = 1} : i32
            %r = for (%0, %n, %1, [%x]) : f32 {
            ^(%i: i32, %acc: f32):
              %f = cast (%i) : f32
              %s = binary {kind = "add"} (%acc, %f) : f32
              yield ([%s])
            }
            yield ([%r])
          } else_body {
            yield ([%x])
          }
          store (%p, %y, none)
          store (%p, %y, none)
        }
    """)


def test_inline_returning_a_parameter_directly():
    check("inline", """
        func @second(%a: i32, %b: i32) -> i32 {
          return ([%b])
        }

        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          %0 = call {callee = "second"} ([%x, %y]) : i32
          store (%p, %0, none)
        }
    """, """
        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          store (%p, %y, none)
        }
    """)


def test_recursion_is_a_clear_error_at_the_call():
    module = parse_module(ir("""
        func @f(%a: i32) -> i32 {
          %0 = call {callee = "g"} ([%a]) : i32
          return ([%0])
        }

        func @g(%a: i32) -> i32 {
          %0 = call {callee = "f"} ([%a]) : i32 loc("user.py":12:8 in "g")
          return ([%0])
        }

        kernel @k(%p: ptr<i32>, %x: i32) {
          %0 = call {callee = "f"} ([%x]) : i32
          store (%p, %0, none)
        }
    """))
    verify_module(module)
    with pytest.raises(CompilationError) as info:
        PASSES["inline"](module)
    message = str(info.value)
    assert "recursive call f -> g -> f" in message
    assert info.value.loc == Loc("user.py", 12, 8, "g")
    assert message.startswith("user.py:12:9 (in g)")


def test_pipeline_simplifies_a_kernel_end_to_end():
    module = parse_module(ir("""
        func @scale(%v: tile<64xf32>, %s: f32) -> tile<64xf32> {
          %0 = splat (%s) : tile<64xf32>
          %1 = binary {kind = "mul"} (%v, %0) : tile<64xf32>
          return ([%1])
        }

        kernel @k(%x: ptr<f32> {divisibility = 16}, %out: ptr<f32>, %n: i32) {
          %pid = program_id {axis = 0} : i32
          %c64 = constant {value = 64} : i32
          %start = binary {kind = "mul"} (%c64, %pid) : i32
          %zero = constant {value = 0} : i32
          %start2 = binary {kind = "add"} (%start, %zero) : i32
          %0 = splat (%start2) : tile<64xi32>
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %offs = binary {kind = "add"} (%0, %r) : tile<64xi32>
          %1 = splat (%n) : tile<64xi32>
          %mask = compare {pred = "lt"} (%offs, %1) : tile<64xi1>
          %2 = splat (%x) : tile<64xptr<f32>>
          %px = addptr (%2, %offs) : tile<64xptr<f32>>
          %v = load (%px, %mask, none) : tile<64xf32>
          %half = constant {value = 0.5} : f32
          %two = constant {value = 2.0} : f32
          %one = binary {kind = "mul"} (%half, %two) : f32
          %w = call {callee = "scale"} ([%v, %one]) : tile<64xf32>
          %3 = splat (%out) : tile<64xptr<f32>>
          %po = addptr (%3, %offs) : tile<64xptr<f32>>
          %unused = unary {kind = "exp"} (%w) : tile<64xf32>
          store (%po, %w, %mask)
        }
    """))
    verify_module(module)
    assert run_default_pipeline(module, verify=True) is module
    assert print_module(module) == ir("""
        kernel @k(%x: ptr<f32> {divisibility = 16}, %out: ptr<f32>, %n: i32) {
          %pid = program_id {axis = 0} : i32
          %c64 = constant {value = 64} : i32
          %start = binary {kind = "mul"} (%pid, %c64) : i32
          %0 = splat (%start) : tile<64xi32>
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %offs = binary {kind = "add"} (%0, %r) : tile<64xi32>
          %1 = splat (%n) : tile<64xi32>
          %mask = compare {pred = "lt"} (%offs, %1) : tile<64xi1>
          %2 = splat (%x) : tile<64xptr<f32>>
          %px = addptr (%2, %offs) : tile<64xptr<f32>>
          %v = load (%px, %mask, none) : tile<64xf32>
          %3 = splat (%out) : tile<64xptr<f32>>
          %po = addptr (%3, %offs) : tile<64xptr<f32>>
          store (%po, %v, %mask)
        }
    """)


def test_pipeline_reaches_a_fixed_point():
    text = ir("""
        kernel @k(%p: ptr<i32>, %n: i32) {
          %0 = constant {value = 3} : i32
          %1 = constant {value = 4} : i32
          %c = compare {pred = "lt"} (%0, %1) : i1
          %r = if (%c) : i32 {
            %2 = binary {kind = "mul"} (%0, %1) : i32
            %3 = binary {kind = "sub"} (%2, %n) : i32
            yield ([%3])
          } else_body {
            yield ([%n])
          }
          %4 = binary {kind = "sub"} (%r, %r) : i32
          %5 = binary {kind = "add"} (%4, %n) : i32
          store (%p, %5, none)
        }
    """)
    module = run_default_pipeline(parse_module(text), verify=True)
    expected = ir("""
        kernel @k(%p: ptr<i32>, %n: i32) {
          store (%p, %n, none)
        }
    """)
    assert print_module(module) == expected
    assert print_module(run_default_pipeline(parse_module(expected))) == expected


def test_pass_registry_names():
    assert set(PASSES) == {"inline", "canonicalize", "fold", "cse", "broadcast-dot",
                           "dot-accumulate", "dce"}
    for fn in PASSES.values():
        assert fn.__doc__


def _breaks_the_ir(module) -> bool:
    """A pass with a bug: the kernel's store now writes an i64 through a ptr<i32>."""
    store = module.kernel.body.ops[-1]
    store.value.type = i64
    return True


BROKEN_BY_A_PASS = """
    kernel @k(%p: ptr<i32>, %n: i32) {
      store (%p, %n, none)
    }
"""


def test_passes_verify_when_anytile_verify_is_set(monkeypatch):
    """``ANYTILE_VERIFY`` (set by the test configuration) verifies after every pass; the
    error names the pass; ``verify=`` overrides the switch either way."""
    monkeypatch.setitem(PASSES, "broken", _breaks_the_ir)
    monkeypatch.setenv("ANYTILE_VERIFY", "1")
    with pytest.raises(IRVerificationError) as info:
        run_pass(parse_module(ir(BROKEN_BY_A_PASS)), "broken")
    assert str(info.value).startswith("after pass 'broken': in @k: op 'store': stored value: "
                                      "expected i32, found i64")
    assert run_pass(parse_module(ir(BROKEN_BY_A_PASS)), "broken", verify=False)
    monkeypatch.setenv("ANYTILE_VERIFY", "0")
    assert run_pass(parse_module(ir(BROKEN_BY_A_PASS)), "broken")
    with pytest.raises(IRVerificationError, match="after pass 'broken'"):
        run_pass(parse_module(ir(BROKEN_BY_A_PASS)), "broken", verify=True)


def test_verify_if_enabled_names_the_stage(monkeypatch):
    module = parse_module(ir(BROKEN_BY_A_PASS))
    _breaks_the_ir(module)
    monkeypatch.delenv("ANYTILE_VERIFY", raising=False)
    assert not verification_enabled()
    assert verify_if_enabled(module, after="a stage") is False
    monkeypatch.setenv("ANYTILE_VERIFY", "1")
    for ir_of_a_stage in (module, module.kernel, SimpleNamespace(module=module)):
        with pytest.raises(IRVerificationError) as info:
            verify_if_enabled(ir_of_a_stage, after="the 'laid-out ir' stage")
        assert str(info.value).startswith("after the 'laid-out ir' stage: in @k: op 'store'")
    assert verify_if_enabled(parse_module(ir(BROKEN_BY_A_PASS)), after="a stage") is True
    for not_ir in ("ptx text", b"cubin", SimpleNamespace(module="llir")):
        assert verify_if_enabled(not_ir, after="a stage") is False
