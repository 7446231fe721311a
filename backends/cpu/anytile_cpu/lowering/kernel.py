"""The LLVM module of a kernel: the program function plus the native entries ``run`` and
``run_claiming``.

``void run(u64 *args, i32 gx, i32 gy, i32 gz, i64 begin, i64 end, i32 *error)`` runs the
programs whose linear ids are in ``[begin, end)`` (z slowest; within a z plane in bands of
``GROUP_ROWS`` y values, see ``_program_ids``).  ``args``
holds one 8-byte slot per runtime parameter (its storage bits, little-end first), so the
launcher packs arguments with no per-kernel C code; ``error`` receives ``i + 1`` when
``device_assert`` number ``i`` fails, and the loop over programs stops once ``error`` is not
0 (the launcher writes ``CANCELLED`` there to stop a launch on Ctrl-C).  In checked mode
(``debug=True``) ``args`` also holds two slots per pointer parameter after the others, the
address and size of its argument's memory, and ``error`` points to a ``failures.CheckRecord``.
A kernel with streaming stores (``streaming``; never in checked mode) has one more slot
after the arguments: 1 when the launch is big enough for them to be used.

``void run_claiming(u64 *args, i32 gx, i32 gy, i32 gz, i64 *next, i64 end, i32 *error,
i64 grain)`` is what each worker of a launch runs: it claims ``grain`` programs at a time
from the shared counter ``*next`` (an atomic add) and runs them, until ``end``.  A worker that
gets less of the machine (another process on its core) then claims fewer programs instead
of holding the whole launch up.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from anytile.codegen.llvm import ElementwiseLowering, LLVMTypes, MathLowering
from anytile.codegen.llvm.types import I1, I8, I32, I64
from anytile.ir import Module, PointerType, ScalarType

from .program import ProgramLowering

__all__ = ["LoweredKernel", "lower_kernel", "ENTRY_NAME", "CLAIMING_ENTRY_NAME"]

ENTRY_NAME = "run"
CLAIMING_ENTRY_NAME = "run_claiming"
#: y values per band of a 2-D grid's program order (``_program_ids``): the best of 1 (x
#: fastest), 4 and 8 on matmul 2048^3 with 128x128 tiles (Zen 5, 2 cores), 3-5% over 1
GROUP_ROWS = 4


@dataclass
class LoweredKernel:
    """LLVM IR text of a kernel and the runtime checks it makes (``RuntimeCheck``s; index =
    error word - 1)."""

    llvm_ir: str
    asserts: list
    stack_bytes: int          # tile buffers in one program's stack frame
    stream_bytes: int = 0     # bytes one program may store non-temporally (``streaming``)


def lower_kernel(module: Module, lanes: int, triple: str, data_layout: str,
                 checked: bool = False, bf16_pairs: bool = False) -> LoweredKernel:
    """The LLVM module of ``module``'s kernel; ``checked``: with checked mode's checks;
    ``bf16_pairs``: the target has AVX-512 BF16 (bf16 dots on ``vdpbf16ps``)."""
    kernel = module.kernel
    m = ir.Module(name=kernel.name)
    m.triple = triple
    m.data_layout = data_layout
    types = LLVMTypes()
    lowering = ProgramLowering(m, kernel, lanes, types, checked, bf16_pairs)
    program = lowering.build("program")
    run = _build_entry(m, program, [a.type for a in kernel.args], types, checked,
                       lowering.stream_bytes > 0)
    _build_claiming_entry(m, run)
    return LoweredKernel(str(m), lowering.asserts, lowering.stack_bytes, lowering.stream_bytes)


def _build_entry(m: ir.Module, program: ir.Function, arg_types: list, types: LLVMTypes,
                 checked: bool, streams: bool = False) -> ir.Function:
    ptr = ir.PointerType()
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, I32, I32, I32, I64, I64, ptr]),
                     ENTRY_NAME)
    args, gx, gy, gz, begin, end, error = fn.args
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    ew = ElementwiseLowering(b, MathLowering(b))
    values = []
    for i, t in enumerate(arg_types):
        slot = b.gep(args, [ir.Constant(I64, 8 * i)], source_etype=I8)
        if isinstance(t, PointerType):
            values.append(b.load(slot, typ=ptr, align=8))
        else:
            assert isinstance(t, ScalarType)
            values.append(ew.from_storage(t, b.load(slot, typ=types.storage(t), align=8)))
    # a kernel with streaming stores takes one more slot: whether they may be used
    stream_slot = b.gep(args, [ir.Constant(I64, 8 * len(arg_types))], source_etype=I8) \
        if streams else None
    spans = []
    if checked:
        count = sum(isinstance(t, PointerType) for t in arg_types)
        for j in range(2 * count):
            slot = b.gep(args, [ir.Constant(I64, 8 * (len(arg_types) + j))], source_etype=I8)
            spans.append(b.load(slot, typ=I64, align=8))
    header = fn.append_basic_block("programs")
    body = fn.append_basic_block("program")
    done = fn.append_basic_block("done")
    b.branch(header)
    b.position_at_end(header)
    pid = b.phi(I64)
    pid.add_incoming(begin, entry)
    # stop early once a check failed or the launcher cancelled (Ctrl-C): an atomic read, so
    # another thread's write is seen and the load is not hoisted out of the loop
    stopped = b.icmp_signed("!=", b.load_atomic(error, "monotonic", 4, typ=I32), ir.Constant(I32, 0))
    b.cbranch(b.and_(b.icmp_signed("<", pid, end), b.not_(stopped)), body, done)
    b.position_at_end(body)
    ids = [b.trunc(v, I32) for v in _program_ids(b, pid, gx, gy)]
    may_stream = ir.Constant(I1, 0)
    if stream_slot is not None:
        # read per program (an atomic read stays in the loop): a flag read once would be
        # unswitched out of the loop, compiling every program twice
        may_stream = b.trunc(b.load_atomic(stream_slot, "monotonic", 8, typ=I64), I1)
    b.call(program, values + ids + [gx, gy, gz, error, may_stream] + spans)
    pid.add_incoming(b.add(pid, ir.Constant(I64, 1)), b.block)
    b.branch(header)
    b.position_at_end(done)
    if streams:      # non-temporal stores are weakly ordered: visible before the launch ends
        b.fence("seq_cst")
    b.ret_void()
    return fn


def _program_ids(b: ir.IRBuilder, pid: ir.Value, gx: ir.Value, gy: ir.Value) -> tuple:
    """The (x, y, z) program ids (i64) of linear program number ``pid``, in ``GROUP_ROWS``
    order: a 2-D grid is walked in bands of ``GROUP_ROWS`` y values, and within a band x by
    x, each x over the band's y values.  Consecutive programs then share an x (a matmul's
    A rows) and a band's few y values (its B columns) stay in cache while every x passes,
    where plain x-fastest order reads all of A again for each y.  Programs of one launch
    run in no promised order (they may run in parallel), so any order is correct."""
    gx64, gy64 = b.zext(gx, I64), b.zext(gy, I64)
    plane = b.mul(gx64, gy64)
    z = b.udiv(pid, plane)
    in_plane = b.urem(pid, plane)
    before = b.block
    with b.if_then(b.icmp_unsigned(">", gy64, ir.Constant(I64, 1))):
        group = ir.Constant(I64, GROUP_ROWS)
        band_size = b.mul(gx64, group)
        y0 = b.mul(b.udiv(in_plane, band_size), group)
        in_band = b.urem(in_plane, band_size)
        left = b.sub(gy64, y0)
        rows = b.select(b.icmp_unsigned("<", left, group), left, group)   # the last band
        grouped = (b.udiv(in_band, rows), b.add(y0, b.urem(in_band, rows)))
        grouped_block = b.block
    x, y = b.phi(I64), b.phi(I64)
    for phi, banded, plain in zip((x, y), grouped, (in_plane, ir.Constant(I64, 0))):
        phi.add_incoming(banded, grouped_block)
        phi.add_incoming(plain, before)
    return x, y, z


def _build_claiming_entry(m: ir.Module, run: ir.Function) -> None:
    ptr = ir.PointerType()
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, I32, I32, I32, ptr, I64, ptr, I64]),
                     CLAIMING_ENTRY_NAME)
    args, gx, gy, gz, counter, end, error, grain = fn.args
    run.attributes.add("noinline")       # one copy of the programs' code, called per claim
    entry = fn.append_basic_block("entry")
    claim = fn.append_basic_block("claim")
    body = fn.append_basic_block("claimed")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(claim)
    b.position_at_end(claim)
    first = b.atomic_rmw("add", counter, grain, "monotonic")
    b.cbranch(b.icmp_signed("<", first, end), body, done)
    b.position_at_end(body)
    last = b.add(first, grain)
    last = b.select(b.icmp_signed("<", last, end), last, end)
    b.call(run, [args, gx, gy, gz, first, last, error])
    b.branch(claim)
    b.position_at_end(done)
    b.ret_void()
