"""Reductions whose combine is not commutative, in index order on GPUs.

The GPU lowering of ``reduce`` combines a thread's elements, then lanes by butterfly
shuffles, then warps through shared memory, in whatever order those meet: right only when
``ReduceOp.commutative`` says the order is free.  The other reductions (``tl.reduce`` with a
combine such as "the last non-zero", "keep the left one") become what they mean: an inclusive
``scan`` along the axis, which the GPU lowering runs in index order, and the scan's last
element along the axis, taken out exactly: its bits where the index is the last one, zero
elsewhere, summed (a commutative reduce of one non-zero term).  Built-in reductions (sum,
max, min, argmax with ties to the lower index, xor_sum) are commutative and untouched."""
from __future__ import annotations

from ...ir import ops as O
from ...ir.nodes import Block, Module, Op, Value, clone_block
from ...ir.types import ScalarType, TileType, elem_type, i8, i32, scalar_type, \
    shape_of, with_shape
from ...passes.rewrite import Substitution

__all__ = ["order_reductions"]


def order_reductions(module: Module) -> int:
    """Rewrite every non-commutative ``reduce`` of ``module`` (see the module docstring);
    returns how many were rewritten."""
    return sum(_block(fn.body) for fn in module.functions.values())


def _block(block: Block) -> int:
    count, kept, subst = 0, [], Substitution()
    for op in block.ops:
        for region in op.regions:
            count += _block(region)
        if isinstance(op, O.ReduceOp) and not op.commutative and _supported(op):
            new_ops, values = _in_index_order(op)
            kept.extend(new_ops)
            for old, new in zip(op.results, values):
                subst.replace(old, new)
            count += 1
        else:
            kept.append(op)
    block.ops = kept
    subst.apply_to_block(block)
    return count


def _supported(op: O.ReduceOp) -> bool:
    return all(isinstance(elem_type(s.type), ScalarType) for s in op.srcs)


def _in_index_order(op: O.ReduceOp) -> tuple[list[Op], list[Value]]:
    """The ops replacing ``op`` and the values replacing its results."""
    loc, axis = op.loc, op.axis
    shape = shape_of(op.srcs[0].type)
    n = shape[axis]
    made: list[Op] = []

    def add(new: Op) -> Value:
        made.append(new)
        return new.results[0]

    scan = O.ScanOp(srcs=list(op.srcs), axis=axis, reverse=False,
                    combine=clone_block(op.combine, {}), loc=loc)
    made.append(scan)
    index = add(O.ArangeOp(start=0, end=n, loc=loc))
    if len(shape) > 1:
        ones = tuple(n if d == axis else 1 for d in range(len(shape)))
        index = add(O.ReshapeOp(src=index, result_types=[TileType(ones, i32)], loc=loc))
        index = add(O.BroadcastOp(src=index, result_types=[TileType(shape, i32)], loc=loc))
    last = add(O.ConstantOp(value=n - 1, result_types=[TileType(shape, i32)], loc=loc))
    is_last = add(O.CompareOp(pred="eq", lhs=index, rhs=last, loc=loc))
    out_shape = tuple(d for i, d in enumerate(shape) if i != axis)
    values = []
    for scanned in scan.results:
        elem = elem_type(scanned.type)
        bits_t = i8 if elem.is_bool else elem if elem.is_int else scalar_type(f"i{elem.bits}")
        bits = scanned
        if elem.is_bool:
            bits = add(O.CastOp(src=scanned, result_types=[TileType(shape, bits_t)], loc=loc))
        elif not elem.is_int:
            bits = add(O.BitcastOp(src=scanned, result_types=[TileType(shape, bits_t)], loc=loc))
        zero = add(O.ConstantOp(value=0, result_types=[TileType(shape, bits_t)], loc=loc))
        picked = add(O.SelectOp(cond=is_last, true_value=bits, false_value=zero, loc=loc))
        total = add(O.ReduceOp(srcs=[picked], axis=axis, combine=_add_region(bits_t),
                               commutative=True, loc=loc))
        out_t = with_shape(elem, out_shape)
        if elem.is_bool:
            total = add(O.CastOp(src=total, result_types=[out_t], loc=loc))
        elif not elem.is_int:
            total = add(O.BitcastOp(src=total, result_types=[out_t], loc=loc))
        values.append(total)
    return made, values


def _add_region(t: ScalarType) -> Block:
    region = Block.with_args([t, t])
    total = O.BinaryOp(kind="add", lhs=region.args[0], rhs=region.args[1])
    region.ops = [total, O.YieldOp(values=[total.result])]
    return region
