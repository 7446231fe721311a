"""The ``nvidia`` dialect: its ops check their own rules and print and parse as IR text once it
is loaded; the NVIDIA targets put their passes among core's by name; a pipelined matmul's
laid-out IR shows the copies by box, the commits and waits that track them and the wait that
fences the warpgroup MMA's slots."""
import textwrap

import pytest

from anytile.backend import CompileOptions
from anytile.codegen.gpu import lay_out, pass_order
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import IRVerificationError, verify_module
from anytile_nvidia.dialect import NVIDIA, BoxLoadOp
from anytile_nvidia.target import NvidiaTarget
from anytile_nvidia.warpgroup_sim import simulated_hopper_target

import anytile as at
import test_tma
from tma_kit import carried_matmul, tma_target


def _ir(text):
    return textwrap.dedent(text).strip("\n") + "\n"


HEAD = "kernel @k(%p: ptr<f16> {divisibility = 16}, %m: i64, %n: i64, %s: i64, %r: i32, %b: i1) {"
BOX = """
    {head}
      %one = constant {{value = 1}} : i64
      %0 = splat (%p) : tile<16x16xptr<f16>>
      {op}
    }}
"""


def _box_ir(op):
    return _ir(BOX.format(head=HEAD, op=op))


@pytest.mark.parametrize("op,problem", [
    ("%1 = nvidia.box_load (%0, none, none) : tile<16x16xf16>", "a box load needs a box"),
    ("%1 = nvidia.box_load (%0, none, none, [%r, %r], [%p, %m, %n, %s, %one], [%r]) : tile<16x16xf16>",
     "box_exact: expected i1, found i32"),
    ("%1 = nvidia.box_load {box_order = (0, 0)} (%0, none, none, [%r, %r], [%p, %m, %n, %s, %one]) "
     ": tile<16x16xf16>", "box_order (0, 0) is not a permutation"),
    ("%1 = nvidia.box_load (%0, none, none, [%r], [%p, %m, %n, %s, %one]) : tile<16x16xf16>",
     "a box of a 2-D tile needs 2 coordinates, found 1"),
    ("%1 = load (%0, none, none) : tile<16x16xf16>\n"
     "nvidia.box_store (%0, %1, none, [%r, %r], [%p, %m, %n, %s])",
     "the array of a 2-D box is its base, 2 sizes and 2 strides, found 4 values"),
])
def test_each_box_rule(op, problem):
    NVIDIA.load()
    with pytest.raises(IRVerificationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        verify_module(parse_module(_box_ir(op)))


def test_box_ops_read_back_and_need_their_dialect():
    NVIDIA.load()
    text = _box_ir("%1 = nvidia.box_load {box_order = (1, 0)} (%0, none, none, [%r, %r], "
                   "[%p, %m, %n, %s, %one], [%b]) : tile<16x16xf16>")
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text
    load = module.kernel.body.ops[2]
    assert isinstance(load, BoxLoadOp) and load.reads_transposed() and load.reads_block
    NVIDIA.unload()
    try:
        with pytest.raises(IRVerificationError, match="'nvidia' dialect, which is not loaded"):
            verify_module(module)
    finally:
        NVIDIA.load()


def test_the_nvidia_passes_sit_among_cores_by_name():
    def around(target):
        names = [p.name for p in pass_order(target)]
        return {n: (names[names.index(n) - 1]) for n in
                ("box_loads", "find_pointer_boxes", "drop_unused_boxes", "fence_waits") if n in names}
    assert around(NvidiaTarget("sm_90", warpgroup_mma=True, tensor_copies=True)) == {
        "box_loads": "order_reductions", "find_pointer_boxes": "split_loop_addresses",
        "drop_unused_boxes": "pipeline_dot_operands", "fence_waits": "drop_unused_boxes"}
    # without the copy unit: blocks still made box loads (the same pipelines), waits fenced
    assert around(NvidiaTarget("sm_80")) == {"box_loads": "order_reductions",
                                            "fence_waits": "pipeline_dot_operands"}


def _laid_out(fn, sig, consts, target, warps=4, stages=3):
    module = at.compile(fn, target="nvidia:sm_90", signature=sig, constexprs=consts,
                        num_warps=warps).module
    lay_out(module, target, CompileOptions(num_warps=warps, num_stages=stages), {})
    return print_module(module)


def test_a_descriptor_matmul_copies_by_box_and_fences_its_slots():
    text = _laid_out(test_tma.desc_matmul, test_tma._signature(64, 64, 64),
                     {"BM": 64, "BN": 64, "BK": 64}, tma_target())
    assert text.count("nvidia.box_copy (") == 6 and " async_copy (" not in text
    # the top of the loop waits for its slot, fenced for the warpgroup MMA; the drain is not
    assert "    nvidia.async_wait {pending = 1, proxy_fence = True}\n" in text
    assert "  nvidia.async_wait\n" in text and text.count("nvidia.async_commit") == 3
    assert print_module(parse_module(text)) == text


def test_without_the_copy_unit_only_the_fence_remains():
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16",
           "sam": "i32:16", "sbk": "i32:16", "scm": "i32:16"}
    text = _laid_out(carried_matmul, sig, {"BM": 64, "BN": 64, "BK": 32}, simulated_hopper_target())
    assert "nvidia.box" not in text and text.count(" async_copy (") == 6
    assert "    nvidia.async_wait {pending = 1, proxy_fence = True}\n" in text
    assert "  async_wait\n" in text and "nvidia.async_commit" not in text


def test_a_loop_that_also_prefetches_in_registers_still_fences_its_slots():
    """The register prefetch puts its loads first in the loop body: the fence goes on the wait
    the dot pipeline put there before it (one operand pipelined, the other scaled in registers)."""
    import test_warpgroup
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16"}
    laid = at.compile(test_warpgroup._scaled_operand_matmul, target="nvidia:sm_90", signature=sig,
                      constexprs={"SCALE_A": True, "BM": 64, "BN": 32, "BK": 32},
                      num_warps=4).asm["laid-out ir"]
    assert "nvidia.async_wait {pending = 1, proxy_fence = True}" in laid
