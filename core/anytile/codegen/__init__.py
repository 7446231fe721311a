"""Lowering helpers shared by backends (documented, backend-neutral).

* ``anytile.codegen.llvm.types``       -- IR scalar/pointer types -> llvmlite types (storage
  and compute forms), vector helpers and intrinsic declaration.
* ``anytile.codegen.llvm.elementwise`` -- IR elementwise ops (binary, unary, compare, cast,
  bitcast, select, fma, umulhi) -> llvmlite builder calls, on scalars or vectors.
* ``anytile.codegen.llvm.math``        -- vectorised exp/exp2/log/log2/sin/cos/erf/tanh as
  straight-line LLVM IR (polynomials), with a hook for targets that bring their own library.
* ``anytile.codegen.pointers``         -- which pointer parameters each pointer may come from.
* ``anytile.codegen.bounds_checks``    -- checked mode as an IR rewrite: every load, store and
  atomic tested against its arguments' memory, a failure reported as a ``device_assert``.

Nothing here names a backend; what differs between targets (address spaces, the f64
library) is passed in through small hook objects.
"""
