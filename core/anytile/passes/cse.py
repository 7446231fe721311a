"""Common-subexpression elimination of pure ops, scoped by region.

Two pure ops (trait ``pure``, no regions) are the same computation when they have the same
name, attributes, operands and result types; the later one is replaced by the earlier.  An
op in an outer block may stand in for one in a nested region, never the reverse (the nested
one does not dominate code after its region).  Operands of commutative ops are put in a
canonical order first, so ``a + b`` and ``b + a`` merge (not float ``min``/``max``, whose
result for two zeros depends on the order).  Loads, stores and atomics are not
pure and are never merged.  Attribute values are compared by their exact printed form, so
``0.0`` and ``-0.0`` (or ``1`` and ``True``) stay distinct.
"""
from __future__ import annotations

from typing import Any, Hashable

from ..ir.nodes import TRAIT_PURE, Block, Module, Op
from ..ir.printer import format_attr_value
from .rewrite import Substitution, is_commutative

__all__ = ["cse"]


def _operand_key(op: Op) -> tuple[Hashable, ...]:
    groups: list[Hashable] = []
    for name in op.OPERANDS:
        v = getattr(op, name)
        if isinstance(v, list):
            groups.append(tuple(id(x) for x in v))
        else:
            groups.append(None if v is None else id(v))
    if is_commutative(op) and len(groups) >= 2:
        groups[0], groups[1] = sorted(groups[:2])  # value ids
    return tuple(groups)


def op_key(op: Op) -> tuple[Any, ...]:
    """What makes two pure ops interchangeable."""
    attrs = tuple((k, format_attr_value(v)) for k, v in op.attrs.items())
    types = tuple(str(r.type) for r in op.results)
    return (op.NAME, attrs, _operand_key(op), types)


class _Scopes:
    def __init__(self) -> None:
        self.tables: list[dict[tuple, Op]] = []

    def find(self, key: tuple) -> Op | None:
        for table in reversed(self.tables):
            found = table.get(key)
            if found is not None:
                return found
        return None


def _cse_block(block: Block, scopes: _Scopes, subst: Substitution) -> bool:
    changed = False
    scopes.tables.append({})
    kept: list[Op] = []
    for op in block.ops:
        op.map_operands(subst.resolve)
        for region in op.regions:
            changed |= _cse_block(region, scopes, subst)
        if op.has_trait(TRAIT_PURE) and not op.regions and op.results:
            key = op_key(op)
            earlier = scopes.find(key)
            if earlier is not None:
                for old, new in zip(op.results, earlier.results):
                    subst.replace(old, new)
                changed = True
                continue
            scopes.tables[-1][key] = op
        kept.append(op)
    block.ops = kept
    scopes.tables.pop()
    return changed


def cse(module: Module) -> bool:
    """Merge identical pure ops in every function of ``module``; True if anything changed."""
    changed = False
    for fn in module.functions.values():
        changed |= _cse_block(fn.body, _Scopes(), Substitution())
    return changed

