"""anytile's CPU backend: tile kernels compiled with LLVM (llvmlite) to SIMD host code."""
