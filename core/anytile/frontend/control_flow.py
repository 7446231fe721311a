"""Structured control flow: ``if``/``else``, ternaries, ``for`` over ranges, ``while``.

Conditions known at compile time fold (only the taken branch is visited; ``tl.static_range``
unrolls).  Run-time conditions build ``if``/``for``/``while`` ops whose regions yield the
variables the body assigns; a loop-carried variable must keep its type across iterations."""
from __future__ import annotations

import ast
import builtins
from typing import Any, Optional

from ..ir import ops
from ..ir import types as irt
from ..ir.nodes import Block
from ..language import objects as lc
from ..language import semantic
from ..language.objects import constexpr, tensor, unwrap
from .aggregates import flatten, is_aggregate, rebuild, same_structure
from .names import assigned_names

_NUMBERS = (bool, int, float)


def _is_number(value: Any) -> bool:
    return isinstance(unwrap(value), _NUMBERS)


class ControlFlowMixin:
    """The control-flow visitors of ``FunctionGenerator`` (which provides ``visit``,
    ``visit_block``, ``builder``, ``scope``, ``dynamic_depth`` and ``call``)."""

    # -- helpers -----------------------------------------------------------------------------
    def _scalar_condition(self, cond: tensor, what: str) -> tensor:
        if cond.shape:
            raise TypeError(f"the condition of {what} must be a scalar, got a tile of shape "
                            f"{list(cond.shape)}; use tl.where to choose elementwise")
        return semantic.to_bool(cond, self.builder)

    def _visit_region(self, block: Block, stmts: list[ast.stmt], scope: dict[str, Any],
                      tail: bool = False) -> dict[str, Any]:
        """Visit ``stmts`` into ``block`` starting from ``scope``; returns the scope after.
        In a tail region, ``self.tail_return`` is left holding what the region returns."""
        saved = self.scope
        self.scope = dict(scope)
        self.dynamic_depth += 1
        self.tail_return = None
        try:
            with self.builder.at_end_of(block):
                self.visit_block(stmts, tail)
            return self.scope
        finally:
            self.dynamic_depth -= 1
            self.scope = saved

    def _materialize(self, value: Any, like: Optional[irt.Type], block: Block) -> tensor:
        """``value`` as a tensor inside ``block`` (numbers take ``like``'s type if given)."""
        if isinstance(value, tensor):
            return value
        with self.builder.at_end_of(block):
            if like is not None:
                return semantic.constant(unwrap(value), irt.elem_type(like), self.builder,
                                         irt.shape_of(like))
            return semantic.to_tensor(value, self.builder)

    def _yield(self, block: Block, values: list[tensor]) -> None:
        with self.builder.at_end_of(block):
            self.builder.create(ops.YieldOp, [v.handle for v in values])

    # -- if / else ---------------------------------------------------------------------------
    def visit_If(self, node: ast.If) -> None:
        self.visit_if_node(node, merge=True)

    def visit_if_node(self, node: ast.If, merge: bool, tail: bool = False) -> None:
        cond = self.visit(node.test)
        if not isinstance(cond, tensor):
            self.visit_block(node.body if unwrap(cond) else node.orelse, tail)
            return
        c = self._scalar_condition(cond, "an `if`")
        then_block, else_block = Block(), Block()
        then_scope = self._visit_region(then_block, node.body, self.scope, tail)
        then_return = self.tail_return
        else_scope = self._visit_region(else_block, node.orelse, self.scope, tail)
        else_return = self.tail_return
        merged: list[tuple[str, Any]] = []  # (name, a template of the merged value)
        then_vals: list[tensor] = []
        else_vals: list[tensor] = []
        for name in dict.fromkeys([*then_scope, *else_scope]) if merge else ():
            if name not in then_scope or name not in else_scope:
                continue  # defined in one branch only: not visible after the `if`
            t, e = then_scope[name], else_scope[name]
            if t is e or (not isinstance(t, tensor) and not isinstance(e, tensor)
                          and type(unwrap(t)) is type(unwrap(e)) and unwrap(t) == unwrap(e)):
                self.scope[name] = t
                continue
            if is_aggregate(t) or is_aggregate(e):
                if not same_structure(t, e):
                    raise TypeError(f"`{name}` has a different structure in the two branches of "
                                    "an `if` whose condition is only known at run time")
                pairs = [self._merge_branches(name, a, b_, then_block, else_block)
                         for a, b_ in zip(flatten(t), flatten(e))]
            else:
                pairs = [self._merge_branches(name, t, e, then_block, else_block)]
            merged.append((name, t))
            then_vals.extend(p[0] for p in pairs)
            else_vals.extend(p[1] for p in pairs)
        n_merged = len(then_vals)
        returned = self._merge_returns(then_return, else_return, then_block, else_block) \
            if tail else []
        for tv, ev in returned:
            then_vals.append(tv)
            else_vals.append(ev)
        self._yield(then_block, then_vals)
        self._yield(else_block, else_vals)
        op = self.builder.create(ops.IfOp, c.handle, then_block, else_block,
                                 result_types=[v.type for v in then_vals])
        self._bind_merged(merged, op.results[:n_merged])
        if tail:
            results = (tensor(r) for r in op.results[n_merged:])
            self.finish_return(None if unwrap(then_return) is None
                               else rebuild(then_return, results))

    def _bind_merged(self, merged: list[tuple[str, Any]], results: list) -> None:
        """Give each merged variable its value built from the ``if``'s results."""
        it = iter(results)
        for name, template in merged:
            if is_aggregate(template):
                self.scope[name] = rebuild(template, (tensor(r) for r in it))
            else:
                result = next(it)
                result.name = name
                self.scope[name] = tensor(result)

    def _merge_returns(self, then_return: Any, else_return: Any, then_block: Block,
                       else_block: Block) -> list[tuple[tensor, tensor]]:
        """Pairs of leaves the two branches of a returning ``if`` give back (a tuple, a
        descriptor or a block pointer returns its leaves)."""
        t, e = unwrap(then_return), unwrap(else_return)
        if t is None and e is None:
            return []
        t_leaves, e_leaves = flatten(t), flatten(e)
        if t is not None and e is not None and (t_leaves is None or e_leaves is None):
            raise TypeError("the return value is a compile-time object (not a number) in a "
                            "branch of an `if` whose condition is only known at run time")
        if t is None or e is None or not same_structure(t, e):
            raise TypeError("the two branches of this `if` return different numbers of values "
                            "or values of different kinds (a branch that ends without `return` "
                            "returns nothing)")
        return [self._merge_branches("the return value", a, b, then_block, else_block)
                for a, b in zip(t_leaves, e_leaves)]

    def _merge_branches(self, name: str, t: Any, e: Any, then_block: Block,
                        else_block: Block) -> tuple[tensor, tensor]:
        for v in (t, e):
            if not isinstance(v, tensor) and not _is_number(v):
                raise TypeError(f"`{name}` is given different compile-time values in the two "
                                "branches of an `if` whose condition is only known at run time")
        if not isinstance(t, tensor) and not isinstance(e, tensor):
            ty = semantic.computation_type(semantic.literal_type(unwrap(t)), True,
                                           semantic.literal_type(unwrap(e)), True, False)
            return (self._materialize(t, ty, then_block), self._materialize(e, ty, else_block))
        tv = self._materialize(t, e.type if isinstance(e, tensor) else None, then_block)
        ev = self._materialize(e, tv.type, else_block)
        if tv.type != ev.type:
            raise TypeError(f"`{name}` is {tv.type} in the `then` branch but {ev.type} in the "
                            "`else` branch; both branches must give it one type")
        return tv, ev

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if not isinstance(cond, tensor):
            return self.visit(node.body if unwrap(cond) else node.orelse)
        c = self._scalar_condition(cond, "a conditional expression")
        then_block, else_block = Block(), Block()
        values = []
        for block, expr in ((then_block, node.body), (else_block, node.orelse)):
            self.dynamic_depth += 1
            try:
                with self.builder.at_end_of(block):
                    values.append(self.visit(expr))
            finally:
                self.dynamic_depth -= 1
        if unwrap(values[0]) is None and unwrap(values[1]) is None:
            # both branches are calls made for their effect (``tl.store(...) if c else ...``)
            self._yield(then_block, [])
            self._yield(else_block, [])
            self.builder.create(ops.IfOp, c.handle, then_block, else_block, result_types=[])
            return None
        if unwrap(values[0]) is None or unwrap(values[1]) is None:
            raise TypeError("one branch of this conditional expression gives no value (None) "
                            "and the other a value; give both a value, or use an `if` statement")
        tv, ev = self._merge_branches("the conditional expression", values[0], values[1],
                                      then_block, else_block)
        self._yield(then_block, [tv])
        self._yield(else_block, [ev])
        op = self.builder.create(ops.IfOp, c.handle, then_block, else_block,
                                 result_types=[tv.type])
        return tensor(op.result)

    # -- loop-carried values -----------------------------------------------------------------
    def _carried(self, body: list[ast.stmt], exclude: tuple = ()) -> list[str]:
        """Variables defined before a loop and assigned in its body."""
        return [n for n in assigned_names(body) if n in self.scope and n not in exclude
                and (isinstance(self.scope[n], tensor) or _is_number(self.scope[n])
                     or is_aggregate(self.scope[n]))]

    def _loop_inits(self, names: list[str]) -> list[tensor]:
        """The initial values of the carried variables' leaves, in order."""
        return [semantic.to_tensor(leaf, self.builder)
                for n in names for leaf in flatten(self.scope[n])]

    def _leaf_names(self, names: list[str]) -> list[str]:
        out = []
        for n in names:
            count = len(flatten(self.scope[n]))
            out.extend([n] if count == 1 else [f"{n}_{i}" for i in range(count)])
        return out

    def _rebuilt(self, names: list[str], leaves: list) -> dict[str, Any]:
        """The carried variables rebuilt (from their pre-loop templates) around ``leaves``."""
        it = iter(leaves)
        return {n: rebuild(self.scope[n], it) for n in names}

    def _next_values(self, names: list[str], inits: list[tensor], after: dict[str, Any],
                     block: Block) -> list[tensor]:
        out = []
        init_iter = iter(inits)
        for name in names:
            template, now = self.scope[name], after[name]
            leaves = flatten(now)
            if leaves is None or (is_aggregate(template) and not same_structure(template, now)) \
                    or len(leaves) != len(flatten(template)):
                raise TypeError(f"loop-carried variable `{name}` changes its kind inside the "
                                "loop; give it values of one structure before and in the loop")
            for leaf in leaves:
                init = next(init_iter)
                v = self._materialize(leaf, init.type, block)
                if v.type != init.type:
                    raise TypeError(
                        f"the type of loop-carried variable `{name}` changes inside the loop: it "
                        f"is {init.type} before the loop but {v.type} at the end of the body; "
                        "keep one type (e.g. create it before the loop with its final shape and "
                        "dtype)")
                out.append(v)
        return out

    def _check_static_unchanged(self, body: list[ast.stmt], carried: list[str],
                                after: dict[str, Any]) -> None:
        """Compile-time objects (dtypes, functions...) cannot change in a run-time loop."""
        for name in assigned_names(body):
            if name in carried or name not in self.scope or name not in after:
                continue
            before, now = self.scope[name], after[name]
            if before is not now and not (type(unwrap(before)) is type(unwrap(now))
                                          and unwrap(before) == unwrap(now)):
                raise TypeError(f"`{name}` holds a compile-time value ({unwrap(before)!r}) and "
                                "cannot be reassigned inside a loop that runs at run time")

    def _bind_results(self, names: list[str], op: ops.Op) -> None:
        for leaf_name, result in zip(self._leaf_names(names), op.results):
            result.name = leaf_name
        self.scope.update(self._rebuilt(names, [tensor(r) for r in op.results]))

    # -- for ---------------------------------------------------------------------------------
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise SyntaxError("`for ... else` is not supported inside @jit functions")
        if not isinstance(node.target, ast.Name):
            raise SyntaxError("the target of a `for` loop must be a single name")
        it = node.iter
        fn = unwrap(self.visit(it.func)) if isinstance(it, ast.Call) else None
        if fn is builtins.range:
            fn = lc.range
        if fn not in (lc.range, lc.static_range):
            raise SyntaxError("only `range(...)`, `tl.range(...)` and `tl.static_range(...)` "
                              "loops are supported inside @jit functions")
        rng = self.visit(it)
        if isinstance(rng, lc.static_range):
            for i in rng:
                self.scope[node.target.id] = constexpr(i)
                self.visit_block(node.body)
                if self.returned:
                    return
            return
        self._dynamic_for(node, rng)

    def _loop_bound(self, value: Any, what: str) -> tuple[Any, irt.ScalarType]:
        v = unwrap(value)
        if isinstance(v, tensor):
            elem = irt.elem_type(v.type)
            if v.shape or not isinstance(elem, irt.ScalarType) or not elem.is_int or elem.is_bool:
                raise TypeError(f"the {what} of a `range` must be a scalar integer, got "
                                f"{'a tile of ' if v.shape else ''}{v.dtype!r}")
            return v, elem
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"the {what} of a `range` must be an integer, got {v!r}")
        return v, semantic.literal_type(v)

    def _dynamic_for(self, node: ast.For, rng: lc.range) -> None:
        bounds = [self._loop_bound(rng.start, "start"), self._loop_bound(rng.end, "end"),
                  self._loop_bound(rng.step, "step")]
        step = unwrap(rng.step)
        if not isinstance(step, tensor) and step == 0:
            raise ValueError("`range` step must not be zero")
        iv_type = bounds[0][1]
        for _, t in bounds[1:]:
            iv_type = semantic.integer_promote(iv_type, t)
        lower, upper, stepv = (semantic.constant(v, iv_type, self.builder) if not isinstance(v, tensor)
                               else semantic.cast(v, lc.dtype_of(iv_type), self.builder)
                               for v, _ in bounds)
        down_from = None
        if not isinstance(step, tensor) and step < 0:
            # counting down (a compile-time negative step): j = 0, -step, ... below
            # start - end, and the loop variable is start - j
            down_from = lower
            upper = semantic.sub(lower, upper, self.builder)
            lower = semantic.constant(0, iv_type, self.builder)
            stepv = semantic.constant(-step, iv_type, self.builder)
        target = node.target.id
        names = self._carried(node.body, exclude=(target,))
        inits = self._loop_inits(names)
        body = Block.with_args([iv_type] + [v.type for v in inits],
                               [target] + self._leaf_names(names))
        scope = dict(self.scope)
        scope[target] = tensor(body.args[0])
        if down_from is not None:
            body.args[0].name = f"{target}_up"
            with self.builder.at_end_of(body):
                scope[target] = semantic.sub(down_from, tensor(body.args[0]), self.builder)
        scope.update(self._rebuilt(names, [tensor(a) for a in body.args[1:]]))
        after = self._visit_region(body, node.body, scope)
        self._check_static_unchanged(node.body, names + [target], after)
        self._yield(body, self._next_values(names, inits, after, body))
        num_stages = rng.num_stages
        op = self.builder.create(ops.ForOp, lower.handle, upper.handle, stepv.handle,
                                 [v.handle for v in inits], body,
                                 num_stages=None if num_stages is None else int(num_stages),
                                 result_types=[v.type for v in inits])
        self._bind_results(names, op)

    # -- while -------------------------------------------------------------------------------
    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise SyntaxError("`while ... else` is not supported inside @jit functions")
        names = self._carried(node.body)
        inits = self._loop_inits(names)
        types = [v.type for v in inits]
        leaf_names = self._leaf_names(names)
        before, after = Block.with_args(types, leaf_names), Block.with_args(types, leaf_names)
        saved = self.scope
        self.scope = dict(saved)
        self.scope.update(self._rebuilt(names, [tensor(a) for a in before.args]))
        self.dynamic_depth += 1
        try:
            with self.builder.at_end_of(before):
                cond = self.visit(node.test)
                if isinstance(cond, tensor):
                    c = self._scalar_condition(cond, "a `while` loop")
                    self.builder.create(ops.ConditionOp, c.handle, [a for a in before.args])
        finally:
            self.dynamic_depth -= 1
            self.scope = saved
        if not isinstance(cond, tensor):
            if unwrap(cond):
                raise SyntaxError("`while` with a condition that is always true never ends "
                                  "(`break` is not supported); give it a run-time condition")
            return
        scope = dict(self.scope)
        scope.update(self._rebuilt(names, [tensor(a) for a in after.args]))
        after_scope = self._visit_region(after, node.body, scope)
        self._check_static_unchanged(node.body, names, after_scope)
        self._yield(after, self._next_values(names, inits, after_scope, after))
        op = self.builder.create(ops.WhileOp, [v.handle for v in inits], before, after,
                                 result_types=types)
        self._bind_results(names, op)
