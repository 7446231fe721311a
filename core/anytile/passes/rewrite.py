"""A small table-driven rewrite engine: patterns over ops, rewrites as plain functions.

A ``Rule`` pairs an ``OpPattern`` (what the op and its operands' defining ops look like)
with a rewrite function that receives a ``Match`` and returns the values that replace the
op's results (or ``None`` when the rule does not apply after all).  ``apply_rules`` walks
every block once in order, applying the first matching rule to each op until none applies,
and repeats until nothing changes.

Because the IR is SSA with structured regions, every use of a value comes after its
definition in a forward walk, so replacements are recorded in a substitution map and
applied to each op's operands when the walk reaches it; no use lists are needed.

Example (``x + 0 -> x`` on integers)::

    Rule("add-zero", P("binary", Var("x"), Const("c", where=is_zero), kind="add"),
         lambda m: m.x if is_int(m.x.type) else None)
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from ..ir.nodes import TRAIT_COMMUTATIVE, Block, Module, Op, Value
from ..ir.ops import ConstantOp
from ..ir.types import ScalarType, Type, elem_type

__all__ = ["Pattern", "Var", "Const", "OpPattern", "P", "Match", "Rule", "apply_rules",
           "Substitution", "constant_of", "is_commutative", "RewriteLoopError"]


def is_commutative(op: Op) -> bool:
    """Whether swapping ``op``'s first two operands never changes its result.  Float
    ``min``/``max`` are not: which zero ``min(-0.0, +0.0)`` returns depends on the order."""
    if op.NAME == "binary":
        if op.kind in ("min", "max"):
            e = elem_type(op.lhs.type)
            return not (isinstance(e, ScalarType) and e.is_float)
        return op.is_commutative
    return op.has_trait(TRAIT_COMMUTATIVE)


def constant_of(value: Value) -> Optional[Any]:
    """The Python value of ``value`` if a ``constant`` op (scalar or uniform tile) defines it."""
    owner = value.owner
    return owner.value if isinstance(owner, ConstantOp) else None


# ---------------------------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------------------------
class Pattern:
    """Matches one value, adding what it names to ``bindings``."""

    def match(self, value: Value, bindings: dict[str, Any]) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class Var(Pattern):
    """Any value; a name used twice in one pattern must match the same value."""

    name: str

    def match(self, value: Value, bindings: dict[str, Any]) -> bool:
        bound = bindings.get(self.name)
        if bound is not None:
            return bound is value
        bindings[self.name] = value
        return True


@dataclass(frozen=True)
class Const(Pattern):
    """A value defined by a ``constant`` op; binds ``name`` to its Python value and
    ``name + "_value"`` to the Value.  ``where(python_value, type)`` filters."""

    name: str = ""
    where: Optional[Callable[[Any, Type], bool]] = None

    def match(self, value: Value, bindings: dict[str, Any]) -> bool:
        c = constant_of(value)
        if c is None or (self.where is not None and not self.where(c, value.type)):
            return False
        if self.name:
            bindings[self.name] = c
            bindings[self.name + "_value"] = value
        return True


@dataclass(frozen=True)
class OpPattern(Pattern):
    """An op named ``op`` (any op when ``None``) whose attributes include ``attrs`` and whose
    flattened operands match ``operands`` (not checked when ``None``); binds ``name`` to the
    op.  With ``commutative``, the first two operands are also tried swapped."""

    op: Optional[str]
    operands: Optional[tuple[Pattern, ...]] = None
    attrs: tuple[tuple[str, Any], ...] = ()
    name: str = ""
    commutative: bool = False

    def match_op(self, op: Op, bindings: dict[str, Any]) -> bool:
        if self.op is not None and op.NAME != self.op:
            return False
        for key, expected in self.attrs:
            if getattr(op, key, None) != expected:
                return False
        if self.name:
            bindings[self.name] = op
        if self.operands is None:
            return True
        values = op.operands
        if len(values) != len(self.operands):
            return False
        orders = [values]
        if self.commutative and len(values) >= 2:
            orders.append([values[1], values[0], *values[2:]])
        for order in orders:
            trial = dict(bindings)
            if all(p.match(v, trial) for p, v in zip(self.operands, order)):
                bindings.update(trial)
                return True
        return False

    def match(self, value: Value, bindings: dict[str, Any]) -> bool:
        owner = value.owner
        return isinstance(owner, Op) and len(owner.results) == 1 and self.match_op(owner,
                                                                                  bindings)


def P(op: Optional[str], *operands: Pattern, name: str = "", commutative: bool = False,
      **attrs: Any) -> OpPattern:
    """Shorthand: ``P("binary", Var("x"), Const("c"), kind="add")``."""
    return OpPattern(op, tuple(operands) if operands else None, tuple(sorted(attrs.items())),
                     name, commutative)


# ---------------------------------------------------------------------------------------------
# Rules and matches
# ---------------------------------------------------------------------------------------------
class Match:
    """What a rule's rewrite function sees: ``m.op`` (the matched op), bound names as
    attributes, and helpers to create replacement ops at the op's location."""

    def __init__(self, op: Op, bindings: dict[str, Any]) -> None:
        self.op = op
        self.bindings = bindings
        self.new_ops: list[Op] = []
        self.arguments: list[tuple[Value, Value]] = []

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["bindings"][name]
        except KeyError:
            raise AttributeError(f"pattern bound no '{name}'") from None

    def new(self, cls: type[Op], *args: Any, **kwargs: Any) -> Op:
        """Create ``cls(*args, **kwargs)`` (with the matched op's loc) before the op."""
        op = cls(*args, loc=self.op.loc, **kwargs)
        self.new_ops.append(op)
        return op

    def const(self, value: Any, type: Type) -> Value:
        """A new constant of ``type`` (scalar or uniform tile)."""
        return self.new(ConstantOp, value=value, result_types=[type]).result

    def splice(self, ops: Iterable[Op]) -> None:
        """Move existing ops (e.g. a region's body) to where the matched op was."""
        self.new_ops.extend(ops)

    def bind_argument(self, arg: Value, value: Value) -> None:
        """Let spliced ops that use block argument ``arg`` use ``value`` instead."""
        self.arguments.append((arg, value))


RewriteResult = Union[None, Value, Sequence[Value]]


@dataclass(frozen=True)
class Rule:
    """``pattern`` -> ``rewrite(match)``; the rewrite returns the replacement value (one-result
    ops), the list of replacement values, or ``None`` to decline."""

    name: str
    pattern: OpPattern
    rewrite: Callable[[Match], RewriteResult]


@dataclass
class Substitution:
    """Values replaced so far (old -> new), resolved through chains."""

    mapping: dict[Value, Value] = field(default_factory=dict)

    def resolve(self, value: Value) -> Value:
        seen = value
        while seen in self.mapping:
            seen = self.mapping[seen]
        return seen

    def replace(self, old: Value, new: Value) -> None:
        if old is not new:
            self.mapping[old] = new

    def apply_to_block(self, block: Block) -> None:
        """Rewrite the operands of every op of ``block`` and its regions."""
        if not self.mapping:
            return
        for op in block.ops:
            op.map_operands(self.resolve)
            for region in op.regions:
                self.apply_to_block(region)


class RewriteLoopError(RuntimeError):
    """A rule table keeps rewriting without converging (a bug in the rules)."""


class _Engine:
    def __init__(self, rules: Sequence[Rule], max_rewrites: int) -> None:
        self.rules = list(rules)
        self.candidates: dict[tuple[str, Any], list[Rule]] = {}
        self.subst = Substitution()
        self.budget = max_rewrites

    def rules_for(self, op: Op) -> list[Rule]:
        """The rules that may match ``op``, by op name and ``kind`` (cached: this is the hot
        path of every pass built on the engine)."""
        key = (op.NAME, getattr(op, "kind", None))
        found = self.candidates.get(key)
        if found is None:
            found = [r for r in self.rules if r.pattern.op in (None, op.NAME)
                     and dict(r.pattern.attrs).get("kind", key[1]) == key[1]]
            self.candidates[key] = found
        return found

    def first_rewrite(self, op: Op) -> Optional[tuple[list[Op], list[Value], str]]:
        for rule in self.rules_for(op):
            bindings: dict[str, Any] = {}
            if not rule.pattern.match_op(op, bindings):
                continue
            m = Match(op, bindings)
            out = rule.rewrite(m)
            if out is None:
                continue
            values = [out] if isinstance(out, Value) else list(out)
            if len(values) != len(op.results):
                raise ValueError(f"rule {rule.name} gave {len(values)} values for "
                                 f"{len(op.results)} results of '{op.NAME}'")
            for arg, value in m.arguments:
                self.subst.replace(arg, value)
            return m.new_ops, values, rule.name
        return None

    def block(self, block: Block) -> bool:
        changed = False
        pending = deque(block.ops)
        out: list[Op] = []
        while pending:
            op = pending.popleft()
            op.map_operands(self.subst.resolve)
            for region in op.regions:
                changed |= self.block(region)
            found = self.first_rewrite(op)
            if found is None:
                out.append(op)
                continue
            new_ops, values, rule_name = found
            self.budget -= 1
            if self.budget < 0:
                raise RewriteLoopError(f"rewrites do not converge (last rule: {rule_name})")
            created = {id(r) for new_op in new_ops for r in new_op.results}
            for old, new in zip(op.results, values):
                if id(new) in created and not new.name:
                    new.name = old.name  # a rewritten op keeps the user's variable name
                self.subst.replace(old, new)
            pending.extendleft(reversed(new_ops))
            changed = True
        block.ops = out
        return changed


def apply_rules(module: Module, rules: Sequence[Rule], max_iterations: int = 16,
                max_rewrites: int = 1_000_000) -> bool:
    """Rewrite every function of ``module`` with ``rules`` to a fixed point; True if changed."""
    changed_any = False
    for fn in module.functions.values():
        engine = _Engine(rules, max_rewrites)
        for _ in range(max_iterations):
            if not engine.block(fn.body):
                break
            changed_any = True
    return changed_any
