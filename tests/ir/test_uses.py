"""``ir.Uses``: the readers of each value (one entry per use, regions included, walk order),
where each op sits, and keeping up with a pass's own deletions and changes."""
from __future__ import annotations

from anytile.ir import ForOp, Uses, walk
from ir_text_kit import ALL_OPS, parse_verified

LOOP = """
kernel @k(%x: ptr<f32>, %n: i32) {
  %c = constant {value = 2.0} : f32
  %twice = binary {kind = "mul"} (%c, %c) : f32
  %lo = constant {value = 0} : i32
  %one = constant {value = 1} : i32
  %zero = constant {value = 0.0} : f32
  %acc, %dead = for (%lo, %n, %one, [%zero, %twice]) : f32, f32 {
  ^(%i: i32, %a: f32, %d: f32):
    %a2 = binary {kind = "add"} (%a, %twice) : f32
    yield ([%a2, %d])
  }
  store (%x, %acc, none)
}
"""


def _ops(module):
    return {op.results[0].name: op for op in walk(module.kernel.body) if op.results}


def test_users_count_each_use_in_walk_order_regions_included():
    module = parse_verified(LOOP)
    uses = Uses(module)
    ops = _ops(module)
    loop = next(op for op in walk(module.kernel.body) if isinstance(op, ForOp))
    add, done = loop.body.ops
    assert uses.users(ops["c"].result) == [ops["twice"], ops["twice"]]    # read twice
    assert uses.count(ops["c"].result) == 2 and uses.only_user(ops["c"].result) is None
    assert uses.users(ops["twice"].result) == [loop, add]                 # the loop first
    assert uses.only_user(ops["zero"].result) is loop
    assert uses.count(loop.results[1]) == 0 and uses.users(loop.results[1]) == []
    assert uses.only_user(loop.body.args[2]) is done                     # a block argument
    assert uses.block_of(add) is loop.body and uses.block_of(loop) is module.kernel.body
    assert uses.position(add) == 0 and uses.position(done) == 1
    assert uses.position(loop) == module.kernel.body.ops.index(loop)


def test_forget_and_record_follow_a_rewrite():
    module = parse_verified(LOOP)
    uses = Uses(module.kernel)
    ops = _ops(module)
    loop = next(op for op in walk(module.kernel.body) if isinstance(op, ForOp))
    add = loop.body.ops[0]
    uses.forget(loop)                       # with its regions: the add's use goes too
    assert uses.users(ops["twice"].result) == []
    assert uses.count(ops["zero"].result) == 0
    uses.record(loop, regions=False)        # the loop alone comes back
    assert uses.users(ops["twice"].result) == [loop]
    add.rhs = ops["c"].result               # the add now reads %c instead
    uses.record(add)
    assert uses.count(ops["c"].result) == 3 and uses.only_user(ops["twice"].result) is loop
    users = uses.users(ops["c"].result)
    users.clear()                           # a copy: the uses are not changed through it
    assert uses.count(ops["c"].result) == 3


def test_every_use_of_a_module_with_every_op():
    module = parse_verified(ALL_OPS)
    uses = Uses(module)
    expected: dict = {}
    for fn in module.functions.values():
        for op in walk(fn.body):
            for v in op.operands:
                expected[v] = expected.get(v, 0) + 1
    assert expected and all(uses.count(v) == n for v, n in expected.items())
    assert all(uses.block_of(op) is not None for fn in module.functions.values()
               for op in walk(fn.body))
