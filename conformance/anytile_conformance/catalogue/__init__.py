"""The case catalogue: importing this package registers every family, area by area."""
from . import (memory, arithmetic, compare_bitwise, math_fns, casts, reductions,  # noqa: F401
               shapes, dot, control_flow, atomics, programs, kernels)
