"""``dot``: strategies, and the table-driven lowering onto a target's matrix instructions.

A ``DotStrategy`` decides whether it can lower a given ``dot`` (``plan``: the result's layout
and whatever it needs later), which shared-memory layouts it wants for operands a pipelined
loop keeps in shared memory (``operand_buffers``), and emits it (``lower``).  A target's own
strategies (``GpuTarget.dot_strategies``) come first, then core's two:

* ``MatrixDot``: the first of the target's ``matrix_instrs`` that takes the dot's types and
  whose tile fits the warps.  The accumulator keeps an ordinary ``BlockedLayout`` derived from
  the instruction's accumulator map (``matrix.geometry``): an instruction's tile is ``reps``
  consecutive *repetitions* of that layout along each dimension, which need not be adjacent
  rows of the matrix -- operands are simply read from those same rows.  So stores,
  reductions and conversions of a dot's result need nothing special.  Operands go through
  shared memory row-major (rows padded by the instruction's ``pad_bytes``), or are read in
  place from a pipeline slot; fragments are read by the target's ``fragment_loader`` or, by
  default, element by element as the fragment maps say (``GenericFragments``);
* ``FmaDot``: both operands in shared memory, one FMA per (register, k), exact: f32 ``ieee``
  and ``tf32x3``, f64, int8 -> int32, 16-bit accumulators, and any dot no instruction fits.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from llvmlite import ir

from ...ir import ops
from ...ir.nodes import Function, Op
from ...ir.types import ScalarType, elem_type, shape_of
from ..llvm.types import I8, I32
from .fragments import GenericFragments, OperandSource
from .layouts import BlockedLayout, coordinates, register_indices
from .matrix import TYPE_BITS, MatrixGeometry, MatrixInstr, geometry
from .registers import Regs, coords, linear_index
from .scratch import llvm_bytes, reserve, shared_load, shared_store
from .shared_ops import PaddedColumns, PaddedRows, SharedBufferLayout

if TYPE_CHECKING:
    from .lowering import KernelLowering
    from .target import GpuTarget

__all__ = ["LOWERINGS", "DotPlan", "DotStrategy", "MatrixDotPlan", "MatrixDot", "FmaDot",
           "DotSelector", "acc_layout", "acc_slots", "choose_warps", "register_table"]


@dataclass
class DotPlan:
    """What a strategy decided for one ``dot``: itself and the result's layout."""

    strategy: "DotStrategy"
    layout: BlockedLayout


class DotStrategy(abc.ABC):
    """One way to lower ``dot`` (see the module docstring)."""

    @abc.abstractmethod
    def plan(self, op: ops.DotOp, num_warps: int) -> Optional[DotPlan]:
        """A plan when this strategy lowers ``op`` (run with ``num_warps`` warps), else
        ``None``.  Called while layouts are assigned, after pipelining."""

    @abc.abstractmethod
    def lower(self, ctx: "KernelLowering", op: ops.DotOp, plan: DotPlan) -> None:
        """Emit ``op`` as ``plan`` says and bind its result in ``ctx``."""

    def operand_buffers(self, op: ops.DotOp, num_warps: int,
                        both: bool) -> Optional[tuple[SharedBufferLayout, SharedBufferLayout]]:
        """The layouts of pipeline buffers for ``op``'s A and B when a pipelined loop keeps
        them in shared memory (``both``: both operands, each feeding only ``op``), or
        ``None`` when this strategy would not read ``op``'s operands from such buffers."""
        return None

    def reads_narrow(self, op: ops.DotOp, num_warps: int, a: ScalarType, b: ScalarType) -> bool:
        """Whether this strategy lowers ``op`` (whose operands the language widened to f16)
        reading its operands as the float8 types ``a`` and ``b`` instead (``narrow``)."""
        return False

    def reads_k_major(self, op: ops.DotOp, num_warps: int) -> bool:
        """Whether this strategy reads ``op``'s operands from shared memory only along K (A's
        rows, B's columns: a matrix unit that reads 8-bit operands K-major only).
        ``DotSelector`` then offers it ``op``'s pipeline buffers only where A is not loaded
        along its first dimension and B is (``x @ W.T`` with ``W`` stored N x K): B copied
        as it is into K-major slots."""
        return False


# -- placing registers from an instruction's maps ----------------------------------------------
def acc_layout(instr: MatrixInstr, warps: tuple[int, int]) -> BlockedLayout:
    """The layout of a dot result computed by ``instr`` with ``warps`` (along M, N)."""
    geo = geometry(instr)
    return BlockedLayout(geo.spt, geo.tpw, warps, geo.order)


def acc_slots(geo: MatrixGeometry, i: int, s: int, regs_along_n: int) -> list[int]:
    """For instruction tile (``i`` along M, ``s`` along N), the result register holding each
    accumulator element of the instruction (``regs_along_n``: the layout's registers along N)."""
    out = []
    for p0, q0, p1, q1 in geo.acc_slots:
        j0 = (i * geo.reps[0] + q0) * geo.spt[0] + p0
        j1 = (s * geo.reps[1] + q1) * geo.spt[1] + p1
        out.append(j0 * regs_along_n + j1)
    return out


def choose_warps(m: int, n: int, num_warps: int, tile_m: int, tile_n: int) -> Optional[tuple[int, int]]:
    """(warps along M, along N) splitting an ``m x n`` result into warp tiles that are whole
    multiples of ``tile_m x tile_n``, as square as possible (warp tiles sharing operands best)."""
    best = None
    wm = 1
    while wm <= num_warps:
        wn = num_warps // wm
        if m % (tile_m * wm) == 0 and n % (tile_n * wn) == 0:
            score = abs((m // wm) - (n // wn))
            if best is None or score < best[0]:
                best = (score, wm, wn)
        wm *= 2
    return None if best is None else (best[1], best[2])


@dataclass
class MatrixDotPlan(DotPlan):
    """A ``MatrixDot`` plan: ``instr`` run by ``warps`` (along M, N) over an ``M x N x K`` dot."""

    instr: MatrixInstr = field(default=None)   # type: ignore[assignment]
    warps: tuple[int, int] = (1, 1)
    shape: tuple[int, int, int] = (0, 0, 0)

    @property
    def geo(self) -> MatrixGeometry:
        return geometry(self.instr)

    def tiles(self, d: int) -> int:
        """Instruction tiles a warp runs along ``d`` (0: M, 1: N)."""
        return self.shape[d] // ((self.instr.m, self.instr.n)[d] * self.warps[d])

    def cta(self, d: int) -> int:
        """Elements along ``d`` one repetition of the result layout covers."""
        return self.geo.block(d) * self.warps[d]

    def offset(self, d: int, v: int) -> int:
        """Where row (``d`` = 0) or column (1) ``v`` of an instruction tile sits, from its
        warp's first row or column of the tile's first repetition."""
        block = self.geo.block(d)
        return v % block + v // block * self.cta(d)

    def tile_stride(self, d: int) -> int:
        """How far apart consecutive instruction tiles of one warp are along ``d``."""
        return self.geo.reps[d] * self.cta(d)


class MatrixDot(DotStrategy):
    """``dot`` on the target's matrix instructions (see the module docstring)."""

    def __init__(self, target: "GpuTarget") -> None:
        self.target = target
        #: ``id``s of chained dots (``chained_dots``): their warps all run along M
        self.chained: frozenset[int] = frozenset()

    def plan(self, op: ops.DotOp, num_warps: int) -> Optional[MatrixDotPlan]:
        a, b, acc = elem_type(op.a.type), elem_type(op.b.type), elem_type(op.acc.type)
        (m, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
        for instr in self.target.matrix_instrs:
            if instr.lanes != self.target.warp_size or k % instr.k or \
                    not instr.accepts(a.name, b.name, acc.name, op.input_precision):
                continue
            warps = choose_warps(m, n, num_warps, instr.m, instr.n)
            if id(op) in self.chained and m % (instr.m * num_warps) == 0:
                # a chain (attention's q.k then p.v): every warp owns whole rows of both
                # results, so the softmax's row reductions and the row factors between the
                # dots stay inside warps
                warps = (num_warps, 1)
            if warps is not None:
                return MatrixDotPlan(self, acc_layout(instr, warps), instr, warps, (m, n, k))
        return None

    def operand_buffers(self, op: ops.DotOp, num_warps: int,
                        both: bool) -> Optional[tuple[SharedBufferLayout, SharedBufferLayout]]:
        plan = self.plan(op, num_warps)
        # 8-bit integer operands stay in registers, staged each step (not measured from
        # pipeline slots on any target yet)
        if plan is None or elem_type(op.a.type).nbytes == 1 and elem_type(op.a.type).is_int:
            return None
        (_, k), (_, n) = shape_of(op.a.type), shape_of(op.b.type)
        return PaddedRows(k + _pad(plan.instr, 0)), PaddedRows(n + _pad(plan.instr, 1))

    def lower(self, ctx: "KernelLowering", op: ops.DotOp, plan: DotPlan) -> None:
        assert isinstance(plan, MatrixDotPlan)
        b, instr, geo = ctx.b, plan.instr, plan.geo
        layout = plan.layout
        M, N, K = plan.shape
        acc = ctx.tile(op.acc, layout)
        in_registers = _register_operand(ctx, op, plan)
        a_src, b_src = _stage_operands(ctx, op, plan, stage_a=in_registers is None)
        loader = ctx.target.fragment_loader(instr)
        if loader is None or not loader.reads(a_src, b_src):
            loader = GenericFragments()
        state = loader.prepare(ctx, plan, a_src, b_src)
        regs_along_n = layout.registers_along((M, N), 1)
        values = list(acc.values)
        for kk in range(0, K, instr.k):
            a_frags = loader.load_a(ctx, state, kk) if in_registers is None else \
                _register_fragments(ctx, in_registers, plan, kk)
            b_frags = loader.load_b(ctx, state, kk)
            for i in range(plan.tiles(0)):
                for s in range(plan.tiles(1)):
                    slots = acc_slots(geo, i, s, regs_along_n)
                    out = ctx.target.emit_matrix(b, instr, a_frags[i], b_frags[s],
                                                 [values[x] for x in slots])
                    for x, v in zip(slots, out):
                        values[x] = v
        ctx.set_result(op, Regs(layout, (M, N), values))


def _register_operand(ctx: "KernelLowering", op: ops.DotOp,
                      plan: MatrixDotPlan) -> Optional[tuple[Regs, dict, ScalarType]]:
    """A's registers and, for each (tile along M, K offset, fragment element), the register of
    A's own layout holding it, when every lane already holds its whole A fragments (A is a
    chained dot's result in the accumulator layout, attention's ``p``); else ``None`` (A goes
    through shared memory)."""
    instr = plan.instr
    elem = elem_type(op.a.type)
    if not isinstance(elem, ScalarType) or elem.name != instr.a_type or instr.a_replicas != 1 \
            or ctx.shared_views.get(op.a) is not None:
        return None
    M, N, K = plan.shape
    geo = plan.geo
    warps = plan.warps[0] * plan.warps[1]
    firsts = [coordinates(plan.layout, (M, N), 0, warp)[0] for warp in range(warps)]
    if plan.warps[1] != 1 and any(first[1] != 0 for first in firsts):
        return None

    def wanted(warp: int, lane: int):
        warp_row = firsts[warp][0] - firsts[warp][0] % geo.block(0)
        for i in range(plan.tiles(0)):
            base = warp_row + i * plan.tile_stride(0)
            for kk in range(0, K, instr.k):
                for e in range(instr.a_count):
                    r, k = instr.a_elem(lane, e)
                    yield (i, kk, e), (base + plan.offset(0, r), kk + k)
    table = register_table(op.a.type.layout, (M, K), warps, instr.lanes, wanted)
    return None if table is None else (ctx.tile(op.a), table, elem)


def register_table(layout: Any, shape: tuple[int, int], warps: int, lanes: int,
                   wanted: Callable[[int, int], Iterable[tuple[Any, tuple[int, int]]]]
                   ) -> Optional[dict]:
    """key -> the register of ``layout`` holding the element a matrix instruction wants
    under that key, when ``wanted(warp, lane)``'s (key, coordinate) pairs find every element
    in the thread's own registers, at one register index for all threads; else ``None`` (the
    operand is not already where the instruction reads it)."""
    if not isinstance(layout, BlockedLayout):
        return None
    table: dict = {}
    for warp in range(warps):
        for lane in range(lanes):
            held = {c: j for j, c in enumerate(coordinates(layout, shape, lane, warp))}
            for key, coord in wanted(warp, lane):
                j = held.get(coord)
                if j is None or table.setdefault(key, j) != j:
                    return None
    return table


def _register_fragments(ctx: "KernelLowering", source: tuple, plan: MatrixDotPlan,
                        kk: int) -> list[list[ir.Value]]:
    """The A fragments at K offset ``kk`` gathered from registers (``_register_operand``),
    packed ``a_pack`` elements a register as the instruction takes them (converted together:
    ``ElementwiseLowering.pack_storage``)."""
    b, instr = ctx.b, plan.instr
    regs, table, elem = source
    word = ir.IntType(TYPE_BITS[instr.a_type] * instr.a_pack)
    out = []
    for i in range(plan.tiles(0)):
        frag = []
        for start in range(0, instr.a_count, instr.a_pack):
            values = [regs.values[table[(i, kk, e)]] for e in range(start, start + instr.a_pack)]
            if instr.a_pack == 1:
                v = ctx.ew.to_storage(elem, values[0])
                frag.append(v if isinstance(v.type, ir.IntType) else b.bitcast(v, word))
            else:
                frag.append(b.bitcast(ctx.ew.pack_storage(elem, values), word))
        out.append(frag)
    return out


def _pad(instr: MatrixInstr, operand: int) -> int:
    """Elements of padding per shared-memory row of operand ``operand`` (0: A, 1: B)."""
    return instr.pad_bytes[operand] * 8 // TYPE_BITS[(instr.a_type, instr.b_type)[operand]]


def _operand_storage(ctx: "KernelLowering", type_name: str, elem: ScalarType) -> ir.Type:
    return ctx.types.storage(elem) if type_name == elem.name else ir.IntType(TYPE_BITS[type_name])


def _stage_operands(ctx: "KernelLowering", op: ops.DotOp, plan: MatrixDotPlan,
                    stage_a: bool = True) -> tuple[OperandSource, OperandSource]:
    """Where A and B are in shared memory: a pipeline slot read in place, or the scratch space
    they are written to here (A first, B after it; without ``stage_a``, A is read from
    registers and only B is placed)."""
    b, instr = ctx.b, plan.instr
    M, N, K = plan.shape
    elem = elem_type(op.a.type)
    sa, sb = _operand_storage(ctx, instr.a_type, elem), _operand_storage(ctx, instr.b_type, elem)
    views = [ctx.shared_views.get(op.a), ctx.shared_views.get(op.b)]
    if not stage_a:
        views[0] = _Unstaged(ctx.smem_base, PaddedRows(K + _pad(instr, 0)))
    for view in views:
        if view is not None and not isinstance(view.layout, (PaddedRows, PaddedColumns)):
            raise AssertionError(f"a matrix dot cannot read a {view.layout} buffer")
    row_a = _row(views[0], K + _pad(instr, 0))
    row_b = _row(views[1], N + _pad(instr, 1))
    a_bytes = 0 if views[0] else (M * row_a * llvm_bytes(sa) + 15) // 16 * 16
    a_base = views[0].base if views[0] else ctx.smem_base
    b_base = views[1].base if views[1] else b.gep(ctx.smem_base, [ir.Constant(I32, a_bytes)],
                                                  source_etype=I8)
    if not (views[0] and views[1]):
        reserve(ctx, a_bytes + (0 if views[1] else K * row_b * llvm_bytes(sb)))
        ctx.target.barrier(b)
        if not views[0]:
            _store_operand(ctx, ctx.tile(op.a), elem, instr.a_type, sa, a_base, row_a)
        if not views[1]:
            _store_operand(ctx, ctx.tile(op.b), elem, instr.b_type, sb, b_base, row_b)
        ctx.target.barrier(b)
    return _source(a_base, views[0], row_a, sa), _source(b_base, views[1], row_b, sb)


def _row(view: Any, default: int) -> int:
    return default if view is None or not isinstance(view.layout, PaddedRows) else view.layout.row


def _source(base: ir.Value, view: Any, row: int, storage: ir.Type) -> OperandSource:
    """An operand's ``OperandSource``: row-major, or column-major from a ``PaddedColumns``
    slot (element (r, c) at ``r + c * col``)."""
    if view is not None and isinstance(view.layout, PaddedColumns):
        return OperandSource(base, 1, storage, view.layout.col)
    return OperandSource(base, row, storage)


@dataclass
class _Unstaged:
    """Stands for an A operand read from registers where ``_stage_operands`` expects a
    shared-memory view (its address is never read)."""

    base: ir.Value
    layout: PaddedRows


def _store_operand(ctx: "KernelLowering", regs: Regs, elem: ScalarType, type_name: str,
                   storage: ir.Type, base: ir.Value, row: int) -> None:
    """Write a 2-D operand tile to shared memory, row-major with ``row`` elements per row, in
    runs of up to 16 bytes per store where the layout has them; elements become
    ``type_name`` (``GpuTarget.matrix_operand``) when that is not their own type."""
    b = ctx.b
    layout = regs.layout
    run = 1
    if isinstance(layout, BlockedLayout) and layout.order[0] == 1 and \
            regs.shape[1] >= layout.size_per_thread[1]:
        run = min(layout.size_per_thread[1], 16 // elem.nbytes)
    where = coords(ctx, layout, regs.shape)
    for first in range(0, len(regs.values), run):
        r, c = where[first]
        ptr = b.gep(base, [b.add(b.mul(r, ir.Constant(I32, row)), c)], source_etype=storage)
        values = [ctx.target.matrix_operand(b, type_name, v) if type_name != elem.name
                  else ctx.ew.to_storage(elem, v) for v in regs.values[first:first + run]]
        if run == 1:
            b.store(values[0], ptr)
            continue
        vec = ir.Constant(ir.VectorType(storage, run), ir.Undefined)
        for j, v in enumerate(values):
            vec = b.insert_element(vec, v, ir.Constant(I32, j))
        b.store(vec, ptr).align = elem.nbytes * run


# -- FMAs --------------------------------------------------------------------------------------
class FmaDot(DotStrategy):
    """``dot`` as one FMA per (result register, k), both operands in shared memory; products
    of 16-bit inputs are exact in f32, 16-bit accumulators are rounded once at the end."""

    def __init__(self, warp_size: int) -> None:
        self.warp_size = warp_size

    def plan(self, op: ops.DotOp, num_warps: int) -> DotPlan:
        m, n = shape_of(op.result.type)
        threads = num_warps * self.warp_size
        per_thread = max(1, m * n // threads)
        spt_n = min(4, n, per_thread)
        spt_m = min(max(1, per_thread // spt_n), 4, m)
        tpw, wpc = _split_threads((m // spt_m, n // spt_n), self.warp_size, num_warps)
        return DotPlan(self, BlockedLayout((spt_m, spt_n), tpw, wpc, (1, 0)))

    def lower(self, ctx: "KernelLowering", op: ops.DotOp, plan: DotPlan) -> None:
        b = ctx.b
        layout = plan.layout
        a, bm = ctx.tile(op.a), ctx.tile(op.b)
        acc = ctx.tile(op.acc, layout)
        (M, K), (_, N) = a.shape, bm.shape
        acc_elem = elem_type(op.acc.type)
        in_elem = elem_type(op.a.type)
        ta, tb = a.values[0].type, bm.values[0].type
        size_a = (M * K * llvm_bytes(ta) + 15) // 16 * 16
        reserve(ctx, size_a + K * N * llvm_bytes(tb))
        ctx.target.barrier(b)
        for v, c in zip(a.values, coords(ctx, a.layout, a.shape)):
            shared_store(ctx, v, linear_index(b, c, a.shape))
        for v, c in zip(bm.values, coords(ctx, bm.layout, bm.shape)):
            shared_store(ctx, v, linear_index(b, c, bm.shape), size_a)
        ctx.target.barrier(b)
        indices = register_indices(layout, (M, N))
        where = coords(ctx, layout, (M, N))
        row_of, col_of = {}, {}
        for j, c in zip(indices, where):
            row_of.setdefault(j[0], c[0])
            col_of.setdefault(j[1], c[1])
        row_base = {j0: b.mul(m, ir.Constant(I32, K)) for j0, m in row_of.items()}
        values = list(acc.values)
        ct = values[0].type
        for k in range(K):
            kc = ir.Constant(I32, k)
            av = {j0: _operand(ctx, shared_load(ctx, ta, b.add(base, kc)), in_elem, acc_elem, ct)
                  for j0, base in row_base.items()}
            bv = {j1: _operand(ctx, shared_load(ctx, tb, b.add(ir.Constant(I32, k * N), n), size_a),
                               elem_type(op.b.type), acc_elem, ct)
                  for j1, n in col_of.items()}
            for i, j in enumerate(indices):
                if acc_elem.is_float:
                    values[i] = ctx.ew.call("llvm.fma", [av[j[0]], bv[j[1]], values[i]])
                else:
                    values[i] = b.add(values[i], b.mul(av[j[0]], bv[j[1]]))
        if acc_elem.is_float and acc_elem.name in ("f16", "bf16"):
            values = [ctx.ew.round_to(acc_elem, v) for v in values]
        ctx.set_result(op, Regs(layout, (M, N), values))


def _operand(ctx: "KernelLowering", v: ir.Value, elem: ScalarType, acc_elem: ScalarType,
             t: ir.Type) -> ir.Value:
    """An operand value in the accumulator's compute type."""
    if v.type == t:
        return v
    return ctx.ew.cast(elem, acc_elem, v)


def _split_threads(blocks: tuple[int, int], warp_size: int, num_warps: int):
    """Lanes then warps over a 2-D grid of per-thread blocks, fastest along dim 1."""
    tpw = [1, 1]
    lanes = warp_size
    for d in (1, 0):
        take = min(lanes, blocks[d])
        tpw[d], lanes = take, lanes // take
    tpw[0] *= lanes
    wpc = [1, 1]
    warps = num_warps
    for d in (0, 1):
        take = min(warps, max(1, blocks[d] // tpw[d]))
        wpc[d], warps = take, warps // take
    wpc[0] *= warps
    return tuple(tpw), tuple(wpc)


# -- choosing ----------------------------------------------------------------------------------
def chained_dots(fn: Function) -> frozenset[int]:
    """``id``s of the dots in a chain: one whose ``a`` or ``b`` operand is computed (through
    any ops but loads) from another's result, and that other one."""
    chained: set[int] = set()
    for op in fn.walk():
        if not isinstance(op, ops.DotOp):
            continue
        stack, seen = [op.a, op.b], set()
        while stack:
            v = stack.pop()
            owner = v.owner
            if id(v) in seen or not isinstance(owner, Op) or isinstance(owner, ops.LoadOp):
                continue
            seen.add(id(v))
            if isinstance(owner, ops.DotOp):
                chained |= {id(op), id(owner)}
                continue
            stack.extend(owner.operands)
    return frozenset(chained)


class DotSelector:
    """The strategies of one target, in order: the target's own, ``MatrixDot``, ``FmaDot``.
    ``fn``: the kernel, whose chained dots ``MatrixDot`` lays out with warps along M."""

    def __init__(self, target: "GpuTarget", num_warps: int, fn: Optional[Function] = None) -> None:
        self.num_warps = num_warps
        self.fn = fn
        self._transposed: Optional[frozenset] = None
        matrix = MatrixDot(target)
        if fn is not None:
            matrix.chained = chained_dots(fn)
        self.strategies: Sequence[DotStrategy] = (*target.dot_strategies(), matrix,
                                                  FmaDot(target.warp_size))

    def plan(self, op: ops.DotOp) -> DotPlan:
        """The first strategy's plan for ``op`` (``FmaDot`` takes every dot)."""
        for strategy in self.strategies:
            found = strategy.plan(op, self.num_warps)
            if found is not None:
                return found
        raise AssertionError("FmaDot plans every dot")

    def operand_buffers(self, op: ops.DotOp,
                        both: bool) -> Optional[tuple[SharedBufferLayout, SharedBufferLayout]]:
        """The pipeline buffer layouts of the first strategy that reads ``op``'s operands
        from shared memory (``None``: none does; the loads stay in registers)."""
        for strategy in self.strategies:
            if strategy.reads_k_major(op, self.num_warps) and not self._along_k(op):
                continue
            found = strategy.operand_buffers(op, self.num_warps, both)
            if found is not None:
                return found
        return None

    def _along_k(self, op: ops.DotOp) -> bool:
        """Whether ``op``'s A is not a load read along its first dimension and its B is one
        (``pipeline.transposed_loads``), or already sits in a buffer that keeps columns
        contiguous.  The loads' directions are found once, at the first call: the passes that
        ask (``stage_invariant_operands``, ``pipeline_dot_operands``) come after every rewrite
        of load addresses and make no loads of their own."""
        from .pipeline import transposed_loads
        from .shared_ops import SharedLoadOp
        if self.fn is None:
            return False
        if self._transposed is None:
            self._transposed = transposed_loads(self.fn)
        transposed = self._transposed
        a, b = op.a.owner, op.b.owner
        if isinstance(b, SharedLoadOp):
            b_ok = b.view_layout.contiguous_dim(shape_of(op.b.type)) == 0
        else:
            b_ok = isinstance(b, ops.LoadOp) and b in transposed
        return b_ok and a not in transposed

    def reads_shared(self, op: ops.DotOp) -> bool:
        return self.operand_buffers(op, False) is not None

    def reads_narrow(self, op: ops.DotOp, a: ScalarType, b: ScalarType) -> bool:
        """Whether one of the strategies takes ``op`` with float8 operands ``a`` and ``b``
        (``DotStrategy.reads_narrow``)."""
        return any(s.reads_narrow(op, self.num_warps, a, b) for s in self.strategies)


def lower_dot(ctx: "KernelLowering", op: ops.DotOp) -> None:
    plan = ctx.laid.dot_plans[op]
    plan.strategy.lower(ctx, op, plan)


LOWERINGS = {ops.DotOp: lower_dot}
