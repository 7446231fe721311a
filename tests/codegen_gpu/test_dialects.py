"""A backend's own ops and passes in the GPU pipeline: an IR dialect whose ops verify, print and
parse only while it is loaded, passes placed by name in the data-driven pass order (verified
and dumped after each), lowering-table entries (a refining op lowers as its core op unless its
dialect says otherwise) and a kernel extension adding parameters and metadata."""
from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from anytile.backend import CompileOptions
from anytile.codegen.gpu import lay_out, lower_to_llvm
from anytile.codegen.gpu.dialects import GpuDialect, KernelExtension, PassPlacement
from anytile.codegen.gpu.passes import GPU_PASSES, GpuPass, pass_order
from anytile.codegen.gpu.simulator import SimulatedGpuTarget
from anytile.ir import ops
from anytile.ir.dialects import Dialect
from anytile.ir.nodes import walk
from anytile.ir.parser import IRParseError, parse_module
from anytile.ir.printer import print_module
from anytile.ir.rules import expect
from anytile.ir.verifier import IRVerificationError, verify_module
from llvmlite import ir as llvm_ir

from gpu_kit import ir

TOY = Dialect("toy", "the ops of these tests")


@TOY.op
@dataclass(eq=False)
class CountedLoadOp(ops.LoadOp):
    """A ``load`` that also says how many times its tile is read (``reads`` >= 1)."""

    NAME = "toy.counted_load"
    ATTRS = ("volatile", "reads")
    reads: int = 1

    def verify(self) -> None:
        super().verify()
        expect(isinstance(self.reads, int) and self.reads >= 1,
               f"reads must be an int >= 1, found {self.reads!r}")


ADD = """
    kernel @add(%x: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}) {
      %0 = arange {start = 0, end = 128} : tile<128xi32>
      %1 = splat (%x) : tile<128xptr<f32>>
      %2 = addptr (%1, %0) : tile<128xptr<f32>>
      %3 = OP (%2, none, none) : tile<128xf32>
      %4 = splat (%out) : tile<128xptr<f32>>
      %5 = addptr (%4, %0) : tile<128xptr<f32>>
      store (%5, %3, none)
    }
"""


@pytest.fixture(autouse=True)
def _unloaded_after():
    """Each test starts and ends with the toy dialect unloaded (``lay_out`` loads it)."""
    TOY.unload()
    yield
    TOY.unload()


def test_a_dialect_op_prints_parses_and_verifies_while_loaded():
    TOY.load()
    text = ir(ADD.replace("OP", "toy.counted_load {reads = 2}"))
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text
    load, = [op for op in walk(module.kernel.body) if isinstance(op, ops.LoadOp)]
    assert type(load) is CountedLoadOp and load.reads == 2
    with pytest.raises(IRVerificationError,
                       match=r"op 'toy.counted_load'.*reads must be an int >= 1, found 0"):
        verify_module(parse_module(text.replace("reads = 2", "reads = 0")))


def test_an_unloaded_dialect_is_neither_parsed_nor_verified():
    text = ir(ADD.replace("OP", "toy.counted_load {reads = 2}"))
    TOY.load()
    module = parse_module(text)
    TOY.unload()
    with pytest.raises(IRParseError,
                       match="unknown op 'toy.counted_load' .*'toy' dialect, which is not loaded"):
        parse_module(text)
    with pytest.raises(IRVerificationError,
                       match="op 'toy.counted_load'.*'toy' dialect, which is not loaded"):
        verify_module(module)


def test_dialect_ops_are_named_after_their_dialect():
    with pytest.raises(ValueError, match=r"a 'toy' op is named 'toy.<name>', found NAME = 'counted'"):
        @TOY.op
        @dataclass(eq=False)
        class Misnamed(ops.LoadOp):
            NAME = "counted"
    with pytest.raises(ValueError, match="a dialect named 'toy' exists already"):
        Dialect("toy")
    with pytest.raises(ValueError, match="must be lowercase"):
        Dialect("Toy")


def _count_loads(state) -> int:
    """The toy pass: every plain load becomes a counted one."""
    count = 0
    for block in [state.kernel.body] + [r for op in walk(state.kernel.body) for r in op.regions]:
        for i, op in enumerate(block.ops):
            if type(op) is ops.LoadOp:
                new = CountedLoadOp(op.ptr, op.mask, op.other, reads=3, loc=op.loc)
                new.results = op.results
                new.results[0].owner = new
                block.ops[i] = new
                count += 1
    return count


class _OneMoreParameter(KernelExtension):
    """Adds one i32 parameter and says so in the metadata."""

    def __init__(self) -> None:
        self.declared = None

    def parameters(self, ctx):
        return [llvm_ir.IntType(32)]

    def declare(self, fn, first):
        self.declared = first

    def metadata(self):
        return {"toy_parameter": self.declared}


COUNT = GpuPass("count_loads", _count_loads, metadata="counted_loads")


def _toy_target(**extra) -> SimulatedGpuTarget:
    target = SimulatedGpuTarget(32, ())
    target.dialects = (GpuDialect(TOY, (PassPlacement(COUNT, after="order_reductions"),), **extra),)
    return target


def test_a_dialects_pass_runs_where_it_is_placed():
    names = [p.name for p in pass_order(_toy_target())]
    core = [p.name for p in GPU_PASSES]
    at = core.index("order_reductions") + 1
    assert names == core[:at] + ["count_loads"] + core[at:]
    bad = SimulatedGpuTarget(32, ())
    bad.dialects = (GpuDialect(TOY, (PassPlacement(COUNT, before="no_such_pass"),)),)
    with pytest.raises(ValueError, match="places pass 'count_loads' by 'no_such_pass', which is "
                                         "not a GPU pass \\(there are: insert_bounds_checks, "):
        pass_order(bad)
    with pytest.raises(ValueError, match="exactly one of before= and after="):
        PassPlacement(COUNT)


def test_a_dialects_ops_lower_as_the_core_op_they_refine_and_its_extension_adds_parameters():
    target = _toy_target(kernel_extension=lambda target, debug: _OneMoreParameter())
    module = parse_module(ir(ADD.replace("OP", "load")))
    options = CompileOptions(num_warps=4, num_stages=1)
    metadata: dict = {}
    laid = lay_out(module, target, options, metadata)
    assert "toy.counted_load {reads = 3}" in print_module(module)
    assert metadata["counted_loads"] == 1
    kernel = lower_to_llvm(laid, target, options, metadata)
    fn = kernel.module.get_global("add")
    assert [str(a.type) for a in fn.args][-1] == "i32" and len(fn.args) == 3
    assert metadata["toy_parameter"] == 2 and kernel.metadata == {"toy_parameter": 2}
    assert "load" in str(kernel.module)


def test_a_dialects_own_lowering_entry_wins():
    seen = []

    def lower_counted(ctx, op):
        seen.append(op.reads)
        from anytile.codegen.gpu.memory import lower_load
        lower_load(ctx, op)
    target = _toy_target(lowerings={CountedLoadOp: lower_counted})
    module = parse_module(ir(ADD.replace("OP", "load")))
    options = CompileOptions(num_warps=4, num_stages=1)
    lower_to_llvm(lay_out(module, target, options, {}), target, options, {})
    assert seen == [3]


def test_each_pass_is_verified_and_dumped(tmp_path, monkeypatch):
    def breaks_the_ir(state):
        store = state.kernel.body.ops[-1]
        store.value = store.ptr          # a store of pointers through pointers to f32
    target = SimulatedGpuTarget(32, ())
    target.dialects = (GpuDialect(TOY, (PassPlacement(GpuPass("break_it", breaks_the_ir),
                                                      before="assign_layouts"),)),)
    options = CompileOptions(num_warps=4, num_stages=1)
    monkeypatch.setenv("ANYTILE_VERIFY", "1")
    with pytest.raises(IRVerificationError, match="after break_it: .*stored value"):
        lay_out(parse_module(ir(ADD.replace("OP", "load"))), target, options, {})
    monkeypatch.setenv("ANYTILE_GPU_DUMP", str(tmp_path))
    lay_out(parse_module(ir(ADD.replace("OP", "load"))), _toy_target(), options, {})
    dumped = sorted(os.listdir(tmp_path))
    assert dumped[0] == "add.01.order_reductions.ir" and "add.02.count_loads.ir" in dumped
    assert dumped[-1].endswith(".assign_layouts.ir")
    assert "toy.counted_load" in (tmp_path / "add.02.count_loads.ir").read_text()
