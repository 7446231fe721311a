"""The op set versions: each holds the one before, the newest is exactly core's ops, and what
changed in an op since version 1 (a field, an attribute value) is recorded in the version
that changed it.  A new op or field fails here until it is recorded in ``OP_SETS``."""
from __future__ import annotations

import pytest

import anytile.ir as ir
from anytile.ir import ops as O
from anytile.ir.opsets import (LATEST_OP_SET, OP_SETS, first_op_outside, ops_of_version,
                               spelling_of, version_with)
from ir_text_kit import ALL_OPS, parse_verified

#: every op of version 1 and its fields (operands, attributes, regions), as first released
FIELDS_OF_VERSION_1 = {
    "constant": {"value"}, "program_id": {"axis"}, "num_programs": {"axis"},
    "arange": {"start", "end"}, "splat": {"src"}, "broadcast": {"src"},
    "expand_dims": {"src", "axis"}, "reshape": {"src"}, "permute": {"src", "order"},
    "binary": {"lhs", "rhs", "kind"}, "compare": {"lhs", "rhs", "pred"},
    "unary": {"src", "kind"}, "fma": {"a", "b", "c"}, "umulhi": {"lhs", "rhs"},
    "select": {"cond", "true_value", "false_value"}, "cast": {"src"}, "bitcast": {"src"},
    "hint": {"src", "multiple_of", "max_contiguous"}, "addptr": {"ptr", "offset"},
    "load": {"ptr", "mask", "other", "volatile"}, "store": {"ptr", "value", "mask"},
    "atomic_rmw": {"ptr", "value", "mask", "kind", "sem", "scope"},
    "atomic_cas": {"ptr", "cmp", "value", "sem", "scope"},
    "reduce": {"srcs", "axis", "combine"}, "scan": {"srcs", "axis", "reverse", "combine"},
    "dot": {"a", "b", "acc", "input_precision"}, "yield": {"values"},
    "condition": {"cond", "values"}, "return": {"values"},
    "for": {"lower", "upper", "step", "inits", "num_stages", "body"},
    "if": {"cond", "then_body", "else_body"}, "while": {"inits", "before", "after"},
    "call": {"args", "callee"}, "assert": {"cond", "message"}, "barrier": set(),
}
#: the values of the enumerated attributes in version 1
VALUES_OF_VERSION_1 = {
    "binary.kind": {"add", "sub", "mul", "fdiv", "div", "rem", "and", "or", "xor", "shl", "shr",
                    "min", "max"},
    "unary.kind": {"neg", "not", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin",
                   "cos", "floor", "ceil", "erf", "tanh"},
    "compare.pred": {"eq", "ne", "lt", "le", "gt", "ge"},
    "atomic_rmw.kind": {"add", "max", "min", "xchg", "and", "or", "xor"},
    "atomic_rmw.sem": {"relaxed", "acquire", "release", "acq_rel"},
    "atomic_cas.sem": {"relaxed", "acquire", "release", "acq_rel"},
    "atomic_rmw.scope": {"gpu", "cta", "sys"}, "atomic_cas.scope": {"gpu", "cta", "sys"},
    "dot.input_precision": {"ieee", "tf32", "tf32x3"},
}


def _core_op_classes() -> dict:
    classes = [getattr(O, n) for n in O.__all__]
    return {c.NAME: c for c in classes if isinstance(c, type) and issubclass(c, ir.Op) and c.NAME}


def _extensions() -> set[str]:
    return {e for s in OP_SETS.values() for e in s.extensions}


def test_each_version_holds_the_one_before():
    assert sorted(OP_SETS) == list(range(1, LATEST_OP_SET + 1))
    for version, op_set in OP_SETS.items():
        assert op_set.version == version and op_set.summary
        if version > 1:
            assert OP_SETS[version - 1].ops < op_set.ops or op_set.extensions
            assert OP_SETS[version - 1].ops <= op_set.ops
    assert set(FIELDS_OF_VERSION_1) == OP_SETS[1].ops


def test_the_newest_version_is_every_op_core_makes():
    ops = set(_core_op_classes())
    assert ops - OP_SETS[LATEST_OP_SET].ops == set(), \
        "ops in no op set version: add a version to anytile.ir.opsets.OP_SETS"
    assert OP_SETS[LATEST_OP_SET].ops == ops


def test_every_field_added_since_version_1_is_recorded():
    recorded = _extensions()
    for name, cls in _core_op_classes().items():
        fields = set(cls.OPERANDS) | set(cls.ATTRS) | set(cls.REGIONS)
        before = FIELDS_OF_VERSION_1.get(name)
        if before is None:                       # an op of a later version: all of it is new
            continue
        unrecorded = {f"{name}.{f}" for f in fields - before} - recorded
        assert not unrecorded, f"fields in no op set version: {sorted(unrecorded)}"
        assert before <= fields, f"'{name}' lost fields of version 1: {sorted(before - fields)}"


def test_every_attribute_value_added_since_version_1_is_recorded():
    recorded = _extensions()
    for name, cls in _core_op_classes().items():
        for attr, kinds in cls.ENUM_ATTRS.items():
            before = VALUES_OF_VERSION_1.get(f"{name}.{attr}")
            if before is None:
                continue
            now = {k.value for k in kinds}
            unrecorded = {f"{name}.{attr}={v}" for v in now - before} - recorded
            assert not unrecorded, f"attribute values in no op set version: {sorted(unrecorded)}"
            assert before <= now


def test_versions_a_backend_may_declare():
    assert ops_of_version(1) == OP_SETS[1].ops and "print" not in ops_of_version(1)
    assert "print" in ops_of_version(2)
    assert ops_of_version(LATEST_OP_SET + 5) == OP_SETS[LATEST_OP_SET].ops   # a newer plugin
    for bad in (0, -1, "2", 2.0, True, None):
        with pytest.raises(ValueError, match="op set version"):
            ops_of_version(bad)
    assert version_with("print") == 2 and version_with("load") == 1
    assert version_with("nvidia.box_load") is None
    assert spelling_of("print") == "tl.device_print" and spelling_of("binary") is None


def test_the_first_op_outside_a_set_in_walk_order():
    module = parse_verified(ALL_OPS)
    assert first_op_outside(module, OP_SETS[LATEST_OP_SET].ops) is None
    found = first_op_outside(module, OP_SETS[1].ops - {"reduce", "yield"})
    assert found is not None and found.NAME == "reduce"
    inside = first_op_outside(module.kernel, OP_SETS[1].ops - {"yield"})
    assert inside.NAME == "yield" and inside in found.combine.ops    # a region's op counts
    assert first_op_outside(module.kernel.body, ()) is module.kernel.body.ops[0]


def test_the_public_surface_holds_what_backends_use():
    names = set(ir.__all__)
    assert len(names) == len(ir.__all__)
    assert all(hasattr(ir, n) for n in names)
    assert set(_core_op_classes()) == {getattr(ir, n).NAME for n in names
                                       if isinstance(getattr(ir, n), type)
                                       and issubclass(getattr(ir, n), ir.Op)
                                       and getattr(ir, n).NAME}
    assert {"Module", "Function", "Block", "Value", "Op", "walk", "Uses", "TileType", "i32",
            "OP_SETS", "Dialect", "parse_module", "verify_module", "BinaryKind"} <= names
    assert set(ir.types.__all__) <= names           # every type, new scalar types included
    assert "OP_REGISTRY" not in names                # core's registry, not an API


def test_ops_that_state_facts_can_be_dropped():
    from anytile.ir import DROPPABLE_OPS, drop_ops
    assert version_with("assume") == 3 and "assume" in DROPPABLE_OPS
    module = parse_verified(ALL_OPS)
    assert first_op_outside(module, OP_SETS[2].ops).NAME == "assume"
    assert drop_ops(module, DROPPABLE_OPS) == 1
    assert first_op_outside(module, OP_SETS[2].ops) is None
