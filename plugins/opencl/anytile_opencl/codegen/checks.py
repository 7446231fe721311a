"""Checked mode (``debug=True``): the bounds tests core's rewrite adds
(``anytile.codegen.bounds_checks``: an ``assert`` before each load, store and atomic whose
message starts with ``BOUNDS_PREFIX``) record where the first failing lane went.

The error record is eight ``int``s: the failed check's number (1-based, the first failure
wins through ``atomic_cmpxchg``), the program ids, the lane (row-major in the access's
tile), and, as a ``long`` at byte 24, the lane's byte offset from the start of the
argument's buffer.  ``check_facts`` tells the host how to word it: the access, the argument,
the element size and the tile's shape.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from anytile.errors import BOUNDS_PREFIX
from anytile.ir import AssertOp, BitcastOp, Op, PointerType, TileType, Value, elem_type

from .chunk import scalar_point
from .ctypes import size_of
from .values import chunk_loop, spill

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["emit_bounds_check", "ERROR_RECORD_INTS"]

#: the size of the error record, in ``int``s (see the module docstring)
ERROR_RECORD_INTS = 8


def _address_tile(cond: Value) -> Optional[Value]:
    """The ``i64`` addresses the bounds test ``cond`` was computed from (a bitcast of the
    access's pointers), or ``None``."""
    stack, seen = [cond], set()
    while stack:
        v = stack.pop()
        owner = v.owner
        if id(v) in seen or not isinstance(owner, Op):
            continue
        seen.add(id(v))
        if isinstance(owner, BitcastOp) and isinstance(elem_type(owner.src.type), PointerType):
            return owner.result
        stack.extend(owner.operands)
    return None


def emit_bounds_check(ctx: "EmitContext", op: AssertOp) -> None:
    """A failing lane records the check, the program, the lane and its byte offset."""
    index = len(ctx.checks) + 1
    ctx.checks.append([op.message, op.loc.file, op.loc.line])
    address = _address_tile(op.cond)
    origins = ctx.plan.origins(address.owner.src) if address is not None else None
    if address is None or not origins:
        ctx.check_facts.append(None)
        _check_lanes(ctx, op, index, None, None)
        return
    param = min(origins)
    pointer = elem_type(address.owner.src.type)
    shape = list(address.type.shape) if isinstance(address.type, TileType) else []
    access = op.message[len(BOUNDS_PREFIX):].split(" through ")[0]
    ctx.check_facts.append({"access": access, "param": param, "elem": size_of(pointer.pointee),
                            "shape": shape, "name": ctx.fn.args[param].name or f"arg{param}",
                            "col": op.loc.col, "func": op.loc.func})
    _check_lanes(ctx, op, index, address, param)


def _check_lanes(ctx: "EmitContext", op: AssertOp, index: int, address: Optional[Value],
                 param: Optional[int]) -> None:
    t = op.cond.type
    if not isinstance(t, TileType):
        point = scalar_point()
        cond = ctx.chunk(op.cond, point)
        _record(ctx, f"!({cond.expr})", index, address, param, point, lambda j: "0", 1)
        return
    with chunk_loop(ctx, t.layout, t.shape) as point:
        c = ctx.chunk(op.cond, point)
        if c.is_uniform:
            _record(ctx, f"!({c.expr})", index, address, param, point, lambda j: "0", 1)
        else:
            _record(ctx, f"any({c.as_vector()} == (char{c.lanes})0)", index, address, param,
                    point, lambda j, held=spill(ctx, c): f"{held(j)}", c.lanes)


def _record(ctx: "EmitContext", failed: str, index: int, address: Optional[Value],
            param: Optional[int], point: Any, held: Any, lanes: int) -> None:
    w = ctx.w
    with w.block(f"if ({failed})"):
        with w.block(f"if (atomic_cmpxchg(at_error, 0, {index}) == 0)"):
            w.line("at_error[1] = pid0; at_error[2] = pid1; at_error[3] = pid2;")
            if address is None:
                return
            flat = spill(ctx, point.flat()) if point.lanes > 1 or point.shape else (lambda j: "0")
            addr = spill(ctx, ctx.chunk(address, point))
            with w.block(f"for (int j = 0; j < {lanes}; j++)"):
                with w.block(f"if (!({held('j')}))"):
                    w.line(f"at_error[4] = {flat('j')};")
                    w.line(f"((__global long*)at_error)[3] = (long)((ulong)({addr('j')}) - "
                           f"(ulong)buf{param});")
                    w.line("break;")
