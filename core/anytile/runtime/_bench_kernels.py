"""The kernel ``do_bench`` rewrites its cache-flush buffer with (written once, here)."""
from ..language import arange, full, int32, program_id, store
from ..language.objects import constexpr
from .jit import jit


@jit
def fill_int32(buffer_ptr, n, value, BLOCK: constexpr):
    offs = program_id(0) * BLOCK + arange(0, BLOCK)
    store(buffer_ptr + offs, full((BLOCK,), value, int32), mask=offs < n)
