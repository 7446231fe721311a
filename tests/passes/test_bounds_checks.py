"""``anytile.codegen.bounds_checks``: checked mode as an IR rewrite (what the GPU backends run
with debug=True): two i64 parameters per pointer parameter, a bounds assertion before every
traceable access, its mask narrowed to the lanes inside; untraceable pointers left alone."""
import anytile as at
import anytile.language as tl
from anytile.codegen.bounds_checks import BOUNDS_PREFIX, insert_bounds_checks
from anytile.ir import ops as O
from anytile.ir.types import i64
from anytile.ir.verifier import verify_module


@at.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, v)
    tl.atomic_add(y_ptr, 1.0)
    for i in range(3):
        x_ptr += 1
        tl.store(x_ptr, 0.0)


@at.jit
def indirect(table_ptr, out_ptr):
    p = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
    tl.store(out_ptr, tl.load(p))


def _module(fn, signature):
    return at.compile(fn, target="interpreter:reference", signature=signature,
                      constexprs={"BLOCK": 16} if "n" in signature else {}).module


def test_every_traceable_access_is_asserted_and_masked():
    module = _module(kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"})
    fn = module.kernel
    assert insert_bounds_checks(fn) == [0, 1]
    args = fn.body.args
    assert [a.name for a in args[3:]] == ["x_ptr_lo", "x_ptr_size", "y_ptr_lo", "y_ptr_size"]
    assert all(a.type == i64 for a in args[3:])
    verify_module(module)
    ops = list(fn.walk())
    asserts = [op for op in ops if isinstance(op, O.AssertOp)]
    accesses = [op for op in ops if isinstance(op, (O.LoadOp, O.StoreOp, O.AtomicRMWOp))]
    assert len(asserts) == len(accesses) == 4
    assert all(a.message.startswith(BOUNDS_PREFIX) for a in asserts)
    assert "store through 'x_ptr'" in asserts[-1].message   # carried through the loop
    assert all(op.mask is not None for op in accesses)


def test_pointers_read_from_memory_are_not_checked():
    module = _module(indirect, {"table_ptr": "*i64", "out_ptr": "*fp32"})
    fn = module.kernel
    insert_bounds_checks(fn)
    verify_module(module)
    asserts = [op.message for op in fn.walk() if isinstance(op, O.AssertOp)]
    assert len(asserts) == 2 and not any("through 'p'" in m for m in asserts)


@at.jit
def divide(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.load(y_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) // y)


def test_integer_divisions_assert_a_nonzero_divisor_where_the_lane_was_loaded():
    from anytile.codegen.bounds_checks import DIVISION_PREFIX
    module = _module(divide, {"x_ptr": "*i32", "y_ptr": "*i32", "out_ptr": "*i32", "n": "i32"})
    fn = module.kernel
    insert_bounds_checks(fn)
    verify_module(module)
    (check,) = [op for op in fn.walk()
                if isinstance(op, O.AssertOp) and op.message.startswith(DIVISION_PREFIX)]
    # the divisor's load mask excuses its masked-off lanes: (y != 0) | !(offs < n)
    assert check.cond.owner.kind == "or"
