"""LLVM (llvmlite) lowering helpers shared by LLVM-based backends."""
from .types import LLVMTypes, const_like, intrinsic, splat, vector_width  # noqa: F401
from .elementwise import ElementwiseLowering  # noqa: F401
from .math import MathLowering, Float64Library  # noqa: F401
