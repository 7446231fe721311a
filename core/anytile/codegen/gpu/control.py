"""Structured control flow of the GPU lowering: ``for``, ``while`` and ``if`` become LLVM loops
and branches with one phi per register of each carried tile.  Conditions are scalars, the
same in every thread, so no thread ever diverges from its warp here."""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir import ops
from ...ir.types import TileType


class ControlFlowLowering:
    """Mixin of ``KernelLowering``: for, while, if."""

    def carried(self, values: list, types: list) -> list:
        """Lowered ``values`` in the layouts of ``types`` (tiles) or as scalars."""
        out = []
        for v, t in zip(values, types):
            out.append(self.tile(v, t.layout) if isinstance(t, TileType) else self.scalar(v))
        return out

    def make_phis(self, like: list) -> list:
        out = []
        for v in like:
            if hasattr(v, "values"):
                out.append(self.new_regs(v.layout, v.shape, [self.b.phi(x.type) for x in v.values]))
            else:
                out.append(self.b.phi(v.type))
        return out

    @staticmethod
    def add_incoming(phis: list, values: list, block: ir.Block) -> None:
        for phi, v in zip(phis, values):
            if hasattr(phi, "values"):
                for p, x in zip(phi.values, v.values):
                    p.add_incoming(x, block)
            else:
                phi.add_incoming(v, block)

    def in_scope(self, block: Any, args: list, values: list, out_types: list) -> list:
        """Lower ``block`` in a new scope with ``args`` bound to ``values``; return what its
        terminator passes on, in the layouts of ``out_types``."""
        self.scopes.append({})
        try:
            for a, v in zip(args, values):
                self.bind(a, v)
            self.lower_block(block)
            term = block.terminator
            if term is None or not out_types:
                return []
            return self.carried(list(term.values), out_types)
        finally:
            self.scopes.pop()

    def lower_for(self, op: ops.ForOp) -> None:
        b = self.b
        lower, upper, step = (self.scalar(v) for v in (op.lower, op.upper, op.step))
        carried_args = op.body.args[1:]
        inits = self.carried(op.inits, [a.type for a in carried_args])
        fn = b.function
        header, body, exit_ = (fn.append_basic_block(n) for n in ("for.header", "for.body", "for.exit"))
        pre = b.block
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(lower.type, name="iv")
        iv.add_incoming(lower, pre)
        phis = self.make_phis(inits)
        self.add_incoming(phis, inits, pre)
        b.cbranch(b.icmp_signed("<", iv, upper), body, exit_)
        b.position_at_end(body)
        self.scopes.append({})
        try:
            self.bind(op.body.args[0], iv)
            for a, v in zip(carried_args, phis):
                self.bind(a, v)
            self.lower_block(op.body)
            term = op.body.terminator
            nexts = self.carried(list(term.values), [a.type for a in carried_args]) if term else []
        finally:
            self.scopes.pop()
        iv_next = b.add(iv, step)
        latch = b.block
        iv.add_incoming(iv_next, latch)
        self.add_incoming(phis, nexts, latch)
        b.branch(header)
        b.position_at_end(exit_)
        for i, r in enumerate(op.results):
            self.set_result(op, phis[i], i)

    def lower_while(self, op: ops.WhileOp) -> None:
        b = self.b
        inits = self.carried(op.inits, [a.type for a in op.before.args])
        fn = b.function
        header, after, exit_ = (fn.append_basic_block(n) for n in ("while.before", "while.after", "while.exit"))
        pre = b.block
        b.branch(header)
        b.position_at_end(header)
        phis = self.make_phis(inits)
        self.add_incoming(phis, inits, pre)
        self.scopes.append({})
        try:
            for a, v in zip(op.before.args, phis):
                self.bind(a, v)
            self.lower_block(op.before)
            cond_op = op.before.terminator
            cond = self.scalar(cond_op.cond)
            passed = self.carried(list(cond_op.values), [a.type for a in op.after.args])
            results = self.carried(list(cond_op.values), [r.type for r in op.results])
            b.cbranch(cond, after, exit_)
            b.position_at_end(after)
            nexts = self.in_scope(op.after, op.after.args, passed, [a.type for a in op.before.args])
            self.add_incoming(phis, nexts, b.block)
            b.branch(header)
        finally:
            self.scopes.pop()
        b.position_at_end(exit_)
        for i, r in enumerate(op.results):
            self.set_result(op, results[i], i)

    def lower_if(self, op: ops.IfOp) -> None:
        b = self.b
        cond = self.scalar(op.cond)
        fn = b.function
        then_bb, else_bb, merge = (fn.append_basic_block(n) for n in ("if.then", "if.else", "if.end"))
        b.cbranch(cond, then_bb, else_bb)
        arms = []
        for block, bb in ((op.then_body, then_bb), (op.else_body, else_bb)):
            b.position_at_end(bb)
            values = self.in_scope(block, [], [], [r.type for r in op.results])
            arms.append((values, b.block))
            b.branch(merge)
        b.position_at_end(merge)
        if op.results:
            phis = self.make_phis(arms[0][0])
            for values, block in arms:
                self.add_incoming(phis, values, block)
            for i in range(len(op.results)):
                self.set_result(op, phis[i], i)
