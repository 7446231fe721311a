"""A load the frontend recorded as a block read (a block pointer's or a descriptor's: ``box`` and
``array``) stays one through the GPU passes of every target: its addresses are not split (its
hoisted pointer tile would stay live through the loop), and read transposed it is the same
block of the array seen with its dimensions swapped."""
from __future__ import annotations

from anytile.codegen.gpu.addresses import split_loop_addresses
from anytile.codegen.gpu.pipeline import load_transposed
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module

from gpu_kit import ir
from test_split_addresses import INDEXED_MATMUL

BLOCK = "[%k, %0], [%a_ptr, %K, %K, %K, %one]"


def _block_read_of_a() -> str:
    """The indexed matmul with A's load recorded as the block at (k, 0) of a K x K array."""
    text = ir(INDEXED_MATMUL).replace("%acc = constant", "%one = constant {value = 1} : i32\n"
                                      "      %acc = constant", 1)
    return text.replace("%a = load (%12, none, none)", f"%a = load (%12, none, none, {BLOCK})")


def test_a_block_read_keeps_its_addresses():
    plain = parse_module(ir(INDEXED_MATMUL))
    assert split_loop_addresses(plain.kernel) == 2
    block = parse_module(_block_read_of_a())
    verify_module(block)
    assert split_loop_addresses(block.kernel) == 1           # B's only
    text = print_module(block)
    assert f"%a = load (%25, none, none, {BLOCK})" in text      # its pointers as they were
    assert "%25 = addptr (%23, %24) : tile<32x16xptr<f16>>" in text and "%b = load (%29," in text


def test_a_block_read_transposed_is_the_same_block_with_its_dimensions_swapped():
    module = parse_module(ir("""
        kernel @k(%p: ptr<f16> {divisibility = 16}, %out: ptr<f16> {divisibility = 16}, %m: i32, %n: i32, %s: i32, %r: i32, %c: i32) {
          %one = constant {value = 1} : i32
          %0 = splat (%p) : tile<16x32xptr<f16>>
          %x = load (%0, none, none, [%r, %c], [%p, %m, %n, %s, %one]) : tile<16x32xf16>
          %y = permute {order = (1, 0)} (%x) : tile<32x16xf16>
          %1 = splat (%out) : tile<32x16xptr<f16>>
          store (%1, %y, none)
        }
    """))
    assert load_transposed(module.kernel) == 1
    verify_module(module)
    text = print_module(module)
    assert "%y = load (%1, none, none, [%c, %r], [%p, %n, %m, %one, %s]) : tile<32x16xf16>" in text
